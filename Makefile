# slotpartner: `make` builds the library and the C examples, `make test` runs every test suite,
# `make demo` runs the sandbox demo, `make install` installs library, header, pkg-config file,
# the operator command `slotpartner` (with its man pages and shell completions) and the sandbox
# `slotpartner-sandbox`; `make deb` builds the Debian packages into target/deb/.

CARGO   ?= cargo
CC      ?= cc
CXX     ?= c++
PREFIX  ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DATADIR    ?= $(PREFIX)/share
MAN1DIR    ?= $(DATADIR)/man/man1
# Where Debian's bash-completion, zsh and fish look for the completions packages ship.
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
ZSHCOMPDIR  ?= $(DATADIR)/zsh/vendor-completions
FISHCOMPDIR ?= $(DATADIR)/fish/vendor_completions.d
# The package version (Cargo.toml) and the shared library's names: build.rs gives the library
# the SONAME libslotpartner.so.<major>; make install lays out libslotpartner.so.<version> with
# the links libslotpartner.so.<major> (what programs load) and libslotpartner.so (what -l finds).
VERSION  := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
SOMAJOR  := $(firstword $(subst ., ,$(VERSION)))
SONAME   := libslotpartner.so.$(SOMAJOR)

RELEASE  := target/release
EXDIR    := target/examples
SANDIR   := target/examples-sanitized
STRICT   := -Wall -Wextra -Werror -pedantic
CFLAGS   ?= -O2 -g
EXAMPLES := callback_cgi inspect_event get_games journal_status
SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# What a program linking the static library needs besides it (as `cargo rustc -- --print native-static-libs` says).
STATIC_LIBS := -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc

.PHONY: FORCE all lib cli sandbox test-docs test-miri test-cpp test-php test-python examples sanitized test test-rust test-c test-e2e header-check symbols-check header bench demo install uninstall deb test-install clean

all: lib examples cli

lib: $(RELEASE)/libslotpartner.so

# One cargo call builds every release binary of the workspace (the library, the operator command,
# the sandbox): built apart, packages resolve shared dependencies with different features and each
# rebuilds the library the other left. Cargo decides what to rebuild; make always asks it.
BUILD_RELEASE := $(CARGO) build --release --locked --workspace

$(RELEASE)/libslotpartner.so $(RELEASE)/libslotpartner.a: FORCE
	$(BUILD_RELEASE)
	@# Programs linked with -lslotpartner load the SONAME: the examples find it here by their rpath.
	@ln -sfn libslotpartner.so $(RELEASE)/$(SONAME)

FORCE:

# The operator command (cli/): journal status, gaps and records, recover, inspect, games.
cli: $(RELEASE)/slotpartner

$(RELEASE)/slotpartner: FORCE
	$(BUILD_RELEASE)

examples: lib $(addprefix $(EXDIR)/,$(EXAMPLES))

# Examples link the shared library and find it through their rpath.
$(EXDIR)/%: examples/c/%.c include/slotpartner.h $(RELEASE)/libslotpartner.so
	@mkdir -p $(EXDIR)
	$(CC) -std=c11 $(STRICT) $(CFLAGS) -Iinclude $< -o $@ -L$(RELEASE) -lslotpartner -Wl,-rpath,'$$ORIGIN/../release'

# The same programs under AddressSanitizer and UndefinedBehaviorSanitizer, linking the static library.
sanitized: lib $(addprefix $(SANDIR)/,$(EXAMPLES))

$(SANDIR)/%: examples/c/%.c include/slotpartner.h $(RELEASE)/libslotpartner.a
	@mkdir -p $(SANDIR)
	$(CC) -std=c11 $(STRICT) -O1 -g $(SANITIZE) -Iinclude $< -o $@ $(RELEASE)/libslotpartner.a $(STATIC_LIBS)

# Each suite that starts processes runs under tests/no_leftovers.py, which fails when the suite
# leaves a process running (naming it, its command line and the TCP ports it listens on) or a
# file in the temporary directory it gave the suite (TMPDIR), and then stops and removes them.
NO_LEFTOVERS := python3 tests/no_leftovers.py

