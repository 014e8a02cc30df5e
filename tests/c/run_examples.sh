#!/usr/bin/env bash
# Runs the C examples in DIR (plain or sanitizer builds) against tests/fixtures and compares
# their output with tests/c/expected. SLOTPARTNER_BLESS=1 rewrites the expected files.
# Prints "N passed, N failed" and exits non-zero on any failure.
set -u
dir=${1:?usage: run_examples.sh DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
fixtures=$root/tests/fixtures
expected=$root/tests/c/expected
# shellcheck source=../needs.sh
. "$root/tests/needs.sh"
needs_command python3 python3
needs_check examples
work=$(mktemp -d)
# The servers started below (a connection counter, the sandbox) are stopped however this ends.
counter_pid= sandbox_pid=
cleanup() {
  exec 3>&- 2> /dev/null
  for pid in $counter_pid $sandbox_pid; do kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
# Interrupted or terminated, the script exits, and so cleans up, at once.
trap 'exit 130' INT
trap 'exit 143' TERM HUP
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
passed=0 failed=0

check() { # NAME ACTUAL_FILE: compare with the expected file
  local name=$1 actual=$2
  if [ "${SLOTPARTNER_BLESS:-}" = 1 ]; then cp "$actual" "$expected/$name.out"; fi
  if diff -u "$expected/$name.out" "$actual" > "$work/diff"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); echo "FAIL $name ($dir)"; cat "$work/diff"
  fi
}

fail() { failed=$((failed + 1)); echo "FAIL $1 ($dir): $2"; }
wait_for() { # FILE: wait up to 20 s for FILE to hold something (a server's ready file, a count)
  for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.1; done
  return 1
}

# inspect_event: every fixture, the exit status printed after the output.
for f in "$fixtures"/*.json; do
  name=inspect_$(basename "$f" .json)
  "$dir/inspect_event" "$f" > "$work/out" 2> "$work/err"; rc=$?
  echo "exit: $rc" >> "$work/out"
  [ -s "$work/err" ] && { fail "$name" "stderr: $(cat "$work/err")"; continue; }
  check "$name" "$work/out"
done
# inspect_event reads stdin too, and refuses a missing file with status 2.
"$dir/inspect_event" < "$fixtures/refund.json" > "$work/stdin_out" 2>&1
if cmp -s "$work/stdin_out" <(head -n -1 "$expected/inspect_refund.out"); then passed=$((passed + 1)); else fail inspect_stdin "stdin output differs from file output"; fi
"$dir/inspect_event" "$work/no-such-file" > /dev/null 2>&1; rc=$?
if [ "$rc" = 2 ]; then passed=$((passed + 1)); else fail inspect_missing_file "exit $rc, expected 2"; fi

# callback_cgi: NAME METHOD TOKEN REMOTE_ADDR SOURCES BODY_FILE [CONTENT_LENGTH]
TOKEN=6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f
OTHER=0b7e3c55-1a2b-4c3d-8e9f-000000000001
head -c 70000 /dev/zero | tr '\0' ' ' > "$work/big.json"
run_cgi() { # as cgi below, without the check: the output in $work/out.lf, stderr in $work/err
  local method=$2 token=$3 remote=$4 sources=$5 body=$6 length=${7:-}
  [ -n "$length" ] || length=$(wc -c < "$body")
  env -i PATH="$PATH" ASAN_OPTIONS="$ASAN_OPTIONS" UBSAN_OPTIONS="$UBSAN_OPTIONS" "${cgi_env[@]}" \
    SLOTPARTNER_TOKEN=$TOKEN SLOTPARTNER_SOURCES="$sources" GATEWAY_INTERFACE=CGI/1.1 \
    REQUEST_METHOD="$method" CONTENT_LENGTH="$length" REMOTE_ADDR="$remote" \
    ${token:+HTTP_X_SERVICE_TOKEN="$token"} CONTENT_TYPE=application/json \
    "$dir/callback_cgi" < "$body" > "$work/out" 2> "$work/err"; local rc=$?
  echo "exit: $rc" >> "$work/out"
  tr -d '\r' < "$work/out" > "$work/out.lf"
}
cgi() {
  local name=cgi_$1
  run_cgi "$@"
  check "$name" "$work/out.lf"
  cp "$work/err" "$work/$name.err"
}
cgi_env=() # extra environment for the next cgi calls
cgi get_refused GET "$TOKEN" 34.254.138.20 staging "$fixtures/refund.json"
cgi no_token POST "" 34.254.138.20 staging "$fixtures/refund.json"
cgi wrong_token POST "$OTHER" 34.254.138.20 staging "$fixtures/refund.json"
cgi forbidden_source POST "$TOKEN" 18.203.30.17 staging "$fixtures/refund.json"
cgi too_large POST "$TOKEN" 34.254.138.20 staging "$work/big.json"
cgi not_json POST "$TOKEN" 34.254.138.20 staging "$fixtures/not_json.json"
cgi not_object POST "$TOKEN" 34.254.138.20 staging "$fixtures/not_object.json"
cgi unknown_event POST "$TOKEN" 34.254.138.20 staging "$fixtures/other_event.json"
cgi invalid_payout POST "$TOKEN" 34.254.138.20 staging "$fixtures/invalid_money_float.json"
cgi invalid_refund POST "$TOKEN" 34.254.138.20 staging "$fixtures/invalid_string_id.json"
cgi invalid_balance POST "$TOKEN" 34.254.138.20 staging "$fixtures/invalid_no_player.json"
cgi refund POST "$TOKEN" 34.254.138.20 staging "$fixtures/refund.json"
cgi payout POST "$TOKEN" 18.203.30.17 production "$fixtures/payout.json"
cgi balance POST "$TOKEN" ::1 "any" "$fixtures/balance.json"
cgi custom_range POST "$TOKEN" 10.1.2.3 "10.1.2.0/24" "$fixtures/refund.json"
cgi bad_length POST "$TOKEN" 34.254.138.20 staging "$fixtures/refund.json" 12x
cgi short_body POST "$TOKEN" 34.254.138.20 staging "$fixtures/refund.json" 100000
# A guessed index field never refuses money: "42" as a string leaves the event without an index.
sed 's/"index": *[0-9]*/"index":"42"/' "$fixtures/payout.json" > "$work/payout_index_string.json"
cgi index_string POST "$TOKEN" 18.203.30.17 production "$work/payout_index_string.json"
grep -q 'index unreadable' "$work/cgi_index_string.err" && passed=$((passed + 1)) || fail cgi_index_string_log "$(cat "$work/cgi_index_string.err")"
cgi_env=(SLOTPARTNER_STRICT_INDEX=1)
cgi index_string_strict POST "$TOKEN" 18.203.30.17 production "$work/payout_index_string.json"
cgi_env=()
# A refused balance query states no balance and is answered with an error status.
sed 's/"playerPartnerIdentifier":"[^"]*"/"playerPartnerIdentifier":"unknown-player"/' "$fixtures/balance.json" > "$work/balance_unknown.json"
cgi balance_unknown_player POST "$TOKEN" 34.254.138.20 staging "$work/balance_unknown.json"
# X-Forwarded-For is bytes, read only from trusted proxies; sources any ignores the address.
cgi_env=("HTTP_X_FORWARDED_FOR=$(printf '\xff\xfe')" SLOTPARTNER_TRUSTED_PROXIES=10.0.0.0/8)
cgi forwarded_not_utf8_untrusted POST "$TOKEN" 34.254.138.20 staging "$fixtures/refund.json"
cgi forwarded_not_utf8_trusted POST "$TOKEN" 10.0.0.5 staging "$fixtures/refund.json"
cgi_env=()
cgi any_without_address POST "$TOKEN" "" any "$fixtures/refund.json"
cgi mapped_range POST "$TOKEN" 34.254.138.20 "::ffff:34.254.138.0/120" "$fixtures/refund.json"
cgi upper_case_token POST "${TOKEN^^}" 34.254.138.20 staging "$fixtures/refund.json"
# SLOTPARTNER_JOURNAL naming a PostgreSQL server: a request refused by the source or token check
# is answered as without a journal and never makes the journal connect (a listener on loopback
# counts the connections made to it); one that passes gets 503 with a JSON body that names
# nothing of the journal (a closed port on loopback: its URL is in the log only).
names_no_journal() { # WHAT FILE: the file holds nothing of the journal's URL
  local what=$1 file=$2 secret
  for secret in postgres:// sp_owner sp_ledger 127.0.0.1; do
    if grep -qF -- "$secret" "$file"; then fail "$what" "names $secret: $(cat "$file")"; return; fi
  done
  passed=$((passed + 1))
}
python3 -c 'import os, socket, sys
s = socket.create_server(("127.0.0.1", 0))
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1])); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
n = 0
while True:
    c, _ = s.accept(); c.close(); n += 1
    open(sys.argv[2] + ".tmp", "w").write(str(n)); os.rename(sys.argv[2] + ".tmp", sys.argv[2])
