/* The main job, as a GUI would do it: for each install, pass the same JSON
 * options the engine gets and read back the drafter, the draft policies and
 * whether speculation will run -- and if not, the reason or note, verbatim.
 *
 * Build: cc -std=c99 plan_host.c $(turbospark-ffi config --cflags --libs)
 * Use:   ./plan_host OPTIONS_JSON MODEL_DIR...
 */
#include <stdio.h>
#include <stdlib.h>

#include "tsffi.h"

static void print_last_error(const char *what, int32_t status) {
    size_t len = tsffi_last_error(NULL, 0);
    char *msg = malloc(len + 1);
    if (msg == NULL)
        return;
    tsffi_last_error(msg, len + 1);
    printf("  %s: status %d: %s\n", what, (int)status, msg);
    free(msg);
}

int main(int argc, char **argv) {
    int i;
    if (argc < 3) {
        fprintf(stderr, "usage: %s OPTIONS_JSON MODEL_DIR...\n", argv[0]);
        return 2;
    }
    if (tsffi_abi_version() != TSFFI_ABI_VERSION) {
        fprintf(stderr, "header ABI %d, library ABI %u\n", TSFFI_ABI_VERSION, tsffi_abi_version());
        return 1;
    }
    printf("options %s\n", argv[1]);
    for (i = 2; i < argc; i++) {
        char *plan = NULL;
        int32_t status = tsffi_speculation_plan(argv[i], argv[1], &plan);
        printf("%s\n", argv[i]);
        if (status == TSFFI_OK)
            printf("  plan: %s\n", plan);
        else
            print_last_error(status == TSFFI_ERR_REFUSED ? "refused" : "error", status);
        tsffi_string_free(plan);
    }
    return 0;
}
