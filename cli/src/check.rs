//! `check`: whether everything a partner going live needs is wired, one line per check. The
//! partner's own callback endpoint gets one balance query, as the service sends it (read-only:
//! no money moves, and without an index, so that its journal records nothing); the journal is
//! read, and written only with a lock row that is removed at once (no delivery reads locks); the
//! service is asked for its games. Clocks are compared where an answer carries one.
//!
//! Every check ends `ok`, `warn`, `FAIL` or `skip` (its URL is not configured, or an earlier
//! check failed). A group given its URL but not the token it sends does not run at all (exit 2). Exit status: 0 no check failed, 1 at least one failed, 2 the command could not
//! run (usage, configuration, nothing configured to check).

use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use slotpartner::client::TlsProblem;
use slotpartner::error::Cause;
use slotpartner::journal::{ExistingJournal, JournalOptions, host_name, now_ms, parse_time};
use slotpartner::{ErrorKind, Journal, KnownEvent, ReceiverConfig};

use crate::args::{CallbackOpts, JournalOpt, ServiceOpts, parse_age, parse_duration};
use crate::config::{client, parser, seconds};
use crate::endpoint::{Answer, Endpoint, Peer, excerpt, shown_url};
use crate::output::{age_text, elapsed_text, print_json, quoted};
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
token (HTTP 401: the endpoint's token differs from --token; only a 2xx answer confirms it), the
reply (HTTP 200 with
{\"playerBalance\":{\"money\":N,\"currencyISO4217\":\"EUR\",\"coins\":N,\"errorMessage\":\"\"}},
no key twice; a refusal {\"playerBalance\":{\"errorMessage\":\"...\"}} warns for the default
player and fails for a --player given; a redirect fails), the time (warns above --slow, default
1s), the clock (its Date header, --clock-tolerance, default 5s). The URL is shown without its
password and query values.

journal: nothing is created or migrated. Reachable (a database without a journal fails); schema
version (an older one fails and is left as it is: run the check of the release the endpoints
run, or upgrade them first); writable (the lock `check`, written and removed: no delivery reads
it); gaps (FAIL when indexes are missing for at least --min-age, default 1m, or were found
missing in the future by a clock ahead; warn when all are younger); unfinished deliveries, open
conflicts and index jumps (FAIL); a PostgreSQL server's clock (--clock-tolerance).

service: getGames in --locale through the library's client: reachable, TLS (trust more CAs
with --ca-file), token, the answer.

Examples:
  slotpartner check --callback-url https://127.0.0.1:8443/callback --callback-ca-file endpoint-ca.pem
  slotpartner check --player 4711 --json | jq '.checks[] | select(.verdict == \"FAIL\")'

Exit status: 0 when no check failed (warnings and skips allowed), 1 when at least one failed,
2 when the command could not run (usage, configuration: a bad URL, an unreadable CA file, no
or a malformed --token where the callback or service checks send it, nothing configured to
check).";

/// `slotpartner check`: the endpoint, the journal and the service, from the usual options.
#[derive(Debug, Args)]
pub struct CheckArgs {
    // The endpoint that gets one balance query.
    #[command(flatten)]
    pub callback: CallbackOpts,
    /// The balance query's playerPartnerIdentifier (your player id; default slotpartner-check): a player your endpoint knows gets a full balance reply checked, and a refusal of it fails
    #[arg(long, value_name = "ID")]
    pub player: Option<String>,
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
    "journal ends",
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
    let callback_url = args.callback.callback_url.as_deref().filter(|u| !u.is_empty());
    let journal_url = args.journal.journal.as_deref().filter(|u| !u.is_empty());
    // Everything that can be wrong with the configuration is found before any check runs.
    if callback_url.is_none() && !given(&args.service.base_url) && journal_url.is_none() {
        return Err(Fail(
            "nothing to check: give --callback-url URL, --journal URL or --base-url URL (or SLOTPARTNER_CALLBACK_URL, SLOTPARTNER_JOURNAL, SLOTPARTNER_BASE_URL)".to_owned(),
        ));
    }
    let token = partner_token(args, callback_url.is_some())?;
    let endpoint = match (callback_url, token) {
        (Some(url), Some(token)) => Some(BalanceCheck::new(args, url, token)?),
        _ => None,
    };
    let service = match token {
        Some(_) if given(&args.service.base_url) => Some(client(&args.service, |_| Ok(()))?),
        _ => None,
    };
    let mut lines = Lines::default();

    match &endpoint {
        Some(endpoint) => endpoint.check(args, &mut lines),
        None => lines.skip(
            CALLBACK_CHECKS,
            "no callback endpoint configured",
            Some("give --callback-url URL or set SLOTPARTNER_CALLBACK_URL"),
        ),
    }

    match journal_url {
        Some(url) => check_journal(args, url, &mut lines),
        None => {
            lines.skip(JOURNAL_CHECKS, "no journal configured", Some("give --journal URL or set SLOTPARTNER_JOURNAL"))
        }
    }

    match &service {
        Some(client) => check_service(client, &args.locale, &mut lines),
        None => {
            lines.skip(SERVICE_CHECKS, "no service configured", Some("give --base-url URL or set SLOTPARTNER_BASE_URL"))
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
            crate::outln!("{text}");
        }
    }
    Ok(Verdict::bad_if(failed > 0))
}

/// The partner token, when a group of checks sends it (the callback endpoint's, the service's):
/// given and a UUID, or the command cannot run (exit 2), rather than skipping those checks
/// into a result without a failure. `--timeout` is checked here too, its value clipped in the
/// message.
fn partner_token(args: &CheckArgs, callback: bool) -> Result<Option<&str>, Fail> {
    let service = args.service.base_url.as_deref().is_some_and(|u| !u.is_empty());
    if !callback && !service {
        return Ok(None);
    }
    seconds("--timeout", args.service.timeout)?;
    let needs = match (callback, service) {
        (true, true) => "the callback and service checks send it",
        (true, false) => "the callback checks send it to --callback-url",
        _ => "the service checks send it to --base-url",
    };
    let Some(token) = args.service.token.as_deref().filter(|t| !t.is_empty()) else {
        return Err(Fail(format!("no partner token: give --token UUID or set SLOTPARTNER_TOKEN ({needs})")));
    };
    // The library's own rule for a partner token (a UUID): a trailing newline or space copied
    // with it is refused here, not sent as a header that cannot be.
    if ReceiverConfig::default().add_token(token).is_err() {
        return Err(Fail(
            "--token (or SLOTPARTNER_TOKEN): expected a UUID like 6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f, without spaces or line ends".to_owned(),
        ));
    }
    Ok(Some(token))
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
    let words = |ms: i64| {
        let duration = Duration::from_millis(u64::try_from(ms).unwrap_or(0));
        // Whole units beyond a minute (`2h 5m`); below, to the millisecond (`5.3s`).
        if duration >= Duration::from_secs(60) { elapsed_text(duration) } else { age_text(duration) }
    };
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
            ("--player", args.player.as_deref().unwrap_or(DEFAULT_PLAYER)),
            ("--service-player", args.service_player.as_str()),
            ("--balance-wrapper", args.balance_wrapper.as_str()),
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
            quoted(args.player.as_deref().unwrap_or(DEFAULT_PLAYER))
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
        let timeout = seconds("--timeout", args.service.timeout)?;
        let endpoint = Endpoint::new(url, args.callback.callback_ca_file.as_deref(), token, timeout, "check")?;
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
        let url = shown_url(&self.endpoint.url);
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
        let status = answer.status;
        // What the answer said, on one line: its start, or why it could not be read.
        let said = match &answer.text {
            Ok(text) => excerpt(text),
            Err(problem) => format!("(the answer could not be read: {problem})"),
        };
        lines.ok("callback reachable", format!("{url} answered HTTP {status}"));
        if self.endpoint.https {
            lines.ok("callback tls", "the endpoint's certificate is trusted");
        } else {
            lines.skip(&["callback tls"], "http:// to a loopback address: no TLS", None);
        }
        let explicit_player = args.player.is_some();
        let player = args.player.as_deref().unwrap_or(DEFAULT_PLAYER);
        match status {
            403 => {
                lines.fail(
                    "callback source",
                    format!("the endpoint refused this host's address (HTTP 403): {said}"),
                    "add this host's address to the endpoint's sources (one address, never a range), or run `slotpartner check` and `recover` on the endpoint's host against a loopback listener that allows 127.0.0.1 (docs/lost-events.md)",
                );
                lines.skip(&["callback token", "callback reply"], "the source was refused first", None);
            }
            401 => {
                lines.ok("callback source", "this host's address was let through");
                lines.fail(
                    "callback token",
                    format!("the endpoint refused the token (HTTP 401): {said}"),
                    "the endpoint's token differs from --token / SLOTPARTNER_TOKEN: give both the partner token the service operator issued",
                );
                lines.skip(&["callback reply"], "the token was refused", None);
            }
            300..=399 => {
                let to =
                    answer.location.as_deref().map(|l| format!(" to {}", quoted(&shown_url(l)))).unwrap_or_default();
                lines.skip(
                    &["callback source", "callback token"],
                    &format!("not confirmed: the endpoint redirects (HTTP {status}) instead of answering"),
                    None,
                );
                lines.fail(
                    "callback reply",
                    format!("HTTP {status}: the endpoint redirects{to}; the service does not follow redirects"),
                    "the endpoint redirects: give --callback-url the final URL (the one that answers the balance query itself), and register that URL with the service",
                );
            }
            _ => {
                let reply = match &answer.text {
                    Ok(text) => judge_reply(&args.balance_wrapper, status, text),
                    Err(problem) => Reply::Bad(format!("the answer could not be read ({problem})")),
                };
                let shaped = matches!(reply, Reply::Balance(_) | Reply::Refused(_));
                if !(200..300).contains(&status) && !shaped {
                    // Not an answer to the balance query (a 404 of the web server, a 503 of a
                    // failing endpoint): it shows nothing of the source or token checks.
                    let why = format!("not confirmed: the endpoint answered HTTP {status}, not a balance reply");
                    lines.skip(&["callback source", "callback token"], &why, None);
                    lines.fail("callback reply", format!("HTTP {status}: {said}"), unanswered_fix(status));
                    Self::timing(args, lines, &timed);
                    return;
                }
                lines.ok("callback source", format!("this host's address was let through (HTTP {status}, not 403)"));
                if (200..300).contains(&status) {
                    lines.ok("callback token", format!("the endpoint accepted the token (HTTP {status})"));
                } else {
                    lines.warn(
                        "callback token",
                        format!("not confirmed: the endpoint answered HTTP {status}; only a 2xx answer confirms the token"),
                        "make the endpoint answer a balance query HTTP 200, and check that its partner token is --token / SLOTPARTNER_TOKEN (a refusal of the token is HTTP 401)",
                    );
                }
                match reply {
                    Reply::Balance(detail) => lines.ok("callback reply", detail),
                    Reply::Refused(message) if explicit_player => lines.fail(
                        "callback reply",
                        format!(
                            "HTTP {status}: the endpoint refused the balance query of player {}, which --player names as a player it knows: {}",
                            quoted(player),
                            quoted(&message)
                        ),
                        "give --player (and --service-player) a test player your endpoint knows, and check that the endpoint's token is --token / SLOTPARTNER_TOKEN (a refusal can hide a wrong token)",
                    ),
                    Reply::Refused(message) => lines.warn(
                        "callback reply",
                        format!(
                            "HTTP {status}: the endpoint refused the balance query of player {}: {} (a refusal in the expected shape)",
                            quoted(player),
                            quoted(&message)
                        ),
                        "give --player (and --service-player) with a test player your endpoint knows, to check a full balance reply",
                    ),
                    Reply::Bad(problem) => lines.fail(
                        "callback reply",
                        match &answer.text {
                            Ok(text) => format!("HTTP {status}: {problem}: {}", excerpt(text)),
                            Err(_) => format!("answered HTTP {status}, {problem}"),
                        },
                        format!(
                            "answer a balance query HTTP 200 with {{\"{}\":{{\"money\":N,\"currencyISO4217\":\"EUR\",\"coins\":N,\"errorMessage\":\"\"}}}} (the library's balance reply builds it; --balance-wrapper names another wrapper)",
                            args.balance_wrapper
                        ),
                    ),
                }
            }
        }
        Self::timing(args, lines, &timed);
    }

    /// The answer's time and its Date header against this host's clock.
    fn timing(args: &CheckArgs, lines: &mut Lines, timed: &Timed) {
        let answer = &timed.answer;
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

/// The fix for an answer to the balance query that is no balance reply, by its status.
fn unanswered_fix(status: u16) -> &'static str {
    match status {
        404 => {
            "nothing answers the balance query at this URL: correct --callback-url's path, or the web server's route to the endpoint (for PHP-FPM behind nginx, SCRIPT_FILENAME must name the script: docs/deployment.md)"
        }
        405 => "the endpoint refused the method: the service POSTs every callback; let POST through to the endpoint",
        413 | 400 => {
            "the endpoint refused the request itself: check its body size limit (at least 64 KiB) and that nothing in front of it rewrites the body"
        }
        500 => {
            "the endpoint failed before answering (HTTP 500): its log says why (a configuration error of the endpoint, such as its token or sources setting, is logged there and never shown to a caller)"
        }
        502 | 504 => {
            "the web server in front got no answer from the endpoint's workers: check that they run (PHP-FPM pool, gunicorn) and its error log"
        }
        503 => {
            "the endpoint said it is temporarily unavailable (HTTP 503): its log says why; a balance query needs no journal, so an endpoint that opens the journal before it knows the event answers balance queries 503 while the journal is down: serve it with the library's endpoint, which reads the event first (README, \"The endpoint in each language\")"
        }
        _ => {
            "the endpoint's answer is no balance reply: its log says why; a balance query is answered HTTP 200 with the balance (or 500 with a refusal in the same shape)"
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
    let value = match serde_json::from_str::<Strict>(text) {
        Ok(Strict(value)) => value,
        Err(e) if e.is_data() => return Reply::Bad(format!("the answer is not strict JSON: {e}")),
        Err(_) => return Reply::Bad("the answer is not JSON".to_owned()),
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

/// A JSON value read strictly: an object that names a key twice is refused, at every level
/// (serde_json's own `Value` keeps the last, so that `{"w":{bad},"w":{good}}` would pass).
struct Strict(serde_json::Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Strict, D::Error> {
        use serde::de::{Error, MapAccess, SeqAccess, Visitor};
        use serde_json::Value;
        struct Strictly;
        impl<'de> Visitor<'de> for Strictly {
            type Value = Strict;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E: Error>(self, v: bool) -> Result<Strict, E> {
                Ok(Strict(Value::Bool(v)))
            }
            fn visit_i64<E: Error>(self, v: i64) -> Result<Strict, E> {
                Ok(Strict(Value::from(v)))
            }
            fn visit_u64<E: Error>(self, v: u64) -> Result<Strict, E> {
                Ok(Strict(Value::from(v)))
            }
            fn visit_f64<E: Error>(self, v: f64) -> Result<Strict, E> {
                Ok(Strict(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)))
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<Strict, E> {
                Ok(Strict(Value::String(v.to_owned())))
            }
            fn visit_string<E: Error>(self, v: String) -> Result<Strict, E> {
                Ok(Strict(Value::String(v)))
            }
            fn visit_unit<E: Error>(self) -> Result<Strict, E> {
                Ok(Strict(Value::Null))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
                let mut items = Vec::new();
                while let Some(Strict(item)) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Strict(Value::Array(items)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
                let mut object = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    if object.contains_key(&key) {
                        return Err(A::Error::custom(format!("the key {} appears twice", quoted(&key))));
                    }
                    let Strict(value) = map.next_value()?;
                    object.insert(key, value);
                }
                Ok(Strict(Value::Object(object)))
            }
        }
        deserializer.deserialize_any(Strictly)
    }
}

/// The journal's checks. The journal is opened only when one of this release's schema version
/// is there (`Journal::open_existing`): nothing is created or migrated, on either backend.
fn check_journal(args: &CheckArgs, url: &str, lines: &mut Lines) {
    let checks = &JOURNAL_CHECKS[1..];
    let options = JournalOptions {
        max_index_jump: args.journal.max_index_jump,
        not_found_limit: args.journal.not_found_limit,
        ..JournalOptions::default()
    };
    let journal = match Journal::open_existing(url, &options) {
        Ok(ExistingJournal::Current(journal)) => journal,
        Ok(ExistingJournal::Absent { reason }) => {
            lines.fail(
                "journal reachable",
                format!("not a journal (no sp_journal_meta): {reason}; nothing was created"),
                "check --journal / SLOTPARTNER_JOURNAL: it must name the journal your endpoints write (they create it on their first delivery)",
            );
            lines.skip(checks, "no journal there", None);
            return;
        }
        Ok(ExistingJournal::Older { version }) => {
            lines.ok("journal reachable", "a journal is there");
            lines.fail(
                "journal schema",
                format!("version {version}, older than this release's {CURRENT_SCHEMA}: this release of check cannot judge a version-{version} journal without migrating it, which would lock out endpoints of the older release; left as it is"),
                "run the check of the release the endpoints run, or upgrade them first (their first delivery migrates the journal)",
            );
            lines.skip(&checks[1..], "the journal was not opened (see its schema)", None);
            return;
        }
        Err(error) if error.kind == ErrorKind::Journal && error.message.contains("newer than this release") => {
            lines.ok("journal reachable", "a journal is there");
            lines.fail(
                "journal schema",
                error.message,
                "upgrade slotpartner (this command and every endpoint) to the release that wrote the journal",
            );
            lines.skip(&checks[1..], "the journal was not opened (see its schema)", None);
            return;
        }
        Err(error) => {
            lines.fail(
                "journal reachable",
                crate::endpoint::library_error_text(&error),
                "correct --journal / SLOTPARTNER_JOURNAL, or start the database and check the user's rights (the file's owner and mode)",
            );
            lines.skip(checks, "the journal could not be opened", None);
            return;
        }
    };
    lines.ok("journal reachable", "the journal opened");
    lines.ok("journal schema", format!("version {CURRENT_SCHEMA} (current)"));
    probe_writable(&journal, lines);
    let postgres = !url.starts_with("sqlite:");
    match journal.status() {
        Ok(status) => judge_status(&journal, &status, args, lines),
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

/// Where the journal's numbering ends, where a lost event leaves no gap: below, whether the
/// first index is configured or only the lowest seen (then `recover` asks below it); above,
/// when `recover` last found the service had nothing after the highest. Said, never failed.
fn judge_ends(status: &slotpartner::journal::Status, lines: &mut Lines) {
    let tail = match status.tail_checked {
        Some((index, ms)) => format!(
            "the service had no event at {index} when recover last asked ({})",
            slotpartner::journal::rfc3339_ms(ms)
        ),
        None => "recover has not asked the service after the highest index yet".to_owned(),
    };
    match (status.first_index, status.first_index_stored) {
        (Some(first), false) => lines.ok(
            "journal ends",
            format!("the first index is the lowest seen ({first}), not configured: events lost before it are found by recover, which asks the service below it each run; {tail}"),
        ),
        (Some(first), true) => lines.ok("journal ends", format!("the first index {first} is configured; {tail}")),
        (None, _) => lines.ok("journal ends", format!("no index seen yet; {tail}")),
    }
}

/// Gaps, unfinished deliveries, open conflicts and index jumps.
fn judge_status(journal: &Journal, status: &slotpartner::journal::Status, args: &CheckArgs, lines: &mut Lines) {
    let min_age = args.min_age;
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
        // A gap found missing "in the future" (beyond --clock-tolerance on the journal's own clock)
        // was dated by a clock that ran ahead: its age is unknown, and it must pass neither as
        // young nor as "missing for at least --min-age". The oldest gap's time is the earliest:
        // when it lies ahead, all do.
        let tolerance_ms = i64::try_from(args.clock_tolerance.as_millis()).unwrap_or(i64::MAX);
        let journal_now = journal.clock_ms().unwrap_or_else(|_| now_ms());
        let ahead = status.oldest_gap_ms.map(|found| found - journal_now).filter(|&ahead| ahead > tolerance_ms);
        match old {
            Ok(_) if ahead.is_some() => lines.fail(
                "journal gaps",
                format!(
                    "{} indexes missing, found missing in the future: a clock was ahead (the oldest {} ahead of the journal's clock){unrecoverable}; their age is unknown",
                    status.missing,
                    elapsed_text(Duration::from_millis(u64::try_from(ahead.unwrap_or(0)).unwrap_or(0)))
                ),
                "`slotpartner journal gaps` lists them; `slotpartner recover --min-age 0s --callback-url URL` fetches them whatever their age; synchronise the hosts' clocks (NTP)",
            ),
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
    judge_ends(status, lines);
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
                match error.cause.as_deref() {
                    // Only an answer of 200 confirms the token; a redirect or a server error does not.
                    Some(Cause::HttpStatus(status)) => lines.warn(
                        "service token",
                        format!("not confirmed: the service answered HTTP {status}"),
                        "run `slotpartner check` again once the service answers getGames (see service games)",
                    ),
                    _ => lines.ok("service token", "the service answered HTTP 200: the token was accepted"),
                }
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
        // Far ahead: in days and hours, not a count of seconds.
        let far = clock_difference(2_144_196_835_495 + 10_400, 1000, 10_200, 10_400, tolerance).unwrap();
        assert_eq!(far, "24817d 2h ahead of this host's clock");
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
        // A key named twice, at either level: refused, whichever comes last.
        for twice in [
            r#"{"playerBalance":{"money":-5,"currencyISO4217":"EUR","coins":0,"errorMessage":"blocked"},"playerBalance":{"money":12050,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#,
            r#"{"playerBalance":{"money":-5,"money":12050,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#,
        ] {
            assert!(
                matches!(judge_reply("playerBalance", 200, twice), Reply::Bad(m) if m.contains("appears twice")),
                "{twice}"
            );
        }
    }
}
