//! What `slotpartner recover` says, as an operator reads it: hints in the command's own options
//! and variables, a refused token that stops the run, repeated failures summarised, the
//! summary's counts explained; and the journal URL's messages. The built binary runs as a
//! process against the sandbox and a partner's endpoint on loopback, over real HTTPS; a proxy on
//! loopback in front of the endpoint changes its answers where a test says so (`Proxy`).

mod support;

use std::io::{BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use slotpartner::journal::{Begin, Journal, JournalOptions};
use slotpartner::{Receiver, ReceiverConfig, Request};
use slotpartner_sandbox::burst::{self, EventMix, EventSet};
use slotpartner_sandbox::http::{self, ListenerHandle};
use slotpartner_sandbox::{ServerConfig, actions};

use support::*;

/// A token the sandbox or the endpoint does not know.
const OTHER_TOKEN: &str = "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f";

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
    // Read once: the indexes are folded into the runs, where a test may move their times.
    journal.status().unwrap();
    url
}

/// `recover` against `base_url`, delivering to `callback`, taking gaps and unfinished
/// deliveries at least `min_age` old.
fn recover_args_aged<'a>(journal: &'a str, base_url: &'a str, callback: &'a str, min_age: &'a str) -> Vec<&'a str> {
    let mut args = vec!["recover", "--journal", journal, "--base-url", base_url, "--callback-url", callback];
    // The ends of the numbering are probed in tests of their own.
    args.extend(["--retries", "0", "--min-age", min_age, "--probe", "0"]);
    args
}

/// `recover_args_aged`, taking gaps however young (those of these tests were made a moment ago).
fn recover_args<'a>(journal: &'a str, base_url: &'a str, callback: &'a str) -> Vec<&'a str> {
    recover_args_aged(journal, base_url, callback, "0s")
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

    // The first delivery is refused: a balance query asks whether the token is; refused too.
    assert_eq!(endpoint.requests(), 2, "one delivery, one balance query, then nothing");
    assert!(endpoint.credits().is_empty());
    let lines = index_lines(&out);
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(lines[0].starts_with("index=2 result=endpoint_failed ") && lines[0].contains(" http=401"), "{}", lines[0]);
    let stopped = "the callback endpoint refused the token (HTTP 401): the endpoint's partner token must be the same as this command's --token (or SLOTPARTNER_TOKEN); the run stopped at index 2, 3 indexes not tried";
    assert_eq!(out.stderr, format!("slotpartner: {stopped}\n"));
    assert!(out.stdout.contains(&format!("summary stopped=\"{stopped}\"")), "{}", out.stdout);
    assert_eq!(summary(&out)["gaps_remaining"], "4");
}

/// How the proxy in front of the endpoint changes its answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The endpoint's answers as they are.
    Pass,
    /// HTTP 401 for the delivery of this index (a blocked player, a rule of the partner's own);
    /// the endpoint never sees it.
    RefuseIndex(i64),
    /// The endpoint's answer, with 70 KiB of spaces after it.
    Big,
    /// The endpoint's answer, with a byte that is not UTF-8 after it.
    NotUtf8,
    /// HTTP 403 for every request, balance queries too (an endpoint that does not list this
    /// host among its sources); the endpoint never sees one.
    ForbidAll,
}

/// A proxy on loopback in front of the endpoint at `target`: every request is passed on and
/// answered with the endpoint's answer, changed as `mode` says. A balance query is not passed on
/// (the test endpoint handles refunds and payouts only): it is answered HTTP 200 when the
/// library's receiver accepts its token and source, with its refusal otherwise.
struct Proxy {
    url: String,
    mode: Arc<Mutex<Mode>>,
    balance_queries: Arc<AtomicU64>,
}

