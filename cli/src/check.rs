//! `check`: whether everything a partner going live needs is wired, one line per check. The
//! partner's own callback endpoint gets one balance query, as the service sends it (read-only:
//! no money moves, and without an index, so that its journal records nothing); the journal is
//! read, and written only with a lock row that is removed at once (no delivery reads locks); the
//! service is asked for its games. Clocks are compared where an answer carries one.
//!
//! Every check ends `ok`, `warn`, `FAIL` or `skip` (its inputs are not configured, or an earlier
//! check failed). Exit status: 0 no check failed, 1 at least one failed, 2 the command could not
//! run (usage, configuration, nothing configured to check).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use serde::Serialize;
use slotpartner::client::TlsProblem;
use slotpartner::error::Cause;
use slotpartner::journal::{host_name, parse_time};
use slotpartner::{ErrorKind, Journal, KnownEvent};

use crate::args::{JournalOpt, ServiceOpts, parse_age, parse_duration};
use crate::config::{client, open_journal, parser, seconds};
use crate::endpoint::{Answer, Endpoint, Peer, excerpt};
use crate::output::{age_text, print_json, quoted};
use crate::{Fail, Outcome, Verdict};

/// The journal schema version this release reads and writes.
const CURRENT_SCHEMA: i64 = slotpartner::journal::SCHEMA_VERSION;
/// The largest amount a balance may state: 2^53 - 1, as the library's validation.
const MAX_AMOUNT: i64 = (1 << 53) - 1;
/// The journal lock the write probe takes and removes at once.
const PROBE_LOCK: &str = "check";
/// The identifier sent for both players of the balance query unless `--player` and
/// `--service-player` say otherwise.
const DEFAULT_PLAYER: &str = "slotpartner-check";

/// The text after `check --help`'s options.
pub const CHECK_HELP: &str = "\
Each check prints one line: its verdict (ok, warn, FAIL, skip), its name, what was seen, and for
a warning or failure the fix in this command's options and variables (for a skip, what enables
it). --json prints the same as one JSON document.

