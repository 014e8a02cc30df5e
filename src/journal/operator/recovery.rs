//! Recovery of lost events: every index the journal never saw is fetched again through the
//! client, read with the same validation as a callback (not the token and source checks: it
//! came over the partner's own HTTPS call), and claimed in the journal like a delivery. The
//! caller pulls the claimed events one by one, runs its handler and finishes each as for a
//! callback; a report says what was recovered, what a late delivery handled meanwhile, and what
//! could not be fetched, and why.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::callback::Receiver;
use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::journal::{Begin, Claim, Delivery, FetchOutcome, Journal, RecoveryLock};

/// The most missing indexes one recovery takes on (the rest wait for the next run).
pub const MAX_INDEXES: usize = 1_000_000;

/// How long the recovery lock is held without a call to `next_event` before it lapses (a
/// recovery whose host died frees the journal for the next run after this).
pub const LOCK_LEASE: std::time::Duration = std::time::Duration::from_secs(600);

/// Why a missing event was not recovered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureReason {
    /// The service answered 404: it knows no event with this index.
    NotFound,
    /// The service could not be reached, timed out, or answered another HTTP error.
    Service,
    /// The answer or the event in it is not valid (it failed the callback validation, or carries
    /// another index than the one asked for).
    InvalidEvent,
    /// The journal refused or failed it: the same transaction came before with other content, a
    /// worker holds it, or the storage failed.
    Journal,
}

impl FailureReason {
    /// A stable lower-case name (`not_found`, `service`, `invalid_event`, `journal`).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::NotFound => "not_found",
            FailureReason::Service => "service",
            FailureReason::InvalidEvent => "invalid_event",
            FailureReason::Journal => "journal",
        }
    }
}

/// A missing event that was not recovered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub index: i64,
    pub reason: FailureReason,
    /// The error, naming the field or the HTTP status.
    pub error: Error,
}

/// What a recovery did so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Indexes the recovery set out to fetch: missing ones, and unfinished ones.
    pub missing: u64,
    /// Events fetched and handed to the caller, claimed.
    pub recovered: u64,
    /// Events fetched but handled meanwhile by a late delivery (answered from the journal), or
    /// not journaled (a balance query): nothing to do.
    pub handled_meanwhile: u64,
    /// Events not recovered, with the reason; a later run tries them again (least recently
    /// tried last), unless the service answered 404 for them `not_found_limit` runs.
    pub failures: Vec<Failure>,
    /// Missing indexes no longer fetched: the service answered 404 for them `not_found_limit`
    /// runs. They stay missing until an operator resolves them (`Journal::resolve`).
    pub unrecoverable: Vec<i64>,
}

/// A fetched event, claimed in the journal: read `body` with the receiver's `parse`, run the
/// handler, then `Journal::finish` the claim with the reply (or `abandon` it).
#[derive(Debug)]
pub struct Recovered {
    pub index: i64,
    /// The event's raw JSON text, exactly as the service answered it.
    pub body: String,
    pub claim: Claim,
}

/// A recovery in progress. One thread at a time.
#[derive(Debug)]
pub struct Recovery {
    receiver: Arc<Receiver>,
    client: Client,
    pending: VecDeque<i64>,
    report: Report,
    /// The journal's recovery lock, held until every index was tried or the recovery is dropped.
    lock: Option<RecoveryLock>,
}

impl Recovery {
    /// Plans the indexes to fetch through `client`, at most `limit` (at most `MAX_INDEXES`), as
    /// `Journal::recovery_plan` orders them: deliveries claimed but never finished (abandoned,
    /// or their worker died) first, then missing indexes never tried, then those tried before,
    /// least recently tried first, so that runs work through every gap in turn; unrecoverable
    /// ones (404 for `not_found_limit` runs) are reported, not fetched. Holds the journal's
    /// recovery lock until every index was tried or it is dropped (renewed by each `next_event`,
    /// lapsing `LOCK_LEASE` after the last), so that two recoveries never work on one journal at
    /// once. Fails when the receiver
    /// has no journal or the journal cannot be read; with `Busy` naming the run that holds the
    /// lock and since when.
    pub fn new(receiver: Arc<Receiver>, client: Client, limit: usize) -> Result<Recovery> {
        let journal = journal_of(&receiver)?;
        let lock = RecoveryLock::take(Arc::clone(journal), "recovery", LOCK_LEASE)?;
        let limit = limit.min(MAX_INDEXES);
        let pending = VecDeque::from(journal.recovery_plan(limit)?);
        let unrecoverable = journal.unrecoverable(limit)?;
        let report = Report { missing: pending.len() as u64, unrecoverable, ..Report::default() };
        Ok(Recovery { receiver, client, pending, report, lock: Some(lock) })
    }