test: all sanitized sandbox test-rust header-check symbols-check test-c test-valgrind test-threads test-fork test-clock test-e2e test-miri test-fuzz-smoke test-cpp test-php test-python test-install test-docs demo

test-rust:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(NO_LEFTOVERS) $(CARGO) test --workspace --locked

# The Markdown files cannot rot silently (tests/docs_check.py, docs/testing.md): every relative
# link and anchor holds, and every code block marked runnable compiles, or runs, against the
# built library. The checker's self-test first: it must find a broken link and a broken snippet.
test-docs: lib
	$(NO_LEFTOVERS) python3 tests/docs_check.py --self-test
	$(NO_LEFTOVERS) python3 tests/docs_check.py

# The header compiles cleanly as C11 and as C++17.
header-check:
	printf '#include "slotpartner.h"\nint main(void) { return sp_version() == 0; }\n' > target/header_check.c
	$(CC) -std=c11 $(STRICT) -Iinclude -fsyntax-only target/header_check.c
	$(CXX) -std=c++17 $(STRICT) -Iinclude -fsyntax-only -x c++ target/header_check.c

# The shared library exports only sp_ symbols of its own.
symbols-check: lib
	@bad=$$(nm -D --defined-only $(RELEASE)/libslotpartner.so | awk '{print $$3}' | grep -v '^sp_' || true); \
	if [ -n "$$bad" ]; then echo "non-sp_ exported symbols:"; echo "$$bad"; exit 1; fi; \
	echo "symbols-check: $$(nm -D --defined-only $(RELEASE)/libslotpartner.so | grep -c ' sp_') sp_ symbols, nothing else"

test-c: examples sanitized sandbox $(SANDIR)/careless_host $(EXDIR)/kill_at_fsync.so
	$(NO_LEFTOVERS) tests/c/run_examples.sh $(EXDIR)
	$(NO_LEFTOVERS) tests/c/run_examples.sh $(SANDIR)
	$(NO_LEFTOVERS) tests/c/half_credit.sh $(EXDIR)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 $(NO_LEFTOVERS) $(SANDIR)/careless_host

# The careless-host ABI tests under miri (undefined behaviour, aliasing), where a nightly
# toolchain with miri is present. Recursive validation: a reference the library makes must point
# to a valid value all through (a host may have written any integer into an enum field of a
# struct the library handed out, any byte into a bool), and bytes the library hands the host
# (the padding of a record, an event, an exchange) must be defined.
MIRIFLAGS ?= -Zmiri-recursive-validation
test-miri:
	@if cargo +nightly miri --version > /dev/null 2>&1; then \
		MIRIFLAGS="$(MIRIFLAGS)" $(CARGO) +nightly miri test -p slotpartner --test ffi_abi careless_host && \
		MIRIFLAGS="$(MIRIFLAGS)" $(CARGO) +nightly miri test -p slotpartner --test ffi_record careless_host && \
		MIRIFLAGS="$(MIRIFLAGS)" $(CARGO) +nightly miri test -p slotpartner --test endpoint -- the_bytes_of_an_exchange a_careless_host_cannot_change_the_headers; \
	else \
		echo "test-miri: SKIPPED: no nightly toolchain with miri (rustup component add --toolchain nightly miri rust-src)"; \
	fi

# Coverage-guided fuzzing with cargo-fuzz (nightly) of every entry point: fuzz/ is a crate of
# its own, outside the workspace. `make fuzz` runs each target for FUZZ_SECONDS (default 300)
# from its corpus in fuzz/corpus/, keeping what it finds new there (minimise it afterwards:
# `cd fuzz && cargo +nightly fuzz cmin -a TARGET corpus/TARGET -- -use_counters=0`). A finding
# stops the run and is written to fuzz/artifacts/TARGET/, to become a test in
# tests/fuzz_regressions.rs.
FUZZ_TARGETS := receiver_handle reply_builders games_answer sources journal_key
FUZZ_SECONDS ?= 300
FUZZ_FLAGS   := -dict=callback.dict -timeout=10 -print_final_stats=1