callback: one balance query to --callback-url, as the service sends it (POST, X-Service-Token
with --token, Content-Type application/json; charset=utf-8; {\"action\":\"getPlayerBalance\",
\"playerIdentifier\":...,\"playerPartnerIdentifier\":...}, without an index, so that the
endpoint's journal records nothing); read-only, no money moves. Judged: reachable, TLS (trust
more CAs with --callback-ca-file), source (HTTP 403: this host is not on the endpoint's list),
token (HTTP 401: the endpoint's token differs from --token), the reply (HTTP 200 with
{\"playerBalance\":{\"money\":N,\"currencyISO4217\":\"EUR\",\"coins\":N,\"errorMessage\":\"\"}};
a refusal {\"playerBalance\":{\"errorMessage\":\"...\"}} of an unknown --player warns), the
time (warns above --slow, default 1s), the clock (its Date header, --clock-tolerance, default 5s).

journal: reachable; schema version (a SQLite journal's is read read-only first: an older one is
left unmigrated, and warns); writable (the lock `check`, written and removed: no delivery reads
it); gaps (FAIL when indexes are missing for at least --min-age, default 1m; warn when all are
younger); unfinished deliveries, open conflicts and index jumps (FAIL); a PostgreSQL server's
clock (--clock-tolerance).

service: getGames in --locale through the library's client: reachable, TLS (trust more CAs
with --ca-file), token, the answer.

Examples:
  slotpartner check --callback-url https://127.0.0.1:8443/callback --callback-ca-file endpoint-ca.pem
  slotpartner check --player 4711 --json | jq '.checks[] | select(.verdict == \"FAIL\")'

Exit status: 0 when no check failed (warnings and skips allowed), 1 when at least one failed,
2 when the command could not run (usage, configuration: a bad URL, an unreadable CA file,
nothing configured to check).";

/// `slotpartner check`: the endpoint, the journal and the service, from the usual options.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Your own callback endpoint (https://, or http:// to a loopback address only): it gets one balance query
    #[arg(long, global = true, value_name = "URL", env = "SLOTPARTNER_CALLBACK_URL", hide_env_values = true)]
    pub callback_url: Option<String>,
    /// Trust the CA certificates in this PEM file for the callback endpoint (besides the bundled roots)
    #[arg(long, global = true, value_name = "PEM", env = "SLOTPARTNER_CALLBACK_CA_FILE", hide_env_values = true)]
    pub callback_ca_file: Option<PathBuf>,
    /// The balance query's playerPartnerIdentifier (your player id); a player your endpoint knows gets a full balance reply checked
    #[arg(long, value_name = "ID", default_value = DEFAULT_PLAYER)]
    pub player: String,
    /// The balance query's playerIdentifier (the service's player id)
    #[arg(long, value_name = "ID", default_value = DEFAULT_PLAYER)]
    pub service_player: String,
    /// The balance reply's wrapper key, as your endpoint's receiver is configured
    #[arg(long, value_name = "NAME", default_value = "playerBalance")]
    pub balance_wrapper: String,
    /// Warn when the endpoint takes longer than this to answer (1s, 500ms)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub slow: Duration,
    /// Warn when a clock differs from this host's by more than this (the endpoint's Date header, a PostgreSQL journal's clock)
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub clock_tolerance: Duration,
    /// Gaps found missing less than this long ago warn instead of failing (usually still on their way)
    #[arg(long, global = true, value_name = "DURATION", default_value = "1m", env = "SLOTPARTNER_MIN_AGE", hide_env_values = true, value_parser = parse_age)]
    pub min_age: Duration,
    /// The locale of the getGames call to the service
    #[arg(long, value_name = "LOCALE", default_value = "en-US")]
    pub locale: String,
    /// Print one JSON document instead of lines
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalOpt,
    #[command(flatten)]
    pub service: ServiceOpts,
}

/// A check's verdict, as printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
enum Mark {
    #[serde(rename = "ok")]
    Ok,
    #[serde(rename = "warn")]
    Warn,
    #[serde(rename = "FAIL")]
    Fail,
    #[serde(rename = "skip")]
    Skip,
}

impl Mark {
    fn text(self) -> &'static str {
        match self {
            Mark::Ok => "ok",
            Mark::Warn => "warn",
            Mark::Fail => "FAIL",
            Mark::Skip => "skip",
        }
    }
}

/// One check's line: what was checked, the verdict, what was seen, and for a warning or a
/// failure the fix in this command's terms (for a skip, what enables it).
#[derive(Debug, Serialize)]
struct Line {
    check: &'static str,
    verdict: Mark,
    detail: String,
    fix: Option<String>,
}

/// The lines, in order.
#[derive(Default)]
struct Lines(Vec<Line>);

impl Lines {
    fn push(&mut self, check: &'static str, verdict: Mark, detail: impl Into<String>, fix: Option<String>) {
        self.0.push(Line { check, verdict, detail: detail.into(), fix });
    }
    fn ok(&mut self, check: &'static str, detail: impl Into<String>) {
        self.push(check, Mark::Ok, detail, None);
    }
    fn warn(&mut self, check: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.push(check, Mark::Warn, detail, Some(fix.into()));
    }
    fn fail(&mut self, check: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.push(check, Mark::Fail, detail, Some(fix.into()));
    }
    /// Every one of `checks` skipped for the same reason.
    fn skip(&mut self, checks: &[&'static str], detail: &str, fix: Option<&str>) {
        for check in checks {
            self.push(check, Mark::Skip, detail, fix.map(str::to_owned));
        }
    }
    fn count(&self, mark: Mark) -> usize {
        self.0.iter().filter(|l| l.verdict == mark).count()
    }
}

const CALLBACK_CHECKS: &[&str] = &[
    "callback reachable",
    "callback tls",
    "callback source",
    "callback token",
    "callback reply",
    "callback time",
    "callback clock",
];
const JOURNAL_CHECKS: &[&str] = &[
    "journal reachable",
    "journal schema",
    "journal writable",
    "journal gaps",
    "journal unfinished",
    "journal conflicts",
    "journal jumps",
    "journal clock",
];
const SERVICE_CHECKS: &[&str] =
    &["service reachable", "service tls", "service token", "service games", "service clock"];

pub fn run(args: &CheckArgs) -> Outcome {
    // An empty option or variable counts as not given.
    let given = |value: &Option<String>| value.as_deref().is_some_and(|v| !v.is_empty());
    let token = args.service.token.as_deref().filter(|t| !t.is_empty());
    // Everything that can be wrong with the configuration is found before any check runs.
    let endpoint = match (args.callback_url.as_deref().filter(|u| !u.is_empty()), token) {
        (Some(url), Some(token)) => Some(BalanceCheck::new(args, url, token)?),
        _ => None,
    };
    let service = match (given(&args.service.base_url), token) {
        (true, Some(_)) => Some(client(&args.service, |_| Ok(()))?),
        _ => None,
    };
    let journal_url = args.journal.journal.as_deref().filter(|u| !u.is_empty());
    if !given(&args.callback_url) && !given(&args.service.base_url) && journal_url.is_none() {
        return Err(Fail(
            "nothing to check: give --callback-url URL, --journal URL or --base-url URL (or SLOTPARTNER_CALLBACK_URL, SLOTPARTNER_JOURNAL, SLOTPARTNER_BASE_URL)".to_owned(),
        ));
    }
    let mut lines = Lines::default();

    match (&endpoint, given(&args.callback_url)) {
        (Some(endpoint), _) => endpoint.check(args, &mut lines),
        (None, false) => lines.skip(
            CALLBACK_CHECKS,
            "no callback endpoint configured",
            Some("give --callback-url URL or set SLOTPARTNER_CALLBACK_URL"),
        ),
        (None, true) => {
            lines.skip(CALLBACK_CHECKS, "no partner token to send", Some("give --token UUID or set SLOTPARTNER_TOKEN"))
        }
    }

    match journal_url {
        Some(url) => check_journal(args, url, &mut lines),
        None => {
            lines.skip(JOURNAL_CHECKS, "no journal configured", Some("give --journal URL or set SLOTPARTNER_JOURNAL"))
        }
    }

    match (&service, given(&args.service.base_url)) {
        (Some(client), _) => check_service(client, &args.locale, &mut lines),
        (None, false) => {
            lines.skip(SERVICE_CHECKS, "no service configured", Some("give --base-url URL or set SLOTPARTNER_BASE_URL"))
        }
        (None, true) => {
            lines.skip(SERVICE_CHECKS, "no partner token to send", Some("give --token UUID or set SLOTPARTNER_TOKEN"))
        }
    }

    let failed = lines.count(Mark::Fail);
    if args.json {
        #[derive(Serialize)]
        struct Document<'a> {
            result: &'static str,
            failed: usize,
            warnings: usize,
            checks: &'a [Line],
        }
        let warnings = lines.count(Mark::Warn);
        let result = if failed > 0 {
            "FAIL"
        } else if warnings > 0 {
            "warn"
        } else {
            "ok"
        };
        print_json(&Document { result, failed, warnings, checks: &lines.0 })?;
    } else {
        for line in &lines.0 {
            let mut text = format!("{:<4}  {:<18}  {}", line.verdict.text(), line.check, crate::one_line(&line.detail));
            if let Some(fix) = &line.fix {
                let label = if line.verdict == Mark::Skip { "enable" } else { "fix" };
                text.push_str(&format!("; {label}: {}", crate::one_line(fix)));
            }
            println!("{text}");
        }
    }
    Ok(Verdict::bad_if(failed > 0))
}

/// Now on this host's wall clock, in ms since the Unix epoch.
fn now_ms() -> i64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

/// Judges a clock read between `before_ms` and `after_ms` (this host's clock) that said
/// `other_ms`, which may lie up to `resolution_ms` before the moment it was read (a Date
/// header's whole seconds): `None` when within `tolerance`, else the difference in words.
fn clock_difference(
    other_ms: i64,
    resolution_ms: i64,
    before_ms: i64,
    after_ms: i64,
    tolerance: Duration,
) -> Option<String> {
    let tolerance_ms = i64::try_from(tolerance.as_millis()).unwrap_or(i64::MAX);
    let ahead = other_ms - after_ms;
    let behind = before_ms - (other_ms + resolution_ms);
    let words = |ms: i64| age_text(Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
    if ahead > tolerance_ms {
        Some(format!("{} ahead of this host's clock", words(ahead)))
    } else if behind > tolerance_ms {
        Some(format!("{} behind this host's clock", words(behind)))
    } else {
        None
    }
}

/// An HTTP `Date` header (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110's IMF-fixdate) in ms since
/// the Unix epoch; `None` when it is not one.
fn http_date_ms(text: &str) -> Option<i64> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_weekday, day, month, year, time, "GMT"] = parts.as_slice() else { return None };
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month = MONTHS.iter().position(|m| m == month)? + 1;
    let (day, year): (u32, u32) = (day.parse().ok()?, year.parse().ok()?);
    parse_time(&format!("{year:04}-{month:02}-{day:02}T{time}Z")).ok()
}

/// The partner's own callback endpoint and the balance query it gets.
struct BalanceCheck {
    endpoint: Endpoint,
    body: String,
}

/// What the endpoint answered, and when.
struct Timed {
    answer: Answer,
    took: Duration,
    sent_ms: i64,
    answered_ms: i64,
}

impl BalanceCheck {
    fn new(args: &CheckArgs, url: &str, token: &str) -> Result<BalanceCheck, Fail> {
        crate::endpoint::check_url(url)?;
        for (option, value) in [
            ("--player", &args.player),
            ("--service-player", &args.service_player),
            ("--balance-wrapper", &args.balance_wrapper),
        ] {
            if value.is_empty() || value.chars().any(char::is_control) {
                return Err(Fail(format!(
                    "{option}: expected a non-empty text without control characters, got {}",
                    quoted(value)
                )));
            }
        }
        let body = format!(
            r#"{{"action":"getPlayerBalance","playerIdentifier":{},"playerPartnerIdentifier":{}}}"#,
            quoted(&args.service_player),
            quoted(&args.player)
        );
        // The query must be what the service sends: the library's own validation says so.
        let parsed = parser("index", false)?;
        match parsed.parse(body.as_bytes()) {
            Ok(event) if event.known() == Some(KnownEvent::BalanceQuery) => {}
            Ok(_) => return Err(Fail("the balance query does not read as a balance query".to_owned())),
            Err(error) => {
                let option = if error.field == "playerIdentifier" { "--service-player" } else { "--player" };
                return Err(Fail(format!("{option}: {}", error.message)));
            }
        }
        let timeout = seconds("timeout", args.service.timeout)?;
        let endpoint = Endpoint::new(url, args.callback_ca_file.as_deref(), token, timeout, "check")?;
        Ok(BalanceCheck { endpoint, body })
    }

    /// POSTs the balance query as the service would.
    fn ask(&self) -> Result<Timed, ureq::Error> {
        let sent_ms = now_ms();
        let started = Instant::now();
        let answer = self.endpoint.post(&self.body)?;
        Ok(Timed { answer, took: started.elapsed(), sent_ms, answered_ms: now_ms() })
    }

    fn check(&self, args: &CheckArgs, lines: &mut Lines) {
        let url = &self.endpoint.url;
        let timed = match self.ask() {
            Ok(timed) => timed,
            Err(error) if is_tls_error(&error) => {
                lines.ok("callback reachable", format!("{url} accepted the connection"));
                let fix = tls_fix(Peer::Endpoint, TlsProblem::of(&error));
                lines.fail("callback tls", format!("the TLS handshake failed: {error}"), fix);
                lines.skip(&CALLBACK_CHECKS[2..], "no answer: the TLS handshake failed", None);
                return;
            }
            Err(error) => {
                let timed_out = matches!(error, ureq::Error::Timeout(_));
                let fix = if timed_out {
                    "make the endpoint answer a balance query within --timeout (seconds), or raise --timeout"
                } else {
                    "start the endpoint, or correct --callback-url / SLOTPARTNER_CALLBACK_URL"
                };
                lines.fail("callback reachable", format!("no answer from {url}: {error}"), fix);
                lines.skip(&CALLBACK_CHECKS[1..], "no answer from the endpoint", None);
                return;
            }
        };
        let answer = &timed.answer;
        lines.ok("callback reachable", format!("{url} answered HTTP {}", answer.status));
        if self.endpoint.https {
            lines.ok("callback tls", "the endpoint's certificate is trusted");
        } else {
            lines.skip(&["callback tls"], "http:// to a loopback address: no TLS", None);
        }
        match answer.status {
            403 => {
                lines.fail(
                    "callback source",
                    format!("the endpoint refused this host's address (HTTP 403): {}", excerpt(&answer.text)),
                    "add this host's address to the endpoint's sources (one address, never a range), or run `slotpartner check` and `recover` on the endpoint's host against a loopback listener that allows 127.0.0.1 (README, Lost events)",
                );
                lines.skip(&["callback token", "callback reply"], "the source was refused first", None);
            }
            401 => {
                lines.ok("callback source", "this host's address was let through");
                lines.fail(
                    "callback token",
                    format!("the endpoint refused the token (HTTP 401): {}", excerpt(&answer.text)),
                    "the endpoint's token differs from --token / SLOTPARTNER_TOKEN: give both the partner token the service operator issued",
                );
                lines.skip(&["callback reply"], "the token was refused", None);
            }
            _ => {
                lines.ok("callback source", "this host's address was let through");
                lines.ok("callback token", "the endpoint accepted the token");
                match judge_reply(&args.balance_wrapper, answer.status, &answer.text) {
                    Reply::Balance(detail) => lines.ok("callback reply", detail),
                    Reply::Refused(message) => lines.warn(
                        "callback reply",
                        format!(
                            "HTTP {}: the endpoint refused the balance query of player {}: {} (a refusal in the expected shape)",
                            answer.status,
                            quoted(&args.player),
                            quoted(&message)
                        ),
                        "give --player (and --service-player) with a test player your endpoint knows, to check a full balance reply",
                    ),
                    Reply::Bad(problem) => lines.fail(
                        "callback reply",
                        format!("HTTP {}: {problem}: {}", answer.status, excerpt(&answer.text)),
                        format!(
                            "answer a balance query HTTP 200 with {{\"{}\":{{\"money\":N,\"currencyISO4217\":\"EUR\",\"coins\":N,\"errorMessage\":\"\"}}}} (the library's balance reply builds it; --balance-wrapper names another wrapper)",
                            args.balance_wrapper
                        ),
                    ),
                }
            }
        }
        let took = match timed.took.as_millis() {
            ms @ 0..1000 => format!("{ms}ms"),
            _ => format!("{:.1}s", timed.took.as_secs_f64()),
        };
        if timed.took > args.slow {
            lines.warn(
                "callback time",
                format!("the answer took {took}, longer than --slow {}", age_text(args.slow)),
                "make the balance answer faster (the service waits for it), or raise --slow",
            );
        } else {
            lines.ok("callback time", format!("answered in {took} (--slow {})", age_text(args.slow)));
        }
        match answer.date.as_deref().map(|d| (d, http_date_ms(d))) {
            None => lines.skip(&["callback clock"], "the answer carries no Date header", None),
            Some((date, None)) => lines.warn(
                "callback clock",
                format!("the Date header {} is not an HTTP date", quoted(date)),
                "make the endpoint's web server send a valid Date header",
            ),
            Some((_, Some(ms))) => {
                match clock_difference(ms, 1000, timed.sent_ms, timed.answered_ms, args.clock_tolerance) {
                    None => lines.ok(
                        "callback clock",
                        format!(
                            "the endpoint's Date is within --clock-tolerance {} of this host's clock",
                            age_text(args.clock_tolerance)
                        ),
                    ),
                    Some(difference) => lines.warn(
                        "callback clock",
                        format!(
                            "the endpoint's Date is {difference} (--clock-tolerance {})",
                            age_text(args.clock_tolerance)
                        ),
                        "synchronise both hosts' clocks (NTP), or raise --clock-tolerance",
                    ),
                }
            }
        }
    }
}

/// Whether a failed request failed in the TLS handshake (an untrusted or wrong certificate).
fn is_tls_error(error: &ureq::Error) -> bool {
    matches!(error, ureq::Error::Tls(_) | ureq::Error::Rustls(_)) || TlsProblem::of(error).is_some()
}

/// The fix for a failed TLS handshake with `peer`, in this command's terms.
fn tls_fix(peer: Peer, problem: Option<TlsProblem>) -> String {
    match (problem, peer) {
        (Some(problem), _) => peer.tls_hint(problem).to_owned(),
        (None, Peer::Endpoint) => {
            "check the endpoint's certificate chain, and give its CA with --callback-ca-file PEM (or SLOTPARTNER_CALLBACK_CA_FILE)".to_owned()
        }
        (None, Peer::Service) => {
            "check the service's certificate chain, and give its CA with --ca-file PEM (or SLOTPARTNER_CA_FILE)".to_owned()
        }
    }
}

/// What a balance answer is.
enum Reply {
    /// A balance, in words.
    Balance(String),
    /// A refusal in the expected shape, with its message.
    Refused(String),
    /// Not a balance reply: the problem.
    Bad(String),
}

/// Judges the endpoint's answer to the balance query: `{"<wrapper>":{"money":N,
/// "currencyISO4217":"EUR","coins":N,"errorMessage":""}}` with HTTP 200 (the shape existing
/// integrations use and the library builds; the spec shows none), or a refusal
/// `{"<wrapper>":{"errorMessage":"..."}}` (any status, as the library's receiver may answer one
/// with 200 or an error status).
fn judge_reply(wrapper: &str, status: u16, text: &str) -> Reply {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return Reply::Bad("the answer is not JSON".to_owned());
    };
    let Some(top) = value.as_object() else { return Reply::Bad("the answer is not a JSON object".to_owned()) };
    if top.len() != 1 || !top.contains_key(wrapper) {
        let keys: Vec<String> = top.keys().map(|k| quoted(k)).collect();
        return Reply::Bad(format!("expected exactly the key {}, got [{}]", quoted(wrapper), keys.join(",")));
    }
    let Some(inner) = top[wrapper].as_object() else {
        return Reply::Bad(format!("{} is not an object", quoted(wrapper)));
    };
    let message = inner.get("errorMessage");
    let Some(message) = message.and_then(serde_json::Value::as_str) else {
        return Reply::Bad(format!("{wrapper}.errorMessage is missing or not a string"));
    };
    if !message.is_empty() {
        return Reply::Refused(message.to_owned());
    }
    if status != 200 {
        return Reply::Bad(format!("a balance reply needs HTTP 200, got HTTP {status}"));
    }
    let amount = |name: &str| -> Result<i64, String> {
        inner
            .get(name)
            .and_then(serde_json::Value::as_i64)
            .filter(|v| (0..=MAX_AMOUNT).contains(v))
            .ok_or_else(|| format!("{wrapper}.{name} must be an integer from 0 to {MAX_AMOUNT} (minor units)"))
    };
    let (money, coins) = match (amount("money"), amount("coins")) {
        (Ok(money), Ok(coins)) => (money, coins),
        (Err(problem), _) | (_, Err(problem)) => return Reply::Bad(problem),
    };
    let currency = inner.get("currencyISO4217").and_then(serde_json::Value::as_str).unwrap_or("");
    if !(currency.len() == 3 && currency.bytes().all(|b| b.is_ascii_uppercase())) {
        return Reply::Bad(format!("{wrapper}.currencyISO4217 must be three uppercase letters (ISO 4217)"));
    }
    if let Some(extra) =
        inner.keys().find(|k| !["money", "currencyISO4217", "coins", "errorMessage"].contains(&k.as_str()))
    {
        return Reply::Bad(format!("unexpected key {wrapper}.{extra}"));
    }
    Reply::Balance(format!("HTTP 200, a balance reply: money {money} {currency}, coins {coins}"))
}

