#!/usr/bin/env bash
# Runs the Python binding's test suite against the checkout's build, building nothing:
#   target/release/libslotpartner.so      (make)
#   target/release/slotpartner-sandbox    (cargo build --release -p slotpartner-sandbox)
#   target/examples/callback_cgi          (make; its log lines are compared with the example's)
# Needs python3 (3.10 or newer) with setuptools. Prints "N passed, N failed" last and
# exits non-zero on any failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
missing=()
for file in target/release/libslotpartner.so target/release/slotpartner-sandbox target/examples/callback_cgi; do
  [ -f "$root/$file" ] || missing+=("$file")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing ${missing[*]}: run \`make && cargo build --release -p slotpartner-sandbox\` in $root first"
  echo "0 passed, 1 failed"
  exit 1
fi
# What the tests load, checked before any runs (tests/needs.sh): python3 3.10 or newer with
# ctypes (the binding), sqlite3 (a second process holding the journal's lock) and setuptools
# (test_packaging.py runs the build hook).
# shellcheck source=../../tests/needs.sh
. "$root/tests/needs.sh"
if ! command -v python3 > /dev/null 2>&1; then
  needs_item python3 python3
elif ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  needs_item "python3 3.10 or newer, not $(python3 -c 'import platform; print(platform.python_version())')" python3
else
  needs_python_module ctypes python3
  needs_python_module sqlite3 python3
  needs_python_module setuptools python3-setuptools
fi
needs_check python_tests
export SLOTPARTNER_LIB="$root/target/release/libslotpartner.so"
export SLOTPARTNER_SANDBOX="$root/target/release/slotpartner-sandbox"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
cd "$here" && exec python3 -X dev -W error::ResourceWarning tests/runner.py
