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

mod connections;
mod listener;

use std::fmt::Write as _;

use slotpartner::journal::Status;

use crate::args::JournalOpt;
use crate::config::open_journal;
use crate::{Fail, Outcome, Verdict};

pub use listener::serve;

/// The exposition's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

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
        Family {
            name: "slotpartner_journal_tail_checked_timestamp_seconds",
            kind: "gauge",
            help: "When recover last found the service had no event after the highest index seen, in Unix seconds (0: never).",
            value: seconds(status.tail_checked.map(|(_, ms)| ms)),
        },
        Family {
            name: "slotpartner_journal_first_index_configured",
            kind: "gauge",
            help: "1 when the first index is configured; 0 when it is the lowest seen, below which recover asks the service each run.",
            value: Some(u8::from(status.first_index_stored).to_string()),
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
}
