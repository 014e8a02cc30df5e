#!/usr/bin/env bash
# The main job on the built-in sandbox, all on loopback: start slotpartner-sandbox, list its
# games through the get_games example, put the callback_cgi example behind an HTTP server, have
# the sandbox send it a refund, a payout, a balance query and one invalid event, and check every
# reply. Exits 0 only if each reply is the expected one. Installs nothing; stops what it starts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

token=6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f
sandbox=target/release/slotpartner-sandbox

wait_for() { # FILE: wait up to 20 s for a ready file
  for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.1; done
  echo "demo: $1 did not appear" >&2; return 1
}

echo "== 1. The service stand-in: slotpartner-sandbox serve"
"$sandbox" serve --listen 127.0.0.1:0 --token "$token" --ca-out "$work/ca.pem" --ready-file "$work/service" \
  > /dev/null 2> "$work/sandbox.log" &
pids+=($!)
wait_for "$work/service"
base_url=$(cat "$work/service")
echo "service at $base_url (CA certificate in $work/ca.pem)"

echo
echo "== 2. getGames through examples/c/get_games"
export SLOTPARTNER_BASE_URL=$base_url SLOTPARTNER_TOKEN=$token SLOTPARTNER_CA_FILE=$work/ca.pem
target/examples/get_games en-US
echo
target/examples/get_games de-DE 1003

echo
echo "== 3. The partner's callback endpoint: examples/c/callback_cgi behind an HTTP server"
SLOTPARTNER_SOURCES="127.0.0.1,::1" python3 scripts/cgi_gateway.py 127.0.0.1:0 target/examples/callback_cgi \
  --ready-file "$work/endpoint" > /dev/null &
pids+=($!)
wait_for "$work/endpoint"
endpoint="$(cat "$work/endpoint")/callback"
echo "callback endpoint at $endpoint"

echo
echo "== 4. The service sends callbacks (slotpartner-sandbox send); each reply is checked"
failed=0
send() { "$sandbox" send --url "$endpoint" --token "$token" "$@" || failed=$((failed + 1)); }
send --index 1 --expect-success true refund
send --index 2 --expect-success true payout
send --index 3 --expect-success true balance
send --index 4 --set moneyWon=1500.5 --expect-success false payout

echo
if [ "$failed" -eq 0 ]; then
  echo "demo: every reply is the expected one"
else
  echo "demo: $failed replies were not the expected ones" >&2
  exit 1
fi
