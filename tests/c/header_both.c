/* A translation unit that compiles as C (c99) and as C++ (c++11), both with
 * -Wall -Wextra -Werror -pedantic: the header comes FIRST (it must bring its
 * own stdint.h/stddef.h), twice (the include guard), and every function is
 * called, so C++ linking proves the extern "C" block.
 */
#include "turbospark_ffi.h"
#include "turbospark_ffi.h"

#include <stdio.h>

int main(void) {
    char *out = NULL;
    char buf[16];
    int32_t status;
    size_t len;
    uint32_t abi = ts_abi_version();
#ifdef __cplusplus
    printf("language C++\n");
#else
    printf("language C\n");
#endif
    printf("abi %u header %d\n", (unsigned)abi, TS_ABI_VERSION);
    status = ts_build_info_json(&out);
    printf("build_info %d %s\n", (int)status, out != NULL ? "result" : "NULL");
    ts_string_free(out);
    out = NULL;
    status = ts_resolve_speculation("{\"speculation\": 16}", &out);
    len = ts_last_error(buf, sizeof buf);
    printf("resolve_speculation %d %s len>%d truncated \"%s\"\n", (int)status,
           out != NULL ? "result" : "NULL", (int)sizeof buf, len > sizeof buf ? buf : "?");
    status = ts_resolve_drafter("/nonexistent-install", NULL, &out);
    printf("resolve_drafter %d\n", (int)status);
    if (status == TS_OK) {
        char *policies = NULL;
        status = ts_draft_policies(out, "{\"speculation\": 2}", &policies);
        printf("draft_policies %d %s\n", (int)status, policies != NULL ? policies : "NULL");
        ts_string_free(policies);
    }
    ts_string_free(out);
    out = NULL;
    status = ts_speculation_plan("/nonexistent-install", "{\"speculation\": \"off\"}", &out);
    printf("speculation_plan %d\n", (int)status);
    ts_string_free(out);
    out = NULL;
    status = ts_install_info_json("/nonexistent-install", &out);
    printf("install_info %d\n", (int)status);
    ts_string_free(out);
    ts_string_free(NULL);
    printf("codes %d %d %d %d %d %d\n", TS_OK, TS_ERR_INVALID_ARGUMENT, TS_ERR_REFUSED,
           TS_ERR_JSON, TS_ERR_INTERNAL, TS_ERR_RUNTIME);
    return 0;
}
