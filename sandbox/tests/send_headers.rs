//! `send --header NAME:VALUE` and `send --print-body`, in-process and through the binary, against
//! a fake partner on loopback that records every request's headers and body.

use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use slotpartner_sandbox::DEFAULT_TOKEN;
use slotpartner_sandbox::http::{self, Request, Response};
use slotpartner_sandbox::send::{self, EventKind, SendOptions};

const BIN: &str = env!("CARGO_BIN_EXE_slotpartner-sandbox");

/// What the partner saw: each request's headers and body.
type Seen = Arc<Mutex<Vec<(Vec<(String, String)>, Vec<u8>)>>>;

/// A plain-HTTP partner on loopback answering every refund with success.
fn partner() -> (http::ListenerHandle, Seen, String) {
    let seen: Seen = Arc::default();
    let record = Arc::clone(&seen);
    let handler: http::Handler = Arc::new(move |req: &Request| {
        record.lock().unwrap().push((req.headers.clone(), req.body.clone()));
        Response::json(200, &json!({"refund": {"success": true, "errorMessage": ""}}))
    });
    let handle = http::spawn(TcpListener::bind("127.0.0.1:0").unwrap(), None, "partner", handler).unwrap();
    let url = format!("http://127.0.0.1:{}/callback", handle.addr().port());
    (handle, seen, url)
}

/// Every value of the header `name` in one request, in order.
fn values(headers: &[(String, String)], name: &str) -> Vec<String> {
    headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone()).collect()
}

fn run(opts: &SendOptions) -> (bool, Vec<String>) {
    let mut out = Vec::new();
    let ok = send::run(opts, &mut out).expect("no usage error");
    (ok, String::from_utf8(out).unwrap().lines().map(str::to_string).collect())
}

#[test]
fn parse_header_takes_name_colon_value_and_refuses_malformed_ones() {
    assert_eq!(
        send::parse_header("X-Forwarded-For:203.0.113.7").unwrap(),
        ("X-Forwarded-For".into(), "203.0.113.7".into())
    );
    // Spaces and tabs around the value go; a value may hold colons and be empty.
    assert_eq!(send::parse_header("X-Trace: \t a:b c \t").unwrap(), ("X-Trace".into(), "a:b c".into()));
    assert_eq!(send::parse_header("X-Empty:").unwrap(), ("X-Empty".into(), String::new()));
    for bad in [
        "no-colon",
        ":value",
        "Bad Name:value",
        "X-Bad\u{0}:value",
        "Bad(Name):v",
        "X-Inject:a\r\nX-Evil: b",
        "X-Inject:a\nb",
        "X-Nul:a\u{0}b",
        "X-Del:a\u{7f}",
    ] {
        let err = send::parse_header(bad).expect_err(bad);
        assert!(err.starts_with("--header expects NAME:VALUE"), "{bad:?}: {err}");
    }
    // A header set directly on the options is checked the same way before anything is sent.
    let mut opts = SendOptions::new("http://127.0.0.1:9/cb", EventKind::Refund);
    opts.headers = vec![("X-Ok".into(), "fine".into()), ("X-Bad".into(), "a\r\nb".into())];
    assert!(opts.validate().unwrap_err().contains("header 'X-Bad'"));
}

#[test]
fn headers_go_with_every_request_and_can_replace_the_defaults() {
    let (_server, seen, url) = partner();
    let mut opts = SendOptions::new(&url, EventKind::Refund);
    opts.count = 3;
    opts.headers = vec![
        ("X-Forwarded-For".into(), "203.0.113.7".into()),
        ("X-Trace".into(), "one".into()),
        ("X-Trace".into(), "two".into()),
    ];
    let (ok, lines) = run(&opts);
    assert!(ok, "{lines:?}");
    assert_eq!(lines.len(), 3, "no body lines without --print-body: {lines:?}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    for (headers, _) in seen.iter() {
        assert_eq!(values(headers, "x-forwarded-for"), ["203.0.113.7"]);
        assert_eq!(values(headers, "X-Trace"), ["one", "two"], "a repeated header is sent each time");
        assert_eq!(values(headers, "X-Service-Token"), [DEFAULT_TOKEN]);
        assert_eq!(values(headers, "Content-Type"), ["application/json; charset=utf-8"]);
    }
    drop(seen);

    // A header named like a default replaces it (any case), once, not twice.
    let (_server, seen, url) = partner();
    let mut opts = SendOptions::new(&url, EventKind::Refund);
    opts.headers = vec![("content-type".into(), "text/plain".into()), ("X-SERVICE-TOKEN".into(), "forged".into())];
    let (ok, lines) = run(&opts);
    assert!(ok, "{lines:?}");
    let seen = seen.lock().unwrap();
    assert_eq!(values(&seen[0].0, "Content-Type"), ["text/plain"]);
    assert_eq!(values(&seen[0].0, "X-Service-Token"), ["forged"]);
}

