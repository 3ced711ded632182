/* Avro binary payloads -> Arrow column buffers, by a small program compiled in Python.
 *
 * Theory of operation: connector/typed/avro_arrow.py resolves a (reader, writer) schema pair once and
 * compiles it into a tree of ops (nested tuples) and a list of output columns; ``compile`` turns them
 * into C structs held by a capsule. ``decode(program, payloads, offset)`` runs the op tree over every
 * payload (from ``offset``), appending to growable per-column buffers, and returns one tuple per column:
 * (length, null_count, validity bitmap or None, offsets or None, data or None), which Python wraps
 * with pyarrow.Array.from_buffers.
 *
 * Every read is bounds-checked against the payload; varints are at most 10 bytes; block counts of
 * arrays and maps are bounded by what the remaining bytes could encode, and items that encode in no bytes
 * at all (null, fixed(0), records of those) by one budget per record, ZERO_SIZE_ITEMS_BASE +
 * ZERO_SIZE_ITEMS_PER_BYTE items per byte of the record, shared by every array of the record however they
 * nest (so the items a column decodes to stay proportional to its bytes however they are split into
 * records); strings are checked to be valid UTF-8; bytes left after a record are corruption. A bad record raises ValueError naming its index and the reason (the caller then falls
 * back to the per-record decoder, which attributes it exactly).
 *
 * A map's keys must be distinct (a dict would merge duplicates): a hash table over the keys, hashed with
 * SipHash-1-3 under a key drawn from os.urandom when the module loads, so keys chosen to collide (in a
 * known hash, or with a known seed such as the PYTHONHASHSEED=0 Spark gives its Python workers) cannot turn
 * the check quadratic.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* column kinds */
enum { C_NULL = 0, C_BOOL = 1, C_FIXED = 2, C_BIN = 3, C_LIST = 4, C_STRUCT = 5 };

/* op codes (keep in sync with avro_arrow.py) */
enum {
    OP_ERR = 0, OP_NULL = 1, OP_BOOL = 2, OP_LONG = 3, OP_FLOAT = 4, OP_DOUBLE = 5, OP_BYTES = 6,
    OP_FIXED = 7, OP_DECB = 8, OP_DECF = 9, OP_ENUM = 10, OP_ARRAY = 11, OP_MAP = 12, OP_RECORD = 13,
    OP_UNION = 14, OP_MEMBER = 15, OP_CONST = 16, OP_MAX = 17
};
/* OP_LONG / OP_FLOAT / OP_DOUBLE targets */
enum { T_SKIP = 0, T_I32 = 1, T_I64 = 2, T_F32 = 3, T_F64 = 4 };
/* OP_LONG range checks (what Python's date / datetime accept, as the per-record path converts) */
enum { R_NONE = 0, R_DATE = 1, R_DT_MILLIS = 2, R_DT_MICROS = 3 };

/* zero-size array items one record may declare over all its arrays: BASE + PER_BYTE * its length
 * (keep in sync with avro_format.py) */
#define ZERO_SIZE_ITEMS_BASE 64
#define ZERO_SIZE_ITEMS_PER_BYTE 8

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

typedef struct {
    int kind;
    int width;
    int nkids;
    int *kids;
    Buf valid;  /* one byte per value */
    Buf offs;   /* int32 offsets (BIN, LIST) */
    Buf data;   /* values (BOOL: one byte per value) */
    Py_ssize_t length;
    Py_ssize_t nulls;
} Col;

typedef struct Op {
    int op;
    int col;
    long long a, b, c;
    int nkids;
    struct Op **kids;
    /* OP_ERR: message; OP_CONST: value; OP_ENUM: per writer index, symbol (NULL: not readable) */
    char *blob;
    Py_ssize_t blob_len;
    int ntable;
    char **table;
    Py_ssize_t *table_len;
} Op;

typedef struct {
    int ncols;
    int *kinds;
    int *widths;
    int *nkids;
    int **kids;
    Op *root;
} Program;

typedef struct {
    const uint8_t *p, *end;
    Col *cols;
    char err[256];
    int nomem;
    int64_t zero_left;   /* zero-size items this record may still declare */
    int *dup_table;
    Py_ssize_t dup_cap;
} Dec;

/* ------------------------------------------------------------------------------------------------ */
/* buffers                                                                                          */

