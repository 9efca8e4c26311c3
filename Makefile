# stackmine: build, test, demo, bench.
#
#   make            build bin/ (installs missing Debian packages first)
#   make test       sanitizer build + the whole test suite (unit, integration, fuzz smoke)
#   make demo       private PostgreSQL + services + a demo fleet; prints what to open
#   make stop       stop what the demo started
#   make bench      benchmarks (a report, not a test)
#   make deb        Debian packages stackmine-agent and stackmine-server in build/deb
#   make fuzz       libFuzzer runs of the wire parser, the importers, sm-web's inputs and the guard
#                   agent's profiles and settings (FUZZ_SECONDS each)
#
# The guard agent is a shared library, lib/libsmguard.so (build/asan/lib/ for SAN=1), loaded
# into other programs: it is always built optimised and without sanitizers, from position-
# independent objects in $(O)/pic with every symbol hidden but the wrapped C library calls.
# SAN=1 builds with AddressSanitizer and UBSan into build/asan (the tests use it).

CC ?= gcc
SAN ?= 0

# O (objects) and BINDIR may be overridden to keep several builds apart.
ifeq ($(SAN),1)
O ?= build/asan
BINDIR ?= $(O)/bin
OPT := -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
O ?= build/rel
BINDIR ?= bin
OPT := -O2
endif

PKGS := libpq libmicrohttpd json-c libzstd libcurl zlib libdw libunwind
WARN := -Wall -Wextra -Werror -Wstrict-prototypes -Wmissing-prototypes -Wvla -Wformat-security \
	-Wshadow -Wpointer-arith -Wcast-qual -Wno-cast-qual
CFLAGS := -std=c11 -g $(OPT) -D_GNU_SOURCE -pthread $(WARN) -MMD -MP -I. -I$(O)/gen
LDFLAGS := $(OPT) -pthread -Wl,--as-needed
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS = $(shell pkg-config --libs $(PKGS)) -lm
LIBDIR ?= $(dir $(BINDIR))lib

