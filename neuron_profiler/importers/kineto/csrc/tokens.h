/* The JSON tokens of the text scan (tokens.c), used by its pass over events (scan.c). */
#ifndef FASTEXTRACT_TOKENS_H
#define FASTEXTRACT_TOKENS_H
#include "common.h"

#define DEFER 1
#define MORE 0   /* next_item: another member or element follows */
#define CLOSED 2 /* next_item: the object or array is closed */
#define TRY(x)                                                                                                     \
    do {                                                                                                           \
        int rc_ = (x);                                                                                             \
        if (rc_)                                                                                                   \
            return rc_;                                                                                            \
    } while (0)

typedef const unsigned char uc;

#define CACHE_SIZE 4096
typedef struct {
    uint64_t h;
    Py_ssize_t n;
    char *bytes;
    PyObject *obj;
    long bits;
    int kind;
} Entry;

typedef struct {
    Entry *e;
    Py_ssize_t used;
    PyObject *keep; /* strings handed out once the table is full */
} Cache;

typedef struct {
    uc *p, *end;
    Buf str; /* a string with escapes, decoded */
} Cur;

static inline void ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

enum { NUM_I64, NUM_U64, NUM_F64 };

void cache_free(Cache *c);
PyObject *cached_str(Cache *c, const char *s, Py_ssize_t n, int kind, PyObject *memo, PyObject *keyinfo, long *bits);
int str_tok(Cur *c, const char **s, Py_ssize_t *n);
int num_tok(Cur *c, int *kind, long long *i, unsigned long long *u, double *d);
int literal(Cur *c, const char *word, Py_ssize_t n);
int dup_key(Buf *keys, const char *s, Py_ssize_t n);
int value(Cur *c, Buf *out, int depth);
int expect_colon(Cur *c);
int next_item(Cur *c, char close);
#endif
