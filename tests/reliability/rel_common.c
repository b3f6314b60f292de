/* Shared by the reliability drivers (#included, not compiled on its own):
 * the API table (linked, or dlopen()ed RTLD_LOCAL with -DTSFFI_HOST_DLOPEN),
 * the call script format, one call through the C ABI, and escaped printing.
 *
 * A script has one call per line, fields separated by TAB:
 *     ID  OP  A  B  FLAGS
 * OP is build_info | resolve_drafter | draft_policies | resolve_speculation |
 * speculation_plan | install_info | speculation_choices (or a driver's own op).
 * A and B are
 *     -         a NULL pointer
 *     x<hex>    these bytes ("x" alone: the empty string)
 *     f<path>   the bytes of the file at <path> (for arguments of megabytes)
 *     @         the result of the previous call that returned TSFFI_OK
 * FLAGS is "-" or "nullout" (pass NULL as the char ** out-parameter).
 * Unused arguments are "-".
 *
 * Printed text escapes every byte outside 0x21..0x7e except the space, and
 * the backslash, as \xNN, so one line is one record and TAB separates fields.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsffi.h"

#ifdef TSFFI_HOST_DLOPEN
#include <dlfcn.h>
#endif

/* Not every driver uses every helper. */
#if defined(__GNUC__)
#define REL_UNUSED __attribute__((unused))
#else
#define REL_UNUSED
#endif

#define TSFFI_API_FAIL_PREFIX "FATAL\t"
#include "../c/tsffi_api.h"

/* ------------------------------------------------------------------------ */

REL_UNUSED static void print_escaped_n(FILE *f, const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c > 0x7e || c == '\\')
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
}

REL_UNUSED static void print_escaped(FILE *f, const char *s) { print_escaped_n(f, s, strlen(s)); }

/* The calling thread's whole last error, malloc'd (never NULL unless out of
 * memory); *len_out gets the length tsffi_last_error reported. */
REL_UNUSED static char *read_last_error(size_t *len_out) {
    size_t len = api.last_error(NULL, 0), full;
    char *msg = (char *)malloc(len + 1);
    if (msg == NULL)
        return NULL;
    full = api.last_error(msg, len + 1);
    if (full != len || strlen(msg) != len) {
        /* the contract is broken: make it visible in the record */
        free(msg);
        msg = (char *)malloc(64);
        if (msg == NULL)
            return NULL;
        sprintf(msg, "ERRLEN-MISMATCH %lu/%lu", (unsigned long)len, (unsigned long)full);
    }
    if (len_out != NULL)
        *len_out = len;
    return msg;
}

/* ------------------------------------------------------------------------ */

enum { ARG_NULL, ARG_BYTES, ARG_PREV };

struct arg {
    int kind;
    char *bytes; /* NUL-terminated; may hold no other NUL */
};

struct call {
    char *id;
    char *op;
    struct arg a, b;
    int nullout;
};

REL_UNUSED static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

REL_UNUSED static char *read_whole_file(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;
    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    buf = (char *)malloc((size_t)n + 1);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return NULL;
    }
    buf[n] = '\0';
    fclose(f);
    return buf;
}

REL_UNUSED static int parse_arg(const char *field, struct arg *out) {
    size_t n = strlen(field), i;
    out->bytes = NULL;
    if (strcmp(field, "-") == 0) {
        out->kind = ARG_NULL;
        return 0;
    }
    if (strcmp(field, "@") == 0) {
        out->kind = ARG_PREV;
        return 0;
    }
    out->kind = ARG_BYTES;
    if (field[0] == 'f') {
        out->bytes = read_whole_file(field + 1);
        return out->bytes == NULL ? -1 : 0;
    }
    if (field[0] != 'x' || (n - 1) % 2 != 0)
        return -1;
    out->bytes = (char *)malloc((n - 1) / 2 + 1);
    if (out->bytes == NULL)
        return -1;
    for (i = 0; i < (n - 1) / 2; i++) {
        int hi = hexval(field[1 + 2 * i]), lo = hexval(field[2 + 2 * i]);
        if (hi < 0 || lo < 0)
            return -1;
        out->bytes[i] = (char)(hi * 16 + lo);
    }
    out->bytes[(n - 1) / 2] = '\0';
    return 0;
}

REL_UNUSED static char *dup_str(const char *s) {
    char *d = (char *)malloc(strlen(s) + 1);
    if (d != NULL)
        strcpy(d, s);
    return d;
}

/* Read a whole script; returns the number of calls or -1. */
REL_UNUSED static long load_script(const char *path, struct call **calls_out) {
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    long count = 0, room = 0;
    struct call *calls = NULL;
    if (f == NULL) {
        printf("FATAL\tcannot open script %s\n", path);
        return -1;
    }
    while (getline(&line, &cap, f) != -1) {
        char *fields[5];
        char *save = NULL;
        int k;
        struct call *c;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0')
            continue;
        fields[0] = strtok_r(line, "\t", &save);
        for (k = 1; k < 5; k++)
            fields[k] = strtok_r(NULL, "\t", &save);
        if (fields[4] == NULL) {
            printf("FATAL\tmalformed script line %ld\n", count + 1);
            return -1;
        }
        if (count == room) {
            struct call *grown;
            room = room ? room * 2 : 64;
            grown = (struct call *)realloc(calls, (size_t)room * sizeof *calls);
            if (grown == NULL)
                return -1;
            calls = grown;
        }
        c = &calls[count];
        c->id = dup_str(fields[0]);
        c->op = dup_str(fields[1]);
        c->nullout = strcmp(fields[4], "nullout") == 0;
        if (parse_arg(fields[2], &c->a) != 0 || parse_arg(fields[3], &c->b) != 0) {
            printf("FATAL\tbad argument on script line %ld\n", count + 1);
            return -1;
        }
        count++;
    }
    free(line);
    fclose(f);
    *calls_out = calls;
    return count;
}

REL_UNUSED static const char *arg_value(const struct arg *a, const char *previous) {
    if (a->kind == ARG_NULL)
        return NULL;
    if (a->kind == ARG_PREV)
        return previous;
    return a->bytes;
}

/* Make one call. Returns 0 when op is one of the six functions (status in
 * *status, result in *out, which the caller frees with api.string_free),
 * -1 when the op is unknown. *out is pre-set to `garbage` so that a call
 * that does not touch it is visible. */
REL_UNUSED static int run_call(const struct call *c, const char *previous, char *garbage,
                    int32_t *status, char **out) {
    const char *a = arg_value(&c->a, previous), *b = arg_value(&c->b, previous);
    char **outp = c->nullout ? NULL : out;
    *out = garbage;
    if (strcmp(c->op, "build_info") == 0)
        *status = api.build_info_json(outp);
    else if (strcmp(c->op, "resolve_drafter") == 0)
        *status = api.resolve_drafter(a, b, outp);
    else if (strcmp(c->op, "draft_policies") == 0)
        *status = api.draft_policies(a, b, outp);
    else if (strcmp(c->op, "resolve_speculation") == 0)
        *status = api.resolve_speculation(a, outp);
    else if (strcmp(c->op, "speculation_plan") == 0)
        *status = api.speculation_plan(a, b, outp);
    else if (strcmp(c->op, "install_info") == 0)
        *status = api.install_info_json(a, outp);
    else if (strcmp(c->op, "speculation_choices") == 0)
        *status = api.speculation_choices(a, b, outp);
    else
        return -1;
    return 0;
}
