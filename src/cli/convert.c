/*
** convert.c -- `smallmind convert SRC OUT`: a llama2.c checkpoint, a
** Hugging Face directory or a smallmind directory (to change the type of its
** weights, e.g. quantize) into a smallmind model directory (sm_convert does
** the work; a signal stops it between tensors and leaves nothing behind).
*/
#include "cli.h"

#include <stdio.h>

#include "sm_config.h"
#include "sm_convert.h"

int cli_convert(const cli_opts *o) {
    if (o->n_args != 2)
        return cli_usage_error(o, "convert takes SRC and OUT (got %zu arguments)", o->n_args);
    if (!*o->args[0] || !*o->args[1])
        return cli_usage_error(o, "convert: %s is an empty path", *o->args[0] ? "OUT" : "SRC");
    sm_convert_opts co = {.tokenizer = o->tokenizer, .dtype = o->dtype, .mix_m = o->mix_m,
                          .keep = !o->dtype_given, .threads = (int)o->threads,
                          .cancel = (const volatile int *)&cli_interrupted};
    sm_convert_info info;
    sm_error err = {{0}};
    double t0 = sm_time_now();
    cli_exit_now = 0; /* sm_convert polls the flag and removes its temporary directory */
    char what[4200];
    snprintf(what, sizeof what, "a source file of '%s'", o->args[0]);
    cli_set_mapped(what);
    sm_status st = sm_convert(o->args[0], o->args[1], &co, &info, &err);
    if (st == SM_ERR_CANCELLED) return cli_interrupt_code();
    if (st) return cli_data_error(err.msg);
    if (info.n_kept)
        fprintf(stderr,
                "smallmind: note: %zu matri%s kept in the source type (rows not whole "
                "32-weight blocks), e.g. %s\n",
                info.n_kept, info.n_kept == 1 ? "x" : "ces", info.kept);
    if (info.n_q8)
        fprintf(stderr,
                "smallmind: note: %zu matri%s written in a 32-weight type as llama-quantize does (rows not "
                "whole 256-weight blocks of the k types: q4_k as q5_0, q5_k as q5_1, q6_k as q8_0), e.g. %s\n",
                info.n_q8, info.n_q8 == 1 ? "x" : "ces", info.q8);
    if (info.nfc_lost)
        fprintf(stderr, "smallmind: note: %s's tokenizer normalizes text to NFC, which a GGUF vocabulary "
                "cannot say (llama.cpp's pre-tokenizers do not): the file tokenizes texts NFC changes "
                "differently\n", o->args[0]);
    if (!o->quiet)
        fprintf(stderr,
                "smallmind: converted %s %s -> %s: %zu tensors, %zu parameters, %zu bytes (%.1f s)\n",
                info.source, o->args[0], o->args[1], info.n_tensors, info.params, info.bytes,
                sm_time_now() - t0);
    return cli_interrupted ? cli_interrupt_code() : 0;
}
