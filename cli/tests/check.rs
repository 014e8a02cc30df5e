//! `slotpartner check` as a process: against the sandbox in-process, a callback endpoint on
//! loopback (HTTPS with a CA of its own) running the library's receiver, and SQLite journals
//! prepared through the library.

#[path = "support/balance.rs"]
mod balance;
mod support;

use std::path::PathBuf;

use slotpartner::journal::{Begin, Delivery};
use slotpartner::{ParseOptions, parse};

use balance::{BalanceEndpoint, KNOWN_PLAYER, RawAnswer, Setup};
use support::*;

const OTHER_TOKEN: &str = "11111111-2222-4333-8444-555555555555";
/// A full balance reply, as the library builds it.
const GOOD_REPLY: &str = r#"{"playerBalance":{"money":12050,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#;

/// An endpoint answering `raw` to every request, over plain HTTP on loopback.
fn raw_endpoint(raw: RawAnswer) -> BalanceEndpoint {
    BalanceEndpoint::start(Setup { tls: false, raw_answer: Some(raw), ..Setup::default() })
}

/// The line of `check` (`callback tls`) in the text output; it must be there once.
fn line<'a>(out: &'a Run, check: &str) -> &'a str {
    let found: Vec<&str> =
        out.stdout.lines().filter(|l| l.split_whitespace().skip(1).take(2).eq(check.split(' '))).collect();
    assert_eq!(found.len(), 1, "one line {check:?} in\n{}", out.stdout);
    found[0]
}

/// The verdict of `check` (`ok`, `warn`, `FAIL`, `skip`).
fn verdict<'a>(out: &'a Run, check: &str) -> &'a str {
    line(out, check).split_whitespace().next().unwrap()
}

/// Every (check, verdict) of the text output, in order.
fn all_verdicts(out: &Run) -> Vec<(String, String)> {
    out.stdout
        .lines()
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            (format!("{} {}", words[1], words[2]), words[0].to_owned())
        })
        .collect()
}

fn write_ca(scratch: &Scratch, endpoint: &BalanceEndpoint) -> PathBuf {
    scratch.write("endpoint-ca.pem", endpoint.ca_pem.as_bytes())
}

/// `check` against the endpoint alone (the token from the variable).
fn check_endpoint(endpoint: &BalanceEndpoint, extra: &[&str]) -> Run {
    let mut args = vec!["check", "--callback-url", &endpoint.url];
    args.extend_from_slice(extra);
    run_with(&args, &[("SLOTPARTNER_TOKEN", TOKEN)], None)
}

