/*
** dispatch.c -- completes the kernel tables for this CPU, once, and picks
** one, or composes one whose operations come from different tables (the
** CPU-family table below, or a spec). The x86 tables exist when the Makefile
** builds avx2.c and avx512.c (it defines SM_X86_KERNELS on x86); elsewhere
** only the scalar table does.
*/
#include "kernels_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
** Operations this CPU family runs faster from another table than the best
** ISA's, measured with `smallmind bench --pick-kernels` (which prints the
** line for the CPU it runs on). Models are inclusive ranges.
*/
static const struct {
    const char *vendor;
    unsigned family, model_lo, model_hi;
    const char *spec;
} cpu_choices[] = {
    /* AMD Zen 4 (Genoa, Raphael/Phoenix, Bergamo/Siena): 512-bit operations double-pumped.
       On a 2-vCPU Zen 4 (issue 39) the AVX2 products decoded f32/f16 weights faster (15M
       Llama f32 745 against 687 tokens/s, GPT-2 small f16 133 against 128) while AVX-512 VNNI
       prefilled about twice as fast: decoding's float products from avx2, the rest avx512.
       Re-measured on a 2-vCPU Zen 4 (model 17) on 2026-11-28: the 15M shape (rows of 288
       weights) decodes 1.2-1.3x faster so, f32 and f16, 1 and 2 threads; GPT-2 small f16
       3-8% slower, f32 the same; bench --pick-kernels' cases (rows of 2,048) lean avx512.
       Its batches (matmul_rows, 3 or more rows) run the AVX2 sums on 512-bit registers
       (rows_on_512): 16 GPT-2 f32 records decoded together at 357 tokens/s against 278 on
       the AVX2 tiles and 355 on the avx512 table's (2026-11-29). */
    {"AuthenticAMD", 25, 0x10, 0x1f, "rows=avx2"},
    {"AuthenticAMD", 25, 0x60, 0x7f, "rows=avx2"},
    {"AuthenticAMD", 25, 0xa0, 0xaf, "rows=avx2"},
    /* AMD Zen 5 (Turin, Turin dense; Granite Ridge, the same core, not measured): a lone row on
       f32 panels that asks for the next panels' lines reads at 73-79% of the read probe on one
       thread, 85-94% on two (tests/tools/bench_gemv, 2-vCPU model 2, 2026-12-01); left to the
       hardware prefetchers 96-98% and 98-99%, the 15M Llama f32 decoding 1.4x faster on one
       thread (540 -> 760 tokens/s). Every operation's table is avx512's. */
    {"AuthenticAMD", 26, 0x00, 0x1f, "prefetch=hw"},
    {"AuthenticAMD", 26, 0x40, 0x4f, "prefetch=hw"},
    /* Intel Emerald Rapids (model 0xcf): vdpbf16ps does half the f32 FMAs' operations a second
       (bench --peaks on a 2-vCPU guest, 2026-11-30: 172 against 350 GOPS), so bf16 weights
       prefill faster on f32 arithmetic, which is also exact (the activations stay f32): the
       TinyLlama layer at 128 rows 71 -> 45 ms, bench --pick-kernels' case 3.5 -> 2.0 ms.
       Every operation's table is avx512's. Sapphire Rapids (0x8f), the same core, was not
       measured. */
    {"GenuineIntel", 6, 0xcf, 0xcf, "bf16=f32"},
};

/* A spec's choices: the base table, where each operation comes from, and the arithmetic of
   the 16-bit weights' GEMM set by items bf16=... and f16=... (dot16[0] bf16's, [1] f16's:
   -1 as the gemm table has it, 0 f32, 1 vdpbf16ps), and how a lone row on f32 panels meets the
   next ones, set by the item prefetch=next|hw (-1 as the gemm table has it, else its
   row_prefetch: 1 next, 2 hw). */
typedef struct {
    const sm_kernels *base, *from[SM_KOP_COUNT];
    int dot16[2];
    int prefetch;
} choice;

static sm_status apply(const char *spec, const char *items, choice *c, bool strict, sm_error *err);

/* The L2 size per core from the C library (glibc reads CPUID) if sane, else the default. */
static size_t read_l2(void) {
    long b = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return b >= 64 * 1024 && b <= 64L * 1024 * 1024 ? (size_t)b : SM_L2_DEFAULT;
}

