/* Kafka v2 record batches (uncompressed) -> the Arrow buffers of the source's row columns, in one pass.
 *
 * Theory of operation: connector/source/arrow_records.py walks a Fetch response's batches in Python (which
 * batches become rows: control batches, aborted transactions, the range [low, high)) and hands the
 * uncompressed v2 batches whose every record is a row to ``decode_batches(records, spans)``; each span is
 * (start, end, base_offset, base_timestamp, log_append_time, max_timestamp, record_count, timestamp_type),
 * ``start``/``end`` bounding the batch's records in ``records``. The records are parsed here (varints,
 * key, value, headers skipped) and their fields appended to one buffer per column; the result is
 * (rows, key_offsets, key_data, key_validity or None, key_nulls, value_offsets, value_data,
 *  value_validity or None, value_nulls, offsets, timestamps_us, timestamp_types),
 * which Python wraps with pyarrow.Array.from_buffers (no per-record Python object).
 *
 * Every buffer is reserved before the parse (the rows are the spans' record counts; a column's bytes fit in the
 * spans' bytes), so the parse allocates nothing and touches no Python object: it runs without the GIL, and the
 * reader's prefetch thread receives the next Fetch meanwhile.
 *
 * Every read is bounds-checked against its span, varints are at most 10 bytes, a batch must hold exactly
 * its record count and each record exactly its length; anything else raises ValueError, and the caller
 * then decodes the batches with aiokafka's reader, whose error (or answer) is the reference.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t more) {
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

/* The one definition of a record (broker_sim/protocol/records.py: Kafka 4.1's DefaultRecord.readFrom), in C.
 * ByteUtils.readVarlong: a zigzag varlong of at most 10 bytes, the tenth shifted into bit 63; -1 when it runs
 * past ``end`` or is too long. */
static inline int read_varlong(const uint8_t **at, const uint8_t *end, int64_t *out) {
    const uint8_t *p = *at;
    uint64_t value = 0;
    for (int i = 0; i < 10; i++) {
        if (p >= end)
            return -1;
        uint8_t byte = *p++;
        value |= (uint64_t)(byte & 0x7f) << (7 * i);
        if (!(byte & 0x80)) {
            *at = p;
            *out = (int64_t)((value >> 1) ^ (uint64_t)-(int64_t)(value & 1));
            return 0;
        }
    }
    return -1;
}

/* ByteUtils.readVarint: at most 5 bytes, the fifth shifted into bit 28 of a 32-bit int (its bits past the 32nd
 * dropped, as Java's shift drops them), zigzag; -1 when it runs past ``end`` or is too long. */
static inline int read_varint(const uint8_t **at, const uint8_t *end, int64_t *out) {
    const uint8_t *p = *at;
    uint32_t value = 0;
    for (int i = 0; i < 5; i++) {
        if (p >= end)
            return -1;
        uint8_t byte = *p++;
        value |= (uint32_t)(byte & 0x7f) << (7 * i);
        if (!(byte & 0x80)) {
            *at = p;
            *out = (int32_t)((value >> 1) ^ (uint32_t)-(int32_t)(value & 1));
            return 0;
        }
    }
    return -1;
}

/* One record's fields, as parse_record reads them. */
typedef struct {
    int64_t ts_delta, offset_delta, key_len, value_len, header_count;
    const uint8_t *key, *value, *headers;  /* key/value: NULL when null */
} Record;

/* The record at *at (a batch's records end at ``end``) into ``r``, *at moved past it; NULL, or what is wrong:
 *   its length a varint >= 0 within the batch, its body read to its last byte exactly;
 *   attributes ONE byte (any value, ignored), timestampDelta a varlong, offsetDelta a varint;
 *   key and value lengths varints (any negative: null) within the record;
 *   a header count >= 0, each header a key length >= 0 and a value length (negative: null) within the record.
 */