/// The journal's checks. A SQLite journal's schema version is read first, read-only: a journal
/// of an older version is not opened (the library migrates it when it opens it).
fn check_journal(args: &CheckArgs, url: &str, lines: &mut Lines) {
    let checks = &JOURNAL_CHECKS[1..];
    let peeked = match sqlite_schema_version(url) {
        Ok(peeked) => peeked,
        Err(problem) => {
            lines.fail(
                "journal reachable",
                problem,
                "correct --journal / SLOTPARTNER_JOURNAL, or the file's owner and mode",
            );
            lines.skip(checks, "the journal could not be read", None);
            return;
        }
    };
    if let Some(version) = peeked.filter(|v| *v != CURRENT_SCHEMA) {
        lines.ok("journal reachable", "the file is a journal");
        if version > CURRENT_SCHEMA {
            lines.fail(
                "journal schema",
                format!(
                    "version {version}, newer than this release of slotpartner understands (version {CURRENT_SCHEMA})"
                ),
                "upgrade slotpartner (this command and every endpoint) to the release that wrote the journal",
            );
        } else {
            lines.warn(
                "journal schema",
                format!("version {version}: needs migration to version {CURRENT_SCHEMA}, which this release does when it opens the journal; left as it is"),
                "upgrade every endpoint to this release first: its first delivery migrates the journal (so does `slotpartner journal status`)",
            );
        }
        lines.skip(&checks[1..], "the journal was not opened (see its schema)", None);
        return;
    }
    let journal = match open_journal(&args.journal) {
        Ok(journal) => journal,
        Err(Fail(message)) => {
            lines.fail(
                "journal reachable",
                message,
                "correct --journal / SLOTPARTNER_JOURNAL, or start the database and check the user's rights",
            );
            lines.skip(checks, "the journal could not be opened", None);
            return;
        }
    };
    lines.ok("journal reachable", "the journal opened");
    let detail = if url.starts_with("sqlite:") {
        format!("version {CURRENT_SCHEMA} (current)")
    } else {
        format!(
            "version {CURRENT_SCHEMA} (current; an older PostgreSQL journal is migrated when this release opens it)"
        )
    };
    lines.ok("journal schema", detail);
    probe_writable(&journal, lines);
    let postgres = !url.starts_with("sqlite:");
    match journal.status() {
        Ok(status) => judge_status(&journal, &status, args.min_age, lines),
        Err(error) => {
            lines.fail(
                "journal gaps",
                format!("the journal could not be read: {}", error.message),
                "check the journal's storage",
            );
            lines.skip(
                &["journal unfinished", "journal conflicts", "journal jumps"],
                "the journal could not be read",
                None,
            );
        }
    }
    if !postgres {
        lines.skip(&["journal clock"], "a SQLite journal keeps this host's clock", None);
        return;
    }
    match server_clock(&journal) {
        Err(problem) => lines.warn(
            "journal clock",
            format!("PostgreSQL's clock could not be read: {problem}"),
            "check the journal's connection (see journal reachable)",
        ),
        Ok((before, server, after)) => match clock_difference(server, 0, before, after, args.clock_tolerance) {
            None => lines.ok(
                "journal clock",
                format!(
                    "PostgreSQL's clock is within --clock-tolerance {} of this host's",
                    age_text(args.clock_tolerance)
                ),
            ),
            Some(difference) => lines.warn(
                "journal clock",
                format!("PostgreSQL's clock is {difference} (--clock-tolerance {})", age_text(args.clock_tolerance)),
                "synchronise the database server's and this host's clocks (NTP), or raise --clock-tolerance",
            ),
        },
    }
}

