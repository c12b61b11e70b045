/*
 * Avro binary (Confluent wire format) straight into Arrow column buffers: no Python object
 * per record or per field. One call decodes a whole binary column of records that all carry
 * the same 5-byte header, for a flat record schema compiled by avro_native.py into one op per
 * field (a primitive, an enum, date, timestamp-millis/-micros, each optionally a [null, T] or
 * [T, null] union).
 *
 * Why: fastavro reads each primitive through a Python file object (a read() call per varint
 * byte) and hands back a dict of Python objects that pyarrow then reads again; that was three
 * quarters of the typed decode's CPU (bench/decode_micro.py, 2026-12-02).
 *
 * This path never decides that a record is bad: anything it does not take as fastavro would
 * give it exactly (a different header, a union or enum index out of range, bytes past the
 * record's end or left over at it, invalid UTF-8, an int past 32 bits, a date or timestamp
 * outside Python's datetime range) returns None, and the caller decodes the batch with
 * fastavro, which names the bad record and why.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { K_BOOL = 1, K_INT, K_LONG, K_FLOAT, K_DOUBLE, K_STRING, K_BYTES, K_ENUM, K_DATE, K_TS_MILLIS, K_TS_MICROS };

/* Python's datetime range (years 1-9999), in days and microseconds from the epoch */
#define MIN_DAYS (-719162LL)
#define MAX_DAYS 2932896LL
#define MIN_US (-62135596800000000LL)
#define MAX_US 253402300799999999LL

typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t more) {
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

typedef struct {
    int kind, null_branch; /* null_branch: -1 not nullable, else the union index of null */
    int64_t symbols;       /* K_ENUM: how many */
    Buf valid, values, offsets;
    int64_t nulls;
} Field;

/* zig-zag varint, at most 10 bytes; 0 on success */
static inline int read_long(const uint8_t **pos, const uint8_t *end, int64_t *out) {
    const uint8_t *p = *pos;
    uint64_t n = 0;
    int shift = 0;
    for (;;) {
        if (p >= end || shift > 63)
            return -1;
        uint8_t b = *p++;
        n |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
    }
    *pos = p;
    *out = (int64_t)(n >> 1) ^ -(int64_t)(n & 1);
    return 0;
}

/* strict UTF-8 as Python's bytes.decode() takes it: no overlongs, surrogates, or past U+10FFFF */
static int valid_utf8(const uint8_t *s, int64_t n) {
    int64_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80)
                return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80)
                return 0;
            if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F))
                return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 ||
                (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] > 0x8F))
                return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

static inline void set_bit(Buf *b, int64_t i, int on) {
    if (on)
        b->p[i >> 3] |= (char)(1 << (i & 7));
}

