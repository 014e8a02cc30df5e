#!/usr/bin/env bash
# Runs the PHP binding's tests (tests/*_test.php, plain PHP, no PHPUnit) against the checkout's
# target/release/libslotpartner.so and target/release/slotpartner-sandbox (build them first:
# `make` and `cargo build --release -p slotpartner-sandbox`, or `make sandbox`).
# Prints one "file: N passed, N failed" line per file, then "N passed, N failed"; exits non-zero
# on any failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
php=${PHP:-php}

for need in "$root/target/release/libslotpartner.so" "$root/target/release/slotpartner-sandbox"; do
  if [ ! -e "$need" ]; then
    echo "missing $need: run \`make\` and \`cargo build --release -p slotpartner-sandbox\` first"
    echo "0 passed, 1 failed"
    exit 1
  fi
done
if ! "$php" -r 'exit(extension_loaded("FFI") ? 0 : 1);'; then
  echo "the PHP FFI extension is not loaded ($php -m)"
  echo "0 passed, 1 failed"
  exit 1
fi

export SLOTPARTNER_LIB="$root/target/release/libslotpartner.so"
passed=0 failed=0
for test in "$here"/tests/*_test.php; do
  name=$(basename "$test")
  out=$("$php" -d ffi.enable=preload -d zend.assertions=1 "$test" 2>&1); rc=$?
  summary=$(printf '%s\n' "$out" | tail -n 1)
  if [[ "$summary" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]}
  else
    p=0 f=1
  fi
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
  if [ "$f" != 0 ]; then printf '%s\n' "$out" | sed 's/^/  /'; fi
  echo "$name: $p passed, $f failed"
  passed=$((passed + p)) failed=$((failed + f))
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
