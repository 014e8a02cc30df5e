//! `recover --callback-url URL`: every missing index fetched from the service and delivered to
//! the partner's own callback endpoint, as the service would have delivered it. The endpoint's
//! journal and logic handle it (a repeat is answered from the journal); this command claims and
//! writes nothing, it only reads the journal: the missing indexes before, whether a late
//! delivery handled an event meanwhile, and the gaps that remain after.

use std::io::IsTerminal;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use slotpartner::client::Client;
use slotpartner::journal::RecordState;
use slotpartner::{ErrorKind, EventKind, Journal, Receiver};
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig, TlsProvider};

use crate::args::RecoverArgs;
use crate::config::{client, open_journal, parser, seconds};
use crate::journal::range_text;
use crate::output::{print_json, quoted};
use crate::{Fail, Outcome, Verdict};

/// Connection failures in a row (to the service or the endpoint) after which the run stops:
/// they do not get better index by index.
const MAX_CONNECT_FAILURES_IN_A_ROW: u32 = 3;
/// The most bytes of the endpoint's answer read.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;
/// Missing ranges read at the end, to name the gaps that remain.
const REMAINING_RANGES: usize = 1000;

pub fn run(args: &RecoverArgs) -> Outcome {
    let endpoint = Endpoint::new(args)?;
    let fetch = (args.fetch_action.as_deref(), args.fetch_index_param.as_deref(), args.fetch_event_key.as_deref());
    let client = client(&args.service, |config| {
        if let Some(action) = fetch.0 {
            config.set_fetch_action(action)?;
        }
        if let Some(param) = fetch.1 {
            config.set_fetch_index_param(param)?;
        }
        if let Some(key) = fetch.2 {
            config.set_fetch_event_key(key)?;
        }
        Ok(())
    })?;
    let parser = parser(&args.index_field, args.strict_index)?;
    let journal = open_journal(&args.journal)?;
    let missing_before = journal.status()?.missing;
    let pending = missing_indexes(&journal, usize::try_from(args.limit).unwrap_or(usize::MAX))?;

    if args.dry_run {
        return dry_run(args, missing_before, &pending);
    }
    let mut run = Run {
        journal: &journal,
        client: &client,
        parser: &parser,
        endpoint: &endpoint,
        service_unreachable: 0,
        endpoint_unreachable: 0,
    };
    let mut report = Report { missing_before, taken: pending.len() as u64, ..Report::default() };
    let progress = Progress::new(pending.len() as u64, args.json);
    for (position, &index) in pending.iter().enumerate() {
        let result = run.recover(index);
        report.count(&result);
        progress.show(&result, &report);
        report.results.push(result);
        let left = pending.len() - position - 1;
        let unreachable =
            [("the service", run.service_unreachable), ("the callback endpoint", run.endpoint_unreachable)]
                .into_iter()
                .find(|(_, failures)| *failures >= MAX_CONNECT_FAILURES_IN_A_ROW);
        if let (Some((what, failures)), true) = (unreachable, left > 0) {
            report.not_tried = left as u64;
            report.stopped =
                Some(format!("{what} could not be reached {failures} times in a row; {left} indexes not tried"));
            break;
        }
    }
    progress.finish();

    // The answer: the journal read again, now that the endpoint handled what it got.
    let remaining = journal.missing(REMAINING_RANGES)?;
    report.gaps_remaining = if remaining.is_empty() { 0 } else { journal.status()?.missing };
    report.remaining_ranges = remaining.iter().map(|&(first, last)| Range { first, last }).collect();
    let delivered_but_missing = report
        .results
        .iter()
        .filter(|r| matches!(r.result, "recovered" | "handled_meanwhile" | "refused"))
        .find(|r| remaining.iter().any(|&(first, last)| (first..=last).contains(&r.index)));
    if let Some(r) = delivered_but_missing {
        // The URL of the journal is not repeated: it may hold a password.
        eprintln!(
            "slotpartner: warning: index {} was delivered to {} but is still missing from the journal: does that endpoint use the journal given here?",
            r.index, endpoint.url
        );
    }
    if args.json {
        report.callback_url = endpoint.url.clone();
        print_json(&report)?;
    } else {
        report.print_summary();
    }
    Ok(Verdict::bad_if(report.gaps_remaining > 0))
}

