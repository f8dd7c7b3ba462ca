#!/usr/bin/env bash
# The library face as a user builds against it: the installed smallmind.h,
# libsmallmind and smallmind.pc (make install PREFIX=...), a program that
# uses only smallmind.h (docs/examples/generate.c) compiled through
# pkg-config, and its text against the CLI's: the same greedy continuation,
# and a batch whose every record is what generate gives it alone.
#   SM_BIN=build/smallmind SM_PREFIX=build/prefix SM_CC=cc SM_CFLAGS=... tests/test_lib.sh
set -u
BIN=${SM_BIN:-build/smallmind}
PREFIX=${SM_PREFIX:-build/prefix}
CC=${SM_CC:-cc}
M=${SM_MODEL:-models/default}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0 skip=0
ok()  { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }

for f in include/smallmind.h lib/libsmallmind.a lib/libsmallmind.so.0 lib/pkgconfig/smallmind.pc; do
    if [ -e "$PREFIX/$f" ]; then ok "make install: $f"; else bad "make install: $f" "missing under $PREFIX"; fi
done
# only the face's names leave the shared library
leaked=$(nm -D --defined-only "$PREFIX/lib/libsmallmind.so.0" 2>/dev/null | awk '$2 ~ /^[TDB]$/ {print $3}' |
         grep -v '^smallmind_' | grep -v '^_' | head -5)
n_api=$(nm -D --defined-only "$PREFIX/lib/libsmallmind.so.0" 2>/dev/null | grep -c ' T smallmind_')
if [ -z "$leaked" ] && [ "$n_api" -ge 15 ]; then ok "libsmallmind.so exports the $n_api smallmind_ functions and nothing else"
else bad "exported names" "$n_api smallmind_ functions; also: $leaked"; fi

export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
flags=$(pkg-config --cflags --libs smallmind 2>"$T/pc.err")
if [ -n "$flags" ]; then ok "pkg-config --cflags --libs smallmind: $flags"
else bad "pkg-config" "$(cat "$T/pc.err")"; fi
# strict C99 with every warning: the header is plain C for any user
if $CC ${SM_CFLAGS:-} -std=c99 -pedantic -Wall -Wextra -Werror docs/examples/generate.c $flags \
       -o "$T/generate" 2>"$T/cc.err"; then
    ok "docs/examples/generate.c compiles against the installed library (-std=c99 -pedantic -Werror)"
else bad "example compiles" "$(head -c 600 "$T/cc.err")"; fi
export LD_LIBRARY_PATH="$PREFIX/lib"

P1="Once upon a time"
if [ -x "$T/generate" ]; then
    "$T/generate" "$M" 40 "$P1" >"$T/lib.out" 2>"$T/lib.err"; r1=$?
    "$BIN" generate -m "$M" -p "$P1" -n 40 --temp 0 -q >"$T/cli.out" 2>"$T/cli.err"; r2=$?
    if [ $r1$r2 = 00 ] && [ -s "$T/cli.out" ] && cmp -s "$T/lib.out" "$T/cli.out"; then
        ok "smallmind_generate streams the CLI's greedy text ($(wc -c <"$T/cli.out") bytes)"
    else bad "greedy text" "rc=$r1$r2; lib: $(head -c 200 "$T/lib.out") $(tail -2 "$T/lib.err"); cli: $(head -c 200 "$T/cli.out")"; fi
    # a batch of 6 (4 decoded together): each line is generate's text for that prompt alone
    prompts=("And God said" "The king" "$P1" "Hello" "It was" "The little dog ran")
    "$T/generate" "$M" 24 "${prompts[@]}" >"$T/batch.out" 2>"$T/batch.err"; r1=$?
    : >"$T/want"
    for i in "${!prompts[@]}"; do
        # generate's text with its newlines as \n (the example's line format); no trailing newline added
        t=$("$BIN" generate -m "$M" -p "${prompts[$i]}" -n 24 --temp 0 -q 2>/dev/null; printf x)
        t=${t%x}
        printf '%s\t%s\n' "$i" "${t//$'\n'/\\n}" >>"$T/want"
    done
    if [ $r1 = 0 ] && [ "$(wc -l <"$T/batch.out")" = 6 ] && cmp -s "$T/batch.out" "$T/want"; then
        ok "smallmind_run_batch: 6 prompts, 4 at once, each = generate's text alone"
    else bad "batch" "rc=$r1 $(tail -1 "$T/batch.err"); $(diff "$T/batch.out" "$T/want" | head -6)"; fi
    # logit_bias through the face: ids banned (-100) as --logit-bias bans them; a token beyond the
    # vocabulary is a status naming logit_bias
    cat >"$T/bias.c" <<'CEOF'