#ifdef SM_X86_KERNELS
#include <cpuid.h>

/* F16C (vcvtph2ps), which clang's __builtin_cpu_supports does not name. */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

static int has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
}
static int has_avx512(void) {
    __builtin_cpu_init();
    return has_avx2() && __builtin_cpu_supports("avx512f");
}

/* CPUID leaf 7: AVX-VNNI (subleaf 1, EAX bit 4); AVX512-VNNI (ECX bit 11) with VL (EBX bit 31)
   and BW (EBX bit 30: vpshufb on 512 bits, iq4_nl's table). */
static int has_avxvnni(void) {
    unsigned a, b, c, d;
    return has_avx2() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
}
static int has_avx512vnni(void) {
    unsigned a, b, c, d;
    return has_avx512() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c >> 11 & 1) && (b >> 31 & 1) && (b >> 30 & 1);
}
/* AVX512-BF16: leaf 7 subleaf 1, EAX bit 5. */
static int has_avx512bf16(void) {
    unsigned a, b, c, d;
    return has_avx512() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1);
}
#endif

bool sm_kernels_peak_runs(sm_peak p) {
#ifdef SM_X86_KERNELS
    switch (p) {
    case SM_PEAK_FMA256: case SM_PEAK_MADDUBS256: case SM_PEAK_MADDUBS256_RUN: return has_avx2();
    case SM_PEAK_FMA512: return has_avx512();
    case SM_PEAK_VNNI256: return has_avxvnni();
    case SM_PEAK_VNNI512: case SM_PEAK_VNNI512_BLOCK: case SM_PEAK_VNNI512_ISTEP: return has_avx512vnni();
    case SM_PEAK_BF16_512: return has_avx512bf16();
    default: return false;
    }
#else
    (void)p;
    return false;
#endif
}

/* The tables this CPU runs, scalar first, completed by init. */
static sm_kernels tables[3];
static size_t n_tables;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* auto's choice: the best table, and where each operation comes from (the CPU-family table). */
static choice auto_choice;

/* The composed tables handed out so far (their pointers stay valid for the process). */
enum { MAX_COMPOSED = 32, NAME_MAX_LEN = 96 };
static struct {
    sm_kernels k;
    sm_kernels gemm; /* from[SM_KOP_GEMM]'s table with the dot16_types the spec set */
    sm_kernels rows; /* the AVX2 table's, its batches on 512-bit registers (rows_on_512) */
    char name[NAME_MAX_LEN];
} composed[MAX_COMPOSED];
static size_t n_composed;
static pthread_mutex_t composed_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const op_names[SM_KOP_COUNT] = {"gemm", "qgemm", "rows", "qrows", "attention"};

const char *sm_kernels_op_name(sm_kernels_op op) {
    return (unsigned)op < SM_KOP_COUNT ? op_names[op] : "?";
}

void sm_kernels_describe(const sm_kernels *k, char *buf, size_t n) {
    size_t len = 0;
    if (n) buf[0] = 0;
    for (int op = 0; op < SM_KOP_COUNT && len < n; op++) {
        const sm_kernels *f = k->from[op] ? k->from[op] : k;
        bool q = op == SM_KOP_QGEMM || op == SM_KOP_QROWS;
        static const char *const dot16[4] = {NULL, "bf16: vdpbf16ps", "f16: vdpbf16ps", "f16, bf16: vdpbf16ps"};
        unsigned d16 = (f->dot16_types >> SM_DTYPE_BF16 & 1u) | (f->dot16_types >> SM_DTYPE_F16 & 1u) << 1;
        const char *what = q ? f->quant->name : op == SM_KOP_GEMM ? dot16[d16] : NULL;
        char gw[64];
        if (op == SM_KOP_GEMM && f->row_prefetch == 2) /* the item that changed it, as --kernels takes it */
            snprintf(gw, sizeof gw, "%s%sprefetch=hw", what ? what : "", what ? "; " : ""), what = gw;
#ifdef SM_X86_KERNELS
        if (op == SM_KOP_ROWS && f->matmul_rows == sm_avx512_rows_avx2) what = "batches on 512-bit registers";
#endif
        int w = snprintf(buf + len, n - len, "%s%s %s%s%s%s", op ? ", " : "", op_names[op], f->name,
                         what ? " (" : "", what ? what : "", what ? ")" : "");
        len += w > 0 ? (size_t)w : 0;
    }
}