#[test]
fn a_well_wired_partner_passes_every_check_and_the_balance_query_moves_no_money() {
    let scratch = Scratch::new("check-wired");
    let service = sandbox(1, 1);
    let service_ca = ca_file(&scratch, &service);
    let (journal_url, journal) = journal_of_refunds(&scratch, 3, &[]);
    let endpoint = BalanceEndpoint::start(Setup { journal: Some(journal.clone()), ..Setup::default() });
    let endpoint_ca = write_ca(&scratch, &endpoint);
    let before = journal.status().unwrap();
    let base = service.base_url();
    let env = [
        ("SLOTPARTNER_JOURNAL", journal_url.as_str()),
        ("SLOTPARTNER_BASE_URL", base.as_str()),
        ("SLOTPARTNER_TOKEN", TOKEN),
        ("SLOTPARTNER_CA_FILE", path_str(&service_ca)),
        ("SLOTPARTNER_CALLBACK_URL", endpoint.url.as_str()),
        ("SLOTPARTNER_CALLBACK_CA_FILE", path_str(&endpoint_ca)),
    ];
    let out = run_with(&["check", "--player", KNOWN_PLAYER], &env, None).expect(0);
    let verdicts = all_verdicts(&out);
    assert_eq!(verdicts.len(), 21, "{}", out.stdout);
    for (check, verdict) in &verdicts {
        let expected = match check.as_str() {
            // The library's client hands out no Date header; a SQLite journal keeps this host's clock.
            "service clock" | "journal clock" => "skip",
            _ => "ok",
        };
        assert_eq!(verdict, expected, "{check}:\n{}", out.stdout);
    }
    assert!(line(&out, "callback reply").contains("money 12050 EUR, coins 0"), "{}", out.stdout);
    assert!(line(&out, "callback clock").contains("--clock-tolerance 5s"), "{}", out.stdout);
    assert!(line(&out, "callback time").contains("--slow 1s"), "{}", out.stdout);
    let current = format!("version {} (current)", slotpartner::journal::SCHEMA_VERSION);
    assert!(line(&out, "journal schema").contains(&current), "{}", out.stdout);
    assert!(line(&out, "journal ends").contains("the first index 1 is configured"), "{}", out.stdout);
    assert!(line(&out, "service games").contains("7 games"), "{}", out.stdout);
    assert!(out.stderr.is_empty(), "{}", out.stderr);

    // --json: the same checks, the same verdicts, in one document.
    let json = run_with(&["check", "--player", KNOWN_PLAYER, "--json"], &env, None).expect(0).json();
    let from_json: Vec<(String, String)> = json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["check"].as_str().unwrap().to_owned(), c["verdict"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(from_json, verdicts);
    assert_eq!(json["result"], "ok");
    assert_eq!(json["failed"], 0);
    assert!(json["checks"][0]["fix"].is_null(), "{json}");

    // The endpoint saw two balance queries and nothing else: as the service sends them, without an
    // index; its journal recorded nothing, and the probe's lock is gone.
    let seen = endpoint.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for request in &seen {
        assert_eq!(request.outcome, "getPlayerBalance", "{request:?}");
        assert_eq!(request.token.as_deref(), Some(TOKEN));
        assert!(request.content_type.as_deref().is_some_and(|t| t.starts_with("application/json")), "{request:?}");
        let body: serde_json::Value = serde_json::from_str(&request.body).unwrap();
        let keys: Vec<&str> = body.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["action", "playerIdentifier", "playerPartnerIdentifier"], "{body}");
        assert_eq!(body["playerPartnerIdentifier"], KNOWN_PLAYER);
    }
    let after = journal.status().unwrap();
    assert_eq!(
        (after.handled, after.replayed, after.refused, after.in_progress, after.missing, after.highest_index),
        (before.handled, before.replayed, before.refused, before.in_progress, before.missing, before.highest_index)
    );
    let db = rusqlite::Connection::open(scratch.path("journal.db")).unwrap();
    let locks: i64 = db.query_row("SELECT count(*) FROM sp_journal_locks", [], |r| r.get(0)).unwrap();
    assert_eq!(locks, 0);
}

#[test]
fn an_endpoint_with_another_token_fails_the_token_check() {
    let scratch = Scratch::new("check-token");
    let endpoint = BalanceEndpoint::start(Setup { token: OTHER_TOKEN, ..Setup::default() });
    let ca = write_ca(&scratch, &endpoint);
    let out = check_endpoint(&endpoint, &["--callback-ca-file", path_str(&ca)]).expect(1);
    let token = line(&out, "callback token");
    assert!(token.starts_with("FAIL"), "{token}");
    assert!(token.contains("HTTP 401") && token.contains("--token") && token.contains("SLOTPARTNER_TOKEN"), "{token}");
    assert_eq!(verdict(&out, "callback source"), "ok");
    assert_eq!(verdict(&out, "callback reply"), "skip");
    assert!(!out.stdout.contains("sp_"), "no C function names:\n{}", out.stdout);
}

#[test]
fn an_endpoint_certificate_not_trusted_fails_naming_the_callback_ca_file() {
    let endpoint = BalanceEndpoint::start(Setup::default());
    let out = check_endpoint(&endpoint, &[]).expect(1);
    assert_eq!(verdict(&out, "callback reachable"), "ok");
    let tls = line(&out, "callback tls");
    assert!(tls.starts_with("FAIL"), "{tls}");
    assert!(tls.contains("--callback-ca-file") && tls.contains("SLOTPARTNER_CALLBACK_CA_FILE"), "{tls}");
    assert!(!tls.contains("sp_") && !tls.contains("ca_pem"), "in the command's terms: {tls}");
    assert_eq!(verdict(&out, "callback token"), "skip");
    assert!(endpoint.seen().is_empty(), "nothing was sent over an untrusted connection");
}