impl Proxy {
    fn start(target: &str, mode: Mode) -> Proxy {
        let target = target.strip_prefix("http://").unwrap().split('/').next().unwrap().to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/callback", listener.local_addr().unwrap());
        let mode = Arc::new(Mutex::new(mode));
        let balance_queries = Arc::new(AtomicU64::new(0));
        let mut config = ReceiverConfig::default();
        config.add_token(TOKEN).unwrap();
        config.set_sources("127.0.0.1,::1").unwrap();
        let receiver = Arc::new(Receiver::new(config).unwrap());
        let (thread_mode, queries) = (Arc::clone(&mode), Arc::clone(&balance_queries));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (mode, queries, receiver, target) =
                    (*thread_mode.lock().unwrap(), Arc::clone(&queries), Arc::clone(&receiver), target.clone());
                std::thread::spawn(move || proxy_one(stream, &target, mode, &receiver, &queries));
            }
        });
        Proxy { url, mode, balance_queries }
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }
}

/// One request through the proxy (the client sends one per connection, as the endpoint answers
/// with `Connection: close`).
fn proxy_one(stream: TcpStream, target: &str, mode: Mode, receiver: &Receiver, balance_queries: &AtomicU64) {
    let mut reader = BufReader::new(stream);
    let Some(HttpRequest { head, headers, body }) = HttpRequest::read(&mut reader) else { return };
    let token = headers.get("x-service-token").map(String::as_str);
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let (status, answer) = if mode == Mode::ForbidAll {
        if json["action"] == "getPlayerBalance" {
            balance_queries.fetch_add(1, Ordering::SeqCst);
        }
        (403, br#"{"error":"source not allowed"}"#.to_vec())
    } else if json["action"] == "getPlayerBalance" {
        balance_queries.fetch_add(1, Ordering::SeqCst);
        let request = Request {
            token: token.map(str::as_bytes),
            remote_addr: Some(b"127.0.0.1"),
            forwarded_for: None,
            body: &body,
        };
        match receiver.handle(&request) {
            Ok(_) => (200, br#"{"balance":0}"#.to_vec()),
            Err(error) => {
                let response = receiver.error_response(&error);
                (response.http_status, response.body.into_bytes())
            }
        }
    } else if mode == Mode::RefuseIndex(json["index"].as_i64().unwrap_or(-1)) {
        (401, br#"{"error":"player blocked"}"#.to_vec())
    } else {
        let mut upstream = TcpStream::connect(target).unwrap();
        upstream.write_all(head.as_bytes()).and_then(|()| upstream.write_all(&body)).unwrap();
        let mut response = Vec::new();
        upstream.read_to_end(&mut response).unwrap();
        let split = response.windows(4).position(|w| w == b"\r\n\r\n").expect("a whole answer") + 4;
        let status: u16 = String::from_utf8_lossy(&response[9..12]).parse().unwrap();
        let mut answer = response[split..].to_vec();
        match mode {
            Mode::Big => answer.extend(vec![b' '; 70 * 1024]),
            Mode::NotUtf8 => answer.push(0xff),
            _ => {}
        }
        (status, answer)
    };
    let stream = reader.get_mut();
    let head = format!(
        "HTTP/1.1 {status} Answer\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        answer.len()
    );
    let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&answer)).and_then(|()| stream.flush());
}

/// An endpoint that does not let this host in answers 403 to every delivery: the run stops at
/// the first, once a balance query is refused too, and says what to do; nothing is noted.
#[test]
fn an_endpoint_refusing_this_host_stops_the_run_at_the_first_403() {
    let scratch = Scratch::new("msg-endpoint-403");
    let url = journal_of(&scratch, &[1, 8], &[]);
    let service = sandbox(1, 8);
    let ca = ca_file(&scratch, &service);
    let endpoint = Endpoint::start(open_journal(&url));
    let proxy = Proxy::start(&endpoint.url, Mode::ForbidAll);
    let base = service.base_url();
    let mut args = recover_args(&url, &base, &proxy.url);
    args.extend(["--ca-file", path_str(&ca), "--token", TOKEN]);
    let out = run(&args).expect(2);
    assert_eq!(proxy.balance_queries.load(Ordering::SeqCst), 1);
    let lines = index_lines(&out);
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(lines[0].starts_with("index=2 result=endpoint_failed ") && lines[0].contains(" http=403"), "{}", lines[0]);
    let stderr = &out.stderr;
    assert!(
        stderr
            .contains("the callback endpoint refused this host's address (HTTP 403): add it to the endpoint's sources"),
        "{stderr}"
    );
    assert!(stderr.contains("the run stopped at index 2"), "{stderr}");
    assert!(endpoint.credits().is_empty());
}

#[test]
fn an_endpoint_refusing_one_event_with_401_after_accepting_the_token_does_not_stop_the_run() {
    let scratch = Scratch::new("msg-endpoint-401-one");
    let url = journal_of(&scratch, &[1, 12], &[]);
    let service = sandbox(1, 12);
    let ca = ca_file(&scratch, &service);
    let endpoint = Endpoint::start(open_journal(&url));
    let proxy = Proxy::start(&endpoint.url, Mode::RefuseIndex(5));
    let base = service.base_url();
    let mut args = recover_args(&url, &base, &proxy.url);
    args.extend(["--ca-file", path_str(&ca), "--token", TOKEN]);

    // 2 to 4 are accepted first: the 401 for 5 is that event's, and 6 to 11 are recovered.
    let out = run(&args).expect(1);
    assert!(out.stderr.is_empty(), "no stop, no error line: {}", out.stderr);
    let line = index_lines(&out).into_iter().find(|l| l.starts_with("index=5 ")).unwrap();
    assert!(line.starts_with("index=5 result=endpoint_failed ") && line.contains(" http=401 "), "{line}");
    assert!(
        line.contains("the callback endpoint refused the token for this event only (HTTP 401), though it accepted it before in this run: "),
        "{line}"
    );
    let s = summary(&out);
    assert_eq!((s["recovered"].as_str(), s["endpoint_failures"].as_str(), s["not_tried"].as_str()), ("9", "1", "0"));
    assert!(!s.contains_key("stopped"), "{}", out.stdout);
    assert_eq!((s["gaps_remaining"].as_str(), s["remaining"].as_str()), ("1", "5"));
    assert_eq!(endpoint.credits().len(), 9);
    assert!(endpoint.credits().values().all(|c| c.times == 1));
    assert_eq!(proxy.balance_queries.load(Ordering::SeqCst), 0, "the token was accepted in this run already");

    // The next run delivers 5 first: refused before anything was accepted, the token is asked
    // about with a balance query, which the endpoint accepts: 5 is that event's failure again,
    // noted, and the run does not blame the token.
    let out = run(&args).expect(1);
    assert!(out.stderr.is_empty(), "no stop, no error line: {}", out.stderr);
    let lines = index_lines(&out);
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(
        lines[0].contains(
            "refused the token for this event only (HTTP 401), though it accepted it for a balance query just after"
        ),
        "{}",
        lines[0]
    );
    assert_eq!(proxy.balance_queries.load(Ordering::SeqCst), 1);

    // Once the endpoint takes it, nothing remains.
    proxy.set(Mode::Pass);
    let out = run(&args).expect(0);
    assert_eq!(summary(&out)["recovered"], "1");
    assert_eq!(endpoint.credits().len(), 10);
    assert!(endpoint.credits().values().all(|c| c.times == 1));
}

#[test]
fn a_service_answering_403_stops_the_run_naming_the_cause() {
    let scratch = Scratch::new("msg-service-403");
    let url = journal_of(&scratch, &[1, 6], &[]);
    slotpartner_sandbox::quiet_logs();
    let certs = slotpartner_sandbox::tls::generate().unwrap();
    let requests = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&requests);
    let handler: http::Handler = Arc::new(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        http::Response::error(403, "forbidden", "this partner may not fetch events")
    });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let service = http::spawn(listener, Some(Arc::clone(&certs.server_config)), "https", handler).unwrap();
    let ca = scratch.write("service-ca.pem", certs.ca_pem.as_bytes());
    let endpoint = Endpoint::start(open_journal(&url));
    let base = format!("https://{}", service.addr());
    let mut args = recover_args(&url, &base, &endpoint.url);
    args.extend(["--ca-file", path_str(&ca), "--token", TOKEN]);
    let out = run(&args).expect(2);
    assert_eq!(requests.load(Ordering::SeqCst), 1, "one request, then nothing");
    assert_eq!(endpoint.requests(), 0);
    let stopped = "the service refused the request (HTTP 403 Forbidden): check --token (or SLOTPARTNER_TOKEN), and that the service lets this host's address in; the run stopped at index 2, 3 indexes not tried";
    assert_eq!(out.stderr, format!("slotpartner: {stopped}\n"));
    let lines = index_lines(&out);
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(
        lines[0].starts_with("index=2 result=not_fetched reason=service ") && lines[0].contains("403"),
        "{}",
        lines[0]
    );
}

