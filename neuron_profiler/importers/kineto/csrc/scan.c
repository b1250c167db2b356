/* The pass over the JSON text of events: what ``split`` + ``args_columns`` (objects.c) give for the events
 * orjson would parse from that text, without building the event dicts (the parse and the freeing of the dicts
 * were most of an import's time).
 *
 * The scanner accepts strict JSON only (RFC 8259: its whitespace, escapes, number grammar, valid UTF-8) and
 * returns None ("defer": the caller parses the text with orjson and runs the other passes) for anything it
 * does not take as is: an event that is not an object, a duplicate key, an unknown or missing ph, a complete
 * event missing a key, a cat / name that is not a string or null, a pid / tid / ts / dur that is not a plain
 * int64 or in-range number, a float ts too large for float64 to keep its ns, an int beyond 64 bits, a lone
 * surrogate escape, a duplicate key in an object whose text is written, values deeper than MAX_DEPTH.
 * Events other than complete events and flow halves (metadata, instants, counters: a few per trace) and the
 * args of collective rows are parsed by ``loads`` (orjson) from their text, so they are exactly the dicts the
 * other path holds; python_function rows give their two frame ids as int64 (``extract.frame_ids``). Numbers:
 * ints are written as their token (JSON and orjson agree), floats as their token when it is the shortest text
 * of its value, else through Python's repr (enc_float).
 */
#include <math.h>
#include <stdio.h>

#include "tokens.h"

/* ------------------------------------------------------------------ events */
enum { F_PH, F_CAT, F_NAME, F_PID, F_TID, F_TS, F_DUR, F_ARGS, F_ID, N_FIELDS };