#[test]
fn a_closed_port_fails_the_reachable_check() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("https://127.0.0.1:{port}/callback");
    let out = run_with(&["check", "--callback-url", &url], &[("SLOTPARTNER_TOKEN", TOKEN)], None).expect(1);
    let reachable = line(&out, "callback reachable");
    assert!(reachable.starts_with("FAIL") && reachable.contains("--callback-url"), "{reachable}");
    for check in ["callback tls", "callback token", "callback reply", "callback clock"] {
        assert_eq!(verdict(&out, check), "skip", "{check}");
    }
}

#[test]
fn a_reply_of_the_wrong_shape_fails() {
    let scratch = Scratch::new("check-shape");
    let answer = r#"{"playerBalance":{"money":"12050","currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#;
    let endpoint = BalanceEndpoint::start(Setup { fixed_answer: Some(answer), ..Setup::default() });
    let ca = write_ca(&scratch, &endpoint);
    let out = check_endpoint(&endpoint, &["--callback-ca-file", path_str(&ca), "--player", KNOWN_PLAYER]).expect(1);
    let reply = line(&out, "callback reply");
    assert!(reply.starts_with("FAIL") && reply.contains("playerBalance.money"), "{reply}");
    assert_eq!(verdict(&out, "callback token"), "ok");
}

#[test]
fn a_refused_source_fails_and_an_unknown_player_warns() {
    let scratch = Scratch::new("check-source");
    let endpoint = BalanceEndpoint::start(Setup { sources: "production", ..Setup::default() });
    let ca = write_ca(&scratch, &endpoint);
    let out = check_endpoint(&endpoint, &["--callback-ca-file", path_str(&ca)]).expect(1);
    let source = line(&out, "callback source");
    assert!(source.starts_with("FAIL") && source.contains("HTTP 403"), "{source}");

    // The default player is unknown to the endpoint: its refusal has the expected shape, a warning.
    let endpoint = BalanceEndpoint::start(Setup::default());
    let ca = write_ca(&scratch, &endpoint);
    let out = check_endpoint(&endpoint, &["--callback-ca-file", path_str(&ca)]).expect(0);
    let reply = line(&out, "callback reply");
    assert!(reply.starts_with("warn") && reply.contains("unknown player") && reply.contains("--player"), "{reply}");
    // Nothing else configured: skipped, each naming what enables it.
    for check in ["journal reachable", "journal gaps", "journal clock"] {
        let skipped = line(&out, check);
        assert!(
            skipped.starts_with("skip") && skipped.contains("--journal URL or set SLOTPARTNER_JOURNAL"),
            "{skipped}"
        );
    }
    let service = line(&out, "service token");
    assert!(service.starts_with("skip") && service.contains("--base-url"), "{service}");
}

#[test]
fn a_slow_answer_and_a_clock_ahead_warn_without_failing() {
    let scratch = Scratch::new("check-warn");
    let endpoint = BalanceEndpoint::start(Setup { clock_ahead: 3600, ..Setup::default() });
    let ca = write_ca(&scratch, &endpoint);
    let args = ["--callback-ca-file", path_str(&ca), "--player", KNOWN_PLAYER, "--slow", "0s"];
    let out = check_endpoint(&endpoint, &args).expect(0);
    let time = line(&out, "callback time");
    assert!(time.starts_with("warn") && time.contains("longer than --slow 0s") && time.contains("fix: "), "{time}");
    let clock = line(&out, "callback clock");
    assert!(clock.starts_with("warn") && clock.contains("ahead of this host's clock"), "{clock}");
    assert!(clock.contains("--clock-tolerance 5s") && clock.contains("NTP"), "{clock}");
    assert_eq!(verdict(&out, "callback reply"), "ok");
    let json = check_endpoint(&endpoint, &[&args[..], &["--json"]].concat()).expect(0).json();
    assert_eq!(
        (json["result"].as_str(), json["failed"].as_u64(), json["warnings"].as_u64()),
        (Some("warn"), Some(0), Some(2))
    );
}