/// The missing indexes and those of deliveries claimed but never finished (abandoned by the
/// endpoint, or its worker died: their index counts as seen, yet nothing was stored), in order,
/// at most `limit`.
fn missing_indexes(journal: &Journal, limit: usize) -> Result<Vec<i64>, Fail> {
    let mut pending = journal.unfinished(limit)?;
    for (first, last) in journal.missing(limit)? {
        pending.extend((first..=last).take(limit.saturating_sub(pending.len())));
        if pending.len() >= limit {
            break;
        }
    }
    pending.sort_unstable();
    pending.dedup();
    pending.truncate(limit);
    Ok(pending)
}

fn dry_run(args: &RecoverArgs, missing_before: u64, pending: &[i64]) -> Outcome {
    if args.json {
        #[derive(Serialize)]
        struct DryRun<'a> {
            dry_run: bool,
            missing_before: u64,
            would_fetch: &'a [i64],
        }
        print_json(&DryRun { dry_run: true, missing_before, would_fetch: pending })?;
    } else {
        for index in pending {
            println!("index={index} result=would_fetch");
        }
        println!("summary dry_run=true missing_before={missing_before} would_fetch={}", pending.len());
    }
    Ok(Verdict::bad_if(missing_before > 0))
}

/// The partner's own callback endpoint and the agent that posts to it.
struct Endpoint {
    url: String,
    token: String,
    agent: ureq::Agent,
}

impl Endpoint {
    fn new(args: &RecoverArgs) -> Result<Endpoint, Fail> {
        let url = args
            .callback_url
            .as_deref()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| Fail("no callback endpoint: give --callback-url URL".to_owned()))?;
        check_callback_url(url)?;
        let token = crate::config::token(&args.service)?.to_owned();
        let mut roots: Vec<Certificate<'static>> = webpki_root_certs::TLS_SERVER_ROOT_CERTS
            .iter()
            .map(|c| Certificate::from_der(c.as_ref()).to_owned())
            .collect();
        if let Some(path) = &args.callback_ca_file {
            let shown = path.display();
            let pem = std::fs::read(path).map_err(|e| Fail(format!("callback_ca_file: cannot read {shown}: {e}")))?;
            let before = roots.len();
            for item in ureq::tls::parse_pem(&pem) {
                match item {
                    Ok(PemItem::Certificate(cert)) => roots.push(cert.to_owned()),
                    Ok(_) => {}
                    Err(e) => return Err(Fail(format!("callback_ca_file: {shown} is not valid PEM ({e})"))),
                }
            }
            if roots.len() == before {
                return Err(Fail(format!("callback_ca_file: {shown} holds no certificate")));
            }
        }
        let tls =
            TlsConfig::builder().provider(TlsProvider::Rustls).root_certs(RootCerts::Specific(Arc::new(roots))).build();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .user_agent(concat!("slotpartner-recover/", env!("CARGO_PKG_VERSION")))
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_global(Some(seconds("timeout", args.service.timeout)?))
            .tls_config(tls)
            .build()
            .into();
        Ok(Endpoint { url: url.to_owned(), token, agent })
    }

    /// POSTs `body` as the service would; the HTTP status and the answer's text.
    fn deliver(&self, body: &str) -> Result<(u16, String), ureq::Error> {
        let mut response = self
            .agent
            .post(&self.url)
            .header("X-Service-Token", &self.token)
            .header("Content-Type", "application/json; charset=utf-8")
            .send(body)?;
        let status = response.status().as_u16();
        let text = response.body_mut().with_config().limit(MAX_ANSWER_BYTES).read_to_string()?;
        Ok((status, text))
    }
}

