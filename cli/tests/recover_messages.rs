//! What `slotpartner recover` says, as an operator reads it: hints in the command's own options
//! and variables, a refused token that stops the run, repeated failures summarised, the
//! summary's counts explained; and the journal URL's messages. The built binary runs as a
//! process against the sandbox and a partner's endpoint on loopback, over real HTTPS.

mod support;

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use slotpartner::journal::{Begin, Delivery};
use slotpartner::{ParseOptions, parse};
use slotpartner_sandbox::burst::{self, EventMix, EventSet};
use slotpartner_sandbox::http::{self, ListenerHandle};
use slotpartner_sandbox::{ServerConfig, actions};

use support::*;

/// A token the sandbox or the endpoint does not know.
const OTHER_TOKEN: &str = "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f";

fn delivery(body: &str) -> Delivery {
    Delivery::of(&parse(body.as_bytes(), &ParseOptions::default()).unwrap())
}

/// A journal of the sandbox's own events (seed 1, mixed): those of `done` handled, those of
/// `abandoned` claimed and abandoned (unfinished); the indexes between missing.
fn journal_of(scratch: &Scratch, done: &[i64], abandoned: &[i64]) -> String {
    let url = scratch.journal_url();
    let journal = open_journal(&url);
    for &index in done.iter().chain(abandoned) {
        let body = burst::burst_event(1, EventMix::Mixed, index as u64).body;
        let Begin::New(claim) = journal.begin(&delivery(&body)).unwrap() else { panic!("new") };
        if done.contains(&index) {
            journal.finish(&claim, b"{}").unwrap();
        } else {
            journal.abandon(&claim).unwrap();
        }
    }
    url
}

/// `recover` against `base_url`, delivering to `callback`, taking gaps and unfinished
/// deliveries at least `min_age` old.
fn recover_args_aged<'a>(journal: &'a str, base_url: &'a str, callback: &'a str, min_age: &'a str) -> Vec<&'a str> {
    let mut args = vec!["recover", "--journal", journal, "--base-url", base_url, "--callback-url", callback];
    args.extend(["--retries", "0", "--min-age", min_age]);
    args
}

/// `recover_args_aged`, taking gaps however young (those of these tests were made a moment ago).
fn recover_args<'a>(journal: &'a str, base_url: &'a str, callback: &'a str) -> Vec<&'a str> {
    recover_args_aged(journal, base_url, callback, "0s")
}

/// A summary line's `key=value` pairs.
fn summary(out: &Run) -> std::collections::HashMap<String, String> {
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("summary "))
        .flat_map(|l| l.split(' '))
        .filter_map(|pair| pair.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect()
}

fn index_lines(out: &Run) -> Vec<&str> {
    out.stdout.lines().filter(|l| l.starts_with("index=")).collect()
}

/// The sandbox's service (its actions, seed 1, `count` events) over HTTPS on loopback, counting
/// the requests it gets; the CA's PEM.
fn counting_service(count: u64, requests: Arc<AtomicU64>) -> (ListenerHandle, String) {
    slotpartner_sandbox::quiet_logs();
    let certs = slotpartner_sandbox::tls::generate().unwrap();
    let events = EventSet { seed: 1, mix: EventMix::Mixed, first_index: 1, count };
    let handler: http::Handler = Arc::new(move |req| {
        requests.fetch_add(1, Ordering::SeqCst);
        actions::handle_with(req, TOKEN, Some(&events))
    });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let handle = http::spawn(listener, Some(Arc::clone(&certs.server_config)), "https", handler).unwrap();
    (handle, certs.ca_pem)
}

#[test]
fn a_service_whose_ca_is_not_given_names_ca_file() {
    let scratch = Scratch::new("msg-service-ca");
    let url = journal_of(&scratch, &[1, 3], &[]);
    let service = sandbox(1, 3);
    let endpoint = Endpoint::start(open_journal(&url));
    let base = service.base_url();
    let out = run_with(&recover_args(&url, &base, &endpoint.url), &[("SLOTPARTNER_TOKEN", TOKEN)], None).expect(1);
    let line = index_lines(&out)[0];
    assert!(line.starts_with("index=2 result=not_fetched reason=service "), "{line}");
    assert!(line.contains("getEvent: io: invalid peer certificate: UnknownIssuer. "), "the cause is kept: {line}");
    assert!(
        line.contains("give that CA's certificate with --ca-file PEM (or SLOTPARTNER_CA_FILE)"),
        "the hint names the command's option: {line}"
    );
    assert!(!line.contains("sp_client") && !line.contains("ca_pem"), "no C function, no library setting: {line}");
    assert_eq!(endpoint.requests(), 0);
}

