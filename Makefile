# slotpartner: `make` builds the library and the C examples, `make test` runs every test suite,
# `make demo` runs the sandbox demo, `make install` installs library, header, pkg-config file and
# the operator command `slotpartner`.

CARGO   ?= cargo
CC      ?= cc
CXX     ?= c++
PREFIX  ?= /usr/local

RELEASE  := target/release
EXDIR    := target/examples
SANDIR   := target/examples-sanitized
STRICT   := -Wall -Wextra -Werror -pedantic
CFLAGS   ?= -O2 -g
EXAMPLES := callback_cgi inspect_event get_games journal_status
SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# What a program linking the static library needs besides it (as `cargo rustc -- --print native-static-libs` says).
STATIC_LIBS := -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc

.PHONY: FORCE all lib cli sandbox test-miri test-cpp test-php test-python examples sanitized test test-rust test-c test-e2e header-check symbols-check header bench demo install clean

all: lib examples cli

lib: $(RELEASE)/libslotpartner.so

# Cargo decides what to rebuild; make always asks it.
$(RELEASE)/libslotpartner.so $(RELEASE)/libslotpartner.a: FORCE
	$(CARGO) build --release --locked -p slotpartner

FORCE:

# The operator command (cli/): journal status, gaps and records, recover, inspect, games.
cli: $(RELEASE)/slotpartner

$(RELEASE)/slotpartner: FORCE
	$(CARGO) build --release --locked -p slotpartner-cli

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

test: all sanitized sandbox test-rust header-check symbols-check test-c test-e2e test-miri test-cpp test-php test-python demo

test-rust:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) test --workspace --locked

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

test-c: examples sanitized sandbox $(SANDIR)/careless_host
	tests/c/run_examples.sh $(EXDIR)
	tests/c/run_examples.sh $(SANDIR)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 $(SANDIR)/careless_host

# The careless-host ABI tests under miri (undefined behaviour, aliasing), where a nightly
# toolchain with miri is present.
test-miri:
	@if cargo +nightly miri --version > /dev/null 2>&1; then \
		$(CARGO) +nightly miri test -p slotpartner --test ffi_abi careless_host; \
	else \
		echo "test-miri: SKIPPED: no nightly toolchain with miri (rustup component add --toolchain nightly miri rust-src)"; \
	fi

# The C ABI used as a careless host would use it, under the sanitizers.
$(SANDIR)/careless_host: tests/c/careless_host.c include/slotpartner.h $(RELEASE)/libslotpartner.a
	@mkdir -p $(SANDIR)
	$(CC) -std=c11 $(STRICT) -O1 -g $(SANITIZE) -pthread -Iinclude $< -o $@ $(RELEASE)/libslotpartner.a $(STATIC_LIBS)

# End to end: 10,000 events from the sandbox to callback_cgi behind a concurrent CGI gateway,
# journalled on SQLite and on a throw-away PostgreSQL cluster (skipped if not installed).
test-e2e: examples sandbox cli
	python3 tests/e2e/exactly_once.py

test-cpp: lib sandbox
	bindings/cpp/run_tests.sh

test-php: examples sandbox
	bindings/php/run_tests.sh

test-python: examples sandbox
	bindings/python/run_tests.sh

header:
	SLOTPARTNER_BLESS=1 $(CARGO) test --test header

bench:
	$(CARGO) bench --bench callback
	$(CARGO) bench --bench get_games
	$(CARGO) bench --bench journal
	php bindings/php/bench.php
	python3 bindings/python/bench.py

demo: all sandbox
	scripts/demo.sh

sandbox:
	$(CARGO) build --release --locked -p slotpartner-sandbox

install: lib cli
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(RELEASE)/slotpartner $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(RELEASE)/libslotpartner.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(RELEASE)/libslotpartner.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 include/slotpartner.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)|' \
		-e 's|@STATIC_LIBS@|$(STATIC_LIBS)|' slotpartner.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/slotpartner.pc

clean:
	$(CARGO) clean
