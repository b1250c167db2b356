/* JSON encoder (orjson's output) and the value rules shared by the passes over dicts and over text. */
#include <math.h>
#include <stdio.h>

#include "common.h"

/* ------------------------------------------------------------------ JSON encoder (orjson's output) */
/* Return values: 0 written, -1 Python error set, 1 not handled here (the caller uses the fallback). */

/* A str's UTF-8 bytes as a JSON string: '"', '\\', \b \t \n \f \r escaped, other controls as \u00xx, the rest
 * (non-ASCII included) as is. */
int enc_utf8(Buf *b, const char *u, Py_ssize_t n) {
    if (buf_reserve(b, n + 2) < 0)
        return -1;
    b->p[b->n++] = '"';
    Py_ssize_t run = 0; /* start of the pending run of bytes that need no escape */
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)u[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        if (buf_put(b, u + run, i - run) < 0)
            return -1;
        char esc[8];
        int k = 2;
        esc[0] = '\\';
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\t': esc[1] = 't'; break;
        case '\n': esc[1] = 'n'; break;
        case '\f': esc[1] = 'f'; break;
        case '\r': esc[1] = 'r'; break;
        default: k = snprintf(esc, sizeof esc, "\\u%04x", c); break;
        }
        if (buf_put(b, esc, k) < 0)
            return -1;
        run = i + 1;
    }
    if (buf_put(b, u + run, n - run) < 0)
        return -1;
    return buf_putc(b, '"');
}

int enc_str(Buf *b, PyObject *s) {
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (u == NULL) { /* lone surrogates: orjson refuses them too, the fallback gives its answer */
        PyErr_Clear();
        return 1;
    }
    return enc_utf8(b, u, n);
}

/* Python's repr of a finite float, reshaped as orjson writes it: "1e+16", "0.00001", "1.5e-7". */
int enc_float(Buf *b, double d) {
    if (!isfinite(d))
        return buf_put(b, "null", 4);
    char *r = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (r == NULL)
        return -1;
    int rc = 0;
    char *e = strchr(r, 'e');
    if (e == NULL) {
        rc = buf_put(b, r, (Py_ssize_t)strlen(r));
    } else {
        char sign = e[1];
        long x = strtol(e + 2, NULL, 10);
        char tail[16];
        if (sign == '-' && x <= 5) { /* repr writes 1e-05; orjson 0.00001 */
            const char *m = r;
            if (*m == '-') {
                rc = buf_putc(b, '-');
                m++;
            }
            if (rc == 0)
                rc = buf_put(b, "0.", 2);
            for (long z = 1; rc == 0 && z < x; z++)
                rc = buf_putc(b, '0');
            for (; rc == 0 && m < e; m++)
                if (*m != '.')
                    rc = buf_putc(b, *m);
        } else {
            int k = snprintf(tail, sizeof tail, "e%c%ld", sign, x);
            rc = buf_put(b, r, (Py_ssize_t)(e - r));
            if (rc == 0)
                rc = buf_put(b, tail, k);
        }
    }
    PyMem_Free(r);
    return rc;
}

static int enc_int(Buf *b, PyObject *v) {
    int overflow = 0;
    char num[32];
    int k;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (overflow == 0) {
        k = snprintf(num, sizeof num, "%lld", x);
    } else {
        if (overflow < 0)
            return 1;
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) { /* beyond 64 bits: orjson refuses it */
            PyErr_Clear();
            return 1;
        }
        k = snprintf(num, sizeof num, "%llu", u);
    }
    return buf_put(b, num, k);
}

int enc(Buf *b, PyObject *v, int depth) {
    if (v == Py_None)
        return buf_put(b, "null", 4);
    if (v == Py_True)
        return buf_put(b, "true", 4);
    if (v == Py_False)
        return buf_put(b, "false", 5);
    if (PyUnicode_CheckExact(v))
        return enc_str(b, v);
    if (PyLong_CheckExact(v))
        return enc_int(b, v);
    if (PyFloat_CheckExact(v))
        return enc_float(b, PyFloat_AS_DOUBLE(v));
    if (depth >= MAX_DEPTH)
        return 1;
    if (PyList_CheckExact(v)) {
        if (buf_putc(b, '[') < 0)
            return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
            if (i && buf_putc(b, ',') < 0)
                return -1;
            int rc = enc(b, PyList_GET_ITEM(v, i), depth + 1);
            if (rc)
                return rc;
        }
        return buf_putc(b, ']');
    }
    if (PyDict_CheckExact(v)) {
        PyObject *k, *x;
        Py_ssize_t pos = 0;
        int first = 1;
        if (buf_putc(b, '{') < 0)
            return -1;
        while (PyDict_Next(v, &pos, &k, &x)) {
            if (!PyUnicode_CheckExact(k))
                return 1;
            if (!first && buf_putc(b, ',') < 0)
                return -1;
            first = 0;
            int rc = enc_str(b, k);
            if (rc == 0)
                rc = buf_putc(b, ':');
            if (rc == 0)
                rc = enc(b, x, depth + 1);
            if (rc)
                return rc;
        }
        return buf_putc(b, '}');
    }
    return 1;
}