static const char *parse_record(const uint8_t **at, const uint8_t *end, Record *r) {
    const uint8_t *p = *at;
    int64_t length, skip;
    if (read_varint(&p, end, &length) < 0 || length < 0 || length > end - p)
        return "bad record length";
    const uint8_t *record_end = p + length;
    if (p >= record_end)
        return "bad record length";
    p++; /* attributes */
    if (read_varlong(&p, record_end, &r->ts_delta) < 0 || read_varint(&p, record_end, &r->offset_delta) < 0)
        return "bad timestamp or offset delta";
    if (read_varint(&p, record_end, &r->key_len) < 0 || r->key_len > record_end - p)
        return "bad key length";
    r->key = r->key_len < 0 ? NULL : p;
    if (r->key_len > 0)
        p += r->key_len;
    if (read_varint(&p, record_end, &r->value_len) < 0 || r->value_len > record_end - p)
        return "bad value length";
    r->value = r->value_len < 0 ? NULL : p;
    if (r->value_len > 0)
        p += r->value_len;
    if (read_varint(&p, record_end, &r->header_count) < 0 || r->header_count < 0 ||
        r->header_count > record_end - p)
        return "bad header count";
    r->headers = p;
    for (int64_t h = 0; h < r->header_count; h++) {
        if (read_varint(&p, record_end, &skip) < 0 || skip < 0 || skip > record_end - p)
            return "bad header key";
        p += skip;
        if (read_varint(&p, record_end, &skip) < 0 || skip > record_end - p)
            return "bad header value";
        if (skip > 0)
            p += skip;
    }
    if (p != record_end)
        return "bytes left over after a record";
    *at = p;
    return NULL;
}

typedef struct {
    Buf offs, data, valid;
    Py_ssize_t nulls;
} BinCol;

/* one nullable bytes field (``data`` NULL: null) appended to ``col`` at ``row`` */
static int append_field(BinCol *col, Py_ssize_t row, const uint8_t *data, int64_t length, const char **why) {
    if (data == NULL) {
        col->nulls++;
        col->valid.p[row >> 3] &= (char)~(1 << (row & 7));
    } else if (length > 0) {
        if (length > col->data.cap - col->data.len) { /* cannot happen: reserved for all the spans' bytes */
            *why = "field bytes beyond the batches' bytes";
            return -1;
        }
        memcpy(col->data.p + col->data.len, data, (size_t)length);
        col->data.len += (Py_ssize_t)length;
    }
    if (col->data.len > INT32_MAX) {
        *why = "more than 2 GiB of bytes in one column";
        return -1;
    }
    ((int32_t *)col->offs.p)[row + 1] = (int32_t)col->data.len;
    return 0;
}

typedef struct {
    long long start, end, base_offset, base_ts, log_append, max_ts, count, kind;
} Span;

typedef struct {
    BinCol keys, values;
    Buf offsets, stamps, types;
    Py_ssize_t rows;
    const char *why;      /* a malformed batch: what is wrong, */
    long long bad_batch;  /* and its base offset */
} Columns;

/* every record of the spans into ``c``'s reserved buffers; -1 (``why``, ``bad_batch``) for a malformed batch.
 * Called without the GIL: it allocates nothing and touches no Python object. */
static int parse_spans(const uint8_t *records, const Span *spans, Py_ssize_t nspans, Columns *c) {
    Py_ssize_t row = 0;
    for (Py_ssize_t i = 0; i < nspans; i++) {
        const Span *s = &spans[i];
        const uint8_t *p = records + s->start, *batch_end = records + s->end;
        c->bad_batch = s->base_offset;
        for (long long r = 0; r < s->count; r++) {
            Record rec;
            if ((c->why = parse_record(&p, batch_end, &rec)) != NULL)
                return -1;
            if (append_field(&c->keys, row, rec.key, rec.key_len, &c->why) < 0 ||
                append_field(&c->values, row, rec.value, rec.value_len, &c->why) < 0)
                return -1;
            int64_t ts_delta = rec.ts_delta, offset_delta = rec.offset_delta;
            uint64_t ts_ms = s->log_append ? (uint64_t)s->max_ts : (uint64_t)s->base_ts + (uint64_t)ts_delta;
            ((int64_t *)c->offsets.p)[row] = (int64_t)((uint64_t)s->base_offset + (uint64_t)offset_delta);
            ((int64_t *)c->stamps.p)[row] = (int64_t)(ts_ms * 1000u);
            ((int32_t *)c->types.p)[row] = (int32_t)s->kind;
            row++;
        }
        if (s->count > 0 && p != batch_end) { /* Kafka's iterator looks for more only after a record */
            c->why = "bytes left over after the batch's records";
            return -1;
        }
    }
    c->rows = row;
    return 0;
}

