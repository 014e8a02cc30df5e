//! `recover --callback-url URL`: every unfinished delivery and missing index, as the journal's
//! recovery plan orders them, fetched from the service and delivered to the partner's own
//! callback endpoint, as the service would have delivered it. The endpoint's journal and logic
//! handle it (a repeat is answered from the journal); this command claims no delivery. It reads
//! the journal (the plan, whether a late delivery handled an event meanwhile, what holds an
//! index, what needs attention after the run) and writes only its bookkeeping: what each fetch
//! got (`note_fetch`, which orders the next runs and makes an index answered 404 too often
//! unrecoverable) and the lock that keeps two runs from overlapping. Gaps and unfinished
//! deliveries younger than `--min-age` are left for the next run, and are no bad news.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use slotpartner::client::{Client, TlsProblem};
use slotpartner::error::Cause;
use slotpartner::journal::{FetchOutcome, RecordState, RecoveryLock, Status};
use slotpartner::{ErrorKind, EventKind, Journal, Receiver};

use crate::args::RecoverArgs;
use crate::config::{client, open_journal, parser, seconds};
use crate::endpoint::{Endpoint, Peer, excerpt, library_error_text, shown_url};
use crate::journal::{indexes_text, range_text};
use crate::output::{age_text, print_json, quoted};
use crate::{Fail, Outcome, Verdict};

/// Connection failures or time-outs in a row (to the service or the endpoint) after which the
/// run stops: they do not get better index by index.
const MAX_CONNECT_FAILURES_IN_A_ROW: u32 = 3;
/// Missing ranges (and unrecoverable indexes) read at the end, to name what remains.
const REMAINING_RANGES: usize = 1000;
/// The lock's lease beyond `--max-time`, besides the bound of one index's calls
/// (`lock_margin`): time for the journal's own calls of an index (each round trip bounded by the
/// journal's `command_timeout`, 15 s by default) and the final reading.
const LOCK_MARGIN: Duration = Duration::from_secs(60);
/// Lines printed of each kind of failure (`not_found`, `service`, `endpoint_failed`, ...); the
/// rest are counted, and one line at the end says how many more of that kind there were.
/// `--json` keeps every index.
const LINES_PER_FAILURE_KIND: u64 = 5;

