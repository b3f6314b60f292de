/* The C that only C can do: the public entry points of tsffi.h as
 * thin wrappers around one Python dispatcher, plus what must work without
 * Python (the ABI version, the thread-local last error, freeing results) and
 * what must happen before Python exists (finding ourselves, pinning the
 * interpreter's home, starting it exactly once).
 *
 * Why wrappers at all, instead of cffi's own embedding_api() exports: a
 * generated export returns 0 when the interpreter failed to start, and 0 is
 * TSFFI_OK here -- a silent success. Every wrapper below starts the runtime
 * first and returns TSFFI_ERR_RUNTIME, with a message, when it could not.
 *
 * ffi_build.py prepends the TSFFI_BUILD_* definitions (paths of the Python this
 * was built with) and passes this file to cffi's set_source; cffi has already
 * included Python.h and its embedding logic (cffi_start_python) above it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tsffi.h"

/* Dispatch ids: also declared to cffi (ffi_build.py), so Python reads the
 * same numbers. */
#define TSFFI__FN_BUILD_INFO          0
#define TSFFI__FN_RESOLVE_DRAFTER     1
#define TSFFI__FN_DRAFT_POLICIES      2
#define TSFFI__FN_RESOLVE_SPECULATION 3
#define TSFFI__FN_SPECULATION_PLAN    4
#define TSFFI__FN_INSTALL_INFO        5
#define TSFFI__FN_SPECULATION_CHOICES 6
#define TSFFI__FN_STORE               7
#define TSFFI__FN_RECONCILE           8

/* extern "Python" functions, defined by cffi from the cdef; forward. */
static int32_t tsffi_py_call(int32_t fn, const char *a, const char *b, const char *c, char **out);
static int32_t tsffi_py_init_status(char *buf, size_t cap);

/* ------------------------------------------------------------------------
 * The last error: one heap buffer per thread, freed when the thread exits
 * (pthread key destructor), so nothing accumulates per thread. */

struct tsffi_error {
    char *msg;
    size_t len;
    size_t cap;
};

static pthread_key_t tsffi_error_key;
static pthread_once_t tsffi_error_once = PTHREAD_ONCE_INIT;
static int tsffi_error_key_ok = 0;
/* What a thread reads when even its error buffer could not be allocated. */
static const char tsffi_oom_message[] = "out of memory while recording an error";

static void tsffi_error_destroy(void *p) {
    struct tsffi_error *e = (struct tsffi_error *)p;
    if (e != NULL) {
        free(e->msg);
        free(e);
    }
}

static void tsffi_error_key_init(void) {
    tsffi_error_key_ok = pthread_key_create(&tsffi_error_key, tsffi_error_destroy) == 0;
}

static struct tsffi_error *tsffi_error_get(int create) {
    struct tsffi_error *e;
    pthread_once(&tsffi_error_once, tsffi_error_key_init);
    if (!tsffi_error_key_ok)
        return NULL;
    e = (struct tsffi_error *)pthread_getspecific(tsffi_error_key);
    if (e == NULL && create) {
        e = (struct tsffi_error *)calloc(1, sizeof *e);
        if (e != NULL && pthread_setspecific(tsffi_error_key, e) != 0) {
            free(e);
            e = NULL;
        }
    }
    return e;
}

/* The calling thread's message length. The library asks this, never its own
 * exported tsffi_last_error: an exported name can be interposed by another
 * library in the process (see the link flags in ffi_build.py). */
static size_t tsffi_error_length(void) {
    struct tsffi_error *e = tsffi_error_get(0);
    return e != NULL ? e->len : 0;
}

static void tsffi_error_clear(void) {
    struct tsffi_error *e = tsffi_error_get(0);
    if (e != NULL)
        e->len = 0;
}

/* Called by Python too (cdef'd in ffi_build.py). */
static void tsffi_set_error(const char *msg, size_t n) {
    struct tsffi_error *e = tsffi_error_get(1);
    if (e == NULL)
        return;
    if (n + 1 > e->cap) {
        char *grown = (char *)realloc(e->msg, n + 1);
        if (grown == NULL) {
            n = sizeof tsffi_oom_message - 1;
            if (e->cap < n + 1) {
                e->len = 0;
                return;
            }
            msg = tsffi_oom_message;
        } else {
            e->msg = grown;
            e->cap = n + 1;
        }
    }
    memcpy(e->msg, msg, n);
    e->msg[n] = '\0';
    e->len = n;
}

static void tsffi_set_error_str(const char *msg) { tsffi_set_error(msg, strlen(msg)); }

/* The two variables model names are resolved by, read ONCE, at the library's
 * first call (tsffi_classify_host, before the runtime starts), and never again.
 *
 * Why not at each call, as the engine reads them: POSIX leaves getenv()
 * racing another thread's setenv() undefined, and glibc frees the array of
 * variables a setenv() of a new name grows, so a getenv() walking it at that
 * moment reads freed memory (issue 40: a host setenv()ing on its main thread
 * while a worker planned an alias died with SIGSEGV in getenv, 3 of 3 runs).
 * No lock of the library's can stop a host's setenv(). Why the first call:
 * it starts CPython, whose start walks the whole environment anyway (to build
 * os.environ: a setenv() racing the first call crashed there, seen), so the
 * first call is already a moment the host must leave its environment alone;
 * reading the two variables in it adds no moment of its own, and a host may
 * still setenv() them before it (docs/shipping.md: a sandboxed app sets
 * TURBOSPARK_HOME). A Python host's interpreter reads its own os.environ
 * instead (_abi.bind): its changes go through os.environ under the GIL. */
static const char *const tsffi_env_names[] = {"TURBOSPARK_HOME", "HOME"};
#define TSFFI_ENV_COUNT (sizeof tsffi_env_names / sizeof tsffi_env_names[0])
static char *tsffi_env_values[TSFFI_ENV_COUNT]; /* NULL: unset at the first call */

static void tsffi_env_snapshot(void) {
    size_t i;
    for (i = 0; i < TSFFI_ENV_COUNT; i++) {
        const char *value = getenv(tsffi_env_names[i]);
        if (value != NULL) {
            size_t n = strlen(value) + 1;
            tsffi_env_values[i] = (char *)malloc(n);
            if (tsffi_env_values[i] != NULL)
                memcpy(tsffi_env_values[i], value, n);
        }
    }
}

/* Called by Python: the value `name` had at the library's first call (NULL:
 * unset, or not one of the variables the library reads). */
static const char *tsffi_getenv(const char *name) {
    size_t i;
    for (i = 0; i < TSFFI_ENV_COUNT; i++)
        if (strcmp(name, tsffi_env_names[i]) == 0)
            return tsffi_env_values[i];
    return NULL;
}

/* Called by Python: hand a result to the caller as a malloc'd copy. */
static int32_t tsffi_emit(char **out, const char *data, size_t n) {
    char *copy = (char *)malloc(n + 1);
    if (copy == NULL) {
        tsffi_set_error_str("out of memory while returning a result");
        return TSFFI_ERR_INTERNAL;
    }
    memcpy(copy, data, n);
    copy[n] = '\0';
    *out = copy;
    return TSFFI_OK;
}

/* ------------------------------------------------------------------------
 * The warm path, without Python.
 *
 * A GUI re-plans on every touch of a control, from whatever thread it likes.
 * Python can prove an install unchanged in ~10 us, but only under the GIL, and
 * eight host threads handing the GIL across two cores on every call collapse
 * to half the single-thread throughput (measured). So answers that depend
 * only on (function, model_dir, options) and on the install's files -- which holds for
 * a model_dir that names an existing directory by its absolute path, see
 * tsffi_keyable_name -- are remembered here
 * together with what stat() said of those files WHEN PYTHON READ THEM; a
 * call whose stat() still says the same gets the remembered bytes, and any
 * difference -- replaced, rewritten, truncated, touched, removed -- goes to
 * Python, which re-reads. Python only offers answers from snapshots it
 * trusts (files older than its racy window), so a rewrite within one clock
 * tick of a read can never be served from here. Bounded: TSFFI_CACHE_SLOTS
 * entries, replaced in turn.
 *
 * One more input can change a plan without touching the files: an engine's
 * outcome that tsffi_reconcile remembered (reconcile.py). When that memory
 * changes, Python starts a new epoch, which drops every entry; an answer is
 * stored only under the epoch Python read BEFORE it computed the answer, so
 * a preview computed just before a reconcile can never be stored after it
 * and then served in the engine's place. */

#define TSFFI_CACHE_SLOTS   64
#define TSFFI_CACHE_MAX_ARG 4096

/* What stat() said of one file, compared whole (memcmp: seven int64, no
 * padding): the file identity of regular_file.file_identity (dev, ino, size,
 * mtime_ns, ctime_ns) framed by ok and mode. Declared to cffi too
 * (ffi_build.INTERNAL_CDEF), so Python fills it by these names and the
 * compiler checks the two agree. A file stat() could not see has ok = 0 and
 * its errno in dev. */
struct tsffi_file_key {
    int64_t ok, dev, ino, size, mtime_ns, ctime_ns, mode;
};

/* The files an install's answers depend on (snapshots.LEAVES, in this order):
 * the resident index, the expert layout, and the manifest whose `arch` the
 * engine's open reads first. */
#define TSFFI_INSTALL_FILES 3

struct tsffi_cached {
    int32_t fn;
    char *a;
    char *b;
    struct tsffi_file_key keys[TSFFI_INSTALL_FILES];
    char *result;
    size_t len;
};

static struct tsffi_cached tsffi_cache[TSFFI_CACHE_SLOTS];
static unsigned tsffi_cache_next = 0;
static uint64_t tsffi_cache_epoch = 0; /* under tsffi_cache_lock */
static pthread_rwlock_t tsffi_cache_lock = PTHREAD_RWLOCK_INITIALIZER;

