/*
** pretok_named.c -- the pre-tokenizers GGUF files name in
** tokenizer.ggml.pre (llama.cpp's names), built from pretok.c's steps; and
** the way back, for an export: which name a tokenizer.json's normalizers
** and steps are, told by the words they make of a probe text (as
** llama.cpp's converter tells them by a hash of tokens).
*/
#include "tokenizer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPT2_RE NULL /* GPT-2's pattern: the hand-written step */
#define LLAMA3_RE                                                                               \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

#define QWEN2_RE                                                                                \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/*
** The pre-tokenizers GGUF files name (llama.cpp's tokenizer.ggml.pre
** values of 2026-08, every one it knows but those refused below), each as
** its list of isolating regex splits, applied in order to the pieces the
** previous one left. Patterns as the models' tokenizer.json files give
** them (llama.cpp rewrites some for std::regex); ignore_merges as
** llama.cpp sets it.
*/
static const struct {
    const char *names; /* '|'-separated; the first is what an export writes */
    bool ignore_merges;
    int n;
    const char *re[6];
} named[] = {
    {"gpt-2|phi-2|mpt|olmo|jais|roberta-bpe|gigachat|jina-es|jina-de|"
     "jina-v2-es|jina-v2-de|jina-v1-en|jina-v2-code|a.x-4.0|mellum|"
     "modern-bert|exaone4|trillion|granite-docling", false, 1,
     {GPT2_RE}},
    {"default", false, 4,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+",
      GPT2_RE,
      "\\p{N}+",
      "[0-9][0-9][0-9]"}},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|"
     "jina-v5-nano", true, 1,
     {LLAMA3_RE}},
    {"dbrx|smaug-bpe|glm4|chatglm-bpe", false, 1,
     {LLAMA3_RE}},
    {"jais-2", false, 1,
     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{"
      "L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256"
      "}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|"
      "\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"}},
    {"qwen2|deepseek-r1-qwen|kormo|f2llmv2|megrez|stablelm2|hunyuan|"
     "solar-open|grok-2", false, 1,
     {QWEN2_RE}},
    {"qwen35", false, 1,
     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p"
      "{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|"
      "\\s+"}},
    {"smollm|starcoder|refact|command-r|codeshell|exaone|minerva-7b|mellum2", false, 2,
     {"\\p{N}",
      GPT2_RE}},
    {"falcon", false, 3,
     {"[\\p{P}\\$\\+<=>\\^~\\|`]+",
      GPT2_RE,
      "[0-9][0-9][0-9]"}},
    {"deepseek-llm", false, 6,
     {"[\\r\\n]",
      "\\s?[A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}"
      "\\x{1c4}-\\x{293}\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}"
      "\\x{37f}\\x{386}\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}\\x{3a3}-\\x{3f5}\\x{3f7}-"
      "\\x{481}\\x{48a}-\\x{52f}\\x{531}-\\x{556}\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}"
      "\\x{13f8}-\\x{13fd}\\x{1c90}-\\x{1cba}\\x{1cbd}-\\x{1cbf}\\x{1d00}-\\x{1d2b}"
      "\\x{1d6b}-\\x{1d77}\\x{1d79}-\\x{1d9a}\\x{1e00}-\\x{1f15}\\x{1f18}-\\x{1f1d}"
      "\\x{1f20}-\\x{1f45}\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}\\x{1f5d}"
      "\\x{1f5f}-\\x{1f7d}\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-"
      "\\x{1fc4}\\x{1fc6}-\\x{1fcc}\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}\\x{1fe0}-"
      "\\x{1fec}\\x{1ff2}-\\x{1ff4}\\x{1ff6}-\\x{1ffc}\\x{2102}\\x{2107}\\x{210a}-\\x{2113}"
      "\\x{2115}\\x{2119}-\\x{211d}\\x{2124}\\x{2126}\\x{2128}\\x{212a}-\\x{212d}\\x{212f}-"
      "\\x{2134}\\x{2139}\\x{213c}-\\x{213f}\\x{2145}-\\x{2149}\\x{214e}\\x{2183}\\x{2184}"
      "\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}\\x{2ceb}-\\x{2cee}\\x{2cf2}\\x{2cf3}\\x{a640}"
      "-\\x{a66d}\\x{a680}-\\x{a69b}\\x{a722}-\\x{a76f}\\x{a771}-\\x{a787}\\x{a78b}-"
      "\\x{a78e}\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}\\x{fb13}-\\x{fb17}\\x{ff21}-"
      "\\x{ff3a}\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}\\x{104b0}-\\x{104d3}\\x{104d8}-"
      "\\x{104fb}\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}\\x{118a0}-\\x{118df}\\x{1e900}-"
      "\\x{1e943}]+",
      "\\s?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3000}-"
      "\\x{3002}]+",
      "\\s+$",
      "[\\x{4e00}-\\x{9fa5}\\x{800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+",
      "\\p{N}+"}},
    {"deepseek-coder", false, 5,
     {"[\\r\\n]",
      "\\s?\\p{L}+",
      "\\s?\\p{P}+",
      "[\\x{4e00}-\\x{9fa5}\\x{800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+",
      "\\p{N}"}},
    {"deepseek-v3|hunyuan-dense|joyai-llm", false, 3,
     {"\\p{N}{1,3}",
      "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?["
      "\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"youtu", true, 2,
     {"[\\x{ac00}-\\x{d7a3}\\x{3131}-\\x{318e}]+|[\\x{ff01}\\x{2026}\\x{201c}\\x{201d}"
      "\\x{2018}\\x{2019}\\x{2014}\\x{ff1a}\\x{ff1b}\\x{ff0c}\\x{3001}-\\x{303f}\\x{fe30}-"
      "\\x{fe4f}]+|[\\x{3105}-\\x{312f}]+|[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-"
      "\\x{30ff}]+",
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p"
      "{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}"
      "]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|"
      "'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"tekken", true, 1,
     {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p"
      "{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{"
      "Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"gpt-4o|llama4|kanana2|talkie|minimax-m2", false, 1,
     {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p"
      "{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}"
      "]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|"
      "'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n"
      "/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"tiny_aya|cohere2moe", false, 2,
     {"\\d{1,3}(?=(?:\\d{3})*\\b)",
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p"
      "{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}"
      "]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|"
      "'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n"
      "/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"granite-embed-multi-97m", true, 1,
     {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'"
      "[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=["
      "\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV]["
      "eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]"
      "+|\\s+(?!\\S)|\\s+"}},
    {"poro-chat|bloom|gpt3-finnish", false, 1,
     {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{ff0c}\\x{3001}\\x{964}\\x{6d4}\\x{60c})]+"}},
    {"viking", false, 2,
     {" ?[^(\\s|"
     ".,!?\\x{2026}\\x{3002}\\x{ff0c}\\x{3001}\\x{964}\\x{6d4}\\x{60c})]+",
      "\\p{N}"}},
    {"chameleon", false, 6,
     {"<sentinel:[0-9]+>",
      "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
      "([\\t\\n]|    |  )",
      "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]",
      GPT2_RE}},
    {"superbpe", false, 2,
     {"\\p{N}+",
      "(?=(\\d{3})+(?!\\d))"}},
    {"bailingmoe|bailingmoe2|llada-moe", false, 1,
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^"
      "\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"seed-coder", false, 1,
     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{"
      "L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"laguna", false, 2,
     {"[^\\n]+|[\\n]+",
      QWEN2_RE}},
    {"exaone-moe", false, 1,
     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:"
      "\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r"
      "\\n]|\\s+(?!\\S)|\\s+"}},
    {"minicpm5", true, 2,
     {"\\p{N}{1,3}",
      "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{"
      "L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
};

/* Names llama.cpp knows that smallmind refuses, and why. */
static const struct {
    const char *names, *why;
} refused[] = {
    {"gemma4|granite-embed-multi-311m|sarvam-moe|whitespace",
     "is BPE over raw UTF-8 (not byte-level)"},
    {"kimi-k2|afmoe", "splits with code of llama.cpp's own rather than a regex"},
};

static bool name_in(const char *names, const char *s, size_t n) {
    for (const char *p = names;;) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && memcmp(p, s, n) == 0) return true;
        if (!e) return false;
        p = e + 1;
    }
}

sm_status sm_tok_pre_named(sm_tok_pre *p, const char *name, size_t n, bool *ignore_merges,
                           const char *where, sm_error *err) {
    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++) {
        if (!name_in(named[k].names, name, n)) continue;
        *ignore_merges = named[k].ignore_merges;
        sm_status st = SM_OK;
        for (int i = 0; i < named[k].n && !st; i++) {
            const char *re = named[k].re[i];
            st = re ? sm_tok_pre_step(p, SM_STEP_REGEX, SM_SPLIT_ISOLATED, false, re, strlen(re), false,
                                      where, err)
                    : sm_tok_pre_step(p, SM_STEP_GPT2, SM_SPLIT_ISOLATED, false, NULL, 0, false, where, err);
        }
        return st;
    }
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++)
        if (name_in(refused[k].names, name, n))
            return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre %.*s %s: not supported",
                                where, (int)n, name, refused[k].why);
    return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre %.*s is not supported", where,
                        (int)(n < 40 ? n : 40), name);
}