#include <smallmind.h>
#include <stdio.h>
#include <stdlib.h>
static int out(void *u, const char *p, size_t n) { (void)u; fwrite(p, 1, n, stdout); return 0; }
int main(int argc, char **argv) { /* MODEL N PROMPT ID... : each ID at -100, greedy */
    smallmind_model *m = NULL;
    smallmind_session *s = NULL;
    smallmind_error err;
    smallmind_logit_bias b[16];
    if (argc < 4 || smallmind_model_open(&m, argv[1], NULL, &err) || smallmind_session_new(&s, m, NULL, &err))
        return fprintf(stderr, "%s\n", argc < 4 ? "usage" : err.message), 1;
    smallmind_request r = smallmind_request_default();
    r.prompt = argv[3], r.max_tokens = (size_t)atol(argv[2]), r.on_piece = out;
    r.sampling.temperature = 0;
    for (int i = 4; i < argc && i < 20; i++) b[i - 4] = (smallmind_logit_bias){atoi(argv[i]), -100.0f};
    r.sampling.logit_bias = b, r.sampling.n_logit_bias = argc > 4 ? (size_t)(argc - 4) : 0;
    int rc = smallmind_generate(s, &r, NULL, &err) != SMALLMIND_OK;
    if (rc) fprintf(stderr, "%s\n", err.message);
    smallmind_session_free(s), smallmind_model_free(m);
    return rc;
}
CEOF
    if $CC ${SM_CFLAGS:-} -std=c99 -Wall -Wextra -Werror "$T/bias.c" $flags -o "$T/bias" 2>"$T/cc2.err"; then
        "$T/bias" "$M" 30 "$P1" 32 101 116 >"$T/lb.out" 2>"$T/lb.err"; r1=$?
        "$BIN" generate -m "$M" -p "$P1" -n 30 --temp 0 -q -l 32-100 -l 101-100 -l 116-100 >"$T/lbc.out" 2>&1; r2=$?
        if [ $r1$r2 = 00 ] && [ -s "$T/lb.out" ] && cmp -s "$T/lb.out" "$T/lbc.out" && ! grep -q '[ et]' "$T/lb.out"; then
            ok "smallmind_generate with logit_bias = generate --logit-bias ($(head -c 40 "$T/lb.out" | tr '\n' ' '))"
        else bad "logit_bias" "rc=$r1$r2 lib: $(head -c 100 "$T/lb.out") $(cat "$T/lb.err"); cli: $(head -c 100 "$T/lbc.out")"; fi
        "$T/bias" "$M" 5 "$P1" 32 4096 >/dev/null 2>"$T/e"; r=$?
        if [ $r = 1 ] && grep -q "logit_bias: token 4096 is not in the vocabulary" "$T/e"; then
            ok "smallmind_generate with a logit_bias token beyond the vocabulary: a status naming it"
        else bad "bad logit_bias" "rc=$r $(cat "$T/e")"; fi
    else bad "logit_bias program compiles" "$(head -c 600 "$T/cc2.err")"; fi
    # a bad model path: a status and one message, no crash
    "$T/generate" "$T/nope" 5 x >/dev/null 2>"$T/e"; r=$?
    if [ $r = 1 ] && grep -q "cannot open '$T/nope'" "$T/e" && [ "$(wc -l <"$T/e")" = 1 ]; then
        ok "smallmind_model_open on a missing path: a status and one line"
    else bad "missing model" "rc=$r $(cat "$T/e")"; fi
fi
echo "lib: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
