/* The library installs no signal handlers: the host's SIGINT handler (and
 * every other disposition, and the signal mask) are the same after the calls
 * that start the embedded runtime as before them.
 *
 * Run: signals MODEL_DIR
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tsffi.h"

#define LAST_SIGNAL 31

static volatile sig_atomic_t got_sigint = 0;

static void on_sigint(int sig) {
    (void)sig;
    got_sigint = 1;
}

int main(int argc, char **argv) {
    struct sigaction mine, before[LAST_SIGNAL + 1], after;
    sigset_t mask_before, mask_after;
    char *out = NULL;
    int sig, changed = 0;
    int32_t s1, s2, s3;

    if (argc != 2) {
        printf("usage: signals MODEL_DIR\n");
        return 2;
    }
    memset(&mine, 0, sizeof mine);
    mine.sa_handler = on_sigint;
    sigemptyset(&mine.sa_mask);
    mine.sa_flags = 0;
    if (sigaction(SIGINT, &mine, NULL) != 0) {
        printf("sigaction failed\n");
        return 1;
    }
    for (sig = 1; sig <= LAST_SIGNAL; sig++)
        sigaction(sig, NULL, &before[sig]);
    sigprocmask(SIG_BLOCK, NULL, &mask_before);

    /* The first call starts the runtime. */
    s1 = tsffi_build_info_json(&out);
    tsffi_string_free(out);
    out = NULL;
    s2 = tsffi_speculation_plan(argv[1], "{\"speculation\": 2}", &out);
    tsffi_string_free(out);
    out = NULL;
    s3 = tsffi_resolve_speculation("{\"speculativeDrafter\": \"dflash\", \"tsffi\": {\"temperature\": 0.7}, \"speculation\": 2}", &out);
    printf("calls %d %d %d\n", (int)s1, (int)s2, (int)s3);

    sigaction(SIGINT, NULL, &after);
    printf("sigint handler is the host's: %s\n", after.sa_handler == on_sigint ? "yes" : "no");
    for (sig = 1; sig <= LAST_SIGNAL; sig++) {
        sigaction(sig, NULL, &after);
        if (after.sa_handler != before[sig].sa_handler ||
            after.sa_flags != before[sig].sa_flags) {
            printf("signal %d disposition changed\n", sig);
            changed = 1;
        }
    }
    printf("dispositions unchanged: %s\n", changed ? "no" : "yes");
    sigprocmask(SIG_BLOCK, NULL, &mask_after);
    changed = 0;
    for (sig = 1; sig <= LAST_SIGNAL; sig++)
        if (sigismember(&mask_before, sig) != sigismember(&mask_after, sig)) {
            printf("signal %d mask changed\n", sig);
            changed = 1;
        }
    printf("signal mask unchanged: %s\n", changed ? "no" : "yes");
    raise(SIGINT);
    printf("sigint reached the host's handler: %s\n", got_sigint ? "yes" : "no");
    printf("done\n");
    return 0;
}
