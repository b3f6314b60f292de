/* The table-driven C host: runs the cases of tests/abi_cases.py through the
 * C ABI and prints one line per call. Nothing it prints depends on timing,
 * addresses or the environment, so the output of two runs, or of a linked and
 * a dlopen()ed run, is byte-identical.
 *
 * Build (linked):   cc ... case_host.c -ltsffi
 * Build (dlopen):   cc ... -DTSFFI_HOST_DLOPEN case_host.c -ldl   (no -ltsffi)
 * Run:              case_host CASEFILE [LIBRARY_PATH]   (LIBRARY_PATH with dlopen only)
 * With -DTSFFI_HOST_ENGINE_PROBE (tests/test_coexistence.py): the process
 * also holds a stand-in of the engine's library; the host calls its
 * ts_session_open before the cases and prints, after "done", what the
 * stand-in's own ts_last_error and ts_abi_version say then.
 *
 * CASEFILE has one call per line: FN <TAB> A <TAB> B <TAB> FLAGS, where A and B
 * are "-" (a NULL pointer), "@" (the result of the last call that returned
 * TSFFI_OK, byte for byte) or "x" followed by the argument's bytes in hex ("x"
 * alone is the empty string). FLAGS is "-" or "nullout" (pass NULL as the
 * char ** out-parameter). Unused arguments are "-".
 *
 * For every call the host first provokes a failure, so that the last error
 * is set, and pre-fills the out-parameter with a garbage pointer. It then
 * prints: FN status=N out=TEXT|NULL|GARBAGE err=TEXT [ERRLEN=...] where TEXT
 * escapes bytes outside 0x20..0x7e and the backslash as \xNN.
 */
#ifdef TSFFI_HOST_ENGINE_PROBE
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#endif
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsffi_api.h"

static void print_escaped(const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c > 0x7e || c == '\\')
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decode one argument field into a fresh buffer; *is_null for "-", *is_prev for "@". */
static char *decode_arg(const char *field, int *is_null, int *is_prev) {
    size_t n = strlen(field), i;
    char *out;
    *is_null = *is_prev = 0;
    if (strcmp(field, "-") == 0) {
        *is_null = 1;
        return NULL;
    }
    if (strcmp(field, "@") == 0) {
        *is_prev = 1;
        return NULL;
    }
    if (field[0] != 'x' || (n - 1) % 2 != 0)
        return NULL;
    out = (char *)malloc((n - 1) / 2 + 1);
    if (out == NULL)
        return NULL;
    for (i = 0; i < (n - 1) / 2; i++) {
        int hi = hexval(field[1 + 2 * i]), lo = hexval(field[2 + 2 * i]);
        if (hi < 0 || lo < 0) {
            free(out);
            return NULL;
        }
        out[i] = (char)(hi * 16 + lo);
    }
    out[(n - 1) / 2] = '\0';
    return out;
}

static char garbage_byte;

#ifdef TSFFI_HOST_ENGINE_PROBE
/* The stand-in's functions, found wherever the process loaded them
 * (linked, LD_PRELOAD or dlopen RTLD_GLOBAL): by the engine's names. */
static int32_t (*engine_open)(const char *, const char *, void **);
static size_t (*engine_last_error)(char *, size_t);
static uint32_t (*engine_abi_version)(void);

static int engine_probe_begin(void) {
    void *sym[3];
    void *session = NULL;
    int32_t status;
    sym[0] = dlsym(RTLD_DEFAULT, "ts_session_open");
    sym[1] = dlsym(RTLD_DEFAULT, "ts_last_error");
    sym[2] = dlsym(RTLD_DEFAULT, "ts_abi_version");
    if (sym[0] == NULL || sym[1] == NULL || sym[2] == NULL) {
        printf("engine stand-in not loaded\n");
        return -1;
    }
    memcpy(&engine_open, &sym[0], sizeof engine_open);
    memcpy(&engine_last_error, &sym[1], sizeof engine_last_error);
    memcpy(&engine_abi_version, &sym[2], sizeof engine_abi_version);
    status = engine_open("some-model", "{}", &session);
    printf("engine open status=%d\n", (int)status);
    return 0;
}

static void engine_probe_end(void) {
    char msg[256];
    engine_last_error(msg, sizeof msg);
    printf("engine last_error=%s abi=%u\n", msg, (unsigned)engine_abi_version());
}
#endif

