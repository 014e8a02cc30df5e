//! `send` against fake partner callback servers on loopback.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use slotpartner_sandbox::http::{self, Request, Response};
use slotpartner_sandbox::send::{self, Edit, EventKind, SendOptions};
use slotpartner_sandbox::{DEFAULT_TOKEN, tls};

type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>, Value)>>>;

/// A partner that records what it gets and answers with `reply(body)`.
fn partner(use_tls: bool, reply: fn(&Value) -> Response) -> (http::ListenerHandle, Seen, Option<PathBuf>) {
    let seen: Seen = Arc::default();
    let record = Arc::clone(&seen);
    let handler: http::Handler = Arc::new(move |req: &Request| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        record.lock().unwrap().push((
            req.header("x-service-token").map(str::to_string),
            req.header("content-type").map(str::to_string),
            body.clone(),
        ));
        reply(&body)
    });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    if use_tls {
        let certs = tls::generate().unwrap();
        let path = std::env::temp_dir().join(format!(
            "slotpartner-sandbox-send-ca-{}-{}.pem",
            std::process::id(),
            listener.local_addr().unwrap().port()
        ));
        std::fs::write(&path, &certs.ca_pem).unwrap();
        let handle = http::spawn(listener, Some(certs.server_config), "partner", handler).unwrap();
        (handle, seen, Some(path))
    } else {
        let handle = http::spawn(listener, None, "partner", handler).unwrap();
        (handle, seen, None)
    }
}

fn run(opts: &SendOptions) -> (bool, Vec<String>) {
    let mut out = Vec::new();
    let ok = send::run(opts, &mut out).expect("no usage error");
    let text = String::from_utf8(out).unwrap();
    (ok, text.lines().map(str::to_string).collect())
}

fn good_partner(body: &Value) -> Response {
    if body["event"] == "gameSessionBuyRefund" {
        // Literal text: the result line keeps key order and drops whitespace.
        let mut resp = Response::json(200, &Value::Null);
        resp.body = http::Body::Bytes(b"{ \"refund\": {\"success\": true,\n \"errorMessage\": \"\"} }".to_vec());
        resp
    } else if body["event"] == "jackpotPayout" {
        Response::json(200, &json!({"payout": {"success": false, "errorMessage": "unknown jackpot"}}))
    } else {
        Response::json(
            200,
            &json!({"playerBalance": {"money": 12050, "currencyISO4217": "EUR", "coins": 3, "errorMessage": ""}}),
        )
    }
}

#[test]
fn refund_burst_over_https() {
    let (server, seen, ca) = partner(true, good_partner);
    let url = format!("https://localhost:{}/callback", server.addr().port());
    let mut opts = SendOptions::new(&url, EventKind::Refund);
    opts.ca_file = ca.clone();
    opts.index = 41;
    opts.count = 3;
    opts.expect_success = Some(true);
    opts.edits = vec![send::parse_set("bonusCode=SPRING24").unwrap()];
    let (ok, lines) = run(&opts);
    assert!(ok, "{lines:?}");
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[0],
        r#"index=41 event=gameSessionBuyRefund http=200 body={"refund":{"success":true,"errorMessage":""}} verdict=ok"#
    );
    assert!(lines[2].starts_with("index=43 "));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    let indexes: Vec<&Value> = seen.iter().map(|(_, _, b)| &b["index"]).collect();
    assert_eq!(indexes, [&json!(41), &json!(42), &json!(43)]);
    assert_ne!(seen[0].2["transactionId"], seen[1].2["transactionId"]);
    assert_eq!(seen[0].0.as_deref(), Some(DEFAULT_TOKEN));
    assert_eq!(seen[0].1.as_deref(), Some("application/json; charset=utf-8"));
    assert_eq!(seen[0].2["bonusCode"], "SPRING24");
    std::fs::remove_file(ca.unwrap()).ok();
}

#[test]
fn expectations_and_bad_replies() {
    let (server, _, ca) = partner(true, good_partner);
    let url = format!("https://127.0.0.1:{}/", server.addr().port());

    // The partner reports payout failure: ok unless success was expected.
    let mut opts = SendOptions::new(&url, EventKind::Payout);
    opts.ca_file = ca.clone();
    let (ok, lines) = run(&opts);
    assert!(ok, "{lines:?}");
    opts.expect_success = Some(true);
    let (ok, lines) = run(&opts);
    assert!(!ok);
    assert!(lines[0].contains("verdict=UNEXPECTED: expected success=true"), "{lines:?}");

    let mut opts = SendOptions::new(&url, EventKind::Balance);
    opts.ca_file = ca.clone();
    opts.expect_success = Some(true);
    let (ok, lines) = run(&opts);
    assert!(ok, "{lines:?}");
    assert!(lines[0].starts_with("index=1 event=getPlayerBalance http=200 "));

    // Without the CA the certificate is not trusted: a transport failure.
    let opts = SendOptions::new(&url, EventKind::Refund);
    let (ok, lines) = run(&opts);
    assert!(!ok);
    assert!(lines[0].contains("http=- body=- verdict=UNEXPECTED: request failed"), "{lines:?}");
    std::fs::remove_file(ca.unwrap()).ok();
}

#[test]
fn raw_and_plain_http_to_loopback() {
    let (server, seen, _) = partner(false, |_| Response::error(401, "unauthorized", "missing token"));
    let url = format!("http://127.0.0.1:{}/cb", server.addr().port());
    let body_file = std::env::temp_dir().join(format!("slotpartner-sandbox-raw-{}.json", std::process::id()));
    std::fs::write(&body_file, br#"{"event":"jackpotPayout","index":9}"#).unwrap();
    let mut opts = SendOptions::new(&url, EventKind::Raw);
    opts.body_file = Some(body_file.clone());
    opts.token = String::new();
    opts.expect_http = Some(401);
    let (ok, lines) = run(&opts);
    assert!(ok, "{lines:?}");
    assert!(lines[0].starts_with("index=9 event=jackpotPayout http=401 body={\"error\":"));
    assert_eq!(seen.lock().unwrap()[0].0, None, "empty token omits the header");

    opts.expect_http = Some(200);
    let (ok, _) = run(&opts);
    assert!(!ok);

    // A refund answered with a 401 is unexpected.
    let opts = SendOptions::new(&url, EventKind::Refund);
    let (ok, lines) = run(&opts);
    assert!(!ok);
    assert!(lines[0].contains("verdict=UNEXPECTED: HTTP 401, expected 200"));
    std::fs::remove_file(body_file).ok();
}

#[test]
fn usage_errors_send_nothing() {
    let mut out = Vec::new();
    let opts = SendOptions::new("http://192.0.2.1/cb", EventKind::Refund);
    assert!(send::run(&opts, &mut out).is_err());
    let mut opts = SendOptions::new("http://127.0.0.1:9/cb", EventKind::Raw);
    assert!(send::run(&opts, &mut out).is_err(), "raw without --body-file");
    opts.kind = EventKind::Refund;
    opts.expect_http = Some(200);
    assert!(opts.validate().is_err());
    opts.expect_http = None;
    opts.count = 0;
    assert!(opts.validate().is_err());
    opts.count = 1;
    opts.edits.push(Edit::Unset("event".into()));
    assert!(opts.validate().is_ok());
    assert!(out.is_empty());
}
