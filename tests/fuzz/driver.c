/*
** Runs a fuzz target over files without libFuzzer: the seed corpus and the
** crashes fuzzing found, kept as regression tests (make test runs them, so
** under make asan they run with the sanitizers).
**   fuzz_X FILE...
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    int n = 0;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            fprintf(stderr, "fuzz driver: cannot open %s\n", argv[i]);
            return 1;
        }
        size_t cap = 1 << 16, len = 0;
        uint8_t *buf = malloc(cap);
        size_t got;
        while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
            len += got;
            if (len == cap) {
                uint8_t *nb = realloc(buf, cap *= 2);
                if (!nb) free(buf);
                buf = nb;
            }
        }
        fclose(f);
        if (!buf) return 1;
        LLVMFuzzerTestOneInput(buf, len);
        free(buf);
        n++;
    }
    printf("%d inputs ran clean\n", n);
    return 0;
}
