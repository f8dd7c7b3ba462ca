/*
** numrange.c -- JSON numbers within bounds as GBNF (schema.c's minimum,
** maximum, exclusiveMinimum and exclusiveMaximum).
**
** Integers: digit by digit, as alternatives of character classes (for
** [-120, 35]: "-" then 1-9, 10-99, 100-120, or 0-9, 10-35).
**
** Numbers that may have a fraction: each bound is written as its shortest
** decimal that reads back as the same double (0.1 as "0.1", not
** 0.1000000000000000055...), an exclusive one first moved to the next double
** inward; then the number's integral part and fraction are compared with it
** digit by digit: the bound's integral part with a fraction at or beyond the
** bound's, the integral parts strictly between with any fraction, and so
** on. A text the grammar accepts is within the bounds as a validator reads
** it (strtod rounds monotonically: a decimal at or above the bound's
** decimal reads as a double at or above the bound); texts with more
** fraction digits than the grammar allows, or an exponent, are not written.
*/
#include "schema_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- integers */

static int digits(long long v) {
    int d = 1;
    while (v >= 10) v /= 10, d++;
    return d;
}

static long long pow10ll(int d) {
    long long p = 1;
    while (d-- > 0) p *= 10;
    return p;
}

/* d-digit strings (leading zeros allowed) from x to y: alternatives into out (n_alt counts them). */
static void digit_range(sbuf *out, long long x, long long y, int d, const char *prefix, size_t *n_alt) {
    char pre[64];
    if (d == 0) {
        sb_printf(out, "%s%s", (*n_alt)++ ? " | " : "", *prefix ? prefix : "\"\"");
        return;
    }
    long long p = pow10ll(d - 1);
    int x0 = (int)(x / p), y0 = (int)(y / p);
    long long xr = x % p, yr = y % p;
    if (x0 == y0) {
        snprintf(pre, sizeof pre, "%s%s[%d]", prefix, *prefix ? " " : "", x0);
        digit_range(out, xr, yr, d - 1, pre, n_alt);
        return;
    }
    if (xr == 0 && yr == p - 1) { /* the whole span of the rest */
        snprintf(pre, sizeof pre, "%s%s[%d-%d]", prefix, *prefix ? " " : "", x0, y0);
        if (d > 1) sb_printf(out, "%s%s [0-9]{%d}", (*n_alt)++ ? " | " : "", pre, d - 1);
        else sb_printf(out, "%s%s", (*n_alt)++ ? " | " : "", pre);
        return;
    }
    snprintf(pre, sizeof pre, "%s%s[%d]", prefix, *prefix ? " " : "", x0);
    digit_range(out, xr, p - 1, d - 1, pre, n_alt);
    if (y0 - x0 >= 2) {
        snprintf(pre, sizeof pre, "%s%s[%d-%d]", prefix, *prefix ? " " : "", x0 + 1, y0 - 1);
        if (d > 1) sb_printf(out, "%s%s [0-9]{%d}", (*n_alt)++ ? " | " : "", pre, d - 1);
        else sb_printf(out, "%s%s", (*n_alt)++ ? " | " : "", pre);
    }
    snprintf(pre, sizeof pre, "%s%s[%d]", prefix, *prefix ? " " : "", y0);
    digit_range(out, 0, yr, d - 1, pre, n_alt);
}

/* Integers in [a, b] (0 <= a <= b, b up to 16 digits), written without leading zeros, into out. */
static void natural_range(sbuf *out, long long a, long long b, const char *sign, size_t *n_alt) {
    for (int d = digits(a); d <= digits(b); d++) {
        long long lo = d == 1 ? 0 : pow10ll(d - 1), hi = pow10ll(d) - 1;
        if (lo < a) lo = a;
        if (hi > b) hi = b;
        if (lo > hi) continue;
        digit_range(out, lo, hi, d, sign, n_alt);
    }
}