    /// The next recovered event, claimed; `None` when every missing index was tried. Indexes
    /// that fail are recorded in the report and skipped.
    pub fn next_event(&mut self) -> Option<Recovered> {
        while let Some(index) = self.pending.pop_front() {
            if let Err(error) = self.lock.as_ref().map_or(Ok(()), |lock| lock.renew(LOCK_LEASE)) {
                self.report.failures.push(Failure { index, reason: FailureReason::Journal, error });
                continue;
            }
            let result = self.recover(index);
            let outcome = match &result {
                Ok(_) => FetchOutcome::Settled,
                Err((FailureReason::NotFound, _)) => FetchOutcome::NotFound,
                Err(_) => FetchOutcome::Failed,
            };
            // What was tried orders the next runs; a journal that cannot note it fails the index
            // in the next step anyway.
            if let Ok(journal) = journal_of(&self.receiver) {
                let _ = journal.note_fetch(index, outcome);
            }
            match result {
                Ok(Some(recovered)) => {
                    self.report.recovered += 1;
                    return Some(recovered);
                }
                Ok(None) => self.report.handled_meanwhile += 1,
                Err((reason, error)) => self.report.failures.push(Failure { index, reason, error }),
            }
        }
        self.lock = None;
        None
    }

    /// What the recovery did so far.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// The receiver the events are read with (its journal holds the claims).
    pub fn receiver(&self) -> &Arc<Receiver> {
        &self.receiver
    }

    fn recover(&self, index: i64) -> std::result::Result<Option<Recovered>, (FailureReason, Error)> {
        let body = match self.client.fetch_event(index) {
            Ok(Some(body)) => body,
            Ok(None) => {
                let problem = format!("the service knows no event with index {index} (HTTP 404)");
                let error = Error::field(ErrorKind::HttpStatus, self.client.fetch_settings().action.as_str(), problem);
                return Err((FailureReason::NotFound, error));
            }
            Err(error) if error.kind == ErrorKind::BadResponse => return Err((FailureReason::InvalidEvent, error)),
            Err(error) => return Err((FailureReason::Service, error)),
        };
        let event = self.receiver.parse(body.as_bytes()).map_err(|e| (FailureReason::InvalidEvent, e))?;
        // An index that could not be read (the lenient default) is taken as the one fetched.
        if event.index.is_some() && event.index != Some(index) {
            let got = event.index.map_or("none".to_owned(), |i| i.to_string());
            let problem = format!("the fetched event carries index {got}, not the {index} asked for");
            let error = Error::field(ErrorKind::BadResponse, format!("{}.index", event.name), problem);
            return Err((FailureReason::InvalidEvent, error));
        }
        let journal = journal_of(&self.receiver).map_err(|e| (FailureReason::Journal, e))?;
        let delivery = Delivery::of(&event).fetched_at(index);
        if let Some(id) = delivery.transaction_id() {
            let held = journal.deliveries_at(index).map_err(|e| (FailureReason::Journal, e))?;
            if let Some((key, state, other)) =
                held.into_iter().find(|(_, state, other)| state != "done" && other.is_some_and(|other| other != id))
            {
                let problem = format!(
                    "the service answers index {index} with transactionId {id}, but the journal holds {key} ({state}, transactionId {}) at that index: settle it by hand",
                    other.unwrap_or_default()
                );
                return Err((FailureReason::Journal, Error::field(ErrorKind::Conflict, "index", problem)));
            }
        }
        let begun = journal.begin(&delivery).map_err(|e| (FailureReason::Journal, e))?;
        let claim = match begun {
            Begin::New(claim) => claim,
            Begin::Done(_) | Begin::NotReplayable => return Ok(None),
            Begin::Conflict(error) => return Err((FailureReason::Journal, error)),
            Begin::Busy => {
                let problem = "another worker is handling this event (a late delivery) and did not finish in time";
                return Err((FailureReason::Journal, Error::field(ErrorKind::Busy, "event", problem)));
            }
        };
        drop(event);
        Ok(Some(Recovered { index, body, claim }))
    }
}

fn journal_of(receiver: &Receiver) -> Result<&Arc<Journal>> {
    receiver.journal().ok_or_else(|| {
        Error::field(ErrorKind::InvalidArgument, "receiver", "has no journal: recovery fills the journal's gaps")
    })
}
