/* One pass over the records of a RecordBatch v2, without a Python object per record (unless asked for).
 *
 * Theory of operation: broker_sim/storage/validator.py checks every record of a client's batch (Kafka's
 * LogValidator). ``scan(records, count, want)`` walks the bytes as Kafka 4.1's DefaultRecord.readFrom reads
 * them and answers in one tuple per batch: (smallest timestamp delta, largest timestamp delta, records whose
 * key is null, whether the offset deltas are 0, 1, 2, ..., then the keys, the values, the timestamp deltas, the
 * headers ((key bytes, value) lists) and the offset deltas as lists where ``want`` asks for them (bits 1, 2, 4,
 * 8, 16), else None): the tuple of broker_sim.protocol.records.walk_records. It accepts exactly what Kafka's reader
 * accepts, as validator.walk_records (its pure twin, which names the error of what this refuses) does:
 *
 *   - exactly ``count`` records, the last ending exactly at the end of ``records``;
 *   - each record's length a varint, >= 0, its body inside ``records`` and read to its last byte exactly;
 *   - attributes ONE byte, any value (Kafka reads and ignores it), timestampDelta a varlong, offsetDelta a
 *     varint of any value (Kafka does not check it in an uncompressed batch; the caller decides), key and value
 *     lengths (any negative length: null), a header count >= 0, header keys of a length >= 0 (their bytes are
 *     never decoded), header values (negative: null);
 *   - a varint is at most 5 bytes, the fifth shifted into bit 28 of a 32-bit int (ByteUtils.readVarint: its
 *     bits past the 32nd are dropped); a varlong at most 10, the tenth into bit 63; both zig-zag.
 *
 * ``varint(buffer, position)`` decodes one zigzag varlong (up to 10 bytes) for the validator's other walks.
 *
 * The GIL is kept: the walk runs on the event loop (it is cheaper than a thread hand-off), and a release there
 * could give the GIL to another thread for a whole switch interval (measured: 128 us instead of 14 per call).
 *
 * Anything else returns None: the caller then runs the pure twin, which names the error. Every read is
 * bounds-checked against the buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* ByteUtils.readVarint: a zigzag varint of at most 5 bytes at *pos (below end) into *out; 0 when too long or
 * truncated. The fifth byte's bits past the 32nd are dropped, as Java's int shift drops them. */
static ALWAYS_INLINE int read_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    Py_ssize_t p = *pos;
    uint32_t raw = 0;
    for (int i = 0; i < 5; i++) {
        if (p >= end)
            return 0;
        unsigned char b = buf[p++];
        raw |= (uint32_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *pos = p;
            *out = (int32_t)((raw >> 1) ^ (uint32_t)-(int32_t)(raw & 1));
            return 1;
        }
    }
    return 0;
}

/* ByteUtils.readVarlong: at most 10 bytes, the tenth shifted into bit 63 (only its lowest bit kept). */
static ALWAYS_INLINE int read_varlong(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    Py_ssize_t p = *pos;
    uint64_t raw = 0;
    for (int i = 0; i < 10; i++) {
        if (p >= end)
            return 0;
        unsigned char b = buf[p++];
        raw |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *pos = p;
            *out = (int64_t)((raw >> 1) ^ (uint64_t)-(int64_t)(raw & 1));
            return 1;
        }
    }
    return 0;
}

#define WANT_KEYS 1
#define WANT_VALUES 2
#define WANT_TIMESTAMPS 4
#define WANT_HEADERS 8
#define WANT_OFFSETS 16

/* Append buf[pos:pos+len] (None when len < 0) to list; 0 on a Python error. */
static int append_bytes(PyObject *list, const unsigned char *buf, Py_ssize_t pos, int64_t len)
{
    PyObject *item = len < 0 ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize((const char *)buf + pos, len);
    if (item == NULL)
        return 0;
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return !failed;
}

