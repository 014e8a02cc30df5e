#!/usr/bin/env bash
# Runs the Python binding's test suite against the checkout's build, building nothing:
#   target/release/libslotpartner.so      (make)
#   target/release/slotpartner-sandbox    (cargo build --release -p slotpartner-sandbox)
#   target/examples/callback_cgi          (make; its log lines are compared with the example's)
# Needs python3 (3.10 or newer), standard library only. Prints "N passed, N failed" last and
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
export SLOTPARTNER_LIB="$root/target/release/libslotpartner.so"
export SLOTPARTNER_SANDBOX="$root/target/release/slotpartner-sandbox"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
cd "$here" && exec python3 -X dev -W error::ResourceWarning tests/runner.py