static int buf_reserve(Dec *d, Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra) {
        if (cap > PY_SSIZE_T_MAX / 2) { d->nomem = 1; return -1; }
        cap *= 2;
    }
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (!p) { d->nomem = 1; return -1; }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Dec *d, Buf *b, const void *src, Py_ssize_t n) {
    if (b->len + n > b->cap && buf_reserve(d, b, n) < 0) return -1;
    if (n) memcpy(b->p + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static inline int buf_byte(Dec *d, Buf *b, uint8_t v) {
    if (b->len + 1 > b->cap && buf_reserve(d, b, 1) < 0) return -1;
    b->p[b->len++] = (char)v;
    return 0;
}

static inline int buf_zeros(Dec *d, Buf *b, Py_ssize_t n) {
    if (b->len + n > b->cap && buf_reserve(d, b, n) < 0) return -1;
    memset(b->p + b->len, 0, (size_t)n);
    b->len += n;
    return 0;
}

static int fail(Dec *d, const char *msg) {
    if (!d->err[0]) snprintf(d->err, sizeof d->err, "%s", msg);
    return -1;
}

/* ------------------------------------------------------------------------------------------------ */
/* appending to columns                                                                             */

static inline int push_offset(Dec *d, Col *c, Py_ssize_t end) {
    if (end > INT32_MAX) return fail(d, "column exceeds 2**31-1 bytes or items");
    int32_t o = (int32_t)end;
    return buf_put(d, &c->offs, &o, 4);
}

static inline int mark_valid(Dec *d, Col *c) {
    c->length++;
    return buf_byte(d, &c->valid, 1);
}

static int append_zero(Dec *d, int ci);

/* A null value: for a struct, its children get a zero value (as pyarrow.array builds them). */
static int append_null(Dec *d, int ci) {
    Col *c = &d->cols[ci];
    c->length++;
    c->nulls++;
    switch (c->kind) {
    case C_NULL:
        return 0;
    case C_BOOL:
        if (buf_byte(d, &c->valid, 0) < 0) return -1;
        return buf_byte(d, &c->data, 0);
    case C_FIXED:
        if (buf_byte(d, &c->valid, 0) < 0) return -1;
        return buf_zeros(d, &c->data, c->width);
    case C_BIN:
        if (buf_byte(d, &c->valid, 0) < 0) return -1;
        return push_offset(d, c, c->data.len);
    case C_LIST:
        if (buf_byte(d, &c->valid, 0) < 0) return -1;
        return push_offset(d, c, d->cols[c->kids[0]].length);
    case C_STRUCT:
        if (buf_byte(d, &c->valid, 0) < 0) return -1;
        for (int k = 0; k < c->nkids; k++)
            if (append_zero(d, c->kids[k]) < 0) return -1;
        return 0;
    }
    return fail(d, "bad column kind");
}

static int append_zero(Dec *d, int ci) {
    Col *c = &d->cols[ci];
    if (c->kind == C_NULL) {
        c->length++;
        c->nulls++;
        return 0;
    }
    if (mark_valid(d, c) < 0) return -1;
    switch (c->kind) {
    case C_BOOL:
        return buf_byte(d, &c->data, 0);
    case C_FIXED:
        return buf_zeros(d, &c->data, c->width);
    case C_BIN:
        return push_offset(d, c, c->data.len);
    case C_LIST:
        return push_offset(d, c, d->cols[c->kids[0]].length);
    case C_STRUCT:
        for (int k = 0; k < c->nkids; k++)
            if (append_zero(d, c->kids[k]) < 0) return -1;
        return 0;
    }
    return fail(d, "bad column kind");
}

/* ------------------------------------------------------------------------------------------------ */
/* primitives                                                                                       */

static inline int rd_long(Dec *d, int64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    for (int i = 0; i < 10; i++) {
        if (d->p >= d->end) return fail(d, "truncated (in a varint)");
        uint8_t b = *d->p++;
        if (i == 9 && b > 1) return fail(d, "varint overflows 64 bits");
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            return 0;
        }
        shift += 7;
    }
    return fail(d, "varint longer than 10 bytes");
}

static int utf8_valid(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ULL)) { i += 8; continue; }
        }
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) return 0;
            uint8_t c1 = s[i + 1], c2 = s[i + 2];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && c1 < 0xA0) return 0;   /* overlong */
            if (c == 0xED && c1 > 0x9F) return 0;   /* surrogates */
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) return 0;
            uint8_t c1 = s[i + 1], c2 = s[i + 2], c3 = s[i + 3];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && c1 < 0x90) return 0;   /* overlong */
            if (c == 0xF4 && c1 > 0x8F) return 0;   /* > U+10FFFF */
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

static inline int rd_len(Dec *d, Py_ssize_t *out) {
    int64_t n;
    if (rd_long(d, &n) < 0) return -1;
    if (n < 0) return fail(d, "negative length");
    if (n > d->end - d->p) return fail(d, "truncated (a length past the end of the record)");
    *out = (Py_ssize_t)n;
    return 0;
}

static inline int put_bin(Dec *d, Col *c, const uint8_t *s, Py_ssize_t n) {
    if (buf_put(d, &c->data, s, n) < 0) return -1;
    if (push_offset(d, c, c->data.len) < 0) return -1;
    return mark_valid(d, c);
}

