/* Compiled per-event passes of the Kineto importer (``extract``): the same results as its Python path,
 * which stays the fallback (no compiler, ``NEURON_PROFILER_PURE_PYTHON=1``) and the oracle of the tests.
 *
 * split(events, ns, check_ts, memo, classes, empty, flow_cats)
 *     One pass over a slice of parsed ``traceEvents``: complete events become columns (cat and name as
 *     strings shared through ``memo``, pid / tid as read, ts / dur as int64 ns, row class, args dict or
 *     ``empty``), so do flow halves (phase and category codes, id, pid / tid as read, ts ns), the other
 *     phases are grouped. Returns None whenever the Python path would have to look at
 *     an event more closely (not an object, unknown ph, a complete event missing a key, a ts / dur that is
 *     not a plain number in range, a float ts too large for float64 to keep its ns): the caller then runs
 *     that path, so every odd case keeps exactly one implementation.
 *
 * args_columns(args, cls, ints, keyinfo, memo, fallback)
 *     The columns read from the args dicts of complete events: the int64 columns (written into ``ints``, a
 *     writable buffer of 7 * n int64 prefilled with the defaults), the "Input Dims" / "Input type" JSON
 *     texts, the args JSON without the keys the row class drops, and the rows holding "Collective name".
 *     JSON text is written as orjson writes it (compact, non-ASCII as UTF-8, floats in shortest round-trip
 *     form); a value this encoder does not handle (ints beyond 64 bits, lone surrogates, deep nesting) is
 *     given to ``fallback`` (the Python ``safe_dumps``). Returns None when an int argument is a numeric
 *     string beyond int64 (the Python path decides).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MAX_US 4000000000000000LL      /* events.MAX_US */
#define MAX_NS 4000000000000000000LL   /* events.MAX_NS */
#define LIMIT_US 8796093022208.0       /* exact.LIMIT_US = 2**43 */
#define KEY_LIMIT 4611686018427387904LL /* 2**62: int args at or beyond it take the column default */
#define MAX_DEPTH 64                   /* deeper values go to the fallback (orjson stops at 255) */
#define N_INT_COLS 7

/* keyinfo bits (extract._key_info builds the dict) */
#define K_INT_MASK 0x0F   /* int column + 1 */
#define K_SHAPES 0x10
#define K_DTYPES 0x20
#define K_COLL 0x40
#define K_DROP_HOST 0x80
#define K_DROP_DEVICE 0x100

enum { HOST = 0, DEVICE = 1, ANNOTATION = 2, TRACE = 3 };

static PyObject *S_ph, *S_cat, *S_name, *S_pid, *S_tid, *S_ts, *S_dur, *S_args, *S_id, *S_empty;

/* ------------------------------------------------------------------ growable byte buffer */
typedef struct {
    char *p;
    Py_ssize_t n, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->n + extra <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra)
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

static inline int buf_put(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->p + b->n, s, (size_t)n);
    b->n += n;
    return 0;
}

static inline int buf_putc(Buf *b, char c) {
    if (b->n >= b->cap && buf_reserve(b, 1) < 0)
        return -1;
    b->p[b->n++] = c;
    return 0;
}

/* ------------------------------------------------------------------ JSON encoder (orjson's output) */
/* Return values: 0 written, -1 Python error set, 1 not handled here (the caller uses the fallback). */