/*
** A text that tells the named pre-tokenizers apart: runs of spaces, tabs
** and newlines (also \r\n), digits from one to nine, contractions in both
** cases, camel case, punctuation and symbols alone, in runs and mixed,
** accents, CJK, Cyrillic, Khmer marks, fullwidth forms, emoji with joiners
** (llama.cpp's converter tells them apart the same way: by the tokens of a
** text). No character NFC changes (see sm_tok_pre_name's nfc).
*/
static const char probe_text[] =
    "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n\r\n\r\n x  y   z\n"
    "7 42 365 2024 31415 926535 8979323 84626433 832795028 3.14 1..5 1...9 "
    "I'm, you're, they've, we'll, she'd, it's; I'M YOU'RE THEY'VE WE'LL SHE'D IT'S 'tis o'clock "
    "HTTPServer getHTTPResponseCode camelCase PascalCase XMLHttpRequest iPhone McDonald "
    "a,b;c:d.e!f?g a,,b ;;: .,;:!? (a)[b]{c} \"x\",'y' #1 @me 100% &amp; *ptr -> => :: // /* */ # "
    "a+b=c <tag>x</tag> $5 ^_^ ~/|\\ `code` ``` \"\"\"quoted\"\"\" ...!!!??? ------======= ''''' "
    "caf\xc3\xa9 na\xc3\xafve \xc3\x85ngstr\xc3\xb6m "
    "\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c" "1314151\xe5\xa4\xa9\xef\xbd\x9e "
    "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xe3\x81\xb2\xe3\x82\x89\xe3\x81\x8c\xe3\x81\xaa\xe3\x80\x82 "
    "\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe \xd0\xbd\xd0\xb0 \xd0\x91\xd1\x8a\xd0\xbb\xd0\xb3\xd0\xb0\xd1\x80"
    "\xd1\x81\xd0\xba\xd0\xb8 \xe1\x9e\x80\xe1\x9e\xb6\xe1\x9e\x93\xe1\x9f\x8b\xe1\x9e\x8f\xe1\x9f\x82 "
    "\xef\xbc\xa1\xef\xbc\xa2\xef\xbc\x91\xef\xbc\x92\xef\xbc\x81 \xe2\x80\x9cquotes\xe2\x80\x9d\xe3\x80\x82 "
    "\xf0\x9f\x9a\x80 \xf0\x9f\x98\xb6\xe2\x80\x8d\xf0\x9f\x8c\xab\xef\xb8\x8f \xe2\x9c\x85 "
    "\xf0\x9f\xa6\x99\xf0\x9f\xa6\x99 end.  \n";

