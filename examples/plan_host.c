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

/* One member of the plan, printed as `label: value`: the header fixes the
 * plan's key order and a string inside a member is JSON-escaped, so the text
 * between ,"key": and the next member's ,"next": is the member's value. An
 * empty array (no warnings) says nothing and is not printed. */
static void print_member(const char *plan, const char *label, const char *key,
                         const char *next) {
    char open[32], close[32];
    const char *start, *end;
    snprintf(open, sizeof open, ",\"%s\":", key);
    snprintf(close, sizeof close, ",\"%s\":", next);
    start = strstr(plan, open);
    end = start != NULL ? strstr(start, close) : NULL;
    if (start == NULL || end == NULL)
        return;
    start += strlen(open);
    if (end - start == 2 && strncmp(start, "[]", 2) == 0)
        return;
    printf("  %s: %.*s\n", label, (int)(end - start), start);
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
            /* The turn: whether a turn at the host's temperature speculates. */
            print_member(plan, "turn", "turn", "source");
            /* Hints about keys the open ignores (a likely typo, a key that
             * moved into "tsffi"): nothing was refused. */
            print_member(plan, "warnings", "warnings", "modelDir");
        } else {
            print_last_error(failure_name(status), status);
        }
        tsffi_string_free(plan);
    }
    return 0;
}