/* big-endian two's complement bytes -> 16 bytes little-endian, |value| < 10**precision */
static int put_decimal(Dec *d, Col *c, const uint8_t *s, Py_ssize_t n, int precision) {
    __int128 v = 0;
    if (n > 0) {
        int neg = s[0] & 0x80;
        if (n > 16) {
            uint8_t ext = neg ? 0xFF : 0x00;
            for (Py_ssize_t i = 0; i < n - 16; i++)
                if (s[i] != ext) return fail(d, "decimal out of range");
            if ((s[n - 16] & 0x80) != (ext & 0x80)) return fail(d, "decimal out of range");
            s += n - 16;
            n = 16;
        }
        unsigned __int128 u = neg ? ~(unsigned __int128)0 : 0;
        for (Py_ssize_t i = 0; i < n; i++) u = (u << 8) | s[i];
        v = (__int128)u;
    }
    unsigned __int128 limit = 1;
    for (int i = 0; i < precision; i++) limit *= 10;
    unsigned __int128 mag = v < 0 ? (unsigned __int128)(-(v + 1)) + 1 : (unsigned __int128)v;
    if (mag >= limit) return fail(d, "decimal does not fit its precision");
    uint8_t le[16];
    unsigned __int128 u = (unsigned __int128)v;
    for (int i = 0; i < 16; i++) { le[i] = (uint8_t)(u & 0xFF); u >>= 8; }
    if (buf_put(d, &c->data, le, 16) < 0) return -1;
    return mark_valid(d, c);
}

/* ------------------------------------------------------------------------------------------------ */
/* the interpreter                                                                                  */

static int run(Dec *d, const Op *op);

/* SipHash-1-3 (as CPython's str hash) under sip_k0, sip_k1: random per process (see PyInit) */
static uint64_t sip_k0, sip_k1;

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                        \
    do {                                                                                \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                       \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                          \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                          \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                       \
    } while (0)

static uint64_t hash_bytes(const uint8_t *s, Py_ssize_t n) {
    uint64_t v0 = sip_k0 ^ 0x736f6d6570736575ULL, v1 = sip_k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = sip_k0 ^ 0x6c7967656e657261ULL, v3 = sip_k1 ^ 0x7465646279746573ULL;
    uint64_t b = (uint64_t)n << 56;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t m;
        memcpy(&m, s + i, 8);   /* little-endian hosts: the reference's byte order; elsewhere still keyed */
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    for (int k = 0; i < n; i++, k++) b |= (uint64_t)s[i] << (8 * k);
    v3 ^= b;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* keys [first, last) of a map's key column must be distinct (a dict would merge duplicates) */
static int check_distinct(Dec *d, Col *keys, Py_ssize_t first, Py_ssize_t last) {
    Py_ssize_t n = last - first;
    if (n < 2) return 0;
    const int32_t *off = (const int32_t *)keys->offs.p;
    const uint8_t *data = (const uint8_t *)keys->data.p;
    if (n <= 8) {
        for (Py_ssize_t i = first; i < last; i++)
            for (Py_ssize_t j = i + 1; j < last; j++) {
                int32_t li = off[i + 1] - off[i], lj = off[j + 1] - off[j];
                if (li == lj && (li == 0 || memcmp(data + off[i], data + off[j], (size_t)li) == 0))
                    return fail(d, "duplicate map key");
            }
        return 0;
    }
    Py_ssize_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > d->dup_cap) {
        int *t = PyMem_Realloc(d->dup_table, (size_t)cap * sizeof(int));
        if (!t) { d->nomem = 1; return -1; }
        d->dup_table = t;
        d->dup_cap = cap;
    }
    int *t = d->dup_table;
    for (Py_ssize_t i = 0; i < cap; i++) t[i] = -1;
    for (Py_ssize_t i = first; i < last; i++) {
        int32_t li = off[i + 1] - off[i];
        Py_ssize_t h = (Py_ssize_t)(hash_bytes(data + off[i], li) & (uint64_t)(cap - 1));
        while (t[h] >= 0) {
            Py_ssize_t j = first + t[h];
            int32_t lj = off[j + 1] - off[j];
            if (li == lj && (li == 0 || memcmp(data + off[i], data + off[j], (size_t)li) == 0))
                return fail(d, "duplicate map key");
            h = (h + 1) & (cap - 1);
        }
        t[h] = (int)(i - first);
    }
    return 0;
}

/* the item count of the next block (0: the end; -1: a block skipped whole); *count bounded by the bytes
 * left, or for items of no bytes (min_size 0) by the record's budget d->zero_left. An array or map the
 * reader skips (skipping) has its blocks with a byte size skipped by that size, as fastavro does. */
static int rd_block(Dec *d, int skipping, int64_t min_size, int64_t *count) {
    int64_t n;
    if (rd_long(d, &n) < 0) return -1;
    if (n < 0) {
        if (n == INT64_MIN) return fail(d, "bad block count");
        n = -n;
        int64_t size;
        if (rd_long(d, &size) < 0) return -1;
        if (size < 0 || size > d->end - d->p) return fail(d, "bad block size");
        if (skipping) {
            d->p += size;
            *count = -1;
            return 0;
        }
    }
    if (min_size > 0) {
        if (n > (d->end - d->p) / min_size) return fail(d, "block count larger than the bytes left");
    } else {
        if (n > d->zero_left)
            return fail(d, "too many zero-size items (ZERO_SIZE_ITEMS_BASE + ZERO_SIZE_ITEMS_PER_BYTE per byte "
                           "of the record)");
        d->zero_left -= n;
    }
    *count = n;
    return 0;
}

