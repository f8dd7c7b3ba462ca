/*
** quant_tool.c -- test tool: smallmind's quantizer and dequantizer on raw
** data, for comparison with the NumPy ones (scripts/sm_quant.py).
**
**   quant_tool dequant TYPE FILE OFFSET N   N weights of TYPE at byte OFFSET
**                                           of FILE -> float32 on stdout
**   quant_tool quant TYPE                   float32 on stdin -> TYPE blocks
**                                           on stdout
** TYPE: q8_0, q4_0. Exit 1 on a bad argument or input.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_config.h"
#include "sm_quant.h"

static int fail(const char *msg) {
    fprintf(stderr, "quant_tool: %s\n", msg);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) return fail("usage: quant_tool dequant TYPE FILE OFFSET N | quant TYPE");
    sm_dtype dt = sm_dtype_parse(argv[2]);
    if (!sm_dtype_quantized(dt)) return fail("TYPE must be a quantized type");
    size_t blk = sm_dtype_block(dt), bb = sm_dtype_row_bytes(dt, blk);
    if (strcmp(argv[1], "dequant") == 0 && argc == 6) {
        size_t off = strtoull(argv[4], NULL, 10), n = strtoull(argv[5], NULL, 10);
        if (n % blk) return fail("N must be whole blocks");
        FILE *f = fopen(argv[3], "rb");
        unsigned char *q = malloc(n / blk * bb + 1);
        float *out = malloc(n * sizeof *out + 1);
        if (!f || !q || !out || fseek(f, (long)off, SEEK_SET) != 0 ||
            fread(q, 1, n / blk * bb, f) != n / blk * bb)
            return fail("cannot read the blocks");
        fclose(f);
        sm_quant_dequant(out, q, dt, n);
        fwrite(out, sizeof *out, n, stdout);
        free(q);
        free(out);
        return 0;
    }
    if (strcmp(argv[1], "quant") == 0 && argc == 3) {
        size_t cap = 1 << 20, n = 0, r;
        float *x = malloc(cap * sizeof *x);
        while (x && (r = fread(x + n, sizeof *x, cap - n, stdin)) > 0)
            if ((n += r) == cap) x = realloc(x, (cap *= 2) * sizeof *x);
        if (!x || n % blk) return fail("input must be whole blocks of float32");
        unsigned char *q = malloc(n / blk * bb + 1);
        if (!q || sm_quant_quantize(q, x, dt, n) != n / blk) return fail("cannot quantize");
        fwrite(q, 1, n / blk * bb, stdout);
        free(q);
        free(x);
        return 0;
    }
    return fail("usage: quant_tool dequant TYPE FILE OFFSET N | quant TYPE");
}
