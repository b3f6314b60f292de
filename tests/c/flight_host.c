/* 8 threads make the first plan of the installs named on the command line at
 * the same moment (a barrier), after one build-info call has started the
 * runtime: tests/test_store.py counts how many times the library opened each
 * install's model_weights.bin (open_counter.c) -- one read per install, not
 * one per thread, is the single flight of snapshots.py.
 *
 * Run: flight_host DIR [DIR...]   (thread i plans DIR number i % count)
 * Prints "plan <status>" per thread, in thread order, then "maxrss <KiB>":
 * the process's peak resident set (getrusage), what the reads cost. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsffi.h"

#define THREADS 8

static char **dirs;
static int dir_count;
static pthread_barrier_t barrier;
static int32_t statuses[THREADS];

static long peak_rss_kib(void) {
    char line[256];
    long kib = -1;
    FILE *status = fopen("/proc/self/status", "r");
    if (status == NULL)
        return -1;
    while (fgets(line, sizeof line, status) != NULL)
        if (strncmp(line, "VmHWM:", 6) == 0)
            kib = atol(line + 6);
    fclose(status);
    return kib;
}

static void *run(void *arg) {
    int index = (int)(size_t)arg;
    char *out = NULL;
    pthread_barrier_wait(&barrier);
    statuses[index] = tsffi_speculation_plan(dirs[index % dir_count], "{}", &out);
    tsffi_string_free(out);
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t threads[THREADS];
    char *out = NULL;
    int i;
    if (argc < 2)
        return 2;
    dirs = argv + 1;
    dir_count = argc - 1;
    if (tsffi_build_info_json(&out) != TSFFI_OK)
        return 3;
    tsffi_string_free(out);
    pthread_barrier_init(&barrier, NULL, THREADS);
    for (i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, run, (void *)(size_t)i);
    for (i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    for (i = 0; i < THREADS; i++)
        printf("plan %d\n", (int)statuses[i]);
    printf("maxrss %ld\n", peak_rss_kib());
    return 0;
}
