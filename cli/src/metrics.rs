//! The journal's state for Prometheus: the text exposition format 0.0.4, printed by `journal
//! status --prometheus` (for node_exporter's textfile collector) and served by `metrics --listen
//! ADDR` (a scrape of `GET /metrics`).
//!
//! Counters (`_total`) only ever grow: deliveries handled, replayed, in conflict, refused, pruned
//! and forgotten. Everything that can go down is a gauge: missing, unrecoverable and resolved
//! indexes (resolved ones start again at 0 with a new numbering), unfinished and in-progress
//! deliveries, open conflicts and index jumps, the highest index, the size. Times are gauges in
//! Unix seconds, 0 when there is none (no gap, no new index seen yet, no stored reply), so that
//! each series stays present; the alert rules compare them only when above 0. The highest index
//! and the size are left out when unknown. When the journal cannot be read, `slotpartner_journal_up
//! 0` is the only sample, with the error in a comment line: the scrape still answers, and the
//! alert on `up == 0` fires.
//!
//! Every sample carries the label `journal`: the journal URL without its password.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use slotpartner::journal::Status;

use crate::args::{JournalOpt, MetricsArgs};
use crate::config::open_journal;
use crate::{Fail, Outcome, Verdict};

/// The exposition's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Connections served at once; more are closed at once (a scrape is rare: one every 15 s or so).
const MAX_CONNECTIONS: usize = 8;
/// How long a client has to send its request head.
const REQUEST_TIME: Duration = Duration::from_secs(5);
/// How long writing the answer may take.
const WRITE_TIME: Duration = Duration::from_secs(10);
/// The longest request line taken (longer ones are answered 414).
const MAX_REQUEST_LINE: usize = 8 * 1024;
/// The longest request head taken (longer ones are answered 431).
const MAX_HEAD: usize = 32 * 1024;

/// `journal status --prometheus`: the exposition on stdout; exit 0 whenever it was printed (an
/// unreadable journal is `slotpartner_journal_up 0`, its error also on stderr).
pub fn print(opt: &JournalOpt) -> Outcome {
    let url = journal_url(opt)?;
    let (text, error) = render(opt, url);
    crate::out!("{text}");
    if let Some(error) = error {
        eprintln!("slotpartner: warning: journal unreadable: {error}");
    }
    Ok(Verdict::Good)
}

/// The exposition of the journal's state read now, and the (password-free) error when it could
/// not be read.
fn render(opt: &JournalOpt, url: &str) -> (String, Option<String>) {
    let label = redact_url(url);
    match open_journal(opt).and_then(|journal| journal.status().map_err(Fail::from)) {
        Ok(status) => (exposition(&label, Ok(&status)), None),
        Err(Fail(message)) => {
            let message = crate::one_line(&hide_secrets(url, &message));
            (exposition(&label, Err(&message)), Some(message))
        }
    }
}

/// The URL of `--journal` (or `SLOTPARTNER_JOURNAL`): without one there is nothing to label.
fn journal_url(opt: &JournalOpt) -> Result<&str, Fail> {
    opt.journal
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| Fail("no journal: give --journal URL or set SLOTPARTNER_JOURNAL".to_owned()))
}

/// One metric family: name, type, help, and its value (`None`: left out).
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    value: Option<String>,
}