static void tsffi_file_key_of(const char *dir, const char *leaf, struct tsffi_file_key *k) {
    char path[PATH_MAX + 64];
    struct stat st;
    memset(k, 0, sizeof *k);
    if (snprintf(path, sizeof path, "%s/%s", dir, leaf) >= (int)sizeof path) {
        k->dev = ENAMETOOLONG;
        return;
    }
    if (stat(path, &st) != 0) {
        k->dev = errno;
        return;
    }
    k->ok = 1;
    k->dev = (int64_t)st.st_dev;
    k->ino = (int64_t)st.st_ino;
    k->size = (int64_t)st.st_size;
#if defined(__APPLE__)
    k->mtime_ns = (int64_t)st.st_mtimespec.tv_sec * 1000000000 + st.st_mtimespec.tv_nsec;
    k->ctime_ns = (int64_t)st.st_ctimespec.tv_sec * 1000000000 + st.st_ctimespec.tv_nsec;
#else
    k->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    k->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
#endif
    k->mode = (int64_t)st.st_mode;
}

static void tsffi_install_keys(const char *model_dir,
                               struct tsffi_file_key keys[TSFFI_INSTALL_FILES]) {
    tsffi_file_key_of(model_dir, "model_weights.bin", &keys[0]);
    tsffi_file_key_of(model_dir, "packed_experts/layout.json", &keys[1]);
    tsffi_file_key_of(model_dir, "manifest.json", &keys[2]);
}

/* Which model names the warm path may answer for: an absolute path that is
 * an existing directory, checked at every lookup and every store.
 *
 * A name is resolved the way the engine resolves it (model_names.py): an
 * existing directory wins; otherwise an alias, looked up through
 * $TURBOSPARK_HOME or $HOME, installed.json and the default install paths;
 * otherwise the name itself. Only the first arm is independent of the
 * environment, the store's files and the working directory, so only it can
 * be keyed by the name and three stat()s: an alias re-pointed in
 * installed.json, a setenv() by the host, a chdir() or a directory created
 * under the alias's name would all change the answer without changing the
 * install's files. Every other name goes to Python on every call, which
 * resolves it afresh (costing the warm path nothing for a host that passes
 * absolute install paths, which is what a GUI holds). Python offers an
 * answer only when the directory it read IS the name; this check at lookup
 * is what makes the remembered answer still that name's. */
static int tsffi_keyable_name(const char *model_dir) {
    struct stat st;
    return model_dir[0] == '/' && stat(model_dir, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The calls whose answer depends only on their arguments and the install's
 * files (snapshots.LEAVES): the ones the warm path may answer. */
static int tsffi_reads_install(int32_t fn) {
    return fn == TSFFI__FN_RESOLVE_DRAFTER || fn == TSFFI__FN_SPECULATION_PLAN ||
           fn == TSFFI__FN_INSTALL_INFO || fn == TSFFI__FN_SPECULATION_CHOICES;
}

/* 1 and *out set when a remembered answer is still valid, else 0. */
static int tsffi_cache_get(int32_t fn, const char *a, const char *b, char **out) {
    struct tsffi_file_key now[TSFFI_INSTALL_FILES];
    int found = 0, i;
    if (strlen(a) > TSFFI_CACHE_MAX_ARG || strlen(b) > TSFFI_CACHE_MAX_ARG ||
        !tsffi_keyable_name(a))
        return 0;
    tsffi_install_keys(a, now);
    pthread_rwlock_rdlock(&tsffi_cache_lock);
    for (i = 0; i < TSFFI_CACHE_SLOTS; i++) {
        struct tsffi_cached *c = &tsffi_cache[i];
        if (c->result != NULL && c->fn == fn && strcmp(c->a, a) == 0 && strcmp(c->b, b) == 0) {
            if (memcmp(c->keys, now, sizeof now) == 0) {
                char *copy = (char *)malloc(c->len + 1);
                if (copy != NULL) {
                    memcpy(copy, c->result, c->len + 1);
                    *out = copy;
                    found = 1;
                }
            }
            break;
        }
    }
    pthread_rwlock_unlock(&tsffi_cache_lock);
    return found;
}

static char *tsffi_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *copy = (char *)malloc(n);
    if (copy != NULL)
        memcpy(copy, s, n);
    return copy;
}

/* Called by Python: the epoch an answer must be computed in to be stored. */
static uint64_t tsffi_cache_epoch_now(void) {
    uint64_t epoch;
    pthread_rwlock_rdlock(&tsffi_cache_lock);
    epoch = tsffi_cache_epoch;
    pthread_rwlock_unlock(&tsffi_cache_lock);
    return epoch;
}

/* Called by Python when what a plan answers changed without the files
 * changing (a remembered engine outcome came or went): a new epoch, and no
 * remembered answer. */
static void tsffi_cache_new_epoch(void) {
    struct tsffi_cached dropped[TSFFI_CACHE_SLOTS];
    int i;
    pthread_rwlock_wrlock(&tsffi_cache_lock);
    tsffi_cache_epoch++;
    memcpy(dropped, tsffi_cache, sizeof dropped);
    memset(tsffi_cache, 0, sizeof tsffi_cache);
    pthread_rwlock_unlock(&tsffi_cache_lock);
    for (i = 0; i < TSFFI_CACHE_SLOTS; i++) {
        free(dropped[i].a);
        free(dropped[i].b);
        free(dropped[i].result);
    }
}

/* Called by Python with what stat() said of the install's files when
 * the snapshot the answer came from read them, and the epoch it read before
 * computing the answer (an answer of an older epoch is not stored). */
static void tsffi_cache_put(int32_t fn, const char *a, const char *b,
                            const struct tsffi_file_key *keys, uint64_t epoch, const char *result,
                            size_t len) {
    struct tsffi_cached fresh, old;
    int i, slot = -1;
    if (strlen(a) > TSFFI_CACHE_MAX_ARG || strlen(b) > TSFFI_CACHE_MAX_ARG ||
        !tsffi_keyable_name(a))
        return;
    fresh.fn = fn;
    fresh.a = tsffi_strdup(a);
    fresh.b = tsffi_strdup(b);
    fresh.result = (char *)malloc(len + 1);
    fresh.len = len;
    if (fresh.a == NULL || fresh.b == NULL || fresh.result == NULL) {
        free(fresh.a);
        free(fresh.b);
        free(fresh.result);
        return;
    }
    memcpy(fresh.result, result, len);
    fresh.result[len] = '\0';
    memcpy(fresh.keys, keys, sizeof fresh.keys);
    pthread_rwlock_wrlock(&tsffi_cache_lock);
    if (epoch != tsffi_cache_epoch) {
        pthread_rwlock_unlock(&tsffi_cache_lock);
        free(fresh.a);
        free(fresh.b);
        free(fresh.result);
        return;
    }
    for (i = 0; i < TSFFI_CACHE_SLOTS; i++) {
        struct tsffi_cached *c = &tsffi_cache[i];
        if (c->result != NULL && c->fn == fn && strcmp(c->a, a) == 0 && strcmp(c->b, b) == 0) {
            slot = i;
            break;
        }
    }
    if (slot < 0)
        slot = (int)(tsffi_cache_next++ % TSFFI_CACHE_SLOTS);
    old = tsffi_cache[slot];
    tsffi_cache[slot] = fresh;
    pthread_rwlock_unlock(&tsffi_cache_lock);
    free(old.a);
    free(old.b);
    free(old.result);
}

/* ------------------------------------------------------------------------
 * A host that started Python itself: its GIL.
 *
 * Every Python-backed call takes the GIL (PyGILState_Ensure, in cffi's
 * glue). In an interpreter the library started, only the library's own calls
 * hold it, each briefly. In one the host started (it embeds Python, or it is
 * a Python program), the host decides: a host that calls Py_Initialize and
 * never PyEval_SaveThread keeps the GIL on its main thread for good, and a
 * call from any other thread would wait for it forever (issue 40: no status,
 * no timeout). PyGILState_Ensure cannot be abandoned once it waits, so the
 * wait happens on a thread of the library's own (the prober): a call asks it
 * to take the GIL and give it back, and waits at most TSFFI_GIL_WAIT_MS for
 * that; past it the call answers TSFFI_ERR_RUNTIME, and the prober keeps
 * waiting (one prober, whatever the number of callers), so a later call
 * works as soon as the host lets the GIL go. A probe that succeeded shows a
 * host that releases the GIL; the call's own take of it then waits as any
 * Python thread's does. A thread holding the GIL itself (ctypes.PyDLL) needs
 * no probe. */

/* 2 s: far above a Python host's normal hand-over of the GIL (its switch
 * interval is 5 ms), short of what a GUI's worker waits before it counts
 * the call as hung. tsffi_gil_message and the docs say "2 seconds". */
#define TSFFI_GIL_WAIT_MS 2000

static int tsffi_host_interpreter = 0; /* set once, by tsffi_classify_host */
static pthread_once_t tsffi_classify_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t tsffi_gil_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tsffi_gil_changed = PTHREAD_COND_INITIALIZER;
static unsigned long long tsffi_gil_asked = 0, tsffi_gil_seen = 0; /* under tsffi_gil_lock */
static int tsffi_gil_prober = 0;                                   /* under tsffi_gil_lock */
static const char tsffi_gil_message[] =
    "the host's Python interpreter did not let its GIL go within 2 seconds: the host started "
    "Python itself and one of its threads holds the GIL (a host that calls Py_Initialize keeps "
    "the GIL on that thread until it calls PyEval_SaveThread), so a call from this thread cannot "
    "run Python; release the GIL (PyEval_SaveThread after Py_Initialize, or Py_BEGIN_ALLOW_THREADS "
    "around waits), or make the call from the thread that holds it";

/* Whether `version` (Py_GetVersion's text) is the X.Y this was built for. */
static int tsffi_is_built_version(const char *version) {
    size_t n = strlen(TSFFI_BUILD_PYTHON_VERSION);
    return strncmp(version, TSFFI_BUILD_PYTHON_VERSION, n) == 0 &&
           !(version[n] >= '0' && version[n] <= '9');
}

/* At the first call, before the runtime starts: the environment's two
 * variables (tsffi_getenv), and whether an interpreter of the right X.Y is
 * already running (the host's). One of another X.Y is left to
 * tsffi_runtime_start, which refuses it without touching it. */
static void tsffi_classify_host(void) {
    tsffi_env_snapshot();
    tsffi_host_interpreter = Py_IsInitialized() && tsffi_is_built_version(Py_GetVersion());
}

static void *tsffi_gil_probe(void *unused) {
    PyThreadState *own = NULL;
    (void)unused;
    for (;;) {
        unsigned long long target;
        pthread_mutex_lock(&tsffi_gil_lock);
        while (tsffi_gil_seen == tsffi_gil_asked)
            pthread_cond_wait(&tsffi_gil_changed, &tsffi_gil_lock);
        target = tsffi_gil_asked;
        pthread_mutex_unlock(&tsffi_gil_lock);
        /* The thread state is made once and kept: a PyGILState_Release to
         * zero would delete it, and make the next probe allocate anew. */
        if (own == NULL)
            (void)PyGILState_Ensure();
        else
            PyEval_RestoreThread(own);
        own = PyEval_SaveThread();
        pthread_mutex_lock(&tsffi_gil_lock);
        tsffi_gil_seen = target;
        pthread_cond_broadcast(&tsffi_gil_changed);
        pthread_mutex_unlock(&tsffi_gil_lock);
    }
    return NULL;
}

/* 1 when the deadline (CLOCK_MONOTONIC) has passed; else waits on the
 * condition until it is signalled or the deadline comes. */
static int tsffi_gil_wait_until(const struct timespec *deadline) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > deadline->tv_sec ||
        (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec))
        return 1;
    {
        /* A relative wait, re-measured on every wake-up: the wall clock a
         * plain pthread_cond_timedwait reads may jump. */
        long long left = (long long)(deadline->tv_sec - now.tv_sec) * 1000000000LL +
                         (deadline->tv_nsec - now.tv_nsec);
#if defined(__APPLE__)
        struct timespec rel = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
        pthread_cond_timedwait_relative_np(&tsffi_gil_changed, &tsffi_gil_lock, &rel);
#else
        struct timespec wall, until;
        clock_gettime(CLOCK_REALTIME, &wall);
        left += wall.tv_nsec;
        until.tv_sec = wall.tv_sec + (time_t)(left / 1000000000LL);
        until.tv_nsec = (long)(left % 1000000000LL);
        pthread_cond_timedwait(&tsffi_gil_changed, &tsffi_gil_lock, &until);
#endif
    }
    return 0;
}