/// `https://` anywhere, `http://` only to a loopback host: the token must not travel in clear.
fn check_callback_url(url: &str) -> Result<(), Fail> {
    let bad = |problem: String| Err(Fail(format!("callback_url: {problem}")));
    let uri: ureq::http::Uri = match url.parse() {
        Ok(uri) => uri,
        Err(e) => return bad(format!("{} is not a URL ({e})", quoted(url))),
    };
    let Some(host) = uri.host() else { return bad(format!("{} names no host", quoted(url))) };
    match uri.scheme_str() {
        Some("https") => Ok(()),
        Some("http") => {
            let ip = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>();
            if host.eq_ignore_ascii_case("localhost") || ip.is_ok_and(|ip| ip.to_canonical().is_loopback()) {
                Ok(())
            } else {
                bad(format!("http:// only to a loopback host (the token would travel in clear), got {}", quoted(url)))
            }
        }
        _ => bad(format!("expected https:// (or http:// to a loopback host), got {}", quoted(url))),
    }
}

/// One run's parts.
struct Run<'a> {
    journal: &'a Journal,
    client: &'a Client,
    parser: &'a Receiver,
    endpoint: &'a Endpoint,
    /// Connection failures in a row, to the service and to the endpoint.
    service_unreachable: u32,
    endpoint_unreachable: u32,
}

impl Run<'_> {
    fn recover(&mut self, index: i64) -> ItemResult {
        let mut item = ItemResult::new(index);
        let body = match self.client.fetch_event(index) {
            Ok(Some(body)) => {
                self.service_unreachable = 0;
                body
            }
            Ok(None) => {
                self.service_unreachable = 0;
                let message = format!("the service knows no event with index {index} (HTTP 404)");
                return item.not_fetched("not_found", message);
            }
            Err(error) => {
                let unreachable = matches!(error.kind, ErrorKind::Connect | ErrorKind::Tls);
                self.service_unreachable = if unreachable { self.service_unreachable + 1 } else { 0 };
                let reason = if error.kind == ErrorKind::BadResponse { "invalid_event" } else { "service" };
                return item.not_fetched(reason, error.message);
            }
        };
        let event = match self.parser.parse(body.as_bytes()) {
            Ok(event) => event,
            Err(error) => return item.not_fetched("invalid_event", error.message),
        };
        let transaction_id = match &event.kind {
            EventKind::BuyRefund(r) => Some(r.transaction_id),
            EventKind::JackpotPayout(p) => Some(p.transaction_id),
            _ => None,
        };
        item.event = Some(event.name.to_string());
        item.transaction_id = transaction_id;
        if event.index != Some(index) {
            let got = event.index.map_or("none".to_owned(), |i| i.to_string());
            let message = format!("the fetched event carries index {got}, not the {index} asked for");
            return item.not_fetched("invalid_event", message);
        }
        // A late delivery may have handled it since the journal was read: the endpoint will
        // answer from its journal; say so.
        let handled_before = transaction_id.is_some_and(|id| {
            self.journal.lookup(id).is_ok_and(|records| {
                records.iter().any(|r| r.state == RecordState::Done && r.name.as_deref() == Some(&*event.name))
            })
        });
        let wrapper =
            event.known().filter(|k| *k != slotpartner::KnownEvent::BalanceQuery).map(|k| self.parser.wrapper(k));
        let (status, answer) = match self.endpoint.deliver(&body) {
            Ok(answered) => {
                self.endpoint_unreachable = 0;
                answered
            }
            Err(error) => {
                let unreachable = !matches!(error, ureq::Error::Timeout(_));
                self.endpoint_unreachable = if unreachable { self.endpoint_unreachable + 1 } else { 0 };
                return item.endpoint_failed(None, format!("no answer from the callback endpoint: {error}"));
            }
        };
        item.http_status = Some(status);
        if status != 200 {
            return item.endpoint_failed(Some(status), format!("HTTP {status}: {}", excerpt(&answer)));
        }
        let Some(wrapper) = wrapper else {
            item.result = "recovered";
            return item;
        };
        let reply: Option<serde_json::Value> = serde_json::from_str(&answer).ok();
        let inner = reply.as_ref().and_then(|v| v.get(wrapper));
        match inner.and_then(|w| w.get("success")).and_then(serde_json::Value::as_bool) {
            Some(true) => item.result = if handled_before { "handled_meanwhile" } else { "recovered" },
            Some(false) => {
                let said = inner.and_then(|w| w.get("errorMessage")).and_then(serde_json::Value::as_str).unwrap_or("");
                item.result = "refused";
                item.message = Some(format!("the endpoint answered success:false: {}", quoted(said)));
            }
            None => {
                let message = format!("the answer is not a {wrapper} reply with success: {}", excerpt(&answer));
                return item.endpoint_failed(Some(status), message);
            }
        }
        item
    }
}

