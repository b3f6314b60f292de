/* tsffi_last_error semantics, from a C host: the full length whatever cap is,
 * buf == NULL asks the length, truncation to cap - 1 bytes at a character
 * boundary with a NUL, cleared on entry by every status-returning call,
 * left alone by tsffi_last_error, tsffi_abi_version and tsffi_string_free, and per
 * thread.
 *
 * Run: last_error MODEL_DIR   (an install with an MTP head)
 * Prints lines that never change; text is escaped as in case_host.c.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsffi.h"

#define REFUSE_SAMPLED "{\"speculativeDrafter\": \"dflash\", \"tsffi\": {\"temperature\": 0.7}, \"speculation\": 2}"
#define NOT_JSON "{"
/* A blocker of a 2-, 3- and 4-byte character, as raw UTF-8. */
#define UTF8_OPTIONS "{\"speculation\": 2, \"tsffi\": {\"engineBlocker\": \"\xc3\xa9\xe2\x80\x94\xf0\x9f\x98\x80\"}}"

static const char *model_dir;

static void print_escaped(const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c > 0x7e || c == '\\')
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

static void show(const char *label, const char *buf) {
    printf("%s \"", label);
    print_escaped(buf);
    printf("\"\n");
}

/* Fail with a known message: the refusal of a sampled block under DFlash2. */
static int32_t fail_refused(void) {
    char *out = NULL;
    int32_t s = tsffi_resolve_speculation(REFUSE_SAMPLED, &out);
    tsffi_string_free(out);
    return s;
}

static int32_t call_ok(const char *which) {
    char *out = NULL;
    int32_t s = -1;
    if (strcmp(which, "tsffi_build_info_json") == 0)
        s = tsffi_build_info_json(&out);
    else if (strcmp(which, "tsffi_resolve_drafter") == 0)
        s = tsffi_resolve_drafter(model_dir, NULL, &out);
    else if (strcmp(which, "tsffi_draft_policies") == 0)
        s = tsffi_draft_policies("{\"drafter\": \"mtp\", \"installHasMtpHead\": true, "
                              "\"installHasDflash\": false, \"note\": null}", "", &out);
    else if (strcmp(which, "tsffi_resolve_speculation") == 0)
        s = tsffi_resolve_speculation(NULL, &out);
    else if (strcmp(which, "tsffi_speculation_plan") == 0)
        s = tsffi_speculation_plan(model_dir, "{}", &out);
    else if (strcmp(which, "tsffi_install_info_json") == 0)
        s = tsffi_install_info_json(model_dir, &out);
    else if (strcmp(which, "tsffi_speculation_choices") == 0)
        s = tsffi_speculation_choices(model_dir, "{}", &out);
    else if (strcmp(which, "tsffi_store_json") == 0)
        s = tsffi_store_json(&out);
    else if (strcmp(which, "tsffi_reconcile") == 0)
        s = tsffi_reconcile(model_dir, "{}",
                            "{\"speculation\": {\"block\": 2, \"drafter\": \"mtp\", "
                            "\"reason\": null}}",
                            &out);
    tsffi_string_free(out);
    return s;
}

struct thread_report {
    size_t fresh_len;
    char fresh_buf[8];
    int32_t status;
    size_t len;
    char msg[512];
};

static void *other_thread(void *arg) {
    struct thread_report *r = (struct thread_report *)arg;
    char *out = NULL;
    memcpy(r->fresh_buf, "XXXXXXX", 8);
    /* The main thread has failed; this thread has not. */
    r->fresh_len = tsffi_last_error(r->fresh_buf, sizeof r->fresh_buf);
    r->status = tsffi_resolve_speculation(NOT_JSON, &out);
    r->len = tsffi_last_error(r->msg, sizeof r->msg);
    return NULL;
}

static void *ok_thread(void *arg) {
    int32_t *status = (int32_t *)arg;
    *status = call_ok("tsffi_resolve_speculation");
    return NULL;
}

