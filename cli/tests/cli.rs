//! The `slotpartner` command as an operator uses it: the built binary run as a process, its
//! output and exit statuses checked. Journals are prepared through the library's Rust API; the
//! service is the sandbox in-process; the partner's callback endpoint is a small HTTP server on
//! loopback running the library's receiver and journal, crediting a ledger.

#[path = "support/metrics_server.rs"]
mod metrics_server;
mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use slotpartner::journal::Begin;
use slotpartner_sandbox::burst::{self, BurstOptions, EventMix, Shares};

use metrics_server::MetricsServer;
use support::*;

// ---------------------------------------------------------------------------------------------
// Bodies

fn payout_body(transaction_id: i64, index: i64, money: i64) -> String {
    format!(
        r#"{{"event":"jackpotPayout","jackpotIdentifier":"jp-1","playerIdentifier":"player-1","currencyISO4217":"EUR","moneyWon":{money},"coinsWon":0,"isMoney":true,"epochReleasedMillis":1718064000000,"isPrimary":true,"transactionId":{transaction_id},"buyTransactionId":{},"partnerGameRequestIdentifier":"req-{transaction_id}","gameSessionId":5,"gameId":1002,"index":{index},"note":{{"a":[1, 2]}}}}"#,
        transaction_id + 1_000_000
    )
}

