//! `send --burst` against fake partner wallets on loopback, and `getEvent`
//! of the sandbox returning the same events by index.

use std::collections::{BTreeSet, HashMap};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

use serde_json::{Value, json};
use slotpartner_sandbox::burst::{self, BurstOptions, BurstReport, EventMix, EventSet, Shares};
use slotpartner_sandbox::http::{self, Request, Response};
use slotpartner_sandbox::{DEFAULT_TOKEN, ServerConfig, ServerHandle, run_server, tls};

const BIN: &str = env!("CARGO_BIN_EXE_slotpartner-sandbox");

/// How the fake partner answers an event it has handled before.
#[derive(Clone, Copy, PartialEq)]
enum OnRepeat {
    /// The stored first reply, byte for byte (what a journal gives).
    StoredReply,
    /// `success:false` "duplicate" (what partners without a journal do).
    Refuse,
}

#[derive(Default)]
struct Wallet {
    /// (index, body bytes, connection thread) of every request, in arrival order.
    received: Vec<(u64, Vec<u8>, ThreadId)>,
    /// First reply by transactionId.
    replies: HashMap<u64, Vec<u8>>,
    money: u64,
    payouts: BTreeSet<u64>,
    refunds: BTreeSet<u64>,
}

type Shared = Arc<Mutex<Wallet>>;

struct Partner {
    server: http::ListenerHandle,
    wallet: Shared,
    ca: Option<PathBuf>,
}

impl Partner {
    fn url(&self) -> String {
        let scheme = if self.ca.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}/callback", self.server.addr().port())
    }
}

impl Drop for Partner {
    fn drop(&mut self) {
        if let Some(ca) = &self.ca {
            std::fs::remove_file(ca).ok();
        }
    }
}