fuzz:
	cd fuzz && $(CARGO) +nightly fuzz build --debug-assertions
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
		(cd fuzz && $(CARGO) +nightly fuzz run --debug-assertions $$t corpus/$$t -- \
			-max_total_time=$(FUZZ_SECONDS) $(FUZZ_FLAGS)) || exit 1; \
	done

# About 5 s of each target from its corpus (left as it is), where a nightly toolchain with
# cargo-fuzz is present; says so plainly and passes where it is not. Built with --dev (the
# library and serde_json at opt-level 1, fuzz/Cargo.toml), with the sanitizer and debug
# assertions: it builds in about a third of an optimized build's time and replays the whole
# corpus with a few thousand mutations more, where an optimized build makes about ten times the
# runs; make fuzz builds optimized.
test-fuzz-smoke:
	@if ! $(CARGO) +nightly fuzz --version > /dev/null 2>&1; then \
		echo "fuzz smoke: SKIPPED (no nightly toolchain with cargo-fuzz: rustup toolchain install nightly; cargo install cargo-fuzz --locked)"; \
	else \
		set -e; cd fuzz; $(CARGO) +nightly fuzz build --dev --debug-assertions; \
		for t in $(FUZZ_TARGETS); do \
			scratch=$$(mktemp -d); \
			$(CARGO) +nightly fuzz run --dev --debug-assertions $$t $$scratch corpus/$$t -- \
				-max_total_time=5 -seed=1 $(FUZZ_FLAGS) > target/smoke-$$t.log 2>&1 \
				|| { tail -n 40 target/smoke-$$t.log; rm -rf $$scratch; echo "fuzz smoke: $$t FAILED (input in fuzz/artifacts/$$t/)"; exit 1; }; \
			rm -rf $$scratch; \
			echo "fuzz smoke: $$t: $$(grep -h '^Done' target/smoke-$$t.log)"; \
		done; \
		echo "fuzz smoke: $(words $(FUZZ_TARGETS)) targets passed"; \
	fi

.PHONY: fuzz test-fuzz-smoke

# The C example's ledger killed in the middle of a credit (tests/c/half_credit.sh): an LD_PRELOAD
# shim whose fsync of a wallet file kills the process; the example links the shared library.
$(EXDIR)/kill_at_fsync.so: tests/c/kill_at_fsync.c
	@mkdir -p $(EXDIR)
	$(CC) -std=c11 $(STRICT) $(CFLAGS) -shared -fPIC $< -o $@

# The C ABI used as a careless host would use it, under the sanitizers.
$(SANDIR)/careless_host: tests/c/careless_host.c include/slotpartner.h $(RELEASE)/libslotpartner.a
	@mkdir -p $(SANDIR)
	$(CC) -std=c11 $(STRICT) -O1 -g $(SANITIZE) -pthread -Iinclude $< -o $@ $(RELEASE)/libslotpartner.a $(STATIC_LIBS)

# The C examples (plain build) under valgrind memcheck: every case of run_examples.sh (every
# fixture, the CGI cases, get_games against the sandbox), callback_cgi with a SQLite journal and
# journal_status on it; no error and nothing definitely lost (suppressions: tests/c/valgrind.supp).
test-valgrind: examples sandbox
	$(NO_LEFTOVERS) tests/c/valgrind.sh $(EXDIR)

# 8 threads sharing one receiver, one client (against the sandbox) and one SQLite journal,
# checking every reply, under the sanitizers.
test-threads: sandbox $(SANDIR)/threads
	$(NO_LEFTOVERS) tests/c/threads.sh $(SANDIR)/threads

$(SANDIR)/threads: tests/c/threads.c include/slotpartner.h $(RELEASE)/libslotpartner.a
	@mkdir -p $(SANDIR)
	$(CC) -std=c11 $(STRICT) -O1 -g $(SANITIZE) -pthread -Iinclude $< -o $@ $(RELEASE)/libslotpartner.a $(STATIC_LIBS)

.PHONY: test-valgrind test-threads

