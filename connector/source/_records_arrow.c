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

/* zigzag varint of at most 10 bytes; -1 when it runs past ``end`` or is too long */
static int read_varlong(const uint8_t **at, const uint8_t *end, int64_t *out) {
    const uint8_t *p = *at;
    uint64_t value = 0;
    int shift = 0;
    while (1) {
        if (p >= end || shift > 63)
            return -1;
        uint8_t byte = *p++;
        value |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80))
            break;
        shift += 7;
    }
    *at = p;
    *out = (int64_t)(value >> 1) ^ -(int64_t)(value & 1);
    return 0;
}

typedef struct {
    Buf offs, data, valid;
    Py_ssize_t nulls;
} BinCol;

/* one nullable bytes field: length varint (-1 null) and the bytes */
static int read_bytes_field(const uint8_t **at, const uint8_t *end, BinCol *col, Py_ssize_t row,
                            const char **why) {
    int64_t length;
    if (read_varlong(at, end, &length) < 0) {
        *why = "bad length varint";
        return -1;
    }
    if (length < -1 || length > end - *at) {
        *why = "field length out of bounds";
        return -1;
    }
    if (length == -1) {
        col->nulls++;
        col->valid.p[row >> 3] &= (char)~(1 << (row & 7));
    } else if (length > 0) {
        if (length > col->data.cap - col->data.len) { /* cannot happen: reserved for all the spans' bytes */
            *why = "field bytes beyond the batches' bytes";
            return -1;
        }
        memcpy(col->data.p + col->data.len, *at, (size_t)length);
        col->data.len += (Py_ssize_t)length;
        *at += length;
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
            int64_t length, ts_delta, offset_delta, header_count, skip;
            if (read_varlong(&p, batch_end, &length) < 0 || length < 6 || length > batch_end - p) {
                c->why = "bad record length";
                return -1;
            }
            const uint8_t *record_end = p + length;
            p++; /* attributes */
            if (read_varlong(&p, record_end, &ts_delta) < 0 || read_varlong(&p, record_end, &offset_delta) < 0) {
                c->why = "bad timestamp or offset delta";
                return -1;
            }
            if (read_bytes_field(&p, record_end, &c->keys, row, &c->why) < 0 ||
                read_bytes_field(&p, record_end, &c->values, row, &c->why) < 0)
                return -1;
            if (read_varlong(&p, record_end, &header_count) < 0 || header_count < 0 ||
                header_count > record_end - p) {
                c->why = "bad header count";
                return -1;
            }
            for (int64_t h = 0; h < header_count; h++) {
                for (int part = 0; part < 2; part++) {
                    if (read_varlong(&p, record_end, &skip) < 0 || skip < -part || skip > record_end - p) {
                        c->why = "bad header";
                        return -1;
                    }
                    if (skip > 0)
                        p += skip;
                }
            }
            if (p != record_end) {
                c->why = "bytes left over after a record";
                return -1;
            }
            uint64_t ts_ms = s->log_append ? (uint64_t)s->max_ts : (uint64_t)s->base_ts + (uint64_t)ts_delta;
            ((int64_t *)c->offsets.p)[row] = (int64_t)((uint64_t)s->base_offset + (uint64_t)offset_delta);
            ((int64_t *)c->stamps.p)[row] = (int64_t)(ts_ms * 1000u);
            ((int32_t *)c->types.p)[row] = (int32_t)s->kind;
            row++;
        }
        if (p != batch_end) {
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
