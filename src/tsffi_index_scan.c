/* The resident index's check 7 as one C pass: the fast path of
 * turbospark_ffi/resident_index.py when the library is loaded.
 *
 * Why C: at 100,000 entries the same checks in Python (one walk of the
 * entries building a name -> slot dict) cost 40 ms against native_plan's
 * ~20 ms for the whole plan. This pass only ACCEPTS: on the first thing it
 * does not like -- any check 7 failure, a name that is not plain ASCII, a
 * name holding '\n', memory it cannot get -- it declines and the Python
 * pass runs, so the exact first failure is still worded by one piece of
 * code (resident_index._validated_names), in the engine's order.
 *
 * Beside the names, the same pass answers the questions a plan asks of every
 * name (profiled: searching 100,000 names for them in Python cost more than
 * the read): where each of a few exact names sits (the drafters' presence
 * tensors), and the smallest layer number N of a name "<prefix>N<fragment>..."
 * (the first full-attention layer). What the questions are is the caller's
 * (resident_index.py), passed in as text; the Python reader answers the same
 * questions from the names, and tests compare the two.
 *
 * Concatenated into the cffi module after tsffi_embed.c; declared static in
 * ffi_build.INTERNAL_CDEF, so nothing here is exported from the library.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TSFFI__ENTRY_SIZE  72u
#define TSFFI__HEADER_SIZE 24u

#define TSFFI__SCAN_DECLINED         0
#define TSFFI__SCAN_OK               1
#define TSFFI__SCAN_JOINED_TOO_SMALL 2

/* The facts the pass writes (int64_t each): the joined names' length, the
 * smallest layer number (-1: no such name), then the slot of each exact name
 * asked for (-1: absent). */
#define TSFFI__FACT_JOINED_LENGTH 0
#define TSFFI__FACT_FIRST_LAYER   1
#define TSFFI__FACT_FIRST_SLOT    2
#define TSFFI__MAX_EXACT_NAMES    24
/* A layer number of more digits than this is handed back (int64 range). */
#define TSFFI__MAX_LAYER_DIGITS 18

/* Little-endian fields. On a little-endian machine one unaligned load: the
 * byte loop was not merged into one by the compiler, and six of them per
 * entry were 40% of this pass at 866 entries (measured). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static uint64_t tsffi__le64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t tsffi__le32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
#else
static uint64_t tsffi__le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = (v << 8) | p[k];
    return v;
}

static uint32_t tsffi__le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
#endif

/* How far past the entry table the reader must read to hold every name that
 * lies inside the index region. Names ending past index_size are check 7's
 * failure and are never read (a hostile nameOffset must not make us read
 * 4 GB). Never less than table_end. */
static uint64_t tsffi_index_names_end(const char *table_chars, uint64_t count, uint64_t index_size,
                                      uint64_t table_end) {
    const unsigned char *table = (const unsigned char *)table_chars;
    uint64_t best = table_end;
    for (uint64_t k = 0; k < count; k++) {
        const unsigned char *e = table + k * TSFFI__ENTRY_SIZE;
        uint64_t end = (uint64_t)tsffi__le32(e) + (uint64_t)(e[4] | e[5] << 8);
        if (end <= index_size && end > best)
            best = end;
    }
    return best;
}

/* A plane of size 0 is accepted wherever it claims to be (docs/ENGINE.md section 1, check 7). */
static int tsffi__plane_ok(const unsigned char *e, unsigned at, uint64_t index_size,
                           uint64_t resident_end) {
    uint64_t offset = tsffi__le64(e + at), size = tsffi__le64(e + at + 8);
    if (size == 0)
        return 1;
    /* offset + size may not fit in 64 bits: compare against what is left. */
    return offset >= index_size && offset <= resident_end && size <= resident_end - offset;
}

/* One pass over a name, eight bytes at a time: its hash, and whether every
 * byte is ASCII other than '\n'. A byte-at-a-time FNV is latency bound (one
 * multiply per byte: ~5 ms of a 100,000-entry index's 4 MB of names). */