pub fn run(args: &RecoverArgs) -> Outcome {
    let endpoint = endpoint(args)?;
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
    let parser = parser(&args.index.index_field, args.index.strict_index)?;
    let journal = Arc::new(open_journal(&args.journal)?);
    let limit = usize::try_from(args.limit).unwrap_or(usize::MAX);

    if args.dry_run {
        let status = journal.status()?;
        let pending = journal.recovery_plan_older_than(limit, args.min_age)?;
        let unrecoverable = journal.unrecoverable(REMAINING_RANGES)?;
        let attention = Attention::of(&journal, &status, args.min_age)?;
        return dry_run(args, &status, &pending, &unrecoverable, &attention);
    }
    let started = Instant::now();
    let deadline = started + args.max_time;
    let margin = lock_margin(args.service.timeout, args.service.retries);
    let lock = match RecoveryLock::take(Arc::clone(&journal), "slotpartner recover", args.max_time + margin) {
        Ok(lock) => lock,
        Err(error) if error.kind == ErrorKind::Busy => return Err(Fail(error.message)),
        Err(error) => return Err(error.into()),
    };
    let before = journal.status()?;
    // Every unfinished delivery, however young, whatever its index: the plan takes only the old
    // ones, and not necessarily the lowest, so each index it took is told by this set.
    let unfinished: HashSet<i64> = journal.unfinished(usize::MAX)?.into_iter().collect();
    let pending: Vec<(i64, bool)> = journal
        .recovery_plan_older_than(limit, args.min_age)?
        .into_iter()
        .map(|index| (index, unfinished.contains(&index)))
        .collect();

    let mut run = Run {
        journal: &journal,
        client: &client,
        parser: &parser,
        endpoint: &endpoint,
        service_unreachable: 0,
        endpoint_unreachable: 0,
        endpoint_accepted: false,
        refused: None,
    };
    let taken_unfinished = pending.iter().filter(|(_, unfinished)| *unfinished).count() as u64;
    let taken_missing = pending.len() as u64 - taken_unfinished;
    let mut report = Report {
        missing_before: before.missing,
        unfinished_before: before.unfinished,
        taken: pending.len() as u64,
        taken_unfinished,
        taken_missing,
        missing_not_taken: before.missing.saturating_sub(taken_missing),
        max_time: duration_text(args.max_time),
        min_age: age_text(args.min_age),
        ..Report::default()
    };
    let mut progress = Progress::new(pending.len() as u64, args.json);
    let mut note_failure = None;
    for (position, &(index, unfinished)) in pending.iter().enumerate() {
        if Instant::now() >= deadline {
            let left = pending.len() - position;
            report.not_tried = left as u64;
            report.stopped = Some(format!("the run reached --max-time {}; {left} indexes not tried", report.max_time));
            break;
        }
        let result = run.recover(index, unfinished);
        // A refused token says nothing about the index: nothing is noted for it.
        if run.refused.is_none() {
            if let Err(error) = journal.note_fetch(index, result.fetch_outcome()) {
                note_failure.get_or_insert((index, error.message));
            }
        }
        report.count(&result);
        report.results.push(result);
        progress.show(&report);
        let left = pending.len() - position - 1;
        if let Some(refused) = run.refused {
            report.not_tried = left as u64;
            report.stopped =
                Some(format!("{}; the run stopped at index {index}, {left} indexes not tried", refused.reason()));
            break;
        }
        let unreachable =
            [("the service", run.service_unreachable), ("the callback endpoint", run.endpoint_unreachable)]
                .into_iter()
                .find(|(_, failures)| *failures >= MAX_CONNECT_FAILURES_IN_A_ROW);
        if let (Some((what, failures)), true) = (unreachable, left > 0) {
            report.not_tried = left as u64;
            report.stopped = Some(format!(
                "{what} could not be reached or did not answer in time {failures} times in a row; {left} indexes not tried"
            ));
            break;
        }
        if left > 0 {
            if let Err(error) = lock.renew(deadline.saturating_duration_since(Instant::now()) + margin) {
                report.not_tried = left as u64;
                report.stopped = Some(format!(
                    "the journal's lock could not be renewed ({}); {left} indexes not tried",
                    error.message
                ));
                break;
            }
        }
    }
    if report.stopped.is_none() && args.probe > 0 {
        let ends = Ends { journal: &journal, before: &before, probe: args.probe, min_age: args.min_age, deadline };
        ends.probe(&mut run, &mut report, &mut progress)?;
    }
    progress.finish();
    if let Some((index, message)) = note_failure {
        eprintln!("slotpartner: warning: the journal did not note what the fetch of index {index} got: {message}");
    }

    // The answer: the journal read again, now that the endpoint handled what it got.
    let after = journal.status()?;
    let remaining = journal.missing(REMAINING_RANGES)?;
    report.gaps_remaining = after.missing;
    report.remaining_ranges = remaining.iter().map(|&(first, last)| Range { first, last }).collect();
    report.unfinished_remaining = after.unfinished;
    report.open_conflicts = after.open_conflicts;
    report.index_jumps = after.index_jumps;
    report.unrecoverable_count = after.unrecoverable;
    report.unrecoverable = journal.unrecoverable(REMAINING_RANGES)?;
    let attention = Attention::of(&journal, &after, args.min_age)?;
    report.gaps_too_young = attention.too_young;
    // An event found at an end and not delivered is lost as surely as a gap.
    report.needs_attention = attention.needed || report.probes.undelivered > 0;
    drop(lock);
    let delivered_but_missing = report
        .results
        .iter()
        .filter(|r| matches!(r.result, "recovered" | "handled_meanwhile" | "refused"))
        .find(|r| remaining.iter().any(|&(first, last)| (first..=last).contains(&r.index)));
    if let Some(r) = delivered_but_missing {
        // Neither URL is repeated whole: the journal's may hold a password, the endpoint's a
        // password or a secret in its query.
        eprintln!(
            "slotpartner: warning: index {} was delivered to {} but is still missing from the journal: does that endpoint use the journal given here?",
            r.index,
            shown_url(&endpoint.url)
        );
    }
    if args.json {
        report.callback_url = shown_url(&endpoint.url);
        print_json(&report)?;
    } else {
        report.print_summary();
    }
    match report.stopped.filter(|_| run.refused.is_some()) {
        Some(stopped) => Err(Fail(stopped)),
        None => Ok(Verdict::bad_if(report.needs_attention)),
    }
}

/// The ends of the journal's numbering, where a lost event leaves no gap: the events after
/// the highest index seen (lost, and no later one came to show the gap) and below the lowest
/// (lost before the journal saw its first, while no first index is stored). Each is asked of
/// the service, one index at a time away from the journal's known stretch, and delivered as
/// a missing one is, until the service has no event there (HTTP 404), at most `probe` at
/// each end. The tail is probed only once no new index came for `min_age`, so that events on
/// their way are not raced. A 404 after the highest is noted (`Status::tail_checked`); below the
/// lowest, nothing is stored: the head is asked again every run, since a 404 may be a proxy's.
struct Ends<'a> {
    journal: &'a Journal,
    before: &'a slotpartner::journal::Status,
    probe: u64,
    min_age: Duration,
    deadline: Instant,
}

