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
        if (buf_reserve(&col->data, (Py_ssize_t)length) < 0)
            return -2;
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
    PyObject *spans;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyList_Type, &spans))
        return NULL;
    const uint8_t *records = view.buf;
    Py_ssize_t nspans = PyList_GET_SIZE(spans);
    BinCol keys = {0}, values = {0};
    Buf offsets = {0}, stamps = {0}, types = {0};
    PyObject *result = NULL;
    const char *why = NULL;
    long long bad_batch = -1;
    Py_ssize_t capacity = 0;

    /* rows are bounded by the record counts, which are bounded by the bytes (a record takes >= 7 bytes) */
    for (Py_ssize_t i = 0; i < nspans; i++) {
        long long start, end, base_offset, base_ts, log_append, max_ts, count, kind;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(spans, i), "LLLLLLLL", &start, &end, &base_offset, &base_ts,
                              &log_append, &max_ts, &count, &kind))
            goto done;
        if (start < 0 || end < start || end > view.len || count < 0 || count > (end - start) / 7 + 1) {
            why = "batch bounds or record count out of range";
            bad_batch = base_offset;
            goto bad;
        }
        capacity += (Py_ssize_t)count;
    }
    if (buf_reserve(&keys.offs, (capacity + 1) * 4) < 0 || buf_reserve(&values.offs, (capacity + 1) * 4) < 0 ||
        buf_reserve(&keys.valid, capacity / 8 + 1) < 0 || buf_reserve(&values.valid, capacity / 8 + 1) < 0 ||
        buf_reserve(&offsets, capacity * 8 + 8) < 0 || buf_reserve(&stamps, capacity * 8 + 8) < 0 ||
        buf_reserve(&types, capacity * 4 + 4) < 0)
        goto done;
    memset(keys.valid.p, 0xff, (size_t)(capacity / 8 + 1));
    memset(values.valid.p, 0xff, (size_t)(capacity / 8 + 1));
    ((int32_t *)keys.offs.p)[0] = 0;
    ((int32_t *)values.offs.p)[0] = 0;
    Py_ssize_t row = 0;
    for (Py_ssize_t i = 0; i < nspans; i++) {
        long long start, end, base_offset, base_ts, log_append, max_ts, count, kind;
        PyArg_ParseTuple(PyList_GET_ITEM(spans, i), "LLLLLLLL", &start, &end, &base_offset, &base_ts,
                         &log_append, &max_ts, &count, &kind);
        const uint8_t *p = records + start, *batch_end = records + end;
        bad_batch = base_offset;
        for (long long r = 0; r < count; r++) {
            int64_t length, ts_delta, offset_delta, header_count, skip;
            if (read_varlong(&p, batch_end, &length) < 0 || length < 6 || length > batch_end - p) {
                why = "bad record length";
                goto bad;
            }
            const uint8_t *record_end = p + length;
            p++; /* attributes */
            if (read_varlong(&p, record_end, &ts_delta) < 0 || read_varlong(&p, record_end, &offset_delta) < 0) {
                why = "bad timestamp or offset delta";
                goto bad;
            }
            int rc;
            if ((rc = read_bytes_field(&p, record_end, &keys, row, &why)) < 0 ||
                (rc = read_bytes_field(&p, record_end, &values, row, &why)) < 0) {
                if (rc == -2)
                    goto done;
                goto bad;
            }
            if (read_varlong(&p, record_end, &header_count) < 0 || header_count < 0 ||
                header_count > record_end - p) {
                why = "bad header count";
                goto bad;
            }
            for (int64_t h = 0; h < header_count; h++) {
                for (int part = 0; part < 2; part++) {
                    if (read_varlong(&p, record_end, &skip) < 0 || skip < -part || skip > record_end - p) {
                        why = "bad header";
                        goto bad;
                    }
                    if (skip > 0)
                        p += skip;
                }
            }
            if (p != record_end) {
                why = "bytes left over after a record";
                goto bad;
            }
            uint64_t ts_ms = log_append ? (uint64_t)max_ts : (uint64_t)base_ts + (uint64_t)ts_delta;
            ((int64_t *)offsets.p)[row] = (int64_t)((uint64_t)base_offset + (uint64_t)offset_delta);
            ((int64_t *)stamps.p)[row] = (int64_t)(ts_ms * 1000u);
            ((int32_t *)types.p)[row] = (int32_t)kind;
            row++;
        }
        if (p != batch_end) {
            why = "bytes left over after the batch's records";
            goto bad;
        }
    }
    keys.offs.len = values.offs.len = (row + 1) * 4;
    keys.valid.len = values.valid.len = (row + 7) / 8;
    offsets.len = stamps.len = row * 8;
    types.len = row * 4;
    result = Py_BuildValue("(nNNNnNNNnNNN)", row, to_bytes(&keys.offs), to_bytes(&keys.data), validity(&keys),
                           keys.nulls, to_bytes(&values.offs), to_bytes(&values.data), validity(&values),
                           values.nulls, to_bytes(&offsets), to_bytes(&stamps), to_bytes(&types));
    goto done;
bad:
    PyErr_Format(PyExc_ValueError, "record batch at offset %lld: %s", bad_batch, why);
done:
    PyBuffer_Release(&view);
    PyMem_Free(keys.offs.p);
    PyMem_Free(keys.data.p);
    PyMem_Free(keys.valid.p);
    PyMem_Free(values.offs.p);
    PyMem_Free(values.data.p);
    PyMem_Free(values.valid.p);
    PyMem_Free(offsets.p);
    PyMem_Free(stamps.p);
    PyMem_Free(types.p);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_batches", py_decode_batches, METH_VARARGS,
     "decode_batches(records, spans) -> the column buffers of every record of the spans' batches"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "connector.source._records_arrow",
    "Uncompressed Kafka v2 record batches -> Arrow column buffers (see arrow_records.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__records_arrow(void) {
    return PyModule_Create(&module);
}
