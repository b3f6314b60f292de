/* Memory over many calls: resident set size (from /proc/self/statm) and open
 * file descriptors at checkpoints, while the host cycles through a call
 * script (installs, good answers, errors) and regularly creates a thread that
 * makes calls of its own (so its last-error buffer and its Python thread
 * state exist) and joins it.
 *
 * Build: cc ... memory_host.c -ltsffi -lpthread
 * Run:   memory_host [-k] SCRIPT TOTAL_CALLS THREAD_EVERY CHECKPOINT...
 *        -k: keep every result (never call tsffi_string_free): a leak made on
 *        purpose, the positive control of the leak check.
 * Prints  C  CALLS  STATUS_COUNTS  (once, after the first pass: per-status
 *         counts, proving the script mixes successes and failures)
 *         P  CALLS  RSS_BYTES  OPEN_FDS     at each checkpoint
 *         DONE
 * Without -k every result is released with tsffi_string_free; every thread is
 * joined.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pthread.h>
#include <unistd.h>

#include "rel_common.c"
#include "process_stats.h"

static struct call *calls;
static long ncalls;
static char garbage_byte;
static long status_counts[16];
static int keep_results = 0;

static void call_once(long j, int count) {
    int32_t status = -1;
    char *out = NULL, *err;
    run_call(&calls[j % ncalls], NULL, &garbage_byte, &status, &out);
    if (out != &garbage_byte && !keep_results)
        api.string_free(out);
    err = read_last_error(NULL);
    free(err);
    if (count && status >= 0 && status < 16)
        status_counts[status]++;
}

struct job {
    long first;
};

static void *thread_main(void *arg) {
    struct job *job = (struct job *)arg;
    long k;
    for (k = 0; k < 4; k++)
        call_once(job->first + k, 0);
    return NULL;
}

int main(int argc, char **argv) {
    long total, every, i, next_checkpoint;
    int argi = 1, k;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1 && strcmp(argv[1], "-k") == 0) {
        keep_results = 1;
        argi++;
    }
    if (argc - argi < 4) {
        printf("FATAL\tusage: memory_host [-k] SCRIPT TOTAL_CALLS THREAD_EVERY CHECKPOINT...\n");
        return 2;
    }
    load_api(NULL);
    ncalls = load_script(argv[argi], &calls);
    total = atol(argv[argi + 1]);
    every = atol(argv[argi + 2]);
    argi += 3;
    if (ncalls <= 0)
        return 2;
    for (i = 0; i < ncalls; i++)
        if (calls[i].a.kind == ARG_PREV || calls[i].b.kind == ARG_PREV) {
            printf("FATAL\tline %ld: not a plain call\n", i + 1);
            return 2;
        }
    next_checkpoint = atol(argv[argi]);
    for (i = 1; i <= total; i++) {
        call_once(i - 1, i <= ncalls);
        if (i == ncalls) {
            printf("C\t%ld", i);
            for (k = 0; k < 16; k++)
                if (status_counts[k])
                    printf("\t%d=%ld", k, status_counts[k]);
            printf("\n");
        }
        if (every > 0 && i % every == 0) {
            pthread_t t;
            struct job job;
            job.first = i;
            if (pthread_create(&t, NULL, thread_main, &job) != 0) {
                printf("FATAL\tpthread_create failed\n");
                return 1;
            }
            pthread_join(t, NULL);
        }
        if (i == next_checkpoint) {
            printf("P\t%ld\t%ld\t%d\n", i, resident_bytes(), open_fds());
            argi++;
            next_checkpoint = argi < argc ? atol(argv[argi]) : -1;
        }
    }
    printf("DONE\n");
    return 0;
}