static int field_of(const char *s, Py_ssize_t n) {
    static const char *names[N_FIELDS] = {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id"};
    static const Py_ssize_t lens[N_FIELDS] = {2, 3, 4, 3, 3, 2, 3, 4, 2};
    for (int k = 0; k < N_FIELDS; k++)
        if (lens[k] == n && memcmp(names[k], s, (size_t)n) == 0)
            return k;
    return -1;
}

typedef struct {
    Cur c;
    Cache cache;
    PyObject *memo, *classes, *empty, *flow_cats, *keyinfo, *text_memo, *loads;
    int check_ts;
    int64_t defaults[N_INT_COLS];
    /* outputs */
    PyObject *cat, *name, *pid, *tid, *args, *meta, *instants, *counters, *fpid, *ftid, *shapes, *dtypes, *texts,
        *coll;
    Buf ts, dur, cls, ints[N_INT_COLS], fph, fcat, fid, fts;
    Buf frames; /* python_function rows: (row, "Python id", "Python parent id") int64 triples */
    Buf text, val, keys; /* scratch: an args text, one value's text, an args object's keys (duplicates) */
    uc *py[2];           /* the row's "Python id" / "Python parent id" value, NULL when absent */
    Py_ssize_t nx;
} Scan;

static int append_new(PyObject *list, PyObject *v) { /* steals v */
    if (v == NULL)
        return -1;
    int rc = PyList_Append(list, v);
    Py_DECREF(v);
    return rc;
}

/* A cat / name value: a string (shared through memo) or null (""); borrowed. *out NULL: DEFER. */
static int name_value(Scan *X, uc *at, PyObject **out) {
    Cur *c = &X->c;
    c->p = at;
    *out = NULL;
    if (*at == 'n') {
        TRY(literal(c, "null", 4));
        *out = PyDict_SetDefault(X->memo, S_empty, S_empty);
        return *out ? 0 : -1;
    }
    if (*at != '"')
        return DEFER;
    const char *s;
    Py_ssize_t n;
    TRY(str_tok(c, &s, &n));
    *out = cached_str(&X->cache, s, n, 1, X->memo, NULL, NULL);
    return *out ? 0 : -1;
}

/* The string at c->p as a new str. */
static int new_str(Cur *c, PyObject **out) {
    const char *s;
    Py_ssize_t n;
    TRY(str_tok(c, &s, &n));
    *out = PyUnicode_DecodeUTF8(s, n, NULL);
    return *out ? 0 : -1;
}

/* A pid / tid value: an int64 or a string (new reference). */
static int id_value(Scan *X, uc *at, PyObject **out) {
    Cur *c = &X->c;
    c->p = at;
    if (*at == '"')
        return new_str(c, out);
    int kind;
    long long i;
    unsigned long long u;
    double d;
    TRY(num_tok(c, &kind, &i, &u, &d));
    if (kind != NUM_I64)
        return DEFER;
    *out = PyLong_FromLongLong(i);
    return *out ? 0 : -1;
}

static int ns_value(Scan *X, uc *at, int is_ts, int64_t *out) {
    Cur *c = &X->c;
    c->p = at;
    int kind;
    long long i;
    unsigned long long u;
    double d;
    TRY(num_tok(c, &kind, &i, &u, &d));
    int ok = kind == NUM_I64 ? to_ns_int(i, is_ts, 0, out) : kind == NUM_F64 ? to_ns_double(d, is_ts, 0, out) : 0;
    return ok ? 0 : DEFER;
}

/* An int argument (``int_arg``'s rule) from the scalar at ``at``; *out unchanged for the default. */
static int int_value(Scan *X, uc *at, int64_t *out) {
    Cur *c = &X->c;
    c->p = at;
    if (*at == '"') {
        PyObject *str;
        TRY(new_str(c, &str));
        int rc = int_arg(str, out);
        Py_DECREF(str);
        return rc < 0 ? -1 : rc == 2 ? DEFER : 0;
    }
    if (*at != '-' && (*at < '0' || *at > '9'))
        return 0; /* true / false / null / containers: the default */
    int kind;
    long long i;
    unsigned long long u;
    double d;
    TRY(num_tok(c, &kind, &i, &u, &d));
    if (kind == NUM_I64 && i > -KEY_LIMIT && i < KEY_LIMIT)
        *out = i;
    else if (kind == NUM_F64 && fabs(d) < (double)KEY_LIMIT)
        *out = (int64_t)d;
    return 0;
}

/* The text in ``b`` as a str shared through text_memo (new reference). */
static PyObject *shared_text(Scan *X, Buf *b) {
    PyObject *s = cached_str(&X->cache, b->p, b->n, 2, X->text_memo, NULL, NULL);
    Py_XINCREF(s);
    return s;
}

/* A python frame's "Python id" / "Python parent id" as the stacks read it (``extract.frame_ids``): the int64
 * written at ``v0``, NO_FRAME_ID for anything else (absent, null, a string, a float, beyond int64). */
static int64_t frame_id(Scan *X, uc *v0) {
    if (v0 == NULL || !(*v0 == '-' || (*v0 >= '0' && *v0 <= '9')))
        return NO_FRAME_ID;
    Cur *c = &X->c;
    uc *save = c->p;
    int kind;
    long long i;
    unsigned long long u;
    double dbl;
    c->p = v0;
    int rc = num_tok(c, &kind, &i, &u, &dbl);
    c->p = save;
    if (rc != 0) {
        PyErr_Clear();
        return NO_FRAME_ID;
    }
    return kind == NUM_I64 ? (int64_t)i : NO_FRAME_ID;
}

/* What one args member (K_* ``bits``, its value at ``v0``..``after``, written in X->val) gives the row: int
 * columns, shapes / dtypes texts, the collective flag, python frame ids. */
static int args_member(Scan *X, long bits, uc *v0, uc *after, int64_t *ints, PyObject **texts, int *coll) {
    if (bits & K_INT_MASK)
        TRY(int_value(X, v0, &ints[(bits & K_INT_MASK) - 1]));
    if ((bits & (K_SHAPES | K_DTYPES)) && *v0 != 'n') {
        PyObject **dest = &texts[bits & K_SHAPES ? 0 : 1];
        Py_XSETREF(*dest, shared_text(X, &X->val));
        if (*dest == NULL)
            return -1;
    }
    if (bits & (K_PY_ID | K_PY_PARENT))
        X->py[bits & K_PY_ID ? 0 : 1] = v0;
    if (bits & K_COLL)
        *coll = 1;
    return 0;
}

/* The args object at ``at`` of an X row of class ``cls``: int columns into ints, shapes / dtypes / args texts
 * (new references), *coll when it holds "Collective name", *end just past it. */
static int scan_args(Scan *X, uc *at, int cls, int64_t *ints, PyObject **texts, int *coll, uc **end) {
    Cur *c = &X->c;
    int drop = cls == DEVICE ? K_DROP_DEVICE : K_DROP_HOST, want_text = cls != TRACE, kept = 0, next = MORE;
    Buf *t = &X->text;
    c->p = at;
    if (*at != '{') { /* null or another type: no args (the other path's ``_EMPTY``) */
        TRY(value(c, NULL, 1));
        *end = (uc *)c->p;
        return 0;
    }
    c->p++;
    ws(c);
    t->n = 0;
    X->keys.n = 0;
    if (buf_putc(t, '{') < 0)
        return -1;
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        next = CLOSED;
    }
    while (next == MORE) {
        const char *s;
        Py_ssize_t n, kn;
        long bits;
        if (c->p >= c->end || *c->p != '"')
            return DEFER;
        TRY(str_tok(c, &s, &n));
        int d = dup_key(&X->keys, s, n);
        if (d)
            return d < 0 ? -1 : DEFER;
        PyObject *key = cached_str(&X->cache, s, n, 0, NULL, X->keyinfo, &bits);
        if (key == NULL)
            return -1;
        TRY(expect_colon(c));
        uc *v0 = c->p;
        X->val.n = 0;
        TRY(value(c, &X->val, 1));
        uc *after = c->p;
        TRY(args_member(X, bits, v0, after, ints, texts, coll));
        if (want_text && !(bits & drop)) {
            const char *ku = PyUnicode_AsUTF8AndSize(key, &kn);
            if (ku == NULL || (kept++ && buf_putc(t, ',') < 0) || enc_utf8(t, ku, kn) < 0 || buf_putc(t, ':') < 0 ||
                buf_put(t, X->val.p, X->val.n) < 0)
                return -1;
        }
        c->p = after;
        next = next_item(c, '}');
    }
    if (next != CLOSED)
        return next;
    *end = (uc *)c->p;
    if (kept) {
        if (buf_putc(t, '}') < 0)
            return -1;
        Py_XSETREF(texts[2], shared_text(X, t));
        if (texts[2] == NULL)
            return -1;
    }
    return 0;
}

