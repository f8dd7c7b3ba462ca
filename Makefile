# smallmind -- build, test and run.
#
#   make            build build/smallmind (installs libcjson-dev, libpcre2-dev, libutf8proc-dev, libedit-dev
#                   and libmicrohttpd-dev via apt when run as root)
#   make run        build, then generate from the default model
#   make test       unit tests, NumPy reference checks and CLI tests (installs the tools the
#                   tests use via apt when run as root; otherwise names them and those checks skip)
#   make asan       the test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make warnings   gcc and clang builds with -Werror
#   make bench      speed figures for docs/performance.md
#   make model      retrain models/default from scratch (about 40 minutes on 2 cores)
#   make lib        build/libsmallmind.a and build/libsmallmind.so (include/smallmind.h)
#   make install    bin/smallmind, the man page, the default model, the library, its header
#                   and smallmind.pc under $(DESTDIR)$(PREFIX) (PREFIX=/usr/local);
#                   make uninstall removes them
#   make fuzz       libFuzzer targets (clang), each for FUZZ_SECONDS
#
# Variables: CC, BUILD (output folder), PYTHON (an interpreter with NumPy, if any),
# ARCH (default: uname -m; ARCH=generic builds the portable scalar kernels only).

CC      ?= cc
BUILD   ?= build
PREFIX  ?= /usr/local
DESTDIR ?=
PYTHON  ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
ARCH    := $(shell uname -m)

# Builds use every core (a -jN of your own wins; sub-makes share the top one's jobs); not with
# clean, which must not race a build.
ifeq ($(MAKELEVEL)$(filter clean uninstall,$(MAKECMDGOALS)),0)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif

# Libraries found with pkg-config (their Debian packages in DEBS, installed as root by make).
PKGS    := libcjson libpcre2-8 libutf8proc libedit libmicrohttpd
DEBS    := libcjson-dev libpcre2-dev libutf8proc-dev libedit-dev libmicrohttpd-dev pkg-config
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith \
           -Wformat=2 -Wvla
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
# Position-independent, internal names hidden: the same objects make the binary, libsmallmind.a and
# libsmallmind.so (which exports only the smallmind_* names of include/smallmind.h).
# -ffp-contract=off: a * b + c is two roundings under every compiler (gcc's -std=c11 already says so;
# clang would fuse it where -mfma allows), so two writings of one step give the same bits.
ALL_CFLAGS = -std=c11 -D_DEFAULT_SOURCE -ffp-contract=off $(ARCH_DEFS) $(WARN) $(CFLAGS) -fPIC -fvisibility=hidden -Iinclude -Isrc \
             $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm

LIB_SRC := src/smallmind.c src/base.c src/arena.c src/dtype.c src/json.c src/pool.c src/quant.c \
           src/load/source.c src/load/config.c src/load/weights.c src/load/gguf.c src/load/gguf_config.c src/load/plan.c src/load/hf.c src/load/safetensors.c src/load/llama2c.c \
           src/model/model.c src/model/kv.c src/model/forward.c src/model/gpt2.c src/model/llama.c src/tokenizer/tokenizer.c src/tokenizer/load.c src/tokenizer/pretok.c src/tokenizer/pretok_named.c src/tokenizer/hf.c src/tokenizer/unicode_tables.c src/sampler.c \
           src/generate.c src/oai.c src/grammar/gbnf.c src/grammar/core.c src/grammar/mask.c src/grammar/schema.c src/grammar/numrange.c src/grammar/allof.c src/grammar/regex.c src/prefix.c src/pcache.c src/chat.c src/template/lex.c src/template/parse.c src/template/stmt.c src/template/value.c src/template/filters.c src/template/seqfilters.c src/template/strmethods.c \
           src/template/render.c src/kernels/dispatch.c src/kernels/peak.c src/kernels/scalar.c src/kernels/pack.c src/kernels/attention.c src/kernels/quant_ref.c \
           src/train/train.c src/train/setup.c src/train/checkpoint.c src/batch.c src/sched.c src/bench.c src/bench_ops.c \
           src/convert/convert.c src/convert/hf_tokenizer.c src/convert/export_gguf.c
