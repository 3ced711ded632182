/* Arrow binary columns -> Kafka v2 record batches (uncompressed, no headers), one partition's rows at a time.
 *
 * Theory of operation: connector/sink/producer.py groups an Arrow RecordBatch's rows by partition and calls
 * ``encode(keys, values, rows, timestamp, producer_id, epoch, base_sequence, transactional, batch_size)``
 * per partition: ``keys`` / ``values`` are a binary column's buffers (validity or None, int32 offsets, data,
 * array offset; ``keys`` None: every key is null), ``rows`` the int64 row indices of the partition, in
 * order. Records are written as aiokafka's compiled DefaultRecordBatchBuilder writes them (same bytes,
 * same rule for where a batch ends: a record that would take the batch to ``batch_size`` bytes or more
 * starts the next one, a batch's first record is always taken), with every record's timestamp
 * ``timestamp`` and the batches' base sequences following on from ``base_sequence`` (wrapping at 2^31).
 * Returns a list of (bytearray, record count); the CRC field is left 0 for the caller to fill (crc32c).
 *
 * ``partitions(keys, num_partitions)`` is the default partitioner's keyed step for a whole column:
 * ``toPositive(murmur2(key)) % num_partitions`` of every row as int32 bytes, -1 for a null key (Kafka's
 * ``Utils.murmur2``; connector/sink/partitioner.py has the numpy version the tests compare it with).
 *
 * Every index and offset is checked against its buffer: a bad one raises ValueError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEADER_SIZE 61

typedef struct {
    Py_buffer valid, offs, data;
    int has_valid, present;
    Py_ssize_t offset, length;
} Column;

static void release(Column *c) {
    if (!c->present)
        return;
    if (c->has_valid)
        PyBuffer_Release(&c->valid);
    PyBuffer_Release(&c->offs);
    PyBuffer_Release(&c->data);
}

/* (validity or None, offsets, data, array offset, length) -> Column; None -> absent (all null) */
static int column_from(PyObject *spec, Column *c) {
    memset(c, 0, sizeof(*c));
    if (spec == Py_None)
        return 0;
    PyObject *valid;
    if (!PyArg_ParseTuple(spec, "Oy*y*nn", &valid, &c->offs, &c->data, &c->offset, &c->length))
        return -1;
    c->present = 1;
    if (valid != Py_None) {
        if (PyObject_GetBuffer(valid, &c->valid, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&c->offs);
            PyBuffer_Release(&c->data);
            c->present = 0;
            return -1;
        }
        c->has_valid = 1;
    }
    /* offset + length + 1 int32 offsets and offset + length validity bits, compared without forming
     * offset + length (both come from the caller: their sum, times 4, could overflow) */
    if (c->offset < 0 || c->length < 0 || c->offset > c->offs.len / 4 - 1 ||
        c->length > c->offs.len / 4 - 1 - c->offset ||
        (c->has_valid && (c->offset > c->valid.len * 8 || c->length > c->valid.len * 8 - c->offset))) {
        PyErr_SetString(PyExc_ValueError, "a column's buffers are shorter than its length");
        release(c);
        return -1;
    }
    return 0;
}

/* the bytes of row ``i`` (NULL: null) and their length */
static int field(Column *c, int64_t i, const char **at, Py_ssize_t *len) {
    if (!c->present) {
        *at = NULL;
        return 0;
    }
    if (i < 0 || i >= c->length) {
        PyErr_SetString(PyExc_ValueError, "row index out of range");
        return -1;
    }
    int64_t j = c->offset + i;
    if (c->has_valid && !(((const uint8_t *)c->valid.buf)[j >> 3] & (1 << (j & 7)))) {
        *at = NULL;
        return 0;
    }
    const int32_t *offs = c->offs.buf;
    int32_t start = offs[j], end = offs[j + 1];
    if (start < 0 || end < start || end > c->data.len) {
        PyErr_SetString(PyExc_ValueError, "a value's offsets are outside its data buffer");
        return -1;
    }
    *at = (const char *)c->data.buf + start;
    *len = end - start;
    return 0;
}

