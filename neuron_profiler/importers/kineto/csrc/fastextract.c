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
 *
 * scan(text, start, stop, array, check_ts, memo, classes, empty, flow_cats, keyinfo, text_memo, fallback, loads,
 *      defaults)
 *     ``split`` and ``args_columns`` straight from the JSON text of the events (``scan.c``), without the
 *     event dicts: see there.
 *
 * factorize_i64(int64 buffer), factorize_obj(list)
 *     Codes in order of first appearance and the uniques, as ``pd.factorize`` (``factorize.c``).
 *
 * Sources: common.h (shared declarations), encode.c (JSON text, value rules), objects.c (passes over dicts),
 * tokens.h / tokens.c / strcache.c / scan.c (pass over text), factorize.c, this file (module).
 */
#include <time.h>
#include <unistd.h>

#include "common.h"

PyObject *S_ph, *S_cat, *S_name, *S_pid, *S_tid, *S_ts, *S_dur, *S_args, *S_id, *S_empty;

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
    {"scan", py_scan, METH_VARARGS,
     "scan(text, start, stop, array, check_ts, memo, classes, empty, flow_cats, keyinfo, text_memo, loads, defaults)"
     " -> tuple | None"},
    {"id_keys", py_id_keys, METH_VARARGS, "id_keys(values, other) -> bytearray of int64 keys"},
    {"factorize_i64", py_factorize_i64, METH_O, "factorize_i64(int64 buffer) -> (codes, uniques) as int64 bytearrays"},
    {"factorize_obj", py_factorize_obj, METH_O,
     "factorize_obj(list) -> (int64 codes bytearray, uniques list), or None when not all str / int / None"},
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
    factorize_seed((uint64_t)(uintptr_t)&module ^ ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid());
    return PyModule_Create(&module);
}