/* TSFFI_OK when this thread may take the GIL without waiting unboundedly:
 * the library's own interpreter, a thread that holds the GIL already, or a
 * probe that took it within TSFFI_GIL_WAIT_MS; else TSFFI_ERR_RUNTIME with
 * tsffi_gil_message. */
static int32_t tsffi_gil_within_reach(void) {
    struct timespec deadline;
    unsigned long long ticket;
    int reached, late = 0;
    /* Not initialized: a host that finalized its Python (tsffi_call says so). */
    if (!tsffi_host_interpreter || !Py_IsInitialized() || PyGILState_Check())
        return TSFFI_OK;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += TSFFI_GIL_WAIT_MS / 1000;
    deadline.tv_nsec += (long)(TSFFI_GIL_WAIT_MS % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&tsffi_gil_lock);
    if (!tsffi_gil_prober) {
        pthread_t thread;
        pthread_attr_t attr;
        int err = pthread_attr_init(&attr);
        if (err == 0) {
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            err = pthread_create(&thread, &attr, tsffi_gil_probe, NULL);
            pthread_attr_destroy(&attr);
        }
        if (err != 0) {
            /* Without a prober there is no bounded wait: the call takes the
             * GIL as it did before (the host's interpreter, its rules). */
            pthread_mutex_unlock(&tsffi_gil_lock);
            return TSFFI_OK;
        }
        tsffi_gil_prober = 1;
    }
    ticket = ++tsffi_gil_asked;
    pthread_cond_broadcast(&tsffi_gil_changed);
    while (tsffi_gil_seen < ticket && !late)
        late = tsffi_gil_wait_until(&deadline);
    reached = tsffi_gil_seen >= ticket;
    pthread_mutex_unlock(&tsffi_gil_lock);
    if (reached)
        return TSFFI_OK;
    tsffi_set_error_str(tsffi_gil_message);
    return TSFFI_ERR_RUNTIME;
}

/* ------------------------------------------------------------------------
 * fork().
 *
 * A GUI forks helpers while its other threads may be inside a call. The child
 * has one thread, but inherits every lock as it was at the fork: the GIL, the
 * runtime's pthread_once, the warm cache's rwlock, each possibly held by a
 * thread that does not exist in the child. Waiting on any of them hangs the
 * child forever (seen: 2-5 of 20 children per run, 4 threads planning). So
 * the library counts the threads inside a Python-backed call (from entry to
 * return, GIL released), and the child reads its inherited copy of the count:
 * 0 means no such lock can be held and the child may go on using the runtime
 * (a fork before the first call, or a single-threaded host's fork, keeps
 * working); anything else marks the child, whose every call then answers
 * TSFFI_ERR_RUNTIME at once without touching a lock. The parent is never
 * touched: there is no prepare handler to block it. */

static int tsffi_threads_inside = 0; /* __atomic only */
static int tsffi_forked_while_busy = 0;
static const char tsffi_forked_message[] =
    "this process was forked while another thread was inside libtsffi, so "
    "the embedded Python runtime it inherited may be locked by a thread that does not "
    "exist in this process: a forked child cannot use it. Make the call in the parent, "
    "or start the helper with exec (posix_spawn) so that it loads the library afresh "
    "(a fork while no other thread is inside the library keeps working)";

static void tsffi_after_fork_child(void) {
    /* The prober is a thread of the parent's: the child has none, and its
     * copy of the prober's lock may be held by it. A first probe in the
     * child starts a prober of its own. */
    pthread_mutex_init(&tsffi_gil_lock, NULL);
    pthread_cond_init(&tsffi_gil_changed, NULL);
    tsffi_gil_prober = 0;
    tsffi_gil_asked = tsffi_gil_seen = 0;
    if (__atomic_load_n(&tsffi_threads_inside, __ATOMIC_SEQ_CST) != 0) {
        tsffi_forked_while_busy = 1;
        __atomic_store_n(&tsffi_threads_inside, 0, __ATOMIC_SEQ_CST);
    }
}

/* At load, before any host thread can call: the error key (so no call ever
 * waits on a pthread_once a forking thread might hold) and the fork hook. */
__attribute__((constructor)) static void tsffi_library_loaded(void) {
    pthread_once(&tsffi_error_once, tsffi_error_key_init);
    pthread_atfork(NULL, NULL, tsffi_after_fork_child);
}

/* ------------------------------------------------------------------------
 * Finding ourselves and starting Python. */

static pthread_once_t tsffi_runtime_once = PTHREAD_ONCE_INIT;
static int32_t tsffi_runtime_status = TSFFI_ERR_RUNTIME;
static char tsffi_runtime_message[4096] = "the embedded Python runtime did not start";
static char tsffi_library_path[PATH_MAX];
static char tsffi_package_parent[PATH_MAX];
static int tsffi_owns_interpreter = 0;

static const char *tsffi_get_library_path(void) { return tsffi_library_path; }
static const char *tsffi_get_package_parent(void) { return tsffi_package_parent; }
static int tsffi_get_owns_interpreter(void) { return tsffi_owns_interpreter; }

/* The runtime's verdict, as a message every later call returns. */
__attribute__((format(printf, 1, 2))) static void tsffi_runtime_fail(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(tsffi_runtime_message, sizeof tsffi_runtime_message, fmt, args);
    va_end(args);
    tsffi_runtime_status = TSFFI_ERR_RUNTIME;
}

static int tsffi_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int tsffi_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int tsffi_join(char *dst, size_t cap, const char *a, const char *b) {
    int n = snprintf(dst, cap, "%s/%s", a, b);
    return n > 0 && (size_t)n < cap;
}

/* Whether dir holds cffi's backend module (_cffi_backend.<tag>.so). */
static int tsffi_holds_cffi_backend(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *entry;
    int found = 0;
    if (d == NULL)
        return 0;
    while (!found && (entry = readdir(d)) != NULL) {
        size_t n = strlen(entry->d_name);
        found = strncmp(entry->d_name, "_cffi_backend.", 14) == 0 && n > 3 &&
                strcmp(entry->d_name + n - 3, ".so") == 0;
    }
    closedir(d);
    return found;
}

/* Whom a directory the interpreter imports from must answer to: anyone who
 * can add or replace a module in it runs code in every host of this library.
 * Trusted: owned by root or by this process's effective user; not writable
 * by everyone; writable by its group only when that group is root's (gid 0)
 * or, on macOS, admin (gid 80), whose members can become root anyway
 * (python.org's installer leaves its framework root:admin 0775). */
#define TSFFI_ROOT_GID 0
#if defined(__APPLE__)
#define TSFFI_ADMIN_GID         80
#define TSFFI_PRIVILEGED_GROUPS "root's (gid 0) or admin (gid 80)"
#else
#define TSFFI_PRIVILEGED_GROUPS "root's (gid 0)"
#endif