fn reply_bytes(wrapper: &str, success: bool, message: &str) -> Vec<u8> {
    format!(r#"{{"{wrapper}":{{"success":{success},"errorMessage":{}}}}}"#, Value::from(message)).into_bytes()
}

/// A partner crediting a wallet once per transactionId.
fn partner(use_tls: bool, on_repeat: OnRepeat, delay: Duration) -> Partner {
    slotpartner_sandbox::quiet_logs();
    let wallet: Shared = Arc::default();
    let state = Arc::clone(&wallet);
    let handler: http::Handler = Arc::new(move |req: &Request| {
        if !delay.is_zero() {
            thread::sleep(delay);
        }
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let index = body["index"].as_u64().unwrap_or(0);
        let tx = body["transactionId"].as_u64().unwrap_or(0);
        let wrapper = if body["event"] == "jackpotPayout" { "payout" } else { "refund" };
        let mut w = state.lock().unwrap();
        w.received.push((index, req.body.clone(), thread::current().id()));
        let bytes = match (w.replies.get(&tx), on_repeat) {
            (Some(first), OnRepeat::StoredReply) => first.clone(),
            (Some(_), OnRepeat::Refuse) => reply_bytes(wrapper, false, "duplicate transactionId"),
            (None, _) => {
                if wrapper == "payout" {
                    w.money += body["moneyWon"].as_u64().unwrap();
                    w.payouts.insert(tx);
                } else {
                    w.refunds.insert(tx);
                }
                let bytes = reply_bytes(wrapper, true, "");
                w.replies.insert(tx, bytes.clone());
                bytes
            }
        };
        let mut resp = Response::json(200, &Value::Null);
        resp.body = http::Body::Bytes(bytes);
        resp
    });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    if use_tls {
        let certs = tls::generate().unwrap();
        let ca = std::env::temp_dir().join(format!(
            "slotpartner-sandbox-burst-ca-{}-{}.pem",
            std::process::id(),
            listener.local_addr().unwrap().port()
        ));
        std::fs::write(&ca, &certs.ca_pem).unwrap();
        let server = http::spawn(listener, Some(certs.server_config), "partner", handler).unwrap();
        Partner { server, wallet, ca: Some(ca) }
    } else {
        let server = http::spawn(listener, None, "partner", handler).unwrap();
        Partner { server, wallet, ca: None }
    }
}

fn options(partner: &Partner, count: u64, seed: u64, shares: Shares) -> BurstOptions {
    let mut opts = BurstOptions::new(&partner.url(), count);
    opts.ca_file = partner.ca.clone();
    opts.seed = seed;
    opts.shares = shares;
    opts
}

fn run(opts: &BurstOptions) -> (BurstReport, String) {
    let mut out = Vec::new();
    let report = burst::run(opts, &mut out).expect("no usage error");
    (report, String::from_utf8(out).unwrap())
}

/// The wallet matches what the report says was delivered, and lost events never arrived.
fn check_wallet(report: &BurstReport, wallet: &Wallet) {
    let lost: BTreeSet<u64> = report.lost_indexes.iter().copied().collect();
    let mut bodies: HashMap<u64, &Vec<u8>> = HashMap::new();
    let mut times: HashMap<u64, usize> = HashMap::new();
    for (index, body, _) in &wallet.received {
        assert!(!lost.contains(index), "lost index {index} was delivered");
        let first = bodies.entry(*index).or_insert(body);
        assert_eq!(*first, body, "a repeat of {index} is not byte-identical");
        *times.entry(*index).or_insert(0) += 1;
    }
    assert_eq!(times.len() as u64, report.delivered);
    assert_eq!(times.len() as u64 + report.lost, report.sent);
    assert_eq!(wallet.received.len() as u64, report.deliveries);
    let repeated: BTreeSet<u64> = times.iter().filter(|(_, n)| **n > 1).map(|(i, _)| *i).collect();
    assert_eq!(repeated, report.repeated_indexes.iter().copied().collect());
    assert_eq!(wallet.money, report.delivered_money_total);
    assert_eq!(wallet.payouts.iter().copied().collect::<Vec<_>>(), report.delivered_payout_transaction_ids);
    assert_eq!(wallet.refunds.iter().copied().collect::<Vec<_>>(), report.delivered_refund_transaction_ids);
    assert_eq!(report.delivered_payouts + report.delivered_refunds, report.delivered);
}

#[test]
fn same_seed_same_run_and_lost_events_never_arrive() {
    let shares = Shares { lose: 0.05, repeat: 0.05, reorder: 0.1 };
    let (a, b) =
        (partner(true, OnRepeat::StoredReply, Duration::ZERO), partner(true, OnRepeat::StoredReply, Duration::ZERO));
    let (mut report_a, out_a) = run(&options(&a, 300, 42, shares));
    let (report_b, out_b) = run(&options(&b, 300, 42, shares));
    assert!(report_a.ok, "{out_a}");
    assert_eq!(out_a, out_b, "same seed, same output");
    report_a.url = report_b.url.clone();
    assert_eq!(report_a, report_b);
    assert_eq!(report_a.to_json(), report_b.to_json());

    let r = &report_b;
    assert_eq!((r.sent, r.lost, r.repeated), (300, 15, 14));
    assert_eq!(r.lost_indexes.len(), 15);
    assert!(r.reordered > 0 && r.deliveries > r.delivered);
    assert!(r.delivered_payouts > 50 && r.delivered_refunds > 50, "mixed kinds: {r:?}");
    assert!(r.sent_money_total > r.delivered_money_total);
    assert_eq!(r.failures, []);
    let (wa, wb) = (a.wallet.lock().unwrap(), b.wallet.lock().unwrap());
    check_wallet(r, &wb);
    let bodies = |w: &Wallet| w.received.iter().map(|(_, b, _)| b.clone()).collect::<Vec<_>>();
    assert_eq!(bodies(&wa), bodies(&wb), "same bodies in the same order");
    // Arrival order is the schedule: not sorted, every index once before its repeats.
    let arrivals: Vec<u64> = wb.received.iter().map(|(i, _, _)| *i).collect();
    assert!(arrivals.windows(2).any(|w| w[0] > w[1]));
    let first_lines: Vec<&str> = out_b.lines().take(2).collect();
    assert!(first_lines[0].starts_with(&format!("index={} event=", arrivals[0])), "{first_lines:?}");
    assert!(first_lines[0].contains(" delivery=1 http=200 body={\""), "{first_lines:?}");
    assert!(first_lines[0].ends_with(" verdict=ok"));
    let summary: Vec<&str> = out_b.lines().filter(|l| l.starts_with("summary ")).collect();
    assert_eq!(summary.len(), 7);
    assert!(summary[0].starts_with("summary seed=42 kind=mixed indexes=1..300 sent=300 delivered=285 "));
    let lost_line = format!(
        "summary lost=15 lost_indexes={}",
        r.lost_indexes.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
    );
    assert_eq!(summary[1], lost_line);
    assert!(summary[6].ends_with("repeat_mismatches=0 result=ok"), "{}", summary[6]);

    // Another seed: other losses.
    let c = partner(false, OnRepeat::StoredReply, Duration::ZERO);
    let (report_c, _) = run(&options(&c, 300, 43, shares));
    assert_ne!(report_c.lost_indexes, r.lost_indexes);
    check_wallet(&report_c, &c.wallet.lock().unwrap());
}

#[test]
fn a_repeat_answered_differently_is_a_failure() {
    let p = partner(false, OnRepeat::Refuse, Duration::ZERO);
    let mut opts = options(&p, 100, 7, Shares { lose: 0.0, repeat: 0.1, reorder: 0.0 });
    opts.mix = EventMix::Payout;
    opts.quiet = true;
    let (report, out) = run(&opts);
    assert!(!report.ok);
    let repeats = report.deliveries - report.delivered;
    assert!(repeats >= 10);
    assert_eq!(report.repeat_mismatches, repeats);
    assert_eq!((report.verdict_failures, report.request_failures), (0, 0));
    assert!(report.failures.iter().all(|f| f.check == "repeatMismatch" && f.delivery > 1));
    let failed: Vec<&str> = out.lines().filter(|l| !l.starts_with("summary ")).collect();
    assert_eq!(failed.len() as u64, repeats, "quiet prints only the failed deliveries");
    assert!(
        failed[0].contains(r#"body={"payout":{"success":false,"errorMessage":"duplicate transactionId"}} verdict=UNEXPECTED: reply differs from the first reply to this event (delivery=1 http=200 body={"payout":{"success":true,"errorMessage":""}})"#),
        "{}",
        failed[0]
    );
    assert!(out.ends_with("result=FAILED\n"));
    // The money was still credited once per event.
    assert_eq!(p.wallet.lock().unwrap().money, report.delivered_money_total);
}

#[test]
fn several_connections_at_once() {
    let p = partner(true, OnRepeat::StoredReply, Duration::from_millis(2));
    let mut opts = options(&p, 400, 9, Shares { lose: 0.02, repeat: 0.02, reorder: 0.05 });
    opts.concurrency = 4;
    opts.first_index = 1001;
    let (report, out) = run(&opts);
    assert!(report.ok, "{out}");
    assert_eq!((report.first_index, report.last_index), (1001, 1400));
    let wallet = p.wallet.lock().unwrap();
    check_wallet(&report, &wallet);
    let connections: std::collections::HashSet<ThreadId> = wallet.received.iter().map(|(_, _, t)| *t).collect();
    assert!(connections.len() >= 2, "{} connection(s)", connections.len());
    // Failed requests are failures too.
    drop(wallet);
    let mut opts = BurstOptions::new("http://127.0.0.1:9/unreachable", 3);
    opts.concurrency = 2;
    let (report, out) = run(&opts);
    assert!(!report.ok);
    assert_eq!(report.request_failures, 3);
    assert!(out.contains("http=- body=- verdict=UNEXPECTED: request failed"), "{out}");
}

fn agent(server: &ServerHandle) -> ureq::Agent {
    let ca = ureq::tls::Certificate::from_der(server.ca_der().as_ref()).to_owned();
    ureq::Agent::config_builder()
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::new_with_certs(&[ca])).build())
        .http_status_as_error(false)
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .new_agent()
}