static int enc_str(Buf *b, PyObject *s) {
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (u == NULL) { /* lone surrogates: orjson refuses them too, the fallback gives its answer */
        PyErr_Clear();
        return 1;
    }
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

/* Python's repr of a finite float, reshaped as orjson writes it: "1e+16", "0.00001", "1.5e-7". */
static int enc_float(Buf *b, double d) {
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

static int enc(Buf *b, PyObject *v, int depth) {
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
static PyObject *memo_text(Buf *b, PyObject *memo) {
    PyObject *s = PyUnicode_DecodeUTF8(b->p, b->n, NULL);
    if (s == NULL)
        return NULL;
    PyObject *shared = PyDict_SetDefault(memo, s, s);
    Py_XINCREF(shared);
    Py_DECREF(s);
    return shared;
}

/* JSON text of ``v`` (new reference): this encoder, else ``fallback(v)``. */
static PyObject *json_text(Buf *b, PyObject *v, PyObject *memo, PyObject *fallback) {
    b->n = 0;
    int rc = enc(b, v, 0);
    if (rc < 0)
        return NULL;
    if (rc == 0)
        return memo_text(b, memo);
    return PyObject_CallOneArg(fallback, v);
}

/* ------------------------------------------------------------------ split */
/* ``events.int_column``'s value rule: 1 stored in *out, 0 keep the default, -1 error, 2 the Python path. */
static int int_arg(PyObject *v, int64_t *out) {
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
static int to_ns(PyObject *v, int is_ts, int ns, int64_t *out) {
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
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
    if (PyFloat_CheckExact(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        if (is_ts && ns)
            return 0; /* exact ns ts are ints; anything else is for the Python path */
        if (!(d >= 0.0 && d <= (double)MAX_US))
            return 0; /* also NaN */
        if (is_ts && d >= LIMIT_US)
            return 0;
        double ip = floor(d);
        *out = (int64_t)ip * 1000 + (int64_t)rint((d - ip) * 1000.0);
        return 1;
    }
    return 0;
}

/* cat / name as a str shared through memo (None -> "", others str()); borrowed from memo. */
static PyObject *shared_str(PyObject *v, PyObject *memo) {
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

/* A non-complete event's ts is a float the exact path must re-read (``events._big_float_ts``). */
static int big_float_ts(PyObject *e) {
    PyObject *t = PyDict_GetItemWithError(e, S_ts);
    return t != NULL && PyFloat_CheckExact(t) && PyFloat_AS_DOUBLE(t) >= LIMIT_US;
}

typedef struct {
    PyObject *cat, *name, *pid, *tid, *args, *meta, *instants, *counters, *fpid, *ftid;
    Buf fph, fcat, fid, fts; /* flow columns: int8 phase / category codes, int64 id and ts ns */
} Lists;

/* A flow half as columns (``extract._fast_flows``): 1 taken, 0 the Python path must look, -1 error. */
static int flow_event(PyObject *e, char phase, int ns, PyObject *flow_cats, Lists *L) {
    PyObject *f[5];
    PyObject *keys[5] = {S_cat, S_id, S_pid, S_tid, S_ts};
    for (int k = 0; k < 5; k++) {
        f[k] = PyDict_GetItemWithError(e, keys[k]);
        if (f[k] == NULL)
            return PyErr_Occurred() ? -1 : 0;
    }
    if (!PyUnicode_CheckExact(f[0]) || f[1] == Py_None)
        return 0;
    PyObject *code = PyDict_GetItemWithError(flow_cats, f[0]);
    if (code == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int64_t id = -1, ts;
    int rc = int_arg(f[1], &id);
    if (rc < 0 || rc == 2)
        return rc < 0 ? -1 : 0;
    if (!to_ns(f[4], 1, ns, &ts))
        return 0;
    char ph = phase == 's' ? 0 : phase == 'f' ? 1 : 2, cat = (char)PyLong_AsLong(code);
    if (buf_putc(&L->fph, ph) < 0 || buf_putc(&L->fcat, cat) < 0 || buf_put(&L->fid, (char *)&id, 8) < 0 ||
        buf_put(&L->fts, (char *)&ts, 8) < 0 || PyList_Append(L->fpid, f[2]) < 0 || PyList_Append(L->ftid, f[3]) < 0)
        return -1;
    return 1;
}

static int x_event(PyObject *e, int ns, PyObject *memo, PyObject *classes, PyObject *empty, Lists *L,
                   int64_t *ts, int64_t *dur, int8_t *cls, Py_ssize_t j) {
    PyObject *f[6];
    PyObject *keys[6] = {S_cat, S_name, S_pid, S_tid, S_ts, S_dur};
    for (int k = 0; k < 6; k++) {
        f[k] = PyDict_GetItemWithError(e, keys[k]);
        if (f[k] == NULL)
            return PyErr_Occurred() ? -1 : 0;
    }
    if (!to_ns(f[4], 1, ns, &ts[j]) || !to_ns(f[5], 0, 0, &dur[j]))
        return 0;
    PyObject *cat = shared_str(f[0], memo), *name = cat ? shared_str(f[1], memo) : NULL;
    if (name == NULL)
        return -1;
    PyObject *c = PyDict_GetItemWithError(classes, cat);
    if (c == NULL && PyErr_Occurred())
        return -1;
    cls[j] = c == NULL ? HOST : (int8_t)PyLong_AsLong(c);
    PyObject *a = PyDict_GetItemWithError(e, S_args);
    if (a == NULL && PyErr_Occurred())
        return -1;
    a = (a != NULL && PyDict_CheckExact(a)) ? a : empty;
    if (PyList_Append(L->cat, cat) < 0 || PyList_Append(L->name, name) < 0 || PyList_Append(L->pid, f[2]) < 0 ||
        PyList_Append(L->tid, f[3]) < 0 || PyList_Append(L->args, a) < 0)
        return -1;
    return 1;
}

/* 1 taken, 0 the Python path must look (None to the caller), -1 error. */
static int split_one(PyObject *e, int ns, int check_ts, PyObject *memo, PyObject *classes, PyObject *empty,
                     PyObject *flow_cats, Lists *L, int64_t *ts, int64_t *dur, int8_t *cls, Py_ssize_t *nx) {
    if (!PyDict_CheckExact(e))
        return 0;
    PyObject *ph = PyDict_GetItemWithError(e, S_ph);
    if (ph == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyUnicode_CheckExact(ph) || PyUnicode_GET_LENGTH(ph) != 1)
        return 0;
    Py_UCS4 c = PyUnicode_READ_CHAR(ph, 0);
    PyObject *dest;
    switch (c) {
    case 'X': {
        int rc = x_event(e, ns, memo, classes, empty, L, ts, dur, cls, *nx);
        if (rc == 1)
            (*nx)++;
        return rc;
    }
    case 's': case 'f': case 't': return flow_event(e, (char)c, ns, flow_cats, L);
    case 'M': dest = L->meta; break;
    case 'i': case 'I': dest = L->instants; break;
    case 'C': dest = L->counters; break;
    default: return 0;
    }
    if (check_ts && !ns && big_float_ts(e))
        return 0;
    if (PyErr_Occurred())
        return -1;
    return PyList_Append(dest, e) < 0 ? -1 : 1;
}

static PyObject *bytes_of(Buf *b) { return PyByteArray_FromStringAndSize(b->p ? b->p : "", b->n); }

static PyObject *py_split(PyObject *self, PyObject *argv) {
    PyObject *events, *memo, *classes, *empty, *flow_cats;
    int ns, check_ts;
    if (!PyArg_ParseTuple(argv, "O!ppO!O!O!O!", &PyList_Type, &events, &ns, &check_ts, &PyDict_Type, &memo,
                          &PyDict_Type, &classes, &PyDict_Type, &empty, &PyDict_Type, &flow_cats))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(events), nx = 0;
    Lists L = {PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0),
               PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0)};
    PyObject *bts = PyByteArray_FromStringAndSize(NULL, n * 8), *bdur = PyByteArray_FromStringAndSize(NULL, n * 8);
    PyObject *bcls = PyByteArray_FromStringAndSize(NULL, n);
    PyObject *flows = NULL, *result = NULL;
    PyObject **all[] = {&L.cat, &L.name, &L.pid, &L.tid, &L.args, &L.meta, &L.instants, &L.counters, &L.fpid,
                        &L.ftid, &bts, &bdur, &bcls};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        if (*all[k] == NULL)
            goto done;
    int64_t *ts = (int64_t *)PyByteArray_AS_STRING(bts), *dur = (int64_t *)PyByteArray_AS_STRING(bdur);
    int8_t *cls = (int8_t *)PyByteArray_AS_STRING(bcls);
    for (Py_ssize_t i = 0; i < n; i++) {
        int rc = split_one(PyList_GET_ITEM(events, i), ns, check_ts, memo, classes, empty, flow_cats, &L, ts, dur,
                           cls, &nx);
        if (rc < 0)
            goto done;
        if (rc == 0) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    if (PyByteArray_Resize(bts, nx * 8) < 0 || PyByteArray_Resize(bdur, nx * 8) < 0 ||
        PyByteArray_Resize(bcls, nx) < 0)
        goto done;
    flows = Py_BuildValue("(NNNNOO)", bytes_of(&L.fph), bytes_of(&L.fcat), bytes_of(&L.fid), bytes_of(&L.fts),
                          L.fpid, L.ftid);
    if (flows == NULL)
        goto done;
    result = Py_BuildValue("(OOOOOOOO)(OOOO)", L.cat, L.name, L.pid, L.tid, bts, bdur, bcls, L.args, flows, L.meta,
                           L.instants, L.counters);
done:
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        Py_XDECREF(*all[k]);
    Py_XDECREF(flows);
    PyMem_Free(L.fph.p);
    PyMem_Free(L.fcat.p);
    PyMem_Free(L.fid.p);
    PyMem_Free(L.fts.p);
    return result;
}

/* ------------------------------------------------------------------ args_columns */
typedef struct {
    PyObject *keyinfo, *memo, *fallback;
    int64_t *ints;
    Py_ssize_t n;
    Buf text, val;
} ArgsCtx;

/* The args text of one row when ``rc`` says this encoder could not write it: fallback(kept dict). */
static PyObject *kept_fallback(ArgsCtx *X, PyObject *a, int drop) {
    PyObject *kept = PyDict_New(), *k, *v;
    Py_ssize_t pos = 0;
    if (kept == NULL)
        return NULL;
    while (PyDict_Next(a, &pos, &k, &v)) {
        PyObject *info = PyDict_GetItemWithError(X->keyinfo, k);
        long bits = info ? PyLong_AsLong(info) : 0;
        if (!(bits & drop) && PyDict_SetItem(kept, k, v) < 0) {
            Py_DECREF(kept);
            return NULL;
        }
    }
    PyObject *s = PyObject_CallOneArg(X->fallback, kept);
    Py_DECREF(kept);
    return s;
}

/* Columns of row i. Returns 1 ok, 0 the Python path decides, -1 error. */
static int args_row(ArgsCtx *X, PyObject *a, int cls, Py_ssize_t i, PyObject *shapes, PyObject *dtypes,
                    PyObject *texts, PyObject *coll) {
    int drop = cls == DEVICE ? K_DROP_DEVICE : K_DROP_HOST, want_text = cls != TRACE, kept = 0, fail = 0;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    Buf *t = &X->text;
    t->n = 0;
    if (PyDict_GET_SIZE(a) == 0)
        return 1;
    if (buf_putc(t, '{') < 0)
        return -1;
    while (PyDict_Next(a, &pos, &k, &v)) {
        PyObject *info = PyDict_GetItemWithError(X->keyinfo, k);
        if (info == NULL && PyErr_Occurred())
            return -1;
        long bits = info ? PyLong_AsLong(info) : 0;
        if (bits & K_INT_MASK) {
            int rc = int_arg(v, &X->ints[((bits & K_INT_MASK) - 1) * X->n + i]);
            if (rc < 0 || rc == 2)
                return rc < 0 ? -1 : 0;
        }
        if (bits & (K_SHAPES | K_DTYPES) && v != Py_None) {
            PyObject *s = json_text(&X->val, v, X->memo, X->fallback);
            if (s == NULL)
                return -1;
            PyObject *dest = bits & K_SHAPES ? shapes : dtypes;
            PyObject *old = PyList_GET_ITEM(dest, i);
            PyList_SET_ITEM(dest, i, s);
            Py_DECREF(old);
        }
        if (bits & K_COLL) {
            PyObject *row = PyLong_FromSsize_t(i);
            int rc = row == NULL ? -1 : PyList_Append(coll, row);
            Py_XDECREF(row);
            if (rc < 0)
                return -1;
        }
        if (!want_text || (bits & drop) || fail)
            continue;
        int rc = (kept++ ? buf_putc(t, ',') : 0);
        if (rc == 0)
            rc = enc_str(t, k);
        if (rc == 0)
            rc = buf_putc(t, ':');
        if (rc == 0)
            rc = enc(t, v, 1);
        if (rc < 0)
            return -1;
        fail = rc;
    }
    if (!kept)
        return 1;
    PyObject *s;
    if (fail) {
        s = kept_fallback(X, a, drop);
    } else {
        if (buf_putc(t, '}') < 0)
            return -1;
        s = memo_text(t, X->memo);
    }
    if (s == NULL)
        return -1;
    PyObject *old = PyList_GET_ITEM(texts, i);
    PyList_SET_ITEM(texts, i, s);
    Py_DECREF(old);
    return 1;
}

static PyObject *filled_list(Py_ssize_t n, PyObject *v) {
    PyObject *l = PyList_New(n);
    if (l == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(v);
        PyList_SET_ITEM(l, i, v);
    }
    return l;
}

static PyObject *py_args_columns(PyObject *self, PyObject *argv) {
    PyObject *args, *cls_obj, *ints_obj;
    ArgsCtx X = {0};
    if (!PyArg_ParseTuple(argv, "O!OOO!O!O", &PyList_Type, &args, &cls_obj, &ints_obj, &PyDict_Type, &X.keyinfo,
                          &PyDict_Type, &X.memo, &X.fallback))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(args);
    Py_buffer cb = {0}, ib = {0};
    PyObject *shapes = NULL, *dtypes = NULL, *texts = NULL, *coll = NULL, *result = NULL;
    if (PyObject_GetBuffer(cls_obj, &cb, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(ints_obj, &ib, PyBUF_WRITABLE) < 0)
        goto done;
    if (cb.len != n || ib.len != (Py_ssize_t)(N_INT_COLS * 8 * n)) {
        PyErr_SetString(PyExc_ValueError, "args_columns: buffer sizes do not match the args");
        goto done;
    }
    X.ints = (int64_t *)ib.buf;
    X.n = n;
    shapes = filled_list(n, S_empty);
    dtypes = filled_list(n, S_empty);
    texts = filled_list(n, S_empty);
    coll = PyList_New(0);
    if (!shapes || !dtypes || !texts || !coll)
        goto done;
    const int8_t *cls = (const int8_t *)cb.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyList_GET_ITEM(args, i);
        if (!PyDict_CheckExact(a)) {
            PyErr_SetString(PyExc_TypeError, "args_columns: every args value must be a dict");
            goto done;
        }
        int rc = args_row(&X, a, cls[i], i, shapes, dtypes, texts, coll);
        if (rc < 0)
            goto done;
        if (rc == 0) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    result = PyTuple_Pack(4, shapes, dtypes, texts, coll);
done:
    PyBuffer_Release(&cb);
    if (ib.obj)
        PyBuffer_Release(&ib);
    Py_XDECREF(shapes);
    Py_XDECREF(dtypes);
    Py_XDECREF(texts);
    Py_XDECREF(coll);
    PyMem_Free(X.text.p);
    PyMem_Free(X.val.p);
    return result;
}

/* ------------------------------------------------------------------ id_keys */
/* ``extract.IdKeys.keys``: in-range ints are their own key, any other value (as an int or str object, else
 * its repr) gets a key below -2**62 from the shared dict ``other``. */
static int other_key(PyObject *v, PyObject *other, int64_t *out) {
    PyObject *obj = (PyLong_CheckExact(v) || PyUnicode_CheckExact(v)) ? (Py_INCREF(v), v) : PyObject_Repr(v);
    if (obj == NULL)
        return -1;
    PyObject *k = PyDict_GetItemWithError(other, obj);
    int rc = 0;
    if (k != NULL) {
        *out = PyLong_AsLongLong(k);
    } else if (PyErr_Occurred()) {
        rc = -1;
    } else {
        *out = INT64_MIN + (int64_t)PyDict_GET_SIZE(other);
        PyObject *key = PyLong_FromLongLong(*out);
        rc = key == NULL ? -1 : PyDict_SetItem(other, obj, key);
        Py_XDECREF(key);
    }
    Py_DECREF(obj);
    return rc;
}

static PyObject *py_id_keys(PyObject *self, PyObject *argv) {
    PyObject *values, *other;
    if (!PyArg_ParseTuple(argv, "O!O!", &PyList_Type, &values, &PyDict_Type, &other))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(values);
    PyObject *out = PyByteArray_FromStringAndSize(NULL, n * 8);
    if (out == NULL)
        return NULL;
    int64_t *keys = (int64_t *)PyByteArray_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        if (PyLong_CheckExact(v)) {
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (x == -1 && PyErr_Occurred()) {
                Py_DECREF(out);
                return NULL;
            }
            if (!overflow && x > -KEY_LIMIT && x < KEY_LIMIT) {
                keys[i] = x;
                continue;
            }
        }
        if (other_key(v, other, &keys[i]) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* ------------------------------------------------------------------ dumps (for the tests) */
static PyObject *py_dumps(PyObject *self, PyObject *v) {
    Buf b = {0};
    int rc = enc(&b, v, 0);
    PyObject *out = rc < 0 ? NULL : rc == 1 ? (Py_INCREF(Py_None), Py_None) : PyBytes_FromStringAndSize(b.p, b.n);
    PyMem_Free(b.p);
    return out;
}

static PyMethodDef methods[] = {
    {"split", py_split, METH_VARARGS, "split(events, ns, check_ts, memo, classes, empty, flow_cats) -> tuple | None"},
    {"args_columns", py_args_columns, METH_VARARGS,
     "args_columns(args, cls, ints, keyinfo, memo, fallback) -> (shapes, dtypes, texts, coll) | None"},
    {"id_keys", py_id_keys, METH_VARARGS, "id_keys(values, other) -> bytearray of int64 keys"},
    {"dumps", py_dumps, METH_O, "dumps(value) -> bytes as orjson writes them, or None when not handled here"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastextract", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastextract(void) {
    const char *names[] = {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id", ""};
    PyObject **slots[] = {&S_ph, &S_cat, &S_name, &S_pid, &S_tid, &S_ts, &S_dur, &S_args, &S_id, &S_empty};
    for (size_t k = 0; k < sizeof slots / sizeof *slots; k++) {
        *slots[k] = PyUnicode_InternFromString(names[k]);
        if (*slots[k] == NULL)
            return NULL;
    }
    return PyModule_Create(&module);
}