#[test]
fn an_answer_that_cannot_be_read_is_the_index_failure_not_no_answer() {
    for (mode, why) in [(Mode::Big, "over 64 KiB"), (Mode::NotUtf8, "not UTF-8")] {
        let scratch = Scratch::new(&format!("msg-unread-{why}"));
        let url = journal_of(&scratch, &[1, 6], &[]);
        let service = sandbox(1, 6);
        let ca = ca_file(&scratch, &service);
        let endpoint = Endpoint::start(open_journal(&url));
        let proxy = Proxy::start(&endpoint.url, mode);
        let base = service.base_url();
        let mut args = recover_args(&url, &base, &proxy.url);
        args.extend(["--ca-file", path_str(&ca), "--token", TOKEN]);
        // The endpoint handled all four: the journal needs nothing.
        let out = run(&args).expect(0);
        let lines = index_lines(&out);
        assert_eq!(lines.len(), 4, "four indexes tried, none left for a connection failure: {}", out.stdout);
        for line in lines {
            assert!(line.contains(" result=endpoint_failed ") && line.contains(" http=200 "), "{line}");
            let said = format!("message=\"answered HTTP 200, the answer could not be read ({why})\"");
            assert!(line.ends_with(&said), "{line}");
            assert!(!line.contains("no answer"), "{line}");
        }
        let s = summary(&out);
        assert_eq!((s["endpoint_failures"].as_str(), s["not_tried"].as_str()), ("4", "0"), "{}", out.stdout);
        assert!(!s.contains_key("stopped"), "{}", out.stdout);
        assert_eq!(s["gaps_remaining"], "0");
        assert_eq!(endpoint.credits().len(), 4, "{why}");
    }
}