/// The start of a text, on one line.
fn excerpt(text: &str) -> String {
    let line = crate::one_line(text);
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

/// What happened to one index.
#[derive(Debug, Serialize)]
struct ItemResult {
    index: i64,
    /// `recovered`, `handled_meanwhile`, `refused`, `not_fetched` or `endpoint_failed`.
    result: &'static str,
    /// For `not_fetched`: `not_found`, `service` or `invalid_event`.
    reason: Option<&'static str>,
    event: Option<String>,
    transaction_id: Option<i64>,
    /// The callback endpoint's HTTP status.
    http_status: Option<u16>,
    message: Option<String>,
}

impl ItemResult {
    fn new(index: i64) -> ItemResult {
        ItemResult {
            index,
            result: "",
            reason: None,
            event: None,
            transaction_id: None,
            http_status: None,
            message: None,
        }
    }

    fn not_fetched(mut self, reason: &'static str, message: String) -> ItemResult {
        self.result = "not_fetched";
        self.reason = Some(reason);
        self.message = Some(message);
        self
    }

    fn endpoint_failed(mut self, status: Option<u16>, message: String) -> ItemResult {
        self.result = "endpoint_failed";
        self.http_status = status;
        self.message = Some(message);
        self
    }

    fn is_success(&self) -> bool {
        matches!(self.result, "recovered" | "handled_meanwhile")
    }

    fn line(&self) -> String {
        let mut line = format!("index={} result={}", self.index, self.result);
        if let Some(reason) = self.reason {
            line.push_str(&format!(" reason={reason}"));
        }
        if let Some(event) = &self.event {
            line.push_str(&format!(" event={event}"));
        }
        if let Some(id) = self.transaction_id {
            line.push_str(&format!(" transactionId={id}"));
        }
        if let Some(status) = self.http_status {
            line.push_str(&format!(" http={status}"));
        }
        if let Some(message) = &self.message {
            line.push_str(&format!(" message={}", quoted(message)));
        }
        line
    }
}

#[derive(Debug, Default, Serialize)]
struct NotFetched {
    not_found: u64,
    service: u64,
    invalid_event: u64,
}

#[derive(Debug, Serialize)]
struct Range {
    first: i64,
    last: i64,
}

/// What a run did.
#[derive(Debug, Default, Serialize)]
struct Report {
    callback_url: String,
    /// Indexes missing from the journal when the run began.
    missing_before: u64,
    /// Indexes this run took on (at most `--limit`).
    taken: u64,
    /// Fetched, delivered, and answered with success.
    recovered: u64,
    /// A late delivery handled it meanwhile: the endpoint answered from its journal.
    handled_meanwhile: u64,
    /// Delivered; the endpoint answered `success:false` (its index is seen now).
    refused: u64,
    /// Not fetched, by reason.
    not_fetched: NotFetched,
    /// Fetched, but the endpoint failed (no answer, not HTTP 200, not a reply).
    endpoint_failures: u64,
    /// Left when the run stopped early.
    not_tried: u64,
    stopped: Option<String>,
    /// Indexes missing from the journal after the run.
    gaps_remaining: u64,
    /// The first of them, as ranges.
    remaining_ranges: Vec<Range>,
    results: Vec<ItemResult>,
}

impl Report {
    fn count(&mut self, item: &ItemResult) {
        match (item.result, item.reason) {
            ("recovered", _) => self.recovered += 1,
            ("handled_meanwhile", _) => self.handled_meanwhile += 1,
            ("refused", _) => self.refused += 1,
            ("not_fetched", Some("not_found")) => self.not_fetched.not_found += 1,
            ("not_fetched", Some("invalid_event")) => self.not_fetched.invalid_event += 1,
            ("not_fetched", _) => self.not_fetched.service += 1,
            _ => self.endpoint_failures += 1,
        }
    }

    fn not_fetched_total(&self) -> u64 {
        self.not_fetched.not_found + self.not_fetched.service + self.not_fetched.invalid_event
    }

    fn print_summary(&self) {
        println!(
            "summary missing_before={} taken={} recovered={} handled_meanwhile={} refused={} not_fetched={} endpoint_failures={} not_tried={}",
            self.missing_before,
            self.taken,
            self.recovered,
            self.handled_meanwhile,
            self.refused,
            self.not_fetched_total(),
            self.endpoint_failures,
            self.not_tried
        );
        println!(
            "summary not_found={} service={} invalid_event={}",
            self.not_fetched.not_found, self.not_fetched.service, self.not_fetched.invalid_event
        );
        if let Some(stopped) = &self.stopped {
            println!("summary stopped={}", quoted(stopped));
        }
        let ranges: Vec<String> = self.remaining_ranges.iter().take(20).map(|r| range_text(r.first, r.last)).collect();
        let more = if self.remaining_ranges.len() > 20 { ",..." } else { "" };
        let remaining = if ranges.is_empty() { "-".to_owned() } else { format!("{}{more}", ranges.join(",")) };
        let result = if self.gaps_remaining == 0 { "ok" } else { "gaps_remain" };
        println!("summary gaps_remaining={} remaining={remaining} result={result}", self.gaps_remaining);
    }
}

/// A progress bar on a terminal (stderr), one line per index on stdout otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    /// Lines for every index (stdout is not a terminal: a log), or only for failures.
    every_line: bool,
    quiet: bool,
}