' "$work/counter.port" "$work/counter.count" < /dev/null > /dev/null 2>&1 &
counter_pid=$!
wait_for "$work/counter.port"
cgi_env=("SLOTPARTNER_JOURNAL=postgres://sp_owner@127.0.0.1:$(cat "$work/counter.port")/sp_ledger")
cgi no_token POST "" 34.254.138.20 staging "$fixtures/refund.json"
names_no_journal cgi_journal_no_token_log "$work/err"
cgi wrong_token POST "$OTHER" 34.254.138.20 staging "$fixtures/refund.json"
cgi forbidden_source POST "$TOKEN" 18.203.30.17 staging "$fixtures/refund.json"
names_no_journal cgi_journal_refused_log "$work/err"
if [ ! -e "$work/counter.count" ]; then passed=$((passed + 1)); else fail cgi_journal_refused_unreached "$(cat "$work/counter.count") connection(s) to the journal"; fi
run_cgi journal_counted POST "$TOKEN" 34.254.138.20 staging "$fixtures/refund.json"
# (the listener sees a connection when one is made: the check above can fail). The listener
# writes its count after it has closed the connection, which the library may see fail first:
# the count is waited for before it is read.
wait_for "$work/counter.count"
if [ -s "$work/counter.count" ] && head -1 "$work/out.lf" | grep -qx 'Status: 503 Service Unavailable'; then passed=$((passed + 1)); else fail cgi_journal_counted "$(cat "$work/out.lf" "$work/err")"; fi
kill "$counter_pid" 2> /dev/null; wait "$counter_pid" 2> /dev/null
counter_pid=
cgi_env=("SLOTPARTNER_JOURNAL=postgres://sp_owner@127.0.0.1:1/sp_ledger")
cgi no_token POST "" 34.254.138.20 staging "$fixtures/refund.json"
names_no_journal cgi_journal_unreachable_no_token "$work/out.lf"
run_cgi journal_unreachable POST "$TOKEN" 34.254.138.20 staging "$fixtures/refund.json"
sed '1,/^$/d; s/exit: [0-9]*$//' "$work/out.lf" > "$work/body"
if head -1 "$work/out.lf" | grep -qx 'Status: 503 Service Unavailable' && grep -qx 'Content-Type: application/json; charset=utf-8' "$work/out.lf" \
  && python3 -c 'import json, sys; assert "error" in json.load(open(sys.argv[1]))' "$work/body" 2> /dev/null; then
  passed=$((passed + 1))