static int tsffi_privileged_group(gid_t gid) {
#if defined(__APPLE__)
    if (gid == TSFFI_ADMIN_GID)
        return 1;
#endif
    return gid == TSFFI_ROOT_GID;
}

/* The owner rule's one exception: a directory inside the same app as this
 * library -- both under one `<name>.app/Contents/` -- is trusted by where it
 * sits, not by who owns it. An app copied into /Applications by one account
 * and opened by another is owned by the first; that owner can already replace
 * the app's own executable, which this process runs, so files beside it in
 * Contents/ give the owner nothing more. The folders from the directory up to
 * the .app must still be closed to everyone else (not writable by everyone,
 * nor by a group that is not privileged): 0 when one is not, or when the
 * directory is not inside this library's app. Signing seals Contents/ (and
 * Gatekeeper checks the seal); ownership of a copied app proves nothing. */
static int tsffi_inside_app_contents(const char *path) {
    static const char mark[] = ".app/Contents/";
    const char *at = NULL, *p = tsffi_library_path;
    char dir[PATH_MAX];
    size_t prefix, app_len;
    struct stat st;
    while ((p = strstr(p, mark)) != NULL)
        at = p++;
    if (at == NULL)
        return 0;
    prefix = (size_t)(at - tsffi_library_path) + sizeof mark - 1;
    app_len = (size_t)(at - tsffi_library_path) + 4; /* ".../<name>.app" */
    if (strncmp(path, tsffi_library_path, prefix) != 0 || strlen(path) >= sizeof dir)
        return 0;
    snprintf(dir, sizeof dir, "%s", path);
    while (strlen(dir) >= app_len) {
        char *slash;
        if (stat(dir, &st) != 0 || (st.st_mode & S_IWOTH) ||
            ((st.st_mode & S_IWGRP) && !tsffi_privileged_group(st.st_gid)))
            return 0;
        slash = strrchr(dir, '/');
        if (slash == NULL || slash == dir)
            break;
        *slash = '\0';
    }
    return 1;
}

/* 1 when path may be imported from (or does not exist: nothing to plant in,
 * and the import says what is missing); else 0, with why (owner, group, mode
 * and the rule it breaks) written to why. */
static int tsffi_trusted_dir(const char *path, char *why, size_t cap) {
    struct stat st;
    const char *broken = NULL;
    uid_t euid = geteuid();
    if (stat(path, &st) != 0)
        return 1;
    if (st.st_uid != 0 && st.st_uid != euid && !tsffi_inside_app_contents(path))
        broken = "its owner is neither root nor the user this process runs as";
    else if (st.st_mode & S_IWOTH)
        broken = "everyone may write to it";
    else if ((st.st_mode & S_IWGRP) && !tsffi_privileged_group(st.st_gid))
        broken = "its group may write to it and is not " TSFFI_PRIVILEGED_GROUPS;
    if (broken == NULL)
        return 1;
    snprintf(why, cap,
             "owner uid %u, group gid %u, mode %04o: %s (this process runs as uid %u). A "
             "directory Python code is imported from must be owned by root or by that user, "
             "not writable by everyone, and writable by its group only if the group is %s",
             (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777), broken,
             (unsigned)euid, TSFFI_PRIVILEGED_GROUPS);
    return 0;
}

/* Where the interpreter's files are, decided from this library's own path.
 *
 * A relocatable bundle (turbospark-ffi bundle) puts the interpreter beside
 * the library: lib/libtsffi.so, python/ (home), python/lib/... , and
 * everything is found relative to the library. Otherwise the library lives
 * inside the installed package and uses the Python it was built with, at the
 * home baked in at build time: a GUI has no venv, PATH or PYTHONHOME to go
 * by, and a home computed from PATH would load a standard library that does
 * not match the libpython this links. */
struct tsffi_layout {
    char home[PATH_MAX];
    char stdlib[PATH_MAX];
    char dynload[PATH_MAX];
    char cffi_dir[PATH_MAX];
    char package_parent[PATH_MAX];
    char stdlib_zip[PATH_MAX];
    int bundled;
    /* The libpython loaded into this process ("" when dladdr could not name
     * one), and the standard library expected beside it ("" when none). */
    char libpython[PATH_MAX];
    char stdlib_beside[PATH_MAX];
};

/* The build machine's paths (ffi_build.build_defines): the home, standard
 * library and extension-module directory of the Python this was built
 * against, the fallback of tsffi_python_home. Each is stored once, led by
 * TSFFI_BUILD_PATH_TAG, so that `turbospark-ffi bundle` finds and blanks them
 * in its copy (turbospark_ffi/bundle/common.py, blank_build_paths): a bundled
 * library finds its layout from its own location and never reads them, and
 * they name the developer's Python (for pyenv or uv, a home folder). Read
 * only through tsffi_build_path: the volatile pointer hides the text from the
 * compiler, which otherwise copies it into the code (measured: GCC -O2 turned
 * snprintf("%s", <home>) into 16-byte vector constants holding the path,
 * which no blanking of the string reaches). */
static const char tsffi_build_home_tagged[] = TSFFI_BUILD_PATH_TAG TSFFI_BUILD_PYTHON_HOME;
static const char tsffi_build_stdlib_tagged[] = TSFFI_BUILD_PATH_TAG TSFFI_BUILD_STDLIB;
static const char tsffi_build_dynload_tagged[] = TSFFI_BUILD_PATH_TAG TSFFI_BUILD_DYNLOAD;

static const char *tsffi_build_path(const char *tagged) {
    const char *volatile path = tagged + (sizeof TSFFI_BUILD_PATH_TAG - 1);
    return path;
}

/* Whether the file dladdr named is a libpython of the X.Y this was built
 * for, and not, say, a host executable with the interpreter linked in: a
 * framework's Versions/X.Y/<framework name>, or libpythonX.Y<anything>. */
static int tsffi_is_libpython(const char *path) {
    const char *base = strrchr(path, '/');
    size_t n = strlen(TSFFI_BUILD_PYTHON_VERSION);
    base = base != NULL ? base + 1 : path;
    if (TSFFI_BUILD_FRAMEWORK_NAME[0] != '\0' && strcmp(base, TSFFI_BUILD_FRAMEWORK_NAME) == 0) {
        /* .../Versions/X.Y/Python */
        size_t dir_len = (size_t)(base - path) - 1;
        return base > path && dir_len >= n + 10 &&
               strncmp(path + dir_len - n, TSFFI_BUILD_PYTHON_VERSION, n) == 0 &&
               strncmp(path + dir_len - n - 10, "/Versions/", 10) == 0;
    }
    return strncmp(base, "libpython", 9) == 0 &&
           strncmp(base + 9, TSFFI_BUILD_PYTHON_VERSION, n) == 0 &&
           (base[9 + n] < '0' || base[9 + n] > '9');
}

/* The interpreter's files, found from the libpython actually loaded into
 * this process, so that a Python moved with its files keeps working:
 * Homebrew's framework lives under a versioned Cellar path that changes on
 * every `brew upgrade`, and a home baked in at build time would name the
 * deleted one. The build records where the home, standard library and
 * extension modules were relative to the directory libpython was loaded from
 * (ffi_build.build_defines: a framework's Versions/X.Y, else LIBDIR); the
 * same relative paths from where it is now are used when a standard library
 * is there. Otherwise the paths baked in at build time stand, and the
 * interpreter's start says what is missing where. */
static void tsffi_python_home(struct tsffi_layout *L) {
    Dl_info py;
    char loaded[PATH_MAX], dir[PATH_MAX], path[PATH_MAX], home[PATH_MAX], stdlib[PATH_MAX];
    char *slash;
    snprintf(L->home, sizeof L->home, "%s", tsffi_build_path(tsffi_build_home_tagged));
    snprintf(L->stdlib, sizeof L->stdlib, "%s", tsffi_build_path(tsffi_build_stdlib_tagged));
    snprintf(L->dynload, sizeof L->dynload, "%s", tsffi_build_path(tsffi_build_dynload_tagged));
    if (dladdr((void *)&Py_IsInitialized, &py) == 0 || py.dli_fname == NULL ||
        realpath(py.dli_fname, loaded) == NULL || !tsffi_is_libpython(loaded))
        return;
    snprintf(L->libpython, sizeof L->libpython, "%s", loaded);
    snprintf(dir, sizeof dir, "%s", loaded);
    slash = strrchr(dir, '/');
    if (slash == NULL)
        return;
    *slash = '\0';
    if (!tsffi_join(path, sizeof path, dir, TSFFI_BUILD_STDLIB_FROM_LIBPYTHON))
        return;
    snprintf(L->stdlib_beside, sizeof L->stdlib_beside, "%s", path);
    if (realpath(path, stdlib) == NULL || !tsffi_is_dir(stdlib) ||
        !tsffi_join(path, sizeof path, dir, TSFFI_BUILD_HOME_FROM_LIBPYTHON) ||
        realpath(path, home) == NULL)
        return;
    snprintf(L->home, sizeof L->home, "%s", home);
    snprintf(L->stdlib, sizeof L->stdlib, "%s", stdlib);
    if (tsffi_join(path, sizeof path, dir, TSFFI_BUILD_DYNLOAD_FROM_LIBPYTHON) &&
        realpath(path, L->dynload) == NULL)
        snprintf(L->dynload, sizeof L->dynload, "%s", path);
}

/* Before starting an interpreter of our own: the libpython loaded is the X.Y
 * this was built for, and its standard library is where the layout says.
 * CPython aborts the whole process when it cannot find its standard library;
 * look first, and refuse with a message instead. */