void sm_int_range_gbnf(sbuf *out, bool has_lo, long long lo, bool has_hi, long long hi) {
    if (!has_lo || lo < -SM_NUM_LIMIT) lo = -SM_NUM_LIMIT;
    if (!has_hi || hi > SM_NUM_LIMIT) hi = SM_NUM_LIMIT;
    size_t n_alt = 0;
    sb_puts(out, "(");
    if (lo < 0) { /* the negative ones: "-" then [max(1, -hi), -lo] */
        long long a = hi < 0 ? -hi : 1;
        natural_range(out, a, -lo, "\"-\"", &n_alt);
    }
    if (hi >= 0) natural_range(out, lo > 0 ? lo : 0, hi, "", &n_alt);
    sb_puts(out, ")");
}

/* ---- numbers with fractions */

/* A magnitude as decimal digits: integral part ip, fraction fp (no trailing zeros); big: 17 digits or more. */
typedef struct {
    long long ip;
    char fp[360];
    bool big;
} mag;

/* |v| (finite) as its shortest decimal that reads back as v. */
static void mag_of(double v, mag *m) {
    char buf[64];
    v = fabs(v);
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, v);
        if (strtod(buf, NULL) == v) break;
    }
    /* buf: d[.ddd]e[+-]XX -> the digits and the exponent of the first one */
    char dg[24];
    size_t nd = 0;
    const char *c = buf;
    for (; *c && *c != 'e'; c++)
        if (*c >= '0' && *c <= '9' && nd + 1 < sizeof dg) dg[nd++] = *c;
    dg[nd] = '\0';
    int e = *c == 'e' ? atoi(c + 1) : 0;
    m->ip = 0, m->big = e >= 16, m->fp[0] = '\0';
    if (m->big) return;
    size_t f = 0;
    for (int i = 0; i <= e; i++) m->ip = m->ip * 10 + (i < (int)nd ? dg[i] - '0' : 0); /* digit i: 10^(e - i) */
    for (int z = -1; z > e && f + 1 < sizeof m->fp; z--) m->fp[f++] = '0'; /* 0.00ddd */
    for (int i = e + 1 > 0 ? e + 1 : 0; i < (int)nd && f + 1 < sizeof m->fp; i++) m->fp[f++] = dg[i];
    while (f && m->fp[f - 1] == '0') f--;
    m->fp[f] = '\0';
}

/* One alternative of an expression being written (n: how many so far). */
static void alt(sbuf *o, size_t *n, const char *text) {
    sb_puts(o, (*n)++ ? " | " : "");
    sb_puts(o, text);
}

/* The n alternatives written into t, parenthesized, appended to o (nothing when n is 0); t freed. */
static bool group(sbuf *o, sbuf *t, size_t n) {
    if (n) sb_puts(o, "("), sb_add(o, t->s, t->n), sb_puts(o, ")");
    if (t->oom) o->oom = true;
    free(t->s);
    return n > 0;
}

/*
** Digit strings D of minlen..maxlen digits with lo <= 0.D <= hi, compared
** digit by digit (lo: NULL or the lower bound's remaining fraction digits;
** hi: NULL for none, else the upper bound's, "" meaning only zeros may
** follow), as one parenthesized alternation appended to o; false (o
** unchanged) when no string is.
*/
static bool frac_digits(sbuf *o, const char *lo, const char *hi, int minlen, int maxlen) {
    if (lo && !*lo) lo = NULL;
    sbuf t = {0}, sub = {0};
    size_t n = 0;
    char head[32];
    if (minlen == 0 && !lo) alt(&t, &n, "\"\"");
    if (maxlen > 0) {
        const int a = lo ? lo[0] - '0' : 0, b = hi ? (*hi ? hi[0] - '0' : 0) : 9;
        const char *lo1 = lo ? lo + 1 : NULL, *hi1 = hi ? (*hi ? hi + 1 : hi) : NULL;
        if (lo && hi && a == b) { /* both tight on the same digit */
            if (frac_digits(&sub, lo1, hi1, 0, maxlen - 1)) {
                snprintf(head, sizeof head, "\"%d\" ", a);
                alt(&t, &n, head), sb_add(&t, sub.s, sub.n);
            }
        } else if (a <= b) {
            if (lo && frac_digits(&sub, lo1, NULL, 0, maxlen - 1)) {
                snprintf(head, sizeof head, "\"%d\" ", a);
                alt(&t, &n, head), sb_add(&t, sub.s, sub.n);
            }
            const int f0 = a + (lo ? 1 : 0), f1 = b - (hi ? 1 : 0); /* digits free of both bounds */
            if (f0 <= f1) {
                snprintf(head, sizeof head, "[%d-%d]", f0, f1);
                alt(&t, &n, head);
                if (maxlen > 1) sb_printf(&t, " [0-9]{0,%d}", maxlen - 1);
            }
            sub.n = 0;
            if (hi && frac_digits(&sub, NULL, hi1, 0, maxlen - 1)) {
                snprintf(head, sizeof head, "\"%d\" ", b);
                alt(&t, &n, head), sb_add(&t, sub.s, sub.n);
            }
        }
    }
    if (sub.oom) t.oom = true;
    free(sub.s);
    return group(o, &t, n);
}