static int run(Dec *d, const Op *op) {
    Col *c = op->col >= 0 ? &d->cols[op->col] : NULL;
    switch (op->op) {
    case OP_ERR:
        return fail(d, op->blob ? op->blob : "unreadable");
    case OP_NULL:
        return c ? append_null(d, op->col) : 0;
    case OP_BOOL: {
        if (d->p >= d->end) return fail(d, "truncated (boolean)");
        uint8_t b = *d->p++;
        if (!c) return 0;
        if (buf_byte(d, &c->data, b != 0) < 0) return -1;
        return mark_valid(d, c);
    }
    case OP_LONG: {
        int64_t v;
        if (rd_long(d, &v) < 0) return -1;
        switch (op->c) {
        case R_DATE:
            if (v < -719162LL || v > 2932896LL) return fail(d, "date out of range");
            break;
        case R_DT_MILLIS:
            if (v < -62135596800000LL || v > 253402300799999LL) return fail(d, "timestamp out of range");
            break;
        case R_DT_MICROS:
            if (v < -62135596800000000LL || v > 253402300799999999LL) return fail(d, "timestamp out of range");
            break;
        }
        if (op->b != 1) {
            int64_t r;
            if (__builtin_mul_overflow(v, (int64_t)op->b, &r)) return fail(d, "timestamp overflows 64 bits");
            v = r;
        }
        switch (op->a) {
        case T_SKIP:
            return 0;
        case T_I32: {
            if (v < INT32_MIN || v > INT32_MAX) return fail(d, "int out of range");
            int32_t x = (int32_t)v;
            if (buf_put(d, &c->data, &x, 4) < 0) return -1;
            break;
        }
        case T_I64:
            if (buf_put(d, &c->data, &v, 8) < 0) return -1;
            break;
        case T_F32: {
            float x = (float)(double)v;
            if (buf_put(d, &c->data, &x, 4) < 0) return -1;
            break;
        }
        case T_F64: {
            double x = (double)v;
            if (buf_put(d, &c->data, &x, 8) < 0) return -1;
            break;
        }
        }
        return mark_valid(d, c);
    }
    case OP_FLOAT: {
        if (d->end - d->p < 4) return fail(d, "truncated (float)");
        float f;
        memcpy(&f, d->p, 4);
        d->p += 4;
        if (op->a == T_SKIP) return 0;
        if (op->a == T_F32) {
            /* through a double, as the per-record path's Python float: a signaling NaN comes out quiet */
            volatile double wide = (double)f;
            float x = (float)wide;
            if (buf_put(d, &c->data, &x, 4) < 0) return -1;
        } else {
            double x = (double)f;
            if (buf_put(d, &c->data, &x, 8) < 0) return -1;
        }
        return mark_valid(d, c);
    }
    case OP_DOUBLE: {
        if (d->end - d->p < 8) return fail(d, "truncated (double)");
        const uint8_t *s = d->p;
        d->p += 8;
        if (op->a == T_SKIP) return 0;
        if (buf_put(d, &c->data, s, 8) < 0) return -1;
        return mark_valid(d, c);
    }
    case OP_BYTES: {
        Py_ssize_t n;
        if (rd_len(d, &n) < 0) return -1;
        const uint8_t *s = d->p;
        d->p += n;
        if (!c) return 0;
        if (op->a && !utf8_valid(s, n)) return fail(d, "invalid UTF-8 in a string");
        return put_bin(d, c, s, n);
    }
    case OP_FIXED: {
        Py_ssize_t n = (Py_ssize_t)op->a;
        if (d->end - d->p < n) return fail(d, "truncated (fixed)");
        const uint8_t *s = d->p;
        d->p += n;
        if (!c) return 0;
        return put_bin(d, c, s, n);
    }
    case OP_DECB: {
        Py_ssize_t n;
        if (rd_len(d, &n) < 0) return -1;
        const uint8_t *s = d->p;
        d->p += n;
        return put_decimal(d, c, s, n, (int)op->a);
    }
    case OP_DECF: {
        Py_ssize_t n = (Py_ssize_t)op->a;
        if (d->end - d->p < n) return fail(d, "truncated (fixed)");
        const uint8_t *s = d->p;
        d->p += n;
        return put_decimal(d, c, s, n, (int)op->b);
    }
    case OP_ENUM: {
        int64_t i;
        if (rd_long(d, &i) < 0) return -1;
        if (!c) return 0;
        if (i < 0 || i >= op->ntable) return fail(d, "enum index out of range");
        if (!op->table[i]) return fail(d, "enum symbol unknown to the reader (and no default)");
        return put_bin(d, c, (const uint8_t *)op->table[i], op->table_len[i]);
    }
    case OP_ARRAY: {
        int64_t count;
        const Op *item = op->kids[0];
        for (;;) {
            if (rd_block(d, !c, op->b, &count) < 0) return -1;
            if (!count) break;
            for (int64_t k = 0; k < count; k++)
                if (run(d, item) < 0) return -1;
        }
        if (!c) return 0;
        if (push_offset(d, c, d->cols[c->kids[0]].length) < 0) return -1;
        return mark_valid(d, c);
    }
    case OP_MAP: {
        int64_t count;
        const Op *value = op->kids[0];
        Col *keys = c ? &d->cols[op->a] : NULL;
        Col *entries = c ? &d->cols[op->b] : NULL;
        Py_ssize_t first = keys ? keys->length : 0;
        for (;;) {
            if (rd_block(d, !c, op->c, &count) < 0) return -1;
            if (!count) break;
            for (int64_t k = 0; k < count; k++) {
                Py_ssize_t n;
                if (rd_len(d, &n) < 0) return -1;
                const uint8_t *s = d->p;
                d->p += n;
                if (c) {
                    if (!utf8_valid(s, n)) return fail(d, "invalid UTF-8 in a map key");
                    if (put_bin(d, keys, s, n) < 0) return -1;
                    if (mark_valid(d, entries) < 0) return -1;
                }
                if (run(d, value) < 0) return -1;
            }
        }
        if (!c) return 0;
        if (check_distinct(d, keys, first, keys->length) < 0) return -1;
        if (push_offset(d, c, entries->length) < 0) return -1;
        return mark_valid(d, c);
    }
    case OP_RECORD:
        for (int k = 0; k < op->nkids; k++)
            if (run(d, op->kids[k]) < 0) return -1;
        return c ? mark_valid(d, c) : 0;
    case OP_UNION: {
        int64_t i;
        if (rd_long(d, &i) < 0) return -1;
        if (i < 0 || i >= op->nkids) return fail(d, "union branch index out of range");
        return run(d, op->kids[i]);
    }
    case OP_MEMBER:
        if (run(d, op->kids[0]) < 0) return -1;
        for (int k = 0; k < c->nkids; k++)
            if (k != op->a && append_null(d, c->kids[k]) < 0) return -1;
        return mark_valid(d, c);
    case OP_CONST:
        switch (c->kind) {
        case C_BOOL:
            if (buf_byte(d, &c->data, op->a != 0) < 0) return -1;
            break;
        case C_FIXED:
            if (buf_put(d, &c->data, op->blob, op->blob_len) < 0) return -1;
            break;
        case C_BIN:
            if (buf_put(d, &c->data, op->blob, op->blob_len) < 0) return -1;
            if (push_offset(d, c, c->data.len) < 0) return -1;
            break;
        default:
            return fail(d, "bad constant");
        }
        return mark_valid(d, c);
    }
    return fail(d, "bad op");
}