/// The exposition (format 0.0.4) of `state` for the journal labelled `label`.
pub fn exposition(label: &str, state: Result<&Status, &str>) -> String {
    let label = escape_label(label);
    let up = Family {
        name: "slotpartner_journal_up",
        kind: "gauge",
        help: "Whether the journal could be read: 1, or 0 (then this is the only sample).",
        value: Some(if state.is_ok() { "1" } else { "0" }.to_owned()),
    };
    let mut out = String::new();
    let status = match state {
        Ok(status) => status,
        Err(message) => {
            let _ = writeln!(out, "# journal unreadable: {}", crate::one_line(message));
            write_family(&mut out, &label, &up);
            return out;
        }
    };
    let n = |v: u64| Some(v.to_string());
    let seconds = |ms: Option<i64>| Some(seconds_text(ms.unwrap_or(0)));
    let families = [
        up,
        Family {
            name: "slotpartner_journal_handled_total",
            kind: "counter",
            help: "Deliveries handled: finished with a stored reply.",
            value: n(status.handled),
        },
        Family {
            name: "slotpartner_journal_replayed_total",
            kind: "counter",
            help: "Deliveries answered from the journal with a stored reply (repeats).",
            value: n(status.replayed),
        },
        Family {
            name: "slotpartner_journal_conflicts_total",
            kind: "counter",
            help: "Deliveries whose key came before with other decisive content.",
            value: n(status.conflicts),
        },
        Family {
            name: "slotpartner_journal_refused_total",
            kind: "counter",
            help: "Deliveries refused by validation whose index could be read.",
            value: n(status.refused),
        },
        Family {
            name: "slotpartner_journal_pruned_total",
            kind: "counter",
            help: "Deliveries compacted by journal prune (reply and content removed, digest kept).",
            value: n(status.pruned),
        },
        Family {
            name: "slotpartner_journal_forgotten_total",
            kind: "counter",
            help: "Compact records removed by journal prune --forget-older-than.",
            value: n(status.forgotten),
        },
        Family {
            name: "slotpartner_journal_missing_indexes",
            kind: "gauge",
            help: "Indexes never seen between the first index and the highest (unrecoverable ones included).",
            value: n(status.missing),
        },
        Family {
            name: "slotpartner_journal_unrecoverable_indexes",
            kind: "gauge",
            help: "Missing indexes the service answered 404 for --not-found-limit recovery runs.",
            value: n(status.unrecoverable),
        },
        Family {
            name: "slotpartner_journal_resolved_indexes",
            kind: "gauge",
            help: "Indexes of the current numbering closed by hand (journal resolve).",
            value: n(status.resolved),
        },
        Family {
            name: "slotpartner_journal_unfinished_deliveries",
            kind: "gauge",
            help: "Deliveries claimed and never finished: abandoned, or their worker died.",
            value: n(status.unfinished),
        },
        Family {
            name: "slotpartner_journal_in_progress_deliveries",
            kind: "gauge",
            help: "Deliveries claimed and neither finished nor abandoned.",
            value: n(status.in_progress),
        },
        Family {
            name: "slotpartner_journal_open_conflicts",
            kind: "gauge",
            help: "Conflicts no operator resolved yet (journal conflicts).",
            value: n(status.open_conflicts),
        },
        Family {
            name: "slotpartner_journal_index_jumps_open",
            kind: "gauge",
            help: "Index jumps and reused indexes no operator decided yet (journal jumps).",
            value: n(status.index_jumps),
        },
        Family {
            name: "slotpartner_journal_highest_index",
            kind: "gauge",
            help: "The highest index seen (left out when none was).",
            value: status.highest_index.map(|v| v.to_string()),
        },
        Family {
            name: "slotpartner_journal_size_bytes",
            kind: "gauge",
            help: "The bytes the journal takes (left out when unknown).",
            value: status.size_bytes.map(|v| v.to_string()),
        },
        Family {
            name: "slotpartner_journal_last_delivery_timestamp_seconds",
            kind: "gauge",
            help: "When a new index was last seen, in Unix seconds (0: none yet).",
            value: seconds(status.last_delivery_ms),
        },
        Family {
            name: "slotpartner_journal_oldest_gap_timestamp_seconds",
            kind: "gauge",
            help: "When the oldest missing index was found missing, in Unix seconds (0: nothing is missing).",
            value: seconds(status.oldest_gap_ms),
        },
        Family {
            name: "slotpartner_journal_oldest_record_timestamp_seconds",
            kind: "gauge",
            help: "When the oldest delivery with its reply stored was finished, in Unix seconds (0: none).",
            value: seconds(status.oldest_record_ms),
        },
    ];
    for family in &families {
        write_family(&mut out, &label, family);
    }
    out
}