/* One complete event's columns, while it is read (references owned). */
typedef struct {
    int64_t ts, dur, ints[N_INT_COLS];
    int cls, coll;
    PyObject *cat, *name; /* borrowed from memo */
    PyObject *pid, *tid, *args, *texts[3];
} Row;

/* The args dict the caller reads for a row (new reference): a collective's whole dict (parsed by ``loads``),
 * else ``empty`` (a python frame's ids go to X->frames). */
static PyObject *row_args(Scan *X, uc *at, uc *end, Row *r) {
    if (*at == '{' && r->coll) {
        PyObject *view = PyMemoryView_FromMemory((char *)at, end - at, PyBUF_READ);
        PyObject *d = view ? PyObject_CallOneArg(X->loads, view) : NULL;
        Py_XDECREF(view);
        return d;
    }
    return Py_NewRef(X->empty);
}

static int append_row(Scan *X, Row *r) {
    int8_t c8 = (int8_t)r->cls;
    if (r->coll && append_new(X->coll, PyLong_FromSsize_t(X->nx)) < 0)
        return -1;
    if (PyList_Append(X->cat, r->cat) < 0 || PyList_Append(X->name, r->name) < 0 || PyList_Append(X->pid, r->pid) < 0 ||
        PyList_Append(X->tid, r->tid) < 0 || PyList_Append(X->args, r->args) < 0 ||
        PyList_Append(X->shapes, r->texts[0]) < 0 || PyList_Append(X->dtypes, r->texts[1]) < 0 ||
        PyList_Append(X->texts, r->texts[2]) < 0 || buf_put(&X->ts, (char *)&r->ts, 8) < 0 ||
        buf_put(&X->dur, (char *)&r->dur, 8) < 0 || buf_put(&X->cls, (char *)&c8, 1) < 0)
        return -1;
    for (int k = 0; k < N_INT_COLS; k++)
        if (buf_put(&X->ints[k], (char *)&r->ints[k], 8) < 0)
            return -1;
    if (PyUnicode_CompareWithASCIIString(r->cat, "python_function") == 0) {
        int64_t frame[3] = {X->nx, frame_id(X, X->py[0]), frame_id(X, X->py[1])};
        if (buf_put(&X->frames, (char *)frame, sizeof frame) < 0)
            return -1;
    }
    X->nx++;
    return 0;
}