else
  fail cgi_journal_unreachable "expected 503 with a JSON body: $(cat "$work/out.lf")"
fi
names_no_journal cgi_journal_unreachable_body "$work/body"
if grep -q 'journal: postgres://sp_owner@127.0.0.1:1/sp_ledger' "$work/err"; then passed=$((passed + 1)); else fail cgi_journal_unreachable_log "the log does not name the journal: $(cat "$work/err")"; fi
# A balance query is never answered from the journal: with the journal down it is answered 200
# with the balance (its index is not recorded, and the log says so).
run_cgi journal_unreachable_balance POST "$TOKEN" ::1 any "$fixtures/balance.json"
if head -1 "$work/out.lf" | grep -qx 'Status: 200 OK' && grep -q '"money":100000' "$work/out.lf"; then passed=$((passed + 1)); else fail cgi_journal_unreachable_balance "expected 200 with the balance: $(cat "$work/out.lf" "$work/err")"; fi
if grep -q 'index of this getPlayerBalance is not recorded' "$work/err"; then passed=$((passed + 1)); else fail cgi_journal_unreachable_balance_log "$(cat "$work/err")"; fi
cgi_env=()
# One log line per valid event on stderr (and one for its index), none on stdout.
for name in refund payout balance; do
  if [ "$(grep -vc 'callback_cgi: index' "$work/cgi_$name.err")" = 1 ]; then passed=$((passed + 1)); else fail "cgi_${name}_log" "expected one log line, got: $(cat "$work/cgi_$name.err")"; fi