static PyObject *to_bytes(Buf *b) {
    return PyBytes_FromStringAndSize(b->p ? b->p : "", b->len);
}

static PyObject *validity(BinCol *col) {
    if (col->nulls == 0)
        Py_RETURN_NONE;
    return to_bytes(&col->valid);
}

static PyObject *py_decode_batches(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *list;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyList_Type, &list))
        return NULL;
    Py_ssize_t nspans = PyList_GET_SIZE(list);
    Columns c = {0};
    PyObject *result = NULL;
    Py_ssize_t capacity = 0, span_bytes = 0;
    int failed = 0;
    Span *spans = PyMem_Calloc(nspans ? (size_t)nspans : 1, sizeof(Span));
    if (spans == NULL) {
        PyErr_NoMemory();
        goto done;
    }

    /* rows are bounded by the record counts, which are bounded by the bytes (a record takes >= 7 bytes) */
    for (Py_ssize_t i = 0; i < nspans; i++) {
        Span *s = &spans[i];
        if (!PyArg_ParseTuple(PyList_GET_ITEM(list, i), "LLLLLLLL", &s->start, &s->end, &s->base_offset,
                              &s->base_ts, &s->log_append, &s->max_ts, &s->count, &s->kind))
            goto done;
        if (s->start < 0 || s->end < s->start || s->end > view.len || s->count < 0 ||
            s->count > (s->end - s->start) / 7 + 1) {
            c.why = "batch bounds or record count out of range";
            c.bad_batch = s->base_offset;
            goto bad;
        }
        capacity += (Py_ssize_t)s->count;
        span_bytes += (Py_ssize_t)(s->end - s->start);
    }
    if (buf_reserve(&c.keys.offs, (capacity + 1) * 4) < 0 || buf_reserve(&c.values.offs, (capacity + 1) * 4) < 0 ||
        buf_reserve(&c.keys.valid, capacity / 8 + 1) < 0 || buf_reserve(&c.values.valid, capacity / 8 + 1) < 0 ||
        buf_reserve(&c.offsets, capacity * 8 + 8) < 0 || buf_reserve(&c.stamps, capacity * 8 + 8) < 0 ||
        buf_reserve(&c.types, capacity * 4 + 4) < 0 || buf_reserve(&c.keys.data, span_bytes + 1) < 0 ||
        buf_reserve(&c.values.data, span_bytes + 1) < 0)
        goto done;
    memset(c.keys.valid.p, 0xff, (size_t)(capacity / 8 + 1));
    memset(c.values.valid.p, 0xff, (size_t)(capacity / 8 + 1));
    ((int32_t *)c.keys.offs.p)[0] = 0;
    ((int32_t *)c.values.offs.p)[0] = 0;
    /* ``view`` keeps the records' buffer alive and unchanged; every other buffer is this call's own */
    Py_BEGIN_ALLOW_THREADS
    failed = parse_spans(view.buf, spans, nspans, &c);
    Py_END_ALLOW_THREADS
    if (failed)
        goto bad;
    Py_ssize_t row = c.rows;
    c.keys.offs.len = c.values.offs.len = (row + 1) * 4;
    c.keys.valid.len = c.values.valid.len = (row + 7) / 8;
    c.offsets.len = c.stamps.len = row * 8;
    c.types.len = row * 4;
    result = Py_BuildValue("(nNNNnNNNnNNN)", row, to_bytes(&c.keys.offs), to_bytes(&c.keys.data),
                           validity(&c.keys), c.keys.nulls, to_bytes(&c.values.offs), to_bytes(&c.values.data),
                           validity(&c.values), c.values.nulls, to_bytes(&c.offsets), to_bytes(&c.stamps),
                           to_bytes(&c.types));
    goto done;
bad:
    PyErr_Format(PyExc_ValueError, "record batch at offset %lld: %s", c.bad_batch, c.why);
