/* The reliability suite's scripted C host: runs a call script (format in
 * rel_common.c) through the C ABI, one record per call, each followed by a
 * canary call that proves the library still answers.
 *
 * Build linked:  cc ... abi_host.c -ltsffi
 * Build dlopen:  cc ... -DTSFFI_HOST_DLOPEN abi_host.c -ldl   (RTLD_LOCAL)
 * Run:           abi_host [-n] SCRIPT [LIBRARY_PATH]        (-n: no canary)
 *
 * Extra ops (A as x<hex> text):
 *   chdir_unreadable A   mkdir A, chdir into it, chmod it 000 (prints whether
 *                        the directory can still be listed)
 *   chdir_removed A      mkdir A, chdir into it, rmdir it (prints whether
 *                        getcwd fails)
 *   null_probe           the functions that take no status: tsffi_last_error
 *                        with NULL / cap 0, tsffi_string_free(NULL), tsffi_abi_version
 *
 * Records (fields separated by TAB, text escaped):
 *   R  ID  STATUS  OUT  ERR  CANARY_STATUS  CANARY_OUT
 *     OUT is "-" (NULL), "!" (left as the garbage pointer the host set) or
 *     "=" followed by the text. ERR is the last error right after the call.
 *   X  ID  TEXT     an extra op's result
 *   SIG unchanged | changed N...    every disposition 1..31 and the mask
 *   SIGINT host | replaced
 *   DONE
 * The host primes the last error (tsffi_build_info_json(NULL)) before each
 * call, so a call that succeeds must have cleared it.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "rel_common.c"

#define LAST_SIGNAL 31
#define CANARY_OPTIONS "{\"speculation\": 3}"

static volatile sig_atomic_t got_sigint = 0;
static void on_sigint(int sig) {
    (void)sig;
    got_sigint = 1;
}

static char garbage_byte;

static void extra_op(const struct call *c) {
    const char *a = c->a.kind == ARG_BYTES ? c->a.bytes : NULL;
    printf("X\t%s\t", c->id);
    if (strcmp(c->op, "chdir_unreadable") == 0 && a != NULL) {
        int ok = mkdir(a, 0700) == 0 && chdir(a) == 0 && chmod(".", 0) == 0;
        DIR *d = opendir(".");
        /* listable=0: this process really cannot read its working directory */
        printf("%s listable=%d", ok ? "ok" : strerror(errno), d != NULL);
        if (d != NULL)
            closedir(d);
    } else if (strcmp(c->op, "chdir_removed") == 0 && a != NULL) {
        char cwd[4096];
        int ok = mkdir(a, 0700) == 0 && chdir(a) == 0 && rmdir(a) == 0;
        printf("%s cwd_gone=%d", ok ? "ok" : strerror(errno), getcwd(cwd, sizeof cwd) == NULL);
    } else if (strcmp(c->op, "null_probe") == 0) {
        char buf[8];
        size_t len0, len1, len2, len3;
        (void)api.build_info_json(NULL); /* sets a known last error */
        len0 = api.last_error(NULL, 0);
        len1 = api.last_error(NULL, 100);
        memset(buf, 'Z', sizeof buf);
        len2 = api.last_error(buf, 0);
        api.string_free(NULL);
        len3 = api.last_error(NULL, 0);
        printf("len=%lu nullcap=%lu cap0=%lu untouched=%d after_free_null=%lu abi=%u",
               (unsigned long)len0, (unsigned long)len1, (unsigned long)len2,
               buf[0] == 'Z' && buf[7] == 'Z', (unsigned long)len3,
               (unsigned)api.abi_version());
    } else {
        printf("UNKNOWN-OP %s", c->op);
    }
    printf("\n");
}

int main(int argc, char **argv) {
    struct sigaction mine, before[LAST_SIGNAL + 1], after;
    sigset_t mask_before, mask_after;
    struct call *calls = NULL;
    char *previous = NULL;
    long n, i;
    int argi = 1, canary = 1, sig, changed = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argi < argc && strcmp(argv[argi], "-n") == 0) {
        canary = 0;
        argi++;
    }
    if (argi >= argc) {
        printf("FATAL\tusage: abi_host [-n] SCRIPT [LIBRARY_PATH]\n");
        return 2;
    }
    memset(&mine, 0, sizeof mine);
    mine.sa_handler = on_sigint;
    sigemptyset(&mine.sa_mask);
    if (sigaction(SIGINT, &mine, NULL) != 0)
        return 1;
    for (sig = 1; sig <= LAST_SIGNAL; sig++)
        sigaction(sig, NULL, &before[sig]);
    sigprocmask(SIG_BLOCK, NULL, &mask_before);

    if (load_api(argi + 1 < argc ? argv[argi + 1] : NULL) != 0)
        return 1;
    n = load_script(argv[argi], &calls);
    if (n < 0)
        return 1;
    printf("ABI\t%u\n", (unsigned)api.abi_version());

    for (i = 0; i < n; i++) {
        const struct call *c = &calls[i];
        int32_t status = -1, cstatus = -1;
        char *out = NULL, *cout = NULL, *err;
        if (api.build_info_json(NULL) != TSFFI_ERR_INVALID_ARGUMENT || api.last_error(NULL, 0) == 0) {
            printf("FATAL\tcould not prime the last error before %s\n", c->id);
            return 1;
        }
        if (run_call(c, previous, &garbage_byte, &status, &out) != 0) {
            extra_op(c);
            continue;
        }
        err = read_last_error(NULL);
        printf("R\t%s\t%d\t", c->id, (int)status);
        if (out == &garbage_byte)
            printf("!");
        else if (out == NULL)
            printf("-");
        else {
            printf("=");
            print_escaped(stdout, out);
        }
        printf("\t");
        print_escaped(stdout, err != NULL ? err : "OOM");
        free(err);
        if (canary) {
            cstatus = api.resolve_speculation(CANARY_OPTIONS, &cout);
            printf("\t%d\t", (int)cstatus);
            if (cout != NULL)
                print_escaped(stdout, cout);
            else
                printf("-");
            api.string_free(cout);
        } else {
            printf("\t-\t-");
        }
        printf("\n");
        if (out != &garbage_byte && out != NULL) {
            if (status == TSFFI_OK) {
                free(previous);
                previous = dup_str(out);
            }
            api.string_free(out);
        }
    }

    for (sig = 1; sig <= LAST_SIGNAL; sig++) {
        sigaction(sig, NULL, &after);
        if (after.sa_handler != before[sig].sa_handler || after.sa_flags != before[sig].sa_flags) {
            if (!changed)
                printf("SIG\tchanged");
            printf(" %d", sig);
            changed = 1;
        }
    }
    sigprocmask(SIG_BLOCK, NULL, &mask_after);
    for (sig = 1; sig <= LAST_SIGNAL; sig++)
        if (sigismember(&mask_before, sig) != sigismember(&mask_after, sig)) {
            if (!changed)
                printf("SIG\tchanged");
            printf(" mask%d", sig);
            changed = 1;
        }
    printf(changed ? "\n" : "SIG\tunchanged\n");
    raise(SIGINT);
    printf("SIGINT\t%s\n", got_sigint ? "host" : "replaced");
    free(previous);
    printf("DONE\n");
    return 0;
}
