/* One tsffi_speculation_plan(MODEL_DIR, "{}") from a thread with a stack of
 * KIB KiB: stack_host MODEL_DIR KIB. Prints "<status> <result or error>". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "tsffi.h"

static const char *model_dir;

static void *run(void *arg) {
    char *out = NULL;
    char message[1024];
    int status = (int)tsffi_speculation_plan(model_dir, "{}", &out);
    tsffi_last_error(message, sizeof message);
    printf("%d %s\n", status, out != NULL ? out : message);
    tsffi_string_free(out);
    return arg;
}

int main(int argc, char **argv) {
    pthread_attr_t attr;
    pthread_t thread;
    if (argc != 3)
        return 2;
    model_dir = argv[1];
    pthread_attr_init(&attr);
    if (pthread_attr_setstacksize(&attr, (size_t)atoi(argv[2]) * 1024) != 0 ||
        pthread_create(&thread, &attr, run, NULL) != 0)
        return 3;
    pthread_join(thread, NULL);
    return 0;
}