done:
    PyBuffer_Release(&view);
    PyMem_Free(spans);
    PyMem_Free(c.keys.offs.p);
    PyMem_Free(c.keys.data.p);
    PyMem_Free(c.keys.valid.p);
    PyMem_Free(c.values.offs.p);
    PyMem_Free(c.values.data.p);
    PyMem_Free(c.values.valid.p);
    PyMem_Free(c.offsets.p);
    PyMem_Free(c.stamps.p);
    PyMem_Free(c.types.p);
    return result;
}

/* read_records(records, start, end, count, base_offset, base_timestamp, log_append_time, max_timestamp,
 * headers) -> (offsets or None, timestamps, keys, values, headers or None, some header key not UTF-8): the
 * records of one uncompressed (or decompressed) v2 batch, records[start:end], as Python lists (the per-record
 * path: partial batches, headers, typed reads). ``offsets`` is None when the offset deltas are 0, 1, 2, ...
 * (the caller makes a range); a header is a (key, value bytes or None) tuple, its key a str, or its bytes where
 * they are not UTF-8 (the caller decodes those as Java does, broker_sim.protocol.records.java_utf8).
 * ValueError for what Kafka refuses, as decode_batches. */
static PyObject *py_read_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    long long count, base_offset, base_ts, max_ts;
    int log_append, want_headers;
    if (!PyArg_ParseTuple(args, "y*nnLLLpLp", &view, &start, &end, &count, &base_offset, &base_ts, &log_append,
                          &max_ts, &want_headers))
        return NULL;
    PyObject *offsets = NULL, *stamps = NULL, *keys = NULL, *values = NULL, *headers = NULL, *result = NULL;
    const char *why = NULL;
    if (start < 0 || end < start || end > view.len || count < 0 || count > (end - start) / 7 + 1) {
        why = "batch bounds or record count out of range";
        goto bad;
    }
    offsets = PyList_New(0);
    stamps = PyList_New((Py_ssize_t)count);
    keys = PyList_New((Py_ssize_t)count);
    values = PyList_New((Py_ssize_t)count);
    headers = want_headers ? PyList_New((Py_ssize_t)count) : Py_NewRef(Py_None);
    if (offsets == NULL || stamps == NULL || keys == NULL || values == NULL || headers == NULL)
        goto done;
    const uint8_t *buf = view.buf, *p = buf + start, *batch_end = buf + end;
    int gapless = 1, not_utf8 = 0;
    for (long long r = 0; r < count; r++) {
        Record rec;
        if ((why = parse_record(&p, batch_end, &rec)) != NULL)
            goto bad;
        PyObject *item;
        long long offset = (long long)((uint64_t)base_offset + (uint64_t)rec.offset_delta);
        if (gapless && rec.offset_delta != r) {
            gapless = 0;
            for (long long before = 0; before < r; before++) {
                item = PyLong_FromLongLong(base_offset + before);
                if (item == NULL || PyList_Append(offsets, item)) {
                    Py_XDECREF(item);
                    goto done;
                }
                Py_DECREF(item);
            }
        }
        if (!gapless) {
            item = PyLong_FromLongLong(offset);
            if (item == NULL || PyList_Append(offsets, item)) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
        }
        long long ts = log_append ? max_ts : (long long)((uint64_t)base_ts + (uint64_t)rec.ts_delta);
        if ((item = PyLong_FromLongLong(ts)) == NULL)
            goto done;
        PyList_SET_ITEM(stamps, r, item);
        item = rec.key == NULL ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize((const char *)rec.key, rec.key_len);
        if (item == NULL)
            goto done;
        PyList_SET_ITEM(keys, r, item);
        item = rec.value == NULL ? Py_NewRef(Py_None)
                                 : PyBytes_FromStringAndSize((const char *)rec.value, rec.value_len);
        if (item == NULL)
            goto done;
        PyList_SET_ITEM(values, r, item);
        if (want_headers) {
            PyObject *pairs = PyList_New((Py_ssize_t)rec.header_count);
            if (pairs == NULL)
                goto done;
            PyList_SET_ITEM(headers, r, pairs);
            const uint8_t *h = rec.headers;
            for (int64_t i = 0; i < rec.header_count; i++) {
                int64_t key_len = 0, value_len = -1;
                read_varint(&h, batch_end, &key_len);  /* parse_record checked them */
                const uint8_t *key = h;
                h += key_len;
                read_varint(&h, batch_end, &value_len);
                PyObject *name = PyUnicode_DecodeUTF8((const char *)key, (Py_ssize_t)key_len, NULL);
                if (name == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                    /* not UTF-8: the bytes, for the caller to decode as Java does */
                    PyErr_Clear();
                    name = PyBytes_FromStringAndSize((const char *)key, (Py_ssize_t)key_len);
                    not_utf8 = 1;
                }
                PyObject *value = value_len < 0 ? Py_NewRef(Py_None)
                                                : PyBytes_FromStringAndSize((const char *)h, (Py_ssize_t)value_len);
                if (value_len > 0)
                    h += value_len;
                PyObject *pair = name && value ? PyTuple_Pack(2, name, value) : NULL;
                Py_XDECREF(name);
                Py_XDECREF(value);
                if (pair == NULL)
                    goto done;
                PyList_SET_ITEM(pairs, i, pair);
            }
        }
    }
    if (count > 0 && p != batch_end) { /* Kafka's iterator looks for more only after a record */
        why = "bytes left over after the batch's records";
        goto bad;
    }
    result = Py_BuildValue("(OOOOOO)", gapless ? Py_None : offsets, stamps, keys, values, headers,
                           not_utf8 ? Py_True : Py_False);
    goto done;