#[test]
fn an_unfinished_delivery_fails_its_check() {
    let scratch = Scratch::new("check-unfinished");
    let (url, journal) = journal_of_refunds(&scratch, 2, &[]);
    let body = r#"{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-3","playerIdentifier":"player-1","transactionId":703,"buyTransactionId":1703,"gameSessionId":5,"partnerGameRequestIdentifier":"req-3","gameId":1001,"isMobile":false,"index":3}"#;
    let event = parse(body.as_bytes(), &ParseOptions::default()).unwrap();
    let Begin::New(claim) = journal.begin(&Delivery::of(&event)).unwrap() else { panic!("new") };
    journal.abandon(&claim).unwrap();
    let out = run(&["check", "--journal", &url]).expect(1);
    let unfinished = line(&out, "journal unfinished");
    assert!(
        unfinished.starts_with("FAIL") && unfinished.contains("1 deliveries") && unfinished.contains("recover"),
        "{unfinished}"
    );
    assert_eq!(verdict(&out, "journal gaps"), "ok");
}

/// A journal whose first index is only the lowest seen (none configured): the check says so,
/// naming what finds the events lost before it.
#[test]
fn a_first_index_that_is_only_the_lowest_seen_is_said() {
    let scratch = Scratch::new("check-ends");
    let url = scratch.journal_url();
    let journal = slotpartner::journal::Journal::open(&url, &slotpartner::journal::JournalOptions::default()).unwrap();
    let body = r#"{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-3","playerIdentifier":"player-1","transactionId":703,"buyTransactionId":1703,"gameSessionId":5,"partnerGameRequestIdentifier":"req-3","gameId":1001,"isMobile":false,"index":3}"#;
    let event = parse(body.as_bytes(), &ParseOptions::default()).unwrap();
    let Begin::New(claim) = journal.begin(&Delivery::of(&event)).unwrap() else { panic!("new") };
    journal.finish(&claim, b"{}").unwrap();
    let out = run(&["check", "--journal", &url]).expect(0);
    let ends = line(&out, "journal ends");
    assert!(ends.starts_with("ok") && ends.contains("the lowest seen (3)") && ends.contains("recover"), "{ends}");
}

#[test]
fn journal_gaps_warn_while_young_and_fail_once_older_than_min_age() {
    let scratch = Scratch::new("check-gaps");
    let (url, journal) = journal_of_refunds(&scratch, 5, &[3]);
    drop(journal);
    let out = run(&["check", "--journal", &url]).expect(0);
    let gaps = line(&out, "journal gaps");
    assert!(gaps.starts_with("warn") && gaps.contains("1 indexes missing") && gaps.contains("--min-age 1m"), "{gaps}");
    for check in ["journal reachable", "journal schema", "journal writable", "journal unfinished", "journal conflicts"]
    {
        assert_eq!(verdict(&out, check), "ok", "{check}");
    }
    let callback = line(&out, "callback reachable");
    assert!(callback.starts_with("skip") && callback.contains("SLOTPARTNER_CALLBACK_URL"), "{callback}");

    // Found missing an hour ago.
    let db = rusqlite::Connection::open(scratch.path("journal.db")).unwrap();
    db.execute("UPDATE sp_journal_runs SET since_ms = since_ms - 3600000", []).unwrap();
    let out = run(&["check", "--journal", &url]).expect(1);
    let gaps = line(&out, "journal gaps");
    assert!(gaps.starts_with("FAIL") && gaps.contains("slotpartner recover"), "{gaps}");
    let json = run(&["check", "--journal", &url, "--json"]).expect(1).json();
    assert_eq!(json["result"], "FAIL");
    assert_eq!(json["failed"], 1);
    let gaps = json["checks"].as_array().unwrap().iter().find(|c| c["check"] == "journal gaps").unwrap();
    assert_eq!(gaps["verdict"], "FAIL");
    assert!(gaps["fix"].as_str().unwrap().contains("recover"), "{gaps}");
}

