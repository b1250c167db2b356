/* Shared declarations of the C passes of the Kineto importer (see fastextract.c's header comment). */
#ifndef FASTEXTRACT_COMMON_H
#define FASTEXTRACT_COMMON_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_US 4000000000000000LL      /* events.MAX_US */
#define MAX_NS 4000000000000000000LL   /* events.MAX_NS */
#define LIMIT_US 8796093022208.0       /* exact.LIMIT_US = 2**43 */
#define KEY_LIMIT 4611686018427387904LL /* 2**62: int args at or beyond it take the column default */
#define MAX_DEPTH 64                   /* deeper values go to the fallback (orjson stops at 255) */
#define N_INT_COLS 7

/* keyinfo bits: extract._key_info builds the dict with the same values (extract._K_*; a test compares them) */
#define K_INT_MASK 0x0F   /* int column + 1 */
#define K_SHAPES 0x10
#define K_DTYPES 0x20
#define K_COLL 0x40
#define K_DROP_HOST 0x80
#define K_DROP_DEVICE 0x100
#define K_PY_ID 0x200     /* "Python id": read for python_function rows */
#define K_PY_PARENT 0x400 /* "Python parent id" */
#define NO_FRAME_ID INT64_MIN /* a python frame id that is not an int64 (extract.NO_FRAME_ID) */

enum { HOST = 0, DEVICE = 1, ANNOTATION = 2, TRACE = 3 };

extern PyObject *S_ph, *S_cat, *S_name, *S_pid, *S_tid, *S_ts, *S_dur, *S_args, *S_id, *S_empty;

/* growable byte buffer */
typedef struct {
    char *p;
    Py_ssize_t n, cap;
} Buf;

static inline int buf_reserve(Buf *b, Py_ssize_t extra) {
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

static inline PyObject *bytes_of(Buf *b) { return PyByteArray_FromStringAndSize(b->p ? b->p : "", b->n); }

/* JSON text as orjson writes it. Return values: 0 written, -1 Python error set, 1 not handled here. */
int enc(Buf *b, PyObject *v, int depth);
int enc_utf8(Buf *b, const char *u, Py_ssize_t n);
int enc_str(Buf *b, PyObject *s);
int enc_float(Buf *b, double d);
PyObject *memo_text(Buf *b, PyObject *memo);
PyObject *json_text(Buf *b, PyObject *v, PyObject *memo, PyObject *fallback);

/* value rules shared by the passes over dicts and over text */
int int_arg(PyObject *v, int64_t *out);
int to_ns_int(long long x, int is_ts, int ns, int64_t *out);
int to_ns_double(double d, int is_ts, int ns, int64_t *out);
int to_ns(PyObject *v, int is_ts, int ns, int64_t *out);
PyObject *shared_str(PyObject *v, PyObject *memo);

PyObject *py_split(PyObject *self, PyObject *argv);
PyObject *py_args_columns(PyObject *self, PyObject *argv);
PyObject *py_id_keys(PyObject *self, PyObject *argv);
PyObject *py_scan(PyObject *self, PyObject *argv);
PyObject *py_factorize_i64(PyObject *self, PyObject *arg);
PyObject *py_factorize_obj(PyObject *self, PyObject *arg);
void factorize_seed(uint64_t s);
#endif