static int tsffi_check_python(const struct tsffi_layout *L) {
    const char *version = Py_GetVersion(); /* callable before initialization */
    char check[PATH_MAX];
    if (!tsffi_is_built_version(version)) {
        size_t shown = strcspn(version, " ");
        const char *built_home = tsffi_build_path(tsffi_build_home_tagged);
        tsffi_runtime_fail("the libpython loaded into this process (%s) is Python %.*s, but this "
                           "library was built for Python %s (whose home was %s); rebuild the "
                           "library against the Python installed now",
                           L->libpython[0] != '\0' ? L->libpython : "found by dladdr: none",
                           (int)shown, version, TSFFI_BUILD_PYTHON_VERSION,
                           built_home[0] != '\0' ? built_home
                                                 : "not recorded: a bundled copy drops it");
        return -1;
    }
    if (!tsffi_join(check, sizeof check, L->stdlib, "os.py") ||
        (!tsffi_is_file(check) && !tsffi_is_file(L->stdlib_zip))) {
        if (!L->bundled && L->stdlib_beside[0] != '\0' && strcmp(L->stdlib_beside, L->stdlib) != 0)
            tsffi_runtime_fail("the Python standard library is neither at %s (beside the "
                               "libpython loaded from %s) nor at %s (this library was built "
                               "against the Python %s whose home was %s); reinstall that Python "
                               "or rebuild the library against the Python installed now",
                               L->stdlib_beside, L->libpython, L->stdlib,
                               TSFFI_BUILD_PYTHON_VERSION,
                               tsffi_build_path(tsffi_build_home_tagged));
        else
            tsffi_runtime_fail("the Python standard library is not at %s (this library was built "
                               "against the Python whose home is %s; reinstall that Python or "
                               "rebuild the library against the Python installed now)",
                               L->stdlib, L->home);
        return -1;
    }
    return 0;
}

/* Before using an interpreter the host started: it is the X.Y this was built
 * for. Python.h's names bind to whichever libpython the process's global
 * scope offers first, so a host that links (or dlopen()s RTLD_GLOBAL) another
 * Python hands the library THAT interpreter: cffi's start-up, compiled for
 * this X.Y, then spun forever at 100% CPU in a 3.12 or 3.13 host, and wrote to
 * the host's stderr in a 3.10 one (issue 40). Py_GetVersion and
 * Py_IsInitialized bind to the same library, so the version read is the
 * running interpreter's; nothing else of it is touched. */
static int tsffi_check_running_python(void) {
    const char *version = Py_GetVersion();
    Dl_info running;
    if (tsffi_is_built_version(version))
        return 0;
    tsffi_runtime_fail(
        "the Python already running in this process (%s) is Python %.*s, but this library was "
        "built for Python %s: it cannot run inside another version's interpreter, so it does "
        "not touch it; load it in a process whose Python is %s, or rebuild it against the "
        "Python the host runs",
        dladdr((void *)&Py_IsInitialized, &running) != 0 && running.dli_fname != NULL
            ? running.dli_fname
            : "its library unknown to dladdr",
        (int)strcspn(version, " "), version, TSFFI_BUILD_PYTHON_VERSION,
        TSFFI_BUILD_PYTHON_VERSION);
    return -1;
}

/* Every directory and file below root, each trusted as tsffi_trusted_dir
 * says (its rule is about who may replace what is imported, which holds for
 * a file as for the folder holding it). 1: all trusted; 0: `bad` names the
 * first that is not, `why` says why. A folder that cannot be listed is left
 * to the import, which says what it could not read. */
#define TSFFI_TREE_DEPTH 8 /* the package is 3 deep (bundle/__pycache__); more is not ours */

static int tsffi_trusted_tree(const char *root, int depth, char *bad, size_t bad_cap, char *why,
                              size_t cap) {
    DIR *d;
    struct dirent *entry;
    char path[PATH_MAX];
    int ok = 1;
    if (!tsffi_trusted_dir(root, why, cap)) {
        snprintf(bad, bad_cap, "%s", root);
        return 0;
    }
    if (depth >= TSFFI_TREE_DEPTH || !tsffi_is_dir(root) || (d = opendir(root)) == NULL)
        return 1;
    while (ok && (entry = readdir(d)) != NULL) {
        if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0 &&
            tsffi_join(path, sizeof path, root, entry->d_name))
            ok = tsffi_trusted_tree(path, depth + 1, bad, bad_cap, why, cap);
    }
    closedir(d);
    return ok;
}

/* What the sealed search path (tsffi_seal) admits from the package's folder
 * and cffi's: the package's whole tree and cffi's backend file. The
 * standard library's and the extension modules' folders are checked as
 * roots only (tsffi_check_search_path): their files belong to the Python
 * installation, whose tree is the installer's; walking its ~1,000 files
 * on every start would cost more than the start itself. */
static int tsffi_check_imported_files(const struct tsffi_layout *L) {
    char package[PATH_MAX], bad[PATH_MAX], why[512], backend[PATH_MAX];
    const char *dirs[2];
    int i;
    if (!tsffi_join(package, sizeof package, L->package_parent, "turbospark_ffi"))
        return 0; /* too long to exist: the import says it is missing */
    if (!tsffi_trusted_tree(package, 0, bad, sizeof bad, why, sizeof why)) {
        tsffi_runtime_fail("refusing to import Python code from %s: %s", bad, why);
        return -1;
    }
    dirs[0] = L->package_parent;
    dirs[1] = L->cffi_dir;
    for (i = 0; i < 2; i++) {
        DIR *d = dirs[i][0] != '\0' ? opendir(dirs[i]) : NULL;
        struct dirent *entry;
        int ok = 1;
        if (d == NULL)
            continue;
        while (ok && (entry = readdir(d)) != NULL)
            if (strncmp(entry->d_name, "_cffi_backend", 13) == 0 &&
                tsffi_join(backend, sizeof backend, dirs[i], entry->d_name))
                ok = tsffi_trusted_dir(backend, why, sizeof why);
        closedir(d);
        if (!ok) {
            tsffi_runtime_fail("refusing to import Python code from %s: %s", backend, why);
            return -1;
        }
    }
    return 0;
}

/* The directories the interpreter will import from, each trusted
 * (tsffi_trusted_dir). The package's, the standard library's and the
 * extension modules' are needed, and so is a bundle's home, which holds the
 * zipped standard library: one that is not trusted is refused, naming it.
 * The fallback cffi directory is only a candidate: left out (and a missing
 * cffi is reported). */
static int tsffi_check_search_path(struct tsffi_layout *L) {
    const char *needed[4];
    char why[512];
    int i, count = 0;
    needed[count++] = L->package_parent;
    needed[count++] = L->stdlib;
    needed[count++] = L->dynload;
    if (L->bundled)
        needed[count++] = L->home;
    for (i = 0; i < count; i++) {
        if (!tsffi_trusted_dir(needed[i], why, sizeof why)) {
            tsffi_runtime_fail("refusing to import Python code from %s: %s", needed[i], why);
            return -1;
        }
    }
    if (L->cffi_dir[0] != '\0' &&
        (!tsffi_is_dir(L->cffi_dir) || !tsffi_trusted_dir(L->cffi_dir, why, sizeof why)))
        L->cffi_dir[0] = '\0';
    return tsffi_check_imported_files(L);
}

/* Inside Tsffi.framework (turbospark-ffi bundle given a Mach-O library; see
 * turbospark_ffi/bundle/macos.py): the library is the framework's binary,
 * Versions/A/Tsffi; every other Mach-O file sits flat in Versions/A/Frameworks
 * (where Apple's rules put a framework's nested code: libpython, the extension
 * modules, cffi's backend), and the interpreter's data in
 * Versions/A/Resources/tsffi-python (home: marker, standard library zip, the
 * package). Nothing here depends on the platform, so the lookup is the same
 * on Linux, where tests/test_bundle_macos.py runs it.
 * 1: found and filled in; 0: not this layout; -1: a path too long. */
#define TSFFI_APP_DIRNAME "tsffi-python" /* bundle/macos.py APP_DIRNAME */

static int tsffi_find_app_layout(const char *lib_dir, struct tsffi_layout *L) {
    char marker[PATH_MAX], code[PATH_MAX];
    if (!tsffi_join(marker, sizeof marker, lib_dir,
                    "Resources/" TSFFI_APP_DIRNAME "/turbospark_bundle.txt") ||
        !tsffi_is_file(marker))
        return 0;
    L->bundled = 1;
    if (!tsffi_join(L->home, sizeof L->home, lib_dir, "Resources/" TSFFI_APP_DIRNAME) ||
        !tsffi_join(code, sizeof code, lib_dir, "Frameworks") ||
        !tsffi_join(L->stdlib_zip, sizeof L->stdlib_zip, L->home, TSFFI_BUILD_STDLIB_ZIP_NAME) ||
        !tsffi_join(L->stdlib, sizeof L->stdlib, L->home, "lib/" TSFFI_BUILD_PYTHON_DIRNAME) ||
        snprintf(L->dynload, sizeof L->dynload, "%s", code) >= (int)sizeof L->dynload ||
        !tsffi_join(L->package_parent, sizeof L->package_parent, L->home, "site-packages"))
        return -1;
    return 1; /* cffi's backend is among the extension modules: no cffi_dir */
}