void sm_kernels_cpu_decode(unsigned eax, unsigned *family, unsigned *model) {
    unsigned f = eax >> 8 & 0xf, m = eax >> 4 & 0xf;
    if (f == 0xf || f == 6) m += (eax >> 16 & 0xf) << 4;
    if (f == 0xf) f += eax >> 20 & 0xff;
    *family = f, *model = m;
}

void sm_kernels_cpu(char vendor[13], unsigned *family, unsigned *model) {
    memset(vendor, 0, 13);
    *family = *model = 0;
#ifdef SM_X86_KERNELS
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
    if (__get_cpuid(1, &a, &b, &c, &d)) sm_kernels_cpu_decode(a, family, model);
#endif
}

void sm_kernels_cpu_name(char *buf, size_t n) {
    char vendor[13];
    unsigned family, model;
    sm_kernels_cpu(vendor, &family, &model);
    if (vendor[0]) snprintf(buf, n, "%s family %u model %u", vendor, family, model);
    else snprintf(buf, n, "not identified by this build");
}

const char *sm_kernels_cpu_choice(const char *vendor, unsigned family, unsigned model) {
    for (size_t i = 0; i < sizeof cpu_choices / sizeof cpu_choices[0]; i++)
        if (strcmp(cpu_choices[i].vendor, vendor) == 0 && cpu_choices[i].family == family &&
            model >= cpu_choices[i].model_lo && model <= cpu_choices[i].model_hi)
            return cpu_choices[i].spec;
    return NULL;
}

/* Whether wt is a layout made at load (sm_kernels_repack): its products, every T, are the
** packed product of the table that takes it (sm_kernels_repack_types), whatever decodes. */
static bool laid_out(sm_dtype wt) {
    return wt != sm_dtype_base(wt);
}

