/* One program calling the engine's library and this one, as an app that
 * links both does (tests/test_coexistence.py links it -lturbospark_ffi
 * -ltsffi, in every search order):
 *
 *   both_libraries MODEL_DIR
 *
 * prints what the engine's ts_session_open and ts_abi_version answer, this
 * library's plan for MODEL_DIR as JSON, and the engine's last error again.
 */
#include <stdio.h>

#include <tsffi.h>
#include <turbospark.h>

int main(int argc, char **argv) {
    char message[256];
    char *plan = NULL;
    TsSession *session = NULL;
    int32_t status;
    if (argc != 2) {
        fprintf(stderr, "usage: both_libraries MODEL_DIR\n");
        return 2;
    }
    status = ts_session_open(argv[1], "{}", &session);
    ts_last_error(message, sizeof message);
    printf("engine open status=%d last_error=%s abi=%u\n", (int)status, message,
           (unsigned)ts_abi_version());
    status = tsffi_speculation_plan(argv[1], NULL, &plan);
    printf("preview status=%d abi=%u plan=%s\n", (int)status, (unsigned)tsffi_abi_version(),
           plan != NULL ? plan : "NULL");
    tsffi_string_free(plan);
    ts_last_error(message, sizeof message);
    printf("engine last_error=%s\n", message);
    return 0;
}