static int tsffi_find_layout(const char *lib_dir, struct tsffi_layout *L) {
    char probe[PATH_MAX];
    char up[PATH_MAX];
    int app;
    memset(L, 0, sizeof *L);
    app = tsffi_find_app_layout(lib_dir, L);
    if (app != 0)
        return app > 0 ? 0 : -1;
    /* Bundle: <root>/lib/libtsffi.so and <root>/python/. */
    if (snprintf(up, sizeof up, "%s/..", lib_dir) >= (int)sizeof up)
        return -1;
    if (realpath(up, probe) != NULL) {
        char marker[PATH_MAX];
        if (tsffi_join(marker, sizeof marker, probe, "python/turbospark_bundle.txt") &&
            tsffi_is_file(marker)) {
            L->bundled = 1;
            if (!tsffi_join(L->home, sizeof L->home, probe, "python") ||
                !tsffi_join(L->stdlib_zip, sizeof L->stdlib_zip, L->home,
                            TSFFI_BUILD_STDLIB_ZIP_NAME) ||
                !tsffi_join(L->stdlib, sizeof L->stdlib, L->home,
                            "lib/" TSFFI_BUILD_PYTHON_DIRNAME) ||
                !tsffi_join(L->dynload, sizeof L->dynload, L->stdlib, "lib-dynload") ||
                !tsffi_join(L->package_parent, sizeof L->package_parent, L->home, "site-packages"))
                return -1;
            return 0; /* cffi's backend is bundled beside the package */
        }
    }
    /* Installed package: <site-packages>/turbospark_ffi/libtsffi.so */
    if (snprintf(L->package_parent, sizeof L->package_parent, "%s", lib_dir) >=
        (int)sizeof L->package_parent)
        return -1;
    {
        char *slash = strrchr(L->package_parent, '/');
        if (slash == NULL)
            return -1;
        *slash = '\0';
    }
    tsffi_python_home(L);
    /* cffi's backend: beside the package (pip installs both into one
     * site-packages), else in the site-packages of the Python home this was
     * built against. Decided here, from what exists: where cffi was while the
     * library was BUILT is never searched -- pip builds in a throw-away
     * temporary directory that anyone may re-create and fill with modules. */
    if (!tsffi_holds_cffi_backend(L->package_parent) &&
        !tsffi_join(L->cffi_dir, sizeof L->cffi_dir, L->stdlib, "site-packages"))
        return -1;
    return 0;
}

static int tsffi_append_path(PyConfig *config, const char *path) {
    /* After Py_PreInitialize in UTF-8 mode: decodes UTF-8, whatever the locale. */
    wchar_t *w = Py_DecodeLocale(path, NULL);
    PyStatus status;
    if (w == NULL)
        return -1;
    status = PyWideStringList_Append(&config->module_search_paths, w);
    PyMem_RawFree(w);
    return PyStatus_Exception(status) ? -1 : 0;
}

static int tsffi_set_wide(PyConfig *config, wchar_t **field, const char *value) {
    PyStatus status = PyConfig_SetBytesString(config, field, value);
    return PyStatus_Exception(status) ? -1 : 0;
}

/* The pending Python exception as text in buf (cleared); for messages. */
static void tsffi_py_error_text(char *buf, size_t cap) {
    PyObject *type, *value, *tb, *text = NULL;
    const char *detail = NULL;
    PyErr_Fetch(&type, &value, &tb);
    if (value != NULL)
        text = PyObject_Str(value);
    if (text != NULL)
        detail = PyUnicode_AsUTF8(text);
    snprintf(buf, cap, "%s%s%s", type != NULL ? ((PyTypeObject *)type)->tp_name : "",
             type != NULL ? ": " : "", detail != NULL ? detail : "unknown error");
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
}

/* The sealed search path. sys.path holds only the standard library (and the
 * extension modules'): the package's folder is a site-packages, where any
 * distribution may install a module named like one of the standard library
 * (the enum34, dataclasses and typing back-ports do), and first on sys.path
 * it would replace the standard library for the library. So the folder is
 * reached through this finder, which admits only the names listed in
 * `places` (a top-level name and the folders it may come from), and only
 * after the standard library's own finder (`first` false) -- or, in a Python
 * host, first and for the one import of the package (the init code removes
 * it after: the host's import system is the host's). */
static const char tsffi_seal_source[] =
    "import sys\n"
    "from _frozen_importlib_external import PathFinder\n"
    "class TsffiSealedFinder:\n"
    "    temporary = first\n"
    "    def __init__(self, places):\n"
    "        self.places = places\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        where = self.places.get(name)\n"
    "        if where is None or path is not None:\n"
    "            return None\n"
    "        return PathFinder.find_spec(name, list(where), target)\n"
    "    def invalidate_caches(self):\n"
    "        pass\n"
    "sys.meta_path.insert(0 if first else len(sys.meta_path), TsffiSealedFinder(places))\n";

/* Run tsffi_seal_source (GIL held). `backend_dirs`: where _cffi_backend may
 * come from, NULL to leave it to the host. 0, or -1 with the verdict set. */
static int tsffi_seal(const char *package_parent, const char *const *backend_dirs, int first) {
    PyObject *globals = PyDict_New(), *places = PyDict_New(), *result = NULL;
    PyObject *package = PyUnicode_DecodeFSDefault(package_parent);
    PyObject *package_dirs = package != NULL ? PyTuple_Pack(1, package) : NULL;
    PyObject *backend = NULL;
    int ok = globals != NULL && places != NULL && package_dirs != NULL &&
             PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) == 0 &&
             PyDict_SetItemString(globals, "first", first ? Py_True : Py_False) == 0 &&
             PyDict_SetItemString(places, "turbospark_ffi", package_dirs) == 0 &&
             PyDict_SetItemString(globals, "places", places) == 0;
    if (ok && backend_dirs != NULL) {
        int i;
        ok = (backend = PyList_New(0)) != NULL &&
             PyDict_SetItemString(places, "_cffi_backend", backend) == 0;
        for (i = 0; ok && backend_dirs[i] != NULL; i++) {
            PyObject *dir = PyUnicode_DecodeFSDefault(backend_dirs[i]);
            ok = dir != NULL && PyList_Append(backend, dir) == 0;
            Py_XDECREF(dir);
        }
    }
    if (ok)
        ok = (result = PyRun_String(tsffi_seal_source, Py_file_input, globals, globals)) != NULL;
    if (!ok) {
        char detail[512];
        tsffi_py_error_text(detail, sizeof detail);
        tsffi_runtime_fail("could not set up the embedded Python's import of %s: %s",
                           package_parent, detail);
    }
    Py_XDECREF(result);
    Py_XDECREF(backend);
    Py_XDECREF(package_dirs);
    Py_XDECREF(package);
    Py_XDECREF(places);
    Py_XDECREF(globals);
    return ok ? 0 : -1;
}

/* The host's stderr while the library starts its interpreter. CPython
 * writes to fd 2 when its start fails ("Python path configuration:", about
 * 1 KB, seen with the host's descriptors exhausted), and so does cffi's
 * start-up; nothing of that may reach a GUI's log. So, only while the
 * library owns the start, fd 2 is a pipe: what arrives is the library's
 * message on a failure (CPython's report, in the status-9 message) and is
 * written to the real fd 2 after a success (a host thread's lines written
 * meanwhile are delayed, not lost). Both ends are non-blocking: a host
 * thread writing more than the pipe holds (64 KiB on Linux) in those ~25 ms
 * gets EAGAIN for the excess rather than blocking the start, or being
 * blocked by it. The ends are moved above fd 2, so a host that closed fds
 * 0-2 never has the pipe land on them. */
struct tsffi_capture {
    int saved; /* the host's fd 2, or -1 if it had none */
    int read_end;
};

static int tsffi_fd_above_stdio(int fd) {
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    close(fd);
    return moved;
}

/* 0, or -1 (errno set: no descriptor was free). */
static int tsffi_capture_begin(struct tsffi_capture *c) {
    int ends[2], write_end;
    if (pipe(ends) != 0)
        return -1;
    c->read_end = tsffi_fd_above_stdio(ends[0]);
    write_end = tsffi_fd_above_stdio(ends[1]);
    c->saved = fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (c->read_end < 0 || write_end < 0 || (c->saved < 0 && errno != EBADF)) {
        int err = errno;
        if (c->read_end >= 0)
            close(c->read_end);
        if (write_end >= 0)
            close(write_end);
        if (c->saved >= 0)
            close(c->saved);
        errno = err;
        return -1;
    }
    fcntl(c->read_end, F_SETFL, O_NONBLOCK);
    fcntl(write_end, F_SETFL, O_NONBLOCK);
    dup2(write_end, 2);
    close(write_end);
    return 0;
}

/* Restore fd 2; what was captured goes to text (NUL-terminated, cut to
 * cap) and, when forward is set, to the host's fd 2. */
static void tsffi_capture_end(struct tsffi_capture *c, int forward, char *text, size_t cap) {
    char chunk[4096];
    size_t kept = 0;
    ssize_t n;
    if (c->saved >= 0) {
        dup2(c->saved, 2);
        close(c->saved);
    } else {
        close(2);
    }
    while ((n = read(c->read_end, chunk, sizeof chunk)) > 0) {
        size_t take = (size_t)n < cap - 1 - kept ? (size_t)n : cap - 1 - kept;
        memcpy(text + kept, chunk, take);
        kept += take;
        if (forward && c->saved >= 0) {
            ssize_t off = 0, w;
            while (off < n && (w = write(2, chunk + off, (size_t)(n - off))) > 0)
                off += w;
        }
    }
    text[kept] = '\0';
    close(c->read_end);
}

/* Start an interpreter of our own: UTF-8 mode, isolated (no environment
 * variables, no user site, no current directory on sys.path), no signal
 * handlers (the host's SIGINT stays the host's), no bytecode writing into the
 * host's folders, home and search path pinned, the package's folder sealed.
 * Returns with the GIL released. */
