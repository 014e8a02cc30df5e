#!/usr/bin/env bash
# Runs the examples under real servers (tests/servers/: callback_wsgi.py under gunicorn,
# callback_asgi.py under uvicorn) and the README's framework snippets (Flask, Django, FastAPI)
# against their test clients, with the interpreter Debian's packages belong to
# (SLOTPARTNER_SERVER_PYTHON, default /usr/bin/python3). Builds nothing: needs
#   target/release/libslotpartner.so, target/release/slotpartner-sandbox, target/release/slotpartner
# Prints "N passed, N failed" last and exits non-zero on any failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${SLOTPARTNER_SERVER_PYTHON:-/usr/bin/python3}
missing=()
for file in target/release/libslotpartner.so target/release/slotpartner-sandbox target/release/slotpartner; do
  [ -f "$root/$file" ] || missing+=("$file")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing ${missing[*]}: run \`cargo build --release --locked --workspace\` in $root first"
  echo "0 passed, 1 failed"
  exit 1
fi
# What the tests load, checked before any runs (tests/needs.sh), in $python.
# shellcheck source=../../tests/needs.sh
. "$root/tests/needs.sh"
if [ ! -x "$python" ]; then
  needs_item "$python" python3
else
  for pair in gunicorn:python3-gunicorn uvicorn:python3-uvicorn flask:python3-flask django:python3-django \
    fastapi:python3-fastapi httpx:python3-httpx; do
    "$python" -c "import ${pair%%:*}" > /dev/null 2>&1 || needs_item "$python's module ${pair%%:*}" "${pair#*:}"
  done
fi
needs_check python_server_tests
export SLOTPARTNER_LIB="$root/target/release/libslotpartner.so"
export SLOTPARTNER_SANDBOX="$root/target/release/slotpartner-sandbox"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
cd "$here" && exec "$python" -X dev -W error::ResourceWarning tests/runner.py tests/servers