/* ------------------------------------------------------------------------------------------------ */
/* programs                                                                                         */

static void op_free(Op *op) {
    if (!op) return;
    for (int k = 0; k < op->nkids; k++) op_free(op->kids[k]);
    PyMem_Free(op->kids);
    PyMem_Free(op->blob);
    if (op->table) {
        for (int i = 0; i < op->ntable; i++) PyMem_Free(op->table[i]);
        PyMem_Free(op->table);
    }
    PyMem_Free(op->table_len);
    PyMem_Free(op);
}

static void program_free(Program *p) {
    if (!p) return;
    if (p->kids)
        for (int i = 0; i < p->ncols; i++) PyMem_Free(p->kids[i]);
    PyMem_Free(p->kids);
    PyMem_Free(p->kinds);
    PyMem_Free(p->widths);
    PyMem_Free(p->nkids);
    op_free(p->root);
    PyMem_Free(p);
}

static void capsule_free(PyObject *capsule) {
    program_free((Program *)PyCapsule_GetPointer(capsule, "pylog.avro_arrow.Program"));
}

static char *copy_bytes(PyObject *o, Py_ssize_t *len) {
    char *s;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(o, &s, &n) < 0) return NULL;
    char *out = PyMem_Malloc((size_t)n + 1);
    if (!out) { PyErr_NoMemory(); return NULL; }
    memcpy(out, s, (size_t)n);
    out[n] = 0;
    *len = n;
    return out;
}

