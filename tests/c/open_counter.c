/* Counts the opens of one file name, for a test that must show how many
 * times the library READ a file (tests/test_store.py): preloaded
 * (LD_PRELOAD), it wraps open/open64/openat/openat64 and, at exit, writes
 * "opens N" on stderr, N the opens whose last path component is
 * $TSFFI_COUNT_OPENS_OF. stat() is not counted: the library's proof that a
 * file is unchanged is a stat(), its read is an open. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int opens;

static void note(const char *path) {
    const char *want = getenv("TSFFI_COUNT_OPENS_OF");
    const char *base;
    if (want == NULL || path == NULL)
        return;
    base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    if (strcmp(base, want) == 0)
        __atomic_add_fetch(&opens, 1, __ATOMIC_SEQ_CST);
}

static mode_t mode_of(int flags, va_list ap) {
    return (flags & O_CREAT) ? (mode_t)va_arg(ap, int) : 0;
}

#define WRAP_OPEN(name)                                                                            \
    int name(const char *path, int flags, ...) {                                                   \
        static int (*real)(const char *, int, ...);                                                \
        va_list ap;                                                                                \
        mode_t mode;                                                                               \
        if (real == NULL)                                                                          \
            *(void **)&real = dlsym(RTLD_NEXT, #name);                                             \
        va_start(ap, flags);                                                                       \
        mode = mode_of(flags, ap);                                                                 \
        va_end(ap);                                                                                \
        note(path);                                                                                \
        return real(path, flags, mode);                                                            \
    }

#define WRAP_OPENAT(name)                                                                          \
    int name(int dir, const char *path, int flags, ...) {                                          \
        static int (*real)(int, const char *, int, ...);                                           \
        va_list ap;                                                                                \
        mode_t mode;                                                                               \
        if (real == NULL)                                                                          \
            *(void **)&real = dlsym(RTLD_NEXT, #name);                                             \
        va_start(ap, flags);                                                                       \
        mode = mode_of(flags, ap);                                                                 \
        va_end(ap);                                                                                \
        note(path);                                                                                \
        return real(dir, path, flags, mode);                                                       \
    }

WRAP_OPEN(open)
WRAP_OPEN(open64)
WRAP_OPENAT(openat)
WRAP_OPENAT(openat64)

__attribute__((destructor)) static void report(void) {
    char line[64];
    int n = snprintf(line, sizeof line, "opens %d\n", __atomic_load_n(&opens, __ATOMIC_SEQ_CST));
    if (n > 0 && write(2, line, (size_t)n) < 0)
        return;
}