typedef struct {
    char buf[2 * sizeof probe_text + 512]; /* each word, then a 0xFF (never in UTF-8) */
    size_t n;
    bool over;
} word_log;

static void log_word(void *ctx, const unsigned char *w, size_t n) {
    word_log *l = ctx;
    if (l->over || l->n + n + 1 > sizeof l->buf) {
        l->over = true;
        return;
    }
    memcpy(l->buf + l->n, w, n);
    l->n += n;
    l->buf[l->n++] = (char)0xFF;
}

/* How p splits the probe text into words, logged (false: out of memory). */
static bool probe(sm_tok_pre *p, word_log *l) {
    l->n = 0, l->over = false;
    sm_tok_pre_run(p, (const unsigned char *)probe_text, sizeof probe_text - 1, true, log_word, l);
    return !l->over;
}

bool sm_tok_pre_name(sm_tok_pre *p, bool ignore_merges, bool *nfc, char name[SM_TOK_PRE_NAME]) {
    *nfc = false;
    const char *str, *to;
    size_t ns, nt;
    for (int i = 0, op; (op = sm_tok_pre_op(p, i, &str, &ns, &to, &nt)); i++) {
        if (op != SM_NORM_NFC) return false; /* llama.cpp's pre-tokenizers normalize nothing (but see nfc) */
        *nfc = true;
    }
    word_log *mine = malloc(sizeof *mine), *theirs = malloc(sizeof *theirs);
    bool found = false;
    if (mine && theirs && probe(p, mine)) {
        for (size_t k = 0; k < sizeof named / sizeof named[0] && !found; k++) {
            if (named[k].ignore_merges != ignore_merges) continue;
            size_t l = strcspn(named[k].names, "|"); /* the first of its names: what llama.cpp writes */
            sm_tok_pre *q;
            sm_error e;
            bool im;
            if (sm_tok_pre_new(&q, &e)) break;
            found = !sm_tok_pre_named(q, named[k].names, l, &im, "probe", &e) && probe(q, theirs) &&
                    theirs->n == mine->n && !memcmp(theirs->buf, mine->buf, mine->n);
            sm_tok_pre_free(q);
            if (found) snprintf(name, SM_TOK_PRE_NAME, "%.*s", (int)l, named[k].names);
        }
    }
    free(mine);
    free(theirs);
    return found;
}

bool sm_tok_pre_is_spm(sm_tok_pre *p, bool *prepend) {
    *prepend = false;
    const char *str, *to;
    size_t ns, nt;
    for (int i = 0, op; (op = sm_tok_pre_op(p, i, &str, &ns, &to, &nt)); i++) {
        bool mark = ns == 1 && str[0] == ' ' && nt == 3 && !memcmp(to, "\xe2\x96\x81", 3);
        bool pre = (op == SM_NORM_PREPEND || op == SM_NORM_PREFIX_SPACE) && ns == 3 &&
                   !memcmp(str, "\xe2\x96\x81", 3);
        if (op == SM_NORM_REPLACE && mark) continue;
        if (pre) {
            *prepend = true;
            continue;
        }
        return false;
    }
    if (!sm_tok_pre_has_steps(p)) return true;
    word_log *l = malloc(sizeof *l); /* steps that split nothing (Gemma's split at spaces, which are gone) */
    bool one = l && probe(p, l) && memchr(l->buf, 0xFF, l->n) == l->buf + l->n - 1;
    free(l);
    return one;
}