/* A composed table's products: each handed to the table its operation comes from. */
static void composed_matmul(const sm_kernels *k, float *restrict out, const float *restrict x,
                            const void *restrict w, sm_dtype wt, const float *restrict bias, size_t T,
                            size_t N, size_t K, size_t n0, size_t n1, float *restrict scratch) {
    bool q = sm_dtype_quantized(wt);
    const sm_kernels *p = k->from[T >= 4 || laid_out(wt) ? (q ? SM_KOP_QGEMM : SM_KOP_GEMM)
                                                         : (q ? SM_KOP_QROWS : SM_KOP_ROWS)];
    p->matmul(p, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
}

static void composed_rows(const sm_kernels *k, float *restrict out, const float *restrict x,
                          const void *restrict w, sm_dtype wt, const float *restrict bias, size_t T,
                          size_t N, size_t K, size_t n0, size_t n1, float *restrict scratch) {
    bool q = sm_dtype_quantized(wt);
    const sm_kernels *p = k->from[laid_out(wt) ? (q ? SM_KOP_QGEMM : SM_KOP_GEMM) : (q ? SM_KOP_QROWS : SM_KOP_ROWS)];
    p->matmul_rows(p, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
}

/* Once, before any table is handed out: each table's integer products and the cache size. */
static void init(void) {
    tables[n_tables++] = sm_kernels_scalar;
#ifdef SM_X86_KERNELS
    const sm_qkernel *q2 = has_avxvnni() ? &sm_qkernel_avxvnni : &sm_qkernel_avx2_maddubs;
    if (has_avx2()) {
        tables[n_tables] = sm_kernels_avx2;
        tables[n_tables++].quant = q2;
    }
    if (has_avx512()) {
        sm_kernels *t = &tables[n_tables++];
        *t = sm_kernels_avx512;
        t->quant = has_avx512vnni() ? &sm_qkernel_avx512vnni : q2;
        if (has_avx512bf16()) { /* bf16 weights prefill on vdpbf16ps */
            t->dot16_types = 1u << SM_DTYPE_BF16;
            if (t->matmul_scratch < SM_BF16_BYTES / sizeof(float)) t->matmul_scratch = SM_BF16_BYTES / sizeof(float);
        }
    }
#endif
    size_t l2 = read_l2();
    for (size_t i = 0; i < n_tables; i++) {
        tables[i].l2_bytes = l2;
        for (int op = 0; op < SM_KOP_COUNT; op++) tables[i].from[op] = &tables[i];
    }
    auto_choice.base = &tables[n_tables - 1];
    for (int op = 0; op < SM_KOP_COUNT; op++) auto_choice.from[op] = auto_choice.base;
    auto_choice.dot16[0] = auto_choice.dot16[1] = -1;
    auto_choice.prefetch = -1;
    char vendor[13];
    unsigned family, model;
    sm_kernels_cpu(vendor, &family, &model);
    const char *cpu = sm_kernels_cpu_choice(vendor, family, model);
    if (cpu) apply(cpu, cpu, &auto_choice, false, NULL);
}

size_t sm_kernels_scratch_rows(const sm_kernels *k, size_t K, size_t rows) {
    size_t qb = SM_QX_BYTES(K) > SM_QGEMM_BYTES ? SM_QX_BYTES(K) : SM_QGEMM_BYTES;
    bool r32 = k->quant->gemm_r32 != NULL; /* a composed table: any of its parts' */
    for (int op = 0; op < SM_KOP_COUNT; op++) r32 |= k->from[op] && k->from[op]->quant->gemm_r32;
    if (r32 && SM_QGEMM_R32_BYTES(K, rows) > qb) qb = SM_QGEMM_R32_BYTES(K, rows);
    if (r32) qb += SM_QMEMO_BYTES; /* the repacked product's memo leads */
    size_t q = (qb + sizeof(float) - 1) / sizeof(float);
    return q > k->matmul_scratch ? q : k->matmul_scratch;
}

size_t sm_kernels_scratch(const sm_kernels *k, size_t K) {
    return sm_kernels_scratch_rows(k, K, 0);
}

void sm_kernels_reuse_begin(float *scratch, size_t rows) {
    sm_qmemo m = {.armed = SM_QMEMO_ARMED, .rows = rows};
    memcpy(scratch, &m, sizeof m);
}

void sm_kernels_reuse_end(float *scratch) {
    memset(scratch, 0, sizeof(sm_qmemo));
}

size_t sm_kernels_share_bytes(const sm_kernels *k, size_t K, size_t rows) {
    return k->from[SM_KOP_QGEMM]->quant->xquant_r32 ? SM_QGEMM_XBLOCKS(rows) * SM_QGEMM_XBLOCK_BYTES(K) + 64 : 0;
}

bool sm_kernels_share_takes(const sm_kernels *k, sm_dtype wt, size_t T, size_t K) {
    const sm_qkernel *q = k->from[SM_KOP_QGEMM]->quant; /* where repacked products go (composed_matmul) */
    const sm_dtype dt = sm_dtype_base(wt);
    return q->xquant_r32 && sm_dtype_quantized(wt) && wt != dt && (q->gemm_types >> dt & 1u) &&
           T * ((K + SM_QGEMM_KC - 1) / SM_QGEMM_KC) > SM_QGEMM_MC; /* fewer: one block, quantized in a moment */
}

bool sm_kernels_share_open(const sm_kernels *k, void *buf, float *scratch, size_t rows, const float *x, sm_dtype wt,
                           size_t T, size_t K, int ith, int nth) {
    sm_kernels_reuse_begin(scratch, rows);
    if (!buf || !sm_kernels_share_takes(k, wt, T, K)) return false;
    const size_t t0 = T * (size_t)ith / (size_t)nth, t1 = T * (size_t)(ith + 1) / (size_t)nth;
    k->from[SM_KOP_QGEMM]->quant->xquant_r32(buf, (sm_qmemo *)(void *)scratch, x, sm_dtype_base(wt), T, K, t0, t1);
    return true;
}

size_t sm_kernels_qavailable(const sm_qkernel **out, size_t cap) {
    size_t n = 0;
    if (n < cap) out[n++] = &sm_qkernel_scalar;
#ifdef SM_X86_KERNELS
    if (n < cap && has_avx2()) out[n++] = &sm_qkernel_avx2_maddubs;
    if (n < cap && has_avxvnni()) out[n++] = &sm_qkernel_avxvnni;
    if (n < cap && has_avx512vnni()) out[n++] = &sm_qkernel_avx512vnni;
#endif
    return n;
}

sm_peak sm_kernels_peak_of(const sm_kernels *k, sm_dtype dt) {
    const sm_kernels *q = k->from[SM_KOP_QGEMM];
    const sm_kernels *g = k->from[SM_KOP_GEMM];
    if (!sm_dtype_quantized(dt)) return g->dot16_types >> dt & 1u ? SM_PEAK_BF16_512 : g->gemm_peak;
    if (dt != sm_dtype_base(dt)) return q->quant->gemm_r32 ? q->quant->gemm_peak : SM_PEAK_COUNT;
    return sm_kernels_qgemm_takes(q->quant, dt, 4) ? q->quant->gemm_peak : q->gemm_peak;
}

unsigned sm_kernels_repack_types(const sm_kernels *k) {
    const sm_kernels *g = k->from[SM_KOP_QGEMM], *r = k->from[SM_KOP_QROWS];
    /* 16-bit weights too, as 16-bit panels (those the table multiplies on vdpbf16ps: prefill's
       column pairs packed from them) */
    const sm_kernels *m = k->from[SM_KOP_GEMM];
    unsigned f = m->f32_panels ? 1u << SM_DTYPE_F32 | 1u << SM_DTYPE_F16 | 1u << SM_DTYPE_BF16 : 0;
    if (g != r || !g->quant->gemm_r32) return f;
    return f | (g->quant->gemm_types & (1u << SM_DTYPE_Q4_0 | 1u << SM_DTYPE_Q8_0 | 1u << SM_DTYPE_Q4_K |
                                        1u << SM_DTYPE_Q5_K | 1u << SM_DTYPE_Q6_K | 1u << SM_DTYPE_IQ4_NL |
                                        1u << SM_DTYPE_IQ4_XS));
}

const char *sm_kernels_int8_name(const sm_kernels *k) {
    return k->quant->name;
}

const sm_kernels *sm_kernels_reference(void) {
    pthread_once(&once, init);
    return &tables[0];
}

size_t sm_kernels_available(const sm_kernels **out, size_t cap) {
    pthread_once(&once, init);
    size_t n = 0;
    for (; n < n_tables && n < cap; n++) out[n] = &tables[n];
    return n;
}

/* Whether the len bytes at s are the string lit. */
static bool is(const char *s, size_t len, const char *lit) {
    return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

/* The table this CPU runs named n (len bytes), or NULL. */
static const sm_kernels *table_named(const char *n, size_t len) {
    for (size_t i = 0; i < n_tables; i++)
        if (is(n, len, tables[i].name)) return &tables[i];
    return NULL;
}

/* The 16-bit types whose GEMM runs on vdpbf16ps in c: its gemm table's, changed by the items. */
static unsigned dot16_of(const choice *c) {
    static const sm_dtype dts[2] = {SM_DTYPE_BF16, SM_DTYPE_F16};
    unsigned t = c->from[SM_KOP_GEMM]->dot16_types;
    for (int i = 0; i < 2; i++)
        if (c->dot16[i] >= 0) t = (t & ~(1u << dts[i])) | (unsigned)c->dot16[i] << dts[i];
    return t;
}

/* The row_prefetch of c's gemm table as the items set it (a table with no such choice keeps 0). */
static unsigned char prefetch_of(const choice *c) {
    unsigned char t = c->from[SM_KOP_GEMM]->row_prefetch;
    return t && c->prefetch > 0 ? (unsigned char)c->prefetch : t;
}

/*
** Whether c, composed, takes decoding's float products from the AVX2 table
** on a CPU with AVX-512 (a Zen 4's auto choice): its batches (matmul_rows of
** 3 or more rows) then run the same sums on 512-bit registers
** (sm_avx512_rows_avx2), each row still bit for bit the AVX2 one-row
** product's. The AVX2 table chosen alone keeps its own 256-bit tiles.
*/
static bool rows_on_512(const choice *c) {
#ifdef SM_X86_KERNELS
    return c->from[SM_KOP_ROWS] != c->base && c->from[SM_KOP_ROWS] == table_named("avx2", 4) &&
           has_avx512();
#else
    (void)c;
    return false;
#endif
}

/* The composed table of c (not just its base), made on first use. */
static sm_status compose(const choice *c, const sm_kernels **out, sm_error *err) {
    const sm_kernels *base = c->base, *g = c->from[SM_KOP_GEMM];
    const unsigned dot16 = dot16_of(c);
    const unsigned char pf = prefetch_of(c);
    char name[NAME_MAX_LEN];
    int len = snprintf(name, sizeof name, "%s", base->name);
    for (int op = 0; op < SM_KOP_COUNT; op++)
        if (c->from[op] != base)
            len += snprintf(name + len, sizeof name - (size_t)len, ",%s=%s", op_names[op], c->from[op]->name);
    static const struct { sm_dtype dt; const char *item; } items[2] = {{SM_DTYPE_BF16, "bf16"}, {SM_DTYPE_F16, "f16"}};
    for (int i = 0; i < 2; i++)
        if ((dot16 ^ g->dot16_types) >> items[i].dt & 1u)
            len += snprintf(name + len, sizeof name - (size_t)len, ",%s=%s", items[i].item,
                            dot16 >> items[i].dt & 1u ? "bf16" : "f32");
    if (pf != g->row_prefetch)
        len += snprintf(name + len, sizeof name - (size_t)len, ",prefetch=%s", pf == 2 ? "hw" : "next");
    sm_status st = SM_OK;
    pthread_mutex_lock(&composed_lock);
    size_t i = 0;
    while (i < n_composed && strcmp(composed[i].name, name) != 0) i++;
    if (i == n_composed && n_composed == MAX_COMPOSED) {
        st = sm_error_set(err, SM_ERR_NOMEM, "kernels %s: already %d compositions in this process",
                          name, MAX_COMPOSED);
    } else if (i == n_composed) {
        sm_kernels *k = &composed[i].k;
        *k = *base;
        memcpy(composed[i].name, name, sizeof name);
        k->name = composed[i].name;
        for (int op = 0; op < SM_KOP_COUNT; op++) {
            k->from[op] = c->from[op];
            if (c->from[op]->matmul_scratch > k->matmul_scratch) k->matmul_scratch = c->from[op]->matmul_scratch;
        }
        if (dot16 != g->dot16_types || pf != g->row_prefetch) { /* the gemm table's own products, with
                                                                    other types on vdpbf16ps or another
                                                                    prefetch for lone rows */
            composed[i].gemm = *g;
            composed[i].gemm.dot16_types = dot16;
            composed[i].gemm.row_prefetch = pf;
            k->from[SM_KOP_GEMM] = &composed[i].gemm;
        }
        if (rows_on_512(c)) { /* the AVX2 table's products, batches on 512-bit registers */
            composed[i].rows = *c->from[SM_KOP_ROWS];
            composed[i].rows.matmul_rows = sm_avx512_rows_avx2;
            k->from[SM_KOP_ROWS] = &composed[i].rows;
        }
        k->dot16_types = dot16;
        k->matmul = composed_matmul;
        k->matmul_rows = composed_rows;
        k->attention = c->from[SM_KOP_ATTENTION]->attention;
        k->attention_rows = c->from[SM_KOP_ATTENTION]->attention_rows;
        k->quant = c->from[SM_KOP_QGEMM]->quant;
        n_composed++;
    }
    if (!st) *out = &composed[i].k;
    pthread_mutex_unlock(&composed_lock);
    return st;
}

/*
** Applies the items (comma-separated; a table name, OP=TABLE, or TYPE=ARITH for the 16-bit
** weights' GEMM: bf16= or f16=, then bf16 or f32) of spec to c. Items naming a table this CPU
** lacks are errors when strict, else skipped (the CPU table).
*/
static sm_status apply(const char *spec, const char *items, choice *c, bool strict, sm_error *err) {
    for (const char *p = items;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        const char *tn = eq ? eq + 1 : p;
        size_t tlen = len - (size_t)(tn - p);
        int t16 = !eq ? -1 : is(p, (size_t)(eq - p), "bf16") ? 0 : is(p, (size_t)(eq - p), "f16") ? 1 : -1;
        if (eq && is(p, (size_t)(eq - p), "prefetch")) {
            if (!is(tn, tlen, "next") && !is(tn, tlen, "hw"))
                return sm_error_set(err, SM_ERR_INPUT, "kernels '%s': %.*s must be next (a lone row asks for "
                                    "the next f32 panels' lines) or hw (the hardware prefetchers)", spec,
                                    (int)len, p);
            c->prefetch = is(tn, tlen, "next") ? 1 : 2;
        } else if (t16 >= 0) {
            if (!is(tn, tlen, "bf16") && !is(tn, tlen, "f32"))
                return sm_error_set(err, SM_ERR_INPUT, "kernels '%s': %.*s must be bf16 (vdpbf16ps, activations "
                                    "rounded to bf16) or f32 (exact)", spec, (int)len, p);
            c->dot16[t16] = is(tn, tlen, "bf16");
        } else {
            const sm_kernels *t = table_named(tn, tlen);
            int op = -1;
            if (eq)
                for (int o = 0; o < SM_KOP_COUNT && op < 0; o++)
                    if (is(p, (size_t)(eq - p), op_names[o])) op = o;
            if (eq && op < 0)
                return sm_error_set(err, SM_ERR_INPUT, "kernels '%s': '%.*s' is not an operation (gemm, qgemm, "
                                    "rows, qrows, attention), a 16-bit type (bf16, f16) or prefetch", spec,
                                    (int)(eq - p), p);
            if (!t && strict) {
                char have[64] = "";
                for (size_t i = 0; i < n_tables; i++)
                    snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", i ? ", " : "", tables[i].name);
                bool known = is(tn, tlen, "scalar") || is(tn, tlen, "avx2") || is(tn, tlen, "avx512");
                return sm_error_set(err, SM_ERR_INPUT, "kernels '%s': '%.*s' is %s (this CPU runs %s)", spec,
                                    (int)tlen, tn, known ? "not supported by this CPU" : "not a kernel table", have);
            }
            if (t && eq) {
                c->from[op] = t;
            } else if (t) {
                c->base = t;
                for (int o = 0; o < SM_KOP_COUNT; o++) c->from[o] = t;
                c->dot16[0] = c->dot16[1] = -1;
                c->prefetch = -1;
            }
        }
        if (!end) return SM_OK;
        p = end + 1;
    }
}

sm_status sm_kernels_choose(const char *spec, const sm_kernels **out, sm_error *err) {
    pthread_once(&once, init);
    choice c = auto_choice;
    if (spec && strcmp(spec, "auto") != 0) {
        if (!*spec) return sm_error_set(err, SM_ERR_INPUT, "kernels: an empty name");
        /* "auto,rows=scalar" is "rows=scalar": the items apply to auto's choice */
        sm_status st = apply(spec, strncmp(spec, "auto,", 5) == 0 ? spec + 5 : spec, &c, true, err);
        if (st) return st;
    }
    const sm_kernels *g = c.from[SM_KOP_GEMM];
    unsigned dot16 = dot16_of(&c);
    if (dot16 & ~g->dot16_types && !g->dot16_types) /* the table has them where the CPU does */
        return sm_error_set(err, SM_ERR_INPUT, "kernels '%s': %s=bf16 needs vdpbf16ps, %s%s%s", spec,
                            dot16 >> SM_DTYPE_F16 & 1u ? "f16" : "bf16",
                            sm_kernels_peak_runs(SM_PEAK_BF16_512) ? "which the gemm table " : "",
                            sm_kernels_peak_runs(SM_PEAK_BF16_512) ? g->name : "AVX512-BF16",
                            sm_kernels_peak_runs(SM_PEAK_BF16_512) ? " lacks (avx512 has it)"
                                                                     : ", which this CPU lacks");
    if (c.prefetch == 1 && !g->row_prefetch)
        return sm_error_set(err, SM_ERR_INPUT, "kernels '%s': prefetch=next needs a gemm table whose lone rows "
                            "on f32 panels can ask for the next ones (avx512); %s leaves them to the hardware",
                            spec, g->name);
    int op = 0;
    while (op < SM_KOP_COUNT && c.from[op] == c.base) op++;
    if (op == SM_KOP_COUNT && dot16 == g->dot16_types && prefetch_of(&c) == g->row_prefetch) {
        *out = c.base;
        return SM_OK;
    }
    return compose(&c, out, err);
}

const sm_kernels *sm_kernels_select(const char *name) {
    const sm_kernels *k = NULL;
    return sm_kernels_choose(name, &k, NULL) ? NULL : k;
}
