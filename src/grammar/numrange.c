/*
** numrange.c -- JSON numbers within bounds as GBNF (schema.c's minimum,
** maximum, exclusiveMinimum and exclusiveMaximum), and integers that are
** multiples of a whole number (multipleOf) within them.
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

/* ---- integers (and multiples of m within bounds: multipleOf)
**
** The digit strings of a range, each alternative's digits carried through
** the remainder mod m when there is an m: a fixed digit moves the
** remainder, a class of digits splits by where it leaves it, and the k free
** digits after a class become a rule "m<tag>-<k>-<need>": k digits whose
** value is need mod m (so the whole number is 0 mod m). Such a rule exists
** only when some k digits reach need (need < 10^k), and is written once, on
** first use. Without an m the free digits are [0-9]{k}.
*/

#define MUL_RULES 4096

typedef struct {
    sbuf *rules;
    size_t tag;
    long long m, p10[17]; /* 10^k mod m */
    struct mul_rule { int k; long long need; } *made; /* (MUL_RULES) the rules written */
    size_t n_made;
    bool over; /* more than MUL_RULES rules */
} mul;

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

static bool reachable(int k, long long need) { return k == 0 ? need == 0 : need < pow10ll(k); }

static long long mod_m(const mul *c, long long v) { return (v % c->m + c->m) % c->m; }

static void tail_rule(mul *c, int k, long long need, char *name, size_t cap);

/* Digits d in [lo, hi], each leaving (a + b d) mod m for the k free digits after it to reach:
   alternatives "prefix [ds] rest" into out, the ds grouped by what they leave, those no k
   digits can complete left out. */
static void digits_to(mul *c, sbuf *out, const char *prefix, int lo, int hi, long long a, long long b, int k,
                      size_t *n_alt) {
    long long needs[10];
    int n = 0, mask[10] = {0};
    for (int d = lo; d <= hi; d++) {
        long long need = mod_m(c, a + b * d);
        if (!reachable(k, need)) continue;
        int g = 0;
        while (g < n && needs[g] != need) g++;
        if (g == n) needs[n++] = need;
        mask[g] |= 1 << d;
    }
    for (int g = 0; g < n && !c->over; g++) {
        char rest[64] = "";
        if (k) tail_rule(c, k, needs[g], rest, sizeof rest);
        sb_printf(out, "%s%s%s[", (*n_alt)++ ? " | " : "", prefix, *prefix ? " " : "");
        for (int d = 0; d < 10; d++) {
            if (!(mask[g] >> d & 1)) continue;
            int e = d;
            while (e < 9 && mask[g] >> (e + 1) & 1) e++;
            if (e > d) sb_printf(out, "%d-%d", d, e);
            else sb_printf(out, "%d", d);
            d = e;
        }
        sb_printf(out, "]%s%s", k ? " " : "", rest);
    }
}

/* The rule of k >= 1 digits whose value is need mod m (written on first use): its name into name. */
static void tail_rule(mul *c, int k, long long need, char *name, size_t cap) {
    snprintf(name, cap, "m%zu-%d-%lld", c->tag, k, need);
    for (size_t i = 0; i < c->n_made; i++)
        if (c->made[i].k == k && c->made[i].need == need) return;
    if (c->n_made == MUL_RULES) {
        c->over = true;
        return;
    }
    c->made[c->n_made++] = (struct mul_rule){k, need};
    sbuf rhs = {0}; /* the first digit d leaves need - d 10^(k-1) to the k - 1 after it */
    size_t n_alt = 0;
    digits_to(c, &rhs, "", 0, 9, need, mod_m(c, -c->p10[k - 1]), k - 1, &n_alt);
    sb_printf(c->rules, "%s ::= ", name);
    sb_add(c->rules, rhs.s ? rhs.s : "", rhs.n);
    sb_puts(c->rules, "\n");
    if (rhs.oom) c->rules->oom = true;
    free(rhs.s);
}

/* Digits lo..hi after prefix (whose digits leave remainder rp), then k free digits. */
static void span(mul *c, sbuf *out, const char *prefix, long long rp, int lo, int hi, int k, size_t *n_alt) {
    if (c) { /* 0 mod m when the digit and the k after it make -(10 rp + digit) 10^k */
        digits_to(c, out, prefix, lo, hi, mod_m(c, -(10 * rp % c->m) * c->p10[k]), mod_m(c, -c->p10[k]), k, n_alt);
        return;
    }
    sb_printf(out, "%s%s%s[%d-%d]", (*n_alt)++ ? " | " : "", prefix, *prefix ? " " : "", lo, hi);
    if (k) sb_printf(out, " [0-9]{%d}", k);
}