static int varint_size(int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static char *put_varint(char *p, int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z >= 0x80) {
        *p++ = (char)((z & 0x7f) | 0x80);
        z >>= 7;
    }
    *p++ = (char)z;
    return p;
}

static void put_be(char *p, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (char)(v & 0xff);
        v >>= 8;
    }
}

typedef struct {
    PyObject *buffer;  /* bytearray */
    Py_ssize_t pos;
    int32_t count;
} Batch;

static int finish(Batch *b, PyObject *out, int64_t timestamp, int64_t producer_id, int epoch, int32_t sequence,
                  int transactional) {
    if (PyByteArray_Resize(b->buffer, b->pos) < 0)
        return -1;
    char *h = PyByteArray_AS_STRING(b->buffer);
    put_be(h, 0, 8);                                   /* base offset */
    put_be(h + 8, (uint64_t)(b->pos - 12), 4);         /* length */
    put_be(h + 12, (uint64_t)(int64_t)-1, 4);          /* partition leader epoch */
    h[16] = 2;                                         /* magic */
    put_be(h + 17, 0, 4);                              /* crc: the caller's */
    put_be(h + 21, transactional ? 0x10 : 0, 2);       /* attributes */
    put_be(h + 23, (uint64_t)(b->count - 1), 4);       /* last offset delta */
    put_be(h + 27, (uint64_t)timestamp, 8);
    put_be(h + 35, (uint64_t)timestamp, 8);
    put_be(h + 43, (uint64_t)producer_id, 8);
    put_be(h + 51, (uint64_t)epoch, 2);
    put_be(h + 53, (uint64_t)sequence, 4);
    put_be(h + 57, (uint64_t)b->count, 4);
    PyObject *item = Py_BuildValue("(Oi)", b->buffer, b->count);
    if (item == NULL)
        return -1;
    int rc = PyList_Append(out, item);
    Py_DECREF(item);
    Py_CLEAR(b->buffer);
    return rc;
}

static PyObject *py_encode(PyObject *self, PyObject *args) {
    PyObject *key_spec, *value_spec;
    Py_buffer rows;
    long long timestamp, producer_id, base_sequence;
    int epoch, transactional;
    Py_ssize_t batch_size;
    if (!PyArg_ParseTuple(args, "OOy*LLiLpn", &key_spec, &value_spec, &rows, &timestamp, &producer_id, &epoch,
                          &base_sequence, &transactional, &batch_size))
        return NULL;
    Column keys, values;
    PyObject *out = NULL;
    Batch batch = {NULL, 0, 0};
    if (column_from(key_spec, &keys) < 0) {
        PyBuffer_Release(&rows);
        return NULL;
    }
    if (column_from(value_spec, &values) < 0) {
        release(&keys);
        PyBuffer_Release(&rows);
        return NULL;
    }
    out = PyList_New(0);
    if (out == NULL)
        goto fail;
    const int64_t *indices = rows.buf;
    Py_ssize_t n = rows.len / 8;
    int32_t sequence = (int32_t)(base_sequence & 0x7fffffff);
    for (Py_ssize_t r = 0; r < n; r++) {
        const char *k, *v;
        Py_ssize_t klen = 0, vlen = 0;
        if (field(&keys, indices[r], &k, &klen) < 0 || field(&values, indices[r], &v, &vlen) < 0)
            goto fail;
        for (;;) {
            int32_t delta = batch.buffer ? batch.count : 0;
            int64_t body = 1 + varint_size(delta) + 1 /* timestamp delta 0 */ +
                           (k ? varint_size(klen) + klen : 1) + (v ? varint_size(vlen) + vlen : 1) + 1;
            Py_ssize_t size = (Py_ssize_t)body + varint_size(body);
            if (batch.buffer != NULL && batch.count > 0 && batch.pos + size >= batch_size) {
                int32_t done = batch.count;
                if (finish(&batch, out, timestamp, producer_id, epoch, sequence, transactional) < 0)
                    goto fail;
                sequence = (int32_t)(((int64_t)sequence + done) & 0x7fffffff);
                continue;
            }
            if (batch.buffer == NULL) {
                batch.buffer = PyByteArray_FromStringAndSize(NULL, 0);
                if (batch.buffer == NULL)
                    goto fail;
                batch.pos = HEADER_SIZE;
                batch.count = 0;
            }
            Py_ssize_t have = PyByteArray_GET_SIZE(batch.buffer);
            if (batch.pos + size > have) {
                Py_ssize_t want = have ? have : 4096;
                while (want < batch.pos + size)
                    want *= 2;
                if (PyByteArray_Resize(batch.buffer, want) < 0)
                    goto fail;
            }
            char *p = PyByteArray_AS_STRING(batch.buffer) + batch.pos;
            p = put_varint(p, body);
            *p++ = 0;                  /* attributes */
            p = put_varint(p, 0);      /* timestamp delta */
            p = put_varint(p, delta);  /* offset delta */
            if (k) {
                p = put_varint(p, klen);
                memcpy(p, k, (size_t)klen);
                p += klen;
            } else {
                p = put_varint(p, -1);
            }
            if (v) {
                p = put_varint(p, vlen);
                memcpy(p, v, (size_t)vlen);
                p += vlen;
            } else {
                p = put_varint(p, -1);
            }
            p = put_varint(p, 0);      /* headers */
            batch.pos += size;
            batch.count++;
            break;
        }
    }
    if (batch.buffer != NULL && batch.count > 0 &&
        finish(&batch, out, timestamp, producer_id, epoch, sequence, transactional) < 0)
        goto fail;
    Py_CLEAR(batch.buffer);
    release(&keys);
    release(&values);
    PyBuffer_Release(&rows);
    return out;
fail:
    Py_XDECREF(batch.buffer);
    Py_XDECREF(out);
    release(&keys);
    release(&values);
    PyBuffer_Release(&rows);
    return NULL;
}