# 30 children forked from a parent whose two threads are busy with the journal, each handling an
# event of its own in the journal it inherited: three runs on SQLite, three on a throw-away
# PostgreSQL cluster (skipped when PostgreSQL is not installed). Built plainly, not under the
# sanitizers: GCC's AddressSanitizer allocator does not survive fork() in a threaded process (a
# child inherits its lock held by a parent thread that was allocating, and hangs in malloc).
# Then four threads forking 100 children each at once while four others keep the journal busy:
# every child must use its journal (a fork while another fork's handler was closing SQLite
# connections would hang).
test-fork: target/fork-test/fork target/fork-test/fork_concurrent
	$(NO_LEFTOVERS) tests/c/fork.sh target/fork-test/fork
	@$(NO_LEFTOVERS) sh -c 'scratch=$$(mktemp -d) && target/fork-test/fork_concurrent "sqlite:$$scratch/journal.db" 4 100; \
		rc=$$?; rm -rf "$$scratch"; exit $$rc'

target/fork-test/%: tests/c/%.c include/slotpartner.h $(RELEASE)/libslotpartner.a
	@mkdir -p target/fork-test
	$(CC) -std=c11 $(STRICT) $(CFLAGS) -pthread -Iinclude $< -o $@ $(RELEASE)/libslotpartner.a $(STATIC_LIBS)

.PHONY: test-fork

# Leases across processes whose wall clocks disagree: a worker with its clock 45 s ahead or
# behind (tests/c/clock_shim.c, LD_PRELOAD) neither takes over a live claim nor keeps a dead one
# (tests/c/lease_clock.sh). The program links the shared library: LD_PRELOAD cannot reach into
# a static one.
CLOCKDIR := target/clock-test

test-clock: $(CLOCKDIR)/lease_clock $(CLOCKDIR)/clock_shim.so
	$(NO_LEFTOVERS) tests/c/lease_clock.sh $(CLOCKDIR)

$(CLOCKDIR)/lease_clock: tests/c/lease_clock.c include/slotpartner.h $(RELEASE)/libslotpartner.so
	@mkdir -p $(CLOCKDIR)
	$(CC) -std=c11 $(STRICT) $(CFLAGS) -Iinclude $< -o $@ -L$(RELEASE) -lslotpartner -Wl,-rpath,'$$ORIGIN/../release'

$(CLOCKDIR)/clock_shim.so: tests/c/clock_shim.c
	@mkdir -p $(CLOCKDIR)
	$(CC) -std=c11 $(STRICT) $(CFLAGS) -shared -fPIC $< -o $@

.PHONY: test-clock

# End to end: 1,000 events a backend (10,000 when the script runs by itself; a smoke: the long run belongs to `python3 tests/e2e/exactly_once.py`) from the sandbox to callback_cgi behind a concurrent CGI gateway,
# journalled on SQLite and on a throw-away PostgreSQL cluster (skipped if not installed).
test-e2e: examples sandbox cli
	$(NO_LEFTOVERS) python3 tests/e2e/exactly_once.py --events 1000 --pg-events 1000

test-cpp: lib sandbox
	$(NO_LEFTOVERS) bindings/cpp/run_tests.sh

test-php: examples sandbox
	$(NO_LEFTOVERS) bindings/php/run_tests.sh

test-python: examples sandbox
	$(NO_LEFTOVERS) bindings/python/run_tests.sh
	$(NO_LEFTOVERS) bindings/python/run_server_tests.sh

header:
	SLOTPARTNER_BLESS=1 $(CARGO) test --test header

bench: lib
	$(CARGO) bench --bench callback
	@if printf '#include <jansson.h>\n' | $(CC) -E - > /dev/null 2>&1; then \
		mkdir -p target/bench && \
		$(CC) -std=c11 -O2 $(STRICT) -Iinclude benches/c/callback_vs_jansson.c -o target/bench/callback_vs_jansson \
			-L$(RELEASE) -lslotpartner -ljansson -Wl,-rpath,'$$ORIGIN/../release' && \
		./target/bench/callback_vs_jansson tests/fixtures; \
	else echo "callback vs jansson: SKIPPED (no jansson.h: apt-get install libjansson-dev)"; fi
	$(CARGO) bench --bench get_games
	$(CARGO) bench --bench journal
	$(CARGO) bench --bench journal_growth
	@# PostgreSQL's CPU a transaction by how it is written on the wire (a Sync a statement or one).
	python3 benches/pg_sync.py
	php bindings/php/bench.php
	python3 bindings/python/bench.py
	@# The export's memory at 100,000 and at EXPORT_ROWS (default 5,000,000) deliveries (/usr/bin/time -v).
	benches/export_memory.sh
	$(MAKE) bench-e2e