#[test]
fn an_https_endpoint_whose_ca_is_not_given_names_callback_ca_file() {
    let scratch = Scratch::new("msg-endpoint-ca");
    let url = journal_of(&scratch, &[1, 3], &[]);
    let service = sandbox(1, 3);
    let ca = ca_file(&scratch, &service);
    let (endpoint, _endpoint_ca) = Endpoint::start_tls(open_journal(&url));
    let base = service.base_url();
    let mut args = recover_args(&url, &base, &endpoint.url);
    args.extend(["--ca-file", path_str(&ca)]);
    let out = run_with(&args, &[("SLOTPARTNER_TOKEN", TOKEN)], None).expect(1);
    let line = index_lines(&out)[0];
    assert!(line.starts_with("index=2 result=endpoint_failed "), "{line}");
    assert!(
        line.contains("no answer from the callback endpoint: io: invalid peer certificate: UnknownIssuer. "),
        "{line}"
    );
    assert!(
        line.contains("give that CA's certificate with --callback-ca-file PEM (or SLOTPARTNER_CALLBACK_CA_FILE)"),
        "{line}"
    );
}

#[test]
fn a_token_the_service_refuses_stops_the_run_at_the_first_401() {
    let scratch = Scratch::new("msg-service-401");
    let url = journal_of(&scratch, &[1, 12], &[]);
    let requests = Arc::new(AtomicU64::new(0));
    let (service, service_ca) = counting_service(12, Arc::clone(&requests));
    let ca = scratch.write("service-ca.pem", service_ca.as_bytes());
    let endpoint = Endpoint::start(open_journal(&url));
    let base = format!("https://{}", service.addr());
    let mut args = recover_args(&url, &base, &endpoint.url);
    args.extend(["--ca-file", path_str(&ca), "--token", OTHER_TOKEN]);
    let out = run(&args).expect(2);

    assert_eq!(requests.load(Ordering::SeqCst), 1, "one request, then nothing");
    assert_eq!(endpoint.requests(), 0);
    let lines = index_lines(&out);
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(lines[0].starts_with("index=2 result=not_fetched reason=service "), "{}", lines[0]);
    assert!(lines[0].contains("HTTP 401"), "{}", lines[0]);
    let stopped = "the service refused the token (HTTP 401): check --token (or SLOTPARTNER_TOKEN); the run stopped at index 2, 9 indexes not tried";
    assert_eq!(out.stderr, format!("slotpartner: {stopped}\n"));
    assert!(out.stdout.contains(&format!("summary stopped=\"{stopped}\"")), "{}", out.stdout);
    let s = summary(&out);
    assert_eq!((s["taken"].as_str(), s["not_tried"].as_str(), s["service"].as_str()), ("10", "9", "1"));

    // The same with --json: every count, and the reason it stopped.
    args.push("--json");
    let out = run(&args).expect(2);
    let json = out.json();
    assert_eq!(json["stopped"], stopped);
    assert_eq!((json["results"].as_array().unwrap().len(), json["not_tried"].as_u64()), (1, Some(9)));
    assert_eq!(requests.load(Ordering::SeqCst), 2);
}

#[test]
fn a_token_the_endpoint_refuses_stops_the_run_at_the_first_401() {
    let scratch = Scratch::new("msg-endpoint-401");
    let url = journal_of(&scratch, &[1, 6], &[]);
    // The service knows the command's token; the endpoint knows another one.
    slotpartner_sandbox::quiet_logs();
    let events = Some(EventSet { seed: 1, mix: EventMix::Mixed, first_index: 1, count: 6 });
    let config = ServerConfig { token: OTHER_TOKEN.to_owned(), events, ..ServerConfig::default() };
    let service = slotpartner_sandbox::run_server(config).unwrap();
    let ca = ca_file(&scratch, &service);
    let endpoint = Endpoint::start(open_journal(&url));
    let base = service.base_url();
    let mut args = recover_args(&url, &base, &endpoint.url);
    args.extend(["--ca-file", path_str(&ca)]);
    let out = run_with(&args, &[("SLOTPARTNER_TOKEN", OTHER_TOKEN)], None).expect(2);

    assert_eq!(endpoint.requests(), 1, "one delivery, then nothing");
    assert!(endpoint.credits().is_empty());
    let lines = index_lines(&out);
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(lines[0].starts_with("index=2 result=endpoint_failed ") && lines[0].contains(" http=401"), "{}", lines[0]);
    let stopped = "the callback endpoint refused the token (HTTP 401): the endpoint's partner token must be the same as this command's --token (or SLOTPARTNER_TOKEN); the run stopped at index 2, 3 indexes not tried";
    assert_eq!(out.stderr, format!("slotpartner: {stopped}\n"));
    assert!(out.stdout.contains(&format!("summary stopped=\"{stopped}\"")), "{}", out.stdout);
    assert_eq!(summary(&out)["gaps_remaining"], "4");
}