impl Ends<'_> {
    fn probe(&self, run: &mut Run<'_>, report: &mut Report, progress: &mut Progress) -> Result<(), Fail> {
        let now = self.journal.clock_ms()?;
        let quiet_ms = i64::try_from(self.min_age.as_millis()).unwrap_or(i64::MAX);
        let quiet = self.before.last_delivery_ms.is_none_or(|last| now.saturating_sub(last) >= quiet_ms);
        if let (Some(highest), true) = (self.before.highest_index, quiet) {
            let indexes = (1..=self.probe).map_while(|step| highest.checked_add(i64::try_from(step).ok()?));
            if let Some(end) = self.walk("tail", indexes, run, report, progress) {
                self.journal.note_tail_checked(end)?;
                report.probes.tail_end = Some(end);
            }
        }
        if let (false, 1, Some(lowest)) =
            (self.before.first_index_stored, self.before.numbering, self.before.first_index)
        {
            // Asked again every run: a 404 here is not taken as the numbering's start for good
            // (a proxy in front of the service may have answered it).
            let indexes = (1..=self.probe)
                .map_while(|step| lowest.checked_sub(i64::try_from(step).ok()?))
                .take_while(|&i| i >= 0);
            self.walk("head", indexes, run, report, progress);
        }
        Ok(())
    }

    /// Fetches and delivers `indexes` in order until the service has none (answers that index),
    /// a fetch or delivery fails otherwise, or the run's time is up (`None` then).
    fn walk(
        &self,
        end: &'static str,
        indexes: impl Iterator<Item = i64>,
        run: &mut Run<'_>,
        report: &mut Report,
        progress: &mut Progress,
    ) -> Option<i64> {
        for index in indexes {
            if Instant::now() >= self.deadline || run.refused.is_some() {
                return None;
            }
            let mut item = run.recover(index, false);
            if item.result == "not_fetched" && item.reason == Some("not_found") {
                return Some(index);
            }
            item.probe = Some(end);
            let delivered = matches!(item.result, "recovered" | "handled_meanwhile" | "refused");
            match (end, delivered) {
                ("tail", true) => report.probes.tail_found += 1,
                ("head", true) => report.probes.head_found += 1,
                _ => report.probes.undelivered += 1,
            }
            report.count(&item);
            report.results.push(item);
            progress.show(report);
            if !delivered {
                return None;
            }
        }
        None
    }
}

/// What the probes of the numbering's ends found (see `Ends`).
#[derive(Debug, Default, Serialize)]
struct Probes {
    /// Events found after the highest index seen, and delivered.
    tail_found: u64,
    /// The index after the highest the service had no event for, when one was reached.
    tail_end: Option<i64>,
    /// Events found below the lowest index seen, and delivered.
    head_found: u64,
    /// Events found at an end that could not be delivered (the exit status is 1).
    undelivered: u64,
}

/// `300s`, `1.5s`, `250ms`.
fn duration_text(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else if duration.as_secs() == 0 {
        format!("{}ms", duration.as_millis())
    } else {
        format!("{}s", duration.as_secs_f64())
    }
}

/// Whether the journal needs attention, gaps younger than `--min-age` left out (they are left
/// for the next run, not bad news).
struct Attention {
    needed: bool,
    /// Missing indexes found missing less than `--min-age` ago (0 when more gaps exist than are
    /// read to tell).
    too_young: u64,
}

impl Attention {
    fn of(journal: &Journal, status: &Status, min_age: Duration) -> Result<Attention, Fail> {
        let old = match (status.missing, min_age.is_zero()) {
            (0, _) => Vec::new(),
            (_, true) => journal.missing(REMAINING_RANGES)?,
            (_, false) => journal.missing_older_than(min_age, REMAINING_RANGES)?,
        };
        let old_count: u64 = old.iter().map(|&(first, last)| u64::try_from(last - first + 1).unwrap_or(0)).sum();
        let too_young = if old.len() < REMAINING_RANGES { status.missing.saturating_sub(old_count) } else { 0 };
        let needed = !old.is_empty() || status.unfinished > 0 || status.open_conflicts > 0 || status.index_jumps > 0;
        Ok(Attention { needed, too_young })
    }
}

fn dry_run(
    args: &RecoverArgs,
    status: &Status,
    pending: &[i64],
    unrecoverable: &[i64],
    attention: &Attention,
) -> Outcome {
    if args.json {
        #[derive(Serialize)]
        struct DryRun<'a> {
            dry_run: bool,
            min_age: String,
            missing_before: u64,
            unfinished_before: u64,
            gaps_too_young: u64,
            would_fetch: &'a [i64],
            unrecoverable: &'a [i64],
            needs_attention: bool,
        }
        print_json(&DryRun {
            dry_run: true,
            min_age: age_text(args.min_age),
            missing_before: status.missing,
            unfinished_before: status.unfinished,
            gaps_too_young: attention.too_young,
            would_fetch: pending,
            unrecoverable,
            needs_attention: attention.needed,
        })?;
    } else {
        for index in pending {
            crate::outln!("index={index} result=would_fetch");
        }
        crate::outln!(
            "summary dry_run=true missing_before={} unfinished_before={} gaps_too_young={} would_fetch={} unrecoverable={}",
            status.missing,
            status.unfinished,
            attention.too_young,
            pending.len(),
            indexes_text(unrecoverable)
        );
    }
    Ok(Verdict::bad_if(attention.needed))
}

/// How long the lock's lease reaches past `--max-time`, renewed after each index: longer than
/// the longest an index can take, so that a live run never loses its lock to another. An
/// index is one fetch from the service (each try bounded by `--timeout`, `--retries` more tries
/// after a back-off that starts at 200 ms and doubles), one delivery to the endpoint (bounded
/// by `--timeout`), and the journal's calls (`LOCK_MARGIN`).
fn lock_margin(timeout_seconds: f64, retries: u32) -> Duration {
    let timeout = Duration::try_from_secs_f64(timeout_seconds).unwrap_or(Duration::MAX);
    let tries = retries.saturating_add(1);
    let backoffs = Duration::from_millis(200).saturating_mul(2u32.saturating_pow(retries));
    timeout.saturating_mul(tries.saturating_add(1)).saturating_add(backoffs).saturating_add(LOCK_MARGIN)
}

