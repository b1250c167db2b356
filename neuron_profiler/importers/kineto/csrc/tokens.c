/* JSON tokens for the text scan (scan.c): strict RFC 8259 strings (escapes decoded, UTF-8 checked), numbers
 * (ints, floats parsed as strtod does), literals, and values checked and written as orjson writes them. Each
 * returns 0 ok, DEFER (the text is not taken as is) or -1 (a Python error is set). */
#include <math.h>
#include <stdio.h>

#include "tokens.h"

/* ------------------------------------------------------------------ tokens */
/* Length of the UTF-8 sequence at p (first byte >= 0x80), 0 when invalid (overlong, surrogate, > U+10FFFF). */
static int utf8_len(uc *p, uc *end) {
    unsigned c = p[0];
    if (c < 0xC2)
        return 0;
    if (c < 0xE0)
        return end - p >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c < 0xF0) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
            return 0;
        return (c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0) ? 0 : 3;
    }
    if (c < 0xF5) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
            return 0;
        return (c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] >= 0x90) ? 0 : 4;
    }
    return 0;
}

static int hex4(uc *p, uc *end, unsigned *out) {
    if (end - p < 4)
        return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned ch = p[i], d;
        if (ch >= '0' && ch <= '9')
            d = ch - '0';
        else if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f')
            d = (ch | 0x20) - 'a' + 10;
        else
            return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}

static int put_cp(Buf *b, unsigned cp) {
    char u[4];
    int k;
    if (cp < 0x80) {
        u[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        k = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        k = 4;
    }
    return buf_put(b, u, k);
}

/* The string at c->p ('"'): its UTF-8 bytes in (*s, *n): the text itself, or c->str when it has escapes
 * (valid until the next string). 0 ok, DEFER, -1 error. */
/* Some byte of w is '"', '\\', below 0x20 or at or above 0x80 (exact: no false positives or negatives). */
static inline int has_special(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    return ((w | ((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b)) & highs) != 0;
}

/* The escape at *pp ('\\'), decoded into b; *pp moves past it. 0 ok, DEFER (not JSON, a lone surrogate), -1. */
static int unescape(uc **pp, uc *end, Buf *b) {
    uc *p = *pp;
    char one = 0;
    if (end - p < 2)
        return DEFER;
    switch (p[1]) {
    case '"': one = '"'; break;
    case '\\': one = '\\'; break;
    case '/': one = '/'; break;
    case 'b': one = '\b'; break;
    case 'f': one = '\f'; break;
    case 'n': one = '\n'; break;
    case 'r': one = '\r'; break;
    case 't': one = '\t'; break;
    case 'u': {
        unsigned cp, lo;
        if (!hex4(p + 2, end, &cp))
            return DEFER;
        p += 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF)
            return DEFER; /* lone low surrogate */
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, end, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                return DEFER; /* lone high surrogate */
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
        }
        *pp = p;
        return put_cp(b, cp) < 0 ? -1 : 0;
    }
    default: return DEFER;
    }
    *pp = p + 2;
    return buf_putc(b, one) < 0 ? -1 : 0;
}

int str_tok(Cur *c, const char **s, Py_ssize_t *n) {
    uc *p = ++c->p, *end = c->end, *run = p;
    int esc = 0;
    c->str.n = 0;
    while (p < end) {
        uint64_t w;
        while (end - p >= 8 && (memcpy(&w, p, 8), !has_special(w)))
            p += 8;
        if (p >= end)
            break;
        unsigned ch = *p;
        if (ch == '"') {
            if (!esc) {
                *s = (const char *)run;
                *n = p - run;
            } else {
                if (buf_put(&c->str, (const char *)run, p - run) < 0)
                    return -1;
                *s = c->str.p;
                *n = c->str.n;
            }
            c->p = p + 1;
            return 0;
        }
        if (ch < 0x20)
            return DEFER;
        if (ch >= 0x80) {
            int k = utf8_len(p, end);
            if (!k)
                return DEFER;
            p += k;
        } else if (ch != '\\') {
            p++;
        } else {
            esc = 1;
            if (buf_put(&c->str, (const char *)run, p - run) < 0)
                return -1;
            TRY(unescape(&p, end, &c->str));
            run = p;
        }
    }
    return DEFER;
}


static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A decimal without exponent ("123.456"; digits from ``p``, the '.' at ``dot``, the end at ``end``; 0 for a
 * token with an exponent) whose digits fit in 2**53: one exact division by an exact power of ten, so correctly
 * rounded (as strtod). */