/// The schema version of a SQLite journal, read without changing anything (`None` for a
/// PostgreSQL journal, or a file the library will judge when it opens it).
fn sqlite_schema_version(url: &str) -> Result<Option<i64>, String> {
    use rusqlite::{Connection, OpenFlags, OptionalExtension};
    let Some(path) = url.strip_prefix("sqlite:") else { return Ok(None) };
    let path = path.strip_prefix("//").unwrap_or(path);
    if path.is_empty() || !Path::new(path).is_file() {
        return Ok(None);
    }
    let read = || -> rusqlite::Result<Option<i64>> {
        let db = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        db.busy_timeout(Duration::from_secs(5))?;
        let has_meta: i64 = db.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sp_journal_meta'",
            [],
            |r| r.get(0),
        )?;
        if has_meta == 0 {
            return Ok(None);
        }
        db.query_row("SELECT value FROM sp_journal_meta WHERE key = 'schema_version'", [], |r| r.get(0)).optional()
    };
    read().map_err(|e| format!("journal_url: {path} cannot be read: {e}"))
}

/// Writes to the journal what no delivery reads: the lock `check`, taken and released at once.
fn probe_writable(journal: &Journal, lines: &mut Lines) {
    let holder = format!("slotpartner check, pid {} on {}", std::process::id(), host_name());
    if let Err(error) = journal.take_lock(PROBE_LOCK, &holder, Duration::from_secs(30)) {
        let fix = if error.kind == ErrorKind::Busy {
            "another `slotpartner check` is writing its probe: run this one again"
        } else {
            "give the user that runs the endpoint and this command write access to the journal (the file and its folder, or the database tables)"
        };
        lines.fail("journal writable", format!("the journal cannot be written: {}", error.message), fix);
        return;
    }
    match journal.release_lock(PROBE_LOCK, &holder) {
        Ok(()) => lines.ok("journal writable", "wrote and removed the lock `check` (no delivery reads it)"),
        Err(error) => lines.fail(
            "journal writable",
            format!("the probe lock was written but not removed: {}", error.message),
            "check the journal's storage; the lock `check` lapses by itself after 30s",
        ),
    }
}

