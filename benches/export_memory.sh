#!/usr/bin/env bash
# Constant memory of `slotpartner journal export`: fills a SQLite journal with 100,000
# deliveries and exports it whole under /usr/bin/time -v, then fills it up to N deliveries
# (EXPORT_ROWS, default 5,000,000) and exports it whole again, printing for each run the rows,
# the time, the file's size and the maximum resident set size: the last stays flat whatever N,
# as the export reads the journal a page of 1,000 rows at a time and writes each row as it goes.
#
# The journal's tables are made by the library itself (opened through the Python binding); the
# deliveries are then written straight into them with SQL (a month of refunds and payouts, one
# payout in 50 refused with a message), which is far faster than handling each one. They take
# about 600 bytes of disk each: 5,000,000 need some 3 GB in $TMPDIR, and the CSV 1.3 GB more.
#
# Needs target/release/slotpartner and target/release/libslotpartner.so (make), python3, and
# /usr/bin/time (Debian package `time`; says SKIPPED without it). Not a test: nothing is asserted.
#   EXPORT_ROWS=1000000 benches/export_memory.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rows=${EXPORT_ROWS:-5000000}
format=${EXPORT_FORMAT:-csv}
bin=$root/target/release/slotpartner
lib=$root/target/release/libslotpartner.so

if [ ! -x /usr/bin/time ]; then
  echo "export memory: SKIPPED (no /usr/bin/time: apt-get install time)"
  exit 0
fi
for need in "$bin" "$lib"; do
  [ -e "$need" ] || { echo "export memory: missing $need: run make first"; exit 1; }
done
case $rows in '' | *[!0-9]*) echo "export memory: EXPORT_ROWS must be a number of rows, got '$rows'"; exit 1 ;; esac
[ "$rows" -ge 100000 ] || { echo "export memory: EXPORT_ROWS must be at least 100000"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/sp-export-memory.XXXXXX")
trap 'rm -rf "$work"' EXIT
db=$work/journal.db

# The library makes the journal's tables.
PYTHONPATH=$root/bindings/python SLOTPARTNER_LIB=$lib python3 -c '
import sys, slotpartner
slotpartner.Journal("sqlite:" + sys.argv[1]).close()
' "$db"

# fill COUNT: deliveries 1..COUNT (those missing), first delivered 500 ms apart from
# 2026-10-01T00:00:00Z (5,000,000 span 29 days), one transaction.
fill() {
  python3 - "$db" "$1" << 'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
target = int(sys.argv[2])
db.execute("PRAGMA synchronous = OFF")
have = db.execute("SELECT COUNT(*) FROM sp_journal_delivery").fetchone()[0]
db.execute("BEGIN")
db.execute(
    """
WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2),
d(i, refund, at) AS (SELECT i, i % 3 != 0, 1790812800000 + i * 500 FROM n)
INSERT INTO sp_journal_delivery (key, name, transaction_id, first_index, content, state, token,
    attempts, created_ms, updated_ms, lease_until_ms, finished_ms, reply)
SELECT
    CASE WHEN refund THEN 'gameSessionBuyRefund:' ELSE 'jackpotPayout:' END || (900000000 + i),
    CASE WHEN refund THEN 'gameSessionBuyRefund' ELSE 'jackpotPayout' END,
    900000000 + i,
    i,
    CASE WHEN refund THEN printf('{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-%d","playerIdentifier":"svc-player-%d","playerPartnerIdentifier":"partner-%d","transactionId":%d,"buyTransactionId":%d,"gameSessionId":%d,"partnerGameRequestIdentifier":"req-%d","gameId":1001,"isMobile":false,"bonusCode":null}',
        i, i % 50000, i % 50000, 900000000 + i, 800000000 + i, i / 10, i)
    ELSE printf('{"event":"jackpotPayout","jackpotIdentifier":"jp-major-eu","playerIdentifier":"svc-player-%d","playerPartnerIdentifier":null,"currencyISO4217":"EUR","moneyWon":%d,"coinsWon":0,"isMoney":true,"epochReleasedMillis":%d,"isPrimary":false,"transactionId":%d,"buyTransactionId":%d,"partnerGameRequestIdentifier":"req-%d","gameSessionId":%d,"gameId":1002,"bonusCode":null,"isMobile":true}',
        i % 50000, 100 + i % 100000, at, 900000000 + i, 800000000 + i, i, i / 10)
    END,
    'done', NULL, 1, at, at + 40, 0, at + 40,
    CAST(CASE
        WHEN refund THEN '{"refund":{"success":true,"errorMessage":""}}'
        WHEN i % 50 = 0 THEN '{"payout":{"success":false,"errorMessage":"jackpot closed, ask support"}}'
        ELSE '{"payout":{"success":true,"errorMessage":""}}'
    END AS BLOB)
FROM d
""",
    (have + 1, target),
)
db.execute("COMMIT")
EOF
}

# measure LABEL: the whole journal exported to a new file under /usr/bin/time -v.
measure() {
  local out=$work/export.$format
  /usr/bin/time -v "$bin" journal export --journal "sqlite:$db" --since 2026-01-01 --format "$format" \
    --output "$out" --json > "$work/summary" 2> "$work/time"
  local exported rss elapsed size
  exported=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["rows"])' "$work/summary")
  rss=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$work/time")
  elapsed=$(sed -n 's/^[[:space:]]*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time")
  size=$(stat -c %s "$out")
  printf 'export memory: %-10s rows=%-9s %s file=%s MB time=%s max_rss=%s kB (%s MB)\n' "$1" "$exported" "$format" \
    $((size / 1000000)) "$elapsed" "$rss" $((rss / 1024))
  rm -f "$out"
}

started=$SECONDS
fill 100000
measure "100k"
fill "$rows"
echo "export memory: filled $rows deliveries in $((SECONDS - started)) s ($(($(stat -c %s "$db") / 1000000)) MB journal)"
measure "$rows"