#[test]
fn print_body_prints_each_body_sent_before_its_reply_line() {
    let (_server, seen, url) = partner();
    let mut opts = SendOptions::new(&url, EventKind::Refund);
    opts.index = 41;
    opts.count = 2;
    opts.print_body = true;
    opts.edits = vec![send::parse_set("bonusCode=SPRING24").unwrap()];
    let (ok, lines) = run(&opts);
    assert!(ok, "{lines:?}");
    assert_eq!(lines.len(), 4, "{lines:?}");
    let seen = seen.lock().unwrap();
    for (n, (_, body)) in seen.iter().enumerate() {
        let text = String::from_utf8(body.clone()).unwrap();
        let index = 41 + n;
        assert_eq!(
            lines[2 * n],
            format!("sent index={index} event=gameSessionBuyRefund bytes={} body={text}", body.len())
        );
        assert!(lines[2 * n + 1].starts_with(&format!("index={index} event=gameSessionBuyRefund http=200 ")));
        let sent: Value = serde_json::from_str(&text).unwrap();
        assert_eq!((sent["index"].as_u64(), sent["bonusCode"].as_str()), (Some(index as u64), Some("SPRING24")));
    }
}

#[test]
fn print_body_quotes_a_raw_body_that_is_not_one_line_of_text() {
    let (_server, seen, url) = partner();
    let file = std::env::temp_dir().join(format!("slotpartner-sandbox-print-body-{}.json", std::process::id()));
    let raw = b"{\"event\":\"gameSessionBuyRefund\",\n \"note\":\"\xff\"}";
    std::fs::write(&file, raw).unwrap();
    let mut opts = SendOptions::new(&url, EventKind::Raw);
    opts.body_file = Some(file.clone());
    opts.print_body = true;
    let (_, lines) = run(&opts);
    assert_eq!(
        lines[0],
        format!(
            "sent index=- event=raw bytes={} body=\"{{\\\"event\\\":\\\"gameSessionBuyRefund\\\",\\n \\\"note\\\":\\\"\u{fffd}\\\"}}\"",
            raw.len()
        )
    );
    assert_eq!(seen.lock().unwrap()[0].1, raw, "the bytes themselves are sent unchanged");
    std::fs::remove_file(file).ok();
}

#[test]
fn the_binary_sends_headers_prints_bodies_and_refuses_malformed_headers_with_exit_2() {
    let (_server, seen, url) = partner();
    let out = Command::new(BIN)
        .args(["send", "--url", &url, "--header", "X-Forwarded-For: 203.0.113.7", "--header=X-Trace:t1"])
        .args(["--print-body", "--index", "5", "refund"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    let recorded = seen.lock().unwrap();
    let (headers, body) = &recorded[0];
    assert_eq!(
        lines[0],
        format!("sent index=5 event=gameSessionBuyRefund bytes={} body={}", body.len(), String::from_utf8_lossy(body))
    );
    assert!(lines[1].starts_with("index=5 event=gameSessionBuyRefund http=200 ") && lines[1].ends_with("verdict=ok"));
    assert_eq!(values(headers, "X-Forwarded-For"), ["203.0.113.7"]);
    assert_eq!(values(headers, "X-Trace"), ["t1"]);
    let requests = recorded.len();
    drop(recorded);

    for args in [
        vec!["--header", "no-colon"],
        vec!["--header", "Bad Name:v"],
        vec!["--header", "X-Inject:a\r\nX-Evil:b"],
        vec!["--header"],
        vec!["--burst", "3", "--header", "X-Trace:t", "mixed"],
        vec!["--burst", "3", "--print-body", "mixed"],
    ] {
        let mut all = vec!["send", "--url", url.as_str()];
        all.extend(&args);
        if !args.contains(&"mixed") {
            all.push("refund");
        }
        let out = Command::new(BIN).args(&all).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--header") || stderr.contains("--print-body"), "{args:?}: {stderr}");
    }
    assert_eq!(seen.lock().unwrap().len(), requests, "a usage error sends nothing");
}