impl Progress {
    fn new(total: u64, json: bool) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            let style = ProgressStyle::with_template(
                "{spinner} recovering [{elapsed_precise}] [{wide_bar}] {pos}/{len} (eta {eta}) {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        let every_line = !std::io::stdout().is_terminal() || bar.is_none();
        Progress { bar, every_line, quiet: json }
    }

    fn show(&self, item: &ItemResult, report: &Report) {
        if !self.quiet && (self.every_line || !item.is_success()) {
            let line = item.line();
            match &self.bar {
                Some(bar) => bar.suspend(|| println!("{line}")),
                None => println!("{line}"),
            }
        }
        if let Some(bar) = &self.bar {
            let failed = report.not_fetched_total() + report.endpoint_failures + report.refused;
            bar.set_message(format!("recovered {}, failed {failed}", report.recovered + report.handled_meanwhile));
            bar.inc(1);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_callback_url;

    #[test]
    fn callback_urls() {
        for good in [
            "https://partner.example/callback",
            "http://127.0.0.1:8080/cb",
            "http://localhost/cb",
            "http://[::1]:9/cb",
            "http://127.5.6.7/cb",
        ] {
            assert!(check_callback_url(good).is_ok(), "{good}");
        }
        for bad in ["http://partner.example/cb", "http://10.0.0.1/cb", "ftp://127.0.0.1/", "not a url", "/callback"] {
            let error = check_callback_url(bad).unwrap_err();
            assert!(error.0.starts_with("callback_url: "), "{bad}: {}", error.0);
        }
    }
}
