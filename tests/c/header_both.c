/* A translation unit that compiles as C (c99) and as C++ (c++11), both with
 * -Wall -Wextra -Werror -pedantic: the header comes FIRST (it must bring its
 * own stdint.h/stddef.h), twice (the include guard), and every function is
 * called, so C++ linking proves the extern "C" block.
 */
#include "tsffi.h"
#include "tsffi.h"

#include <stdio.h>

int main(void) {
    char *out = NULL;
    char buf[16];
    int32_t status;
    size_t len;
    uint32_t abi = tsffi_abi_version();
#ifdef __cplusplus
    printf("language C++\n");
#else
    printf("language C\n");
#endif
    printf("abi %u header %d\n", (unsigned)abi, TSFFI_ABI_VERSION);
    status = tsffi_build_info_json(&out);
    printf("build_info %d %s\n", (int)status, out != NULL ? "result" : "NULL");
    tsffi_string_free(out);
    out = NULL;
    status = tsffi_resolve_speculation("{\"speculativeDrafter\": \"dflash\", \"tsffi\": {\"temperature\": 0.7}, \"speculation\": 2}", &out);
    len = tsffi_last_error(buf, sizeof buf);
    printf("resolve_speculation %d %s len>%d truncated \"%s\"\n", (int)status,
           out != NULL ? "result" : "NULL", (int)sizeof buf, len > sizeof buf ? buf : "?");
    status = tsffi_resolve_drafter("/nonexistent-install", NULL, &out);
    printf("resolve_drafter %d\n", (int)status);
    if (status == TSFFI_OK) {
        char *policies = NULL;
        status = tsffi_draft_policies(out, "{\"speculation\": 2}", &policies);
        printf("draft_policies %d %s\n", (int)status, policies != NULL ? policies : "NULL");
        tsffi_string_free(policies);
    }
    tsffi_string_free(out);
    out = NULL;
    status = tsffi_speculation_plan("/nonexistent-install", "{\"speculation\": \"off\"}", &out);
    printf("speculation_plan %d\n", (int)status);
    tsffi_string_free(out);
    out = NULL;
    status = tsffi_install_info_json("/nonexistent-install", &out);
    printf("install_info %d\n", (int)status);
    tsffi_string_free(out);
    tsffi_string_free(NULL);
    printf("codes %d %d %d %d %d %d\n", TSFFI_OK, TSFFI_ERR_INVALID_ARGUMENT, TSFFI_ERR_REFUSED,
           TSFFI_ERR_JSON, TSFFI_ERR_INTERNAL, TSFFI_ERR_RUNTIME);
    return 0;
}