static PyObject *scan(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    int want = 0;
    if (!PyArg_ParseTuple(args, "y*n|i", &view, &count, &want))
        return NULL;
    const unsigned char *buf = view.buf;
    const Py_ssize_t end = view.len;
    Py_ssize_t pos = 0, nulls = 0;
    int64_t min_ts = INT64_MAX, max_ts = INT64_MIN;
    int in_order = 1, error = 0;
    PyObject *keys = want & WANT_KEYS ? PyList_New(0) : Py_NewRef(Py_None);
    PyObject *values = want & WANT_VALUES ? PyList_New(0) : Py_NewRef(Py_None);
    PyObject *deltas = want & WANT_TIMESTAMPS ? PyList_New(0) : Py_NewRef(Py_None);
    PyObject *headers_list = want & WANT_HEADERS ? PyList_New(0) : Py_NewRef(Py_None);
    PyObject *offsets = want & WANT_OFFSETS ? PyList_New(0) : Py_NewRef(Py_None);
    int ok = count >= 1 && keys != NULL && values != NULL && deltas != NULL && headers_list != NULL &&
             offsets != NULL;
    for (Py_ssize_t index = 0; ok && index < count; index++) {
        int64_t length, ts, offset, klen, vlen, headers, hk, hv;
        ok = 0;
        if (!read_varint(buf, &pos, end, &length) || length < 0 || length > end - pos)
            break;
        const Py_ssize_t stop = pos + (Py_ssize_t)length;
        if (pos >= stop)
            break;
        pos++;  /* attributes: one byte, unused by Kafka */
        if (!read_varlong(buf, &pos, stop, &ts) || !read_varint(buf, &pos, stop, &offset))
            break;
        in_order &= offset == index;
        if (!read_varint(buf, &pos, stop, &klen) || klen > stop - pos)
            break;
        if (keys != Py_None && !append_bytes(keys, buf, pos, klen)) {
            error = 1;
            break;
        }
        if (klen < 0)
            nulls++;
        else
            pos += (Py_ssize_t)klen;
        if (!read_varint(buf, &pos, stop, &vlen) || vlen > stop - pos)
            break;
        if (values != Py_None && !append_bytes(values, buf, pos, vlen)) {
            error = 1;
            break;
        }
        if (vlen > 0)
            pos += (Py_ssize_t)vlen;
        if (!read_varint(buf, &pos, stop, &headers) || headers < 0)
            break;
        int good = 1;
        PyObject *pairs = headers_list != Py_None ? PyList_New(0) : NULL;
        if (headers_list != Py_None && pairs == NULL) {
            error = 1;
            break;
        }
        for (int64_t h = 0; h < headers; h++) {  /* each header takes >= 2 bytes: the loop ends at stop */
            if (!read_varint(buf, &pos, stop, &hk) || hk < 0 || hk > stop - pos) {
                good = 0;
                break;
            }
            const Py_ssize_t key_at = pos;
            pos += (Py_ssize_t)hk;
            if (!read_varint(buf, &pos, stop, &hv) || hv > stop - pos) {
                good = 0;
                break;
            }
            if (pairs != NULL) {
                PyObject *pair = Py_BuildValue("(y#N)", (const char *)buf + key_at, (Py_ssize_t)hk,
                                               hv < 0 ? Py_NewRef(Py_None)
                                                      : PyBytes_FromStringAndSize((const char *)buf + pos, hv));
                if (pair == NULL || PyList_Append(pairs, pair)) {
                    Py_XDECREF(pair);
                    error = 1;
                    break;
                }
                Py_DECREF(pair);
            }
            if (hv > 0)
                pos += (Py_ssize_t)hv;
        }
        if (pairs != NULL) {
            if (!error && good && PyList_Append(headers_list, pairs))
                error = 1;
            Py_DECREF(pairs);
        }
        if (error)
            break;
        if (!good || pos != stop)
            break;
        if (offsets != Py_None) {
            PyObject *item = PyLong_FromLongLong(offset);
            if (item == NULL || PyList_Append(offsets, item)) {
                Py_XDECREF(item);
                error = 1;
                break;
            }
            Py_DECREF(item);
        }
        if (deltas != Py_None) {
            PyObject *item = PyLong_FromLongLong(ts);
            if (item == NULL || PyList_Append(deltas, item)) {
                Py_XDECREF(item);
                error = 1;
                break;
            }
            Py_DECREF(item);
        }
        if (ts < min_ts)
            min_ts = ts;
        if (ts > max_ts)
            max_ts = ts;
        ok = 1;
    }
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (error || keys == NULL || values == NULL || deltas == NULL || headers_list == NULL || offsets == NULL)
        result = NULL;  /* a Python error is set */
    else if (!ok || pos != end)
        result = Py_NewRef(Py_None);
    else
        result = Py_BuildValue("(LLnOOOOOO)", (long long)min_ts, (long long)max_ts, nulls,
                               in_order ? Py_True : Py_False, keys, values, deltas, headers_list, offsets);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(deltas);
    Py_XDECREF(headers_list);
    Py_XDECREF(offsets);
    return result;
}

static PyObject *varint(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos;
    int64_t value;
    if (!PyArg_ParseTuple(args, "y*n", &view, &pos))
        return NULL;
    int ok = pos >= 0 && read_varlong(view.buf, &pos, view.len, &value);
    PyBuffer_Release(&view);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "not a varint of at most 10 bytes within the buffer");
        return NULL;
    }
    return Py_BuildValue("(Ln)", (long long)value, pos);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(records, count, want=0) -> (min timestamp delta, max timestamp delta, null keys, offsets in order, "
     "keys, values, timestamp deltas, headers, offset deltas), or None when the records are not exactly count "
     "records as Kafka reads them; want: 1 keys, 2 values, 4 timestamp deltas, 8 headers, 16 offset deltas "
     "(lists), else None"},
    {"varint", varint, METH_VARARGS,
     "varint(buffer, position) -> (zigzag varint value, position after it); ValueError when malformed"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_records", NULL, -1, methods};

PyMODINIT_FUNC PyInit__records(void)
{
    return PyModule_Create(&module);
}