static int tsffi_init_own_interpreter(struct tsffi_layout *L) {
    PyPreConfig preconfig;
    PyConfig config;
    PyStatus status;

    /* PEP 540: file names, argv and the environment are UTF-8 whatever the
     * locale. The C ABI takes UTF-8 paths; decoded by the locale, a host that
     * never called setlocale (the "C" locale: ASCII) could not name
     * `Modèles/mtp`, and one under a Latin-1 locale read another directory
     * for the same bytes. The isolated preconfig leaves the host's LC_CTYPE
     * alone (configure_locale = 0). */
    PyPreConfig_InitIsolatedConfig(&preconfig);
    preconfig.utf8_mode = 1;
    status = Py_PreInitialize(&preconfig);
    if (PyStatus_Exception(status)) {
        tsffi_runtime_fail("the embedded Python failed to pre-initialize: %s",
                           status.err_msg ? status.err_msg : "unknown error");
        return -1;
    }
    PyConfig_InitIsolatedConfig(&config);
    config.install_signal_handlers = 0;
    config.write_bytecode = 0;
    config.site_import = 0;
    config.user_site_directory = 0;
    config.pathconfig_warnings = 0;
    config.parse_argv = 0;
    config.buffered_stdio = 0;
    config.module_search_paths_set = 1;
    if (tsffi_set_wide(&config, &config.home, L->home) != 0 ||
        /* Absolute, so CPython's path computation never asks for the working
         * directory: a host whose cwd was removed would get an "Exception
         * ignored" on its stderr. The "executable" is the library itself. */
        tsffi_set_wide(&config, &config.program_name, tsffi_library_path) != 0 ||
        tsffi_set_wide(&config, &config.executable, tsffi_library_path) != 0 ||
        tsffi_set_wide(&config, &config.base_executable, tsffi_library_path) != 0 ||
        (L->bundled && tsffi_append_path(&config, L->stdlib_zip) != 0) ||
        tsffi_append_path(&config, L->stdlib) != 0 || tsffi_append_path(&config, L->dynload) != 0) {
        PyConfig_Clear(&config);
        tsffi_runtime_fail("could not configure the embedded Python (out of memory?)");
        return -1;
    }
    status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
        tsffi_runtime_fail("the embedded Python failed to start: %s%s",
                           status.err_msg ? status.err_msg : "unknown error",
                           status.func ? " (in CPython's start-up)" : "");
        return -1;
    }
    tsffi_owns_interpreter = 1;
    return 0;
}

/* After the interpreter started (GIL held): the seal, then cffi's backend,
 * which must import before cffi's own start-up runs: if it cannot, cffi
 * would print to the host's stderr and return 0 forever. Releases the GIL. */
static int tsffi_load_backend(struct tsffi_layout *L) {
    const char *backend_dirs[3] = {L->package_parent, NULL, NULL};
    PyObject *backend;
    if (L->cffi_dir[0] != '\0' && strcmp(L->cffi_dir, L->package_parent) != 0)
        backend_dirs[1] = L->cffi_dir;
    if (tsffi_seal(L->package_parent, backend_dirs, 0) != 0) {
        PyEval_SaveThread();
        return -1;
    }
    backend = PyImport_ImportModule("_cffi_backend");
    if (backend == NULL) {
        char detail[1024];
        tsffi_py_error_text(detail, sizeof detail);
        tsffi_runtime_fail("cffi is missing: cannot import its backend _cffi_backend "
                           "(%s); install cffi beside the package, in %s",
                           detail, L->package_parent);
        PyEval_SaveThread();
        return -1;
    }
    Py_DECREF(backend);
    PyEval_SaveThread();
    return 0;
}

/* The address space kept free for CPython's start and the first call: a
 * margin, not a measured minimum. Seen: a C host's first plan under
 * `prlimit --as=60000000` answers; at 11 MB and 30 MB this probe refuses
 * (status 9). CPython answers an allocation that fails during its start
 * with a fatal error, which aborts the host (issue 32: seen at 10.5 MB). */
#define TSFFI_START_ADDRESS_SPACE ((size_t)48 * 1024 * 1024)

/* Whether the process's address-space limit leaves the start room: a
 * reservation that is never touched (PROT_NONE), given back at once. */
static int tsffi_check_address_space(void) {
    struct rlimit limit;
    void *probe;
    if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
        return 0;
    probe = mmap(NULL, TSFFI_START_ADDRESS_SPACE, PROT_NONE, MAP_PRIVATE | MAP_ANON, -1, 0);
    if (probe != MAP_FAILED) {
        munmap(probe, TSFFI_START_ADDRESS_SPACE);
        return 0;
    }
    tsffi_runtime_fail("the process's address-space limit (RLIMIT_AS = %llu bytes) leaves less "
                       "than the %u MiB starting the embedded Python needs (CPython aborts the "
                       "process when memory runs out during its start, so the library does not "
                       "start it); raise the limit (ulimit -v) by at least that much",
                       (unsigned long long)limit.rlim_cur,
                       (unsigned)(TSFFI_START_ADDRESS_SPACE >> 20));
    return -1;
}

/* The whole start of an interpreter of our own, with the host's fd 2
 * captured from before CPython's first word to after cffi's last. */
static int tsffi_start_own_interpreter(struct tsffi_layout *L) {
    struct tsffi_capture capture;
    char captured[2048];
    int failed;
    struct rlimit files;
    if (tsffi_check_python(L) != 0 || tsffi_check_search_path(L) != 0)
        return -1;
    if (tsffi_capture_begin(&capture) != 0) {
        int err = errno;
        tsffi_runtime_fail(
            "no file descriptor is free (%s; RLIMIT_NOFILE = %llu): starting the "
            "embedded Python needs several, so the library does not start it",
            strerror(err),
            getrlimit(RLIMIT_NOFILE, &files) == 0 ? (unsigned long long)files.rlim_cur : 0ULL);
        return -1;
    }
    failed = tsffi_init_own_interpreter(L) != 0 || tsffi_load_backend(L) != 0 ||
             cffi_start_python() != 0;
    tsffi_capture_end(&capture, !failed, captured, sizeof captured);
    if (failed && captured[0] != '\0') {
        size_t n = strlen(tsffi_runtime_message);
        char *c;
        for (c = captured; *c != '\0'; c++)
            if (*c == '\n' || *c == '\t')
                *c = ' ';
        snprintf(tsffi_runtime_message + n, sizeof tsffi_runtime_message - n,
                 "; the Python start-up reported: %s", captured);
    }
    return failed ? -1 : 0;
}

/* Set by Py_FinalizeEx (Py_AtExit): the interpreter the library's objects
 * live in is gone; nothing may touch them again (PyGILState_Ensure on a
 * finalized runtime crashes the host: SIGSEGV, seen). */
static int tsffi_python_finalized = 0; /* __atomic only */
static const char tsffi_finalized_message[] =
    "the Python interpreter libtsffi runs in was finalized (Py_FinalizeEx was called by the "
    "host after the library started): the library's Python objects died with it, so no call "
    "that needs Python can be answered in this process again (not even after a new "
    "Py_Initialize, whose interpreter they do not belong to); finalize Python only after the "
    "last call to libtsffi";

static void tsffi_on_python_finalized(void) {
    __atomic_store_n(&tsffi_python_finalized, 1, __ATOMIC_SEQ_CST);
}

static int tsffi_python_gone(void) {
    return __atomic_load_n(&tsffi_python_finalized, __ATOMIC_SEQ_CST) || !Py_IsInitialized();
}

static void tsffi_runtime_start(void) {
    Dl_info self, py;
    struct tsffi_layout layout;
    char lib_dir[PATH_MAX];
    char *slash;

    /* A static function: its address is always inside this file's mapping.
     * An exported one (tsffi_abi_version) resolves through the process's
     * global scope, and a library loaded first that exports the same name
     * would make us look for our package beside IT. */
    if (dladdr((void *)&tsffi_runtime_start, &self) == 0 || self.dli_fname == NULL ||
        realpath(self.dli_fname, tsffi_library_path) == NULL) {
        tsffi_runtime_fail("cannot locate libtsffi itself (dladdr/realpath failed)");
        return;
    }
    snprintf(lib_dir, sizeof lib_dir, "%s", tsffi_library_path);
    slash = strrchr(lib_dir, '/');
    if (slash != NULL)
        *slash = '\0';
    if (tsffi_find_layout(lib_dir, &layout) != 0) {
        tsffi_runtime_fail("the library's path %s is too long to derive its package from",
                           tsffi_library_path);
        return;
    }
    snprintf(tsffi_package_parent, sizeof tsffi_package_parent, "%s", layout.package_parent);

    /* A host that dlopen()ed us RTLD_LOCAL (a plugin loader) makes libpython's
     * symbols invisible to the extension modules Python will load, which are
     * not linked against it on Linux ("undefined symbol: PyExc_..."). Promote
     * the libpython already loaded to RTLD_GLOBAL. */
    if (dladdr((void *)&Py_IsInitialized, &py) != 0 && py.dli_fname != NULL) {
        void *handle = dlopen(py.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
        (void)handle; /* deliberately kept: libpython is never unloaded */
    }

    if (!Py_IsInitialized()) {
        if (tsffi_start_own_interpreter(&layout) != 0)
            return;
    } else {
        /* The host is itself a Python process; its interpreter, its streams
         * and its signal handlers are the host's, and we leave them. The
         * package beside the library is found first, for its one import. */
        PyGILState_STATE gil;
        if (tsffi_check_running_python() != 0)
            return;
        gil = PyGILState_Ensure();
        int sealed = tsffi_seal(layout.package_parent, NULL, 1);
        PyGILState_Release(gil);
        if (sealed != 0)
            return;
        if (cffi_start_python() != 0) {
            tsffi_runtime_fail("cffi's embedding start-up failed (the init code could not run); "
                               "package directory: %s",
                               tsffi_package_parent);
            return;
        }
    }
    /* Whoever owns it, a host may finalize the interpreter: be told. */
    Py_AtExit(tsffi_on_python_finalized);
    {
        char message[sizeof tsffi_runtime_message];
        int32_t status;
        message[0] = '\0';
        status = tsffi_py_init_status(message, sizeof message);
        if (status != TSFFI_OK) {
            if (message[0] == '\0')
                snprintf(message, sizeof message,
                         "the turbospark_ffi package did not load (status %d)", (int)status);
            snprintf(tsffi_runtime_message, sizeof tsffi_runtime_message, "%s", message);
            tsffi_runtime_status = TSFFI_ERR_RUNTIME;
            return;
        }
    }
    tsffi_runtime_status = TSFFI_OK;
}

/* The stack CPython's start runs on. A GUI may call first from any thread,
 * and CPython's start with the package's first import needs more than
 * 64 KiB (a first call from a 64 KiB thread died with SIGSEGV; 96 KiB
 * worked): the start runs on a thread of the library's own, joined before
 * the first call goes on. 8 MiB: the main thread's default on Linux and
 * macOS. */
#define TSFFI_START_STACK ((size_t)8 * 1024 * 1024)

static void *tsffi_start_thread(void *unused) {
    (void)unused;
    tsffi_runtime_start();
    return NULL;
}

static void tsffi_runtime_start_once(void) {
    pthread_attr_t attr;
    pthread_t thread;
    int err;
    if (Py_IsInitialized()) {
        /* A Python host: its calling thread may hold the GIL (ctypes.PyDLL),
         * which a thread of ours would wait for forever. Its threads are
         * Python's, with Python's stacks. */
        tsffi_runtime_start();
        return;
    }
    if (tsffi_check_address_space() != 0)
        return;
    if ((err = pthread_attr_init(&attr)) != 0) {
        tsffi_runtime_fail("could not start the library's start-up thread: %s", strerror(err));
        return;
    }
    if ((err = pthread_attr_setstacksize(&attr, TSFFI_START_STACK)) == 0)
        err = pthread_create(&thread, &attr, tsffi_start_thread, NULL);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        tsffi_runtime_fail("could not start the library's start-up thread (a %u MiB stack, for "
                           "CPython's start): %s",
                           (unsigned)(TSFFI_START_STACK >> 20), strerror(err));
        return;
    }
    pthread_join(thread, NULL);
}