#[test]
fn a_journal_of_another_schema_version_is_not_opened() {
    let scratch = Scratch::new("check-schema");
    let (url, journal) = journal_of_refunds(&scratch, 5, &[3]);
    drop(journal);
    let db = rusqlite::Connection::open(scratch.path("journal.db")).unwrap();
    let version = |db: &rusqlite::Connection| -> i64 {
        db.query_row("SELECT value FROM sp_journal_meta WHERE key = 'schema_version'", [], |r| r.get(0)).unwrap()
    };
    assert_eq!(version(&db), slotpartner::journal::SCHEMA_VERSION);
    // An older version, with a gap found missing an hour ago: left as it is (the library would
    // migrate it on opening), and not a green result either: the check cannot judge it.
    db.execute("UPDATE sp_journal_runs SET since_ms = since_ms - 3600000", []).unwrap();
    db.execute("UPDATE sp_journal_meta SET value = 2 WHERE key = 'schema_version'", []).unwrap();
    let out = run(&["check", "--journal", &url]).expect(1);
    let schema = line(&out, "journal schema");
    assert!(
        schema.starts_with("FAIL")
            && schema.contains("version 2")
            && schema.contains("cannot judge a version-2 journal without migrating it")
            && schema.contains("upgrade them first"),
        "{schema}"
    );
    assert_eq!(verdict(&out, "journal reachable"), "ok");
    for check in ["journal writable", "journal gaps", "journal unfinished"] {
        assert_eq!(verdict(&out, check), "skip", "{check}");
    }
    assert_eq!(version(&db), 2, "the check migrated nothing");
    let json = run(&["check", "--journal", &url, "--json"]).expect(1).json();
    assert_eq!(json["result"], "FAIL");
    assert_eq!(version(&db), 2, "the check migrated nothing");
    // A newer one: this release cannot read it.
    let newer = slotpartner::journal::SCHEMA_VERSION + 1;
    db.execute("UPDATE sp_journal_meta SET value = ?1 WHERE key = 'schema_version'", [newer]).unwrap();
    let out = run(&["check", "--journal", &url]).expect(1);
    let schema = line(&out, "journal schema");
    assert!(schema.starts_with("FAIL") && schema.contains("upgrade slotpartner"), "{schema}");
    assert_eq!(version(&db), newer);
}

#[test]
fn check_creates_no_journal_where_there_is_none() {
    let scratch = Scratch::new("check-no-journal");
    let not_a_journal = |out: &Run| {
        let reachable = line(out, "journal reachable");
        assert!(
            reachable.starts_with("FAIL")
                && reachable.contains("not a journal (no sp_journal_meta)")
                && reachable.contains("check --journal"),
            "{reachable}"
        );
        for check in ["journal schema", "journal writable", "journal gaps"] {
            assert_eq!(verdict(out, check), "skip", "{check}");
        }
    };
    // A file of 0 bytes stays one: no schema, not even SQLite's header.
    let empty = scratch.write("empty.db", b"");
    let url = format!("sqlite:{}", path_str(&empty));
    not_a_journal(&run(&["check", "--journal", &url]).expect(1));
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
    assert!(!scratch.path("empty.db-wal").exists());
    let json = run(&["check", "--journal", &url, "--json"]).expect(1).json();
    assert_eq!((json["result"].as_str(), json["failed"].as_u64()), (Some("FAIL"), Some(1)));
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);

    // A SQLite database without a journal: byte for byte as it was.
    let other = scratch.path("other.db");
    rusqlite::Connection::open(&other).unwrap().execute_batch("PRAGMA user_version = 7").unwrap();
    let before = std::fs::read(&other).unwrap();
    not_a_journal(&run(&["check", "--journal", &format!("sqlite:{}", path_str(&other))]).expect(1));
    assert_eq!(std::fs::read(&other).unwrap(), before);
    let tables: i64 = rusqlite::Connection::open(&other)
        .unwrap()
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tables, 0);

    // No file at all: not created.
    let missing = scratch.path("missing.db");
    let out = run(&["check", "--journal", &format!("sqlite:{}", path_str(&missing))]).expect(1);
    assert!(line(&out, "journal reachable").starts_with("FAIL"), "{}", out.stdout);
    assert!(!missing.exists());
}