bad:
    PyErr_Format(PyExc_ValueError, "record batch at offset %lld: %s", base_offset, why);
done:
    PyBuffer_Release(&view);
    Py_XDECREF(offsets);
    Py_XDECREF(stamps);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(headers);
    return result;
}

/* next_offset(records, high): where the Fetch after ``records`` starts, read from the batch headers alone (the
 * reader sends that Fetch before it decodes these records): the next offset of the last whole batch, stopping at
 * the first batch that reaches ``high``; -1 when there is no whole batch or a batch is not v2 (magic 0/1 end
 * elsewhere: the reader then waits for the decode's answer). A batch's bounds are checked, never trusted. */
static PyObject *py_next_offset(PyObject *self, PyObject *args) {
    Py_buffer view;
    long long high, next = -1;
    if (!PyArg_ParseTuple(args, "y*L", &view, &high))
        return NULL;
    const uint8_t *records = view.buf;
    Py_ssize_t at = 0, size = view.len;
    while (size - at >= 17) { /* base offset, length, leader epoch, magic: the same in every format */
        const uint8_t *h = records + at;
        int32_t length = (int32_t)(((uint32_t)h[8] << 24) | ((uint32_t)h[9] << 16) | ((uint32_t)h[10] << 8) | h[11]);
        if (length < 0 || length > size - at - 12)
            break; /* cut short by the fetch size (or malformed): the next Fetch starts before it */
        if (h[16] != 2 || length < 49) {
            next = -1; /* a legacy (or malformed) batch: where it ends is for the decode to say */
            break;
        }
        uint64_t base = 0;
        for (int i = 0; i < 8; i++)
            base = (base << 8) | h[i];
        int32_t delta = (int32_t)(((uint32_t)h[23] << 24) | ((uint32_t)h[24] << 16) | ((uint32_t)h[25] << 8) | h[26]);
        next = (long long)(base + (uint64_t)(int64_t)delta + 1u);
        if (next >= high)
            break;
        at += 12 + (Py_ssize_t)length;
    }
    PyBuffer_Release(&view);
    return PyLong_FromLongLong(next);
}

static PyMethodDef methods[] = {
    {"decode_batches", py_decode_batches, METH_VARARGS,
     "decode_batches(records, spans) -> the column buffers of every record of the spans' batches"},
    {"read_records", py_read_records, METH_VARARGS,
     "read_records(records, start, end, count, base_offset, base_timestamp, log_append_time, max_timestamp, "
     "headers) -> (offsets or None, timestamps, keys, values, headers or None, a header key not UTF-8) of one v2 "
     "batch's records"},
    {"next_offset", py_next_offset, METH_VARARGS,
     "next_offset(records, high) -> where the next Fetch starts, from the v2 batch headers alone (-1: unknown)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "connector.source._records_arrow",
    "Uncompressed Kafka v2 record batches -> Arrow column buffers (see arrow_records.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__records_arrow(void) {
    return PyModule_Create(&module);
}
