/* The library's functions as a table, filled either from the linked symbols
 * or, with TS_HOST_DLOPEN, through dlopen(RTLD_NOW | RTLD_LOCAL) + dlsym: one
 * host source serves both kinds of host. Shared by tests/c and
 * tests/reliability. A driver may define TS_API_FAIL_PREFIX for its failure
 * lines. */
#ifndef TS_TEST_API_H
#define TS_TEST_API_H

#include <stdio.h>
#include <string.h>

#include "turbospark_ffi.h"

#ifdef TS_HOST_DLOPEN
#include <dlfcn.h>
#endif

#ifndef TS_API_FAIL_PREFIX
#define TS_API_FAIL_PREFIX ""
#endif

struct api {
    uint32_t (*abi_version)(void);
    int32_t (*build_info_json)(char **);
    size_t (*last_error)(char *, size_t);
    void (*string_free)(char *);
    int32_t (*resolve_drafter)(const char *, const char *, char **);
    int32_t (*draft_policies)(const char *, const char *, char **);
    int32_t (*resolve_speculation)(const char *, char **);
    int32_t (*speculation_plan)(const char *, const char *, char **);
    int32_t (*install_info_json)(const char *, char **);
};

static struct api api;

#ifdef TS_HOST_DLOPEN
static int load_symbol(void *handle, const char *name, void *slot, size_t size) {
    void *sym = dlsym(handle, name);
    if (sym == NULL) {
        printf(TS_API_FAIL_PREFIX "dlsym %s failed\n", name);
        return -1;
    }
    /* ISO C has no object-to-function pointer conversion; POSIX guarantees
     * the representation, so copy the bytes. */
    memcpy(slot, &sym, size);
    return 0;
}

static int load_api(const char *path) {
    void *handle;
    if (path == NULL) {
        printf(TS_API_FAIL_PREFIX "the dlopen host needs the library path\n");
        return -1;
    }
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        printf(TS_API_FAIL_PREFIX "dlopen failed: %s\n", dlerror());
        return -1;
    }
#define TS_LOAD(field, name) \
    if (load_symbol(handle, name, &api.field, sizeof api.field) != 0) return -1
    TS_LOAD(abi_version, "ts_abi_version");
    TS_LOAD(build_info_json, "ts_build_info_json");
    TS_LOAD(last_error, "ts_last_error");
    TS_LOAD(string_free, "ts_string_free");
    TS_LOAD(resolve_drafter, "ts_resolve_drafter");
    TS_LOAD(draft_policies, "ts_draft_policies");
    TS_LOAD(resolve_speculation, "ts_resolve_speculation");
    TS_LOAD(speculation_plan, "ts_speculation_plan");
    TS_LOAD(install_info_json, "ts_install_info_json");
#undef TS_LOAD
    return 0;
}
#else
static int load_api(const char *path) {
    (void)path;
    api.abi_version = ts_abi_version;
    api.build_info_json = ts_build_info_json;
    api.last_error = ts_last_error;
    api.string_free = ts_string_free;
    api.resolve_drafter = ts_resolve_drafter;
    api.draft_policies = ts_draft_policies;
    api.resolve_speculation = ts_resolve_speculation;
    api.speculation_plan = ts_speculation_plan;
    api.install_info_json = ts_install_info_json;
    return 0;
}
#endif

#endif /* TS_TEST_API_H */