done

# get_games against the sandbox over HTTPS on loopback.
sandbox=$root/target/release/slotpartner-sandbox
# The sandbox exits when its standard input (a fifo held open here) closes.
mkfifo "$work/sandbox_stdin"
"$sandbox" serve --listen 127.0.0.1:0 --token "$TOKEN" --ca-out "$work/ca.pem" --ready-file "$work/service" \
  --exit-on-stdin-eof < "$work/sandbox_stdin" > /dev/null 2>&1 &
sandbox_pid=$!
exec 3> "$work/sandbox_stdin"
wait_for "$work/service"
games() { # NAME EXPECTED_EXIT BASE_URL TOKEN CA_FILE ARGS...
  local name=get_games_$1 want=$2 url=$3 token=$4 ca=$5; shift 5
  env SLOTPARTNER_BASE_URL="$url" SLOTPARTNER_TOKEN="$token" SLOTPARTNER_CA_FILE="$ca" \
    "$dir/get_games" "$@" > "$work/out" 2>&1; local rc=$?
  echo "exit: $rc" >> "$work/out"
  sed -i -e "s|$url|BASE_URL|g" -e 's|127.0.0.1:[0-9]*|127.0.0.1:PORT|g' "$work/out"
  check "$name" "$work/out"
  [ "$rc" = "$want" ] || fail "$name" "exit $rc, expected $want"
}
url=$(cat "$work/service")
games all 0 "$url" "$TOKEN" "$work/ca.pem" en-US
games one_german 0 "$url" "$TOKEN" "$work/ca.pem" de_DE 1003
games none 0 "$url" "$TOKEN" "$work/ca.pem" en-US 99999
games bad_locale 1 "$url" "$TOKEN" "$work/ca.pem" english
games wrong_token 1 "$url" "$OTHER" "$work/ca.pem" en-US
games untrusted 1 "$url" "$TOKEN" "" en-US
games plain_http 1 "${url/https:/http:}" "$TOKEN" "$work/ca.pem" en-US
games server_error 1 "$url/fault/status/503" "$TOKEN" "$work/ca.pem" en-US
games malformed 1 "$url/fault/malformed" "$TOKEN" "$work/ca.pem" en-US
games nul_key 1 "$url/fault/nulkey" "$TOKEN" "$work/ca.pem" en-US
games usage 2 "$url" "$TOKEN" "$work/ca.pem"
exec 3>&-
wait "$sandbox_pid" 2> /dev/null
sandbox_pid=

echo "examples ($dir): $passed passed, $failed failed"
[ "$failed" = 0 ]
