//! The operator's commands never create or migrate a journal (only the endpoint's own open does):
//! pointed at a PostgreSQL database without one (a typo), `journal status`, its `--prometheus`
//! form, `metrics` and `recover` each report that no journal is there, naming the database, and
//! leave it without a table; pointed at a journal of an older schema version, they leave it at
//! that version. On a throw-away cluster (skipped, saying so, where PostgreSQL is not installed).

mod support;

use support::*;

#[path = "../../tests/e2e/cluster.rs"]
mod cluster;
use cluster::Cluster;

/// The journal's tables in the database of `client`.
fn journal_tables(client: &mut postgres::Client) -> i64 {
    client.query_one("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'sp\\_journal\\_%'", &[]).unwrap().get(0)
}

#[test]
fn read_only_commands_create_and_migrate_nothing_on_postgres() {
    let Some(cluster) = Cluster::start("read-only commands on PostgreSQL") else { return };
    cluster.client().batch_execute("CREATE DATABASE typo").unwrap();
    let base = format!("{}/typo", cluster.url().strip_suffix("/postgres").unwrap());
    let url = format!("{base}?sslmode=disable");
    let mut typo = postgres::Client::connect(&base, postgres::NoTls).unwrap();

    let line = run(&["journal", "status", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.contains("no journal there") && line.contains("/typo"), "{line}");
    let line = run(&["journal", "gaps", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.contains("no journal there"), "{line}");
    let scraped = scrape_once(&url);
    assert!(scraped.lines().any(|l| l.starts_with("slotpartner_journal_up{") && l.ends_with(" 0")), "{scraped}");
    assert!(scraped.contains("no journal there"), "{scraped}");
    // The textfile route still gets a reading whose alert fires: up 0, the reason beside it.
    let printed = run(&["journal", "status", "--prometheus", "--journal", &url]).expect(0).stdout;
    assert!(printed.lines().any(|l| l.starts_with("slotpartner_journal_up{") && l.ends_with(" 0")), "{printed}");
    assert!(
        printed.lines().any(|l| l.starts_with("# journal unreadable:") && l.contains("no journal there")),
        "{printed}"
    );
    let recover = run(&[
        "recover",
        "--journal",
        &url,
        "--callback-url",
        "https://127.0.0.1:1/callback",
        "--base-url",
        "https://127.0.0.1:1",
        "--token",
        "00000000-0000-0000-0000-000000000001",
    ]);
    let line = recover.expect(2).one_error_line().to_owned();
    assert!(line.contains("no journal there"), "{line}");
    assert_eq!(journal_tables(&mut typo), 0, "a read created the journal's tables");

    // A journal of an older schema version stays at it.
    let journal = format!("{}?sslmode=disable", cluster.url());
    open_journal(&journal);
    let mut client = cluster.client();
    client.batch_execute("UPDATE sp_journal_meta SET value = 2 WHERE key = 'schema_version'").unwrap();
    let line = run(&["journal", "status", "--journal", &journal]).expect(2).one_error_line().to_owned();
    assert!(line.contains("schema version 2") && line.contains("endpoints migrate it"), "{line}");
    assert!(scrape_once(&journal).contains("schema version 2"));
    let version: i64 =
        client.query_one("SELECT value FROM sp_journal_meta WHERE key = 'schema_version'", &[]).unwrap().get(0);
    assert_eq!(version, 2, "a read migrated the journal");
}

/// One scrape of `slotpartner metrics --listen 127.0.0.1:0 --journal URL`, stopped after it.
fn scrape_once(url: &str) -> String {
    use std::io::{BufRead, Read, Write};
    let mut child = std::process::Command::new(BIN)
        .args(["metrics", "--listen", "127.0.0.1:0", "--journal", url])
        .env_remove("SLOTPARTNER_JOURNAL")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let answer = line.trim_end().strip_prefix("listening on ").map(|addr| {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        stream
            .write_all(format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).map(|_| answer)
    });
    let _ = child.kill();
    let _ = child.wait();
    answer.unwrap_or_else(|| panic!("{line:?}")).expect("a scrape's answer")
}

/// Against a PostgreSQL address that accepts and never answers (the kernel completes the TCP
/// handshake for the listener's backlog), the operator's commands give up within the connect's
/// deadline (the URL's connect_timeout, else the lock time-out, 5 s) instead of waiting for ever.
#[test]
fn a_silent_server_is_given_up_within_the_connect_deadline() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    for (query, bound) in [("?connect_timeout=1", 1), ("", 5)] {
        let url = format!("postgres://me@127.0.0.1:{port}/x{query}");
        let started = std::time::Instant::now();
        let line = run(&["journal", "status", "--journal", &url]).expect(2).one_error_line().to_owned();
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(bound + 6), "{url}: {took:?}");
        assert!(line.contains("not connected within connect_timeout"), "{line}");
    }
    drop(silent);
}
