/* The passes over parsed event dicts: ``split``, ``args_columns``, ``id_keys`` (see fastextract.c). */
#include <math.h>

#include "common.h"

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


PyObject *py_split(PyObject *self, PyObject *argv) {
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

PyObject *py_args_columns(PyObject *self, PyObject *argv) {
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

PyObject *py_id_keys(PyObject *self, PyObject *argv) {
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
