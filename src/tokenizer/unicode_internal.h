/*
** unicode_internal.h -- the Unicode classes GPT-2's pre-tokenizer uses:
** letters (\p{L}), numbers (\p{N}) and white space (\s, the White_Space
** property). Tables generated from the Unicode Character Database by
** scripts/gen_unicode.py.
*/
#ifndef SM_UNICODE_INTERNAL_H
#define SM_UNICODE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t lo, hi;
} sm_urange;

extern const sm_urange sm_uni_letter[], sm_uni_number[], sm_uni_space[];
extern const size_t sm_uni_letter_len, sm_uni_number_len, sm_uni_space_len;

#endif
