/*
 * turbospark.h -- a STAND-IN for the engine's own header, for tests only.
 *
 * The process this library is made for also holds the engine's library, whose
 * header takes the whole ts_ / TS_ / Ts namespace. This stand-in declares
 * every name the engine's header declares (docs: the engine's exported C
 * names), with the engine's shapes where this library's used to overlap, so
 * that the tests can load both libraries in one process and include both
 * headers in one translation unit. The other signatures are plausible
 * stand-ins: only the NAMES matter for a clash. Here, as in the engine's
 * Swift package, it is the header of the C module CTurboSpark
 * (module.modulemap beside it).
 */
#ifndef TURBOSPARK_H
#define TURBOSPARK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TS_OK 0
#define TS_ERR_INVALID_ARGUMENT 1
#define TS_ERR_OPEN 2
#define TS_ERR_GENERATE 3
#define TS_ERR_JSON 4
#define TS_ERR_UNSUPPORTED 5
#define TS_ERR_PANIC 6
#define TS_ERR_CANCELLED 7
#define TS_ERR_BUSY 8
/* Deliberately not this library's number: a host that read the wrong
 * library's version would see it. */
#define TS_ABI_VERSION 41

#define TS_EVENT_PREFILL 0
#define TS_EVENT_CONTENT 1
#define TS_EVENT_REASONING 2
#define TS_INSTALL_STAGE 0
#define TS_INSTALL_BYTES 1

/* What every stand-in call returns, and the prefix of the last error it
 * leaves: recognisable, and not a status this library uses. */
#define TS_STANDIN_STATUS 77

typedef struct TsSession TsSession;
typedef void (*TsEventCallback)(void *user, int32_t kind, const char *text);
typedef void (*TsInstallCallback)(void *user, int32_t kind, uint64_t done, uint64_t total);

size_t ts_last_error(char *buf, size_t cap);
void ts_string_free(char *s);
uint32_t ts_abi_version(void);
int32_t ts_session_open(const char *model, const char *options_json, TsSession **out);
int32_t ts_session_close(TsSession *session);
int32_t ts_session_cancel(TsSession *session);
int32_t ts_session_info_json(TsSession *session, char **out_json);
int32_t ts_session_phases_json(TsSession *session, char **out_json);
int32_t ts_peak_footprint_bytes(TsSession *session, uint64_t *out_bytes);
int32_t ts_system_info_json(char **out_json);
int32_t ts_session_count_tokens(TsSession *session, const char *text, uint64_t *out_count);
int32_t ts_session_render_prompt(TsSession *session, const char *messages_json, char **out);
int32_t ts_session_tokenize_json(TsSession *session, const char *text, char **out_json);
int32_t ts_session_detokenize_json(TsSession *session, const char *tokens_json, char **out);
int32_t ts_session_count_text_tokens(TsSession *session, const char *text, uint64_t *out);
int32_t ts_session_fit_window_json(TsSession *session, const char *request_json, char **out);
int32_t ts_generate(TsSession *session, const char *request_json, TsEventCallback on_event,
                    void *user, char **out_json);
int32_t ts_catalog_json(char **out_json);
int32_t ts_installed_json(char **out_json);
int32_t ts_model_delete(const char *alias);
int32_t ts_recommend_json(const char *request_json, char **out_json);
int32_t ts_probe_json(const char *model, char **out_json);
int32_t ts_install_bytes_json(const char *repo, char **out_json);
int32_t ts_install(const char *repo, const char *options_json, TsInstallCallback on_progress,
                   void *user, char **out_json);
int32_t ts_install_repo(const char *repo, const char *revision, TsInstallCallback on_progress,
                        void *user, char **out_json);

#ifdef __cplusplus
}
#endif

#endif /* TURBOSPARK_H */
