#!/usr/bin/env bash
# The main job on the built-in sandbox, all on loopback: start slotpartner-sandbox, list its
# games through the get_games example, put the callback_cgi example behind an HTTP server, have
# the sandbox send it a refund, a payout, a balance query and one invalid event, and check every
# reply. Then the same endpoint with a delivery journal and a demo wallet: a payout delivered
# twice is answered from the journal and credited once, and a burst with lost, repeated and
# reordered events ends with the journal naming exactly the lost indexes. Exits 0 only if every
# check passed. Installs nothing; stops what it starts.
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
echo "== 5. Exactly once: the same endpoint with a delivery journal (SLOTPARTNER_JOURNAL) and a wallet"
mkdir "$work/wallet"
journal="sqlite:$work/journal.db"
SLOTPARTNER_SOURCES="127.0.0.1,::1" SLOTPARTNER_JOURNAL="$journal" SLOTPARTNER_WALLET="$work/wallet" \
  python3 scripts/cgi_gateway.py 127.0.0.1:0 target/examples/callback_cgi --ready-file "$work/journaled" \
  > /dev/null 2> "$work/journaled.log" &
pids+=($!)
wait_for "$work/journaled"
endpoint="$(cat "$work/journaled")/callback"
echo "callback endpoint at $endpoint, journal $journal, wallet $work/wallet (one file per credit)"
check() { # DESCRIPTION COMMAND...: runs the check, prints its verdict
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what" >&2; failed=$((failed + 1)); fi
}

echo
echo "-- 5a. The service delivers jackpot payout 730046001 (index 1), then delivers it again"
for _ in 1 2; do send --index 1 --set epochReleasedMillis=1795300123456 --expect-success true payout; done
echo "endpoint log: $(grep -c 'answered from the journal' "$work/journaled.log") delivery answered from the journal"
check "the repeat was answered from the journal" grep -q 'answered from the journal' "$work/journaled.log"
check "the wallet holds one credit: $(ls "$work/wallet")" test "$(ls "$work/wallet")" = payout-730046001

echo
echo "-- 5b. A burst of 40 events (indexes 2-41): 10% lost, 10% repeated, some reordered"
echo "   (send checks that every repeat gets the byte-identical reply of the first delivery)"
"$sandbox" send --url "$endpoint" --token "$token" --burst 40 --index 2 --seed 5 --lose 0.1 --repeat 0.1 \
  --reorder 0.1 --concurrency 2 --quiet mixed > "$work/burst.txt" || failed=$((failed + 1))
sed 's/^summary /   /' "$work/burst.txt"
lost=$(sed -n 's/^summary lost=[0-9]* lost_indexes=//p' "$work/burst.txt")
delivered=$(sed -n 's/^summary .* delivered=\([0-9]*\) .*/\1/p' "$work/burst.txt")

echo
echo "-- What the journal saw: examples/c/journal_status $journal"
rc=0
target/examples/journal_status "$journal" > "$work/status.txt" || rc=$?
sed 's/^/   /' "$work/status.txt"
echo "   (exit status $rc: 1 means indexes are missing)"
missing=$(sed -n -e 's/^missing index \([0-9]*\)$/\1/p' -e 's/^missing indexes \([0-9]*\)-\([0-9]*\)$/\1 \2/p' \
  "$work/status.txt" | while read -r a b; do seq "$a" "${b:-$a}"; done | paste -sd, -)
check "the journal reports exactly the lost indexes ($lost) as missing" test "$rc" = 1 -a "$missing" = "$lost"
check "the wallet holds one credit per delivered event ($((delivered + 1)))" \
  test "$(ls "$work/wallet" | wc -l)" = "$((delivered + 1))"

echo
if [ "$failed" -eq 0 ]; then
  echo "demo: every reply is the expected one, and every check passed"
else
  echo "demo: $failed replies or checks were not the expected ones" >&2
  exit 1
fi