/* (op, col, a, b, c, kids, blob) */
static Op *op_build(PyObject *t, int ncols, int depth) {
    if (depth > 200) { PyErr_SetString(PyExc_ValueError, "program too deep"); return NULL; }
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 7) {
        PyErr_SetString(PyExc_TypeError, "an op is a 7-tuple");
        return NULL;
    }
    Op *op = PyMem_Calloc(1, sizeof(Op));
    if (!op) { PyErr_NoMemory(); return NULL; }
    long long v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
        if (v[i] == -1 && PyErr_Occurred()) goto error;
    }
    op->op = (int)v[0];
    op->col = (int)v[1];
    op->a = v[2];
    op->b = v[3];
    op->c = v[4];
    if (op->op < 0 || op->op >= OP_MAX || op->col < -1 || op->col >= ncols) {
        PyErr_SetString(PyExc_ValueError, "bad op or column");
        goto error;
    }
    PyObject *kids = PyTuple_GET_ITEM(t, 5);
    if (!PyTuple_Check(kids)) { PyErr_SetString(PyExc_TypeError, "kids must be a tuple"); goto error; }
    op->nkids = (int)PyTuple_GET_SIZE(kids);
    if (op->nkids) {
        op->kids = PyMem_Calloc((size_t)op->nkids, sizeof(Op *));
        if (!op->kids) { PyErr_NoMemory(); goto error; }
        for (int k = 0; k < op->nkids; k++) {
            op->kids[k] = op_build(PyTuple_GET_ITEM(kids, k), ncols, depth + 1);
            if (!op->kids[k]) goto error;
        }
    }
    PyObject *blob = PyTuple_GET_ITEM(t, 6);
    if (PyBytes_Check(blob)) {
        op->blob = copy_bytes(blob, &op->blob_len);
        if (!op->blob) goto error;
    } else if (PyTuple_Check(blob)) {
        op->ntable = (int)PyTuple_GET_SIZE(blob);
        op->table = PyMem_Calloc((size_t)op->ntable + 1, sizeof(char *));
        op->table_len = PyMem_Calloc((size_t)op->ntable + 1, sizeof(Py_ssize_t));
        if (!op->table || !op->table_len) { PyErr_NoMemory(); goto error; }
        for (int i = 0; i < op->ntable; i++) {
            PyObject *s = PyTuple_GET_ITEM(blob, i);
            if (s == Py_None) continue;
            op->table[i] = copy_bytes(s, &op->table_len[i]);
            if (!op->table[i]) goto error;
        }
    } else if (blob != Py_None) {
        PyErr_SetString(PyExc_TypeError, "blob must be bytes, a tuple or None");
        goto error;
    }
    /* the columns an op writes must exist and be of the kind it writes */
    int needs_col = (op->op == OP_MEMBER || op->op == OP_CONST || op->op == OP_DECB || op->op == OP_DECF
                     || ((op->op == OP_LONG || op->op == OP_FLOAT || op->op == OP_DOUBLE) && op->a != T_SKIP));
    if (needs_col && op->col < 0) { PyErr_SetString(PyExc_ValueError, "op needs a column"); goto error; }
    if ((op->op == OP_ARRAY || op->op == OP_MAP || op->op == OP_MEMBER) && op->nkids != 1) {
        PyErr_SetString(PyExc_ValueError, "op needs one kid");
        goto error;
    }
    if (op->op == OP_MAP && op->col >= 0 && (op->a < 0 || op->a >= ncols || op->b < 0 || op->b >= ncols)) {
        PyErr_SetString(PyExc_ValueError, "bad map columns");
        goto error;
    }
    return op;
error:
    op_free(op);
    return NULL;
}

static int op_check(const Op *op, const Program *p) {
    int kind = op->col >= 0 ? p->kinds[op->col] : -1;
    int width = op->col >= 0 ? p->widths[op->col] : 0;
    int ok = 1;
    if (op->col >= 0) {
        switch (op->op) {
        case OP_BOOL: ok = kind == C_BOOL; break;
        case OP_LONG:
            ok = kind == C_FIXED && width == ((op->a == T_I32 || op->a == T_F32) ? 4 : 8);
            break;
        case OP_FLOAT: case OP_DOUBLE:
            ok = kind == C_FIXED && width == (op->a == T_F32 ? 4 : 8) && (op->op == OP_FLOAT || op->a == T_F64);
            break;
        case OP_BYTES: case OP_FIXED: case OP_ENUM: ok = kind == C_BIN; break;
        case OP_DECB: case OP_DECF:
            ok = kind == C_FIXED && width == 16 && (op->op == OP_DECB ? op->a : op->b) <= 38;
            break;
        case OP_ARRAY: ok = kind == C_LIST; break;
        case OP_MAP:
            ok = kind == C_LIST && p->nkids[op->col] == 1 && p->kids[op->col][0] == op->b
                 && p->kinds[op->b] == C_STRUCT && p->nkids[op->b] == 2 && p->kids[op->b][0] == op->a
                 && p->kinds[op->a] == C_BIN;
            break;
        case OP_RECORD: ok = kind == C_STRUCT; break;
        case OP_MEMBER: ok = kind == C_STRUCT && op->a >= 0 && op->a < p->nkids[op->col]; break;
        case OP_CONST:
            ok = kind == C_BOOL || kind == C_BIN || (kind == C_FIXED && op->blob_len == width);
            break;
        }
    }
    if (op->op == OP_FIXED && op->a < 0) ok = 0;
    if (op->op == OP_DECF && op->a < 0) ok = 0;
    if (!ok) { PyErr_SetString(PyExc_ValueError, "op does not fit its column"); return -1; }
    for (int k = 0; k < op->nkids; k++)
        if (op_check(op->kids[k], p) < 0) return -1;
    return 0;
}