fn write_family(out: &mut String, label: &str, family: &Family) {
    let Some(value) = &family.value else { return };
    let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
    let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind);
    let _ = writeln!(out, "{}{{journal=\"{label}\"}} {value}", family.name);
}

/// Milliseconds since the Unix epoch as seconds: `1718064000`, `1718064000.123`.
fn seconds_text(ms: i64) -> String {
    let (whole, fraction) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    if fraction == 0 { whole.to_string() } else { format!("{whole}.{fraction:03}").trim_end_matches('0').to_owned() }
}

/// A label value as the text format escapes it: backslash, double quote and line feed.
fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The journal URL without a password: `postgres://partner:secret@db/partner?password=x&sslmode=require`
/// becomes `postgres://partner@db/partner?sslmode=require`; `sqlite:PATH` stays as it is.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let query_at = rest.find(['?', '#']).unwrap_or(rest.len());
    let (before_query, query) = rest.split_at(query_at);
    // The user information ends at the last `@` before the query (a password may hold `/`).
    let authority = match before_query.rfind('@') {
        Some(at) => {
            let user = before_query[..at].split(':').next().unwrap_or("");
            format!("{user}@{}", &before_query[at + 1..])
        }
        None => before_query.to_owned(),
    };
    let query = match query.strip_prefix('?') {
        Some(pairs) => {
            let (pairs, fragment) = match pairs.split_once('#') {
                Some((pairs, fragment)) => (pairs, format!("#{fragment}")),
                None => (pairs, String::new()),
            };
            let kept: Vec<&str> = pairs.split('&').filter(|pair| !is_password_pair(pair)).collect();
            if kept.iter().all(|pair| pair.is_empty()) { fragment } else { format!("?{}{fragment}", kept.join("&")) }
        }
        None => query.to_owned(),
    };
    format!("{scheme}://{authority}{query}")
}

fn is_password_pair(pair: &str) -> bool {
    let key = pair.split_once('=').map_or(pair, |(key, _)| key);
    key.eq_ignore_ascii_case("password") || key.eq_ignore_ascii_case("sslpassword")
}

/// `message` with every password the URL holds replaced by `***` (as written and decoded).
fn hide_secrets(url: &str, message: &str) -> String {
    let mut secrets = Vec::new();
    if let Some((_, rest)) = url.split_once("://") {
        let before_query = &rest[..rest.find(['?', '#']).unwrap_or(rest.len())];
        if let Some(at) = before_query.rfind('@') {
            if let Some((_, password)) = before_query[..at].split_once(':') {
                secrets.push(password.to_owned());
            }
        }
        if let Some((_, query)) = rest.split_once('?') {
            for pair in query.split(['&', '#']).filter(|pair| is_password_pair(pair)) {
                if let Some((_, value)) = pair.split_once('=') {
                    secrets.push(value.to_owned());
                }
            }
        }
    }
    let decoded: Vec<String> = secrets.iter().filter_map(|s| percent_decode(s)).collect();
    secrets.extend(decoded);
    secrets.retain(|s| !s.is_empty());
    // Longest first, so that a password holding another is hidden whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = message.to_owned();
    for secret in &secrets {
        out = out.replace(secret.as_str(), "***");
    }
    out
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

// ---------------------------------------------------------------------------------------------
// The server

/// `metrics --listen ADDR`: serves `GET /metrics` until stopped.
pub fn serve(args: &MetricsArgs) -> Outcome {
    let url = journal_url(&args.journal)?.to_owned();
    let addresses: Vec<_> = args
        .listen
        .to_socket_addrs()
        .map_err(|e| Fail(format!("listen: {:?} is not an address to listen on ({e})", args.listen)))?
        .collect();
    let listener = TcpListener::bind(&addresses[..])
        .map_err(|e| Fail(format!("listen: cannot listen on {}: {e}", args.listen)))?;
    let bound = listener.local_addr().map_err(|e| Fail(format!("listen: {e}")))?;
    eprintln!("listening on {bound}");
    let opt = Arc::new(JournalOpt {
        journal: Some(url),
        max_index_jump: args.journal.max_index_jump,
        not_found_limit: args.journal.not_found_limit,
    });
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(stream) => stream,
            Err(_) => {
                // Out of file descriptors or the like: do not spin.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            drop(stream);
            continue;
        }
        let (opt, done) = (Arc::clone(&opt), Arc::clone(&active));
        let spawned = std::thread::Builder::new().name("metrics".to_owned()).spawn(move || {
            answer(stream, &opt);
            done.fetch_sub(1, Ordering::SeqCst);
        });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::SeqCst);
        }
    }
    Ok(Verdict::Good)
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    /// `GET /metrics` (`head`: HEAD, no body).
    Metrics { head: bool },
    /// Another status, its reason and body.
    Other(u16, &'static str, &'static str),
}