/// The PostgreSQL server's clock, read between two readings of this host's:
/// `(before, server, after)` in ms.
fn server_clock(journal: &Journal) -> Result<(i64, i64, i64), String> {
    let before = now_ms();
    let server = journal.clock_ms().map_err(|e| e.message)?;
    Ok((before, server, now_ms()))
}

/// Gaps, unfinished deliveries, open conflicts and index jumps.
fn judge_status(journal: &Journal, status: &slotpartner::journal::Status, min_age: Duration, lines: &mut Lines) {
    if status.missing == 0 {
        lines.ok("journal gaps", "no index is missing");
    } else {
        let old = journal.missing_older_than(min_age, 1000).map(|ranges| {
            ranges.iter().map(|&(first, last)| u64::try_from(last - first + 1).unwrap_or(0)).sum::<u64>()
        });
        let unrecoverable = if status.unrecoverable > 0 {
            format!(
                " ({} unrecoverable: `slotpartner journal resolve` once the service confirms)",
                status.unrecoverable
            )
        } else {
            String::new()
        };
        match old {
            Ok(0) => lines.warn(
                "journal gaps",
                format!(
                    "{} indexes missing, all found missing less than --min-age {} ago (usually still on their way)",
                    status.missing,
                    age_text(min_age)
                ),
                "run `slotpartner check` again later; `slotpartner journal gaps` lists them",
            ),
            Ok(old) => lines.fail(
                "journal gaps",
                format!("{} indexes missing, {old} of them for at least --min-age {}{unrecoverable}", status.missing, age_text(min_age)),
                "`slotpartner recover --callback-url URL` fetches and delivers them; `slotpartner journal gaps` lists them",
            ),
            Err(error) => lines.fail(
                "journal gaps",
                format!("{} indexes missing; their age could not be read: {}", status.missing, error.message),
                "`slotpartner journal gaps` lists them",
            ),
        }
    }
    let count_line = |lines: &mut Lines, check: &'static str, count: u64, what: &str, fix: &str| {
        if count == 0 {
            lines.ok(check, format!("no {what}"));
        } else {
            lines.fail(check, format!("{count} {what}"), fix);
        }
    };
    count_line(
        lines,
        "journal unfinished",
        status.unfinished,
        "deliveries claimed and never finished",
        "`slotpartner recover --callback-url URL` delivers them again; `slotpartner journal close-unfinished INDEX --note TEXT` once settled another way",
    );
    count_line(
        lines,
        "journal conflicts",
        status.open_conflicts,
        "open conflicts",
        "`slotpartner journal conflicts` shows them; `slotpartner journal resolve-conflict ID --note TEXT` once settled",
    );
    count_line(
        lines,
        "journal jumps",
        status.index_jumps,
        "open index jumps",
        "`slotpartner journal jumps` shows them; `slotpartner journal accept-jump ID --note TEXT` or `jump-is-gap ID --note TEXT`",
    );
}