ifneq ($(filter x86_64 i686 i386,$(ARCH)),)
LIB_SRC += src/kernels/avx2.c src/kernels/avx2_rows.c src/kernels/avx2_panels.c src/kernels/avx512.c src/kernels/avx512_attn.c src/kernels/avx512_rows.c src/kernels/avx512_bf16.c src/kernels/avx2_quant.c src/kernels/avx2_qgemm.c
ARCH_DEFS := -DSM_X86_KERNELS
# avx2_quant.c and avx2_qgemm.c are built once more per vpdpbusd flavour (SM_QFLAVOUR).
QFLAVOURS := $(foreach f,quant qgemm,$(BUILD)/src/kernels/avx2_$(f)_vnni.o $(BUILD)/src/kernels/avx2_$(f)_vnni512.o)
endif
CLI_SRC := $(wildcard src/cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(QFLAVOURS)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)

BIN      := $(BUILD)/smallmind
LIBA     := $(BUILD)/libsmallmind.a
LIBSO    := $(BUILD)/libsmallmind.so.0
VERSION  := $(shell sed -n 's/^\#define SMALLMIND_VERSION "\(.*\)"/\1/p' include/smallmind.h)
TESTBIN  := $(BUILD)/test_runner
DEPSOK   := $(BUILD)/.deps-ok

.PHONY: all lib run test asan warnings bench clean deps test-deps test-models model install uninstall fuzz fuzz-build

all: $(BIN)

# The build dependencies: the libraries in PKGS (cJSON, PCRE2, utf8proc) and pkg-config.
$(DEPSOK):
	@mkdir -p $(BUILD)
	@if ! pkg-config --exists $(PKGS) 2>/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing $(DEBS) with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEBS) >/dev/null || exit 1; \
	  else \
	    echo "smallmind needs: sudo apt-get install $(DEBS)" >&2; exit 1; \
	  fi; \
	fi
	@touch $@

deps: $(DEPSOK)

# What the tests need beyond the build (NumPy, PyTorch, Jinja2, tmux, Unicode
# data; clang's sanitizer runtime for make asan): installed with apt-get as root,
# else named in one line, and the tests that need them skip.
test-deps: | $(DEPSOK)
	@bash scripts/test_deps.sh $(PYTHON)

# Objects are rebuilt when the flags change (a stamp holding them).
FLAGS_STAMP := $(BUILD)/.cflags
$(FLAGS_STAMP): FORCE
	@mkdir -p $(BUILD); echo '$(CC) $(ALL_CFLAGS)' | cmp -s - $@ 2>/dev/null || echo '$(CC) $(ALL_CFLAGS)' >$@
FORCE:

$(BUILD)/%.o: %.c $(FLAGS_STAMP) | $(DEPSOK)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

# Only the ISA files get -m flags; the kernels get -O3.
$(BUILD)/src/kernels/%.o: ALL_CFLAGS += -O3
$(BUILD)/src/train/%.o: ALL_CFLAGS += -O3
$(BUILD)/src/quant.o: ALL_CFLAGS += -O3
$(BUILD)/src/sampler.o: ALL_CFLAGS += -O3 # best_of's integer maximum vectorized
$(BUILD)/src/kernels/avx2.o $(BUILD)/src/kernels/avx2_rows.o $(BUILD)/src/kernels/avx2_panels.o: ALL_CFLAGS += -mavx2 -mfma -mf16c
$(BUILD)/src/kernels/avx512.o $(BUILD)/src/kernels/avx512_attn.o $(BUILD)/src/kernels/avx512_rows.o: ALL_CFLAGS += -mavx512f -mfma
$(BUILD)/src/kernels/avx512_bf16.o: ALL_CFLAGS += -mavx512f -mavx512bf16
$(BUILD)/src/kernels/avx2_quant.o $(BUILD)/src/kernels/avx2_qgemm.o: ALL_CFLAGS += -mavx2 -mfma -mf16c -DSM_QFLAVOUR=0
$(BUILD)/src/kernels/avx2_%_vnni.o: ALL_CFLAGS += -mavx2 -mfma -mf16c -mavxvnni -DSM_QFLAVOUR=1
$(BUILD)/src/kernels/avx2_%_vnni512.o: ALL_CFLAGS += -mavx2 -mfma -mf16c -mavx512f -mavx512vl \
                                                    -mavx512bw -mavx512vnni -DSM_QFLAVOUR=2