/* d-digit strings (leading zeros allowed) from x to y (multiples of c->m, when c, after a prefix
   whose digits leave remainder rp): alternatives into out (n_alt counts them). */
static void digit_range(mul *c, sbuf *out, long long x, long long y, int d, const char *prefix, long long rp,
                        size_t *n_alt) {
    char pre[256]; /* up to 16 "[d]" and a sign */
    if (d == 0) {
        if (!c || rp == 0) sb_printf(out, "%s%s", (*n_alt)++ ? " | " : "", *prefix ? prefix : "\"\"");
        return;
    }
    long long p = pow10ll(d - 1);
    int x0 = (int)(x / p), y0 = (int)(y / p);
    long long xr = x % p, yr = y % p;
    if (x0 != y0 && xr == 0 && yr == p - 1) { /* the whole span of the rest */
        span(c, out, prefix, rp, x0, y0, d - 1, n_alt);
        return;
    }
    snprintf(pre, sizeof pre, "%s%s[%d]", prefix, *prefix ? " " : "", x0);
    digit_range(c, out, xr, x0 == y0 ? yr : p - 1, d - 1, pre, c ? mod_m(c, 10 * rp + x0) : 0, n_alt);
    if (x0 == y0) return;
    if (y0 - x0 >= 2) span(c, out, prefix, rp, x0 + 1, y0 - 1, d - 1, n_alt);
    snprintf(pre, sizeof pre, "%s%s[%d]", prefix, *prefix ? " " : "", y0);
    digit_range(c, out, 0, yr, d - 1, pre, c ? mod_m(c, 10 * rp + y0) : 0, n_alt);
}

/* Integers in [a, b] (0 <= a <= b, b up to 16 digits; multiples of c->m when c), written without
   leading zeros, into out. */
static void natural_range(mul *c, sbuf *out, long long a, long long b, const char *sign, size_t *n_alt) {
    for (int d = digits(a); d <= digits(b); d++) {
        long long lo = d == 1 ? 0 : pow10ll(d - 1), hi = pow10ll(d) - 1;
        if (lo < a) lo = a;
        if (hi > b) hi = b;
        if (lo <= hi) digit_range(c, out, lo, hi, d, sign, 0, n_alt);
    }
}

/* The integers (multiples of c->m when c) in [lo, hi], clipped to 16 digits, into out. */
static void int_range(mul *c, sbuf *out, bool has_lo, long long lo, bool has_hi, long long hi) {
    if (!has_lo || lo < -SM_NUM_LIMIT) lo = -SM_NUM_LIMIT;
    if (!has_hi || hi > SM_NUM_LIMIT) hi = SM_NUM_LIMIT;
    size_t n_alt = 0;
    sb_puts(out, "(");
    if (lo < 0) natural_range(c, out, hi < 0 ? -hi : 1, -lo, "\"-\"", &n_alt); /* "-" then [max(1, -hi), -lo] */
    if (hi >= 0) natural_range(c, out, lo > 0 ? lo : 0, hi, "", &n_alt);
    sb_puts(out, ")");
}

void sm_int_range_gbnf(sbuf *out, bool has_lo, long long lo, bool has_hi, long long hi) {
    int_range(NULL, out, has_lo, lo, has_hi, hi);
}

int sm_int_multiple_gbnf(sbuf *out, sbuf *rules, size_t tag, bool has_lo, long long lo, bool has_hi,
                         long long hi, long long m) {
    const long long l = has_lo && lo > -SM_NUM_LIMIT ? lo : -SM_NUM_LIMIT, r = l % m;
    if ((r == 0 ? l : r < 0 ? l - r : l + (m - r)) > (has_hi && hi < SM_NUM_LIMIT ? hi : SM_NUM_LIMIT))
        return 0; /* the first multiple at or above lo is beyond hi */
    mul c = {.rules = rules, .tag = tag, .m = m, .made = calloc(MUL_RULES, sizeof *c.made)};
    if (!c.made) return out->oom = true, -1;
    c.p10[0] = 1 % m;
    for (int k = 1; k <= 16; k++) c.p10[k] = c.p10[k - 1] * 10 % m;
    const size_t on = out->n, rn = rules->n;
    int_range(&c, out, has_lo, lo, has_hi, hi);
    free(c.made);
    if (c.over) out->n = on, rules->n = rn;
    return c.over ? -1 : 1;
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
            natural_range(NULL, o, a, b, "", &k);
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