static uint64_t tsffi__name_hash(const unsigned char *p, uint32_t n, int *plain) {
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    const uint64_t newlines = ones * '\n';
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n, bad = 0;
    uint32_t k = 0;
    for (; k + 8 <= n; k += 8) {
        uint64_t w;
        memcpy(&w, p + k, 8);
        uint64_t x = w ^ newlines; /* a zero byte where w held '\n' */
        bad |= (w | ((x - ones) & ~x)) & highs;
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    if (k < n) {
        uint64_t w = 0;
        for (uint32_t j = 0; k + j < n; j++) {
            unsigned char c = p[k + j];
            if (c >= 0x80 || c == '\n')
                bad = 1;
            w |= (uint64_t)c << (8 * j);
        }
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    }
    *plain = bad == 0;
    h ^= h >> 29;
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 32);
}

/* A name's bytes: in `head` (header and entry table) or in `tail` (the bytes
 * after the table that hold names, read separately so that nobody copies a
 * 100,000-entry index into one buffer); NULL for a name that straddles the
 * two or runs past what was read, which the Python pass then judges. */
static const unsigned char *tsffi__name_bytes(const unsigned char *head, uint64_t table_end,
                                              const unsigned char *tail, uint64_t tail_len,
                                              uint64_t offset, uint64_t length) {
    if (offset + length <= table_end)
        return head + offset;
    if (offset >= table_end && offset - table_end + length <= tail_len)
        return tail + (offset - table_end);
    return NULL;
}

/* The questions, parsed: "<prefix>\n<fragment>\n<name>\n<name>..." */
struct tsffi__queries {
    const char *prefix, *fragment;
    size_t prefix_len, fragment_len;
    const char *names[TSFFI__MAX_EXACT_NAMES];
    size_t name_lens[TSFFI__MAX_EXACT_NAMES];
    int name_count;
};

static int tsffi__parse_queries(const char *text, struct tsffi__queries *q) {
    const char *fields[2 + TSFFI__MAX_EXACT_NAMES];
    size_t lens[2 + TSFFI__MAX_EXACT_NAMES];
    int n = 0;
    for (const char *at = text; *at;) {
        const char *end = strchr(at, '\n');
        if (!end || n == 2 + TSFFI__MAX_EXACT_NAMES)
            return 0;
        fields[n] = at;
        lens[n++] = (size_t)(end - at);
        at = end + 1;
    }
    if (n < 2 || lens[0] == 0 || lens[1] == 0)
        return 0;
    q->prefix = fields[0], q->prefix_len = lens[0];
    q->fragment = fields[1], q->fragment_len = lens[1];
    q->name_count = n - 2;
    for (int k = 2; k < n; k++)
        q->names[k - 2] = fields[k], q->name_lens[k - 2] = lens[k];
    return 1;
}

/* Where `needle` first occurs in p[0..n), or -1. */
static int64_t tsffi__find(const unsigned char *p, uint64_t n, const char *needle, size_t len) {
    for (uint64_t at = 0; at + len <= n; at++) {
        const unsigned char *hit = memchr(p + at, needle[0], n - len - at + 1);
        if (!hit)
            return -1;
        at = (uint64_t)(hit - p);
        if (memcmp(hit, needle, len) == 0)
            return (int64_t)at;
    }
    return -1;
}

/* The layer number of a name "<prefix>N<fragment>..." -- N being everything
 * between the prefix and the fragment's FIRST occurrence in the name, all
 * ASCII digits, at least one (resident_index.first_self_attn_layer's rule) --
 * or -1 when the name is not one; -2 when N does not fit (handed back). */
