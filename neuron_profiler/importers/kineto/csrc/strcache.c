/* The strings of one scanned slice (scan.c): keys -> (str, keyinfo bits), names and texts -> the str shared
 * through their memo, looked up by their UTF-8 bytes, so each distinct one is decoded and hashed by Python once. */
#include "tokens.h"

/* keys -> (str, keyinfo bits); cat / name / flow category -> the str shared through memo */
static uint64_t hash_bytes(const char *s, Py_ssize_t n, int kind) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)kind;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h | 1; /* 0 marks an empty slot */
}

void cache_free(Cache *c) {
    Py_XDECREF(c->keep);
    if (c->e == NULL)
        return;
    for (Py_ssize_t i = 0; i < CACHE_SIZE; i++)
        if (c->e[i].h) {
            PyMem_Free(c->e[i].bytes);
            Py_DECREF(c->e[i].obj);
        }
    PyMem_Free(c->e);
}

/* The str of UTF-8 ``s`` (borrowed, alive while the cache is): kind 0 a key (``*bits`` its keyinfo), other
 * kinds (1 names, 2 texts) a string shared through ``memo``. */
PyObject *cached_str(Cache *c, const char *s, Py_ssize_t n, int kind, PyObject *memo, PyObject *keyinfo, long *bits) {
    uint64_t h = hash_bytes(s, n, kind);
    Py_ssize_t i = (Py_ssize_t)(h & (CACHE_SIZE - 1));
    if (c->e == NULL) {
        c->e = PyMem_Calloc(CACHE_SIZE, sizeof(Entry));
        if (c->e == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    for (Py_ssize_t probe = 0; c->e[i].h && probe < CACHE_SIZE; probe++, i = (i + 1) & (CACHE_SIZE - 1)) {
        Entry *e = &c->e[i];
        if (e->h == h && e->kind == kind && e->n == n && memcmp(e->bytes, s, (size_t)n) == 0) {
            if (bits)
                *bits = e->bits;
            return e->obj;
        }
    }
    PyObject *str = PyUnicode_DecodeUTF8(s, n, NULL);
    if (str == NULL)
        return NULL;
    long b = 0;
    PyObject *obj = str;
    if (kind == 0) {
        PyObject *info = PyDict_GetItemWithError(keyinfo, str);
        if (info == NULL && PyErr_Occurred()) {
            Py_DECREF(str);
            return NULL;
        }
        b = info ? PyLong_AsLong(info) : 0;
    } else {
        obj = PyDict_SetDefault(memo, str, str);
        if (obj == NULL) {
            Py_DECREF(str);
            return NULL;
        }
        Py_INCREF(obj);
        Py_DECREF(str);
    }
    if (bits)
        *bits = b;
    if (c->used * 4 >= CACHE_SIZE * 3) { /* full enough: not kept in the table, the cache still owns it */
        if (c->keep == NULL && (c->keep = PyList_New(0)) == NULL) {
            Py_DECREF(obj);
            return NULL;
        }
        int rc = PyList_Append(c->keep, obj);
        Py_DECREF(obj);
        return rc < 0 ? NULL : obj;
    }
    char *copy = PyMem_Malloc((size_t)n + 1);
    if (copy == NULL) {
        Py_DECREF(obj);
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(copy, s, (size_t)n);
    c->e[i] = (Entry){h, n, copy, obj, b, kind};
    c->used++;
    return obj;
}

