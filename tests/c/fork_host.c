/* fork() around the library, as a GUI does it (tests/test_coexistence.py).
 *
 *   fork_host busy   MODEL_DIR   4 threads plan without pause while the main
 *                                thread forks 20 children, one after another
 *   fork_host before MODEL_DIR   fork before any call
 *   fork_host single MODEL_DIR   one call, then a fork with no other thread
 *
 * Each child makes one call under alarm(10) and exits 0 when it got the
 * parent's answer (the same plan), 1 when it got TSFFI_ERR_RUNTIME with the fork message,
 * 2 for anything else; a hang dies of SIGALRM. The parent prints one line
 * per child ("child N exit=E" or "child N signal=S") and, in busy mode, what
 * its own threads saw ("threads calls=N wrong=W").
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tsffi.h"

#define OPTIONS "{\"speculativeDrafter\": \"dflash\", \"speculation\": 2}"

static const char *model_dir;
static char *expected; /* the parent's answer */
static size_t expected_prefix; /* up to "ignoredKeys", which the n<id> keys change */
static volatile int stop;
static long calls[4], wrong[4];

static int answer_is_expected(void) {
    char *out = NULL;
    int32_t status = tsffi_speculation_plan(model_dir, OPTIONS, &out);
    int same = status == TSFFI_OK && out != NULL && strcmp(out, expected) == 0;
    tsffi_string_free(out);
    return same;
}

static void child(void) {
    char *out = NULL;
    char msg[1024];
    int32_t status;
    alarm(10);
    /* Options no call has used: the answer needs Python (the GIL), which a
     * thread of the parent may have held at the fork. */
    status = tsffi_speculation_plan(
        model_dir, "{\"speculativeDrafter\": \"dflash\", \"speculation\": 2, \"child\": 1}", &out);
    tsffi_last_error(msg, sizeof msg);
    if (status == TSFFI_OK && out != NULL && strncmp(out, expected, expected_prefix) == 0)
        _exit(0);
    if (status == TSFFI_ERR_RUNTIME && out == NULL &&
        strstr(msg, "forked while another thread was inside libtsffi") != NULL)
        _exit(1);
    _exit(2);
}

static void report(int n, pid_t pid) {
    int ws = 0;
    if (waitpid(pid, &ws, 0) != pid)
        printf("child %d waitpid failed\n", n);
    else if (WIFEXITED(ws))
        printf("child %d exit=%d\n", n, WEXITSTATUS(ws));
    else
        printf("child %d signal=%d\n", n, WIFSIGNALED(ws) ? WTERMSIG(ws) : -1);
}

static void *planner(void *arg) {
    long id = (long)arg;
    char options[128];
    long i = 0;
    while (!stop) {
        char *out = NULL;
        /* Every other call with options never seen before: it reaches Python
         * (the warm path in C would answer the same options without it). */
        if (i % 2 == 0)
            snprintf(options, sizeof options,
                     "{\"speculativeDrafter\": \"dflash\", \"speculation\": 2, \"n%ld\": %ld}",
                     id, i);
        else
            snprintf(options, sizeof options, "%s", OPTIONS);
        if (tsffi_speculation_plan(model_dir, options, &out) != TSFFI_OK || out == NULL ||
            strncmp(out, expected, expected_prefix) != 0)
            wrong[id]++;
        tsffi_string_free(out);
        calls[id]++;
        i++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    char *out = NULL;
    pid_t pid;
    int n;
    if (argc != 3) {
        printf("usage: fork_host busy|before|single MODEL_DIR\n");
        return 2;
    }
    model_dir = argv[2];
    if (strcmp(argv[1], "before") == 0) {
        pid = fork();
        if (pid == 0) {
            /* The child computes its own reference: nothing was called yet. */
            if (tsffi_speculation_plan(model_dir, OPTIONS, &expected) != TSFFI_OK)
                _exit(2);
            _exit(answer_is_expected() ? 0 : 2);
        }
        report(0, pid);
        return 0;
    }
    if (tsffi_speculation_plan(model_dir, OPTIONS, &out) != TSFFI_OK) {
        printf("parent: first call failed\n");
        return 1;
    }
    expected = out;
    expected_prefix = strstr(expected, "\"ignoredKeys\"") != NULL
                          ? (size_t)(strstr(expected, "\"ignoredKeys\"") - expected)
                          : strlen(expected);
    if (strcmp(argv[1], "single") == 0) {
        pid = fork();
        if (pid == 0)
            child();
        report(0, pid);
        printf("parent after fork same=%d\n", answer_is_expected());
        return 0;
    }
    {
        pthread_t threads[4];
        long t, total = 0, bad = 0;
        for (t = 0; t < 4; t++)
            pthread_create(&threads[t], NULL, planner, (void *)t);
        for (n = 0; n < 20; n++) {
            struct timespec pause = {0, 2000000};
            nanosleep(&pause, NULL);
            pid = fork();
            if (pid == 0)
                child();
            report(n, pid);
        }
        stop = 1;
        for (t = 0; t < 4; t++) {
            pthread_join(threads[t], NULL);
            total += calls[t];
            bad += wrong[t];
        }
        printf("threads calls=%ld wrong=%ld\n", total, bad);
        printf("parent after forks same=%d\n", answer_is_expected());
    }
    return 0;
}