/// A journal with: 1 a refund done, 2 a payout done, 3-4 missing, 5 refused, 6 claimed (in
/// progress), 7 missing, 8 a refund done, replayed once.
fn prepared_journal(scratch: &Scratch) -> String {
    let url = scratch.journal_url();
    let journal = open_journal(&url);
    for (body, reply) in [
        (refund_body(900_001, 1), r#"{"refund":{"success":true,"errorMessage":""}}"#),
        (payout_body(900_002, 2, 150_000), r#"{"payout":{"success":true,"errorMessage":""}}"#),
        (refund_body(900_008, 8), r#"{"refund":{"success":false,"errorMessage":"player blocked"}}"#),
    ] {
        let Begin::New(claim) = journal.begin(&delivery(&body)).unwrap() else { panic!("new") };
        journal.finish(&claim, reply.as_bytes()).unwrap();
    }
    assert!(matches!(journal.begin(&delivery(&refund_body(900_008, 8))).unwrap(), Begin::Done(_)));
    journal.record_refused(5, Some("jackpotPayout"), Some(900_005)).unwrap();
    assert!(matches!(journal.begin(&delivery(&refund_body(900_006, 6))).unwrap(), Begin::New(_)));
    url
}

// ---------------------------------------------------------------------------------------------
// journal status, gaps, show

#[test]
fn journal_status_counts_and_figures() {
    let scratch = Scratch::new("status");
    let url = prepared_journal(&scratch);
    // Indexes are missing: the journal needs attention, exit 1.
    let out = run(&["journal", "status", "--journal", &url]).expect(1);
    for line in [
        "handled:        3",
        "replayed:       1",
        "open conflicts: 0",
        "refused:        1",
        "in progress:    1",
        "unfinished:     0",
        "missing:        3",
        "unrecoverable:  0",
        "resolved:       0",
        "index jumps:    0",
        "numbering:      1",
        "first index:    1 (configured)",
        "highest index:  8",
        "watermark:      2",
    ] {
        assert!(out.stdout.lines().any(|l| l == line), "{line:?} in\n{}", out.stdout);
    }
    // The environment variable works as the option does; the option wins.
    let json = run_with(&["journal", "status", "--json"], &[("SLOTPARTNER_JOURNAL", &url)], None).expect(1).json();
    assert_eq!(json["missing"], 3);
    assert_eq!(json["handled"], 3);
    assert_eq!(json["in_progress"], 1);
    assert_eq!(json["watermark"], 2);
    assert_eq!(json["highest_index"], 8);
    assert_eq!((json["unfinished"].as_u64(), json["open_conflicts"].as_u64()), (Some(0), Some(0)));
    assert_eq!((json["index_jumps"].as_u64(), json["resolved"].as_u64()), (Some(0), Some(0)));
    assert_eq!((json["unrecoverable"].as_u64(), json["numbering"].as_i64()), (Some(0), Some(1)));
    assert_eq!(json["needs_attention"], true);
    let out = run_with(&["journal", "status", "--journal", &url], &[("SLOTPARTNER_JOURNAL", "mysql://x")], None);
    out.expect(1);

    // A journal with nothing to look at: exit 0.
    let full = Scratch::new("status-full");
    let journal = open_journal(&full.journal_url());
    for index in 1..=3 {
        let Begin::New(claim) = journal.begin(&delivery(&refund_body(800 + index, index))).unwrap() else { panic!() };
        journal.finish(&claim, b"{}").unwrap();
    }
    let json = run(&["journal", "status", "--journal", &full.journal_url(), "--json"]).expect(0).json();
    assert_eq!((json["handled"].as_u64(), json["needs_attention"].as_bool()), (Some(3), Some(false)));
}

#[test]
fn journal_gaps_lists_ranges_and_fails_while_any_remain() {
    let scratch = Scratch::new("gaps");
    let url = prepared_journal(&scratch);
    let out = run(&["journal", "gaps", "--journal", &url]).expect(1);
    // Nothing else needs a look: the claim on 6 is live (in progress, not unfinished).
    assert_eq!(out.stdout, "3-4\n7\n");
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let json = run(&["journal", "gaps", "--journal", &url, "--json"]).expect(1).json();
    assert_eq!(json["missing"], 3);
    assert_eq!(json["ranges"], serde_json::json!([{"first":3,"last":4},{"first":7,"last":7}]));
    assert_eq!(json["truncated"], false);
    for list in ["unrecoverable", "unfinished", "index_jumps", "resolved"] {
        assert_eq!(json[list], serde_json::json!([]), "{list}");
    }
    assert_eq!((json["open_conflicts"].as_u64(), json["needs_attention"].as_bool()), (Some(0), Some(true)));
    let out = run(&["journal", "gaps", "--journal", &url, "--limit", "1"]).expect(1);
    assert_eq!(out.stdout, "3-4\n");
    assert!(out.stderr.contains("only the first 1 ranges"), "{}", out.stderr);
    let out = run(&["journal", "gaps", "--journal", &url, "--limit", "2"]).expect(1);
    assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("3-4\n7\n", ""));

    // No gap: nothing printed, exit 0.
    let full = Scratch::new("gaps-none");
    let journal = open_journal(&full.journal_url());
    for index in 1..=3 {
        let Begin::New(claim) = journal.begin(&delivery(&refund_body(800 + index, index))).unwrap() else { panic!() };
        journal.finish(&claim, b"{}").unwrap();
    }
    let out = run(&["journal", "gaps", "--journal", &full.journal_url()]).expect(0);
    assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("", ""));
    assert_eq!(
        run(&["journal", "gaps", "--journal", &full.journal_url(), "--json"]).expect(0).json()["ranges"],
        serde_json::json!([])
    );
}

#[test]
fn journal_show_prints_each_record_or_exits_1() {
    let scratch = Scratch::new("show");
    let url = prepared_journal(&scratch);
    let out = run(&["journal", "show", "900008", "--journal", &url]).expect(0);
    let expect = [
        "key:            gameSessionBuyRefund:900008",
        "event:          gameSessionBuyRefund",
        "index:          8",
        "transactionId:  900008",
        "state:          done",
        "attempts:       1",
        r#"reply:          {"refund":{"success":false,"errorMessage":"player blocked"}}"#,
    ];
    for line in expect {
        assert!(out.stdout.lines().any(|l| l == line), "{line:?} in\n{}", out.stdout);
    }
    let created = out.stdout.lines().find_map(|l| l.strip_prefix("created:        ")).unwrap();
    assert!(is_rfc3339_utc(created), "{created}");
    let finished = out.stdout.lines().find_map(|l| l.strip_prefix("finished:       ")).unwrap();
    assert!(is_rfc3339_utc(finished), "{finished}");

    let json = run(&["journal", "show", "900006", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!(json.as_array().unwrap().len(), 1);
    assert_eq!(json[0]["state"], "claimed");
    assert_eq!(json[0]["reply"], serde_json::Value::Null);
    assert!(is_rfc3339_utc(json[0]["lease_until"].as_str().unwrap()));
    let json = run(&["journal", "show", "900005", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!((json[0]["key"].as_str(), json[0]["state"].as_str()), (Some("refused:5"), Some("refused")));

    let out = run(&["journal", "show", "123", "--journal", &url]).expect(1);
    assert!(out.stdout.is_empty());
    assert_eq!(out.stderr, "slotpartner: the journal holds no record of transactionId 123\n");
    assert_eq!(run(&["journal", "show", "123", "--journal", &url, "--json"]).expect(1).json(), serde_json::json!([]));
}

fn is_rfc3339_utc(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 24
        && text.ends_with('Z')
        && [4, 7].iter().all(|&i| b[i] == b'-')
        && b[10] == b'T'
        && [13, 16].iter().all(|&i| b[i] == b':')
        && b[19] == b'.'
        && text.starts_with("20")
}

#[test]
fn journal_errors_are_one_line_and_exit_2() {
    let scratch = Scratch::new("journal-errors");
    let line = run(&["journal", "status", "--journal", "mysql://db/x"]).expect(2).one_error_line().to_owned();
    assert!(line.starts_with(r#"slotpartner: journal_url: scheme "mysql" is not a journal"#), "{line}");
    let absent = format!("sqlite:{}", scratch.path("absent.db").display());
    let line = run(&["journal", "gaps", "--journal", &absent]).expect(2).one_error_line().to_owned();
    assert!(line.contains("no journal there") && line.contains("no such file"), "{line}");
    assert!(!scratch.path("absent.db").exists(), "no journal is created by reading one");
    let line = run(&["journal", "status"]).expect(2).one_error_line().to_owned();
    assert_eq!(line, "slotpartner: no journal: give --journal URL or set SLOTPARTNER_JOURNAL");
    let line = run(&["journal", "show", "abc", "--journal", &absent]).expect(2).one_error_line().to_owned();
    assert!(line.contains("'abc'") && line.ends_with("(see 'slotpartner journal show --help')"), "{line}");
}

#[test]
fn journal_create_makes_the_journal_a_ledger_can_then_live_beside_and_refuses_another_programs_file() {
    let scratch = Scratch::new("journal-create");
    let url = format!("sqlite:{}", scratch.path("journal.db").display());
    let made = run(&["journal", "create", "--journal", &url]).expect(0);
    assert!(made.stdout.starts_with("journal ready: schema version "), "{}", made.stdout);
    run(&["journal", "status", "--journal", &url]).expect(0);
    // The ledger's table beside the journal's, then the journal opened again as it is.
    let ledger = rusqlite::Connection::open(scratch.path("journal.db")).unwrap();
    ledger
        .execute_batch("CREATE TABLE credits (kind TEXT, transaction_id INTEGER, PRIMARY KEY (kind, transaction_id))")
        .unwrap();
    drop(ledger);
    run(&["journal", "create", "--journal", &url]).expect(0);
    run(&["journal", "status", "--journal", &url]).expect(0);
    // A file of another program's (its tables and no journal) is refused, and left as it is.
    let foreign = scratch.path("ledger.db");
    rusqlite::Connection::open(&foreign).unwrap().execute_batch("CREATE TABLE wallet (id INTEGER)").unwrap();
    let refused = run(&["journal", "create", "--journal", &format!("sqlite:{}", foreign.display())]).expect(2);
    assert!(refused.one_error_line().contains("another program"), "{}", refused.stderr);
}

// ---------------------------------------------------------------------------------------------
// journal export

/// Milliseconds since the Unix epoch of an RFC 3339 time in UTC with milliseconds (the
/// command's own parsing is what is tested; this one is plain arithmetic).
fn utc_ms(year: i64, month: i64, day: i64, hms_ms: (i64, i64, i64, i64)) -> i64 {
    let (y, m) = if month <= 2 { (year - 1, month + 9) } else { (year, month - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + (153 * m + 2) / 5 + day - 1 - 719_468;
    let (h, min, s, ms) = hms_ms;
    ((days * 24 + h) * 60 + min) * 60_000 + s * 1000 + ms
}

/// A journal whose deliveries were first delivered at known times (each a millisecond or two
/// late: the clock runs on between the shift and the claim): a refund on 2026-10-15 (its reply a
/// success), a payout the last second of October (a failure with a message holding a comma, a
/// quote and a line break), a refund at midnight of November 1st, and a payout claimed and never
/// finished on 2026-10-20.
fn export_journal(scratch: &Scratch) -> String {
    let url = scratch.journal_url();
    let journal = open_journal(&url);
    let deliveries = [
        (
            utc_ms(2026, 10, 15, (12, 0, 0, 0)),
            refund_body(900_001, 1),
            Some(r#"{"refund":{"success":true,"errorMessage":""}}"#),
        ),
        (
            utc_ms(2026, 10, 31, (23, 59, 59, 0)),
            payout_body(900_002, 2, 150_000),
            Some(r#"{"payout":{"success":false,"errorMessage":"jackpot \"jp-1\" closed,\nask support"}}"#),
        ),
        (
            utc_ms(2026, 11, 1, (0, 0, 0, 0)),
            refund_body(900_003, 3),
            Some(r#"{"refund":{"success":true,"errorMessage":""}}"#),
        ),
        (utc_ms(2026, 10, 20, (8, 0, 0, 0)), payout_body(900_004, 4, 99), None),
    ];
    for (at, body, reply) in deliveries {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        slotpartner::journal::shift_wall_clock_for_tests(at - now);
        let Begin::New(claim) = journal.begin(&delivery(&body)).unwrap() else { panic!("new") };
        if let Some(reply) = reply {
            journal.finish(&claim, reply.as_bytes()).unwrap();
        }
    }
    slotpartner::journal::shift_wall_clock_for_tests(0);
    url
}

/// RFC 4180 read back: records of fields, quoted fields with doubled quotes, CRLF line ends.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut records, mut record, mut field) = (Vec::new(), Vec::new(), String::new());
    let (mut chars, mut quoted) = (text.chars().peekable(), false);
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\r') => {
                assert_eq!(chars.next(), Some('\n'), "CRLF");
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(record.is_empty() && field.is_empty(), "the last record ends with CRLF");
    records
}

#[test]
fn journal_export_writes_a_period_in_both_formats() {
    let scratch = Scratch::new("export");
    let url = export_journal(&scratch);
    let october = ["journal", "export", "--journal", &url, "--since", "2026-10-01", "--until", "2026-11-01"];
    let out = run(&october).expect(0);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let records = parse_csv(&out.stdout);
    assert_eq!(records[0].join(","), slotpartner::journal::EXPORT_COLUMNS.join(","));
    let rows: Vec<std::collections::HashMap<&str, &str>> = records[1..]
        .iter()
        .map(|r| records[0].iter().map(String::as_str).zip(r.iter().map(String::as_str)).collect())
        .collect();
    // The refund of November 1st, midnight, is left out: --until is not part of the period.
    assert_eq!(rows.iter().map(|r| r["transactionId"]).collect::<Vec<_>>(), ["900001", "900002", "900004"]);
    let (refund, payout, open) = (&rows[0], &rows[1], &rows[2]);
    assert_eq!(
        [refund["event"], refund["playerIdentifier"], refund["moneyWon"], refund["currencyISO4217"], refund["outcome"]],
        ["gameSessionBuyRefund", "player-1", "", "", "success"]
    );
    assert!(refund["first_delivery"].starts_with("2026-10-15T12:00:00."), "{}", refund["first_delivery"]);
    assert_eq!(
        [payout["index"], payout["moneyWon"], payout["coinsWon"], payout["isMoney"], payout["currencyISO4217"]],
        ["2", "150000", "0", "true", "EUR"]
    );
    assert_eq!([payout["outcome"], payout["errorMessage"]], ["failure", "jackpot \"jp-1\" closed,\nask support"]);
    assert_eq!([payout["state"], payout["attempts"], payout["gameSessionId"]], ["done", "1", "5"]);
    assert!(payout["first_delivery"].starts_with("2026-10-31T23:59:59."), "{}", payout["first_delivery"]);
    assert_eq!([open["outcome"], open["state"], open["finished"], open["moneyWon"]], ["claimed", "claimed", "", "99"]);

    // The same period as JSON Lines, given as RFC 3339 times in another offset.
    let out = run(&[
        "journal",
        "export",
        "--journal",
        &url,
        "--since",
        "2026-10-01T02:00:00+02:00",
        "--until",
        "2026-11-01T00:00:00.000Z",
        "--format",
        "jsonl",
    ])
    .expect(0);
    let objects: Vec<serde_json::Value> = out.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(objects.len(), 3);
    assert_eq!((objects[0]["moneyWon"].is_null(), objects[1]["moneyWon"].as_i64()), (true, Some(150_000)));
    assert_eq!(objects[1]["isMoney"], true);
    // No --until: everything since.
    let out = run(&["journal", "export", "--journal", &url, "--since", "2026-10-01"]).expect(0);
    assert_eq!(parse_csv(&out.stdout).len(), 5);
    let out = run(&["journal", "export", "--journal", &url, "--since", "2026-11-01T00:00:01Z"]).expect(0);
    assert_eq!(parse_csv(&out.stdout).len(), 1, "the header alone");

    // To a file, with a summary for scripts; the file holds what stdout held.
    let file = scratch.path("october.csv");
    let mut to_file = october.to_vec();
    to_file.extend(["--output", path_str(&file), "--json"]);
    let summary = run(&to_file).expect(0).json();
    assert_eq!(
        summary,
        serde_json::json!({"rows": 3, "since": "2026-10-01T00:00:00.000Z", "until": "2026-11-01T00:00:00.000Z",
            "format": "csv", "output": path_str(&file)})
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), run(&october).expect(0).stdout);
    let line = run(&to_file).expect(2).one_error_line().to_owned();
    assert!(line.starts_with("slotpartner: path: ") && line.contains("exists"), "{line}");
    let mut plain = october.to_vec();
    let jsonl = scratch.path("october.jsonl");
    plain.extend(["--output", path_str(&jsonl), "--format", "jsonl"]);
    let out = run(&plain).expect(0);
    assert!(out.stdout.is_empty() && out.stderr.contains("3 deliveries written to"), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&jsonl).unwrap().lines().count(), 3);
}

#[test]
fn journal_export_refuses_bad_dates_and_options_with_exit_2() {
    let scratch = Scratch::new("export-errors");
    let url = export_journal(&scratch);
    for (args, says) in [
        (&["--since", "2026-13-01"][..], "'2026-13-01' for '--since <TIME>'"),
        (&["--since", "2026-10-01", "--until", "yesterday"], "'yesterday' for '--until <TIME>'"),
        (&["--since", "2026-10-01T08:00:00"], "needs its offset from UTC"),
        (&["--since", "2026-10-01", "--format", "xlsx"], "'xlsx' for '--format <FORMAT>'"),
        (&["--until", "2026-10-01"], "--since"),
        (&["--since", "2026-10-01", "--until", "2026-10-01"], "--until: 2026-10-01T00:00:00.000Z is not after --since"),
        (&["--since", "2026-10-01", "--json"], "--json prints a summary of an export to a file: give --output FILE"),
        (&["--since", "2026-10-01", "--output", "/no/such/folder/x.csv"], "path: cannot create"),
    ] {
        let mut all = vec!["journal", "export", "--journal", &url];
        all.extend(args);
        let out = run(&all).expect(2);
        let line = out.one_error_line();
        assert!(line.contains(says), "{args:?}: {line}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
    }
}

#[test]
fn journal_resolve_closes_gaps_by_hand_and_keeps_the_note() {
    let scratch = Scratch::new("resolve");
    let url = prepared_journal(&scratch);
    run(&["journal", "gaps", "--journal", &url]).expect(1);

    // No note: a usage error, and nothing is resolved.
    let line = run(&["journal", "resolve", "3-4", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.contains("--note") && line.ends_with("(see 'slotpartner journal resolve --help')"), "{line}");
    let line =
        run(&["journal", "resolve", "3-4", "--note", " ", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.starts_with("slotpartner: note: "), "{line}");
    let line =
        run(&["journal", "resolve", "7-9", "--note", "x", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.contains("beyond the highest index seen (8)"), "{line}");
    assert_eq!(run(&["journal", "status", "--journal", &url, "--json"]).expect(1).json()["missing"], 3);

    let out =
        run(&["journal", "resolve", "3-4", "--note", "ticket 12: no events 3 and 4", "--journal", &url]).expect(0);
    assert_eq!(out.stdout, "resolved 3-4: 2 missing indexes closed (1 missing now)\n");
    let out = run(&["journal", "gaps", "--journal", &url]).expect(1);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], "7");
    assert!(lines[1].starts_with("resolved: id=1 range=3-4 closed=2 numbering=1 at=20"), "{}", lines[1]);
    assert!(lines[1].ends_with(r#" note="ticket 12: no events 3 and 4""#), "{}", lines[1]);

    // A single index; then no gap remains: exit 0, the resolutions listed.
    run(&["journal", "resolve", "7", "--note", "settled by hand", "--journal", &url]).expect(0);
    let json = run(&["journal", "gaps", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!((json["missing"].as_u64(), json["needs_attention"].as_bool()), (Some(0), Some(false)));
    assert_eq!(json["ranges"], serde_json::json!([]));
    let resolved = json["resolved"].as_array().unwrap();
    assert_eq!(resolved.len(), 2);
    assert_eq!((resolved[0]["first"].as_i64(), resolved[0]["last"].as_i64()), (Some(7), Some(7)));
    assert_eq!((resolved[1]["first"].as_i64(), resolved[1]["closed"].as_i64()), (Some(3), Some(2)));
    assert_eq!(resolved[1]["note"], "ticket 12: no events 3 and 4");
    assert!(is_rfc3339_utc(resolved[1]["at"].as_str().unwrap()));
    let json = run(&["journal", "status", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!((json["missing"].as_u64(), json["resolved"].as_u64()), (Some(0), Some(3)));

    let json = run(&["journal", "resolutions", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!(json.as_array().unwrap().len(), 2);
    let out = run(&["journal", "resolutions", "--journal", &url, "--limit", "1"]).expect(0);
    assert_eq!(out.stdout.lines().count(), 1);
    assert!(out.stdout.starts_with("id=2 range=7 closed=1 "), "{}", out.stdout);
    assert!(out.stderr.contains("only the first 1 resolutions"), "{}", out.stderr);
}

#[test]
fn an_index_jump_needs_attention_until_an_operator_decides_it() {
    let scratch = Scratch::new("jumps");
    let (url, journal) = journal_of_refunds(&scratch, 5, &[]);
    run(&["journal", "status", "--journal", &url]).expect(0);
    const FAR: i64 = 1_000_000_000_000;
    let Begin::New(claim) = journal.begin(&delivery(&refund_body(9_999, FAR))).unwrap() else { panic!() };
    journal.finish(&claim, b"{}").unwrap();

    // The stretch is not counted missing, but the jump is open: exit 1.
    let out = run(&["journal", "status", "--journal", &url]).expect(1);
    assert!(out.stdout.lines().any(|l| l == "index jumps:    1"), "{}", out.stdout);
    assert!(out.stdout.lines().any(|l| l == "missing:        0"), "{}", out.stdout);
    let json = run(&["journal", "jumps", "--journal", &url, "--json"]).expect(1).json();
    let jumps = json.as_array().unwrap();
    assert_eq!(jumps.len(), 1);
    let jump = &jumps[0];
    assert_eq!((jump["kind"].as_str(), jump["index"].as_i64()), (Some("jump"), Some(FAR)));
    assert_eq!(jump["previous_highest"], 5);
    assert_eq!(
        (jump["name"].as_str(), jump["key"].as_str()),
        (Some("gameSessionBuyRefund"), Some("gameSessionBuyRefund:9999"))
    );
    assert!(is_rfc3339_utc(jump["at"].as_str().unwrap()), "{jump}");
    assert_eq!(jump["decision"], serde_json::Value::Null);
    let id = jump["id"].as_i64().unwrap().to_string();
    let out = run(&["journal", "jumps", "--journal", &url]).expect(1);
    assert!(
        out.stdout.starts_with(&format!(
            "id={id} kind=jump index={FAR} previous_highest=5 event=gameSessionBuyRefund key=gameSessionBuyRefund:9999 numbering=1 at=20"
        )) && out.stdout.ends_with(" state=open\n"),
        "{}",
        out.stdout
    );
    let out = run(&["journal", "gaps", "--journal", &url]).expect(1);
    assert!(out.stdout.starts_with(&format!("jump: id={id} kind=jump index={FAR} ")), "{}", out.stdout);
    let gaps = run(&["journal", "gaps", "--journal", &url, "--json"]).expect(1).json();
    assert_eq!(gaps["index_jumps"][0]["index"], FAR);

    let line =
        run(&["journal", "accept-jump", "99", "--note", "x", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.starts_with("slotpartner: id: no open index jump has id 99"), "{line}");
    let out = run(&["journal", "accept-jump", &id, "--note", "x", "--journal", &url]).expect(0);
    assert_eq!(out.stdout, format!("index jump {id} accepted (0 open now, 0 indexes missing)\n"));
    run(&["journal", "status", "--journal", &url]).expect(0);
    run(&["journal", "gaps", "--journal", &url]).expect(0);
    assert_eq!(run(&["journal", "jumps", "--journal", &url, "--json"]).expect(0).json(), serde_json::json!([]));
    let all = run(&["journal", "jumps", "--all", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!((all[0]["decision"].as_str(), all[0]["note"].as_str()), (Some("accepted"), Some("x")));

    // A jump that was an outage: its stretch counts as missing, for recovery.
    let Begin::New(claim) = journal.begin(&delivery(&refund_body(9_998, FAR + 200_001))).unwrap() else { panic!() };
    journal.finish(&claim, b"{}").unwrap();
    let json = run(&["journal", "jumps", "--journal", &url, "--json"]).expect(1).json();
    let id = json[0]["id"].as_i64().unwrap().to_string();
    assert_eq!(json[0]["previous_highest"], FAR);
    let out = run(&["journal", "jump-is-gap", &id, "--note", "the endpoint was down", "--journal", &url]).expect(0);
    assert!(out.stdout.contains("200000 indexes missing"), "{}", out.stdout);
    let out = run(&["journal", "gaps", "--journal", &url]).expect(1);
    assert_eq!(out.stdout, format!("{}-{}\n", FAR + 1, FAR + 200_000));

    // The service restarted its numbering: a new one counts from 1 afresh, once the operator
    // says what becomes of the 200,000 indexes still missing (refused without it).
    let line = run(&["journal", "renumber", "--from", "1", "--note", "service reset", "--journal", &url])
        .expect(2)
        .one_error_line()
        .to_owned();
    assert!(line.contains("indexes of the current numbering are missing") && line.contains("give them up"), "{line}");
    let out =
        run(&["journal", "renumber", "--from", "1", "--note", "service reset", "--give-up-gaps", "--journal", &url])
            .expect(0);
    assert_eq!(out.stdout, "numbering 2 starts at index 1\n");
    let resolutions = run(&["journal", "resolutions", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!(
        (resolutions[0]["first"].as_i64(), resolutions[0]["last"].as_i64(), resolutions[0]["note"].as_str()),
        (Some(FAR + 1), Some(FAR + 200_000), Some("given up by renumbering from 1: service reset"))
    );
    let json = run(&["journal", "status", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!((json["numbering"].as_i64(), json["missing"].as_u64()), (Some(2), Some(0)));
    let all = run(&["journal", "jumps", "--all", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!((all[0]["kind"].as_str(), all[0]["index"].as_i64()), (Some("renumbered"), Some(1)));
}

#[test]
fn an_abandoned_delivery_needs_attention() {
    let scratch = Scratch::new("abandoned");
    let (url, journal) = journal_of_refunds(&scratch, 5, &[4]);
    let Begin::New(claim) = journal.begin(&delivery(&refund_body(704, 4))).unwrap() else { panic!() };
    run(&["journal", "status", "--journal", &url]).expect(0);
    journal.abandon(&claim).unwrap();

    let out = run(&["journal", "status", "--journal", &url]).expect(1);
    assert!(out.stdout.lines().any(|l| l == "unfinished:     1"), "{}", out.stdout);
    assert!(out.stdout.lines().any(|l| l == "missing:        0"), "{}", out.stdout);
    let json = run(&["journal", "status", "--journal", &url, "--json"]).expect(1).json();
    assert_eq!((json["unfinished"].as_u64(), json["missing"].as_u64()), (Some(1), Some(0)));
    let out = run(&["journal", "gaps", "--journal", &url]).expect(1);
    assert_eq!(out.stdout, "unfinished: 4\n");
    let json = run(&["journal", "gaps", "--journal", &url, "--json"]).expect(1).json();
    assert_eq!((json["unfinished"].clone(), json["missing"].as_u64()), (serde_json::json!([4]), Some(0)));

    // Closed by hand with a note: nothing needs attention any more.
    run(&["journal", "close-unfinished", "4", "--journal", &url]).expect(2);
    run(&["journal", "close-unfinished", "3", "--note", "x", "--journal", &url]).expect(2);
    let out = run(&["journal", "close-unfinished", "4", "--note", "paid by hand", "--journal", &url]).expect(0);
    assert_eq!(out.stdout, "closed 1 unfinished deliveries at index 4 (0 unfinished now)\n");
    run(&["journal", "status", "--journal", &url]).expect(0);
    run(&["journal", "gaps", "--journal", &url]).expect(0);
}

#[test]
fn conflicts_are_listed_with_both_contents_until_resolved() {
    let scratch = Scratch::new("conflicts");
    let url = prepared_journal(&scratch);
    let journal = open_journal(&url);
    let Begin::Conflict(_) = journal.begin(&delivery(&payout_body(900_002, 2, 999))).unwrap() else { panic!() };

    let json = run(&["journal", "status", "--journal", &url, "--json"]).expect(1).json();
    assert_eq!(json["open_conflicts"], 1);
    let json = run(&["journal", "conflicts", "--journal", &url, "--json"]).expect(1).json();
    let conflict = &json[0];
    assert_eq!(
        (conflict["key"].as_str(), conflict["transaction_id"].as_i64()),
        (Some("jackpotPayout:900002"), Some(900_002))
    );
    assert_eq!(conflict["outcome"], "refused");
    let differing = conflict["differing"].as_array().unwrap();
    assert_eq!(differing.len(), 1, "{conflict}");
    assert!(differing[0].as_str().unwrap().starts_with("moneyWon"), "{conflict}");
    assert!(conflict["first_content"].as_str().unwrap().contains("150000"), "{conflict}");
    assert!(conflict["now_content"].as_str().unwrap().contains("999"), "{conflict}");
    assert!(is_rfc3339_utc(conflict["first_seen"].as_str().unwrap()));
    let id = conflict["id"].as_i64().unwrap().to_string();

    let out = run(&["journal", "conflicts", "--journal", &url]).expect(1);
    assert!(out.stdout.starts_with(&format!("conflict {id}: jackpotPayout:900002 (open)\n")), "{}", out.stdout);
    for part in ["  differs: moneyWon", "  first content: {", "  now content:   {", "  outcome: refused deliveries: 1 "]
    {
        assert!(out.stdout.lines().any(|l| l.starts_with(part)), "{part:?} in\n{}", out.stdout);
    }

    // `journal show` names the transaction's open conflict.
    let out = run(&["journal", "show", "900002", "--journal", &url]).expect(0);
    assert!(out.stdout.contains(&format!("\nconflict {id}: jackpotPayout:900002 (open)\n")), "{}", out.stdout);
    let json = run(&["journal", "show", "900002", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!(json[0]["open_conflicts"][0]["id"].as_i64().unwrap().to_string(), id);
    let json = run(&["journal", "show", "900001", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!(json[0]["open_conflicts"], serde_json::json!([]));

    run(&["journal", "resolve-conflict", &id, "--journal", &url]).expect(2);
    let out = run(&["journal", "resolve-conflict", &id, "--note", "a test payout", "--journal", &url]).expect(0);
    assert_eq!(out.stdout, format!("conflict {id} resolved (0 open now)\n"));
    assert_eq!(run(&["journal", "conflicts", "--journal", &url, "--json"]).expect(0).json(), serde_json::json!([]));
    let all = run(&["journal", "conflicts", "--all", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!(all[0]["note"], "a test payout");
    assert!(is_rfc3339_utc(all[0]["resolved"].as_str().unwrap()));
    let out = run(&["journal", "show", "900002", "--journal", &url]).expect(0);
    assert!(!out.stdout.contains("conflict"), "{}", out.stdout);
    run(&["journal", "resolve-conflict", &id, "--note", "again", "--journal", &url]).expect(2);
}

// ---------------------------------------------------------------------------------------------
// recover

/// The arguments of `recover` against `base_url` and `endpoint`, taking gaps however young
/// (`--min-age 0s`: the gaps of these tests were made a moment ago).
fn recover_args<'a>(journal: &'a str, base_url: &'a str, ca: &'a str, endpoint: &'a Endpoint) -> Vec<&'a str> {
    vec![
        "recover",
        "--journal",
        journal,
        "--base-url",
        base_url,
        "--token",
        TOKEN,
        "--ca-file",
        ca,
        "--callback-url",
        &endpoint.url,
        "--retries",
        "0",
        "--probe",
        "0",
        "--min-age",
        "0s",
    ]
}

/// The seed of a burst of `count` whose last event is delivered (a lost last event cannot be
/// seen missing: nothing after it arrived).
fn seed_keeping_the_last(count: u64, shares: Shares) -> u64 {
    (1..).find(|&seed| !burst::schedule(1, count, shares, seed).lost.contains(&count)).unwrap()
}

#[test]
fn recover_closes_every_gap_once_and_then_finds_nothing_to_do() {
    const COUNT: u64 = 300;
    let shares = Shares { lose: 0.05, repeat: 0.03, reorder: 0.05 };
    let seed = seed_keeping_the_last(COUNT, shares);
    let scratch = Scratch::new("recover");
    let url = scratch.journal_url();
    let journal = open_journal(&url);
    let endpoint = Endpoint::start(journal);
    let service = sandbox(seed, COUNT);
    let ca = ca_file(&scratch, &service);

    // The service's deliveries, some lost, repeated and reordered.
    let mut options = BurstOptions::new(&endpoint.url, COUNT);
    options.seed = seed;
    options.mix = EventMix::Mixed;
    options.shares = shares;
    options.quiet = true;
    let report = burst::run(&options, &mut std::io::sink()).unwrap();
    assert!(report.ok, "every delivery answered");
    let lost: Vec<i64> = report.lost_indexes.iter().map(|&i| i as i64).collect();
    assert_eq!(lost.len(), 15);
    let gaps = run(&["journal", "gaps", "--journal", &url, "--json"]).expect(1).json();
    assert_eq!(gaps["missing"], 15);

    // A dry run lists them and changes nothing.
    let base = service.base_url();
    let mut args = recover_args(&url, &base, path_str(&ca), &endpoint);
    args.push("--dry-run");
    let out = run(&args).expect(1);
    let listed: Vec<i64> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("index=")?.strip_suffix(" result=would_fetch")?.parse().ok())
        .collect();
    assert_eq!(listed, lost);
    assert_eq!(endpoint.requests(), report.deliveries);

    // One lost event arrives late, while the recovery runs: when the command delivers the
    // first lost index, the endpoint has just handled the last one.
    let (first_lost, last_lost) = (lost[0], *lost.last().unwrap());
    let late = slotpartner_sandbox::burst::burst_event(seed, EventMix::Mixed, last_lost as u64).body;
    endpoint.late_delivery_on(first_lost, late);

    let out = run(&recover_args(&url, &base, path_str(&ca), &endpoint)).expect(0);
    let s = summary(&out);
    assert_eq!(s["missing_before"], "15");
    assert_eq!(s["taken"], "15");
    assert_eq!(s["recovered"], "14", "{}", out.stdout);
    assert_eq!(s["handled_meanwhile"], "1");
    assert_eq!((s["not_fetched"].as_str(), s["endpoint_failures"].as_str()), ("0", "0"));
    assert_eq!((s["gaps_remaining"].as_str(), s["result"].as_str()), ("0", "ok"));
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("index=")).collect();
    assert_eq!(lines.len(), 15, "one line per index when stdout is not a terminal");
    assert!(lines[0].starts_with(&format!("index={first_lost} result=recovered event=")), "{}", lines[0]);
    assert!(lines[14].starts_with(&format!("index={last_lost} result=handled_meanwhile")), "{}", lines[14]);

    // Every index credited exactly once; the wallet holds all the service sent, lost included.
    let credits = endpoint.credits();
    assert_eq!(credits.len() as u64, COUNT);
    assert!(credits.values().all(|c| c.times == 1), "nothing credited twice");
    let indexes: BTreeSet<i64> = credits.values().filter_map(|c| c.index).collect();
    assert_eq!(indexes, (1..=COUNT as i64).collect());
    let money: i64 = credits.values().map(|c| c.money).sum();
    assert_eq!(money as u64, report.sent_money_total);

    let out = run(&["journal", "gaps", "--journal", &url]).expect(0);
    assert_eq!(out.stdout, "");

    // A second run finds nothing to do.
    let requests = endpoint.requests();
    let mut args = recover_args(&url, &base, path_str(&ca), &endpoint);
    args.push("--json");
    let json = run(&args).expect(0).json();
    assert_eq!((json["taken"].as_u64(), json["gaps_remaining"].as_u64()), (Some(0), Some(0)));
    assert_eq!(json["results"], serde_json::json!([]));
    assert_eq!(endpoint.requests(), requests, "nothing delivered");
}

#[test]
fn recover_under_faults_reports_each_index_and_a_later_run_finishes() {
    const COUNT: u64 = 40;
    let shares = Shares { lose: 0.1, repeat: 0.0, reorder: 0.0 };
    let seed = seed_keeping_the_last(COUNT, shares);
    let scratch = Scratch::new("recover-faults");
    let url = scratch.journal_url();
    let endpoint = Endpoint::start(open_journal(&url));
    let service = sandbox(seed, COUNT);
    let ca = ca_file(&scratch, &service);
    let mut options = BurstOptions::new(&endpoint.url, COUNT);
    options.seed = seed;
    options.shares = shares;
    options.quiet = true;
    let report = burst::run(&options, &mut std::io::sink()).unwrap();
    let lost: Vec<i64> = report.lost_indexes.iter().map(|&i| i as i64).collect();
    assert_eq!(lost.len(), 4);
    let base = service.base_url();
    let ca = path_str(&ca);

    // The service answers 500 to every fetch: each index is reported, the gaps remain.
    let failing = format!("{base}/fault/status/500");
    let out = run(&recover_args(&url, &failing, ca, &endpoint)).expect(1);
    for index in &lost {
        let line = out.stdout.lines().find(|l| l.starts_with(&format!("index={index} "))).unwrap();
        assert!(line.contains("result=not_fetched reason=service"), "{line}");
        assert!(line.contains("HTTP 500"), "{line}");
    }
    let s = summary(&out);
    assert_eq!((s["service"].as_str(), s["gaps_remaining"].as_str(), s["result"].as_str()), ("4", "4", "gaps_remain"));

    // A malformed event: not delivered, reported as invalid, with the field.
    let malformed = format!("{base}/fault/malformed");
    let mut args = recover_args(&url, &malformed, ca, &endpoint);
    args.push("--json");
    let json = run(&args).expect(1).json();
    assert_eq!(json["not_fetched"]["invalid_event"], 4);
    let first = &json["results"][0];
    assert_eq!((first["result"].as_str(), first["reason"].as_str()), (Some("not_fetched"), Some("invalid_event")));
    assert!(first["message"].as_str().unwrap().contains("transactionId"), "{first}");

    // The service times out for every fetch: time-outs count as connection failures, and the
    // run stops after three in a row.
    let slow = format!("{base}/fault/slow/2000");
    let mut args = recover_args(&url, &slow, ca, &endpoint);
    args.extend(["--timeout", "0.2"]);
    let out = run(&args).expect(1);
    assert_eq!(out.stdout.matches("result=not_fetched reason=service").count(), 3, "{}", out.stdout);
    let s = summary(&out);
    assert_eq!((s["taken"].as_str(), s["not_tried"].as_str()), ("4", "1"));
    assert!(
        out.stdout.contains(
            r#"summary stopped="the service could not be reached or did not answer in time 3 times in a row; 1 indexes not tried""#
        ),
        "{}",
        out.stdout
    );

    // The endpoint fails on one index: reported with its status; the others are recovered.
    endpoint.fail_index(lost[1]);
    let out = run(&recover_args(&url, &base, ca, &endpoint)).expect(1);
    let line = out.stdout.lines().find(|l| l.starts_with(&format!("index={} ", lost[1]))).unwrap();
    assert!(line.contains("result=endpoint_failed") && line.contains("http=500"), "{line}");
    let s = summary(&out);
    assert_eq!((s["recovered"].as_str(), s["endpoint_failures"].as_str()), ("3", "1"));
    assert_eq!(s["gaps_remaining"], "1");
    assert_eq!(s["remaining"], lost[1].to_string());

    // Healed, a later run finishes the job; nothing was credited twice.
    endpoint.heal();
    let out = run(&recover_args(&url, &base, ca, &endpoint)).expect(0);
    assert_eq!(summary(&out)["recovered"], "1");
    let credits = endpoint.credits();
    assert_eq!(credits.len() as u64, COUNT);
    assert!(credits.values().all(|c| c.times == 1));
    run(&["journal", "gaps", "--journal", &url]).expect(0);
}

#[test]
fn recover_stops_when_the_endpoint_cannot_be_reached_and_checks_its_configuration() {
    let scratch = Scratch::new("recover-config");
    let url = scratch.journal_url();
    let journal = open_journal(&url);
    for index in [1, 10] {
        let Begin::New(claim) = journal.begin(&delivery(&refund_body(index, index))).unwrap() else { panic!() };
        journal.finish(&claim, b"{}").unwrap();
    }
    let service = sandbox(1, 10);
    let ca = ca_file(&scratch, &service);
    let base = service.base_url();
    // A port nobody listens on: the run stops after three connection failures.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let callback = format!("http://{closed}/callback");
    let out = run(&[
        "recover",
        "--journal",
        &url,
        "--base-url",
        &base,
        "--token",
        TOKEN,
        "--ca-file",
        path_str(&ca),
        "--callback-url",
        &callback,
        "--min-age",
        "0s",
    ])
    .expect(1);
    let s = summary(&out);
    assert_eq!((s["endpoint_failures"].as_str(), s["not_tried"].as_str()), ("3", "5"));
    assert_eq!(s["gaps_remaining"], "8");
    assert!(
        out.stdout.contains(
            r#"summary stopped="the callback endpoint could not be reached or did not answer in time 3 times in a row; 5 indexes not tried""#
        ),
        "{}",
        out.stdout
    );

    let env = [
        ("SLOTPARTNER_JOURNAL", url.as_str()),
        ("SLOTPARTNER_BASE_URL", base.as_str()),
        ("SLOTPARTNER_TOKEN", TOKEN),
        ("SLOTPARTNER_CA_FILE", path_str(&ca)),
    ];
    let bad = |args: &[&str]| run_with(args, &env, None).expect(2).one_error_line().to_owned();
    assert_eq!(bad(&["recover"]), "slotpartner: no callback endpoint: give --callback-url URL");
    let line = bad(&["recover", "--callback-url", "http://partner.example/cb"]);
    assert!(line.starts_with("slotpartner: --callback-url: http:// only to a loopback host"), "{line}");
    let line = bad(&["recover", "--callback-url", &callback, "--base-url", "http://127.0.0.1:1"]);
    assert!(line.starts_with("slotpartner: base_url: must start with https://"), "{line}");
    let line = bad(&["recover", "--callback-url", &callback, "--token", "nope"]);
    assert!(line.starts_with("slotpartner: token: "), "{line}");
    let line = bad(&["recover", "--callback-url", &callback, "--fetch-action", ""]);
    assert!(line.starts_with("slotpartner: fetch_action: "), "{line}");
    let line = bad(&["recover", "--callback-url", &callback, "--limit", "0"]);
    assert!(line.contains("--limit") && line.ends_with("(see 'slotpartner recover --help')"), "{line}");
}

#[test]
fn recover_warns_when_the_endpoint_uses_another_journal() {
    let scratch = Scratch::new("recover-other-journal");
    let url = scratch.journal_url();
    let journal = open_journal(&url);
    for index in [1, 3] {
        let Begin::New(claim) = journal.begin(&delivery(&refund_body(index, index))).unwrap() else { panic!() };
        journal.finish(&claim, b"{}").unwrap();
    }
    let other = format!("sqlite:{}", scratch.path("other.db").display());
    let endpoint = Endpoint::start(open_journal(&other));
    let service = sandbox(1, 3);
    let ca = ca_file(&scratch, &service);
    let base = service.base_url();
    let out = run(&recover_args(&url, &base, path_str(&ca), &endpoint)).expect(1);
    assert_eq!(summary(&out)["recovered"], "1");
    assert_eq!(summary(&out)["remaining"], "2");
    assert_eq!(
        out.stderr,
        format!(
            "slotpartner: warning: index 2 was delivered to {} but is still missing from the journal: does that endpoint use the journal given here?\n",
            endpoint.url
        )
    );
}

#[test]
fn recover_reports_an_unfinished_delivery_the_endpoint_did_not_settle() {
    let scratch = Scratch::new("recover-unsettled");
    let (url, journal) = journal_of_service_events(&scratch, 1, &[1, 3]);
    let body = burst::burst_event(1, EventMix::Mixed, 2).body;
    let Begin::New(claim) = journal.begin(&delivery(&body)).unwrap() else { panic!() };
    journal.abandon(&claim).unwrap();
    // The endpoint writes to another journal: it answers, but this journal's claim stays.
    let other = format!("sqlite:{}", scratch.path("other.db").display());
    let endpoint = Endpoint::start(open_journal(&other));
    let service = sandbox(1, 3);
    let ca = ca_file(&scratch, &service);
    let out = run(&recover_args(&url, &service.base_url(), path_str(&ca), &endpoint)).expect(1);
    let line = out.stdout.lines().find(|l| l.starts_with("index=2 ")).unwrap();
    assert!(line.starts_with("index=2 result=unsettled "), "{line}");
    assert!(line.contains(" http=200 unfinished=true message="), "{line}");
    assert!(line.contains("yet the journal still holds ") && line.contains(" (abandoned) at index 2"), "{line}");
    let s = summary(&out);
    assert_eq!((s["unsettled"].as_str(), s["recovered"].as_str()), ("1", "0"));
    assert_eq!((s["unfinished_remaining"].as_str(), s["result"].as_str()), ("1", "attention_needed"));
    assert_eq!(endpoint.credits().len(), 1, "the endpoint did credit it, in its own journal");
}

#[test]
fn recover_delivers_over_https_trusting_the_endpoint_ca() {
    const COUNT: u64 = 30;
    let shares = Shares { lose: 0.1, repeat: 0.0, reorder: 0.0 };
    let seed = seed_keeping_the_last(COUNT, shares);
    let scratch = Scratch::new("recover-https");
    let url = scratch.journal_url();
    let (endpoint, endpoint_ca) = Endpoint::start_tls(open_journal(&url));
    let endpoint_ca = scratch.write("endpoint-ca.pem", endpoint_ca.as_bytes());
    let service = sandbox(seed, COUNT);
    let ca = ca_file(&scratch, &service);
    let mut options = BurstOptions::new(&endpoint.url, COUNT);
    options.seed = seed;
    options.shares = shares;
    options.quiet = true;
    options.ca_file = Some(endpoint_ca.clone());
    assert!(burst::run(&options, &mut std::io::sink()).unwrap().ok);
    let base = service.base_url();
    assert!(endpoint.url.starts_with("https://127.0.0.1:"));

    // The endpoint's own CA is not trusted: each delivery fails with the TLS error, and the
    // run stops after three of them.
    let out = run(&recover_args(&url, &base, path_str(&ca), &endpoint)).expect(1);
    let line = out.stdout.lines().find(|l| l.contains("result=endpoint_failed")).unwrap();
    assert!(line.to_lowercase().contains("certificate"), "{line}");

    let env = [("SLOTPARTNER_CALLBACK_CA_FILE", path_str(&endpoint_ca))];
    let out = run_with(&recover_args(&url, &base, path_str(&ca), &endpoint), &env, None).expect(0);
    assert_eq!(summary(&out)["recovered"], "3");
    let credits = endpoint.credits();
    assert_eq!(credits.len() as u64, COUNT);
    assert!(credits.values().all(|c| c.times == 1));
}

/// A journal holding the sandbox's own events (seed, mixed) at `done`, each handled.
fn journal_of_service_events(
    scratch: &Scratch,
    seed: u64,
    done: &[i64],
) -> (String, std::sync::Arc<slotpartner::Journal>) {
    let url = scratch.journal_url();
    let journal = open_journal(&url);
    for &index in done {
        let body = burst::burst_event(seed, EventMix::Mixed, index as u64).body;
        let Begin::New(claim) = journal.begin(&delivery(&body)).unwrap() else { panic!() };
        journal.finish(&claim, b"{}").unwrap();
    }
    (url, journal)
}

#[test]
fn recover_holds_the_journal_lock_and_a_second_run_waits_its_turn() {
    let scratch = Scratch::new("recover-lock");
    let (url, journal) = journal_of_service_events(&scratch, 1, &[1, 4]);
    let endpoint = Endpoint::start(open_journal(&url));
    let service = sandbox(1, 4);
    let ca = ca_file(&scratch, &service);
    let (base, ca) = (service.base_url(), path_str(&ca).to_owned());

    // Another holder, taken by hand: the run does not start, and says who holds it since when.
    journal.take_lock("recover", "someone else", Duration::from_secs(60)).unwrap();
    let out = run(&recover_args(&url, &base, &ca, &endpoint)).expect(2);
    let line = out.one_error_line();
    assert!(line.starts_with("slotpartner: another recovery run holds the journal's lock"), "{line}");
    assert!(line.contains("recover is held by someone else since 20"), "{line}");
    assert_eq!(endpoint.requests(), 0, "nothing delivered");
    assert!(journal.take_lock("recover", "a third", Duration::from_secs(1)).is_err(), "still held");
    journal.release_lock("recover", "someone else").unwrap();

    // Two runs at once: while the first delivers (the endpoint is slow on index 2), the second
    // finds the lock the first holds and names it.
    endpoint.slow_index(2, Duration::from_millis(1500));
    let args: Vec<String> = recover_args(&url, &base, &ca, &endpoint).iter().map(|a| a.to_string()).collect();
    let first = std::thread::spawn(move || run(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    let waited = std::time::Instant::now();
    while endpoint.requests() == 0 {
        assert!(waited.elapsed() < Duration::from_secs(30), "the first run delivers");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = run(&recover_args(&url, &base, &ca, &endpoint)).expect(2);
    let line = out.one_error_line();
    assert!(line.contains("recover is held by slotpartner recover, pid ") && line.contains(" since 20"), "{line}");
    let out = first.join().unwrap().expect(0);
    assert_eq!(summary(&out)["recovered"], "2");
    assert_eq!(endpoint.credits().len(), 2);

    // Released at the end of the run.
    journal.take_lock("recover", "someone else", Duration::from_secs(60)).unwrap();
}

#[test]
fn recover_stops_at_max_time_and_names_what_was_not_tried() {
    let scratch = Scratch::new("recover-max-time");
    let (url, _journal) = journal_of_service_events(&scratch, 1, &[1, 5]);
    let endpoint = Endpoint::start(open_journal(&url));
    let service = sandbox(1, 5);
    let ca = ca_file(&scratch, &service);
    let (base, ca) = (service.base_url(), path_str(&ca).to_owned());

    let mut args = recover_args(&url, &base, &ca, &endpoint);
    args.extend(["--max-time", "0s"]);
    let out = run(&args).expect(1);
    assert!(!out.stdout.contains("index="), "{}", out.stdout);
    let s = summary(&out);
    assert_eq!((s["taken"].as_str(), s["not_tried"].as_str(), s["result"].as_str()), ("3", "3", "gaps_remain"));
    assert!(
        out.stdout.contains(r#"summary stopped="the run reached --max-time 0s; 3 indexes not tried""#),
        "{}",
        out.stdout
    );
    assert_eq!(endpoint.requests(), 0);

    // One second against a service that takes 0.7 s a fetch: one or two indexes, then a stop.
    let slow = format!("{base}/fault/slow/700");
    let args = recover_args(&url, &slow, &ca, &endpoint);
    let out = run_with(&args, &[("SLOTPARTNER_MAX_TIME", "1s")], None).expect(1);
    let json_like = summary(&out);
    let not_tried: u64 = json_like["not_tried"].parse().unwrap();
    assert!((1..=2).contains(&not_tried), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!("the run reached --max-time 1s; {not_tried} indexes not tried")),
        "{}",
        out.stdout
    );
    assert_eq!(out.stdout.lines().filter(|l| l.starts_with("index=")).count() as u64, 3 - not_tried);

    // The default leaves time enough: the rest is recovered.
    run(&recover_args(&url, &base, &ca, &endpoint)).expect(0);
    assert_eq!(endpoint.credits().len(), 3);
}

#[test]
fn recover_stops_fetching_what_the_service_keeps_answering_404() {
    let scratch = Scratch::new("recover-not-found");
    let (url, _journal) = journal_of_refunds(&scratch, 5, &[2, 3, 4]);
    let endpoint = Endpoint::start(open_journal(&url));
    // The service knows index 1 only: 2, 3 and 4 are answered 404.
    let service = sandbox(1, 1);
    let ca = ca_file(&scratch, &service);
    let (base, ca) = (service.base_url(), path_str(&ca).to_owned());
    let mut args = recover_args(&url, &base, &ca, &endpoint);
    args.extend(["--not-found-limit", "3"]);

    for run_number in 1..=3 {
        let out = run(&args).expect(1);
        let lines: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("index=")).collect();
        assert_eq!(lines.len(), 3, "run {run_number}:\n{}", out.stdout);
        assert!(lines.iter().all(|l| l.contains("result=not_fetched reason=not_found")), "{}", out.stdout);
        let s = summary(&out);
        let unrecoverable = if run_number < 3 { "-" } else { "2-4" };
        assert_eq!(s["unrecoverable"], unrecoverable, "run {run_number}:\n{}", out.stdout);
        if run_number == 1 {
            // The option decides what counts as unrecoverable, in every command.
            let json = run(&["journal", "status", "--journal", &url, "--json"]).expect(1).json();
            assert_eq!(json["unrecoverable"], 0);
            let json =
                run(&["journal", "status", "--journal", &url, "--json", "--not-found-limit", "1"]).expect(1).json();
            assert_eq!(json["unrecoverable"], 3);
        }
    }

    // The fourth run reports them and fetches nothing.
    let out = run(&args).expect(1);
    assert!(!out.stdout.contains("index="), "{}", out.stdout);
    let s = summary(&out);
    assert_eq!((s["taken"].as_str(), s["unrecoverable"].as_str()), ("0", "2-4"));
    assert_eq!((s["gaps_remaining"].as_str(), s["result"].as_str()), ("3", "gaps_remain"));
    let mut json_args = args.clone();
    json_args.push("--json");
    let json = run(&json_args).expect(1).json();
    assert_eq!(json["unrecoverable"], serde_json::json!([2, 3, 4]));
    assert_eq!((json["unrecoverable_count"].as_u64(), json["taken"].as_u64()), (Some(3), Some(0)));
    assert_eq!(json["results"], serde_json::json!([]));
    let out = run(&["journal", "gaps", "--journal", &url, "--not-found-limit", "3"]).expect(1);
    assert_eq!(out.stdout, "2-4\nunrecoverable: 2-4\n");

    // A higher limit makes them worth fetching again.
    let out =
        run_with(&recover_args(&url, &base, &ca, &endpoint), &[("SLOTPARTNER_NOT_FOUND_LIMIT", "5")], None).expect(1);
    assert_eq!(out.stdout.matches("reason=not_found").count(), 3, "{}", out.stdout);

    // Resolved by hand, nothing is left to do.
    run(&["journal", "resolve", "2-4", "--note", "the service lost them", "--journal", &url]).expect(0);
    let out = run(&args).expect(0);
    assert_eq!((summary(&out)["unrecoverable"].as_str(), summary(&out)["result"].as_str()), ("-", "ok"));
    assert_eq!(endpoint.requests(), 0);
}

#[test]
fn recover_settles_unfinished_deliveries_and_reports_those_it_cannot() {
    let scratch = Scratch::new("recover-unfinished");
    let (url, journal) = journal_of_service_events(&scratch, 1, &[1, 3, 4]);
    // Index 2: the service's own event, claimed and abandoned (the partner's database failed).
    let body = burst::burst_event(1, EventMix::Mixed, 2).body;
    let Begin::New(claim) = journal.begin(&delivery(&body)).unwrap() else { panic!() };
    journal.abandon(&claim).unwrap();
    // Index 5: another transaction than the service's event 5, abandoned.
    let Begin::New(claim) = journal.begin(&delivery(&refund_body(77, 5))).unwrap() else { panic!() };
    journal.abandon(&claim).unwrap();
    let endpoint = Endpoint::start(open_journal(&url));
    let service = sandbox(1, 5);
    let ca = ca_file(&scratch, &service);
    let (base, ca) = (service.base_url(), path_str(&ca).to_owned());
    run(&["journal", "gaps", "--journal", &url]).expect(1);

    // The service fails: no index is missing, yet the run is no success.
    let failing = format!("{base}/fault/status/500");
    let out = run(&recover_args(&url, &failing, &ca, &endpoint)).expect(1);
    let lines: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("index=")).collect();
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    for (line, index) in lines.iter().zip([2, 5]) {
        assert!(line.starts_with(&format!("index={index} result=not_fetched reason=service")), "{line}");
        assert!(line.contains(" unfinished=true message="), "{line}");
        assert!(line.contains(&format!("the delivery claimed at index {index} stays unfinished")), "{line}");
    }
    let s = summary(&out);
    assert_eq!((s["unfinished_before"].as_str(), s["gaps_remaining"].as_str()), ("2", "0"));
    assert_eq!((s["unfinished_remaining"].as_str(), s["result"].as_str()), ("2", "attention_needed"));

    // The service answers: index 2 is settled; index 5 holds another transaction, which the
    // operator must settle: it is not delivered.
    let mut args = recover_args(&url, &base, &ca, &endpoint);
    args.push("--json");
    let json = run(&args).expect(1).json();
    let results = json["results"].as_array().unwrap();
    assert_eq!((results[0]["index"].as_i64(), results[0]["result"].as_str()), (Some(2), Some("recovered")));
    assert_eq!(results[0]["unfinished"], true);
    assert_eq!(
        (results[1]["index"].as_i64(), results[1]["result"].as_str(), results[1]["reason"].as_str()),
        (Some(5), Some("not_fetched"), Some("journal"))
    );
    let message = results[1]["message"].as_str().unwrap();
    assert!(
        message.contains("with transactionId 900000005")
            && message.contains("gameSessionBuyRefund:77 (abandoned, transactionId 77)"),
        "{message}"
    );
    assert_eq!((json["not_fetched"]["journal"].as_u64(), json["unfinished_remaining"].as_u64()), (Some(1), Some(1)));
    assert_eq!(json["needs_attention"], true);
    assert_eq!(endpoint.requests(), 1, "index 5 was not delivered");
    let credits = endpoint.credits();
    assert_eq!(credits.len(), 1);
    assert_eq!(credits[&900_000_002].times, 1);
    let json = run(&["journal", "gaps", "--journal", &url, "--json"]).expect(1).json();
    assert_eq!(json["unfinished"], serde_json::json!([5]));
}

#[test]
fn recover_leaves_gaps_and_unfinished_deliveries_younger_than_min_age_for_the_next_run() {
    let scratch = Scratch::new("recover-min-age");
    let (url, journal) = journal_of_service_events(&scratch, 1, &[1, 4]);
    // Index 5: the service's own event, abandoned a moment ago (the service retries it itself).
    let body = burst::burst_event(1, EventMix::Mixed, 5).body;
    let Begin::New(claim) = journal.begin(&delivery(&body)).unwrap() else { panic!() };
    journal.abandon(&claim).unwrap();
    let endpoint = Endpoint::start(open_journal(&url));
    let service = sandbox(1, 5);
    let ca = ca_file(&scratch, &service);
    let (base, ca) = (service.base_url(), path_str(&ca).to_owned());
    // The default --min-age, 1m: without the `--min-age 0s` the other tests pass.
    let args: Vec<&str> = {
        let all = recover_args(&url, &base, &ca, &endpoint);
        let at = all.iter().position(|a| *a == "--min-age").unwrap();
        all.iter().enumerate().filter(|(i, _)| *i != at && *i != at + 1).map(|(_, a)| *a).collect()
    };

    // Gaps 2-3 were found missing a moment ago, and 5 abandoned a moment ago: nothing is taken.
    // The young gaps are no bad news, the unfinished delivery is (exit 1).
    let mut dry = args.clone();
    dry.push("--dry-run");
    let out = run(&dry).expect(1);
    assert!(!out.stdout.contains("index="), "{}", out.stdout);
    let s = summary(&out);
    assert_eq!((s["would_fetch"].as_str(), s["gaps_too_young"].as_str()), ("0", "2"));
    let out = run(&args).expect(1);
    let s = summary(&out);
    assert_eq!((s["taken"].as_str(), s["gaps_remaining"].as_str(), s["gaps_too_young"].as_str()), ("0", "2", "2"));
    assert_eq!(s["result"], "attention_needed");
    assert_eq!(endpoint.requests(), 0);

    // Abandoned two minutes ago: taken, the young gaps still left; nothing else needs attention,
    // and the summary says it waits for them (exit 0: young gaps are no bad news yet).
    journal_sql(&scratch, "UPDATE sp_journal_delivery SET updated_ms = updated_ms - 120000 WHERE first_index = 5");
    let out = run(&args).expect(0);
    let s = summary(&out);
    assert_eq!((s["taken"].as_str(), s["recovered"].as_str(), s["result"].as_str()), ("1", "1", "waiting"));
    assert_eq!((s["gaps_remaining"].as_str(), s["gaps_too_young"].as_str()), ("2", "2"));
    assert!(out.stdout.contains("index=5 result=recovered"), "{}", out.stdout);

    // The gaps found missing two minutes ago (index 4 first seen then): taken.
    journal_sql(&scratch, "UPDATE sp_journal_runs SET since_ms = since_ms - 120000 WHERE lo = 4");
    let json = run(&[&args[..], &["--dry-run", "--json"]].concat()).expect(1).json();
    assert_eq!((json["would_fetch"].clone(), json["min_age"].as_str()), (serde_json::json!([2, 3]), Some("1m")));
    let out = run_with(&args, &[("SLOTPARTNER_MIN_AGE", "90s")], None).expect(0);
    let s = summary(&out);
    assert_eq!((s["recovered"].as_str(), s["gaps_remaining"].as_str(), s["result"].as_str()), ("2", "0", "ok"));
    assert_eq!(endpoint.credits().len(), 3);
}

// ---------------------------------------------------------------------------------------------
// journal prune

/// Runs `statements` on the scratch journal's SQLite file, behind the library's back.
fn journal_sql(scratch: &Scratch, statements: &str) {
    let connection = rusqlite::Connection::open(scratch.path("journal.db")).unwrap();
    connection.busy_timeout(Duration::from_secs(5)).unwrap();
    connection.execute_batch(statements).unwrap();
}

const DAY_MS: i64 = 86_400_000;

/// Moves the times of the deliveries of `transaction_ids` `days` back.
fn age_deliveries(scratch: &Scratch, transaction_ids: &str, days: i64) {
    let shift = days * DAY_MS;
    journal_sql(
        scratch,
        &format!(
            "UPDATE sp_journal_delivery SET created_ms = created_ms - {shift}, updated_ms = updated_ms - {shift}, finished_ms = finished_ms - {shift} WHERE transaction_id IN ({transaction_ids})"
        ),
    );
}

#[test]
fn journal_prune_compacts_old_replies_and_refuses_a_short_retention() {
    let scratch = Scratch::new("prune");
    let url = prepared_journal(&scratch);

    // A retention under a day, or a horizon not beyond it: usage errors, nothing pruned.
    let line =
        run(&["journal", "prune", "--older-than", "1h", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.contains("--older-than") && line.contains("shorter than 1d"), "{line}");
    let line = run(&["journal", "prune", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.contains("--older-than"), "{line}");
    let args = ["journal", "prune", "--older-than", "90d", "--forget-older-than", "30d", "--journal", &url];
    let line = run(&args).expect(2).one_error_line().to_owned();
    assert_eq!(
        line,
        "slotpartner: --forget-older-than (30d) must be longer than --older-than (90d): compact records outlive the replies"
    );

    // Nothing is old yet: complete, nothing removed.
    let json = run(&["journal", "prune", "--older-than", "90d", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!((json["compacted"].as_u64(), json["complete"].as_bool()), (Some(0), Some(true)));

    // Two replies finished 100 days ago: compacted; the refund of 8 (young) and the claim stay.
    age_deliveries(&scratch, "900001, 900002", 100);
    let json = run(&["journal", "prune", "--older-than", "90d", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!((json["compacted"].as_u64(), json["forgotten"].as_u64()), (Some(2), Some(0)));
    assert_eq!((json["refused_removed"].as_u64(), json["conflicts_removed"].as_u64()), (Some(0), Some(0)));
    assert_eq!((json["complete"].as_bool(), json["older_than_seconds"].as_u64()), (Some(true), Some(90 * 86_400)));
    assert!(json["batches"].as_u64().unwrap() >= 1, "{json}");
    assert!(json["longest_batch_ms"].as_f64().is_some() && json["bytes_returned"].as_u64().is_some(), "{json}");
    let out = run(&["journal", "show", "900001", "--journal", &url]).expect(0);
    assert!(out.stdout.lines().any(|l| l == "state:          pruned"), "{}", out.stdout);
    assert!(out.stdout.lines().any(|l| l == "reply:          -"), "{}", out.stdout);
    let json = run(&["journal", "show", "900002", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!(json[0]["state"], "pruned");
    let json = run(&["journal", "show", "900008", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!(json[0]["state"], "done");
    let status = run(&["journal", "status", "--journal", &url, "--json"]).expect(1).json();
    assert_eq!((status["pruned"].as_u64(), status["forgotten"].as_u64()), (Some(2), Some(0)));
    assert_eq!((status["handled"].as_u64(), status["missing"].as_u64()), (Some(3), Some(3)), "counts and gaps stay");

    // --max-time stops it after the first batch of one row: exit 1, more is left. (A reply is
    // stored now: the cutoff is never later than the newest stored reply less the retention.)
    let journal = open_journal(&url);
    for index in [9, 10] {
        let Begin::New(claim) = journal.begin(&delivery(&refund_body(900_000 + index, index))).unwrap() else {
            panic!()
        };
        journal.finish(&claim, b"{}").unwrap();
    }
    age_deliveries(&scratch, "900008, 900010", 100);
    let args = ["journal", "prune", "--older-than", "90d", "--batch", "1", "--max-time", "0s", "--journal", &url];
    let out = run(&args).expect(1);
    assert!(out.stdout.lines().any(|l| l == "compacted:         1"), "{}", out.stdout);
    assert!(out.stdout.lines().any(|l| l == "complete:          no"), "{}", out.stdout);
    assert_eq!(out.stderr, "slotpartner: prune stopped at --max-time 0s: more is left for the next run\n");
    let args =
        ["journal", "prune", "--older-than", "90d", "--batch", "1", "--max-time", "0s", "--journal", &url, "--json"];
    let json = run(&args).expect(1).json();
    assert_eq!((json["complete"].as_bool(), json["stopped_by"].as_str()), (Some(false), Some("max_time")));
    let json = run(&["journal", "prune", "--older-than", "90d", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!((json["compacted"].as_u64(), json["complete"].as_bool()), (Some(0), Some(true)));

    // Compact records older than --forget-older-than are removed.
    age_deliveries(&scratch, "900001", 400);
    let args = ["journal", "prune", "--older-than", "90d", "--forget-older-than", "365d", "--journal", &url, "--json"];
    let json = run(&args).expect(0).json();
    assert_eq!((json["forgotten"].as_u64(), json["forget_older_than_seconds"].as_u64()), (Some(1), Some(365 * 86_400)));
    run(&["journal", "show", "900001", "--journal", &url]).expect(1);
    let out = run(&["journal", "status", "--journal", &url]).expect(1);
    for line in ["pruned:         4", "forgotten:      1"] {
        assert!(out.stdout.lines().any(|l| l == line), "{line:?} in\n{}", out.stdout);
    }
}

#[test]
fn journal_status_tells_size_ages_and_upkeep() {
    let scratch = Scratch::new("status-vitals");
    let url = prepared_journal(&scratch);
    let out = run(&["journal", "status", "--journal", &url]).expect(1);
    let value = |label: &str| {
        out.stdout
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .unwrap_or_else(|| panic!("{label:?} in\n{}", out.stdout))
            .to_owned()
    };
    assert_eq!((value("pruned:         "), value("forgotten:      ")), ("0".to_owned(), "0".to_owned()));
    let size = value("size:           ");
    assert!(size.ends_with(" bytes") && size.trim_end_matches(" bytes").parse::<u64>().unwrap() > 0, "{size}");
    for label in ["oldest reply:   ", "last new index: ", "oldest gap:     "] {
        let text = value(label);
        let (time, age) = text.split_once(' ').unwrap();
        assert!(is_rfc3339_utc(time), "{label}{text}");
        assert!(age.starts_with('(') && age.ends_with(" ago)"), "{label}{text}");
    }
    let json = run(&["journal", "status", "--journal", &url, "--json"]).expect(1).json();
    assert!(json["size_bytes"].as_u64().unwrap() > 0, "{json}");
    for field in ["oldest_record", "last_delivery", "oldest_gap"] {
        assert!(is_rfc3339_utc(json[field].as_str().unwrap()), "{field}: {json}");
        assert!(json[format!("{field}_ms")].as_i64().unwrap() > 1_700_000_000_000, "{field}: {json}");
    }
    assert!(json["oldest_gap_age_seconds"].as_u64().unwrap() < 600, "{json}");

    // A gap found on a clock that was a day ahead: the time says so, never "0s ago".
    let db = rusqlite::Connection::open(scratch.path("journal.db")).unwrap();
    db.execute("UPDATE sp_journal_runs SET since_ms = since_ms + 86400000, last_ms = last_ms + 86400000", []).unwrap();
    drop(db);
    let out = run(&["journal", "status", "--journal", &url]).expect(1);
    let gap = out.stdout.lines().find_map(|l| l.strip_prefix("oldest gap:     ")).unwrap().to_owned();
    assert!(gap.ends_with(" ahead of this host's clock)"), "{gap}");
    assert!(gap.contains("(23h 59m") || gap.contains("(1d"), "{gap}");

    // Nothing missing: no oldest gap.
    let full = Scratch::new("status-vitals-full");
    journal_of_refunds(&full, 3, &[]);
    let out = run(&["journal", "status", "--journal", &full.journal_url()]).expect(0);
    assert!(out.stdout.lines().any(|l| l == "oldest gap:     none"), "{}", out.stdout);
    let json = run(&["journal", "status", "--journal", &full.journal_url(), "--json"]).expect(0).json();
    assert_eq!(
        (json["oldest_gap"].clone(), json["oldest_gap_age_seconds"].clone()),
        (serde_json::Value::Null, serde_json::Value::Null)
    );
}

#[test]
fn journal_gaps_older_than_lists_only_gaps_missing_that_long() {
    let scratch = Scratch::new("gaps-older-than");
    let url = prepared_journal(&scratch);
    // Gaps 3-4 and 7 were found missing a moment ago: left out, and no bad news.
    let out = run(&["journal", "gaps", "--older-than", "10m", "--journal", &url]).expect(0);
    assert_eq!(out.stdout, "");
    assert_eq!(out.stderr, "slotpartner: 3 missing indexes found missing less than 10m ago are not listed\n");
    let json = run(&["journal", "gaps", "--older-than", "10m", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!((json["ranges"].clone(), json["younger"].as_u64()), (serde_json::json!([]), Some(3)));
    assert_eq!((json["older_than"].as_str(), json["needs_attention"].as_bool()), (Some("10m"), Some(false)));
    assert_eq!(json["missing"], 3);

    // Index 5 was first seen an hour ago: gap 3-4 was found missing then; 7 is still young.
    journal_sql(&scratch, "UPDATE sp_journal_runs SET since_ms = since_ms - 3600000 WHERE lo = 5");
    let out = run(&["journal", "gaps", "--older-than", "10m", "--journal", &url]).expect(1);
    assert_eq!(out.stdout, "3-4\n");
    assert!(out.stderr.contains("1 missing indexes found missing less than 10m ago"), "{}", out.stderr);
    let out = run(&["journal", "gaps", "--older-than", "2h", "--journal", &url]).expect(0);
    assert_eq!(out.stdout, "");
    // Without --older-than, every gap, as before.
    assert_eq!(run(&["journal", "gaps", "--journal", &url]).expect(1).stdout, "3-4\n7\n");

    // Other attention items still make it bad news, whatever the gaps' age.
    let journal = open_journal(&url);
    let Begin::Conflict(_) = journal.begin(&delivery(&payout_body(900_002, 2, 999))).unwrap() else { panic!() };
    let out = run(&["journal", "gaps", "--older-than", "2h", "--journal", &url]).expect(1);
    assert_eq!(out.stdout, "conflicts: 1 open (see 'slotpartner journal conflicts')\n");
}

// ---------------------------------------------------------------------------------------------
// metrics

/// The samples of an exposition, by metric name, each checked to carry the label
/// `journal="<label>"` and to follow its `# HELP` and `# TYPE`.
fn samples(text: &str, label: &str) -> std::collections::HashMap<String, f64> {
    let mut found = std::collections::HashMap::new();
    let (mut helped, mut typed) = (BTreeSet::new(), std::collections::HashMap::new());
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            helped.insert(rest.split(' ').next().unwrap().to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            typed.insert(name.to_owned(), kind.to_owned());
        } else if !line.starts_with('#') && !line.is_empty() {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let (name, labels) = series.split_once('{').unwrap_or_else(|| panic!("labels in {line:?}"));
            assert_eq!(labels, format!("journal=\"{label}\"}}"), "{line}");
            assert!(helped.contains(name), "# HELP before {line:?}");
            let kind = &typed[name];
            assert_eq!(kind == "counter", name.ends_with("_total"), "{name} is a {kind}");
            found.insert(name.to_owned(), value.parse().unwrap_or_else(|_| panic!("a number in {line:?}")));
        }
    }
    found
}

/// A journal needing every kind of attention: gaps 3-4 and 7, an abandoned delivery at 9, and an
/// open conflict on transaction 900002.
fn troubled_journal(scratch: &Scratch) -> String {
    let url = prepared_journal(scratch);
    let journal = open_journal(&url);
    let Begin::New(claim) = journal.begin(&delivery(&refund_body(900_009, 9))).unwrap() else { panic!() };
    journal.abandon(&claim).unwrap();
    let Begin::Conflict(_) = journal.begin(&delivery(&payout_body(900_002, 2, 999))).unwrap() else { panic!() };
    url
}

#[test]
fn journal_status_prometheus_prints_the_exposition_and_up_0_when_unreadable() {
    let scratch = Scratch::new("status-prometheus");
    let url = troubled_journal(&scratch);
    // The journal needs attention, yet the exposition was printed: exit 0 (for cron's `&& mv`).
    let out = run(&["journal", "status", "--prometheus", "--journal", &url]).expect(0);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let s = samples(&out.stdout, &url);
    for (name, want) in [
        ("slotpartner_journal_up", 1.0),
        ("slotpartner_journal_handled_total", 3.0),
        ("slotpartner_journal_replayed_total", 1.0),
        ("slotpartner_journal_conflicts_total", 1.0),
        ("slotpartner_journal_refused_total", 1.0),
        ("slotpartner_journal_pruned_total", 0.0),
        ("slotpartner_journal_forgotten_total", 0.0),
        ("slotpartner_journal_missing_indexes", 3.0),
        ("slotpartner_journal_unrecoverable_indexes", 0.0),
        ("slotpartner_journal_resolved_indexes", 0.0),
        ("slotpartner_journal_unfinished_deliveries", 1.0),
        ("slotpartner_journal_in_progress_deliveries", 1.0),
        ("slotpartner_journal_open_conflicts", 1.0),
        ("slotpartner_journal_index_jumps_open", 0.0),
        ("slotpartner_journal_highest_index", 9.0),
    ] {
        assert_eq!(s.get(name), Some(&want), "{name} in\n{}", out.stdout);
    }
    assert!(s["slotpartner_journal_size_bytes"] > 0.0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    for name in [
        "slotpartner_journal_last_delivery_timestamp_seconds",
        "slotpartner_journal_oldest_gap_timestamp_seconds",
        "slotpartner_journal_oldest_record_timestamp_seconds",
    ] {
        assert!((now - 600.0..=now + 1.0).contains(&s[name]), "{name}: {} (now {now})", s[name]);
    }
    let line =
        run(&["journal", "status", "--prometheus", "--json", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.contains("--json"), "{line}");

    // Nothing missing: the gap's time is 0.
    let full = Scratch::new("status-prometheus-full");
    let (full_url, _) = journal_of_refunds(&full, 2, &[]);
    let out = run(&["journal", "status", "--prometheus", "--journal", &full_url]).expect(0);
    assert_eq!(samples(&out.stdout, &full_url)["slotpartner_journal_oldest_gap_timestamp_seconds"], 0.0);

    // An unreachable journal: up 0 alone, the error in a comment, no password anywhere.
    let secret = "postgres://partner:s3cret-pw@127.0.0.1:1/partner?sslmode=disable";
    let out = run(&["journal", "status", "--prometheus", "--journal", secret]).expect(0);
    let label = "postgres://partner@127.0.0.1:1/partner?sslmode=disable";
    assert_eq!(
        samples(&out.stdout, label).into_iter().collect::<Vec<_>>(),
        [("slotpartner_journal_up".to_owned(), 0.0)]
    );
    assert!(out.stdout.starts_with("# journal unreadable: "), "{}", out.stdout);
    assert!(!out.stdout.contains("s3cret") && !out.stderr.contains("s3cret"), "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.starts_with("slotpartner: warning: journal unreadable: "), "{}", out.stderr);
    let absent = format!("sqlite:{}", scratch.path("absent.db").display());
    let out = run(&["journal", "status", "--prometheus", "--journal", &absent]).expect(0);
    assert_eq!(samples(&out.stdout, &absent)["slotpartner_journal_up"], 0.0);
    // No journal at all: nothing to label, a configuration error.
    let line = run(&["journal", "status", "--prometheus"]).expect(2).one_error_line().to_owned();
    assert_eq!(line, "slotpartner: no journal: give --journal URL or set SLOTPARTNER_JOURNAL");
}

#[test]
fn metrics_serves_the_exposition_to_a_scrape() {
    let scratch = Scratch::new("metrics");
    let url = troubled_journal(&scratch);
    let server = MetricsServer::start(&url);
    let (status, head, body) = server.get("/metrics");
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{head}");
    assert!(head.contains(&format!("\r\nContent-Length: {}\r\n", body.len())), "{head}");
    let s = samples(&body, &url);
    assert_eq!((s["slotpartner_journal_up"], s["slotpartner_journal_handled_total"]), (1.0, 3.0));
    assert_eq!((s["slotpartner_journal_missing_indexes"], s["slotpartner_journal_open_conflicts"]), (3.0, 1.0));
    // The same as `journal status --prometheus`, but for the size (the server's reads).
    let printed = run(&["journal", "status", "--prometheus", "--journal", &url]).expect(0).stdout;
    let without_size = |text: &str| text.lines().filter(|l| !l.contains("size_bytes")).collect::<Vec<_>>().join("\n");
    assert_eq!(without_size(&body), without_size(&printed));

    // Read afresh for each scrape.
    let journal = open_journal(&url);
    let Begin::New(claim) = journal.begin(&delivery(&refund_body(900_003, 3))).unwrap() else { panic!() };
    journal.finish(&claim, b"{}").unwrap();
    let s = samples(&server.get("/metrics?x=1").2, &url);
    assert_eq!((s["slotpartner_journal_handled_total"], s["slotpartner_journal_missing_indexes"]), (4.0, 2.0));
    let (status, head, body) = server.ask(&format!("HEAD /metrics HTTP/1.0\r\nHost: {}\r\n\r\n", server.addr));
    assert_eq!((status, body.as_str()), (200, ""), "{head}");

    // Other paths, methods and malformed requests.
    assert_eq!(server.get("/").0, 404);
    assert_eq!(server.get("/metrics/x").0, 404);
    let (status, head, _) = server.ask("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert!(status == 405 && head.contains("\r\nAllow: GET, HEAD\r\n"), "{head}");
    assert_eq!(server.ask("nonsense\r\n\r\n").0, 400);
    let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(9 * 1024));
    assert_eq!(server.ask(&long).0, 414);

    // A stranger's silent connection does not hold the scrape up.
    let _idle = std::net::TcpStream::connect(&server.addr).unwrap();
    let started = std::time::Instant::now();
    assert_eq!(server.get("/metrics").0, 200);
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());

    // The journal gone: the scrape still answers, with up 0.
    drop(journal);
    std::fs::remove_file(scratch.path("journal.db")).unwrap();
    let (status, _, body) = server.get("/metrics");
    assert_eq!(status, 200);
    assert_eq!(samples(&body, &url).into_iter().collect::<Vec<_>>(), [("slotpartner_journal_up".to_owned(), 0.0)]);
    // A PostgreSQL journal (whose client runs a runtime of its own, here off the listener's) that
    // cannot be reached: up 0, without the password.
    let secret = "postgres://partner:s3cret-pw@127.0.0.1:1/partner?sslmode=disable";
    let unreachable = MetricsServer::start(secret);
    let (status, _, body) = unreachable.get("/metrics");
    assert_eq!(status, 200);
    let label = "postgres://partner@127.0.0.1:1/partner?sslmode=disable";
    assert_eq!(samples(&body, label).into_iter().collect::<Vec<_>>(), [("slotpartner_journal_up".to_owned(), 0.0)]);
    assert!(!body.contains("s3cret"), "{body}");

    // No address: a usage error.
    let line = run(&["metrics", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.contains("--listen"), "{line}");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let line = run(&["metrics", "--listen", &addr, "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.starts_with(&format!("slotpartner: listen: cannot listen on {addr}: ")), "{line}");
}

/// promtool, Prometheus' own checker (Debian package `prometheus`); `None` with a SKIP line when
/// it is not installed, except in CI (`CI` set), where its absence fails the test.
fn promtool() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PROMTOOL").map_or_else(|| std::path::PathBuf::from("promtool"), Into::into);
    let runs = std::process::Command::new(&path)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if runs {
        return Some(path);
    }
    let message = "promtool not found (Debian package `prometheus`: apt-get install prometheus)";
    assert!(std::env::var_os("CI").is_none(), "{message}: CI must run the Prometheus checks");
    println!("SKIP the promtool checks: {message}");
    None
}

/// Runs promtool with `args`, `input` on its stdin; panics with its output unless it succeeds.
fn promtool_ok(promtool: &std::path::Path, args: &[&str], input: &str) {
    use std::io::Write;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/prometheus");
    let mut child = std::process::Command::new(promtool)
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool {args:?} failed:\n{}{}\n--- input\n{input}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn promtool_accepts_the_metrics_and_the_alert_rules() {
    let Some(promtool) = promtool() else { return };
    let scratch = Scratch::new("promtool");
    let url = troubled_journal(&scratch);
    let printed = run(&["journal", "status", "--prometheus", "--journal", &url]).expect(0).stdout;
    promtool_ok(&promtool, &["check", "metrics"], &printed);
    let server = MetricsServer::start(&url);
    let (status, _, scraped) = server.get("/metrics");
    assert_eq!(status, 200);
    promtool_ok(&promtool, &["check", "metrics"], &scraped);
    let unreadable = run(&["journal", "status", "--prometheus", "--journal", "postgres://p:pw@127.0.0.1:1/x"]);
    promtool_ok(&promtool, &["check", "metrics"], &unreadable.expect(0).stdout);
    promtool_ok(&promtool, &["check", "rules", "slotpartner-alerts.yml"], "");
    promtool_ok(&promtool, &["test", "rules", "slotpartner-alerts.test.yml"], "");
}

// ---------------------------------------------------------------------------------------------
// inspect

#[test]
fn inspect_prints_every_field_of_a_valid_body() {
    let scratch = Scratch::new("inspect");
    let file = scratch.write("payout.json", payout_body(900_002, 42, 150_000).as_bytes());
    let out = run(&["inspect", path_str(&file)]).expect(0);
    for line in [
        "event: jackpotPayout (jackpot_payout)",
        "index: 42",
        r#"  jackpotIdentifier: "jp-1""#,
        "  moneyWon: 150000",
        "  isPrimary: true",
        "  bonusCode: (absent)",
        "  isMobile: (absent)",
        "extra: index = 42",
        r#"extra: note = {"a":[1, 2]}"#,
    ] {
        assert!(out.stdout.lines().any(|l| l == line), "{line:?} in\n{}", out.stdout);
    }
    // From stdin, as JSON: typed fields, then extra fields as raw JSON.
    let out = run_with(&["inspect", "-", "--json"], &[], Some(refund_body(7, 3).as_bytes())).expect(0);
    let json = out.json();
    assert_eq!(
        (json["valid"].as_bool(), json["kind"].as_str(), json["index"].as_i64()),
        (Some(true), Some("buy_refund"), Some(3))
    );
    assert_eq!(json["fields"]["transactionId"], 7);
    assert_eq!(json["fields"]["bonusCode"], serde_json::Value::Null);
    assert_eq!(json["extra"], serde_json::json!([{"name":"index","value":3}]));
    assert!(out.stdout.find("\"gameSessionIdentifier\"").unwrap() < out.stdout.find("\"isMobile\"").unwrap());
    // Another index field name.
    let body = payout_body(1, 1, 5).replace("\"index\"", "\"seq\"");
    let json =
        run_with(&["inspect", "-", "--json", "--index-field", "seq"], &[], Some(body.as_bytes())).expect(0).json();
    assert_eq!(json["index"], 1);
}

#[test]
fn inspect_names_the_exact_error_of_an_invalid_body() {
    let scratch = Scratch::new("inspect-invalid");
    let body = payout_body(900_002, 42, 150_000).replace("\"moneyWon\":150000", "\"moneyWon\":1.5");
    let file = scratch.write("bad.json", body.as_bytes());
    let out = run(&["inspect", path_str(&file)]).expect(1);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], "error: SP_ERR_WRONG_TYPE (wrong_type)");
    assert_eq!(lines[1], "field: jackpotPayout.moneyWon");
    assert!(lines[2].starts_with("message: jackpotPayout.moneyWon: "), "{}", lines[2]);
    assert_eq!(lines[3], "read: event=\"jackpotPayout\" index=42 transactionId=900002");
    assert!(
        lines[4].starts_with(r#"answer: HTTP 200 {"payout":{"success":false,"errorMessage":"jackpotPayout.moneyWon: "#),
        "{}",
        lines[4]
    );

    let json = run_with(&["inspect", "-", "--json"], &[], Some(b"[1,2]")).expect(1).json();
    assert_eq!((json["valid"].as_bool(), json["status"].as_str()), (Some(false), Some("SP_ERR_NOT_AN_OBJECT")));
    assert_eq!(json["answer"]["http_status"], 400);
    assert!(json["answer"]["body"].as_str().unwrap().contains("not_an_object"));

    let strict = refund_body(1, 1).replace("\"index\":1", "\"index\":\"1\"");
    run_with(&["inspect", "-"], &[], Some(strict.as_bytes())).expect(0);
    let out = run_with(&["inspect", "-", "--strict-index"], &[], Some(strict.as_bytes())).expect(1);
    assert!(out.stdout.contains("field: gameSessionBuyRefund.index"), "{}", out.stdout);

    let line = run(&["inspect", path_str(&scratch.path("absent.json"))]).expect(2).one_error_line().to_owned();
    assert!(line.starts_with("slotpartner: cannot open "), "{line}");
}

// ---------------------------------------------------------------------------------------------
// games

#[test]
fn games_as_a_table_and_as_json() {
    let scratch = Scratch::new("games");
    let service = sandbox(1, 1);
    let ca = ca_file(&scratch, &service);
    let base = service.base_url();
    let env =
        [("SLOTPARTNER_BASE_URL", base.as_str()), ("SLOTPARTNER_TOKEN", TOKEN), ("SLOTPARTNER_CA_FILE", path_str(&ca))];
    let out = run_with(&["games", "en-US"], &env, None).expect(0);
    let header = out.stdout.lines().find(|l| l.contains("id")).unwrap();
    for column in ["id", "name", "type", "rules", "categories"] {
        assert!(header.contains(column), "{header}");
    }
    let rows: Vec<&str> = out.stdout.lines().filter(|l| l.contains("SlotMachine")).collect();
    assert_eq!(rows.len(), 7, "{}", out.stdout);
    assert!(rows.iter().any(|r| r.contains("1003") && r.contains("null")), "{}", out.stdout);

    let json = run_with(&["games", "de-DE", "--json"], &env, None).expect(0).json();
    let games = json.as_array().unwrap();
    assert_eq!(games.len(), 7);
    for field in [
        "gameId",
        "name",
        "rules",
        "gameType",
        "minPlayers",
        "maxPlayers",
        "supportsTournament",
        "categories",
        "imageSquare",
        "imageBackground",
        "imageLogo",
        "descriptionShort",
        "descriptionLong",
        "extra",
    ] {
        assert!(games[0].get(field).is_some(), "{field} in {}", games[0]);
    }
    let one = run_with(&["games", "en_US", "1003", "--json"], &env, None).expect(0).json();
    assert_eq!((one[0]["gameId"].as_i64(), one[0]["categories"].is_null()), (Some(1003), true));

    let line = run_with(&["games", "english"], &env, None).expect(2).one_error_line().to_owned();
    assert!(line.starts_with("slotpartner: locale: expected an ISO 639 language"), "{line}");
    let malformed = format!("{base}/fault/malformed");
    let line =
        run_with(&["games", "en-US", "--base-url", &malformed], &env, None).expect(2).one_error_line().to_owned();
    assert!(line.contains("getGames.games[0].gameId"), "{line}");
    let line = run(&["games", "en-US"]).expect(2).one_error_line().to_owned();
    assert_eq!(line, "slotpartner: no service: give --base-url URL or set SLOTPARTNER_BASE_URL");
}

// ---------------------------------------------------------------------------------------------
// journal backup

#[test]
fn journal_backup_copies_the_journal_and_never_replaces_a_file() {
    let scratch = Scratch::new("backup");
    let url = prepared_journal(&scratch);
    let dest = scratch.path("backup.db");
    let dest_text = dest.to_str().unwrap();
    let out = run(&["journal", "backup", dest_text, "--journal", &url]).expect(0);
    assert!(out.stdout.starts_with(&format!("backup written: file=\"{dest_text}\" pages=")), "{}", out.stdout);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    // The copy is a journal with the same figures, and the same stored replies.
    let copy = format!("sqlite:{dest_text}");
    let original = run(&["journal", "status", "--journal", &url, "--json"]).expect(1).json();
    let copied = run(&["journal", "status", "--journal", &copy, "--json"]).expect(1).json();
    for field in ["handled", "replayed", "refused", "in_progress", "missing", "highest_index", "watermark"] {
        assert_eq!(copied[field], original[field], "{field}");
    }
    let shown = run(&["journal", "show", "900008", "--journal", &copy]).expect(0);
    let stored = r#"reply:          {"refund":{"success":false,"errorMessage":"player blocked"}}"#;
    assert!(shown.stdout.lines().any(|l| l == stored), "{}", shown.stdout);

    // An existing file is refused in one line, exit 2, and left as it was.
    let before = std::fs::read(&dest).unwrap();
    let line = run(&["journal", "backup", dest_text, "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.starts_with("slotpartner: dest: ") && line.contains("exists"), "{line}");
    assert_eq!(std::fs::read(&dest).unwrap(), before);
    let missing_folder = scratch.path("no-such-folder/backup.db");
    let line = run(&["journal", "backup", missing_folder.to_str().unwrap(), "--journal", &url])
        .expect(2)
        .one_error_line()
        .to_owned();
    assert!(line.starts_with("slotpartner: dest: "), "{line}");

    // --json, and the journal from the environment.
    let second = scratch.path("backup-2.db");
    let json =
        run_with(&["journal", "backup", second.to_str().unwrap(), "--json"], &[("SLOTPARTNER_JOURNAL", &url)], None)
            .expect(0)
            .json();
    assert_eq!(json["file"], second.to_str().unwrap());
    assert_eq!(json["bytes"].as_u64(), Some(std::fs::metadata(&second).unwrap().len()));
    assert!(json["pages"].as_u64().unwrap() >= 1 && json["elapsed_ms"].is_u64(), "{json}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&second).unwrap().permissions().mode() & 0o777, 0o600);
    // No journal to copy: nothing is created.
    let absent = format!("sqlite:{}", scratch.path("absent.db").display());
    let third = scratch.path("backup-3.db");
    run(&["journal", "backup", third.to_str().unwrap(), "--journal", &absent]).expect(2);
    assert!(!third.exists() && !scratch.path("absent.db").exists());
}

// ---------------------------------------------------------------------------------------------
// usage

#[test]
fn help_on_every_command_and_usage_errors_in_one_line() {
    for command in [
        &[][..],
        &["journal"],
        &["journal", "status"],
        &["journal", "gaps"],
        &["journal", "show"],
        &["journal", "prune"],
        &["journal", "export"],
        &["journal", "resolve"],
        &["journal", "resolutions"],
        &["journal", "conflicts"],
        &["journal", "resolve-conflict"],
        &["journal", "jumps"],
        &["journal", "accept-jump"],
        &["journal", "jump-is-gap"],
        &["journal", "renumber"],
        &["journal", "backup"],
        &["recover"],
        &["metrics"],
        &["inspect"],
        &["games"],
    ] {
        let mut args = command.to_vec();
        args.push("--help");
        let out = run(&args).expect(0);
        assert!(out.stdout.contains("Usage: slotpartner"), "{args:?}\n{}", out.stdout);
        assert!(out.stdout.contains("Exit status"), "{args:?}\n{}", out.stdout);
        if !command.is_empty() && command != ["journal"] {
            assert!(out.stdout.contains("Examples:"), "{args:?}\n{}", out.stdout);
        }
    }
    let out = run(&["--version"]).expect(0);
    assert_eq!(out.stdout, format!("slotpartner {}\n", env!("CARGO_PKG_VERSION")));
    let out = run(&["recover", "--help"]).expect(0);
    assert!(out.stdout.contains("SLOTPARTNER_TOKEN") && !out.stdout.contains(TOKEN));

    for (args, says) in [
        (&["bogus"][..], "unrecognized subcommand 'bogus' (see 'slotpartner --help')"),
        (&["journal", "gaps", "--limit", "x"], "(see 'slotpartner journal gaps --help')"),
        (&["inspect"], "FILE"),
        (&["recover", "--frobnicate"], "unexpected argument '--frobnicate'"),
        (&["journal", "resolve", "3-4"], "--note"),
        (&["journal", "resolve", "4-3", "--note", "x"], "ends before it starts"),
        (&["journal", "accept-jump", "1"], "--note"),
        (&["journal", "renumber", "--note", "x"], "--from"),
        (&["journal", "status", "--max-index-jump", "0"], "--max-index-jump"),
        (&["journal", "gaps", "--not-found-limit", "0"], "--not-found-limit"),
        (&["recover", "--max-time", "5x"], "--max-time"),
        (&["recover", "--min-age", "soon"], "--min-age"),
        (&["journal", "prune", "--older-than", "1h"], "--older-than"),
        (&["journal", "gaps", "--older-than", "5x"], "--older-than"),
        (&["metrics"], "--listen"),
    ] {
        let out = run(args).expect(2);
        let line = out.one_error_line();
        assert!(line.contains(says), "{args:?}: {line}");
    }
    // No command at all: the help, on stderr, exit 2.
    let out = run(&[]).expect(2);
    assert!(out.stderr.contains("Usage: slotpartner"));
}