# End to end on loopback (benches/e2e/run.py): nginx + PHP-FPM serving the PHP example with its
# journal and a ledger table, beside a hand-written PHP integration, then the Python example under
# gunicorn beside a hand-written WSGI app, on SQLite and on a throw-away PostgreSQL cluster, loaded
# by `slotpartner-sandbox send --burst` at 1, 4 and 16 connections in alternating rounds. Installs
# what it lacks (nginx, PHP-FPM, PDO SQLite/PostgreSQL, gunicorn, psycopg) with apt-get as root.
# E2E_EVENTS (3000 a round), E2E_ROUNDS (3), E2E_CONCURRENCY (1,4,16), E2E_STACKS (php,python),
# E2E_BACKENDS (sqlite,postgres), E2E_STEPS=1 (a PHP-FPM worker's CPU by step of each script);
# `E2E_EVENTS=200 E2E_ROUNDS=1 make bench-e2e` is a smoke run of about a minute.
bench-e2e: lib sandbox
	python3 benches/e2e/run.py

.PHONY: bench-e2e

# The whole job on the sandbox, all on loopback (scripts/demo.sh): callbacks answered, a repeat
# answered from the journal, a lossy burst, then `slotpartner recover` closing every gap.
demo: all sandbox
	$(NO_LEFTOVERS) scripts/demo.sh

sandbox:
	$(BUILD_RELEASE)

# make install [PREFIX=/usr/local] [DESTDIR=staging]: the library as cargo-c lays it out (the
# versioned file, the SONAME link programs load, the link -lslotpartner finds, the static
# library), the header, the pkg-config file, the operator command with its man pages and its
# bash, zsh and fish completions, and the sandbox (partners run it in their own integration
# tests). The pages and completions come from the command just built (`slotpartner man --out
# DIR`, `slotpartner completions SHELL`), so they always match it; they are written to
# target/install/ first. make uninstall removes exactly these; the man pages it removes are the
# ones the installed command writes (one a subcommand), asked again at uninstall time. install(1)
# replaces a file by a new one rather than writing into it, so processes that have the old
# library mapped keep running.
INSTALLED := $(BINDIR)/slotpartner $(BINDIR)/slotpartner-sandbox $(LIBDIR)/libslotpartner.so.$(VERSION) \
	$(LIBDIR)/$(SONAME) $(LIBDIR)/libslotpartner.so $(LIBDIR)/libslotpartner.a $(INCLUDEDIR)/slotpartner.h \
	$(PKGCONFIGDIR)/slotpartner.pc $(BASHCOMPDIR)/slotpartner $(ZSHCOMPDIR)/_slotpartner \
	$(FISHCOMPDIR)/slotpartner.fish
GENERATED := target/install