/* compile(columns, root) -> capsule; columns: [(kind, width, (kid column, ...)), ...] */
static PyObject *py_compile(PyObject *self, PyObject *args) {
    PyObject *columns, *root;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &columns, &PyTuple_Type, &root)) return NULL;
    Program *p = PyMem_Calloc(1, sizeof(Program));
    if (!p) return PyErr_NoMemory();
    int n = (int)PyList_GET_SIZE(columns);
    p->ncols = n;
    p->kinds = PyMem_Calloc((size_t)n + 1, sizeof(int));
    p->widths = PyMem_Calloc((size_t)n + 1, sizeof(int));
    p->nkids = PyMem_Calloc((size_t)n + 1, sizeof(int));
    p->kids = PyMem_Calloc((size_t)n + 1, sizeof(int *));
    if (!p->kinds || !p->widths || !p->nkids || !p->kids) { PyErr_NoMemory(); goto error; }
    for (int i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(columns, i);
        int kind, width;
        PyObject *kids;
        if (!PyArg_ParseTuple(t, "iiO!", &kind, &width, &PyTuple_Type, &kids)) goto error;
        if (kind < C_NULL || kind > C_STRUCT || width < 0 || width > 16) {
            PyErr_SetString(PyExc_ValueError, "bad column");
            goto error;
        }
        p->kinds[i] = kind;
        p->widths[i] = width;
        p->nkids[i] = (int)PyTuple_GET_SIZE(kids);
        if ((kind == C_LIST && p->nkids[i] != 1) || (kind != C_LIST && kind != C_STRUCT && p->nkids[i])) {
            PyErr_SetString(PyExc_ValueError, "bad column children");
            goto error;
        }
        p->kids[i] = PyMem_Calloc((size_t)p->nkids[i] + 1, sizeof(int));
        if (!p->kids[i]) { PyErr_NoMemory(); goto error; }
        for (int k = 0; k < p->nkids[i]; k++) {
            long kid = PyLong_AsLong(PyTuple_GET_ITEM(kids, k));
            if (kid == -1 && PyErr_Occurred()) goto error;
            if (kid <= i || kid >= n) {   /* children come after their parent: no cycles */
                PyErr_SetString(PyExc_ValueError, "bad child column");
                goto error;
            }
            p->kids[i][k] = (int)kid;
        }
    }
    p->root = op_build(root, n, 0);
    if (!p->root) goto error;
    if (op_check(p->root, p) < 0) goto error;
    PyObject *capsule = PyCapsule_New(p, "pylog.avro_arrow.Program", capsule_free);
    if (!capsule) goto error;
    return capsule;
error:
    program_free(p);
    return NULL;
}

static PyObject *bitmap(const Buf *valid, Py_ssize_t length) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, (length + 7) / 8);
    if (!out) return NULL;
    uint8_t *bits = (uint8_t *)PyBytes_AS_STRING(out);
    memset(bits, 0, (size_t)((length + 7) / 8));
    const uint8_t *v = (const uint8_t *)valid->p;
    for (Py_ssize_t i = 0; i < length; i++)
        if (v[i]) bits[i >> 3] |= (uint8_t)(1u << (i & 7));
    return out;
}

static PyObject *as_bytes(const Buf *b) {
    return PyBytes_FromStringAndSize(b->p ? b->p : "", b->len);
}

static PyObject *column_result(Col *c) {
    PyObject *validity = NULL, *offsets = NULL, *data = NULL;
    if (c->kind != C_NULL && c->nulls) {
        validity = bitmap(&c->valid, c->length);
        if (!validity) goto error;
    }
    if (c->kind == C_BIN || c->kind == C_LIST) {
        offsets = as_bytes(&c->offs);
        if (!offsets) goto error;
    }
    if (c->kind == C_BOOL) {
        data = bitmap(&c->data, c->length);
        if (!data) goto error;
    } else if (c->kind == C_FIXED || c->kind == C_BIN) {
        data = as_bytes(&c->data);
        if (!data) goto error;
    }
    PyObject *t = Py_BuildValue("(nnOOO)", c->length, c->nulls, validity ? validity : Py_None,
                                offsets ? offsets : Py_None, data ? data : Py_None);
    Py_XDECREF(validity);
    Py_XDECREF(offsets);
    Py_XDECREF(data);
    return t;
error:
    Py_XDECREF(validity);
    Py_XDECREF(offsets);
    Py_XDECREF(data);
    return NULL;
}