#[test]
fn the_taken_unfinished_are_those_the_plan_took() {
    let scratch = Scratch::new("msg-taken-unfinished");
    // 1 and 9 handled; 2 to 5 abandoned, 4 and 5 two hours ago; 6 to 8 missing (found now).
    let url = journal_of(&scratch, &[1, 9], &[2, 3, 4, 5]);
    let db = rusqlite::Connection::open(scratch.path("journal.db")).unwrap();
    db.execute_batch("UPDATE sp_journal_delivery SET updated_ms = updated_ms - 7200000 WHERE first_index IN (4, 5)")
        .unwrap();
    drop(db);
    let service = sandbox(1, 9);
    let ca = ca_file(&scratch, &service);
    let endpoint = Endpoint::start(open_journal(&url));
    let base = service.base_url();
    let mut args = recover_args_aged(&url, &base, &endpoint.url, "1h");
    args.extend(["--ca-file", path_str(&ca), "--token", TOKEN, "--limit", "2"]);
    let out = run(&args).expect(1);
    let s = summary(&out);
    assert_eq!((s["unfinished_before"].as_str(), s["taken"].as_str()), ("4", "2"), "{}", out.stdout);
    assert_eq!(
        (s["taken_unfinished"].as_str(), s["taken_missing"].as_str(), s["missing_not_taken"].as_str()),
        ("2", "0", "3"),
        "{}",
        out.stdout
    );
    let lines = index_lines(&out);
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    for (line, index) in lines.iter().zip([4, 5]) {
        assert!(line.starts_with(&format!("index={index} result=recovered ")), "{line}");
        assert!(line.contains(" unfinished=true"), "{line}");
    }

    let mut json_args = args.clone();
    json_args.push("--json");
    let json = run(&json_args).expect(1).json();
    assert_eq!((json["taken_unfinished"].as_u64(), json["taken_missing"].as_u64()), (Some(0), Some(0)));
}