static int fast_double(uc *p, uc *dot, uc *end, int neg, double *d) {
    if (end - p > 17)
        return 0;
    uint64_t m = 0;
    int frac = 0;
    for (uc *q = p; q < end; q++) {
        if (*q == '.')
            continue;
        if (*q < '0' || *q > '9')
            return 0; /* an exponent */
        m = m * 10 + (uint64_t)(*q - '0');
        frac += q > dot;
    }
    if (m >= (1ULL << 53) || frac > 22)
        return 0;
    *d = (double)m / POW10[frac];
    if (neg)
        *d = -*d;
    return 1;
}

/* Does orjson write the float that the token st..end parses to as the token itself? True for a token without
 * exponent, of at most 15 significant digits (so it is the shortest text that reads back as that float),
 * without trailing zeros past the first decimal, in the range orjson writes without exponent. */
static int float_token_is_canonical(uc *st, uc *end) {
    uc *q = st + (*st == '-'), *dot = NULL;
    int sig = 0, lead = 1, zeros_after_dot = 0;
    for (uc *r = q; r < end; r++) {
        if (*r == '.') {
            dot = r;
            continue;
        }
        if (*r < '0' || *r > '9')
            return 0;
        if (*r != '0')
            lead = 0;
        if (lead && dot)
            zeros_after_dot++;
        if (!lead)
            sig++;
    }
    if (dot == NULL || dot + 1 >= end || sig > 15)
        return 0;
    if (end - dot > 2 && end[-1] == '0')
        return 0; /* "1.50": orjson writes 1.5 */
    if (*q == '0' && sig > 0 && zeros_after_dot > 4)
        return 0; /* below 1e-5: orjson writes an exponent */
    return dot - q <= 16;
}

/* The grammar of the number at c->p (RFC 8259): the end of its integer part, whether it has a fraction or an
 * exponent, and its end (c->p is not moved). 0 ok, DEFER. */
static int num_span(Cur *c, uc **int_end, int *has_frac, int *has_exp, uc **end_out) {
    uc *p = c->p, *end = c->end;
    *has_frac = *has_exp = 0;
    if (p < end && *p == '-')
        p++;
    if (p >= end)
        return DEFER;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    else
        return DEFER;
    *int_end = p;
    if (p < end && *p == '.') {
        *has_frac = 1;
        if (++p >= end || *p < '0' || *p > '9')
            return DEFER;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *has_exp = 1;
        if (++p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || *p < '0' || *p > '9')
            return DEFER;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    *end_out = p;
    return 0;
}

/* The number at c->p: *kind and its value. 0 ok, DEFER (not a number, an int beyond 64 bits, a float out of
 * range), -1 error. */
int num_tok(Cur *c, int *kind, long long *i, unsigned long long *u, double *d) {
    uc *st = c->p, *int_end, *p;
    int has_frac, has_exp;
    TRY(num_span(c, &int_end, &has_frac, &has_exp, &p));
    int neg = *st == '-', isf = has_frac || has_exp;
    c->p = p;
    if (!isf) {
        unsigned long long v = 0;
        Py_ssize_t nd = int_end - (st + neg);
        if (nd > 20)
            return DEFER; /* beyond 64 bits: orjson reads a float */
        for (uc *q = st + neg; q < int_end; q++) {
            unsigned dgt = *q - '0';
            if (nd == 20 && v > (18446744073709551615ULL - dgt) / 10)
                return DEFER;
            v = v * 10 + dgt;
        }
        if (neg) {
            if (v > 9223372036854775808ULL)
                return DEFER;
            *kind = NUM_I64;
            *i = v == 9223372036854775808ULL ? INT64_MIN : -(long long)v;
        } else if (v <= (unsigned long long)INT64_MAX) {
            *kind = NUM_I64;
            *i = (long long)v;
        } else {
            *kind = NUM_U64;
            *u = v;
        }
        return 0;
    }
    if (fast_double(st + neg, int_end, p, neg, d)) {
        *kind = NUM_F64;
        return 0;
    }
    char tmp[64];
    if (p - st >= (Py_ssize_t)sizeof tmp)
        return DEFER;
    memcpy(tmp, st, (size_t)(p - st));
    tmp[p - st] = 0;
    *d = PyOS_string_to_double(tmp, NULL, NULL);
    if (*d == -1.0 && PyErr_Occurred())
        return -1;
    if (!isfinite(*d))
        return DEFER; /* orjson refuses it */
    *kind = NUM_F64;
    return 0;
}

/* The number at c->p, checked but not converted (a value nobody reads): the text must still be one orjson
 * reads, so an exponent or a long integer part makes it parse the value (orjson refuses infinite ones). */
static int num_skip(Cur *c) {
    uc *int_end, *p;
    int has_frac, has_exp;
    TRY(num_span(c, &int_end, &has_frac, &has_exp, &p));
    if (has_exp || int_end - c->p > 300) {
        int kind;
        long long i;
        unsigned long long u;
        double d;
        return num_tok(c, &kind, &i, &u, &d);
    }
    c->p = p;
    return 0;
}

int literal(Cur *c, const char *word, Py_ssize_t n) {
    if (c->end - c->p < n || memcmp(c->p, word, (size_t)n) != 0)
        return DEFER;
    c->p += n;
    return 0;
}

/* 1 when ``s`` is among the keys recorded in ``keys`` (else records it), -1 error. */
int dup_key(Buf *keys, const char *s, Py_ssize_t n) {
    for (Py_ssize_t at = 0; at < keys->n;) {
        Py_ssize_t len;
        memcpy(&len, keys->p + at, sizeof len);
        if (len == n && memcmp(keys->p + at + sizeof len, s, (size_t)n) == 0)
            return 1;
        at += (Py_ssize_t)sizeof len + len;
    }
    return buf_put(keys, (const char *)&n, sizeof n) < 0 || buf_put(keys, s, n) < 0 ? -1 : 0;
}

/* After a key: the ':' and the whitespace around it. */
int expect_colon(Cur *c) {
    ws(c);
    if (c->p >= c->end || *c->p != ':')
        return DEFER;
    c->p++;
    ws(c);
    return 0;
}

/* After a member or an element: MORE (a ',' and whitespace), CLOSED (``close``, passed) or DEFER. */
int next_item(Cur *c, char close) {
    ws(c);
    if (c->p >= c->end)
        return DEFER;
    if (*c->p == close) {
        c->p++;
        return CLOSED;
    }
    if (*c->p != ',')
        return DEFER;
    c->p++;
    ws(c);
    return MORE;
}

/* The object at c->p ('{'), checked, written to ``out`` (NULL: skipped) with its keys in order. */
static int object(Cur *c, Buf *out, int depth, Buf *keys) {
    c->p++;
    ws(c);
    if (out && buf_putc(out, '{') < 0)
        return -1;
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return out ? buf_putc(out, '}') : 0;
    }
    for (int first = 1;; first = 0) {
        const char *s;
        Py_ssize_t n;
        if (c->p >= c->end || *c->p != '"')
            return DEFER;
        TRY(str_tok(c, &s, &n));
        if (out) {
            int d = dup_key(keys, s, n);
            if (d)
                return d < 0 ? -1 : DEFER;
            if ((!first && buf_putc(out, ',') < 0) || enc_utf8(out, s, n) < 0 || buf_putc(out, ':') < 0)
                return -1;
        }
        TRY(expect_colon(c));
        TRY(value(c, out, depth + 1));
        int next = next_item(c, '}');
        if (next == CLOSED)
            return out ? buf_putc(out, '}') : 0;
        if (next != MORE)
            return next;
    }
}