static int x_row(Scan *X, uc **f) {
    for (int k = F_CAT; k <= F_DUR; k++)
        if (f[k] == NULL)
            return DEFER;
    Row r = {0};
    memset(X->py, 0, sizeof X->py);
    TRY(ns_value(X, f[F_TS], 1, &r.ts));
    TRY(ns_value(X, f[F_DUR], 0, &r.dur));
    TRY(name_value(X, f[F_CAT], &r.cat));
    TRY(name_value(X, f[F_NAME], &r.name));
    PyObject *cl = PyDict_GetItemWithError(X->classes, r.cat);
    if (cl == NULL && PyErr_Occurred())
        return -1;
    r.cls = cl == NULL ? HOST : (int)PyLong_AsLong(cl);
    memcpy(r.ints, X->defaults, sizeof r.ints);
    for (int k = 0; k < 3; k++)
        r.texts[k] = Py_NewRef(S_empty);
    int rc = id_value(X, f[F_PID], &r.pid);
    if (rc == 0)
        rc = id_value(X, f[F_TID], &r.tid);
    if (rc == 0 && f[F_ARGS]) {
        uc *end;
        rc = scan_args(X, f[F_ARGS], r.cls, r.ints, r.texts, &r.coll, &end);
        if (rc == 0 && (r.args = row_args(X, f[F_ARGS], end, &r)) == NULL)
            rc = -1;
    } else if (rc == 0) {
        r.args = Py_NewRef(X->empty);
    }
    if (rc == 0)
        rc = append_row(X, &r);
    Py_XDECREF(r.pid);
    Py_XDECREF(r.tid);
    Py_XDECREF(r.args);
    for (int k = 0; k < 3; k++)
        Py_XDECREF(r.texts[k]);
    return rc;
}

static int flow_row(Scan *X, uc **f, char phase) {
    if (!f[F_CAT] || !f[F_ID] || !f[F_PID] || !f[F_TID] || !f[F_TS] || *f[F_CAT] != '"' || *f[F_ID] == 'n')
        return DEFER;
    Cur *c = &X->c;
    const char *s;
    Py_ssize_t n;
    c->p = f[F_CAT];
    TRY(str_tok(c, &s, &n));
    PyObject *cat = cached_str(&X->cache, s, n, 1, X->memo, NULL, NULL);
    if (cat == NULL)
        return -1;
    PyObject *code = PyDict_GetItemWithError(X->flow_cats, cat);
    if (code == NULL)
        return PyErr_Occurred() ? -1 : DEFER;
    int64_t id = -1, ts;
    TRY(int_value(X, f[F_ID], &id));
    TRY(ns_value(X, f[F_TS], 1, &ts));
    PyObject *pid = NULL, *tid = NULL;
    int rc = id_value(X, f[F_PID], &pid);
    if (rc == 0)
        rc = id_value(X, f[F_TID], &tid);
    if (rc == 0) {
        char ph = phase == 's' ? 0 : phase == 'f' ? 1 : 2, cc = (char)PyLong_AsLong(code);
        if (buf_putc(&X->fph, ph) < 0 || buf_putc(&X->fcat, cc) < 0 || buf_put(&X->fid, (char *)&id, 8) < 0 ||
            buf_put(&X->fts, (char *)&ts, 8) < 0 || PyList_Append(X->fpid, pid) < 0 || PyList_Append(X->ftid, tid) < 0)
            rc = -1;
    }
    Py_XDECREF(pid);
    Py_XDECREF(tid);
    return rc;
}