/* An optional fraction ("." and 1..SM_NUM_FRAC digits) with lo <= its value <= hi (as frac_digits). */
static bool fraction(sbuf *o, const char *lo, const char *hi) {
    sbuf d = {0};
    size_t n = 0;
    sbuf t = {0};
    if (!lo || !*lo) alt(&t, &n, "\"\""); /* none: the value 0 */
    if (frac_digits(&d, lo, hi, 1, SM_NUM_FRAC)) alt(&t, &n, "\".\" "), sb_add(&t, d.s, d.n);
    if (d.oom) t.oom = true;
    free(d.s);
    return group(o, &t, n);
}

/* Magnitudes in [lo, hi] (hi NULL: no upper bound) as alternatives appended to o (n counts them). */
static void magnitudes(sbuf *o, size_t *n, const char *sign, const mag *lo, const mag *hi) {
    if (lo->big) return; /* beyond every 16-digit integral part */
    if (hi && hi->big) hi = NULL;
    if (hi && hi->ip < lo->ip) return;
    sbuf t = {0};
    char lit[48];
    snprintf(lit, sizeof lit, "%s\"%lld\" ", sign, lo->ip);
    if (hi && hi->ip == lo->ip) {
        if (fraction(&t, lo->fp, hi->fp)) alt(o, n, lit), sb_add(o, t.s, t.n);
    } else {
        if (fraction(&t, lo->fp, NULL)) alt(o, n, lit), sb_add(o, t.s, t.n);
        const long long a = lo->ip + 1, b = hi ? hi->ip - 1 : SM_NUM_LIMIT;
        if (a <= b) { /* the integral parts strictly between: any fraction */
            size_t k = 0;
            snprintf(lit, sizeof lit, "%s(", sign);
            alt(o, n, lit);
            natural_range(o, a, b, "", &k);
            sb_printf(o, ") (\".\" [0-9]{1,%d})?", SM_NUM_FRAC);
        }
        t.n = 0;
        if (hi) {
            snprintf(lit, sizeof lit, "%s\"%lld\" ", sign, hi->ip);
            if (fraction(&t, NULL, hi->fp)) alt(o, n, lit), sb_add(o, t.s, t.n);
        }
    }
    if (t.oom) o->oom = true;
    free(t.s);
}

bool sm_num_range_gbnf(sbuf *out, bool has_lo, double lo, bool lo_excl, bool has_hi, double hi, bool hi_excl) {
    if (has_lo && lo_excl) lo = nextafter(lo, INFINITY); /* > x as >= the next double */
    if (has_hi && hi_excl) hi = nextafter(hi, -INFINITY);
    if (has_lo && has_hi && lo > hi) return false;
    if (has_lo && lo == 0) lo = 0; /* -0 as 0 */
    if (has_hi && hi == 0) hi = 0;
    mag ml, mh, zero = {0};
    if (has_lo) mag_of(lo, &ml);
    if (has_hi) mag_of(hi, &mh);
    sbuf t = {0};
    size_t n = 0;
    if (!has_lo || lo < 0) /* the negative ones: "-" then magnitudes [max(0, -hi), -lo] */
        magnitudes(&t, &n, "\"-\" ", has_hi && hi < 0 ? &mh : &zero, has_lo ? &ml : NULL);
    if (!has_hi || hi >= 0) magnitudes(&t, &n, "", has_lo && lo > 0 ? &ml : &zero, has_hi ? &mh : NULL);
    return group(out, &t, n);
}