/// The partner's own callback endpoint, from `--callback-url` and `--callback-ca-file`.
fn endpoint(args: &RecoverArgs) -> Result<Endpoint, Fail> {
    let url = args
        .callback
        .callback_url
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| Fail("no callback endpoint: give --callback-url URL".to_owned()))?;
    let token = crate::config::token(&args.service)?;
    Endpoint::new(
        url,
        args.callback.callback_ca_file.as_deref(),
        token,
        seconds("--timeout", args.service.timeout)?,
        "recover",
    )
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
    /// Whether the endpoint accepted the token in this run: it answered a delivery with HTTP 200,
    /// or the balance query of `confirm_endpoint` with anything but the refusal's status.
    endpoint_accepted: bool,
    /// Who refused the command's token, or its requests: the run stops there.
    refused: Option<Refusal>,
}

/// What stops a run at the first index: it is true of every index after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// HTTP 401 from the service, or from the endpoint before it accepted the token in this run.
    Token(Peer),
    /// HTTP 403 from the service: its interface defines no refusal of one event, so it refuses
    /// this command (its token, or this host), not the index.
    ServiceForbidden,
    /// HTTP 403 from the endpoint before it accepted a delivery in this run, and to a balance
    /// query: it does not let this host's address in.
    EndpointForbidden,
}

impl Refusal {
    fn reason(self) -> String {
        match self {
            Refusal::Token(peer) => peer.token_refused().to_owned(),
            Refusal::ServiceForbidden => "the service refused the request (HTTP 403 Forbidden): check --token (or \
                 SLOTPARTNER_TOKEN), and that the service lets this host's address in"
                .to_owned(),
            Refusal::EndpointForbidden => "the callback endpoint refused this host's address (HTTP 403): add it to \
                 the endpoint's sources (one address, never a range), or run recover on the endpoint's host against \
                 a listener on 127.0.0.1"
                .to_owned(),
        }
    }
}

/// The balance query that asks the endpoint whether it accepts the token and this host (`confirm_endpoint`), as
/// `check` sends it: no index, so that the endpoint's journal records nothing, and no money moves.
const TOKEN_QUERY: &str = r#"{"action":"getPlayerBalance","playerIdentifier":"slotpartner-recover","playerPartnerIdentifier":"slotpartner-recover"}"#;