#[test]
fn gaps_found_on_a_clock_ahead_are_old_enough() {
    let scratch = Scratch::new("msg-clock-ahead");
    let url = journal_of(&scratch, &[1, 4], &[]);
    // The host that wrote 4 had its clock a day ahead: gap 2-3 was "found" tomorrow.
    let db = rusqlite::Connection::open(scratch.path("journal.db")).unwrap();
    db.execute_batch("UPDATE sp_journal_runs SET since_ms = since_ms + 86400000, last_ms = last_ms + 86400000")
        .unwrap();
    drop(db);
    let service = sandbox(1, 4);
    let ca = ca_file(&scratch, &service);
    let endpoint = Endpoint::start(open_journal(&url));
    let base = service.base_url();
    let mut args = recover_args_aged(&url, &base, &endpoint.url, "1h");
    args.extend(["--ca-file", path_str(&ca), "--token", TOKEN]);

    let mut dry = args.clone();
    dry.push("--dry-run");
    let out = run(&dry).expect(1);
    assert_eq!(index_lines(&out), ["index=2 result=would_fetch", "index=3 result=would_fetch"], "{}", out.stdout);
    assert!(out.stdout.contains(" gaps_too_young=0 "), "{}", out.stdout);

    let out = run(&args).expect(0);
    let s = summary(&out);
    assert_eq!((s["taken"].as_str(), s["recovered"].as_str(), s["gaps_too_young"].as_str()), ("2", "2", "0"));
    assert_eq!(endpoint.credits().len(), 2);
}

#[test]
fn the_callback_url_s_secrets_are_never_shown() {
    let scratch = Scratch::new("msg-secrets");
    let url = journal_of(&scratch, &[1, 4], &[]);
    let service = sandbox(1, 4);
    let ca = ca_file(&scratch, &service);
    // The endpoint uses another journal: the run warns that delivered indexes are still missing,
    // naming the endpoint.
    let other = Scratch::new("msg-secrets-other");
    let endpoint = Endpoint::start(open_journal(&other.journal_url()));
    let address = endpoint.url.strip_prefix("http://").unwrap().strip_suffix("/callback").unwrap();
    let callback = format!("http://partner:CBSECRET@{address}/callback?key=QSECRET&sig=QSIG");
    let shown = format!("http://{address}/callback?key=...&sig=...");
    let base = service.base_url();
    let mut args = recover_args(&url, &base, &callback);
    args.extend(["--ca-file", path_str(&ca), "--token", TOKEN]);
    for json in [false, true] {
        let mut args = args.clone();
        if json {
            args.push("--json");
        }
        let out = run(&args).expect(1);
        assert_eq!(endpoint.credits().len(), 2, "delivered: {}{}", out.stdout, out.stderr);
        for secret in ["CBSECRET", "QSECRET", "QSIG", "@127.0.0.1"] {
            assert!(
                !out.stdout.contains(secret) && !out.stderr.contains(secret),
                "{secret}: {}{}",
                out.stdout,
                out.stderr
            );
        }
        assert!(out.stderr.contains(&format!("was delivered to {shown} but is still missing")), "{}", out.stderr);
        if json {
            assert_eq!(out.json()["callback_url"], shown.as_str());
        }
    }
}

/// Runs the command with stdout a pipe whose reader is gone before anything is written
/// (`slotpartner ... | head -0`): its exit status and stderr.
fn run_with_stdout_closed(args: &[&str]) -> (i32, String) {
    let mut command = Command::new(BIN);
    command.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (name, _) in std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v))) {
        if name.starts_with("SLOTPARTNER_") {
            command.env_remove(name);
        }
    }
    let mut child = command.spawn().unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    (output.status.code().expect("exited, not killed"), String::from_utf8(output.stderr).unwrap())
}