/* A metadata / instant / counter event: the dict ``loads`` parses from its text. */
static int dict_event(Scan *X, uc *start, uc *end, PyObject *dest) {
    PyObject *view = PyMemoryView_FromMemory((char *)start, end - start, PyBUF_READ);
    PyObject *e = view ? PyObject_CallOneArg(X->loads, view) : NULL;
    Py_XDECREF(view);
    if (e == NULL)
        return -1;
    PyObject *t = PyDict_Check(e) ? PyDict_GetItemWithError(e, S_ts) : NULL;
    if (X->check_ts && t != NULL && PyFloat_CheckExact(t) && PyFloat_AS_DOUBLE(t) >= LIMIT_US) {
        Py_DECREF(e);
        return DEFER; /* the exact re-read of the timestamps */
    }
    return append_new(dest, e);
}

static int event(Scan *X) {
    Cur *c = &X->c;
    uc *start = c->p, *f[N_FIELDS] = {0};
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == '}')
        return DEFER; /* no ph */
    for (;;) {
        const char *s;
        Py_ssize_t n;
        if (c->p >= c->end || *c->p != '"')
            return DEFER;
        TRY(str_tok(c, &s, &n));
        int k = field_of(s, n);
        TRY(expect_colon(c));
        if (k >= 0) {
            if (f[k])
                return DEFER; /* a duplicate key */
            f[k] = (uc *)c->p;
        }
        TRY(value(c, NULL, 1));
        int next = next_item(c, '}');
        if (next == CLOSED)
            break;
        if (next != MORE)
            return next;
    }
    uc *end = c->p;
    if (f[F_PH] == NULL || *f[F_PH] != '"')
        return DEFER;
    const char *s;
    Py_ssize_t n;
    c->p = f[F_PH];
    TRY(str_tok(c, &s, &n));
    char ph = n == 1 ? s[0] : 0;
    int rc;
    switch (ph) {
    case 'X': rc = x_row(X, f); break;
    case 's': case 'f': case 't': rc = flow_row(X, f, ph); break;
    case 'M': rc = dict_event(X, start, end, X->meta); break;
    case 'i': case 'I': rc = dict_event(X, start, end, X->instants); break;
    case 'C': rc = dict_event(X, start, end, X->counters); break;
    default: rc = DEFER;
    }
    c->p = end;
    return rc;
}

/* The events of text[start:stop] (``array``: from just after the events' '[' to its ']', whose offset is
 * returned). 0 ok, DEFER, -1 error. */
static int scan_events(Scan *X, int array, Py_ssize_t *n_events, uc **stop) {
    Cur *c = &X->c;
    ws(c);
    if (array && c->p < c->end && *c->p == ']') {
        *stop = (uc *)c->p;
        return 0;
    }
    for (;;) {
        if (c->p >= c->end)
            return array ? DEFER : 0;
        if (*c->p != '{')
            return DEFER;
        TRY(event(X));
        (*n_events)++;
        ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            ws(c);
            continue;
        }
        if (array) {
            if (c->p < c->end && *c->p == ']') {
                *stop = (uc *)c->p;
                return 0;
            }
            return DEFER;
        }
        return c->p >= c->end ? 0 : DEFER;
    }
}