impl Run<'_> {
    /// Fetches and delivers `index` (`unfinished`: a delivery claimed there was never finished).
    fn recover(&mut self, index: i64, unfinished: bool) -> ItemResult {
        let mut item = self.try_recover(index);
        item.unfinished = unfinished;
        if unfinished && item.fetch_outcome() != FetchOutcome::Settled {
            let message = item.message.take().unwrap_or_default();
            item.message =
                Some(format!("{message}; the delivery claimed at index {index} stays unfinished (nothing stored)"));
        }
        item
    }

    /// Whether the endpoint accepts the token and this host, asked with a balance query
    /// (`TOKEN_QUERY`) after the first delivery of the run was refused with `refused_with` (HTTP
    /// 401 or 403): any other answer says it does, and the refusal was of that event only. No
    /// answer says nothing: the run stops as for a refusal of every event.
    fn confirm_endpoint(&mut self, refused_with: u16) -> bool {
        let accepted = self.endpoint.post(TOKEN_QUERY).is_ok_and(|answer| answer.status != refused_with);
        self.endpoint_accepted = accepted;
        accepted
    }

    fn try_recover(&mut self, index: i64) -> ItemResult {
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
                let unreachable = matches!(error.kind, ErrorKind::Connect | ErrorKind::Tls | ErrorKind::Timeout);
                self.service_unreachable = if unreachable { self.service_unreachable + 1 } else { 0 };
                match error.cause.as_deref() {
                    Some(Cause::HttpStatus(401)) => self.refused = Some(Refusal::Token(Peer::Service)),
                    Some(Cause::HttpStatus(403)) => self.refused = Some(Refusal::ServiceForbidden),
                    _ => {}
                }
                let reason = if error.kind == ErrorKind::BadResponse { "invalid_event" } else { "service" };
                return item.not_fetched(reason, library_error_text(&error));
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
        // An index the event does not carry readably (the lenient default) is taken as the one
        // asked for: delivered, the endpoint's journal cannot record it, so it is closed here.
        let index_unreadable = event.index.is_none();
        if let Some(got) = event.index.filter(|&got| got != index) {
            let message = format!("the fetched event carries index {got}, not the {index} asked for");
            return item.not_fetched("invalid_event", message);
        }
        // What the journal holds at this index: an unfinished delivery of another transaction
        // there is not this event's to settle; the operator decides.
        if let Some(id) = transaction_id {
            let held = match self.journal.deliveries_at(index) {
                Ok(held) => held,
                Err(error) => return item.not_fetched("journal", error.message),
            };
            if let Some((key, state, other)) =
                held.into_iter().find(|(_, state, other)| state != "done" && other.is_some_and(|other| other != id))
            {
                let message = format!(
                    "the service answers index {index} with transactionId {id}, but the journal holds {key} ({state}, transactionId {}) at that index: not delivered; settle it by hand",
                    other.unwrap_or_default()
                );
                return item.not_fetched("journal", message);
            }
        }
        // The journal holds this transaction already, delivered at another index: the service
        // answered this index with another index's event. Delivering it would close nothing
        // (the endpoint's journal counts an index only for its own event); the gap stays open
        // and visible for an operator.
        let records = match transaction_id.map(|id| self.journal.lookup(id)).transpose() {
            Ok(records) => records.unwrap_or_default(),
            Err(error) => return item.not_fetched("journal", error.message),
        };
        let same_event = |r: &&slotpartner::journal::Record| r.name.as_deref() == Some(&*event.name);
        if let Some(elsewhere) = records.iter().filter(same_event).find_map(|r| r.index.filter(|&at| at != index)) {
            let message = format!(
                "the service answers index {index} with the event of transactionId {}, which the journal holds at index {elsewhere}: not this index's event; not delivered, the gap stays open (ask the service; `journal resolve` once settled)",
                transaction_id.unwrap_or_default()
            );
            return item.not_fetched("wrong_event", message);
        }
        // A late delivery may have handled it since the journal was read: the endpoint will
        // answer from its journal; say so.
        let handled_before = records.iter().filter(same_event).any(|r| r.state == RecordState::Done);
        let wrapper =
            event.known().filter(|k| *k != slotpartner::KnownEvent::BalanceQuery).map(|k| self.parser.wrapper(k));
        let (status, answer, unread) = match self.endpoint.post(&body) {
            // The status line arrived: the endpoint answered, whatever its body holds.
            Ok(answered) => {
                self.endpoint_unreachable = 0;
                let (text, unread) = match answered.text {
                    Ok(text) => (text, None),
                    Err(why) => (String::new(), Some(why)),
                };
                (answered.status, text, unread)
            }
            Err(error) => {
                // No connection, a TLS failure or a time-out: each counts toward stopping.
                self.endpoint_unreachable += 1;
                let mut message = format!("no answer from the callback endpoint: {error}");
                if let Some(problem) = TlsProblem::of(&error) {
                    let _ = write!(message, ". {}", Peer::Endpoint.tls_hint(problem));
                }
                return item.endpoint_failed(None, message);
            }
        };
        item.http_status = Some(status);
        if status == 401 || status == 403 {
            // The token and this host's address are the same for every delivery: a refusal of
            // either (401, or 403 as the library's receiver answers a source it does not allow)
            // stops the run, unless the endpoint accepted a delivery in this run, before or as a
            // balance query now: then the refusal was of this event only.
            let what = if status == 401 { "the token" } else { "this host's address" };
            let message = if self.endpoint_accepted {
                format!(
                    "the callback endpoint refused {what} for this event only (HTTP {status}), though it accepted it before in this run"
                )
            } else if self.confirm_endpoint(status) {
                format!(
                    "the callback endpoint refused {what} for this event only (HTTP {status}), though it accepted it for a balance query just after"
                )
            } else {
                self.refused =
                    Some(if status == 401 { Refusal::Token(Peer::Endpoint) } else { Refusal::EndpointForbidden });
                return item.endpoint_failed(Some(status), format!("HTTP {status}: {}", excerpt(&answer)));
            };
            return item.endpoint_failed(Some(status), format!("{message}: {}", excerpt(&answer)));
        }
        // HTTP 200: the endpoint handled the delivery, so it took the token.
        self.endpoint_accepted |= status == 200;
        if let Some(why) = unread {
            let message = format!("answered HTTP {status}, the answer could not be read ({why})");
            return item.endpoint_failed(Some(status), message);
        }
        if status != 200 {
            return item.endpoint_failed(Some(status), format!("HTTP {status}: {}", excerpt(&answer)));
        }
        match wrapper {
            None => item.result = "recovered",
            Some(wrapper) => {
                let reply: Option<serde_json::Value> = serde_json::from_str(&answer).ok();
                let inner = reply.as_ref().and_then(|v| v.get(wrapper));
                match inner.and_then(|w| w.get("success")).and_then(serde_json::Value::as_bool) {
                    Some(true) => item.result = if handled_before { "handled_meanwhile" } else { "recovered" },
                    Some(false) => {
                        let said =
                            inner.and_then(|w| w.get("errorMessage")).and_then(serde_json::Value::as_str).unwrap_or("");
                        item.result = "refused";
                        item.message = Some(format!("the endpoint answered success:false: {}", quoted(said)));
                    }
                    None => {
                        let message = format!("the answer is not a {wrapper} reply with success: {}", excerpt(&answer));
                        return item.endpoint_failed(Some(status), message);
                    }
                }
            }
        }
        if index_unreadable {
            let note = "recover: the service's event for this index carries no readable index; delivered to the callback endpoint";
            if let Err(error) = self.journal.resolve(index, index, note) {
                item.result = "unsettled";
                item.message = Some(format!("delivered, but its index could not be closed: {}", error.message));
                return item;
            }
        }
        // Answered: the journal must hold no unfinished delivery at this index any more.
        match self.journal.deliveries_at(index) {
            Ok(held) => {
                if let Some((key, state, _)) = held.into_iter().find(|(_, state, _)| state != "done") {
                    let message = format!(
                        "the endpoint answered HTTP 200, yet the journal still holds {key} ({state}) at index {index}: does that endpoint use the journal given here?"
                    );
                    item.result = "unsettled";
                    item.message = Some(message);
                }
            }
            Err(error) => {
                item.result = "unsettled";
                item.message = Some(format!("the journal could not be read after the delivery: {}", error.message));
            }
        }
        item
    }
}