int main(int argc, char **argv) {
    FILE *cases;
    char *line = NULL;
    size_t line_cap = 0;
    char *previous = NULL;
    int lineno = 0;

    if (argc < 2) {
        printf("usage: case_host CASEFILE [LIBRARY_PATH]\n");
        return 2;
    }
    if (load_api(argc > 2 ? argv[2] : NULL) != 0)
        return 1;
#ifdef TSFFI_HOST_ENGINE_PROBE
    if (engine_probe_begin() != 0)
        return 1;
#endif
    cases = fopen(argv[1], "r");
    if (cases == NULL) {
        printf("cannot open %s\n", argv[1]);
        return 2;
    }
    printf("abi %u\n", (unsigned)api.abi_version());
    while (getline(&line, &line_cap, cases) != -1) {
        char *fields[4];
        char *args[2];
        int nulls[2], prevs[2];
        char *out = &garbage_byte;
        char **outp = &out;
        const char *a, *b;
        int32_t status = -1;
        size_t len, full;
        char *msg;
        int k;
        char *save = NULL;

        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0')
            continue;
        fields[0] = strtok_r(line, "\t", &save);
        for (k = 1; k < 4; k++)
            fields[k] = strtok_r(NULL, "\t", &save);
        if (fields[3] == NULL) {
            printf("line %d: malformed\n", lineno);
            return 2;
        }
        for (k = 0; k < 2; k++) {
            args[k] = decode_arg(fields[k + 1], &nulls[k], &prevs[k]);
            if (args[k] == NULL && !nulls[k] && !prevs[k]) {
                printf("line %d: bad argument %d\n", lineno, k + 1);
                return 2;
            }
        }
        a = prevs[0] ? previous : args[0];
        b = prevs[1] ? previous : args[1];
        if (strcmp(fields[3], "nullout") == 0)
            outp = NULL;

        /* Prime the last error: a success below must clear it. */
        if (api.build_info_json(NULL) != TSFFI_ERR_INVALID_ARGUMENT || api.last_error(NULL, 0) == 0) {
            printf("line %d: could not prime the last error\n", lineno);
            return 1;
        }

        if (strcmp(fields[0], "build_info") == 0)
            status = api.build_info_json(outp);
        else if (strcmp(fields[0], "resolve_drafter") == 0)
            status = api.resolve_drafter(a, b, outp);
        else if (strcmp(fields[0], "draft_policies") == 0)
            status = api.draft_policies(a, b, outp);
        else if (strcmp(fields[0], "resolve_speculation") == 0)
            status = api.resolve_speculation(a, outp);
        else if (strcmp(fields[0], "speculation_plan") == 0)
            status = api.speculation_plan(a, b, outp);
        else if (strcmp(fields[0], "install_info") == 0)
            status = api.install_info_json(a, outp);
        else if (strcmp(fields[0], "speculation_choices") == 0)
            status = api.speculation_choices(a, b, outp);
        else {
            printf("line %d: unknown function %s\n", lineno, fields[0]);
            return 2;
        }

        /* Read the last error: the length first, then the whole message. */
        len = api.last_error(NULL, 0);
        msg = (char *)malloc(len + 1);
        if (msg == NULL)
            return 1;
        full = api.last_error(msg, len + 1);

        printf("%s status=%d out=", fields[0], (int)status);
        if (outp == NULL)
            printf("NULL");
        else if (out == &garbage_byte)
            printf("GARBAGE");
        else if (out == NULL)
            printf("NULL");
        else
            print_escaped(out, strlen(out));
        printf(" err=");
        print_escaped(msg, strlen(msg));
        if (full != len || strlen(msg) != len)
            printf(" ERRLEN=%lu/%lu/%lu", (unsigned long)len, (unsigned long)full,
                   (unsigned long)strlen(msg));
        printf("\n");
        free(msg);

        if (outp != NULL && out != &garbage_byte && out != NULL) {
            if (status == TSFFI_OK) {
                free(previous);
                previous = (char *)malloc(strlen(out) + 1);
                if (previous == NULL)
                    return 1;
                strcpy(previous, out);
            }
            api.string_free(out);
        }
        free(args[0]);
        free(args[1]);
    }
    api.string_free(NULL); /* a no-op */
    free(previous);
    free(line);
    fclose(cases);
    printf("done\n");
#ifdef TSFFI_HOST_ENGINE_PROBE
    engine_probe_end();
#endif
    return 0;
}
