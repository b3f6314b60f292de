/* The resident index's check 7 as one C pass: the fast path of
 * turbospark_ffi/resident_index.py when the library is loaded.
 *
 * Why C: at 100,000 entries the same checks in Python (memoryview columns,
 * min/max, a name -> slot dict) cost 70 ms against native_plan's ~20 ms for
 * the whole plan (issue 6, target 3x). This pass only ACCEPTS: on the first
 * thing it does not like -- any check 7 failure, a name that is not plain
 * ASCII, a name holding '\n', memory it cannot get -- it declines and the
 * Python passes run, so the exact first failure is still worded by one piece
 * of code (resident_index._raise_first_entry_error), in the engine's order.
 *
 * Concatenated into the cffi module after ts_embed.c; declared static in
 * ffi_build.INTERNAL_CDEF, so nothing here is exported from the library.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TS__ENTRY_SIZE 72u
#define TS__HEADER_SIZE 24u

#define TS__SCAN_DECLINED 0
#define TS__SCAN_OK 1
#define TS__SCAN_JOINED_TOO_SMALL 2

static uint64_t ts__le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = (v << 8) | p[k];
    return v;
}

static uint32_t ts__le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* How far past the entry table the reader must read to hold every name that
 * lies inside the index region. Names ending past index_size are check 7's
 * failure and are never read (a hostile nameOffset must not make us read
 * 4 GB). Never less than table_end. */
static uint64_t _ts_index_names_end(const char *table_chars, uint64_t count,
                                    uint64_t index_size, uint64_t table_end) {
    const unsigned char *table = (const unsigned char *)table_chars;
    uint64_t best = table_end;
    for (uint64_t k = 0; k < count; k++) {
        const unsigned char *e = table + k * TS__ENTRY_SIZE;
        uint64_t end = (uint64_t)ts__le32(e) + (uint64_t)(e[4] | e[5] << 8);
        if (end <= index_size && end > best) best = end;
    }
    return best;
}

/* A plane of size 0 is accepted wherever it claims to be (FACTS 1, check 7). */
static int ts__plane_ok(const unsigned char *e, unsigned at, uint64_t index_size,
                        uint64_t resident_end) {
    uint64_t offset = ts__le64(e + at), size = ts__le64(e + at + 8);
    if (size == 0) return 1;
    /* offset + size may not fit in 64 bits: compare against what is left. */
    return offset >= index_size && offset <= resident_end && size <= resident_end - offset;
}

static uint64_t ts__fnv1a(const unsigned char *p, uint32_t n) {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t k = 0; k < n; k++) h = (h ^ p[k]) * 1099511628211ull;
    /* A product's low bits depend only on its operands' low bits, and the
     * bucket is the low bits: fold the high half in, or names that differ in
     * a layer number pile into the same buckets. */
    return h ^ (h >> 29) ^ (h >> 43);
}

/* Check 7 for every entry of `region` (header + table + the bytes holding
 * names, `region_len` long). On TS__SCAN_OK every name is written to `joined`
 * in entry order, each followed by '\n', and *needed is the length written.
 * On TS__SCAN_JOINED_TOO_SMALL the index is valid but the names need *needed
 * bytes: call again with that much. TS__SCAN_DECLINED: see the file comment. */
static int _ts_index_scan(const char *region_chars, uint64_t region_len, uint64_t count,
                          uint64_t index_size, uint64_t resident_end, char *joined,
                          uint64_t joined_cap, uint64_t *needed) {
    /* char in the signature: cffi hands a Python bytes object to a char *
     * without copying it. */
    const unsigned char *region = (const unsigned char *)region_chars;
    *needed = 0;
    if (count == 0) return TS__SCAN_OK;
    if (count > (UINT32_MAX >> 2)) return TS__SCAN_DECLINED; /* slots are uint32 */
    uint64_t buckets = 1;
    while (buckets < count * 2) buckets <<= 1;
    uint32_t *slots = calloc(buckets, sizeof *slots); /* entry number + 1; 0 = empty */
    if (!slots) return TS__SCAN_DECLINED;

    const unsigned char *table = region + TS__HEADER_SIZE;
    uint64_t written = 0;
    int verdict = TS__SCAN_OK;
    for (uint64_t k = 0; k < count; k++) {
        const unsigned char *e = table + k * TS__ENTRY_SIZE;
        uint64_t name_offset = ts__le32(e);
        uint32_t name_length = (uint32_t)(e[4] | e[5] << 8);
        uint64_t name_end = name_offset + name_length;
        if (name_offset < TS__HEADER_SIZE || name_end > index_size || name_end > region_len ||
            !ts__plane_ok(e, 8, index_size, resident_end) ||
            !ts__plane_ok(e, 40, index_size, resident_end) ||
            !ts__plane_ok(e, 56, index_size, resident_end)) {
            verdict = TS__SCAN_DECLINED;
            break;
        }
        const unsigned char *name = region + name_offset;
        for (uint32_t j = 0; j < name_length; j++) {
            /* Non-ASCII: the engine decodes leniently, so two different byte
             * strings can be one name; Python canonicalises those. */
            if (name[j] >= 0x80 || name[j] == '\n') { verdict = TS__SCAN_DECLINED; break; }
        }
        if (verdict != TS__SCAN_OK) break;
        uint64_t bucket = ts__fnv1a(name, name_length) & (buckets - 1);
        int duplicate = 0;
        while (slots[bucket]) {
            const unsigned char *o = table + (uint64_t)(slots[bucket] - 1) * TS__ENTRY_SIZE;
            if ((uint32_t)(o[4] | o[5] << 8) == name_length &&
                memcmp(region + ts__le32(o), name, name_length) == 0) {
                duplicate = 1;
                break;
            }
            bucket = (bucket + 1) & (buckets - 1);
        }
        if (duplicate) { verdict = TS__SCAN_DECLINED; break; }
        slots[bucket] = (uint32_t)(k + 1);
        if (written + name_length + 1 <= joined_cap) {
            memcpy(joined + written, name, name_length);
            joined[written + name_length] = '\n';
        }
        written += (uint64_t)name_length + 1;
    }
    free(slots);
    if (verdict != TS__SCAN_OK) return verdict;
    *needed = written;
    return written <= joined_cap ? TS__SCAN_OK : TS__SCAN_JOINED_TOO_SMALL;
}