/// What happened to one index.
#[derive(Debug, Serialize)]
struct ItemResult {
    index: i64,
    /// `recovered`, `handled_meanwhile`, `refused`, `not_fetched`, `endpoint_failed` or
    /// `unsettled` (answered, yet the journal still holds an unfinished delivery there).
    result: &'static str,
    /// For `not_fetched`: `not_found`, `service`, `invalid_event` or `journal` (fetched, not
    /// delivered: the journal holds an unfinished delivery of another transaction there).
    reason: Option<&'static str>,
    /// A delivery claimed at this index was never finished (rather than the index missing).
    unfinished: bool,
    event: Option<String>,
    transaction_id: Option<i64>,
    /// The callback endpoint's HTTP status.
    http_status: Option<u16>,
    message: Option<String>,
    /// `tail` or `head`: found by a probe of the numbering's ends (`Ends`), not missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    probe: Option<&'static str>,
}

impl ItemResult {
    fn new(index: i64) -> ItemResult {
        ItemResult {
            index,
            result: "",
            reason: None,
            unfinished: false,
            event: None,
            transaction_id: None,
            http_status: None,
            message: None,
            probe: None,
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

    /// The kind of failure, whose lines are summarised past `LINES_PER_FAILURE_KIND`: the reason
    /// of a `not_fetched`, else the result; `None` for a success.
    fn failure_kind(&self) -> Option<&'static str> {
        match self.result {
            "recovered" | "handled_meanwhile" => None,
            result => Some(self.reason.unwrap_or(result)),
        }
    }

    /// What the journal notes for the index: settled (recovered, handled meanwhile, or refused
    /// by the endpoint, which is final), not found (HTTP 404), or failed.
    fn fetch_outcome(&self) -> FetchOutcome {
        match (self.result, self.reason) {
            ("recovered" | "handled_meanwhile" | "refused", _) => FetchOutcome::Settled,
            ("not_fetched", Some("not_found")) => FetchOutcome::NotFound,
            _ => FetchOutcome::Failed,
        }
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
        if self.unfinished {
            line.push_str(" unfinished=true");
        }
        if let Some(end) = self.probe {
            line.push_str(&format!(" probe={end}"));
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
    journal: u64,
    /// The service answered with the event of another index (the journal holds it there).
    wrong_event: u64,
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
    /// `--max-time`.
    max_time: String,
    /// `--min-age`: gaps and unfinished deliveries younger than this were left for the next run.
    min_age: String,
    /// Indexes missing from the journal when the run began.
    missing_before: u64,
    /// Deliveries claimed and never finished when the run began.
    unfinished_before: u64,
    /// Indexes this run took on (at most `--limit`): unfinished ones first, then missing ones.
    /// It can exceed `missing_before`: unfinished deliveries are taken too, and their indexes
    /// are not missing (`taken = taken_unfinished + taken_missing`).
    taken: u64,
    /// Of them, indexes of deliveries claimed and never finished.
    taken_unfinished: u64,
    /// Of them, missing indexes.
    taken_missing: u64,
    /// Missing indexes this run did not take: found missing less than `--min-age` ago,
    /// unrecoverable, or beyond `--limit` (0 when deliveries opened more gaps meanwhile).
    missing_not_taken: u64,
    /// Fetched, delivered, and answered with success.
    recovered: u64,
    /// A late delivery handled it meanwhile: the endpoint answered from its journal.
    handled_meanwhile: u64,
    /// Delivered; the endpoint answered `success:false` (its index is seen now).
    refused: u64,
    /// Not fetched (or fetched and not delivered), by reason.
    not_fetched: NotFetched,
    /// Fetched, but the endpoint failed (no answer, not HTTP 200, not a reply, an answer that
    /// could not be read, a refusal of the token for that event only).
    endpoint_failures: u64,
    /// Answered, yet the journal still holds an unfinished delivery at the index.
    unsettled: u64,
    /// Left when the run stopped early.
    not_tried: u64,
    stopped: Option<String>,
    /// Indexes missing from the journal after the run.
    gaps_remaining: u64,
    /// Of them, those found missing less than `--min-age` ago: left for the next run, no bad news.
    gaps_too_young: u64,
    /// The first of them, as ranges.
    remaining_ranges: Vec<Range>,
    /// Missing indexes no longer fetched (HTTP 404 for `--not-found-limit` runs): resolve them
    /// by hand (`journal resolve`). Their count, and the first of them.
    unrecoverable_count: u64,
    unrecoverable: Vec<i64>,
    /// Deliveries claimed and never finished after the run.
    unfinished_remaining: u64,
    /// Conflicts and index jumps no operator decided yet.
    open_conflicts: u64,
    index_jumps: u64,
    /// Whether the journal needs an operator's look after the run: the exit status is 1.
    needs_attention: bool,
    /// What the probes of the numbering's ends found.
    probes: Probes,
    results: Vec<ItemResult>,
}

impl Report {
    fn count(&mut self, item: &ItemResult) {
        match (item.result, item.reason) {
            ("recovered", _) => self.recovered += 1,
            ("handled_meanwhile", _) => self.handled_meanwhile += 1,
            ("refused", _) => self.refused += 1,
            ("unsettled", _) => self.unsettled += 1,
            ("not_fetched", Some("not_found")) => self.not_fetched.not_found += 1,
            ("not_fetched", Some("invalid_event")) => self.not_fetched.invalid_event += 1,
            ("not_fetched", Some("journal")) => self.not_fetched.journal += 1,
            ("not_fetched", Some("wrong_event")) => self.not_fetched.wrong_event += 1,
            ("not_fetched", _) => self.not_fetched.service += 1,
            _ => self.endpoint_failures += 1,
        }
    }

    fn not_fetched_total(&self) -> u64 {
        let n = &self.not_fetched;
        n.not_found + n.service + n.invalid_event + n.journal + n.wrong_event
    }

    /// Indexes that did not end as a success.
    fn failed(&self) -> u64 {
        self.not_fetched_total() + self.endpoint_failures + self.refused + self.unsettled
    }

    /// Indexes tried so far, each counted once whatever it ended as.
    fn tried(&self) -> u64 {
        self.recovered + self.handled_meanwhile + self.failed()
    }

    fn print_summary(&self) {
        crate::outln!(
            "summary missing_before={} unfinished_before={} taken={} recovered={} handled_meanwhile={} refused={} not_fetched={} endpoint_failures={} unsettled={} not_tried={}",
            self.missing_before,
            self.unfinished_before,
            self.taken,
            self.recovered,
            self.handled_meanwhile,
            self.refused,
            self.not_fetched_total(),
            self.endpoint_failures,
            self.unsettled,
            self.not_tried
        );
        crate::outln!(
            "summary taken_unfinished={} taken_missing={} missing_not_taken={}",
            self.taken_unfinished,
            self.taken_missing,
            self.missing_not_taken
        );
        let n = &self.not_fetched;
        crate::outln!(
            "summary not_found={} service={} invalid_event={} journal={} wrong_event={}",
            n.not_found,
            n.service,
            n.invalid_event,
            n.journal,
            n.wrong_event
        );
        if let Some(stopped) = &self.stopped {
            crate::outln!("summary stopped={}", quoted(stopped));
        }
        let more = if self.unrecoverable_count > self.unrecoverable.len() as u64 { ",..." } else { "" };
        crate::outln!(
            "summary unrecoverable={}{more} unfinished_remaining={} open_conflicts={} index_jumps={}",
            indexes_text(&self.unrecoverable),
            self.unfinished_remaining,
            self.open_conflicts,
            self.index_jumps
        );
        let ranges: Vec<String> = self.remaining_ranges.iter().take(20).map(|r| range_text(r.first, r.last)).collect();
        let more = if self.remaining_ranges.len() > 20 { ",..." } else { "" };
        let remaining = if ranges.is_empty() { "-".to_owned() } else { format!("{}{more}", ranges.join(",")) };
        let result = match (self.needs_attention, self.gaps_remaining.saturating_sub(self.gaps_too_young)) {
            // Only gaps younger than --min-age are left: no bad news yet, but not all well either.
            (false, _) if self.gaps_too_young > 0 => "waiting",
            (false, _) => "ok",
            (true, 0) => "attention_needed",
            (true, _) => "gaps_remain",
        };
        let shown = |value: Option<i64>| value.map_or("-".to_owned(), |v| v.to_string());
        let p = &self.probes;
        crate::outln!(
            "summary tail_found={} tail_end={} head_found={} probe_undelivered={}",
            p.tail_found,
            shown(p.tail_end),
            p.head_found,
            p.undelivered
        );
        crate::outln!(
            "summary gaps_remaining={} gaps_too_young={} remaining={remaining} result={result}",
            self.gaps_remaining,
            self.gaps_too_young
        );
    }
}

/// A progress bar on a terminal (stderr), one line per index on stdout otherwise; lines of
/// failures beyond `LINES_PER_FAILURE_KIND` of a kind are counted instead (`Lines`).
struct Progress {
    total: u64,
    bar: Option<ProgressBar>,
    /// Lines for every index (stdout is not a terminal: a log), or only for failures.
    every_line: bool,
    quiet: bool,
    lines: Lines,
}

impl Progress {
    fn new(total: u64, json: bool) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            // The position is also in the message, with the counts it goes with: a draw between
            // two updates never shows one without the other.
            let style =
                ProgressStyle::with_template("{spinner} recovering [{elapsed_precise}] [{wide_bar}] {msg} (eta {eta})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> ");
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        let every_line = !std::io::stdout().is_terminal() || bar.is_none();
        Progress { total, bar, every_line, quiet: json, lines: Lines::default() }
    }

    /// Shows the last result of `report` (pushed, and counted).
    fn show(&mut self, report: &Report) {
        let Some(item) = report.results.last() else { return };
        let kind = item.failure_kind();
        if !self.quiet && (self.every_line || kind.is_some()) && self.lines.admit(kind) {
            let line = item.line();
            match &self.bar {
                Some(bar) => bar.suspend(|| crate::outln!("{line}")),
                None => crate::outln!("{line}"),
            }
        }
        if let Some(bar) = &self.bar {
            let (position, message) = bar_state(report, self.total);
            bar.set_position(position);
            bar.set_message(message);
        }
    }

    /// Clears the bar, and says how many lines of each kind were left out.
    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        for line in self.lines.left_out() {
            crate::outln!("{line}");
        }
    }
}

/// The bar's position (indexes tried) and its message, from the counts of `report`.
fn bar_state(report: &Report, total: u64) -> (u64, String) {
    let tried = report.tried();
    let recovered = report.recovered + report.handled_meanwhile;
    (tried, format!("{tried}/{total} recovered {recovered}, failed {}", report.failed()))
}

/// Which result lines are printed: every success, the first `LINES_PER_FAILURE_KIND` failures
/// of each kind; the others are counted by kind, in the order the kinds first came.
#[derive(Debug, Default)]
struct Lines {
    /// Each kind of failure met, with how many of it came.
    kinds: Vec<(&'static str, u64)>,
}

impl Lines {
    /// Whether the line of a result of failure kind `kind` (`None`: a success) is printed.
    fn admit(&mut self, kind: Option<&'static str>) -> bool {
        let Some(kind) = kind else { return true };
        let position = match self.kinds.iter().position(|(k, _)| *k == kind) {
            Some(position) => position,
            None => {
                self.kinds.push((kind, 0));
                self.kinds.len() - 1
            }
        };
        self.kinds[position].1 += 1;
        self.kinds[position].1 <= LINES_PER_FAILURE_KIND
    }