fn fetch(agent: &ureq::Agent, base: &str, path: &str, body: &str) -> (u16, String) {
    let mut resp = agent
        .post(format!("{base}{path}/rest/action"))
        .header("X-Service-Token", DEFAULT_TOKEN)
        .header("Content-Type", "application/json; charset=utf-8")
        .send(body)
        .unwrap();
    (resp.status().as_u16(), resp.body_mut().read_to_string().unwrap())
}

#[test]
fn get_event_returns_exactly_the_event_send_built() {
    let events = EventSet { seed: 42, mix: EventMix::Mixed, first_index: 1, count: 120 };
    let server = run_server(ServerConfig { events: Some(events), ..ServerConfig::default() }).unwrap();
    let agent = agent(&server);
    let base = server.base_url();

    let p = partner(false, OnRepeat::StoredReply, Duration::ZERO);
    let (report, out) = run(&options(&p, 120, 42, Shares { lose: 0.05, repeat: 0.0, reorder: 0.0 }));
    assert!(report.ok, "{out}");
    assert_eq!(report.lost, 6);
    let wallet = p.wallet.lock().unwrap();
    // A delivered event: the fetched object is the delivered body, byte for byte.
    let (index, sent, _) = &wallet.received[0];
    let (status, text) = fetch(&agent, &base, "", &format!(r#"{{"action":"getEvent","index":{index}}}"#));
    assert_eq!(status, 200);
    assert_eq!(text.as_bytes(), [br#"{"event":"#.as_slice(), sent, b"}"].concat());
    // Every lost one: the event the burst would have sent.
    for &index in &report.lost_indexes {
        let (status, text) = fetch(&agent, &base, "", &format!(r#"{{"action":"getEvent","index":{index}}}"#));
        assert_eq!(status, 200);
        assert_eq!(text, format!(r#"{{"event":{}}}"#, burst::burst_event(42, EventMix::Mixed, index).body));
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["event"]["index"], index);
        assert_eq!(v["event"]["transactionId"], burst::TRANSACTION_BASE + index);
    }
    // Unknown indexes and bad parameters.
    for index in [0, 121, 99_999_999] {
        let (status, text) = fetch(&agent, &base, "", &format!(r#"{{"action":"getEvent","index":{index}}}"#));
        assert_eq!(status, 404, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["code"], "notFound");
        assert_eq!(v["error"]["message"], format!("no event with index {index}"));
    }
    for body in
        [r#"{"action":"getEvent"}"#, r#"{"action":"getEvent","index":"5"}"#, r#"{"action":"getEvent","index":-1}"#]
    {
        let (status, text) = fetch(&agent, &base, "", body);
        assert_eq!(status, 400, "{body}: {text}");
        assert!(text.contains(r#""code":"badRequest""#) && text.contains("'index'"), "{text}");
    }
    // Faults apply: a malformed event, an injected status.
    let (status, text) = fetch(&agent, &base, "/fault/malformed", r#"{"action":"getEvent","index":3}"#);
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((v["event"]["index"].clone(), v["event"]["transactionId"].clone()), (json!(3), json!("not-a-number")));
    let (status, _) = fetch(&agent, &base, "/fault/status/503", r#"{"action":"getEvent","index":3}"#);
    assert_eq!(status, 503);

    // A sandbox without events knows no index.
    let bare = run_server(ServerConfig::default()).unwrap();
    let (status, text) = fetch(&self::agent(&bare), &bare.base_url(), "", r#"{"action":"getEvent","index":1}"#);
    assert_eq!(status, 404, "{text}");
}

fn wait_ready(child: &mut std::process::Child) -> String {
    use std::io::{BufRead, BufReader};
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    line.trim_end().strip_prefix("listening ").unwrap_or_else(|| panic!("ready line: {line:?}")).to_string()
}

#[test]
fn the_binaries_burst_and_serve_lost_events() {
    let tag = format!("{}-{:?}", std::process::id(), thread::current().id());
    let temp = |name: &str| std::env::temp_dir().join(format!("slotpartner-sandbox-burst-{tag}-{name}"));
    let (report_file, ca) = (temp("report.json"), temp("ca.pem"));
    let p = partner(false, OnRepeat::StoredReply, Duration::ZERO);
    let args = ["--burst", "40", "--index", "11", "--seed", "5", "--lose", "0.1", "--repeat", "0.1"];
    let out = Command::new(BIN)
        .args(["send", "--url", &p.url()])
        .args(args)
        .args(["--reorder=0.1", "--concurrency", "2", "--quiet", "--report-json"])
        .arg(&report_file)
        .arg("payout")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.lines().all(|l| l.starts_with("summary ")), "{text}");
    let report: Value = serde_json::from_slice(&std::fs::read(&report_file).unwrap()).unwrap();
    assert_eq!(
        (report["sent"].as_u64(), report["lost"].as_u64(), report["ok"].as_bool()),
        (Some(40), Some(4), Some(true))
    );
    assert_eq!(report["kind"], "payout");
    assert_eq!(report["delivered_money_total"].as_u64(), Some(p.wallet.lock().unwrap().money));
    assert_eq!(report["delivered_refunds"], 0);
    let lost: Vec<u64> = report["lost_indexes"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();

    // serve with the same seed, kind and range answers the lost ones.
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--events-seed",
            "5",
            "--events-kind",
            "payout",
            "--events-index",
            "11",
            "--events-count",
            "40",
        ])
        .arg("--ca-out")
        .arg(&ca)
        .arg("--exit-on-stdin-eof")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = wait_ready(&mut child);
    let cert = ureq::tls::Certificate::from_pem(&std::fs::read(&ca).unwrap()).unwrap().to_owned();
    let agent = ureq::Agent::config_builder()
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::new_with_certs(&[cert])).build())
        .http_status_as_error(false)
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .new_agent();
    for index in lost.iter().copied().chain([10, 51]) {
        let (status, text) = fetch(&agent, &base, "", &format!(r#"{{"action":"getEvent","index":{index}}}"#));
        if (11..=50).contains(&index) {
            assert_eq!(status, 200);
            assert_eq!(text, format!(r#"{{"event":{}}}"#, burst::burst_event(5, EventMix::Payout, index).body));
        } else {
            assert_eq!(status, 404, "{index}: {text}");
        }
    }
    // Replies that are not refund/payout replies (here the sandbox's injected 500): exit status 1.
    let failed = Command::new(BIN)
        .args(["send", "--url", &format!("{base}/fault/status/500/rest/action"), "--ca-file"])
        .arg(&ca)
        .args(["--burst", "2", "mixed"])
        .output()
        .unwrap();
    assert_eq!(failed.status.code(), Some(1));
    assert!(String::from_utf8(failed.stdout).unwrap().contains("verdict=UNEXPECTED: HTTP 500, expected 200"));
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());

    for args in [
        vec!["send", "--url", "http://127.0.0.1:9/", "--burst", "10", "balance"],
        vec!["send", "--url", "http://127.0.0.1:9/", "--burst", "10", "--count", "3", "mixed"],
        vec!["send", "--url", "http://127.0.0.1:9/", "--burst", "10", "--set", "a=1", "mixed"],
        vec!["send", "--url", "http://127.0.0.1:9/", "--burst", "10", "--lose", "1.5", "mixed"],
        vec!["send", "--url", "http://127.0.0.1:9/", "--burst", "10", "--concurrency", "0", "mixed"],
        vec!["send", "--url", "http://127.0.0.1:9/", "--burst", "0", "mixed"],
        vec!["send", "--url", "http://127.0.0.1:9/", "--burst", "10"],
        vec!["send", "--url", "http://127.0.0.1:9/", "--seed", "3", "refund"],
        vec!["send", "--url", "http://127.0.0.1:9/", "--quiet", "refund"],
        vec!["send", "--url", "http://127.0.0.1:9/", "mixed"],
        vec!["serve", "--events-seed", "3"],
        vec!["serve", "--events-count", "0"],
        vec!["serve", "--events-count", "10", "--events-kind", "balance"],
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
    std::fs::remove_file(report_file).ok();
    std::fs::remove_file(ca).ok();
}