static int64_t tsffi__layer_of(const unsigned char *name, uint64_t n,
                               const struct tsffi__queries *q) {
    /* Cheapest test first: nearly every name of an install starts with the
     * prefix, and the bytes after its digits tell most of them apart. */
    uint64_t lp = q->prefix_len, lf = q->fragment_len, at = lp;
    if (n <= lp + lf)
        return -1;
    while (at < n && name[at] >= '0' && name[at] <= '9')
        at++;
    if (at == lp || at + lf > n || name[at] != (unsigned char)q->fragment[0] ||
        (lf > 1 && name[at + 1] != (unsigned char)q->fragment[1]) ||
        memcmp(name + at, q->fragment, lf) != 0 || memcmp(name, q->prefix, lp) != 0)
        return -1;
    if (tsffi__find(name, at + lf, q->fragment, lf) != (int64_t)at)
        return -1; /* an earlier occurrence: the text before it is not all digits */
    uint64_t digits = at - lp;
    while (digits > 1 && name[lp] == '0')
        lp++, digits--;
    if (digits > TSFFI__MAX_LAYER_DIGITS)
        return -2;
    int64_t layer = 0;
    for (uint64_t k = 0; k < digits; k++)
        layer = layer * 10 + (name[lp + k] - '0');
    return layer;
}

/* The slot of the entry named `name` in the finished table, or -1. */
static int64_t tsffi__slot_of(const uint64_t *slots, uint64_t buckets, const unsigned char *table,
                              const unsigned char *head, uint64_t table_end,
                              const unsigned char *tail, uint64_t tail_len, const char *name,
                              size_t length) {
    int plain;
    uint64_t hash = tsffi__name_hash((const unsigned char *)name, (uint32_t)length, &plain);
    uint64_t tag = hash & 0xFFFFFFFF00000000ull, bucket = hash & (buckets - 1);
    for (; slots[bucket]; bucket = (bucket + 1) & (buckets - 1)) {
        if ((slots[bucket] & 0xFFFFFFFF00000000ull) != tag)
            continue;
        uint64_t k = (slots[bucket] & 0xFFFFFFFFull) - 1;
        const unsigned char *e = table + k * TSFFI__ENTRY_SIZE;
        uint32_t other_length = (uint32_t)(e[4] | e[5] << 8);
        if (other_length == length &&
            memcmp(tsffi__name_bytes(head, table_end, tail, tail_len, tsffi__le32(e), length), name,
                   length) == 0)
            return (int64_t)k;
    }
    return -1;
}

/* Check 7 for every entry of the index whose header and entry table are
 * `head` and whose bytes after the table, as far as names reach, are `tail`;
 * and the questions in `queries` (see struct tsffi__queries) answered in
 * `facts` (see TSFFI__FACT_*), which the caller sizes for them.
 * On TSFFI__SCAN_OK every name is written to `joined` in entry order, each
 * followed by '\n', and the joined length is the first fact.
 * On TSFFI__SCAN_JOINED_TOO_SMALL the index is valid but the names need that
 * many bytes: call again with that much. TSFFI__SCAN_DECLINED: see the file
 * comment (also: questions it cannot parse, a layer number too long). */