    /// `... and N more KIND` for each kind with lines left out.
    fn left_out(&self) -> Vec<String> {
        self.kinds
            .iter()
            .filter(|(_, count)| *count > LINES_PER_FAILURE_KIND)
            .map(|(kind, count)| format!("... and {} more {kind}", count - LINES_PER_FAILURE_KIND))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{ItemResult, LINES_PER_FAILURE_KIND, LOCK_MARGIN, Lines, Report, bar_state, lock_margin};
    use std::time::Duration;

    /// The lease reaches past the longest an index can take: every try of the fetch with its
    /// back-offs, and the delivery, each at `--timeout`, with the journal's margin on top.
    #[test]
    fn the_lock_outlasts_the_slowest_index() {
        for (timeout, retries) in [(15.0, 2), (0.5, 0), (60.0, 10), (3600.0, 10), (1.0, 3)] {
            let backoffs: f64 = (0..retries).map(|n| 0.2 * 2f64.powi(n)).sum();
            let slowest = timeout * f64::from(retries + 1) + backoffs + timeout;
            let margin = lock_margin(timeout, u32::try_from(retries).unwrap());
            assert!(margin > Duration::from_secs_f64(slowest) + LOCK_MARGIN / 2, "{timeout} s, {retries}: {margin:?}");
        }
    }

    /// A report after results of `outcomes` (result, reason), counted as the run counts them.
    fn report_of(outcomes: &[(&'static str, Option<&'static str>)]) -> Report {
        let mut report = Report::default();
        for (index, &(result, reason)) in outcomes.iter().enumerate() {
            let mut item = ItemResult::new(index as i64 + 1);
            item.result = result;
            item.reason = reason;
            report.count(&item);
            report.results.push(item);
        }
        report
    }

    #[test]
    fn the_bar_shows_the_indexes_tried_with_their_counts() {
        assert_eq!(bar_state(&report_of(&[]), 600), (0, "0/600 recovered 0, failed 0".to_owned()));
        let first = report_of(&[("recovered", None)]);
        assert_eq!(bar_state(&first, 600), (1, "1/600 recovered 1, failed 0".to_owned()));
        let outcomes = [
            ("recovered", None),
            ("not_fetched", Some("not_found")),
            ("handled_meanwhile", None),
            ("endpoint_failed", None),
            ("refused", None),
            ("unsettled", None),
            ("not_fetched", Some("service")),
            ("recovered", None),
        ];
        for done in 1..=outcomes.len() {
            let report = report_of(&outcomes[..done]);
            let (position, message) = bar_state(&report, 600);
            assert_eq!(position, done as u64, "one step per index tried");
            assert!(message.starts_with(&format!("{done}/600 ")), "{message}");
        }
        let (_, message) = bar_state(&report_of(&outcomes), 600);
        assert_eq!(message, "8/600 recovered 3, failed 5");
    }

    #[test]
    fn failures_of_a_kind_are_printed_up_to_the_limit_then_counted() {
        let mut lines = Lines::default();
        let limit = LINES_PER_FAILURE_KIND as usize;
        let printed = (0..limit + 3).filter(|_| lines.admit(Some("not_found"))).count();
        assert_eq!(printed, limit);
        assert!(lines.admit(Some("service")), "another kind has lines of its own");
        assert!((0..100).all(|_| lines.admit(None)), "every success is printed");
        assert!(!lines.admit(Some("not_found")));
        for _ in 0..limit {
            lines.admit(Some("endpoint_failed"));
        }
        assert_eq!(lines.left_out(), ["... and 4 more not_found"], "a kind at the limit left nothing out");
    }

    #[test]
    fn a_failure_kind_is_the_reason_of_not_fetched_else_the_result() {
        let report = report_of(&[
            ("recovered", None),
            ("handled_meanwhile", None),
            ("not_fetched", Some("not_found")),
            ("endpoint_failed", None),
        ]);
        let kinds: Vec<_> = report.results.iter().map(ItemResult::failure_kind).collect();
        assert_eq!(kinds, [None, None, Some("not_found"), Some("endpoint_failed")]);
    }
}