COMMON_SRC := $(wildcard common/*.c)
AGENT_SRC := $(filter-out agent/main.c,$(wildcard agent/*.c))
INGEST_SRC := $(filter-out ingest/main.c,$(wildcard ingest/*.c))
MINER_SRC := $(filter-out miner/main.c,$(wildcard miner/*.c))
CLUSTER_SRC := $(filter-out clusterer/main.c,$(wildcard clusterer/*.c))
WEB_SRC := $(filter-out web/main.c,$(wildcard web/*.c))
GUARD_CORE_SRC := $(addprefix agent/guard/,config.c dropin.c profile.c ring.c modmap.c symbolize.c)
GUARD_RT_SRC := $(addprefix agent/guard/,interpose.c runtime.c unit.c sampler.c train.c report.c)
# what libsmguard.so takes from the rest of the tree
GUARD_SHARED_SRC := $(addprefix common/,arena.c buf.c imap.c intern.c json.c jsonw.c log.c sha256.c util.c vec.c wire.c) \
	agent/ship.c agent/spool.c clusterer/linkage.c
UNIT_SRC := $(wildcard tests/unit/test_*.c)
TOOL_SRC := $(wildcard tests/tools/*.c)

COMMON_OBJ := $(COMMON_SRC:%.c=$(O)/%.o) $(O)/gen/migrations.o
AGENT_OBJ := $(AGENT_SRC:%.c=$(O)/%.o)
INGEST_OBJ := $(INGEST_SRC:%.c=$(O)/%.o)
MINER_OBJ := $(MINER_SRC:%.c=$(O)/%.o)
CLUSTER_OBJ := $(CLUSTER_SRC:%.c=$(O)/%.o)
WEB_OBJ := $(WEB_SRC:%.c=$(O)/%.o) $(O)/gen/static.o
GUARD_CORE_OBJ := $(GUARD_CORE_SRC:%.c=$(O)/%.o)
GUARD_PIC_OBJ := $(patsubst %.c,$(O)/pic/%.o,$(GUARD_CORE_SRC) $(GUARD_RT_SRC) $(GUARD_SHARED_SRC))
GUARD_LIB := $(LIBDIR)/libsmguard.so

PROGS := $(BINDIR)/sm-ingest $(BINDIR)/sm-agent $(BINDIR)/sm-admin $(BINDIR)/sm-miner \
	$(BINDIR)/sm-cluster $(BINDIR)/sm-web $(BINDIR)/sm-guard
UNIT_BINS := $(UNIT_SRC:tests/unit/%.c=$(O)/tests/%)
TOOL_BINS := $(TOOL_SRC:tests/tools/%.c=$(O)/tests/%)

.PHONY: all binaries deps test unit check-integration demo stop bench clean fuzz deb
.DEFAULT_GOAL := all
# keep the objects of tests and tools (make would delete them as intermediates)
.SECONDARY:

all:
	@deploy/deps.sh build
	@$(MAKE) --no-print-directory binaries

GUARD_TEST_BINS := $(O)/tests/guardtest $(O)/tests/guardtest-stripped $(O)/tests/safety $(O)/tests/callcost

binaries: $(PROGS) $(GUARD_LIB) $(UNIT_BINS) $(TOOL_BINS) $(GUARD_TEST_BINS)

$(O)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -c -o $@ $<

# the guard library's objects: optimised, unsanitized, position-independent, hidden by default
GUARD_PIC_CFLAGS := -std=c11 -g -O2 -fPIC -fvisibility=hidden -ftls-model=initial-exec -D_GNU_SOURCE \
	-pthread $(WARN) -MMD -MP -I.
$(O)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(GUARD_PIC_CFLAGS) $(PKG_CFLAGS) -c -o $@ $<

$(GUARD_LIB): $(GUARD_PIC_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -O2 -pthread -Wl,--no-undefined -Wl,-z,relro -Wl,-z,now -Wl,--as-needed -o $@ $^ \
		$(shell pkg-config --libs libdw libunwind libcurl libzstd json-c) -ldl -lm

# the guard tests' server: an ordinary program (no sanitizers, exported names, a stripped copy)
$(O)/tests/guardtest: tests/guard/guardtest.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -g -O2 -D_GNU_SOURCE -pthread -rdynamic -Wall -Wextra -o $@ $<
$(O)/tests/guardtest-stripped: $(O)/tests/guardtest
	objcopy --strip-all $< $@
$(O)/tests/safety: tests/guard/safety.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -g -O2 -D_GNU_SOURCE -pthread -rdynamic -Wall -Wextra -o $@ $<
$(O)/tests/callcost: tests/guard/callcost.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -g -O2 -D_GNU_SOURCE -Wall -Wextra -o $@ $<

$(O)/gen/migrations.c: $(wildcard sql/*.sql) deploy/embed-sql.sh
	@mkdir -p $(dir $@)
	deploy/embed-sql.sh sql > $@.tmp && mv $@.tmp $@

$(O)/gen/migrations.o: $(O)/gen/migrations.c
	$(CC) $(CFLAGS) -Wno-missing-prototypes -c -o $@ $<

$(O)/gen/static.c: $(wildcard web/static/*) deploy/embed-static.sh
	@mkdir -p $(dir $@)
	deploy/embed-static.sh web/static > $@.tmp && mv $@.tmp $@

$(O)/gen/static.o: $(O)/gen/static.c
	$(CC) $(CFLAGS) -c -o $@ $<

$(O)/libcommon.a: $(COMMON_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(O)/libagent.a: $(AGENT_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(O)/libingest.a: $(INGEST_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(O)/libminer.a: $(MINER_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(O)/libclusterer.a: $(CLUSTER_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(O)/libweb.a: $(WEB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(O)/libguard.a: $(GUARD_CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BINDIR)/sm-ingest: $(O)/ingest/main.o $(O)/libingest.a $(O)/libguard.a $(O)/libclusterer.a $(O)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(BINDIR)/sm-agent: $(O)/agent/main.o $(O)/libagent.a $(O)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
# link lines are the dependency graph: web -> miner -> clusterer -> common; agent -> common;
# ingest -> guard (the profile format, to merge the fleet's profiles) -> clusterer -> common
$(BINDIR)/sm-miner: $(O)/miner/main.o $(O)/libminer.a $(O)/libclusterer.a $(O)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(BINDIR)/sm-cluster: $(O)/clusterer/main.o $(O)/libclusterer.a $(O)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(BINDIR)/sm-web: $(O)/web/main.o $(O)/libweb.a $(O)/libminer.a $(O)/libclusterer.a $(O)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(BINDIR)/sm-guard: $(O)/agent/guard/cli.o $(O)/libguard.a $(O)/libagent.a $(O)/libclusterer.a $(O)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(BINDIR)/sm-admin: $(O)/deploy/admin.o $(O)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(O)/tests/%: $(O)/tests/unit/%.o $(O)/libweb.a $(O)/libminer.a $(O)/libguard.a $(O)/libclusterer.a $(O)/libagent.a $(O)/libingest.a $(O)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(O)/tests/%: $(O)/tests/tools/%.o $(O)/libweb.a $(O)/libminer.a $(O)/libclusterer.a $(O)/libagent.a $(O)/libingest.a $(O)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

test:
	@deploy/deps.sh test
	@$(MAKE) --no-print-directory SAN=1 binaries
	@tests/run.sh build/asan

demo:
	@deploy/deps.sh demo
	@$(MAKE) --no-print-directory binaries
	@deploy/demo.sh start

stop:
	@deploy/demo.sh stop

# Debian packages stackmine-agent and stackmine-server into build/deb (docs/fleet.md)
deb:
	@deploy/deps.sh deb
	@$(MAKE) --no-print-directory binaries
	@deploy/deb/build.sh

bench:
	@deploy/deps.sh bench
	@$(MAKE) --no-print-directory binaries
	@tests/bench/run.sh

# libFuzzer targets (clang): FUZZ_SECONDS each, corpora kept in build/fuzz/corpus-*.
FUZZ_SECONDS ?= 60
FUZZ_CFLAGS = -std=c11 -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
	-I. -Ibuild/fuzz/gen $(PKG_CFLAGS)
build/fuzz/fuzz_wire: tests/fuzz/fuzz_wire.c $(COMMON_SRC) build/fuzz/gen/migrations.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -o $@ $^ $(PKG_LIBS)
build/fuzz/fuzz_import: tests/fuzz/fuzz_import.c $(COMMON_SRC) $(AGENT_SRC) build/fuzz/gen/migrations.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -o $@ $^ $(PKG_LIBS)
build/fuzz/fuzz_web: tests/fuzz/fuzz_web.c $(COMMON_SRC) miner/params.c web/flame.c build/fuzz/gen/migrations.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -o $@ $^ $(PKG_LIBS)
build/fuzz/fuzz_profile: tests/fuzz/fuzz_profile.c $(COMMON_SRC) $(GUARD_CORE_SRC) $(CLUSTER_SRC) build/fuzz/gen/migrations.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -o $@ $^ $(PKG_LIBS)
build/fuzz/gen/migrations.c: $(wildcard sql/*.sql) deploy/embed-sql.sh
	@mkdir -p $(dir $@)
	deploy/embed-sql.sh sql > $@.tmp && mv $@.tmp $@

fuzz:
	@deploy/deps.sh fuzz
	@$(MAKE) --no-print-directory build/fuzz/fuzz_wire build/fuzz/fuzz_import build/fuzz/fuzz_web \
		build/fuzz/fuzz_profile
	@mkdir -p build/fuzz/corpus-wire build/fuzz/corpus-import build/fuzz/corpus-web build/fuzz/corpus-profile
	@cp -n tests/guard/profile-seed.json build/fuzz/corpus-profile/ 2>/dev/null || true
	build/fuzz/fuzz_wire -max_total_time=$(FUZZ_SECONDS) -max_len=65536 build/fuzz/corpus-wire tests/integration/data
	build/fuzz/fuzz_import -max_total_time=$(FUZZ_SECONDS) -max_len=65536 build/fuzz/corpus-import
	build/fuzz/fuzz_web -max_total_time=$(FUZZ_SECONDS) -max_len=16384 build/fuzz/corpus-web
	build/fuzz/fuzz_profile -max_total_time=$(FUZZ_SECONDS) -max_len=65536 build/fuzz/corpus-profile

clean:
	rm -rf build bin lib

-include $(shell find build -name '*.d' 2>/dev/null)