#[test]
fn gaps_found_missing_in_the_future_fail() {
    let scratch = Scratch::new("check-future-gaps");
    let (url, journal) = journal_of_refunds(&scratch, 5, &[3]);
    drop(journal);
    // The host that recorded them had its clock a day ahead.
    let db = rusqlite::Connection::open(scratch.path("journal.db")).unwrap();
    db.execute("UPDATE sp_journal_runs SET since_ms = since_ms + 86400000, last_ms = last_ms + 86400000", []).unwrap();
    let out = run(&["check", "--journal", &url]).expect(1);
    let gaps = line(&out, "journal gaps");
    assert!(
        gaps.starts_with("FAIL")
            && gaps.contains("found missing in the future: a clock was ahead")
            && gaps.contains("--min-age 0s"),
        "{gaps}"
    );
    assert!(!gaps.contains("less than --min-age"), "{gaps}");
}

#[test]
fn checks_that_send_the_token_cannot_run_without_one() {
    let scratch = Scratch::new("check-no-token");
    let no_token = |out: &Run| {
        let error = out.one_error_line();
        assert!(error.contains("--token") && error.contains("SLOTPARTNER_TOKEN"), "{error}");
        assert!(out.stdout.is_empty(), "{}", out.stdout);
    };
    let callback = ["check", "--callback-url", "http://127.0.0.1:9/callback"];
    no_token(&run(&callback).expect(2));
    no_token(&run(&[&callback[..], &["--token", ""]].concat()).expect(2));
    no_token(&run_with(&callback, &[("SLOTPARTNER_TOKEN", "")], None).expect(2));
    no_token(&run(&["check", "--base-url", "https://127.0.0.1:9/"]).expect(2));
    // With a journal to check as well: still not a result without the callback's checks.
    let (url, journal) = journal_of_refunds(&scratch, 2, &[]);
    drop(journal);
    no_token(&run(&[&callback[..], &["--journal", &url]].concat()).expect(2));
    // The journal alone needs no token.
    run(&["check", "--journal", &url]).expect(0);

    // A token copied with its line end: refused before anything is sent, naming the option.
    let endpoint = raw_endpoint(RawAnswer::new(200, GOOD_REPLY));
    for bad in [format!("{TOKEN}\r\n"), format!("{TOKEN}\n"), format!(" {TOKEN}")] {
        let out = run_with(&["check", "--callback-url", &endpoint.url], &[("SLOTPARTNER_TOKEN", &bad)], None).expect(2);
        let error = out.one_error_line();
        assert!(error.contains("--token") && error.contains("UUID"), "{error}");
        assert!(!error.contains("header"), "{error}");
    }
    assert!(endpoint.seen().is_empty(), "nothing was sent");

    // --timeout out of range: the echoed value is clipped.
    let out = run(&[&callback[..], &["--token", TOKEN, "--timeout", "1e300"]].concat()).expect(2);
    let error = out.one_error_line();
    assert!(error.contains("--timeout") && error.contains("1e300") && error.len() < 200, "{error}");
}

#[test]
fn only_a_2xx_answer_confirms_the_callback_token() {
    // A hand-written endpoint that refuses a wrong token inside the balance shape, HTTP 500.
    let refusal = r#"{"playerBalance":{"errorMessage":"authentication failed: wrong token"}}"#;
    let endpoint = raw_endpoint(RawAnswer::new(500, refusal));
    let out = check_endpoint(&endpoint, &[]).expect(0);
    let token = line(&out, "callback token");
    assert!(token.starts_with("warn") && token.contains("not confirmed") && token.contains("HTTP 500"), "{token}");
    assert_eq!(verdict(&out, "callback reply"), "warn");
    // The operator named a player the endpoint knows: its refusal fails.
    let out = check_endpoint(&endpoint, &["--player", KNOWN_PLAYER]).expect(1);
    let reply = line(&out, "callback reply");
    assert!(reply.starts_with("FAIL") && reply.contains("wrong token") && reply.contains("--player"), "{reply}");
    assert_eq!(verdict(&out, "callback token"), "warn");

    // A redirect confirms nothing, and is no reply.
    let endpoint = raw_endpoint(RawAnswer {
        status: 302,
        headers: vec![("Location", "http://127.0.0.1:1/login?session=SECRET".to_owned())],
        body: Vec::new(),
    });
    let out = check_endpoint(&endpoint, &[]).expect(1);
    assert_eq!(verdict(&out, "callback reachable"), "ok");
    let token = line(&out, "callback token");
    assert!(token.starts_with("skip") && token.contains("not confirmed"), "{token}");
    let reply = line(&out, "callback reply");
    assert!(reply.starts_with("FAIL") && reply.contains("redirects") && reply.contains("final URL"), "{reply}");
    assert!(!out.stdout.contains("SECRET"), "{}", out.stdout);

    // 200 with a full balance: confirmed.
    let endpoint = raw_endpoint(RawAnswer::new(200, GOOD_REPLY));
    let out = check_endpoint(&endpoint, &["--player", KNOWN_PLAYER]).expect(0);
    assert_eq!(verdict(&out, "callback token"), "ok");
    assert_eq!(verdict(&out, "callback reply"), "ok");
}