static uint32_t murmur2(const uint8_t *d, Py_ssize_t length) {
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t whole = length / 4;
    for (Py_ssize_t i = 0; i < whole; i++) {
        const uint8_t *q = d + 4 * i;
        uint32_t k = (uint32_t)q[0] | ((uint32_t)q[1] << 8) | ((uint32_t)q[2] << 16) | ((uint32_t)q[3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const uint8_t *tail = d + (length & ~(Py_ssize_t)3);
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

static PyObject *py_partitions(PyObject *self, PyObject *args) {
    PyObject *key_spec;
    int num_partitions;
    if (!PyArg_ParseTuple(args, "Oi", &key_spec, &num_partitions))
        return NULL;
    if (num_partitions <= 0) {
        PyErr_SetString(PyExc_ValueError, "num_partitions must be positive");
        return NULL;
    }
    Column keys;
    if (key_spec == Py_None) {
        PyErr_SetString(PyExc_ValueError, "partitions() needs a key column");
        return NULL;
    }
    if (column_from(key_spec, &keys) < 0)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, keys.length * 4);
    if (out == NULL) {
        release(&keys);
        return NULL;
    }
    int32_t *result = (int32_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < keys.length; i++) {
        const char *k;
        Py_ssize_t klen = 0;
        if (field(&keys, i, &k, &klen) < 0) {
            Py_DECREF(out);
            release(&keys);
            return NULL;
        }
        result[i] = k ? (int32_t)((murmur2((const uint8_t *)k, klen) & 0x7fffffff) % (uint32_t)num_partitions) : -1;
    }
    release(&keys);
    return out;
}

static PyMethodDef methods[] = {
    {"partitions", py_partitions, METH_VARARGS,
     "partitions(keys, num_partitions) -> int32 bytes: toPositive(murmur2(key)) % num_partitions, -1 for null"},
    {"encode", py_encode, METH_VARARGS,
     "encode(keys, values, rows, timestamp, producer_id, epoch, base_sequence, transactional, batch_size) -> "
     "[(record batch without its CRC, records)]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "connector.sink._arrow_batches",
    "Arrow binary columns -> uncompressed Kafka v2 record batches (see producer.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__arrow_batches(void) {
    return PyModule_Create(&module);
}