#[test]
fn repeated_not_found_lines_are_summarised_without_a_terminal() {
    let scratch = Scratch::new("msg-not-found");
    let url = journal_of(&scratch, &[1, 40], &[]);
    // The service knows index 1 only: 2 to 39 are answered 404.
    let service = sandbox(1, 1);
    let ca = ca_file(&scratch, &service);
    let endpoint = Endpoint::start(open_journal(&url));
    let base = service.base_url();
    let mut args = recover_args(&url, &base, &endpoint.url);
    args.extend(["--ca-file", path_str(&ca), "--token", TOKEN]);
    let out = run(&args).expect(1);
    let lines = index_lines(&out);
    let first: Vec<String> = (2..=6).map(|i| format!("index={i} result=not_fetched reason=not_found ")).collect();
    assert_eq!(lines.len(), 5, "{}", out.stdout);
    assert!(lines.iter().zip(&first).all(|(line, start)| line.starts_with(start)), "{}", out.stdout);
    let after: Vec<&str> = out.stdout.lines().skip(5).collect();
    assert_eq!(after[0], "... and 33 more not_found", "{}", out.stdout);
    assert!(after[1].starts_with("summary "), "{}", out.stdout);
    let s = summary(&out);
    assert_eq!((s["taken"].as_str(), s["not_found"].as_str()), ("38", "38"));

    // --json keeps every index.
    args.push("--json");
    let json = run(&args).expect(1).json();
    let results = json["results"].as_array().unwrap();
    assert_eq!(results.len(), 38);
    assert!(results.iter().all(|r| r["reason"] == "not_found"));
}

#[test]
fn the_summary_says_what_was_taken_of_what() {
    let scratch = Scratch::new("msg-summary");
    // 1 and 9 handled; 2, 4, 6 and 8 unfinished; 3, 5 and 7 missing.
    let url = journal_of(&scratch, &[1, 9], &[2, 4, 6, 8]);
    let service = sandbox(1, 9);
    let ca = ca_file(&scratch, &service);
    let endpoint = Endpoint::start(open_journal(&url));
    let base = service.base_url();
    let mut args = recover_args(&url, &base, &endpoint.url);
    args.extend(["--ca-file", path_str(&ca), "--token", TOKEN]);

    // Every gap and unfinished delivery is young: nothing is taken, and the summary says why.
    let mut young = recover_args_aged(&url, &base, &endpoint.url, "1h");
    young.extend(["--ca-file", path_str(&ca), "--token", TOKEN]);
    let s = summary(&run(&young).expect(1));
    assert_eq!((s["missing_before"].as_str(), s["unfinished_before"].as_str(), s["taken"].as_str()), ("3", "4", "0"));
    assert_eq!((s["taken_missing"].as_str(), s["missing_not_taken"].as_str()), ("0", "3"));
    assert_eq!(s["gaps_too_young"], "3");

    // More taken than missing: the unfinished deliveries come first, and --limit stops the rest.
    let mut limited = args.clone();
    limited.extend(["--limit", "5"]);
    let s = summary(&run(&limited).expect(1));
    assert_eq!((s["missing_before"].as_str(), s["unfinished_before"].as_str(), s["taken"].as_str()), ("3", "4", "5"));
    assert_eq!(
        (s["taken_unfinished"].as_str(), s["taken_missing"].as_str(), s["missing_not_taken"].as_str()),
        ("4", "1", "2")
    );
    assert_eq!(s["recovered"], "5");

    let mut json_args = args.clone();
    json_args.push("--json");
    let json = run(&json_args).expect(0).json();
    assert_eq!((json["missing_before"].as_u64(), json["taken"].as_u64()), (Some(2), Some(2)));
    assert_eq!((json["taken_unfinished"].as_u64(), json["taken_missing"].as_u64()), (Some(0), Some(2)));
    assert_eq!(json["missing_not_taken"], 0);
    assert_eq!(endpoint.credits().len(), 7, "each unfinished or missing index credited once");
}

#[test]
fn a_journal_url_without_a_scheme_says_what_is_expected() {
    let bad = |url: &str| run(&["journal", "status", "--journal", url]).expect(2).one_error_line().to_owned();
    assert_eq!(
        bad("foo"),
        r#"slotpartner: journal_url: "foo" has no scheme: expected sqlite:PATH or postgres://USER@HOST/DATABASE"#
    );
    assert_eq!(
        bad("mysql://partner@db/journal"),
        r#"slotpartner: journal_url: scheme "mysql" is not a journal: expected sqlite:PATH or postgres://USER@HOST/DATABASE"#
    );
    // What follows a colon may be a password: it is not repeated.
    let line = bad(":secret@db");
    assert_eq!(
        line,
        r#"slotpartner: journal_url: has no scheme before its first ":": expected sqlite:PATH or postgres://USER@HOST/DATABASE"#
    );
}

#[test]
fn a_postgres_host_that_does_not_resolve_is_told_from_a_server_that_refuses() {
    // A name that cannot resolve without asking anyone: a label longer than DNS allows (63
    // octets). The resolver here would send `.invalid` names to a name server off this machine;
    // it refuses this one before sending anything (no socket is opened: checked with strace).
    let host = format!("{}.invalid", "a".repeat(64));
    let url = format!("postgres://partner@{host}/journal?connect_timeout=5");
    let line = run(&["journal", "status", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.contains("(the host name does not resolve: check the host in the journal URL)"), "{line}");
    assert!(!line.contains("running"), "{line}");

    // A port nobody listens on: the server is not running there.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let url = format!("postgres://partner@127.0.0.1:{}/journal?connect_timeout=5", closed.port());
    let line = run(&["journal", "status", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.contains("(is the PostgreSQL server running and reachable?)"), "{line}");
    assert!(!line.contains("does not resolve"), "{line}");
}