/// An answer that is no balance reply (the web server's 404, a failing endpoint's 500 or 503)
/// shows nothing of the source or token checks: they are not called ok, and the reply's fix
/// follows the answer's status instead of the generic "answer HTTP 200".
#[test]
fn an_answer_that_is_no_balance_reply_confirms_nothing_and_its_fix_follows_the_status() {
    let journal_down = r#"{"success":false,"errorMessage":"the partner is temporarily unavailable"}"#;
    for (status, body, fix) in [
        (404, "<html>404 Not Found</html>", "SCRIPT_FILENAME"),
        (500, "partner misconfigured", "its log says why"),
        (503, journal_down, "a balance query needs no journal"),
        (405, "", "POSTs every callback"),
    ] {
        let endpoint = raw_endpoint(RawAnswer::new(status, body));
        let out = check_endpoint(&endpoint, &[]).expect(1);
        for check in ["callback source", "callback token"] {
            let judged = line(&out, check);
            assert!(judged.starts_with("skip") && judged.contains(&format!("HTTP {status}")), "{status}: {judged}");
        }
        let reply = line(&out, "callback reply");
        assert!(reply.starts_with("FAIL") && reply.contains(fix), "{status}: {reply}");
        assert!(!reply.contains("answer a balance query HTTP 200"), "{status}: {reply}");
        assert_eq!(verdict(&out, "callback time"), "ok", "{status}: the answer's time is still judged");
    }
}

#[test]
fn a_reply_naming_a_key_twice_fails() {
    let twice = r#"{"playerBalance":{"money":-5,"currencyISO4217":"EUR","coins":0,"errorMessage":"blocked"},"playerBalance":{"money":12050,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#;
    let endpoint = raw_endpoint(RawAnswer::new(200, twice));
    let out = check_endpoint(&endpoint, &["--player", KNOWN_PLAYER]).expect(1);
    let reply = line(&out, "callback reply");
    assert!(reply.starts_with("FAIL") && reply.contains("appears twice"), "{reply}");
    let inner = r#"{"playerBalance":{"money":-5,"currencyISO4217":"EUR","coins":0,"errorMessage":"","money":12050}}"#;
    let endpoint = raw_endpoint(RawAnswer::new(200, inner));
    let out = check_endpoint(&endpoint, &["--player", KNOWN_PLAYER]).expect(1);
    assert!(line(&out, "callback reply").contains("appears twice"), "{}", out.stdout);
}

#[test]
fn an_answer_that_cannot_be_read_is_not_called_unreachable() {
    let mut big = GOOD_REPLY.as_bytes().to_vec();
    big.extend(std::iter::repeat_n(b' ', 70 * 1024));
    let not_utf8 =
        b"{\"playerBalance\":{\"money\":1,\"currencyISO4217\":\"EUR\",\"coins\":0,\"errorMessage\":\"\xff\"}}";
    for (body, problem) in [(big, "over 64 KiB"), (not_utf8.to_vec(), "not UTF-8")] {
        let endpoint = raw_endpoint(RawAnswer::new(200, body));
        let out = check_endpoint(&endpoint, &["--player", KNOWN_PLAYER]).expect(1);
        let reachable = line(&out, "callback reachable");
        assert!(reachable.starts_with("ok") && reachable.contains("answered HTTP 200"), "{reachable}");
        let reply = line(&out, "callback reply");
        assert!(
            reply.starts_with("FAIL")
                && reply.contains("answered HTTP 200, the answer could not be read")
                && reply.contains(problem),
            "{reply}"
        );
        assert!(!out.stdout.contains("start the endpoint"), "{}", out.stdout);
    }
}

