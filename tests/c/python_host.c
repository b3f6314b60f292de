/* A host that runs a Python of its own before it calls the library, as an
 * app embedding Python does (issue 40, items 1 and 3):
 *
 *   python_host LIBPYTHON LIBTSFFI MODE
 *
 * dlopen()s LIBPYTHON RTLD_GLOBAL (as a host linking it would offer it to
 * every library loaded after), starts it with Py_InitializeEx(0), then:
 *   release  -- releases the GIL (PyEval_SaveThread), as a well-behaved
 *               embedder does;
 *   hold     -- keeps the GIL on the main thread for good (Py_Initialize
 *               without PyEval_SaveThread: a common way to embed);
 *   hold_then_release -- keeps it until the worker's first round of calls
 *               has answered, then releases it.
 * Then dlopen()s LIBTSFFI and calls tsffi_build_info_json and
 * tsffi_speculation_plan(MODEL_DIR) from a worker thread, twice each, and
 * prints one line per call: "<fn> <status> <result or last error>". The
 * main thread only waits for the worker (it never runs Python). The
 * test's timeout is the watchdog; stderr is the test's to check. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int32_t (*plan_fn)(const char *, const char *, char **);
typedef int32_t (*info_fn)(char **);
typedef size_t (*error_fn)(char *, size_t);
typedef void (*free_fn)(char *);

static void *tsffi;
static const char *model_dir;
static int first_round[2]; /* a pipe: the worker writes one byte after round 0 */

/* dlsym's object pointer as a function pointer, without the cast ISO C
 * forbids (-pedantic). */
#define BIND(fn, handle, name)                                                                     \
    do {                                                                                           \
        void *found_ = dlsym(handle, name);                                                        \
        memcpy(&(fn), &found_, sizeof(fn));                                                        \
    } while (0)

static void report(const char *fn, int32_t status, char *out) {
    char message[8192];
    error_fn last_error;
    free_fn string_free;
    BIND(last_error, tsffi, "tsffi_last_error");
    BIND(string_free, tsffi, "tsffi_string_free");
    if (status == 0) {
        printf("%s %d %s\n", fn, (int)status, out);
    } else {
        last_error(message, sizeof message);
        printf("%s %d %s\n", fn, (int)status, message);
    }
    fflush(stdout);
    string_free(out);
}

static void *worker(void *unused) {
    info_fn info;
    plan_fn plan;
    BIND(info, tsffi, "tsffi_build_info_json");
    BIND(plan, tsffi, "tsffi_speculation_plan");
    (void)unused;
    for (int round = 0; round < 2; round++) {
        char *out = NULL;
        int32_t status = info(&out);
        report("info", status, out);
        out = NULL;
        status = plan(model_dir, "{}", &out);
        report("plan", status, out);
        if (round == 0 && write(first_round[1], "x", 1) != 1)
            return NULL;
    }
    return NULL;
}

int main(int argc, char **argv) {
    void *python;
    pthread_t thread;
    void (*initialize)(int);
    void *(*save_thread)(void);
    const char *(*get_version)(void);
    if (argc != 5) {
        fprintf(stderr, "usage: python_host LIBPYTHON LIBTSFFI release|hold|hold_then_release MODEL_DIR\n");
        return 2;
    }
    python = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (python == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 2;
    }
    BIND(initialize, python, "Py_InitializeEx");
    BIND(save_thread, python, "PyEval_SaveThread");
    BIND(get_version, python, "Py_GetVersion");
    initialize(0);
    if (strcmp(argv[3], "release") == 0)
        save_thread();
    printf("host python %s\n", get_version());
    fflush(stdout);
    tsffi = dlopen(argv[2], RTLD_NOW);
    if (tsffi == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
        return 2;
    }
    model_dir = argv[4];
    if (pipe(first_round) != 0)
        return 2;
    pthread_create(&thread, NULL, worker, NULL);
    if (strcmp(argv[3], "hold_then_release") == 0) {
        char byte;
        if (read(first_round[0], &byte, 1) != 1)
            return 2;
        save_thread();
    }
    pthread_join(thread, NULL);
    printf("done\n");
    return 0;
}