/* The buffer's text as a str shared through ``memo`` (new reference). */
PyObject *memo_text(Buf *b, PyObject *memo) {
    PyObject *s = PyUnicode_DecodeUTF8(b->p, b->n, NULL);
    if (s == NULL)
        return NULL;
    PyObject *shared = PyDict_SetDefault(memo, s, s);
    Py_XINCREF(shared);
    Py_DECREF(s);
    return shared;
}

/* JSON text of ``v`` (new reference): this encoder, else ``fallback(v)``. */
PyObject *json_text(Buf *b, PyObject *v, PyObject *memo, PyObject *fallback) {
    b->n = 0;
    int rc = enc(b, v, 0);
    if (rc < 0)
        return NULL;
    if (rc == 0)
        return memo_text(b, memo);
    return PyObject_CallOneArg(fallback, v);
}


/* ``events.int_column``'s value rule: 1 stored in *out, 0 keep the default, -1 error, 2 the Python path. */
int int_arg(PyObject *v, int64_t *out) {
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred())
            return -1;
        if (overflow || x <= -KEY_LIMIT || x >= KEY_LIMIT)
            return 0;
        *out = x;
        return 1;
    }
    if (PyFloat_CheckExact(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        if (d == d && fabs(d) < (double)KEY_LIMIT) {
            *out = (int64_t)d; /* truncation, as int(v) */
            return 1;
        }
        return 0;
    }
    if (PyUnicode_CheckExact(v)) {
        PyObject *x = PyLong_FromUnicodeObject(v, 10);
        if (x == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError))
                return -1;
            PyErr_Clear();
            return 0;
        }
        int overflow = 0;
        long long y = PyLong_AsLongLongAndOverflow(x, &overflow);
        Py_DECREF(x);
        if (overflow)
            return 2;
        *out = y;
        return 1;
    }
    return 0; /* None, bool, containers: the default */
}

/* ts / dur as int64 ns: 1 ok, 0 not a plain in-range number (or a float ts needing the exact path). */
int to_ns_int(long long x, int is_ts, int ns, int64_t *out) {
    if (is_ts && ns) {
        if (x < 0 || x > MAX_NS)
            return 0;
        *out = x;
        return 1;
    }
    if (x < 0 || x > MAX_US)
        return 0;
    *out = x * 1000;
    return 1;
}

int to_ns_double(double d, int is_ts, int ns, int64_t *out) {
    if (is_ts && ns)
        return 0; /* exact ns ts are ints; anything else is for the Python path */
    if (!(d >= 0.0 && d <= (double)MAX_US))
        return 0; /* also NaN */
    if (is_ts && d >= LIMIT_US)
        return 0;
    double ip = floor(d);
    *out = (int64_t)ip * 1000 + (int64_t)rint((d - ip) * 1000.0); /* as events.us_to_ns */
    return 1;
}

int to_ns(PyObject *v, int is_ts, int ns, int64_t *out) {
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        return to_ns_int(x, is_ts, ns, out);
    }
    if (PyFloat_CheckExact(v))
        return to_ns_double(PyFloat_AS_DOUBLE(v), is_ts, ns, out);
    return 0;
}

/* cat / name as a str shared through memo (None -> "", others str()); borrowed from memo. */
PyObject *shared_str(PyObject *v, PyObject *memo) {
    PyObject *s;
    if (PyUnicode_CheckExact(v)) {
        Py_INCREF(v);
        s = v;
    } else if (v == Py_None) {
        Py_INCREF(S_empty);
        s = S_empty;
    } else {
        s = PyObject_Str(v);
        if (s == NULL)
            return NULL;
    }
    PyObject *shared = PyDict_SetDefault(memo, s, s);
    Py_DECREF(s);
    return shared;
}