#[test]
fn secrets_in_the_callback_url_are_not_shown() {
    let endpoint = raw_endpoint(RawAnswer::new(200, GOOD_REPLY));
    let url = format!("{}?key=QSECRET", endpoint.url.replacen("http://", "http://partner:CBSECRET@", 1));
    let env = [("SLOTPARTNER_TOKEN", TOKEN), ("SLOTPARTNER_CALLBACK_URL", url.as_str())];
    let out = run_with(&["check", "--player", KNOWN_PLAYER], &env, None).expect(0);
    let reachable = line(&out, "callback reachable");
    assert!(reachable.contains("/callback?key=...") && reachable.contains("http://127.0.0.1:"), "{reachable}");
    let json = run_with(&["check", "--player", KNOWN_PLAYER, "--json"], &env, None).expect(0);
    for text in [&out.stdout, &out.stderr, &json.stdout, &json.stderr] {
        assert!(!text.contains("CBSECRET") && !text.contains("QSECRET") && !text.contains("partner:"), "{text}");
    }
}

#[test]
fn a_service_answering_an_error_does_not_confirm_the_token() {
    let scratch = Scratch::new("check-service-500");
    let service = BalanceEndpoint::start(Setup { raw_answer: Some(RawAnswer::new(500, "{}")), ..Setup::default() });
    let ca = write_ca(&scratch, &service);
    let base = service.url.trim_end_matches("/callback").to_owned();
    let out =
        run(&["check", "--base-url", &base, "--token", TOKEN, "--ca-file", path_str(&ca), "--retries", "0"]).expect(1);
    let token = line(&out, "service token");
    assert!(token.starts_with("warn") && token.contains("not confirmed") && token.contains("HTTP 500"), "{token}");
    assert_eq!(verdict(&out, "service games"), "FAIL");
}

#[test]
fn the_service_token_and_certificate_are_judged() {
    let scratch = Scratch::new("check-service");
    let service = sandbox(1, 1);
    let ca = ca_file(&scratch, &service);
    let base = service.base_url();
    let out = run(&["check", "--base-url", &base, "--token", OTHER_TOKEN, "--ca-file", path_str(&ca)]).expect(1);
    let token = line(&out, "service token");
    assert!(token.starts_with("FAIL") && token.contains("--token") && token.contains("SLOTPARTNER_TOKEN"), "{token}");
    assert_eq!(verdict(&out, "service tls"), "ok");
    assert_eq!(verdict(&out, "service games"), "skip");

    let out = run(&["check", "--base-url", &base, "--token", TOKEN, "--retries", "0"]).expect(1);
    let tls = line(&out, "service tls");
    assert!(tls.starts_with("FAIL") && tls.contains("--ca-file") && tls.contains("SLOTPARTNER_CA_FILE"), "{tls}");
    assert!(!tls.contains("ca_pem") && !tls.contains("sp_"), "in the command's terms: {tls}");
}

#[test]
fn usage_and_configuration_errors_exit_2() {
    let out = run(&["check", "--journal", "sqlite:/nonexistent/journal.db", "--slow", "fast"]).expect(2);
    assert!(out.one_error_line().contains("--slow"), "{}", out.stderr);
    let out = run(&["check"]).expect(2);
    assert!(out.one_error_line().contains("nothing to check"), "{}", out.stderr);
    let out = run(&["check", "--callback-url", "http://partner.example/callback", "--token", TOKEN]).expect(2);
    assert!(out.one_error_line().contains("--callback-url: http:// only to a loopback host"), "{}", out.stderr);
    let args = ["check", "--callback-url", "https://127.0.0.1:9/callback", "--token", TOKEN];
    let out = run(&[&args[..], &["--callback-ca-file", "/nonexistent.pem"]].concat()).expect(2);
    assert!(out.one_error_line().contains("--callback-ca-file: cannot read /nonexistent.pem"), "{}", out.stderr);
    let out = run(&[&args[..], &["--player", ""]].concat()).expect(2);
    assert!(out.one_error_line().contains("--player"), "{}", out.stderr);
}