/* one field of one record (or a null one: null_record); 0 ok, -1 not taken, -2 no memory */
static int field_value(Field *f, int64_t row, const uint8_t **pos, const uint8_t *end, int null_record) {
    int is_null = null_record;
    if (!null_record && f->null_branch >= 0) {
        int64_t branch;
        if (read_long(pos, end, &branch) || (branch != 0 && branch != 1))
            return -1;
        is_null = branch == f->null_branch;
    }
    if (is_null)
        f->nulls++;
    else
        set_bit(&f->valid, row, 1);
    int64_t v = 0;
    switch (f->kind) {
    case K_BOOL:
        if (!is_null) {
            if (*pos >= end)
                return -1;
            set_bit(&f->values, row, **pos != 0);
            (*pos)++;
        }
        return 0;
    case K_FLOAT:
    case K_DOUBLE: {
        size_t w = f->kind == K_FLOAT ? 4 : 8;
        char *dst = f->values.p + (size_t)row * w;
        if (is_null) {
            memset(dst, 0, w);
            return 0;
        }
        if (end - *pos < (ptrdiff_t)w)
            return -1;
        memcpy(dst, *pos, w); /* Avro and Arrow are both little-endian (x86, arm64) */
        *pos += w;
        return 0;
    }
    case K_STRING:
    case K_BYTES: {
        int64_t n = 0;
        if (!is_null) {
            if (read_long(pos, end, &n) || n < 0 || n > end - *pos)
                return -1;
            if (f->kind == K_STRING && !valid_utf8(*pos, n))
                return -1;
            if (f->values.len + (uint64_t)n > INT32_MAX)
                return -1; /* past a 32-bit offset: fastavro's path builds it */
            if (buf_reserve(&f->values, (size_t)n))
                return -2;
            memcpy(f->values.p + f->values.len, *pos, (size_t)n);
            f->values.len += (size_t)n;
            *pos += n;
        }
        int32_t off = (int32_t)f->values.len;
        memcpy(f->offsets.p + (size_t)(row + 1) * 4, &off, 4);
        return 0;
    }
    default:
        break;
    }
    /* the varint kinds */
    if (!is_null && read_long(pos, end, &v))
        return -1;
    if (is_null)
        v = 0;
    switch (f->kind) {
    case K_INT:
    case K_ENUM:
    case K_DATE: {
        if (f->kind == K_INT && (v < INT32_MIN || v > INT32_MAX))
            return -1;
        if (f->kind == K_ENUM && (v < 0 || v >= f->symbols))
            return -1;
        if (f->kind == K_DATE && (v < MIN_DAYS || v > MAX_DAYS))
            return -1;
        int32_t x = (int32_t)v;
        memcpy(f->values.p + (size_t)row * 4, &x, 4);
        return 0;
    }
    case K_TS_MILLIS:
        if (v < MIN_US / 1000 || v > MAX_US / 1000)
            return -1;
        v *= 1000;
        break;
    case K_TS_MICROS:
        if (v < MIN_US || v > MAX_US)
            return -1;
        break;
    default: /* K_LONG */
        break;
    }
    memcpy(f->values.p + (size_t)row * 8, &v, 8);
    return 0;
}

static size_t width(int kind) {
    switch (kind) {
    case K_INT:
    case K_FLOAT:
    case K_ENUM:
    case K_DATE:
        return 4;
    case K_LONG:
    case K_DOUBLE:
    case K_TS_MILLIS:
    case K_TS_MICROS:
        return 8;
    default:
        return 0;
    }
}

static PyObject *bytes_of(Buf *b) { return PyBytes_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)b->len); }

/*
 * decode(ops, header, validity, offsets, data, offset, length, large)
 *   ops:      bytes, 3 int64 per field: kind, null branch (-1: none), enum symbols
 *   header:   the 5 bytes every record must start with
 *   validity, offsets, data: the binary column's buffers (validity may be None);
 *             offset/length: the array's slice; large: int64 offsets
 * -> None (not taken: decode with fastavro), or (struct validity bytes, struct nulls,
 *    [(validity bytes, nulls, values bytes, offsets bytes or None) per field])
 */