#[test]
fn a_closed_stdout_stops_no_run() {
    let scratch = Scratch::new("msg-closed-stdout");
    let url = journal_of(&scratch, &[1, 8], &[]);
    let service = sandbox(1, 8);
    let ca = ca_file(&scratch, &service);
    let endpoint = Endpoint::start(open_journal(&url));
    let base = service.base_url();
    let mut args = recover_args(&url, &base, &endpoint.url);
    args.extend(["--ca-file", path_str(&ca), "--token", TOKEN]);
    let (code, stderr) = run_with_stdout_closed(&args);
    assert_eq!((code, stderr.as_str()), (0, ""), "the run finished as it would have");
    assert_eq!(endpoint.credits().len(), 6, "every index recovered");
    assert!(endpoint.credits().values().all(|c| c.times == 1));

    for json in [false, true] {
        let mut args = vec!["journal", "status", "--journal", &url];
        if json {
            args.push("--json");
        }
        assert_eq!(run_with_stdout_closed(&args), (0, String::new()), "{args:?}");
    }
    // `check` the same: the exit status it has with its lines read.
    let check = ["check", "--journal", &url, "--base-url", &base, "--ca-file", path_str(&ca), "--token", TOKEN];
    let read = run(&check);
    assert!(!read.stdout.is_empty() && !read.stderr.contains("panicked"), "{}{}", read.stdout, read.stderr);
    assert_eq!(run_with_stdout_closed(&check), (read.code, read.stderr));
    // With attention needed, the exit status still says so.
    let gaps = Scratch::new("msg-closed-stdout-gaps");
    let other = journal_of(&gaps, &[1, 3], &[]);
    assert_eq!(run_with_stdout_closed(&["journal", "status", "--journal", &other]), (1, String::new()));
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
    // Without a colon, it is shown up to what may start a secret.
    let line = bad("postgresql//partner@127.0.0.1/db?password=s3cret");
    assert_eq!(
        line,
        r#"slotpartner: journal_url: "postgresql//partner"... has no scheme: expected sqlite:PATH or postgres://USER@HOST/DATABASE"#
    );
    assert!(!bad("db?password=s3cret").contains("s3cret"));
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

/// The events lost after the highest index seen (no later one came to show the gap) are found
/// by asking the service after it, and delivered; the journal notes where the tail was.
#[test]
fn lost_events_after_the_highest_index_are_found() {
    let scratch = Scratch::new("msg-tail");
    // The service numbered 1-9; the journal saw 1-5: 6-9 were lost, and no gap shows it.
    let url = journal_of(&scratch, &[1, 2, 3, 4, 5], &[]);
    let service = sandbox(1, 9);
    let ca = ca_file(&scratch, &service);
    let endpoint = Endpoint::start(open_journal(&url));
    let base = service.base_url();
    let args = probing(recover_args(&url, &base, &endpoint.url), path_str(&ca));
    let out = run(&args).expect(0);
    let s = summary(&out);
    assert_eq!(
        (s["tail_found"].as_str(), s["tail_end"].as_str(), s["head_found"].as_str()),
        ("4", "10", "0"),
        "{}",
        out.stdout
    );
    for index in 6..=9 {
        let line = format!("index={index} result=recovered ");
        assert!(
            index_lines(&out).iter().any(|l| l.starts_with(&line) && l.ends_with(" probe=tail")),
            "{index}: {}",
            out.stdout
        );
    }
    assert_eq!(endpoint.credits().len(), 4);
    let status = run(&["journal", "status", "--journal", &url, "--json"]).expect(0).json();
    assert_eq!(
        (status["highest_index"].as_i64(), status["tail_checked_index"].as_i64()),
        (Some(9), Some(10)),
        "{status}"
    );
    // Asked again: nothing more there, nothing credited twice.
    let s = summary(&run(&args).expect(0));
    assert_eq!((s["tail_found"].as_str(), s["tail_end"].as_str()), ("0", "10"));
    assert_eq!(endpoint.credits().len(), 4, "nothing credited twice");
}

/// The events lost before the journal saw its first (no first index configured: gaps count from
/// the lowest seen) are found by asking the service below the lowest, and delivered, again on
/// every run (a 404 there is not taken as the numbering's start for good).
#[test]
fn lost_events_below_the_lowest_index_are_found() {
    let scratch = Scratch::new("msg-head");
    // The service numbered 1-5; the journal saw 3-5: 1 lost by the sender, 2's worker killed.
    let (url, journal) = journal_without_a_first_index(&scratch, 3..=5);
    let status = run(&["journal", "status", "--journal", &url]).expect(0);
    assert!(
        status.stdout.contains("first index:    3 (the lowest seen: recover asks the service below it each run)"),
        "{}",
        status.stdout
    );
    let service = sandbox(1, 5);
    let ca = ca_file(&scratch, &service);
    let endpoint = Endpoint::start(journal);
    let base = service.base_url();
    let args = probing(recover_args(&url, &base, &endpoint.url), path_str(&ca));
    let out = run(&args).expect(0);
    let s = summary(&out);
    assert_eq!(s["head_found"], "2", "{}", out.stdout);
    for index in [2, 1] {
        let line = format!("index={index} result=recovered ");
        assert!(
            index_lines(&out).iter().any(|l| l.starts_with(&line) && l.ends_with(" probe=head")),
            "{index}: {}",
            out.stdout
        );
    }
    assert_eq!(endpoint.credits().len(), 2);
    let status = run(&["journal", "status", "--json", "--journal", &url]).expect(0).json();
    assert_eq!((status["first_index"].as_i64(), status["first_index_stored"].as_bool()), (Some(1), Some(false)));
    // Asked again: nothing below 1, nothing credited twice.
    let s = summary(&run(&args).expect(0));
    assert_eq!(s["head_found"], "0");
    assert_eq!(endpoint.credits().len(), 2);
}

/// A journal opened without a first index (gaps count from the lowest seen) that handled the
/// sandbox's events `seen` (seed 1, mixed); its URL and the journal, for an endpoint.
fn journal_without_a_first_index(scratch: &Scratch, seen: std::ops::RangeInclusive<u64>) -> (String, Arc<Journal>) {
    let url = scratch.journal_url();
    let journal = Arc::new(Journal::open(&url, &JournalOptions::default()).unwrap());
    for index in seen {
        let body = burst::burst_event(1, EventMix::Mixed, index).body;
        let Begin::New(claim) = journal.begin(&delivery(&body)).unwrap() else { panic!("new") };
        journal.finish(&claim, b"{}").unwrap();
    }
    (url, journal)
}

/// `args` probing up to 100 indexes at each end, with the service's CA and the token.
fn probing<'a>(mut args: Vec<&'a str>, ca: &'a str) -> Vec<&'a str> {
    let at = args.iter().position(|a| *a == "--probe").unwrap();
    args[at + 1] = "100";
    args.extend(["--ca-file", ca, "--token", TOKEN]);
    args
}

/// While new indexes keep coming (the last younger than --min-age), the tail is left alone: its
/// events are on their way, and a gap will show a lost one.
#[test]
fn the_tail_is_not_probed_while_events_arrive() {
    let scratch = Scratch::new("msg-tail-busy");
    let url = journal_of(&scratch, &[1, 2], &[]);
    let service = sandbox(1, 5);
    let ca = ca_file(&scratch, &service);
    let endpoint = Endpoint::start(open_journal(&url));
    let base = service.base_url();
    let args = probing(recover_args_aged(&url, &base, &endpoint.url, "1h"), path_str(&ca));
    let out = run(&args).expect(0);
    let s = summary(&out);
    assert_eq!((s["tail_found"].as_str(), s["tail_end"].as_str()), ("0", "-"), "{}", out.stdout);
    assert!(endpoint.credits().is_empty());
}

/// A service answering a missing index with another index's event (an earlier one, its index
/// changed): recovery does not deliver it, the gap stays open, and the run says why (exit 1);
/// nothing is credited.
#[test]
fn an_index_answered_with_another_index_s_event_stays_open() {
    let scratch = Scratch::new("msg-wrong-event");
    let url = journal_of(&scratch, &[1, 2, 3, 4, 5, 7], &[]);
    slotpartner_sandbox::quiet_logs();
    let certs = slotpartner_sandbox::tls::generate().unwrap();
    let events = EventSet { seed: 1, mix: EventMix::Mixed, first_index: 1, count: 7 };
    let handler: http::Handler = Arc::new(move |req| {
        let asked: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
        if asked["action"] == "getEvent" && asked["index"] == 6 {
            // Event 5, only its index changed.
            let mut event: serde_json::Value =
                serde_json::from_str(&burst::burst_event(1, EventMix::Mixed, 5).body).unwrap();
            event["index"] = 6.into();
            return http::Response::json(200, &serde_json::json!({ "event": event }));
        }
        actions::handle_with(req, TOKEN, Some(&events))
    });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let service = http::spawn(listener, Some(Arc::clone(&certs.server_config)), "https", handler).unwrap();
    let ca = scratch.write("service-ca.pem", certs.ca_pem.as_bytes());
    let endpoint = Endpoint::start(open_journal(&url));
    let base = format!("https://{}", service.addr());
    let mut args = recover_args(&url, &base, &endpoint.url);
    args.extend(["--ca-file", path_str(&ca), "--token", TOKEN]);
    let out = run(&args).expect(1);
    let lines = index_lines(&out);
    assert!(
        lines.len() == 1 && lines[0].starts_with("index=6 result=not_fetched reason=wrong_event "),
        "{}",
        out.stdout
    );
    assert!(lines[0].contains("holds at index 5"), "{}", lines[0]);
    let s = summary(&out);
    assert_eq!(
        (s["wrong_event"].as_str(), s["gaps_remaining"].as_str(), s["result"].as_str()),
        ("1", "1", "gaps_remain")
    );
    assert!(endpoint.credits().is_empty(), "nothing delivered");
    run(&["journal", "gaps", "--journal", &url]).expect(1);
}

/// A 404 at the head that is not the service's answer (a proxy in front of it misrouting
/// `getEvent` for a moment, as during a deploy: nginx's HTML page) stores the lowest seen as the
/// service's first index, for good: the events lost below it (1 lost by the sender, 2's worker
/// killed) are never asked for again, and the next run, the service answering again, finds
/// nothing to probe. Missing indexes need `--not-found-limit` runs of 404 before they are given
/// up; the head is given up on one 404 of anything.
#[test]
fn a_head_404_that_is_not_the_service_s_stores_no_first_index() {
    let scratch = Scratch::new("msg-head-proxy-404");
    let (url, journal) = journal_without_a_first_index(&scratch, 3..=5);
    slotpartner_sandbox::quiet_logs();
    let certs = slotpartner_sandbox::tls::generate().unwrap();
    let events = EventSet { seed: 1, mix: EventMix::Mixed, first_index: 1, count: 5 };
    let misrouted = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let proxy_404 = Arc::clone(&misrouted);
    let handler: http::Handler = Arc::new(move |req| {
        if proxy_404.load(Ordering::SeqCst) {
            let page = "<html><head><title>404 Not Found</title></head><body><center><h1>404 Not Found</h1></center><hr><center>nginx</center></body></html>";
            return http::Response {
                status: 404,
                content_type: Some("text/html"),
                headers: Vec::new(),
                body: http::Body::Bytes(page.as_bytes().to_vec()),
                action: None,
            };
        }
        actions::handle_with(req, TOKEN, Some(&events))
    });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let service = http::spawn(listener, Some(Arc::clone(&certs.server_config)), "https", handler).unwrap();
    let ca = scratch.write("service-ca.pem", certs.ca_pem.as_bytes());
    let endpoint = Endpoint::start(journal);
    let base = format!("https://{}", service.addr());
    let args = probing(recover_args(&url, &base, &endpoint.url), path_str(&ca));
    let misrouted_run = run(&args);
    let status = run(&["journal", "status", "--journal", &url]).expect(0);
    // The proxy routes to the service again; the next run asks below the lowest seen.
    misrouted.store(false, Ordering::SeqCst);
    let next_run = run(&args);
    assert_eq!(
        endpoint.credits().len(),
        2,
        "events 1 and 2 were never recovered: one proxy 404 stored the first index.\nthe misrouted run:\n{}\nstatus after it:\n{}\nthe next run:\n{}",
        misrouted_run.stdout,
        status.stdout,
        next_run.stdout
    );
}