/// Reads one request and answers it; the connection is closed after.
fn answer(mut stream: TcpStream, opt: &JournalOpt) {
    let asked = match read_head(&mut stream) {
        Some(asked) => asked,
        None => return,
    };
    let _ = stream.set_write_timeout(Some(WRITE_TIME));
    let response = match asked {
        Asked::Metrics { head } => {
            let url = opt.journal.as_deref().unwrap_or("");
            let (body, error) = render(opt, url);
            if let Some(error) = error {
                eprintln!("slotpartner: warning: journal unreadable: {error}");
            }
            response(200, "OK", CONTENT_TYPE, &body, head, "")
        }
        Asked::Other(status, reason, body) => {
            let allow = if status == 405 { "Allow: GET, HEAD\r\n" } else { "" };
            response(status, reason, "text/plain; charset=utf-8", body, false, allow)
        }
    };
    let _ = stream.write_all(response.as_bytes()).and_then(|()| stream.flush());
    let _ = stream.shutdown(Shutdown::Write);
}

fn response(status: u16, reason: &str, content_type: &str, body: &str, head: bool, extra: &str) -> String {
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{}",
        body.len(),
        if head { "" } else { body }
    )
}

/// Reads the request head within `REQUEST_TIME`; `None` when the client gave up or was too slow
/// (nothing is answered then).
fn read_head(stream: &mut TcpStream) -> Option<Asked> {
    let deadline = Instant::now() + REQUEST_TIME;
    let mut head: Vec<u8> = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(asked) = judge(&head) {
            return Some(asked);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        stream.set_read_timeout(Some(left)).ok()?;
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
}

/// What the head read so far asks for, once it can be told; `None` while more is needed.
fn judge(head: &[u8]) -> Option<Asked> {
    let Some(line_end) = head.iter().position(|&b| b == b'\n') else {
        return (head.len() > MAX_REQUEST_LINE).then_some(Asked::Other(414, "URI Too Long", "request line too long\n"));
    };
    if line_end > MAX_REQUEST_LINE {
        return Some(Asked::Other(414, "URI Too Long", "request line too long\n"));
    }
    let complete = head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n");
    if !complete {
        return (head.len() > MAX_HEAD).then_some(Asked::Other(
            431,
            "Request Header Fields Too Large",
            "head too long\n",
        ));
    }
    let line = String::from_utf8_lossy(&head[..line_end]);
    let parts: Vec<&str> = line.trim_end_matches('\r').split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Some(Asked::Other(400, "Bad Request", "bad request\n"));
    };
    if !version.starts_with("HTTP/1.") {
        return Some(Asked::Other(400, "Bad Request", "bad request\n"));
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Some(Asked::Other(405, "Method Not Allowed", "only GET and HEAD\n")),
    };
    let path = target.split(['?', '#']).next().unwrap_or("");
    if path != "/metrics" {
        return Some(Asked::Other(404, "Not Found", "not found: the metrics are at /metrics\n"));
    }
    Some(Asked::Metrics { head: head_only })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_leave_the_url() {
        for (url, want) in [
            ("sqlite:/var/lib/partner/journal.db", "sqlite:/var/lib/partner/journal.db"),
            ("postgres://partner@db/partner", "postgres://partner@db/partner"),
            ("postgres://partner:s3cret@db:5432/partner", "postgres://partner@db:5432/partner"),
            (
                "postgresql://partner:a/b@c@db/partner?sslmode=require",
                "postgresql://partner@db/partner?sslmode=require",
            ),
            (
                "postgres://db/partner?user=p&password=s3cret&sslmode=verify-full",
                "postgres://db/partner?user=p&sslmode=verify-full",
            ),
            ("postgres://db/partner?password=s3cret", "postgres://db/partner"),
        ] {
            assert_eq!(redact_url(url), want, "{url}");
        }
        let url = "postgres://partner:s%40cret@db/partner?password=other";
        let message = hide_secrets(url, "cannot connect as partner:s%40cret (s@cret) with other");
        assert_eq!(message, "cannot connect as partner:*** (***) with ***");
    }

    #[test]
    fn the_exposition_is_labelled_and_typed() {
        let status = Status {
            handled: 3,
            missing: 2,
            highest_index: Some(8),
            oldest_gap_ms: Some(1_718_064_000_123),
            ..Status::default()
        };
        let text = exposition("sqlite:/tmp/a \"b\"", Ok(&status));
        assert!(text.contains("slotpartner_journal_handled_total{journal=\"sqlite:/tmp/a \\\"b\\\"\"} 3\n"), "{text}");
        assert!(text.contains("# TYPE slotpartner_journal_handled_total counter\n"), "{text}");
        assert!(text.contains(
            "slotpartner_journal_oldest_gap_timestamp_seconds{journal=\"sqlite:/tmp/a \\\"b\\\"\"} 1718064000.123\n"
        ));
        assert!(
            text.contains(
                "slotpartner_journal_last_delivery_timestamp_seconds{journal=\"sqlite:/tmp/a \\\"b\\\"\"} 0\n"
            )
        );
        assert!(!text.contains("slotpartner_journal_size_bytes"), "unknown size left out");
        let down = exposition("sqlite:/x", Err("no such file"));
        assert_eq!(
            down,
            "# journal unreadable: no such file\n# HELP slotpartner_journal_up Whether the journal could be read: 1, or 0 (then this is the only sample).\n# TYPE slotpartner_journal_up gauge\nslotpartner_journal_up{journal=\"sqlite:/x\"} 0\n"
        );
        assert_eq!(seconds_text(1_500), "1.5");
        assert_eq!(seconds_text(2_000), "2");
    }

    #[test]
    fn requests_are_judged_by_their_head() {
        assert_eq!(judge(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"), None);
        assert_eq!(judge(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), Some(Asked::Metrics { head: false }));
        assert_eq!(judge(b"HEAD /metrics?x=1 HTTP/1.0\n\n"), Some(Asked::Metrics { head: true }));
        assert!(matches!(judge(b"GET / HTTP/1.1\r\n\r\n"), Some(Asked::Other(404, ..))));
        assert!(matches!(judge(b"POST /metrics HTTP/1.1\r\n\r\n"), Some(Asked::Other(405, ..))));
        assert!(matches!(judge(b"nonsense\r\n\r\n"), Some(Asked::Other(400, ..))));
        let long = format!("GET /{} HTTP/1.1", "a".repeat(MAX_REQUEST_LINE + 1));
        assert!(matches!(judge(long.as_bytes()), Some(Asked::Other(414, ..))));
    }
}
