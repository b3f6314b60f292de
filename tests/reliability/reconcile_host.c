/* Memory over many reconciles with distinct inputs: resident set size (from
 * /proc/self/statm) and open file descriptors at checkpoints. Call i
 * reconciles MODEL_DIR under an options text no other call sends (its
 * "host" key is i) against an engine report that also names i -- an
 * agreement, a failed open or a disagreeing reason, in turn -- and then
 * plans the same pair, which answers in the engine's words after a
 * disagreement. So every call adds to what the library remembers, and only
 * its bounds keep that flat.
 *
 * Build: cc ... reconcile_host.c -ltsffi -lpthread
 * Run:   reconcile_host [-k] MODEL_DIR TOTAL CHECKPOINT...
 *        -k: keep every result (never call tsffi_string_free): a leak made on
 *        purpose, the positive control of the RSS check.
 * Prints  P  CALLS  RSS_BYTES  OPEN_FDS     at each checkpoint
 *         S  RECONCILE_OK  PLAN_OK  PLAN_REFUSED  OTHER   at the end
 *         DONE
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tsffi.h"
#include "process_stats.h"

int main(int argc, char **argv) {
    long total, i, next_checkpoint, reconciled = 0, planned = 0, refused = 0, other = 0;
    int argi = 1, keep = 0, next;
    const char *model_dir;
    char options[128], engine[512];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1 && strcmp(argv[1], "-k") == 0) {
        keep = 1;
        argi++;
    }
    if (argc - argi < 3) {
        printf("FATAL\tusage: reconcile_host [-k] MODEL_DIR TOTAL CHECKPOINT...\n");
        return 2;
    }
    model_dir = argv[argi];
    total = atol(argv[argi + 1]);
    next = argi + 2;
    next_checkpoint = atol(argv[next]);
    for (i = 1; i <= total; i++) {
        char *out = NULL;
        int32_t status;
        snprintf(options, sizeof options, "{\"speculation\": \"auto\", \"host\": %ld}", i);
        if (i % 3 == 0)
            snprintf(engine, sizeof engine,
                     "{\"modelDir\": \"/m\", \"contextWindow\": %ld, \"speculation\": "
                     "{\"block\": 2, \"drafter\": \"mtp\", \"reason\": null}}",
                     i);
        else if (i % 3 == 1)
            snprintf(engine, sizeof engine, "{\"status\": 2, \"message\": \"open %ld failed\"}", i);
        else
            snprintf(engine, sizeof engine,
                     "{\"modelDir\": \"/m\", \"speculation\": {\"block\": null, \"drafter\": "
                     "null, \"reason\": \"the engine's reason %ld\"}, \"kvBits\": \"off\"}",
                     i);
        status = tsffi_reconcile(model_dir, options, engine, &out);
        if (status == TSFFI_OK)
            reconciled++;
        else
            other++;
        if (!keep)
            tsffi_string_free(out);
        out = NULL;
        status = tsffi_speculation_plan(model_dir, options, &out);
        if (status == TSFFI_OK)
            planned++;
        else if (status == TSFFI_ERR_REFUSED)
            refused++;
        else
            other++;
        if (!keep)
            tsffi_string_free(out);
        if (i == next_checkpoint) {
            printf("P\t%ld\t%ld\t%d\n", i, resident_bytes(), open_fds());
            next++;
            next_checkpoint = next < argc ? atol(argv[next]) : -1;
        }
    }
    printf("S\t%ld\t%ld\t%ld\t%ld\n", reconciled, planned, refused, other);
    printf("DONE\n");
    return 0;
}
