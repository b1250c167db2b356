/* ``factorize_i64`` / ``factorize_obj``: codes in order of first appearance, as ``pd.factorize`` gives them,
 * without pandas' per-call overhead (~20-30 us a call, a dozen calls on every import). See fastextract.c. */
#include "common.h"

static uint64_t seed; /* per process, so that no trace can choose keys that all collide */

static inline uint64_t mix(uint64_t x) { /* splitmix64's finalizer */
    x ^= seed;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void factorize_seed(uint64_t s) { seed = s | 1; }

/* factorize_i64(buffer of n int64) -> (bytearray of n int64 codes, bytearray of the int64 uniques) */
PyObject *py_factorize_i64(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (view.len % 8) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "factorize_i64: a buffer of int64 expected");
        return NULL;
    }
    Py_ssize_t n = view.len / 8;
    const int64_t *v = view.buf;
    size_t cap = 16;
    while (cap < 2 * (size_t)n)
        cap *= 2;
    int64_t *slot = PyMem_Malloc(cap * sizeof *slot); /* index into uniques + 1; 0: empty */
    PyObject *codes = PyByteArray_FromStringAndSize(NULL, n * 8);
    Buf uniq = {0};
    PyObject *out = NULL;
    if (slot == NULL || codes == NULL) {
        if (slot == NULL)
            PyErr_NoMemory();
        goto done;
    }
    memset(slot, 0, cap * sizeof *slot);
    int64_t *c = (int64_t *)PyByteArray_AS_STRING(codes), used = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t h = (size_t)mix((uint64_t)v[i]) & (cap - 1);
        while (slot[h] && ((int64_t *)uniq.p)[slot[h] - 1] != v[i])
            h = (h + 1) & (cap - 1);
        if (!slot[h]) {
            if (buf_put(&uniq, (const char *)&v[i], 8) < 0)
                goto done;
            slot[h] = ++used;
        }
        c[i] = slot[h] - 1;
    }
    PyObject *u = bytes_of(&uniq);
    out = u ? PyTuple_Pack(2, codes, u) : NULL;
    Py_XDECREF(u);
done:
    PyMem_Free(slot);
    PyMem_Free(uniq.p);
    Py_XDECREF(codes);
    PyBuffer_Release(&view);
    return out;
}

/* factorize_obj(list) -> (bytearray of int64 codes, list of uniques); None and only None gets -1. Returns None
 * when a value is not exactly a str, an int or None (NaN, floats, bools, subclasses: pandas' rules decide). */
PyObject *py_factorize_obj(PyObject *self, PyObject *arg) {
    if (!PyList_CheckExact(arg)) {
        PyErr_SetString(PyExc_TypeError, "factorize_obj: a list expected");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(arg);
    PyObject *codes = PyByteArray_FromStringAndSize(NULL, n * 8), *seen = PyDict_New(), *uniq = PyList_New(0);
    PyObject *out = NULL;
    if (codes == NULL || seen == NULL || uniq == NULL)
        goto done;
    int64_t *c = (int64_t *)PyByteArray_AS_STRING(codes);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(arg, i);
        if (v == Py_None) {
            c[i] = -1;
            continue;
        }
        if (!PyUnicode_CheckExact(v) && !PyLong_CheckExact(v)) {
            out = Py_NewRef(Py_None);
            goto done;
        }
        PyObject *code = PyDict_GetItemWithError(seen, v);
        if (code == NULL) {
            if (PyErr_Occurred())
                goto done;
            code = PyLong_FromSsize_t(PyList_GET_SIZE(uniq));
            int rc = code == NULL ? -1 : PyDict_SetItem(seen, v, code);
            Py_XDECREF(code);
            if (rc < 0 || PyList_Append(uniq, v) < 0)
                goto done;
        }
        c[i] = PyLong_AsSsize_t(code);
    }
    out = PyTuple_Pack(2, codes, uniq);
done:
    Py_XDECREF(codes);
    Py_XDECREF(seen);
    Py_XDECREF(uniq);
    return out;
}
