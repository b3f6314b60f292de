/* Benchmark host: calls libtsffi through its C ABI, as a GUI would,
 * and times the calls with CLOCK_MONOTONIC. Built -O2 by bench/run.py against
 * include/tsffi.h and the in-place library.
 *
 *   tsffi_host warm   DIR N [OPTIONS]          N warm calls after a warm-up;
 *                                           prints "<ns per call>"
 *   tsffi_host fresh  WARMDIR DIR... [-o OPTS] warms the runtime on WARMDIR, then
 *                                           plans each DIR once (never seen
 *                                           before by this process); prints
 *                                           one "<ns>" line per DIR
 *   tsffi_host threads DIR T MILLIS [OPTIONS]  T host threads call warm plans at
 *                                           once for MILLIS ms; prints
 *                                           "<total calls> <elapsed ns>"
 *   tsffi_host show   DIR [OPTIONS]            prints the plan JSON (sanity check)
 *   tsffi_host warm-choices DIR N [OPTIONS]    as warm, with tsffi_speculation_choices
 *   tsffi_host fresh-choices WARMDIR DIR... [-o OPTS]
 *                                           as fresh, with tables: warmed with
 *                                           tables on WARMDIR, then each DIR's
 *                                           first call a choices table
 *
 * Every call's status is checked: a benchmark of failing calls is worthless.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsffi.h"

static const char *DEFAULT_OPTIONS = "{\"speculativeDrafter\":\"auto\",\"speculation\":\"auto\"}";

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void die_status(const char *what, const char *dir, int32_t status) {
    char msg[1024];
    tsffi_last_error(msg, sizeof msg);
    fprintf(stderr, "tsffi_host: %s %s: status %d: %s\n", what, dir, (int)status, msg);
    exit(1);
}

static void plan_once(const char *dir, const char *opts) {
    char *out = NULL;
    int32_t status = tsffi_speculation_plan(dir, opts, &out);
    if (status != TSFFI_OK)
        die_status("tsffi_speculation_plan", dir, status);
    tsffi_string_free(out);
}

static void choices_once(const char *dir, const char *opts) {
    char *out = NULL;
    int32_t status = tsffi_speculation_choices(dir, opts, &out);
    if (status != TSFFI_OK)
        die_status("tsffi_speculation_choices", dir, status);
    tsffi_string_free(out);
}

static int mode_warm(const char *dir, long n, const char *opts,
                     void (*call)(const char *, const char *)) {
    long i;
    uint64_t a, b;
    for (i = 0; i < 200; i++)
        call(dir, opts);
    a = now_ns();
    for (i = 0; i < n; i++)
        call(dir, opts);
    b = now_ns();
    printf("%.1f\n", (double)(b - a) / (double)n);
    return 0;
}

static int mode_fresh(int argc, char **argv, void (*call)(const char *, const char *)) {
    const char *opts = DEFAULT_OPTIONS;
    int i, last = argc;
    if (argc >= 2 && strcmp(argv[argc - 2], "-o") == 0) {
        opts = argv[argc - 1];
        last = argc - 2;
    }
    /* Warmed with the call it then times, as a host that has made it before. */
    for (i = 0; i < 50; i++)
        call(argv[0], opts);
    for (i = 1; i < last; i++) {
        uint64_t a = now_ns();
        call(argv[i], opts);
        printf("%llu\n", (unsigned long long)(now_ns() - a));
    }
    return 0;
}

struct worker {
    pthread_t tid;
    const char *dir;
    const char *opts;
    long calls;
};

static pthread_barrier_t start_line;
static volatile int stop_flag = 0;

static void *worker_main(void *p) {
    struct worker *w = (struct worker *)p;
    long calls = 0;
    plan_once(w->dir, w->opts); /* this thread's own first call */
    pthread_barrier_wait(&start_line);
    while (!__atomic_load_n(&stop_flag, __ATOMIC_RELAXED)) {
        plan_once(w->dir, w->opts);
        calls++;
    }
    w->calls = calls;
    return NULL;
}

static int mode_threads(const char *dir, int nthreads, long millis, const char *opts) {
    struct worker *w = calloc((size_t)nthreads, sizeof *w);
    struct timespec pause;
    uint64_t a, b;
    long total = 0;
    int i;
    for (i = 0; i < 200; i++)
        plan_once(dir, opts);
    pthread_barrier_init(&start_line, NULL, (unsigned)nthreads + 1);
    for (i = 0; i < nthreads; i++) {
        w[i].dir = dir;
        w[i].opts = opts;
        if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0) {
            fprintf(stderr, "tsffi_host: pthread_create failed\n");
            return 1;
        }
    }
    pthread_barrier_wait(&start_line);
    a = now_ns();
    pause.tv_sec = millis / 1000;
    pause.tv_nsec = (millis % 1000) * 1000000L;
    nanosleep(&pause, NULL);
    __atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
    for (i = 0; i < nthreads; i++) {
        pthread_join(w[i].tid, NULL);
        total += w[i].calls;
    }
    b = now_ns();
    printf("%ld %llu\n", total, (unsigned long long)(b - a));
    free(w);
    return 0;
}

static int mode_show(const char *dir, const char *opts) {
    char *out = NULL;
    int32_t status = tsffi_speculation_plan(dir, opts, &out);
    if (status != TSFFI_OK)
        die_status("tsffi_speculation_plan", dir, status);
    puts(out);
    tsffi_string_free(out);
    return 0;
}

int main(int argc, char **argv) {
    if (tsffi_abi_version() != TSFFI_ABI_VERSION) {
        fprintf(stderr, "tsffi_host: header ABI %d, library ABI %u\n", TSFFI_ABI_VERSION,
                tsffi_abi_version());
        return 1;
    }
    if (argc >= 4 && strcmp(argv[1], "warm") == 0)
        return mode_warm(argv[2], atol(argv[3]), argc >= 5 ? argv[4] : DEFAULT_OPTIONS,
                         plan_once);
    if (argc >= 4 && strcmp(argv[1], "warm-choices") == 0)
        return mode_warm(argv[2], atol(argv[3]), argc >= 5 ? argv[4] : DEFAULT_OPTIONS,
                         choices_once);
    if (argc >= 4 && strcmp(argv[1], "fresh") == 0)
        return mode_fresh(argc - 2, argv + 2, plan_once);
    if (argc >= 4 && strcmp(argv[1], "fresh-choices") == 0)
        return mode_fresh(argc - 2, argv + 2, choices_once);
    if (argc >= 5 && strcmp(argv[1], "threads") == 0)
        return mode_threads(argv[2], atoi(argv[3]), atol(argv[4]),
                            argc >= 6 ? argv[5] : DEFAULT_OPTIONS);
    if (argc >= 3 && strcmp(argv[1], "show") == 0)
        return mode_show(argv[2], argc >= 4 ? argv[3] : DEFAULT_OPTIONS);
    fprintf(stderr,
            "usage: tsffi_host warm DIR N [OPTS] | fresh WARMDIR DIR... [-o OPTS] |\n"
            "       threads DIR T MILLIS [OPTS] | show DIR [OPTS] |\n"
            "       warm-choices DIR N [OPTS] | fresh-choices WARMDIR DIR... [-o OPTS]\n");
    return 2;
}
