/* A host that changes its own environment and working directory between
 * calls, as a GUI may (it sets TURBOSPARK_HOME after its first call, or
 * chdir()s), driven one command per line from stdin so that the test can
 * change files on disk between two calls of the same process:
 *
 *   setenv NAME VALUE | unsetenv NAME | chdir DIR
 *   plan MODEL | drafter MODEL | info MODEL | store
 *
 * Each command answers one line: "ok" (setenv/unsetenv/chdir), or
 * "<fn> <status> <result JSON or last error>". */
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tsffi.h"

static void answer(const char *fn, int32_t status, char *out) {
    char err[8192];
    if (status == TSFFI_OK) {
        printf("%s %d %s\n", fn, (int)status, out);
    } else {
        tsffi_last_error(err, sizeof err);
        printf("%s %d %s\n", fn, (int)status, err);
    }
    tsffi_string_free(out);
}

int main(void) {
    char line[8192];
    while (fgets(line, sizeof line, stdin) != NULL) {
        char *arg, *value;
        char *out = NULL;
        int32_t status;
        line[strcspn(line, "\n")] = '\0';
        arg = strchr(line, ' ');
        if (arg != NULL)
            *arg++ = '\0';
        else
            arg = line + strlen(line);
        if (strcmp(line, "setenv") == 0) {
            value = strchr(arg, ' ');
            if (value == NULL)
                return 2;
            *value++ = '\0';
            printf(setenv(arg, value, 1) == 0 ? "ok\n" : "setenv failed\n");
        } else if (strcmp(line, "unsetenv") == 0) {
            printf(unsetenv(arg) == 0 ? "ok\n" : "unsetenv failed\n");
        } else if (strcmp(line, "chdir") == 0) {
            printf(chdir(arg) == 0 ? "ok\n" : "chdir failed\n");
        } else if (strcmp(line, "plan") == 0) {
            status = tsffi_speculation_plan(arg, "{}", &out);
            answer("plan", status, out);
        } else if (strcmp(line, "drafter") == 0) {
            status = tsffi_resolve_drafter(arg, NULL, &out);
            answer("drafter", status, out);
        } else if (strcmp(line, "info") == 0) {
            status = tsffi_install_info_json(arg, &out);
            answer("info", status, out);
        } else if (strcmp(line, "store") == 0) {
            status = tsffi_store_json(&out);
            answer("store", status, out);
        } else {
            printf("unknown command %s\n", line);
        }
        fflush(stdout);
    }
    return 0;
}