int main(int argc, char **argv) {
    char buf[1024];
    char *kept = NULL;
    size_t len, ret, full;
    int32_t s;
    const char *const functions[] = {"tsffi_build_info_json", "tsffi_resolve_drafter",
                                     "tsffi_draft_policies", "tsffi_resolve_speculation",
                                     "tsffi_speculation_plan", "tsffi_install_info_json",
                                     "tsffi_speculation_choices", "tsffi_store_json",
                                     "tsffi_reconcile"};
    size_t i, caps[] = {2, 9, 10, 40};

    if (argc != 2) {
        printf("usage: last_error MODEL_DIR\n");
        return 2;
    }
    model_dir = argv[1];

    /* Nothing has failed yet, and nothing has started the runtime. */
    memcpy(buf, "untouched", 10);
    printf("fresh len=%lu\n", (unsigned long)tsffi_last_error(NULL, 0));
    printf("fresh ret=%lu\n", (unsigned long)tsffi_last_error(buf, sizeof buf));
    show("fresh buf", buf);

    /* A result to free later, while an error is set. */
    s = tsffi_resolve_speculation("{}", &kept);
    printf("kept status=%d set=%d\n", (int)s, kept != NULL);

    s = fail_refused();
    len = tsffi_last_error(NULL, 0);
    printf("refused status=%d len=%lu\n", (int)s, (unsigned long)len);
    full = tsffi_last_error(buf, sizeof buf);
    printf("full ret=%lu strlen=%lu\n", (unsigned long)full, (unsigned long)strlen(buf));
    show("full", buf);

    /* cap 0 with a buffer: nothing written, length returned. */
    memcpy(buf, "untouched", 10);
    ret = tsffi_last_error(buf, 0);
    printf("cap0 ret=%lu\n", (unsigned long)ret);
    show("cap0 buf", buf);

    /* cap 1: just the NUL. */
    memcpy(buf, "untouched", 10);
    ret = tsffi_last_error(buf, 1);
    printf("cap1 ret=%lu\n", (unsigned long)ret);
    show("cap1 buf", buf);
    show("cap1 after", buf + 1);

    for (i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        char label[32];
        memset(buf, '#', sizeof buf);
        buf[sizeof buf - 1] = '\0';
        ret = tsffi_last_error(buf, caps[i]);
        printf("cap%lu ret=%lu\n", (unsigned long)caps[i], (unsigned long)ret);
        snprintf(label, sizeof label, "cap%lu buf", (unsigned long)caps[i]);
        show(label, buf);
        /* The byte after the cap is the caller's: never written. */
        printf("cap%lu beyond=%c\n", (unsigned long)caps[i], buf[caps[i]]);
    }
    /* cap == len: one byte short; cap == len + 1: exact. */
    memset(buf, '#', sizeof buf);
    ret = tsffi_last_error(buf, len);
    printf("capL ret=%lu strlen=%lu beyond=%c\n", (unsigned long)ret,
           (unsigned long)strlen(buf), buf[len]);
    memset(buf, '#', sizeof buf);
    ret = tsffi_last_error(buf, len + 1);
    printf("capL+1 ret=%lu strlen=%lu beyond=%c\n", (unsigned long)ret,
           (unsigned long)strlen(buf), buf[len + 1]);

    /* Calls that leave it. */
    printf("reread len=%lu\n", (unsigned long)tsffi_last_error(NULL, 0));
    printf("abi_version=%u len=%lu\n", (unsigned)tsffi_abi_version(),
           (unsigned long)tsffi_last_error(NULL, 0));
    tsffi_string_free(NULL);
    printf("string_free(NULL) len=%lu\n", (unsigned long)tsffi_last_error(NULL, 0));
    tsffi_string_free(kept);
    printf("string_free(result) len=%lu\n", (unsigned long)tsffi_last_error(NULL, 0));

    /* A second failure replaces the first, it does not append. */
    {
        char *out = NULL;
        s = tsffi_resolve_speculation(NOT_JSON, &out);
        printf("replaced status=%d len_changed=%d\n", (int)s, tsffi_last_error(NULL, 0) != len);
        tsffi_last_error(buf, sizeof buf);
        printf("replaced mentions_serde_eof=%d mentions_block=%d\n",
               strstr(buf, "options: EOF while parsing an object") != NULL, strstr(buf, "sampled speculation") != NULL);
    }

    /* Every status-returning call clears it on entry. */
    for (i = 0; i < sizeof functions / sizeof functions[0]; i++) {
        s = fail_refused();
        ret = tsffi_last_error(NULL, 0);
        s = call_ok(functions[i]);
        printf("cleared by %s: status=%d before=%lu after=%lu\n", functions[i], (int)s,
               (unsigned long)ret, (unsigned long)tsffi_last_error(NULL, 0));
    }
    /* A NULL-argument failure also replaces the message (cleared, then set). */
    fail_refused();
    s = tsffi_build_info_json(NULL);
    tsffi_last_error(buf, sizeof buf);
    printf("null out status=%d mentions_out_json=%d mentions_block=%d\n", (int)s,
           strstr(buf, "out_json") != NULL, strstr(buf, "sampled speculation") != NULL);

    /* Truncation never cuts a UTF-8 character. */
    {
        char *out = NULL;
        size_t cap;
        s = tsffi_resolve_speculation(UTF8_OPTIONS, &out);
        len = tsffi_last_error(NULL, 0);
        printf("utf8 status=%d len=%lu\n", (int)s, (unsigned long)len);
        for (cap = len - 9; cap <= len + 1; cap++) {
            char label[32];
            ret = tsffi_last_error(buf, cap);
            snprintf(label, sizeof label, "utf8 cap=L%+d", (int)cap - (int)len);
            printf("%s ret=%lu strlen=%lu\n", label, (unsigned long)ret,
                   (unsigned long)strlen(buf));
        }
    }

    /* Per thread: this thread's failure is not another thread's, and the
     * other thread's failure and success do not touch this one. */
    {
        pthread_t t;
        struct thread_report r;
        int32_t ok_status = -1;
        fail_refused();
        len = tsffi_last_error(NULL, 0);
        pthread_create(&t, NULL, other_thread, &r);
        pthread_join(t, NULL);
        printf("thread fresh len=%lu\n", (unsigned long)r.fresh_len);
        show("thread fresh buf", r.fresh_buf);
        printf("thread status=%d len_is_strlen=%d mentions_serde_eof=%d\n", (int)r.status,
               r.len == strlen(r.msg), strstr(r.msg, "options: EOF while parsing an object") != NULL);
        tsffi_last_error(buf, sizeof buf);
        printf("main after thread failure len_same=%d\n", tsffi_last_error(NULL, 0) == len);
        show("main msg", buf);
        pthread_create(&t, NULL, ok_thread, &ok_status);
        pthread_join(t, NULL);
        printf("thread ok status=%d; main len_same=%d\n", (int)ok_status,
               tsffi_last_error(NULL, 0) == len);
    }
    printf("done\n");
    return 0;
}