/// The service's checks: one getGames call through the library's client.
fn check_service(client: &slotpartner::client::Client, locale: &str, lines: &mut Lines) {
    match client.get_games(locale, None) {
        Ok(games) => {
            lines.ok("service reachable", "the service answered");
            lines.ok("service tls", "the service's certificate is trusted");
            lines.ok("service token", "the service accepted the token");
            lines.ok("service games", format!("getGames answered {} games in {locale}", games.len()));
        }
        Err(error) => match error.kind {
            ErrorKind::Connect | ErrorKind::Timeout => {
                lines.fail(
                    "service reachable",
                    error.message,
                    "correct --base-url / SLOTPARTNER_BASE_URL, or let this host reach the service (firewall, proxy), or raise --timeout",
                );
                lines.skip(&SERVICE_CHECKS[1..4], "no answer from the service", None);
            }
            ErrorKind::Tls => {
                lines.ok("service reachable", "the service accepted the connection");
                // The library's message ends with its advice in its own configuration's terms.
                let (problem, detail) = match error.cause.as_deref() {
                    Some(Cause::Tls { problem, detail }) => (Some(*problem), detail.clone()),
                    _ => (None, error.message.clone()),
                };
                let fix = tls_fix(Peer::Service, problem);
                lines.fail("service tls", format!("the TLS handshake failed: {detail}"), fix);
                lines.skip(&SERVICE_CHECKS[2..4], "no answer: the TLS handshake failed", None);
            }
            ErrorKind::HttpStatus if matches!(error.cause.as_deref(), Some(Cause::HttpStatus(401 | 403))) => {
                lines.ok("service reachable", "the service answered");
                lines.ok("service tls", "the service's certificate is trusted");
                lines.fail(
                    "service token",
                    format!("the service refused the token: {}", error.message),
                    "give the partner token the service operator issued with --token UUID or SLOTPARTNER_TOKEN",
                );
                lines.skip(&["service games"], "the token was refused", None);
            }
            ErrorKind::InvalidArgument => {
                lines.ok("service reachable", "not called");
                lines.skip(&SERVICE_CHECKS[1..4], "not called", None);
                lines.fail("service games", error.message, "correct --locale");
            }
            _ => {
                lines.ok("service reachable", "the service answered");
                lines.ok("service tls", "the service's certificate is trusted");
                lines.ok("service token", "the token was not refused");
                lines.fail(
                    "service games",
                    format!("getGames failed: {}", error.message),
                    "ask the service operator; `slotpartner games LOCALE` shows the call alone",
                );
            }
        },
    }
    lines.skip(
        &["service clock"],
        "not compared: the library's client does not hand out the service's Date header",
        None,
    );
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Reply, clock_difference, http_date_ms, judge_reply};

    #[test]
    fn http_dates() {
        assert_eq!(http_date_ms("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777_000));
        for bad in
            ["", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 CET", "Sun, 31 Feb 1994 08:49:37 GMT"]
        {
            assert_eq!(http_date_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn clocks() {
        let tolerance = Duration::from_secs(5);
        // A Date header of whole seconds, read between 10.2s and 10.4s.
        assert_eq!(clock_difference(10_000, 1000, 10_200, 10_400, tolerance), None);
        assert_eq!(clock_difference(15_000, 1000, 10_200, 10_400, tolerance), None);
        assert!(clock_difference(16_000, 1000, 10_200, 10_400, tolerance).unwrap().contains("ahead"));
        assert!(clock_difference(3_000, 1000, 10_200, 10_400, tolerance).unwrap().contains("behind"));
    }

    #[test]
    fn balance_replies() {
        let good = r#"{"playerBalance":{"money":12050,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#;
        assert!(matches!(judge_reply("playerBalance", 200, good), Reply::Balance(_)));
        assert!(matches!(judge_reply("playerBalance", 500, good), Reply::Bad(_)));
        let refused = r#"{"playerBalance":{"errorMessage":"unknown player"}}"#;
        assert!(matches!(judge_reply("playerBalance", 500, refused), Reply::Refused(m) if m == "unknown player"));
        for bad in [
            "not json",
            "[]",
            r#"{"balance":{"money":1,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#,
            r#"{"playerBalance":{"money":120.5,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#,
            r#"{"playerBalance":{"money":-1,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#,
            r#"{"playerBalance":{"money":1,"currencyISO4217":"eur","coins":0,"errorMessage":""}}"#,
            r#"{"playerBalance":{"money":1,"currencyISO4217":"EUR","coins":0}}"#,
            r#"{"playerBalance":{"money":1,"currencyISO4217":"EUR","coins":0,"errorMessage":"","x":1}}"#,
        ] {
            assert!(matches!(judge_reply("playerBalance", 200, bad), Reply::Bad(_)), "{bad}");
        }
    }
}
