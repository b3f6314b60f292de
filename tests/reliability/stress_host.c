/* Many threads, many mixed calls: every answer must be the single-threaded
 * one, and every thread's last error its own.
 *
 * Build: cc ... stress_host.c -ltsffi -lpthread
 * Run:   stress_host SCRIPT THREADS CALLS_PER_THREAD
 *
 * The main thread first makes every call of SCRIPT once, alone, and keeps
 * (status, result, last error) as the expected answer; it prints them as
 *   S  ID  STATUS  OUT  ERR
 * Then THREADS threads each make CALLS_PER_THREAD calls, choosing the script
 * line by a per-thread pseudo-random sequence, and compare everything. Per
 * thread it prints
 *   T  I  calls=N  mismatches=M  foreign=F
 * where "foreign" counts last errors that are some OTHER line's expected
 * message (another thread's message showing through), and up to 3 records
 *   M  I  ID  what  got
 * for the first mismatches. Then DONE.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "rel_common.c"

struct expected {
    int32_t status;
    char *out; /* NULL when the call returned no result */
    char *err;
};

static struct call *calls;
static struct expected *expect;
static long ncalls;
static long per_thread;

struct worker {
    int index;
    long done, mismatches, foreign;
    char report[3][512];
    int nreport;
};

static char garbage_byte;

static void note(struct worker *w, const struct call *c, const char *what, const char *got) {
    if (w->nreport < 3) {
        snprintf(w->report[w->nreport], sizeof w->report[0], "%s\t%s\t%.300s", c->id, what,
                 got != NULL ? got : "(null)");
        w->nreport++;
    }
}

static void *worker_main(void *arg) {
    struct worker *w = (struct worker *)arg;
    uint64_t state = 0x9E3779B97F4A7C15ull * (uint64_t)(w->index + 1);
    long k;
    for (k = 0; k < per_thread; k++) {
        long j, m;
        const struct call *c;
        const struct expected *e;
        int32_t status = -1;
        char *out = NULL, *err;
        int bad = 0;
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        j = (long)(state % (uint64_t)ncalls);
        c = &calls[j];
        e = &expect[j];
        run_call(c, NULL, &garbage_byte, &status, &out);
        err = read_last_error(NULL);
        if (status != e->status) {
            char buf[32];
            sprintf(buf, "%d", (int)status);
            note(w, c, "status", buf);
            bad = 1;
        }
        if (out == &garbage_byte)
            out = NULL;
        if ((out == NULL) != (e->out == NULL) ||
            (out != NULL && strcmp(out, e->out) != 0)) {
            note(w, c, "out", out);
            bad = 1;
        }
        if (err == NULL || strcmp(err, e->err) != 0) {
            note(w, c, "err", err);
            bad = 1;
            for (m = 0; err != NULL && m < ncalls; m++)
                if (m != j && expect[m].err[0] != '\0' && strcmp(err, expect[m].err) == 0) {
                    w->foreign++;
                    break;
                }
        }
        w->mismatches += bad;
        api.string_free(out);
        free(err);
        w->done++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    struct worker *workers;
    pthread_t *threads;
    long i;
    int t, nthreads;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 4) {
        printf("FATAL\tusage: stress_host SCRIPT THREADS CALLS_PER_THREAD\n");
        return 2;
    }
    load_api(NULL);
    ncalls = load_script(argv[1], &calls);
    nthreads = atoi(argv[2]);
    per_thread = atol(argv[3]);
    if (ncalls <= 0 || nthreads <= 0 || per_thread < 0)
        return 2;
    expect = (struct expected *)calloc((size_t)ncalls, sizeof *expect);
    for (i = 0; i < ncalls; i++) {
        char *out = NULL;
        if (calls[i].a.kind == ARG_PREV || calls[i].b.kind == ARG_PREV ||
            run_call(&calls[i], NULL, &garbage_byte, &expect[i].status, &out) != 0) {
            printf("FATAL\tline %ld: not a plain call\n", i + 1);
            return 2;
        }
        if (out == &garbage_byte)
            out = NULL;
        expect[i].err = read_last_error(NULL);
        expect[i].out = out != NULL ? dup_str(out) : NULL;
        api.string_free(out);
        printf("S\t%s\t%d\t", calls[i].id, (int)expect[i].status);
        if (expect[i].out == NULL)
            printf("-");
        else {
            printf("=");
            print_escaped(stdout, expect[i].out);
        }
        printf("\t");
        print_escaped(stdout, expect[i].err);
        printf("\n");
    }
    workers = (struct worker *)calloc((size_t)nthreads, sizeof *workers);
    threads = (pthread_t *)calloc((size_t)nthreads, sizeof *threads);
    for (t = 0; t < nthreads; t++) {
        workers[t].index = t;
        if (pthread_create(&threads[t], NULL, worker_main, &workers[t]) != 0) {
            printf("FATAL\tpthread_create failed\n");
            return 1;
        }
    }
    for (t = 0; t < nthreads; t++)
        pthread_join(threads[t], NULL);
    for (t = 0; t < nthreads; t++) {
        int r;
        printf("T\t%d\tcalls=%ld\tmismatches=%ld\tforeign=%ld\n", t, workers[t].done,
               workers[t].mismatches, workers[t].foreign);
        for (r = 0; r < workers[t].nreport; r++) {
            printf("M\t%d\t", t);
            print_escaped(stdout, workers[t].report[r]);
            printf("\n");
        }
    }
    printf("DONE\n");
    return 0;
}