static int tsffi_index_scan(const char *head_chars, const char *tail_chars, uint64_t tail_len,
                            uint64_t count, uint64_t index_size, uint64_t resident_end,
                            const char *queries, char *joined, uint64_t joined_cap,
                            int64_t *facts) {
    /* char in the signature: cffi hands a Python bytes object to a char *
     * without copying it. */
    const unsigned char *head = (const unsigned char *)head_chars;
    const unsigned char *tail = (const unsigned char *)tail_chars;
    const uint64_t table_end = TSFFI__HEADER_SIZE + count * TSFFI__ENTRY_SIZE;
    struct tsffi__queries q;
    if (!tsffi__parse_queries(queries, &q))
        return TSFFI__SCAN_DECLINED;
    facts[TSFFI__FACT_JOINED_LENGTH] = 0;
    facts[TSFFI__FACT_FIRST_LAYER] = -1;
    for (int k = 0; k < q.name_count; k++)
        facts[TSFFI__FACT_FIRST_SLOT + k] = -1;
    if (count == 0)
        return TSFFI__SCAN_OK;
    if (count > (UINT32_MAX >> 2))
        return TSFFI__SCAN_DECLINED; /* entry numbers are 32-bit */
    uint64_t buckets = 1;
    while (buckets < count * 2)
        buckets <<= 1;
    /* Each slot: the name's hash in the high half, entry number + 1 in the
     * low half (0 = empty). Probing compares hashes first, so it touches the
     * entry table only for a real duplicate (or a one-in-2^32 tie). */
    uint64_t *slots = calloc(buckets, sizeof *slots);
    if (!slots)
        return TSFFI__SCAN_DECLINED;

    const unsigned char *table = head + TSFFI__HEADER_SIZE;
    uint64_t written = 0;
    int64_t first_layer = -1;
    int verdict = TSFFI__SCAN_OK;
    for (uint64_t k = 0; k < count; k++) {
        const unsigned char *e = table + k * TSFFI__ENTRY_SIZE;
        uint64_t name_offset = tsffi__le32(e);
        uint32_t name_length = (uint32_t)(e[4] | e[5] << 8);
        uint64_t name_end = name_offset + name_length;
        const unsigned char *name = NULL;
        if (name_offset >= TSFFI__HEADER_SIZE && name_end <= index_size)
            name = tsffi__name_bytes(head, table_end, tail, tail_len, name_offset, name_length);
        if (!name || !tsffi__plane_ok(e, 8, index_size, resident_end) ||
            !tsffi__plane_ok(e, 40, index_size, resident_end) ||
            !tsffi__plane_ok(e, 56, index_size, resident_end)) {
            verdict = TSFFI__SCAN_DECLINED;
            break;
        }
        int plain;
        uint64_t hash = tsffi__name_hash(name, name_length, &plain);
        /* Non-ASCII: the engine decodes leniently, so two different byte
         * strings can be one name; Python canonicalises those. */
        if (!plain) {
            verdict = TSFFI__SCAN_DECLINED;
            break;
        }
        uint64_t tag = hash & 0xFFFFFFFF00000000ull;
        uint64_t bucket = hash & (buckets - 1);
        int duplicate = 0;
        while (slots[bucket]) {
            if ((slots[bucket] & 0xFFFFFFFF00000000ull) == tag) {
                const unsigned char *o =
                    table + ((slots[bucket] & 0xFFFFFFFFull) - 1) * TSFFI__ENTRY_SIZE;
                uint32_t other_length = (uint32_t)(o[4] | o[5] << 8);
                if (other_length == name_length &&
                    memcmp(tsffi__name_bytes(head, table_end, tail, tail_len, tsffi__le32(o),
                                             other_length),
                           name, name_length) == 0) {
                    duplicate = 1;
                    break;
                }
            }
            bucket = (bucket + 1) & (buckets - 1);
        }
        if (duplicate) {
            verdict = TSFFI__SCAN_DECLINED;
            break;
        }
        slots[bucket] = tag | (k + 1);
        int64_t layer = tsffi__layer_of(name, name_length, &q);
        if (layer == -2) {
            verdict = TSFFI__SCAN_DECLINED;
            break;
        }
        if (layer >= 0 && (first_layer < 0 || layer < first_layer))
            first_layer = layer;
        if (written + name_length + 1 <= joined_cap) {
            memcpy(joined + written, name, name_length);
            joined[written + name_length] = '\n';
        }
        written += (uint64_t)name_length + 1;
    }
    if (verdict == TSFFI__SCAN_OK)
        for (int k = 0; k < q.name_count; k++)
            facts[TSFFI__FACT_FIRST_SLOT + k] = tsffi__slot_of(
                slots, buckets, table, head, table_end, tail, tail_len, q.names[k], q.name_lens[k]);
    free(slots);
    if (verdict != TSFFI__SCAN_OK)
        return verdict;
    facts[TSFFI__FACT_JOINED_LENGTH] = (int64_t)written;
    facts[TSFFI__FACT_FIRST_LAYER] = first_layer;
    return written <= joined_cap ? TSFFI__SCAN_OK : TSFFI__SCAN_JOINED_TOO_SMALL;
}
