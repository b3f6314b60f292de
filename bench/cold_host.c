/* Cold start: one process, exec to first answer. Built twice by bench/run.py
 * from this one source: linked to libtsffi (the real first plan),
 * and linked to bench's libtrivial (a cffi-embedded library whose
 * tsffi_speculation_plan does nothing: the floor of the design).
 *
 *   cold_host DIR
 *
 * Prints "<CLOCK_MONOTONIC ns when the first answer came back> <status>" and
 * exits. The harness takes its own CLOCK_MONOTONIC reading before it spawns
 * this program, so the difference is exec to first answer.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "tsffi.h"

int main(int argc, char **argv) {
    char *out = NULL;
    int32_t status;
    struct timespec t;
    if (argc < 2) {
        fprintf(stderr, "usage: cold_host DIR\n");
        return 2;
    }
    status = tsffi_speculation_plan(argv[1], "{\"speculativeDrafter\":\"auto\",\"speculation\":\"auto\"}",
                                 &out);
    clock_gettime(CLOCK_MONOTONIC, &t);
    printf("%llu %d\n", (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec,
           (int)status);
    tsffi_string_free(out);
    return status == TSFFI_OK ? 0 : 1;
}
