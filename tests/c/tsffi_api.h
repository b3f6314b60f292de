/* The library's functions as a table, filled either from the linked symbols
 * or, with TSFFI_HOST_DLOPEN, through dlopen(RTLD_NOW | RTLD_LOCAL) + dlsym: one
 * host source serves both kinds of host. Shared by tests/c and
 * tests/reliability. A driver may define TSFFI_API_FAIL_PREFIX for its failure
 * lines. */
#ifndef TSFFI_TEST_API_H
#define TSFFI_TEST_API_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsffi.h"

#ifdef TSFFI_HOST_DLOPEN
#include <dlfcn.h>
#endif

#ifndef TSFFI_API_FAIL_PREFIX
#define TSFFI_API_FAIL_PREFIX ""
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
    int32_t (*speculation_choices)(const char *, const char *, char **);
};

static struct api api;

#ifdef TSFFI_HOST_DLOPEN
static int load_symbol(void *handle, const char *name, void *slot, size_t size) {
    void *sym = dlsym(handle, name);
    if (sym == NULL) {
        printf(TSFFI_API_FAIL_PREFIX "dlsym %s failed\n", name);
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
        printf(TSFFI_API_FAIL_PREFIX "the dlopen host needs the library path\n");
        return -1;
    }
    /* TSFFI_TEST_LOAD_FIRST: a library the process loads globally BEFORE
     * this one (tests/test_coexistence.py: the engine's stand-in). */
    if (getenv("TSFFI_TEST_LOAD_FIRST") != NULL &&
        dlopen(getenv("TSFFI_TEST_LOAD_FIRST"), RTLD_NOW | RTLD_GLOBAL) == NULL) {
        printf(TSFFI_API_FAIL_PREFIX "dlopen of TSFFI_TEST_LOAD_FIRST failed: %s\n", dlerror());
        return -1;
    }
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        printf(TSFFI_API_FAIL_PREFIX "dlopen failed: %s\n", dlerror());
        return -1;
    }
#define TSFFI_LOAD(field, name) \
    if (load_symbol(handle, name, &api.field, sizeof api.field) != 0) return -1
    TSFFI_LOAD(abi_version, "tsffi_abi_version");
    TSFFI_LOAD(build_info_json, "tsffi_build_info_json");
    TSFFI_LOAD(last_error, "tsffi_last_error");
    TSFFI_LOAD(string_free, "tsffi_string_free");
    TSFFI_LOAD(resolve_drafter, "tsffi_resolve_drafter");
    TSFFI_LOAD(draft_policies, "tsffi_draft_policies");
    TSFFI_LOAD(resolve_speculation, "tsffi_resolve_speculation");
    TSFFI_LOAD(speculation_plan, "tsffi_speculation_plan");
    TSFFI_LOAD(install_info_json, "tsffi_install_info_json");
    TSFFI_LOAD(speculation_choices, "tsffi_speculation_choices");
#undef TSFFI_LOAD
    return 0;
}
#else
static int load_api(const char *path) {
    (void)path;
    api.abi_version = tsffi_abi_version;
    api.build_info_json = tsffi_build_info_json;
    api.last_error = tsffi_last_error;
    api.string_free = tsffi_string_free;
    api.resolve_drafter = tsffi_resolve_drafter;
    api.draft_policies = tsffi_draft_policies;
    api.resolve_speculation = tsffi_resolve_speculation;
    api.speculation_plan = tsffi_speculation_plan;
    api.install_info_json = tsffi_install_info_json;
    api.speculation_choices = tsffi_speculation_choices;
    return 0;
}
#endif

#endif /* TSFFI_TEST_API_H */