static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer ops, header, data, offsets, validity = {0};
    PyObject *validity_obj;
    Py_ssize_t offset, length;
    int large;
    if (!PyArg_ParseTuple(args, "y*y*Oy*y*nnp", &ops, &header, &validity_obj, &offsets, &data, &offset, &length,
                          &large))
        return NULL;
    PyObject *result = NULL;
    Field *fields = NULL;
    Buf svalid = {0};
    int64_t nfields = ops.len / 24, snulls = 0;
    int have_valid = validity_obj != Py_None;
    if (have_valid && PyObject_GetBuffer(validity_obj, &validity, PyBUF_SIMPLE))
        goto done;
    if (header.len != 5 || ops.len % 24 || offsets.len < (offset + length + 1) * (large ? 8 : 4)) {
        PyErr_SetString(PyExc_ValueError, "decode: bad arguments");
        goto done;
    }
    fields = calloc((size_t)(nfields ? nfields : 1), sizeof(Field));
    size_t bitmap = (size_t)(length + 7) / 8;
    if (!fields || buf_reserve(&svalid, bitmap))
        goto nomem;
    memset(svalid.p, 0, bitmap);
    svalid.len = bitmap;
    for (int64_t i = 0; i < nfields; i++) {
        Field *f = &fields[i];
        const int64_t *op = (const int64_t *)ops.buf + i * 3;
        f->kind = (int)op[0];
        f->null_branch = (int)op[1];
        f->symbols = op[2];
        if (buf_reserve(&f->valid, bitmap))
            goto nomem;
        memset(f->valid.p, 0, bitmap);
        f->valid.len = bitmap;
        if (f->kind == K_BOOL) {
            if (buf_reserve(&f->values, bitmap))
                goto nomem;
            memset(f->values.p, 0, bitmap);
            f->values.len = bitmap;
        } else if (f->kind == K_STRING || f->kind == K_BYTES) {
            if (buf_reserve(&f->offsets, (size_t)(length + 1) * 4))
                goto nomem;
            memset(f->offsets.p, 0, 4);
            f->offsets.len = (size_t)(length + 1) * 4;
        } else {
            size_t n = (size_t)length * width(f->kind);
            if (buf_reserve(&f->values, n ? n : 1))
                goto nomem;
            f->values.len = n;
        }
    }
    const uint8_t *base = data.buf, *hdr = header.buf, *vbits = have_valid ? validity.buf : NULL;
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t row = 0; row < length && rc == 0; row++) {
        int64_t at = offset + row, start, stop;
        if (large) {
            start = ((const int64_t *)offsets.buf)[at];
            stop = ((const int64_t *)offsets.buf)[at + 1];
        } else {
            start = ((const int32_t *)offsets.buf)[at];
            stop = ((const int32_t *)offsets.buf)[at + 1];
        }
        int null_record = vbits && !(vbits[at >> 3] & (1 << (at & 7)));
        const uint8_t *pos = base + start, *end = base + stop;
        if (!null_record) {
            if (stop < start || stop > data.len || end - pos < 5 || memcmp(pos, hdr, 5)) {
                rc = -1;
                break;
            }
            pos += 5;
            svalid.p[row >> 3] |= (char)(1 << (row & 7));
        } else {
            snulls++;
        }
        for (int64_t i = 0; i < nfields && rc == 0; i++)
            rc = field_value(&fields[i], row, &pos, end, null_record);
        if (rc == 0 && !null_record && pos != end)
            rc = -1; /* bytes left over: fastavro ignores them, so it decodes this batch */
    }
    Py_END_ALLOW_THREADS
    if (rc == -2)
        goto nomem;
    if (rc == -1) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    PyObject *list = PyList_New((Py_ssize_t)nfields);
    if (!list)
        goto done;
    for (int64_t i = 0; i < nfields; i++) {
        Field *f = &fields[i];
        PyObject *offs = (f->kind == K_STRING || f->kind == K_BYTES) ? bytes_of(&f->offsets) : (Py_INCREF(Py_None), Py_None);
        PyObject *item = Py_BuildValue("(NLNN)", bytes_of(&f->valid), (long long)f->nulls, bytes_of(&f->values), offs);
        if (!item) {
            Py_DECREF(list);
            goto done;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    result = Py_BuildValue("(NLN)", bytes_of(&svalid), (long long)snulls, list);
    goto done;
nomem:
    PyErr_NoMemory();
done:
    if (fields) {
        for (int64_t i = 0; i < nfields; i++) {
            free(fields[i].valid.p);
            free(fields[i].values.p);
            free(fields[i].offsets.p);
        }
        free(fields);
    }
    free(svalid.p);
    PyBuffer_Release(&ops);
    PyBuffer_Release(&header);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    if (have_valid && validity.obj)
        PyBuffer_Release(&validity);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, "A binary column of Avro records of one header -> Arrow buffers, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_avro_arrow", NULL, -1, methods};

PyMODINIT_FUNC PyInit__avro_arrow(void) { return PyModule_Create(&module); }