$(filter %_vnni.o,$(QFLAVOURS)): $(BUILD)/src/kernels/avx2_%_vnni.o: src/kernels/avx2_%.c $(FLAGS_STAMP) | $(DEPSOK)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@
$(filter %_vnni512.o,$(QFLAVOURS)): $(BUILD)/src/kernels/avx2_%_vnni512.o: src/kernels/avx2_%.c $(FLAGS_STAMP) | $(DEPSOK)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

# The binary counts its own allocations for `bench` (src/alloc_count.c).
WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
$(BIN): $(LIB_OBJ) $(CLI_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(WRAP) $(LDLIBS)

# The library: static and shared, with the one public header and a pkg-config file.
lib: $(LIBA) $(LIBSO)

$(LIBA): $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(LIBSO): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libsmallmind.so.0 -o $@ $^ $(LDLIBS)
	ln -sf libsmallmind.so.0 $(BUILD)/libsmallmind.so

# smallmind.pc for the installed prefix, written by make install.
PC_LINES = 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
  'Name: smallmind' 'Description: run transformer language models on a CPU' 'Version: $(VERSION)' \
  'Requires.private: libcjson libpcre2-8 libutf8proc' 'Libs: -L$${libdir} -lsmallmind' \
  'Libs.private: -lpthread -lm' 'Cflags: -I$${includedir}'

$(TESTBIN): $(LIB_OBJ) $(TEST_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/dump_logits: $(BUILD)/tests/tools/dump_logits.o $(LIB_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/quant_tool: $(BUILD)/tests/tools/quant_tool.o $(LIB_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/dump_grads: $(BUILD)/tests/tools/dump_grads.o $(LIB_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/sample_dist: $(BUILD)/tests/tools/sample_dist.o $(LIB_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/alloc_count.so: tests/tools/alloc_count.c
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) -O2 -fPIC -shared -o $@ $< -ldl

# Random-weight models the tests use (scripts/sm_random_model.py).
TM := $(BUILD)/test-models
$(TM)/.done: scripts/sm_random_model.py scripts/sm_model.py Makefile | test-deps
	@mkdir -p $(TM)
	$(PYTHON) scripts/sm_random_model.py --out $(TM)/seed --force --layers 4 --heads 8 --embd 256 --ctx 256 --vocab 256 --seed 1
	$(PYTHON) scripts/sm_random_model.py --out $(TM)/odd --force --layers 2 --heads 3 --embd 48 --ctx 80 --vocab 300 --activation gelu_erf --untied --seed 2
	$(PYTHON) scripts/sm_random_model.py --out $(TM)/nobias --force --layers 1 --heads 2 --embd 34 --ctx 40 --vocab 256 --no-bias --seed 3
	$(PYTHON) scripts/sm_random_model.py --out $(TM)/seed16 --force --layers 2 --heads 4 --embd 128 --ctx 256 --vocab 256 --dtype bf16 --seed 4
	$(PYTHON) scripts/sm_random_model.py --out $(TM)/llamau --force --arch llama --layers 2 --heads 4 --kv-heads 2 --embd 128 --ff 352 --ctx 256 --vocab 320 --untied --seed 5
	$(PYTHON) scripts/sm_random_model.py --out $(TM)/llamaw --force --arch llama --layers 2 --heads 4 --kv-heads 2 --embd 256 --ff 512 --ctx 256 --vocab 320 --untied --seed 6
	@touch $@
# quantized ones, converted by the binary (q4_0 with a q8_0 output layer; q8_0 with biases;
# q4_k_m with a q6_k output layer): the shapes its repacked products take (rows in groups of 32)
$(TM)/.quant: $(TM)/.done $(BIN)
	rm -rf $(TM)/seedq4 $(TM)/seedq8 $(TM)/seedk4
	$(BIN) convert -q --dtype q4_0 $(TM)/llamau $(TM)/seedq4
	$(BIN) convert -q --dtype q8_0 $(TM)/seed $(TM)/seedq8
	$(BIN) convert -q --dtype q4_k_m $(TM)/llamaw $(TM)/seedk4
	@touch $@
test-models: $(TM)/.done $(TM)/.quant

FUZZ_TARGETS := config weights tokenizer batch spm bpe hftok hfdir gguf template pcache grammar
FUZZ_SECONDS ?= 60
FUZZ_BINS := $(FUZZ_TARGETS:%=$(BUILD)/fuzz_%)

# Fuzz targets with a plain driver: the corpus and kept crashes as regression tests.
$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/driver.c $(LIB_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

# libFuzzer builds (clang): the library instrumented, the target linked with the fuzzer.
fuzz-build: $(LIB_OBJ)
	@for t in $(FUZZ_TARGETS); do \
	  $(CC) $(ALL_CFLAGS) -fsanitize=fuzzer,address,undefined -o $(BUILD)/libfuzz_$$t tests/fuzz/fuzz_$$t.c $(LIB_OBJ) $(LDLIBS) || exit 1; \
	done

fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang CFLAGS="-O1 -g -fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer" fuzz-build
	@mkdir -p build-fuzz/crashes
	@bad=; for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus/$$t; \
	  echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
	  if build-fuzz/libfuzz_$$t build-fuzz/corpus/$$t tests/fuzz/corpus/$$t -max_total_time=$(FUZZ_SECONDS) \
	      -max_len=16384 -artifact_prefix=build-fuzz/crashes/$$t- -print_final_stats=1 >build-fuzz/$$t.log 2>&1; then \
	    grep -E "^stat::(number_of_executed_units|peak_rss)" build-fuzz/$$t.log; \
	  else \
	    grep -E "ERROR|SUMMARY|Test unit written" build-fuzz/$$t.log; \
	    echo "fuzz_$$t found a crash (build-fuzz/crashes/, log build-fuzz/$$t.log)"; bad="$$bad $$t"; \
	  fi; \
	done; \
	if [ -n "$$bad" ]; then echo "crashes in:$$bad"; exit 1; fi

test: test-deps $(BIN) $(TESTBIN) $(FUZZ_BINS) $(BUILD)/grammar_tool $(BUILD)/dump_logits $(BUILD)/quant_tool $(BUILD)/dump_grads $(BUILD)/sample_dist $(BUILD)/alloc_count.so $(TM)/.done $(TM)/.quant
	@$(MAKE) --no-print-directory install PREFIX=$(abspath $(BUILD))/prefix >/dev/null
	SM_SKIP_ALLOC=$(SM_SKIP_ALLOC) SM_SANITIZED=$(SM_SANITIZED) SM_PREFIX=$(abspath $(BUILD))/prefix \
	  SM_CC="$(CC)" SM_CFLAGS="$(CFLAGS)" bash tests/run_all.sh $(BUILD) $(PYTHON)

# ASan + UBSan: a separate build folder; LD_PRELOAD allocation counting is skipped there.
asan:
	@bash scripts/test_deps.sh $(PYTHON) asan
	$(MAKE) BUILD=build-asan CC=clang CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  SM_SKIP_ALLOC=1 SM_SANITIZED=1 test

warnings:
	@bash scripts/test_deps.sh $(PYTHON) asan
	$(MAKE) BUILD=build-gcc CC=gcc CFLAGS="-O2 -Werror -Wconversion" build-gcc/smallmind build-gcc/test_runner
	$(MAKE) BUILD=build-clang CC=clang CFLAGS="-O2 -Werror -Wconversion" build-clang/smallmind build-clang/test_runner

MODEL ?= models/default
PROMPT ?= And God said
run: $(BIN)
	@if [ ! -f $(MODEL)/config.json ]; then \
	  echo "$(MODEL) is missing (it ships with the repository; 'make model' retrains it)" >&2; exit 1; \
	fi
	$(BIN) generate -m $(MODEL) -p "$(PROMPT)" -n 200

# The default model: the King James Bible from Debian (scripts/make_corpus.py),
# chapters shuffled, the last tenth held out. See models/default/TRAINING.md.
CORPUS := $(BUILD)/corpus/kjv.txt
TRAIN_FLAGS := --layers 4 --heads 8 --embd 256 --ctx 256 --batch 16 --steps 4000 --lr 2e-3 \
  --lr-min 2e-4 --warmup 200 --weight-decay 0.1 --grad-clip 1.0 --val-fraction 0.1 \
  --eval-every 200 --eval-seqs 128 --checkpoint-every 500 --seed 1337
$(CORPUS): scripts/make_corpus.py
	@mkdir -p $(dir $@)
	@if ! command -v bible >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing bible-kjv (the corpus) with apt-get"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bible-kjv bible-kjv-text >/dev/null || exit 1; \
	  else \
	    echo "the corpus needs Debian's bible-kjv: sudo apt-get install bible-kjv" >&2; exit 1; \
	  fi; \
	fi
	$(PYTHON) scripts/make_corpus.py $@
model: $(BIN) $(CORPUS)
	rm -rf $(BUILD)/model-default
	$(BIN) train --data $(CORPUS) --out $(BUILD)/model-default $(TRAIN_FLAGS)
	mkdir -p models/default
	cp $(BUILD)/model-default/config.json $(BUILD)/model-default/model.bin \
	   $(BUILD)/model-default/loss.csv $(BUILD)/model-default/train.json models/default/
	tail -c $$(( $$(wc -c < $(CORPUS)) / 10 )) $(CORPUS) > $(BUILD)/corpus/heldout.txt
	$(BIN) score -m models/default -f $(BUILD)/corpus/heldout.txt | tail -1
	bash scripts/plot_loss.sh models/default/loss.csv docs/training-loss.png \
	  "models/default: 4 layers, 256 wide, King James Bible"

# The GEMM comparison links OpenBLAS (libopenblas-dev) when it is installed;
# smallmind itself never does.
$(BUILD)/bench_gemm: tests/tools/bench_gemm.c $(LIB_OBJ)
	$(CC) $(ALL_CFLAGS) $$(pkg-config --cflags openblas) -o $@ $^ $$(pkg-config --libs openblas) $(LDLIBS)

# Matrix-vector products against the read bandwidth (no dependency).
$(BUILD)/bench_gemv: tests/tools/bench_gemv.c $(LIB_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

bench: $(BIN) $(BUILD)/bench_gemv
	@if pkg-config --exists openblas; then $(MAKE) --no-print-directory $(BUILD)/bench_gemm; \
	else echo "OpenBLAS is not installed (apt-get install libopenblas-dev): no GEMM comparison"; fi
	bash scripts/bench.sh $(BIN)

clean:
	rm -rf build build-asan build-gcc build-clang build-fuzz

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(wildcard $(BUILD)/tests/tools/*.d $(BUILD)/tests/fuzz/*.d)

# The binary finds an installed default model at <bin>/../share/smallmind.
SHARE := $(DESTDIR)$(PREFIX)/share/smallmind
install: $(BIN) lib
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(SHARE)/models/default \
	    $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/smallmind
	install -m 644 include/smallmind.h $(DESTDIR)$(PREFIX)/include/smallmind.h
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/libsmallmind.a
	install -m 755 $(LIBSO) $(DESTDIR)$(PREFIX)/lib/libsmallmind.so.0
	ln -sf libsmallmind.so.0 $(DESTDIR)$(PREFIX)/lib/libsmallmind.so
	printf '%s\n' $(PC_LINES) >$(DESTDIR)$(PREFIX)/lib/pkgconfig/smallmind.pc
	install -m 644 docs/smallmind.1 $(DESTDIR)$(PREFIX)/share/man/man1/smallmind.1
	install -m 644 models/default/config.json models/default/model.bin $(SHARE)/models/default/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/smallmind $(DESTDIR)$(PREFIX)/share/man/man1/smallmind.1 \
	    $(DESTDIR)$(PREFIX)/include/smallmind.h $(DESTDIR)$(PREFIX)/lib/libsmallmind.a \
	    $(DESTDIR)$(PREFIX)/lib/libsmallmind.so.0 $(DESTDIR)$(PREFIX)/lib/libsmallmind.so \
	    $(DESTDIR)$(PREFIX)/lib/pkgconfig/smallmind.pc
	rm -rf $(SHARE)

$(BUILD)/grammar_tool: $(BUILD)/tests/tools/grammar_tool.o $(LIB_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)
