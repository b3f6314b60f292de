/* A host whose main thread setenv()s while a worker plans an alias (issue
 * 40, item 2):
 *
 *   setenv_race ALIAS CALLS
 *
 * The worker makes CALLS tsffi_speculation_plan(ALIAS) calls (an alias is
 * never answered by the C warm path: each call resolves the name). From its
 * first call's return on,
 * the main thread sets ever new variables -- each a new name, so glibc grows
 * (reallocates) the array of variables -- clears them all now and then, and
 * flips TURBOSPARK_HOME to a store that does not exist. Prints, once the worker is
 * done, each distinct "<status> <modelDir or last error>" with its count,
 * then the number of setenv() calls made. */
#define _DEFAULT_SOURCE /* clearenv */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsffi.h"

#define MAX_SEEN 8

static const char *alias;
static long calls;
static volatile int worker_done = 0;
static volatile int first_call_done = 0;
static char seen[MAX_SEEN][1100];
static long counts[MAX_SEEN];
static int distinct = 0;

static void count(const char *line) {
    int i;
    for (i = 0; i < distinct; i++)
        if (strcmp(seen[i], line) == 0)
            break;
    if (i == distinct) {
        if (distinct == MAX_SEEN)
            return;
        snprintf(seen[distinct++], sizeof seen[0], "%s", line);
    }
    counts[i]++;
}

static void *worker(void *unused) {
    char line[1100], message[1024];
    long k;
    (void)unused;
    for (k = 0; k < calls; k++) {
        if (k == 1)
            __atomic_store_n(&first_call_done, 1, __ATOMIC_SEQ_CST);
        char *out = NULL;
        int32_t status = tsffi_speculation_plan(alias, "{}", &out);
        if (status == TSFFI_OK) {
            const char *dir = strstr(out, "\"modelDir\":\"");
            const char *end = dir != NULL ? strchr(dir + 12, '"') : NULL;
            snprintf(line, sizeof line, "0 %.*s", end != NULL ? (int)(end - dir - 12) : 0,
                     end != NULL ? dir + 12 : "");
        } else {
            tsffi_last_error(message, sizeof message);
            snprintf(line, sizeof line, "%d %s", (int)status, message);
        }
        count(line);
        tsffi_string_free(out);
    }
    __atomic_store_n(&worker_done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t thread;
    char name[64];
    long sets = 0;
    int i;
    if (argc != 3)
        return 2;
    alias = argv[1];
    calls = atol(argv[2]);
    pthread_create(&thread, NULL, worker, NULL);
    /* Not during the first call: CPython's start, which it runs, walks the
     * environment to build os.environ (posixmodule's convertenviron), and a
     * setenv() racing THAT crashes in CPython's code, not the library's
     * (seen here). docs/c-api.md says so: change the environment before the
     * first call or after it returned. */
    while (!__atomic_load_n(&first_call_done, __ATOMIC_SEQ_CST))
        ;
    while (!__atomic_load_n(&worker_done, __ATOMIC_SEQ_CST)) {
        /* Every 64 names, the whole environment is cleared (glibc frees its
         * array) and grown afresh: a getenv() walking it then reads freed
         * memory. */
        if (sets % 64 == 63)
            clearenv();
        snprintf(name, sizeof name, "TSFFI_RACE_%ld", sets);
        setenv(name, "x", 1);
        setenv("TURBOSPARK_HOME", sets % 2 ? "/nonexistent-store" : "/also-nonexistent", 1);
        sets++;
    }
    pthread_join(thread, NULL);
    for (i = 0; i < distinct; i++)
        printf("%ld x %s\n", counts[i], seen[i]);
    printf("setenv calls: %s\n", sets > 0 ? "some" : "none");
    return 0;
}