/* decode(program, payloads, offset, header=None) -> [(length, null_count, validity, offsets, data), ...]
 * With a header (bytes), every payload must start with it (Confluent's magic byte and one schema id). */
static PyObject *py_decode(PyObject *self, PyObject *args) {
    PyObject *capsule, *payloads;
    Py_ssize_t offset;
    const char *header = NULL;
    Py_ssize_t header_len = 0;
    if (!PyArg_ParseTuple(args, "OOn|z#", &capsule, &payloads, &offset, &header, &header_len)) return NULL;
    Program *p = PyCapsule_GetPointer(capsule, "pylog.avro_arrow.Program");
    if (!p) return NULL;
    if (offset < 0) { PyErr_SetString(PyExc_ValueError, "negative offset"); return NULL; }
    PyObject *seq = PySequence_Fast(payloads, "payloads must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *result = NULL;
    Dec d;
    memset(&d, 0, sizeof d);
    d.cols = PyMem_Calloc((size_t)p->ncols + 1, sizeof(Col));
    if (!d.cols) { Py_DECREF(seq); return PyErr_NoMemory(); }
    for (int i = 0; i < p->ncols; i++) {
        Col *c = &d.cols[i];
        c->kind = p->kinds[i];
        c->width = p->widths[i];
        c->nkids = p->nkids[i];
        c->kids = p->kids[i];
        if (c->kind == C_BIN || c->kind == C_LIST) {
            int32_t zero = 0;
            if (buf_put(&d, &c->offs, &zero, 4) < 0) goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = items[i];
        const uint8_t *s;
        Py_ssize_t len;
        Py_buffer view;
        int have_view = 0;
        if (PyBytes_Check(item)) {
            s = (const uint8_t *)PyBytes_AS_STRING(item);
            len = PyBytes_GET_SIZE(item);
        } else {
            if (item == Py_None || PyObject_GetBuffer(item, &view, PyBUF_SIMPLE) < 0) {
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError, "record %zd: not a bytes-like payload", i);
                goto done;
            }
            have_view = 1;
            s = (const uint8_t *)view.buf;
            len = view.len;
        }
        int rc;
        if (len < offset || len < header_len) {
            rc = fail(&d, "shorter than its header");
        } else if (header_len && memcmp(s, header, (size_t)header_len) != 0) {
            rc = fail(&d, "another header (schema id) than the first record's");
        } else {
            d.p = s + offset;
            d.end = s + len;
            d.zero_left = ZERO_SIZE_ITEMS_BASE + ZERO_SIZE_ITEMS_PER_BYTE * (int64_t)(len - offset);
            rc = run(&d, p->root);
            if (rc == 0 && d.p != d.end) {
                snprintf(d.err, sizeof d.err, "%zd bytes left after the record (%zd bytes)",
                         (Py_ssize_t)(d.end - d.p), len);
                rc = -1;
            }
        }
        if (have_view) PyBuffer_Release(&view);
        if (rc < 0) {
            if (d.nomem) PyErr_NoMemory();
            else PyErr_Format(PyExc_ValueError, "corrupt Avro record %zd: %s", i, d.err);
            goto done;
        }
    }
    result = PyList_New(p->ncols);
    if (!result) goto done;
    for (int i = 0; i < p->ncols; i++) {
        PyObject *t = column_result(&d.cols[i]);
        if (!t) { Py_CLEAR(result); goto done; }
        PyList_SET_ITEM(result, i, t);
    }
done:
    for (int i = 0; i < p->ncols; i++) {
        PyMem_Free(d.cols[i].valid.p);
        PyMem_Free(d.cols[i].offs.p);
        PyMem_Free(d.cols[i].data.p);
    }
    PyMem_Free(d.cols);
    PyMem_Free(d.dup_table);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"compile", py_compile, METH_VARARGS, "compile(columns, root_op) -> program"},
    {"decode", py_decode, METH_VARARGS, "decode(program, payloads, offset, header=None) -> column buffers"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "connector.typed._avro_arrow",
    "Avro binary payloads decoded straight into Arrow buffers (see connector.typed.avro_arrow).", -1, methods,
};

PyMODINIT_FUNC PyInit__avro_arrow(void) {
    /* the map-key hash's key: 16 bytes of os.urandom, never derived from PYTHONHASHSEED */
    PyObject *os = PyImport_ImportModule("os");
    if (!os) return NULL;
    PyObject *key = PyObject_CallMethod(os, "urandom", "i", 16);
    Py_DECREF(os);
    if (!key) return NULL;
    if (!PyBytes_Check(key) || PyBytes_GET_SIZE(key) != 16) {
        Py_DECREF(key);
        PyErr_SetString(PyExc_RuntimeError, "os.urandom(16) did not give 16 bytes");
        return NULL;
    }
    memcpy(&sip_k0, PyBytes_AS_STRING(key), 8);
    memcpy(&sip_k1, PyBytes_AS_STRING(key) + 8, 8);
    Py_DECREF(key);
    return PyModule_Create(&module);
}
