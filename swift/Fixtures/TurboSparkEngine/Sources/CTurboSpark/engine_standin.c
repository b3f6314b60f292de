/* A stand-in for the engine's library (tests only): every function the
 * engine exports, each returning TS_STANDIN_STATUS and leaving its own
 * recognisable last error ("stand-in engine: <function>"), kept per thread
 * like the engine's. The tests build it as the engine ships, a static
 * libturbospark_ffi.a (tests/engine_standin.py), and link it into a host
 * beside libtsffi, as the engine's app would: if any of this library's calls
 * reached one of these, or this library's errors reached the engine's
 * ts_last_error, a test sees it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turbospark.h"

static _Thread_local char standin_error[128];

static int32_t standin(const char *function) {
    snprintf(standin_error, sizeof standin_error, "stand-in engine: %s", function);
    return TS_STANDIN_STATUS;
}

size_t ts_last_error(char *buf, size_t cap) {
    size_t len = strlen(standin_error);
    if (buf != NULL && cap > 0) {
        size_t n = len < cap - 1 ? len : cap - 1;
        memcpy(buf, standin_error, n);
        buf[n] = '\0';
    }
    return len;
}

/* Our strings are malloc'd too; one freed here would still be freed, so
 * count instead: a test reads the count back through ts_system_info_json. */
static unsigned long standin_frees;
void ts_string_free(char *s) {
    if (s != NULL)
        standin_frees++;
    free(s);
}

uint32_t ts_abi_version(void) { return TS_ABI_VERSION; }

int32_t ts_session_open(const char *model, const char *options_json, TsSession **out) {
    (void)model, (void)options_json;
    if (out != NULL)
        *out = NULL;
    return standin("ts_session_open");
}
int32_t ts_session_close(TsSession *s) { (void)s; return standin("ts_session_close"); }
int32_t ts_session_cancel(TsSession *s) { (void)s; return standin("ts_session_cancel"); }
int32_t ts_session_info_json(TsSession *s, char **o) {
    (void)s, (void)o;
    return standin("ts_session_info_json");
}
int32_t ts_session_phases_json(TsSession *s, char **o) {
    (void)s, (void)o;
    return standin("ts_session_phases_json");
}
int32_t ts_peak_footprint_bytes(TsSession *s, uint64_t *o) {
    (void)s, (void)o;
    return standin("ts_peak_footprint_bytes");
}
int32_t ts_system_info_json(char **o) {
    char text[64];
    int n = snprintf(text, sizeof text, "{\"standinFrees\": %lu}", standin_frees);
    if (o != NULL && (*o = (char *)malloc((size_t)n + 1)) != NULL)
        memcpy(*o, text, (size_t)n + 1);
    return TS_OK;
}
int32_t ts_session_count_tokens(TsSession *s, const char *t, uint64_t *o) {
    (void)s, (void)t, (void)o;
    return standin("ts_session_count_tokens");
}
int32_t ts_session_render_prompt(TsSession *s, const char *m, char **o) {
    (void)s, (void)m, (void)o;
    return standin("ts_session_render_prompt");
}
int32_t ts_session_tokenize_json(TsSession *s, const char *t, char **o) {
    (void)s, (void)t, (void)o;
    return standin("ts_session_tokenize_json");
}
int32_t ts_session_detokenize_json(TsSession *s, const char *t, char **o) {
    (void)s, (void)t, (void)o;
    return standin("ts_session_detokenize_json");
}
int32_t ts_session_count_text_tokens(TsSession *s, const char *t, uint64_t *o) {
    (void)s, (void)t, (void)o;
    return standin("ts_session_count_text_tokens");
}
int32_t ts_session_fit_window_json(TsSession *s, const char *r, char **o) {
    (void)s, (void)r, (void)o;
    return standin("ts_session_fit_window_json");
}
int32_t ts_generate(TsSession *s, const char *r, TsEventCallback cb, void *u, char **o) {
    (void)s, (void)r, (void)cb, (void)u, (void)o;
    return standin("ts_generate");
}
int32_t ts_catalog_json(char **o) { (void)o; return standin("ts_catalog_json"); }
int32_t ts_installed_json(char **o) { (void)o; return standin("ts_installed_json"); }
int32_t ts_model_delete(const char *a) { (void)a; return standin("ts_model_delete"); }
int32_t ts_recommend_json(const char *r, char **o) {
    (void)r, (void)o;
    return standin("ts_recommend_json");
}
int32_t ts_probe_json(const char *m, char **o) { (void)m, (void)o; return standin("ts_probe_json"); }
int32_t ts_install_bytes_json(const char *r, char **o) {
    (void)r, (void)o;
    return standin("ts_install_bytes_json");
}
int32_t ts_install(const char *r, const char *opt, TsInstallCallback cb, void *u, char **o) {
    (void)r, (void)opt, (void)cb, (void)u, (void)o;
    return standin("ts_install");
}
int32_t ts_install_repo(const char *r, const char *rev, TsInstallCallback cb, void *u, char **o) {
    (void)r, (void)rev, (void)cb, (void)u, (void)o;
    return standin("ts_install_repo");
}
