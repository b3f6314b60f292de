/* 16 threads race the very first call into the library: the embedded runtime
 * must start exactly once, and every thread gets its own answer and its own
 * last error, while the others fail and succeed around it.
 *
 * Run: race DFLASH_ONLY_MODEL_DIR
 * Prints one line per thread, in thread order, then "done": the same lines on
 * every run.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsffi.h"

#define THREADS 16

static const char *model_dir;
static pthread_barrier_t barrier;

struct report {
    int index;
    const char *op;
    int32_t status;
    char *out;
    char err[1024];
    size_t err_len;
};

static void *run(void *arg) {
    struct report *r = (struct report *)arg;
    char *out = NULL;
    pthread_barrier_wait(&barrier);
    switch (r->index % 4) {
    case 0:
        r->op = "build_info";
        r->status = tsffi_build_info_json(&out);
        break;
    case 1:
        r->op = "refused";
        r->status = tsffi_resolve_speculation("{\"speculativeDrafter\": \"dflash\", \"tsffi\": {\"temperature\": 0.7}, \"speculation\": 2}", &out);
        break;
    case 2:
        r->op = "plan";
        r->status = tsffi_speculation_plan(model_dir, "{}", &out);
        break;
    default:
        r->op = "drafter";
        r->status = tsffi_resolve_drafter(model_dir, NULL, &out);
        break;
    }
    /* Read this thread's last error right after its own call, while the
     * other threads are still failing and succeeding. */
    r->err_len = tsffi_last_error(r->err, sizeof r->err);
    r->out = out;
    return NULL;
}

static void print_escaped(const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c > 0x7e || c == '\\')
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

int main(int argc, char **argv) {
    pthread_t threads[THREADS];
    struct report reports[THREADS];
    int i;
    if (argc != 2) {
        printf("usage: race MODEL_DIR\n");
        return 2;
    }
    model_dir = argv[1];
    pthread_barrier_init(&barrier, NULL, THREADS);
    for (i = 0; i < THREADS; i++) {
        memset(&reports[i], 0, sizeof reports[i]);
        reports[i].index = i;
        if (pthread_create(&threads[i], NULL, run, &reports[i]) != 0) {
            printf("pthread_create failed\n");
            return 1;
        }
    }
    for (i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    for (i = 0; i < THREADS; i++) {
        struct report *r = &reports[i];
        printf("t%02d %s status=%d err_len_ok=%d err=", i, r->op, (int)r->status,
               r->err_len == strlen(r->err));
        print_escaped(r->err);
        printf(" out=");
        if (r->out == NULL)
            printf("NULL");
        else if (r->index % 4 == 0)
            /* build info holds paths; its ABI version is what must agree */
            printf("%s", strstr(r->out, "\"abiVersion\":4") != NULL ? "abiVersion=4" : r->out);
        else
            print_escaped(r->out);
        printf("\n");
        tsffi_string_free(r->out);
    }
    printf("main err_len=%lu\n", (unsigned long)tsffi_last_error(NULL, 0));
    pthread_barrier_destroy(&barrier);
    printf("done\n");
    return 0;
}
