//! The `slotpartner-sandbox` binary: ready line, files, exit codes.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_slotpartner-sandbox");

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("slotpartner-sandbox-cli-{}-{name}", std::process::id()))
}

#[test]
fn serve_then_send_through_the_binaries() {
    let (ca, ready) = (temp("ca.pem"), temp("ready"));
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"])
        .arg("--ca-out")
        .arg(&ca)
        .arg("--ready-file")
        .arg(&ready)
        .arg("--exit-on-stdin-eof")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let base = line.trim_end().strip_prefix("listening ").unwrap_or_else(|| panic!("ready line: {line:?}")).to_string();
    assert!(base.starts_with("https://127.0.0.1:"), "{base}");
    assert_ne!(base, "https://127.0.0.1:0");
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(line.starts_with("listening-http http://127.0.0.1:"), "{line:?}");
    assert_eq!(std::fs::read_to_string(&ready).unwrap(), base);
    let pem = std::fs::read_to_string(&ca).unwrap();
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));

    // A client trusting the written CA file reaches the action address.
    let cert = ureq::tls::Certificate::from_pem(pem.as_bytes()).unwrap();
    let agent = ureq::Agent::config_builder()
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::new_with_certs(&[cert])).build())
        .proxy(None)
        .build()
        .new_agent();
    let mut resp = agent
        .post(format!("{base}/rest/action"))
        .header("X-Service-Token", slotpartner_sandbox::DEFAULT_TOKEN)
        .send(r#"{"action":"getGames","localeISO639_ISO3166":"de-DE","gameId":1001}"#)
        .unwrap();
    let v: Value = serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(v["games"][0]["gameId"], 1001);

    // `send` posting to the sandbox itself: the action address answers 400,
    // which is not a refund reply, so the verdict is UNEXPECTED (exit 1).
    let out = Command::new(BIN)
        .args(["send", "--url", &format!("{base}/rest/action"), "--ca-file"])
        .arg(&ca)
        .arg("refund")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("index=1 event=gameSessionBuyRefund http=400 body="), "{text}");
    assert!(text.contains("verdict=UNEXPECTED: HTTP 400, expected 200"), "{text}");

    // Closing stdin ends the server.
    drop(child.stdin.take());
    let mut waited = Duration::ZERO;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(waited < Duration::from_secs(10), "serve did not exit on stdin EOF");
        std::thread::sleep(Duration::from_millis(50));
        waited += Duration::from_millis(50);
    };
    assert!(status.success());
    std::fs::remove_file(ca).ok();
    std::fs::remove_file(ready).ok();
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["serve", "--listen", "0.0.0.0:0"],
        vec!["serve", "--listen", "127.0.0.1:0", "--http-listen", "192.0.2.1:80"],
        vec!["serve", "--token", "not-a-uuid"],
        vec!["serve", "--bogus"],
        vec!["send", "refund"],
        vec!["send", "--url", "http://192.0.2.1/cb", "refund"],
        vec!["send", "--url", "https://127.0.0.1:9/", "refund", "--expect-success", "maybe"],
        vec!["send", "--url", "https://127.0.0.1:9/", "spin"],
        vec!["send", "--url", "https://127.0.0.1:9/", "raw"],
        vec!["frobnicate"],
        vec![],
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn help_documents_the_default_token() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(slotpartner_sandbox::DEFAULT_TOKEN));
    assert!(text.contains("serve") && text.contains("send"));
}