static PyObject *scan_result(Scan *X, Py_ssize_t n_events, Py_ssize_t stop) {
    PyObject *ints = PyTuple_New(N_INT_COLS);
    if (ints == NULL)
        return NULL;
    for (int k = 0; k < N_INT_COLS; k++) {
        PyObject *b = bytes_of(&X->ints[k]);
        if (b == NULL) {
            Py_DECREF(ints);
            return NULL;
        }
        PyTuple_SET_ITEM(ints, k, b);
    }
    return Py_BuildValue("(OOOONNNO)(NNNNOO)OOO(NOOOON)nn", X->cat, X->name, X->pid, X->tid, bytes_of(&X->ts),
                         bytes_of(&X->dur), bytes_of(&X->cls), X->args, bytes_of(&X->fph), bytes_of(&X->fcat),
                         bytes_of(&X->fid), bytes_of(&X->fts), X->fpid, X->ftid, X->meta, X->instants, X->counters,
                         ints, X->shapes, X->dtypes, X->texts, X->coll, bytes_of(&X->frames), n_events, stop);
}

PyObject *py_scan(PyObject *self, PyObject *argv) {
    Py_buffer text = {0};
    Py_ssize_t start, stop_at;
    int array;
    PyObject *defaults;
    Scan X;
    memset(&X, 0, sizeof X);
    if (!PyArg_ParseTuple(argv, "y*nnppO!O!O!O!O!O!OO!", &text, &start, &stop_at, &array, &X.check_ts,
                          &PyDict_Type, &X.memo, &PyDict_Type, &X.classes, &PyDict_Type, &X.empty, &PyDict_Type,
                          &X.flow_cats, &PyDict_Type, &X.keyinfo, &PyDict_Type, &X.text_memo, &X.loads,
                          &PyTuple_Type, &defaults))
        return NULL;
    PyObject *result = NULL;
    PyObject **lists[] = {&X.cat, &X.name, &X.pid, &X.tid, &X.args, &X.meta, &X.instants, &X.counters, &X.fpid,
                          &X.ftid, &X.shapes, &X.dtypes, &X.texts, &X.coll};
    size_t n_lists = sizeof lists / sizeof *lists;
    if (start < 0 || stop_at > text.len || start > stop_at || PyTuple_GET_SIZE(defaults) != N_INT_COLS) {
        PyErr_SetString(PyExc_ValueError, "scan: bad range or defaults");
        goto done;
    }
    for (int k = 0; k < N_INT_COLS; k++)
        X.defaults[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(defaults, k));
    for (size_t k = 0; k < n_lists; k++)
        if ((*lists[k] = PyList_New(0)) == NULL)
            goto done;
    X.c.p = (uc *)text.buf + start;
    X.c.end = (uc *)text.buf + stop_at;
    Py_ssize_t n_events = 0;
    uc *stop = X.c.end;
    int rc = scan_events(&X, array, &n_events, &stop);
    if (rc < 0)
        goto done;
    if (rc == DEFER) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = scan_result(&X, n_events, stop - (uc *)text.buf);
done:
    for (size_t k = 0; k < n_lists; k++)
        Py_XDECREF(*lists[k]);
    Buf *bufs[] = {&X.ts,  &X.dur,    &X.cls,  &X.fph, &X.fcat, &X.fid,
                   &X.fts, &X.frames, &X.text, &X.val, &X.keys, &X.c.str};
    for (size_t k = 0; k < sizeof bufs / sizeof *bufs; k++)
        PyMem_Free(bufs[k]->p);
    for (int k = 0; k < N_INT_COLS; k++)
        PyMem_Free(X.ints[k].p);
    cache_free(&X.cache);
    PyBuffer_Release(&text);
    return result;
}
