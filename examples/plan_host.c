/* The main job, as a GUI would do it: for each install, pass the same JSON
 * options the engine gets and read back the drafter, the draft policies and
 * whether the session will draft -- and if not, the reason or note, verbatim
 * -- and the turn: whether a turn sent at "tsffi"'s temperature (absent: the
 * engine binding's 0.2) speculates, which only a turn at 0 does.
 *
 * The options are the very text the host gives the engine's open, read as
 * the open reads it (docs/c-api.md, "Options"): the engine's keys, plus the
 * preview's own inputs in the "tsffi" object the engine ignores, e.g.
 *   '{"speculation": 2, "maxContext": 8192, "tsffi": {"temperature": 0}}'
 * What the open refuses is refused with its status and message: 4 for what
 * its decoder refuses, 2 for what its mapping refuses (and for an install it
 * fails on, and a named block the install cannot serve), 1 for a bad "tsffi"
 * object.
 *
 * Build: cc -std=c99 plan_host.c $(turbospark-ffi config --cflags --libs)
 * Use:   ./plan_host OPTIONS_JSON MODEL_DIR...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The plan's "warnings" array, when it holds any: hints about keys the open
 * ignores (a likely typo, a key that moved into "tsffi"). The header fixes
 * the plan's key order, "warnings" right before "modelDir", and a string
 * inside it is JSON-escaped, so the text between the two is the array. */
static void print_warnings(const char *plan) {
    const char *start = strstr(plan, ",\"warnings\":");
    const char *end = start != NULL ? strstr(start, ",\"modelDir\":") : NULL;
    if (start == NULL || end == NULL)
        return;
    start += strlen(",\"warnings\":");
    if (end - start > 2)
        printf("  warnings: %.*s\n", (int)(end - start), start);
}

/* The plan's "turn" object: the header fixes it between "speculation" and
 * "ignoredKeys", and a string inside it is JSON-escaped, so the text between
 * the two keys is the object ({"temperature", "speculates", "reason"}). */
static void print_turn(const char *plan) {
    const char *start = strstr(plan, ",\"turn\":");
    const char *end = start != NULL ? strstr(start, ",\"ignoredKeys\":") : NULL;
    if (start == NULL || end == NULL)
        return;
    start += strlen(",\"turn\":");
    printf("  turn: %.*s\n", (int)(end - start), start);
}

static const char *failure_name(int32_t status) {
    switch (status) {
    case TSFFI_ERR_REFUSED:
        return "refused";
    case TSFFI_ERR_JSON:
        return "options the engine's decoder refuses";
    case TSFFI_ERR_INVALID_ARGUMENT:
        return "invalid argument";
    default:
        return "error";
    }
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
        if (status == TSFFI_OK) {
            printf("  plan: %s\n", plan);
            print_turn(plan);
            print_warnings(plan);
        } else {
            print_last_error(failure_name(status), status);
        }
        tsffi_string_free(plan);
    }
    return 0;
}
