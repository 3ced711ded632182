/* One pass over the records of a RecordBatch v2, without a Python object per record.
 *
 * Theory of operation: broker_sim/storage/validator.py checks every record of a client's batch (Kafka's
 * LogValidator). Its reference walk is aiokafka's compiled reader, which builds a record object (key, value,
 * headers) for each record only for the validator to drop it: ~150 ns a record, most of the produce path.
 * ``scan(records, count)`` walks the same bytes as Kafka's DefaultRecord.readFrom reads them, keeps nothing,
 * and answers in one tuple per batch: (smallest timestamp delta, largest timestamp delta, records whose key
 * is null). It accepts only what the reference walk accepts, with the same reading of every field:
 *
 *   - exactly ``count`` records, the last ending exactly at the end of ``records``;
 *   - each record's length a varint of at most 5 bytes, >= 0, its body inside ``records`` and read to its
 *     last byte exactly, nothing read past it;
 *   - attributes one byte below 0x80 (where a byte read and aiokafka's varint read agree), timestampDelta a
 *     varlong, offsetDelta equal to the record's index, key and value lengths (negative: null), a header
 *     count >= 0, header keys not null and ASCII (aiokafka decodes them as UTF-8; other keys go the slow way);
 *   - every varint at most 5 bytes (varlong 10) and within its type, as Kafka's ByteUtils reads them.
 *
 * ``varint(buffer, position)`` decodes one zigzag varint (up to 10 bytes) for the validator's other walks.
 *
 * The GIL is kept: the walk runs on the event loop (it is cheaper than a thread hand-off), and a release there
 * could give the GIL to another thread for a whole switch interval (measured: 128 us instead of 14 per call).
 *
 * Anything else returns None: the caller then runs the reference walk, which names the error (or, for a
 * form only that walk admits, accepts it as before). Every read is bounds-checked against the buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A zigzag varint of at most max_bytes at *pos (below end) into *out; 0 when malformed or truncated. */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

static ALWAYS_INLINE int read_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int max_bytes,
                                     int64_t *out)
{
    uint64_t raw = 0;
    Py_ssize_t p = *pos;
    if (p < end && !(buf[p] & 0x80)) {  /* one byte: most fields of most records */
        *pos = p + 1;
        *out = (int64_t)(buf[p] >> 1) ^ -(int64_t)(buf[p] & 1);
        return 1;
    }
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end)
            return 0;
        unsigned char b = buf[p++];
        if (i == 9 && b > 1)
            return 0;  /* past 64 bits */
        raw |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (max_bytes == 5 && raw > 0xffffffffULL)
                return 0;  /* more than 32 bits: Kafka's readVarint would not give this value */
            *pos = p;
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 1;
        }
    }
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &view, &count))
        return NULL;
    const unsigned char *buf = view.buf;
    const Py_ssize_t end = view.len;
    Py_ssize_t pos = 0, nulls = 0;
    int64_t min_ts = INT64_MAX, max_ts = INT64_MIN;
    int ok = count >= 1;  /* a client's batch has records (parse_batches) */
    for (Py_ssize_t index = 0; ok && index < count; index++) {
        int64_t length, ts, offset, klen, vlen, headers, hk, hv;
        ok = 0;
        if (!read_varint(buf, &pos, end, 5, &length) || length < 0 || length > end - pos)
            break;
        const Py_ssize_t stop = pos + (Py_ssize_t)length;
        if (pos >= stop || buf[pos] & 0x80)
            break;
        pos++;  /* attributes: unused by Kafka */
        if (!read_varint(buf, &pos, stop, 10, &ts) || !read_varint(buf, &pos, stop, 5, &offset) || offset != index)
            break;
        if (!read_varint(buf, &pos, stop, 5, &klen) || klen > stop - pos)
            break;
        if (klen < 0)
            nulls++;
        else
            pos += (Py_ssize_t)klen;
        if (!read_varint(buf, &pos, stop, 5, &vlen) || vlen > stop - pos)
            break;
        if (vlen > 0)
            pos += (Py_ssize_t)vlen;
        if (!read_varint(buf, &pos, stop, 5, &headers) || headers < 0)
            break;
        int good = 1;
        for (int64_t h = 0; h < headers; h++) {  /* each header takes >= 2 bytes: the loop ends at stop */
            if (!read_varint(buf, &pos, stop, 5, &hk) || hk < 0 || hk > stop - pos) {
                good = 0;
                break;
            }
            for (Py_ssize_t k = pos; k < pos + (Py_ssize_t)hk; k++)
                good &= buf[k] < 0x80;  /* ASCII: what every UTF-8 decoder reads alike */
            if (!good)
                break;
            pos += (Py_ssize_t)hk;
            if (!read_varint(buf, &pos, stop, 5, &hv) || hv > stop - pos) {
                good = 0;
                break;
            }
            if (hv > 0)
                pos += (Py_ssize_t)hv;
        }
        if (!good || pos != stop)
            break;
        if (ts < min_ts)
            min_ts = ts;
        if (ts > max_ts)
            max_ts = ts;
        ok = 1;
    }
    PyBuffer_Release(&view);
    if (!ok || pos != end)
        Py_RETURN_NONE;
    return Py_BuildValue("(LLn)", (long long)min_ts, (long long)max_ts, nulls);
}

static PyObject *varint(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos;
    int64_t value;
    if (!PyArg_ParseTuple(args, "y*n", &view, &pos))
        return NULL;
    int ok = pos >= 0 && read_varint(view.buf, &pos, view.len, 10, &value);
    PyBuffer_Release(&view);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "not a varint of at most 10 bytes within the buffer");
        return NULL;
    }
    return Py_BuildValue("(Ln)", (long long)value, pos);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(records, count) -> (min timestamp delta, max timestamp delta, null keys), or None when the records "
     "are not exactly count well-formed records with offset deltas 0, 1, 2, ..."},
    {"varint", varint, METH_VARARGS,
     "varint(buffer, position) -> (zigzag varint value, position after it); ValueError when malformed"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_records", NULL, -1, methods};

PyMODINIT_FUNC PyInit__records(void)
{
    return PyModule_Create(&module);
}