/* The value at c->p, checked, and written to ``out`` as orjson writes the value it parses (NULL: skipped).
 */
int value(Cur *c, Buf *out, int depth) {
    if (c->p >= c->end || depth >= MAX_DEPTH)
        return DEFER;
    switch (*c->p) {
    case '"': {
        const char *s;
        Py_ssize_t n;
        TRY(str_tok(c, &s, &n));
        return out ? enc_utf8(out, s, n) : 0;
    }
    case '[': {
        c->p++;
        ws(c);
        if (out && buf_putc(out, '[') < 0)
            return -1;
        if (c->p < c->end && *c->p == ']') {
            c->p++;
            return out ? buf_putc(out, ']') : 0;
        }
        for (;;) {
            TRY(value(c, out, depth + 1));
            int next = next_item(c, ']');
            if (next == CLOSED)
                return out ? buf_putc(out, ']') : 0;
            if (next != MORE)
                return next;
            if (out && buf_putc(out, ',') < 0)
                return -1;
        }
    }
    case '{': {
        Buf keys = {0}; /* written objects only: a duplicate key (orjson keeps the last value) defers */
        int rc = object(c, out, depth, &keys);
        PyMem_Free(keys.p);
        return rc;
    }
    case 't': TRY(literal(c, "true", 4)); return out ? buf_put(out, "true", 4) : 0;
    case 'f': TRY(literal(c, "false", 5)); return out ? buf_put(out, "false", 5) : 0;
    case 'n': TRY(literal(c, "null", 4)); return out ? buf_put(out, "null", 4) : 0;
    default: {
        int kind;
        long long i;
        unsigned long long u;
        double d;
        if (!out)
            return num_skip(c);
        uc *st = c->p;
        TRY(num_tok(c, &kind, &i, &u, &d));
        if (kind == NUM_F64 && !float_token_is_canonical(st, c->p))
            return enc_float(out, d);
        if (kind == NUM_I64 && i == 0)
            return buf_putc(out, '0'); /* "-0" */
        return buf_put(out, (const char *)st, c->p - st); /* JSON writes ints as orjson does */
    }
    }
}