install:
	$(BUILD_RELEASE)
	rm -rf $(GENERATED) && mkdir -p $(GENERATED)/man
	$(RELEASE)/slotpartner man --out $(GENERATED)/man
	$(RELEASE)/slotpartner completions bash > $(GENERATED)/slotpartner.bash
	$(RELEASE)/slotpartner completions zsh > $(GENERATED)/_slotpartner
	$(RELEASE)/slotpartner completions fish > $(GENERATED)/slotpartner.fish
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) \
		$(DESTDIR)$(MAN1DIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 755 $(RELEASE)/slotpartner $(DESTDIR)$(BINDIR)/slotpartner
	install -m 755 $(RELEASE)/slotpartner-sandbox $(DESTDIR)$(BINDIR)/slotpartner-sandbox
	install -m 755 $(RELEASE)/libslotpartner.so $(DESTDIR)$(LIBDIR)/libslotpartner.so.$(VERSION)
	ln -sfn libslotpartner.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sfn libslotpartner.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libslotpartner.so
	install -m 644 $(RELEASE)/libslotpartner.a $(DESTDIR)$(LIBDIR)/libslotpartner.a
	install -m 644 include/slotpartner.h $(DESTDIR)$(INCLUDEDIR)/slotpartner.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|' \
		-e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|' -e 's|@VERSION@|$(VERSION)|' \
		-e 's|@STATIC_LIBS@|$(STATIC_LIBS)|' slotpartner.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/slotpartner.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/slotpartner.pc
	install -m 644 $(GENERATED)/man/*.1 $(DESTDIR)$(MAN1DIR)/
	install -m 644 $(GENERATED)/slotpartner.bash $(DESTDIR)$(BASHCOMPDIR)/slotpartner
	install -m 644 $(GENERATED)/_slotpartner $(DESTDIR)$(ZSHCOMPDIR)/_slotpartner
	install -m 644 $(GENERATED)/slotpartner.fish $(DESTDIR)$(FISHCOMPDIR)/slotpartner.fish

# Removes what make install laid out under these names: the files of INSTALLED and the man
# pages `slotpartner.1` and `slotpartner-*.1` (whichever release of the command wrote them). A
# file a Debian package owns (the packages of make deb install into /usr) is left, with a line
# saying which package: `apt remove` removes it, and dpkg's records stay true.
uninstall:
	@for file in $(addprefix $(DESTDIR),$(INSTALLED)) $(DESTDIR)$(MAN1DIR)/slotpartner.1 $(DESTDIR)$(MAN1DIR)/slotpartner-*.1; do \
		[ -e "$$file" ] || [ -L "$$file" ] || continue; \
		if [ -z "$(DESTDIR)" ] && owner=$$(dpkg-query -S "$$file" 2> /dev/null); then \
			echo "make uninstall: $$file belongs to the Debian package $${owner%%:*}: left (apt remove $${owner%%:*})"; \
		else rm -f "$$file" && echo "removed $$file"; fi; \
	done

# Debian packages from this checkout, with debhelper (debian/rules says why and how) through
# dpkg-buildpackage: binary packages only, unsigned, without the build-dependency check (-d)
# because Rust comes from rustup, not from a Debian package. Everything lands in target/deb/
# (the .deb files, .buildinfo, .changes), never beside the checkout; debian/ is left clean.
# Then lintian where it is installed (its findings are printed, they never fail the build).
DEB_ARCH = $(shell dpkg-architecture -qDEB_HOST_ARCH)
DEB_OUT  := target/deb

deb:
	@command -v dpkg-buildpackage > /dev/null && command -v dh > /dev/null || \
		{ echo "make deb: needs dpkg-buildpackage and dh (apt-get install dpkg-dev debhelper fakeroot)" >&2; exit 2; }
	rm -rf $(DEB_OUT) && mkdir -p $(DEB_OUT)
	dpkg-buildpackage -b -d --no-sign --post-clean \
		--buildinfo-option=-u$(DEB_OUT) --buildinfo-file=$(DEB_OUT)/slotpartner_$(VERSION)_$(DEB_ARCH).buildinfo \
		--changes-option=-u$(DEB_OUT) --changes-file=$(DEB_OUT)/slotpartner_$(VERSION)_$(DEB_ARCH).changes
	@ls -1 $(DEB_OUT)/*.deb
	@if command -v lintian > /dev/null; then echo "lintian $(DEB_OUT)/*.changes:"; \
		lintian $(DEB_OUT)/slotpartner_$(VERSION)_$(DEB_ARCH).changes || true; \
	else echo "lintian: SKIPPED (not installed: apt-get install lintian)"; fi

# Installs into a temporary prefix and uses what it installed: C programs built through
# pkg-config against the shared and the static library, the Python wheel in a fresh virtual
# environment, the PHP package through Composer; then uninstalls. As root with dpkg-dev and
# debhelper present, builds the Debian packages (make deb), installs them on this machine with
# apt, uses them the same way and purges them (SKIPPED, said so, otherwise). Prints
# "install: N passed, N failed".
test-install:
	MAKE='$(MAKE)' $(NO_LEFTOVERS) tests/install/install_test.sh

clean:
	$(CARGO) clean