/* Start the runtime once; every later call gets the first call's verdict. */
static int32_t tsffi_enter(void) {
    pthread_once(&tsffi_runtime_once, tsffi_runtime_start_once);
    if (tsffi_runtime_status != TSFFI_OK) {
        tsffi_set_error_str(tsffi_runtime_message);
        return TSFFI_ERR_RUNTIME;
    }
    return TSFFI_OK;
}

static int32_t tsffi_null_argument(const char *name, const char *what) {
    char message[256];
    snprintf(message, sizeof message, "%s is NULL; accepts %s", name, what);
    tsffi_set_error_str(message);
    return TSFFI_ERR_INVALID_ARGUMENT;
}

/* The common tail of every Python-backed call: whatever Python did, the
 * contract holds -- TSFFI_OK with a result, or an error status with a message
 * and *out NULL. */
static int32_t tsffi_call(int32_t fn, const char *a, const char *b, const char *c, char **out) {
    int32_t status;
    *out = NULL;
    /* Checked before PyGILState_Ensure, which a finalized runtime crashes in. */
    if (tsffi_python_gone()) {
        tsffi_set_error_str(tsffi_finalized_message);
        return TSFFI_ERR_RUNTIME;
    }
    status = tsffi_py_call(fn, a, b != NULL ? b : "", c, out);
    if (status == TSFFI_OK && *out == NULL) {
        tsffi_set_error_str("internal error: the call produced no result");
        return TSFFI_ERR_INTERNAL;
    }
    if (status != TSFFI_OK) {
        if (*out != NULL) {
            free(*out);
            *out = NULL;
        }
        if (tsffi_error_length() == 0)
            tsffi_set_error_str("internal error: the call failed without a message");
    }
    return status;
}

#define TSFFI_OUT_ACCEPTS "the address of a char * to receive the result"
#define TSFFI_DIR_ACCEPTS "the path of an install directory, as UTF-8"
#define TSFFI_ENGINE_ACCEPTS                                                                       \
    "ts_session_info_json's text, or {\"status\": n, \"message\": \"...\"} for an open "           \
    "that failed"

/* ------------------------------------------------------------------------
 * The public entry points. */

TSFFI_API uint32_t tsffi_abi_version(void) { return TSFFI_ABI_VERSION; }

TSFFI_API size_t tsffi_last_error(char *buf, size_t cap) {
    struct tsffi_error *e = tsffi_error_get(0);
    size_t len = e != NULL ? e->len : 0;
    if (buf != NULL && cap > 0) {
        size_t n = len < cap - 1 ? len : cap - 1;
        /* Never cut a UTF-8 sequence in half: back off to its lead byte. */
        if (n < len)
            while (n > 0 && ((unsigned char)e->msg[n] & 0xC0) == 0x80)
                n--;
        if (n > 0)
            memcpy(buf, e->msg, n);
        buf[n] = '\0';
    }
    return len;
}

TSFFI_API void tsffi_string_free(char *s) { free(s); }

/* The one shape of every Python-backed entry point: clear the last error,
 * check the pointers (before starting anything, so a NULL answers the same
 * whatever state the runtime is in), start the runtime once, dispatch.
 * `required` is the argument that must not be NULL (or NULL if none); `c`,
 * a third argument that must not be NULL either, is passed only when
 * `c_name` is given (Python is told a two-argument call by c == NULL). */
static int32_t tsffi_entry(int32_t fn, const char *required, const char *required_name,
                           const char *required_accepts, const char *a, const char *b,
                           const char *c, const char *c_name, char **out_json) {
    int32_t status;
    tsffi_error_clear();
    if (out_json == NULL)
        return tsffi_null_argument("out_json", TSFFI_OUT_ACCEPTS);
    *out_json = NULL;
    if (required_name != NULL && required == NULL)
        return tsffi_null_argument(required_name, required_accepts);
    if (c_name != NULL && c == NULL)
        return tsffi_null_argument(c_name, TSFFI_ENGINE_ACCEPTS);
    if (tsffi_forked_while_busy) {
        tsffi_set_error_str(tsffi_forked_message);
        return TSFFI_ERR_RUNTIME;
    }
    if (__atomic_load_n(&tsffi_python_finalized, __ATOMIC_SEQ_CST)) {
        tsffi_set_error_str(tsffi_finalized_message);
        return TSFFI_ERR_RUNTIME;
    }
    __atomic_add_fetch(&tsffi_threads_inside, 1, __ATOMIC_SEQ_CST);
    pthread_once(&tsffi_classify_once, tsffi_classify_host);
    if (tsffi_reads_install(fn) && tsffi_cache_get(fn, a, b != NULL ? b : "", out_json))
        status = TSFFI_OK;
    else if ((status = tsffi_gil_within_reach()) == TSFFI_OK &&
             (status = tsffi_enter()) == TSFFI_OK)
        status = tsffi_call(fn, a != NULL ? a : "", b, c, out_json);
    __atomic_sub_fetch(&tsffi_threads_inside, 1, __ATOMIC_SEQ_CST);
    return status;
}

TSFFI_API int32_t tsffi_build_info_json(char **out_json) {
    return tsffi_entry(TSFFI__FN_BUILD_INFO, NULL, NULL, NULL, "", "", NULL, NULL, out_json);
}

TSFFI_API int32_t tsffi_resolve_drafter(const char *model_dir, const char *options_json,
                                        char **out_json) {
    return tsffi_entry(TSFFI__FN_RESOLVE_DRAFTER, model_dir, "model_dir", TSFFI_DIR_ACCEPTS,
                       model_dir, options_json, NULL, NULL, out_json);
}

TSFFI_API int32_t tsffi_draft_policies(const char *choice_json, const char *options_json,
                                       char **out_json) {
    return tsffi_entry(TSFFI__FN_DRAFT_POLICIES, choice_json, "choice_json",
                       "the JSON object tsffi_resolve_drafter returned", choice_json, options_json,
                       NULL, NULL, out_json);
}

TSFFI_API int32_t tsffi_resolve_speculation(const char *options_json, char **out_json) {
    return tsffi_entry(TSFFI__FN_RESOLVE_SPECULATION, NULL, NULL, NULL, options_json, "", NULL,
                       NULL, out_json);
}

TSFFI_API int32_t tsffi_speculation_plan(const char *model_dir, const char *options_json,
                                         char **out_json) {
    return tsffi_entry(TSFFI__FN_SPECULATION_PLAN, model_dir, "model_dir", TSFFI_DIR_ACCEPTS,
                       model_dir, options_json, NULL, NULL, out_json);
}

TSFFI_API int32_t tsffi_speculation_choices(const char *model_dir, const char *options_json,
                                            char **out_json) {
    return tsffi_entry(TSFFI__FN_SPECULATION_CHOICES, model_dir, "model_dir", TSFFI_DIR_ACCEPTS,
                       model_dir, options_json, NULL, NULL, out_json);
}

TSFFI_API int32_t tsffi_install_info_json(const char *model_dir, char **out_json) {
    return tsffi_entry(TSFFI__FN_INSTALL_INFO, model_dir, "model_dir", TSFFI_DIR_ACCEPTS, model_dir,
                       "", NULL, NULL, out_json);
}

TSFFI_API int32_t tsffi_store_json(char **out_json) {
    return tsffi_entry(TSFFI__FN_STORE, NULL, NULL, NULL, "", "", NULL, NULL, out_json);
}

TSFFI_API int32_t tsffi_reconcile(const char *model_dir, const char *options_json,
                                  const char *engine_json, char **out_json) {
    return tsffi_entry(TSFFI__FN_RECONCILE, model_dir, "model_dir", TSFFI_DIR_ACCEPTS, model_dir,
                       options_json, engine_json, "engine_json", out_json);
}
