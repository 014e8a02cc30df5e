//! The endpoint in one call: the whole money flow of a callback request, decided once, here.
//!
//! A host hands over the request as its web server saw it (method, `X-Service-Token`, peer
//! address, `X-Forwarded-For`, body) and gets back either the final [`Answer`] or the event to
//! run its logic on. After the logic, [`Endpoint::complete`] gives the final answer. The host
//! never decides a status, never touches the journal, never builds an error body:
//!
//! 1. a method other than POST: 405 with `Allow: POST`;
//! 2. the source address and the token, before anything else (and before the journal is
//!    opened): 403, 401;
//! 3. the body: 413, 400, or 200 with the event's failure reply naming the field; a refused body
//!    whose index could be read is recorded as seen (when the journal can be reached);
//! 4. a balance query runs the logic with no journal at all (it is never answered from the
//!    journal, so a journal that is down does not refuse it); its index, when it has one, is
//!    recorded on the way, best effort: a journal that fails costs the answer nothing;
//! 5. a refund, payout or journaled other event is claimed: a repeat is answered with the stored
//!    reply (200), a conflict 409, a claim busy elsewhere or a journal down 503 with
//!    `Retry-After`; a new one runs the logic;
//! 6. after the logic: its reply is stored with its staged statements and sent; a failure of the
//!    logic (its ledger is down), a missing reply, or a failure to store releases the claim and
//!    answers 503 with `Retry-After`, so that the service delivers again.
//!
//! The journal is opened the first time a request needs it and kept for the endpoint's life (a
//! PHP-FPM worker, a WSGI process): a journal that cannot be opened is tried again by the next
//! request that needs it.

mod answer;
pub mod cgi;
mod settings;

use std::sync::{Arc, OnceLock};

use crate::callback::event::Event;
use crate::callback::receiver::{Receiver, ReceiverConfig, Request};
use crate::error::{Error, ErrorKind, Result};
use crate::journal::{Begin, Claim, Delivery, Finished, Journal, JournalOptions, Staged};

pub use answer::{Answer, CONTENT_TYPE, reason_phrase};

/// `Retry-After` of a 503, in seconds, unless set otherwise.
pub const DEFAULT_RETRY_AFTER_SECS: u32 = 5;

/// Where an endpoint's journal comes from.
#[derive(Debug)]
enum JournalSource {
    /// No journal: every valid event runs the logic, nothing is claimed.
    None,
    /// Opened from this URL the first time a request needs it, then kept.
    Lazy { url: String, options: JournalOptions, opened: OnceLock<Arc<Receiver>> },
    /// Opened by the host and given with the receiver's configuration.
    Given(Arc<Receiver>),
}

/// One endpoint: a receiver and, optionally, a journal. Immutable once made (the journal is
/// opened once, behind a `OnceLock`): share it across threads, keep it for the process's life.
#[derive(Debug)]
pub struct Endpoint {
    /// The receiver without a journal: authentication, parsing, the balance query.
    plain: Arc<Receiver>,
    /// The configuration the receiver with the journal is made from when the journal is opened.
    config: ReceiverConfig,
    journal: JournalSource,
    retry_after: u32,
    /// Claims with `Journal::begin_optimistic` and finishes with `Journal::finish_optimistic`:
    /// no read before the logic (see `set_optimistic`).
    optimistic: bool,
}

/// What `Endpoint::receive` found.
#[derive(Debug)]
pub enum Received<'a> {
    /// The request is answered: send this, run nothing.
    Answer(Answer),
    /// Run the partner's logic on this event, then `Endpoint::complete`.
    Handle(Box<Handling<'a>>),
}

/// An event the partner's logic is to run on, with where it stands in the journal.
#[derive(Debug)]
pub struct Handling<'a> {
    pub event: Event<'a>,
    /// The receiver to build replies with; the one with the journal when the event is claimed.
    pub receiver: Arc<Receiver>,
    /// What the journal knows of the delivery, when a journal is configured.
    pub delivery: Option<Delivery>,
    /// The claim this worker holds: `complete` finishes or releases it. `None` for an event that
    /// is not answered from the journal (a balance query, an event without key) or with no
    /// journal.
    pub claim: Option<Claim>,
    /// Something the host's log should say already (`attempt 2`, a balance index not recorded);
    /// empty otherwise.
    pub log: String,
}

/// What the partner's logic gave.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'r> {
    /// A reply to send with `status` (the event's reply status: 200, or a refused balance
    /// query's), with the statements staged to run where the reply is stored.
    Reply { status: u16, body: &'r [u8], staged: &'r [Staged] },
    /// The logic failed for a reason that may pass (its ledger is down): deliver again later.
    Failed(&'r str),
}

/// What became of the claim in `complete`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// There was no claim.
    Unclaimed,
    /// The reply is stored (with the staged statements).
    Finished,
    /// The claim was released: the next delivery runs the logic again.
    Released,
    /// The claim's lease ran out and another delivery took it over: nothing was stored.
    Lost(Error),
    /// Releasing failed too: the claim ends with its lease.
    Held,
}

impl Endpoint {
    /// An endpoint for `config`, with a journal opened from `journal` (URL and options) the
    /// first time a request needs it. A `config` that carries a journal already
    /// (`ReceiverConfig::set_journal`) uses that one; giving both is refused (field `journal`).
    /// The URL is read when the journal is first opened: a URL refused then answers that request
    /// 500 (misconfigured), a journal that cannot be reached 503.
    /// Errors: `InvalidArgument` naming the setting (no token, both journals).
    pub fn new(config: ReceiverConfig, journal: Option<(&str, JournalOptions)>) -> Result<Endpoint> {
        let mut plain_config = config.clone();
        let given = plain_config.take_journal();
        let plain = Arc::new(Receiver::new(plain_config)?);
        let journal = match (given, journal) {
            (Some(_), Some(_)) => {
                let problem = "given twice: the receiver's configuration carries a journal and a journal URL was given";
                return Err(Error::field(ErrorKind::InvalidArgument, "journal", problem));
            }
            (Some(_), None) => JournalSource::Given(Arc::new(Receiver::new(config.clone())?)),
            (None, Some((url, options))) => {
                options.check()?;
                JournalSource::Lazy { url: url.to_owned(), options, opened: OnceLock::new() }
            }
            (None, None) => JournalSource::None,
        };
        Ok(Endpoint { plain, config, journal, retry_after: DEFAULT_RETRY_AFTER_SECS, optimistic: false })
    }

    /// Runs the logic before reading the journal (default false): the delivery is claimed with
    /// no read (`Journal::begin_optimistic`) and stored with the reply and the staged statements
    /// in one transaction and one round trip (`Journal::finish_optimistic`), as a hand-written
    /// idempotency table does it. A repeat is found only then: its logic has run, none of its
    /// staged statements took effect, and it is answered with the stored reply (a conflict 409).
    /// So turn it on only when every effect of the logic is staged (or absorbed by the ledger's
    /// unique `transactionId`). Needs a journal opened with `claim_at_finish` (field
    /// `optimistic` otherwise).
    pub fn set_optimistic(&mut self, optimistic: bool) -> Result<()> {
        let claim_at_finish = match &self.journal {
            JournalSource::Lazy { options, .. } => options.claim_at_finish,
            JournalSource::Given(receiver) => receiver.journal().is_some_and(|j| j.options().claim_at_finish),
            JournalSource::None => false,
        };
        if optimistic && !claim_at_finish {
            let problem = "needs a journal with claim_at_finish: without it the claim is written before the logic runs";
            return Err(Error::field(ErrorKind::InvalidArgument, "optimistic", problem));
        }
        self.optimistic = optimistic;
        Ok(())
    }

    /// Sets the `Retry-After` of every 503, in seconds (1 to 3600; default 5).
    pub fn set_retry_after(&mut self, secs: u32) -> Result<()> {
        if !(1..=3600).contains(&secs) {
            let problem = format!("expected 1 to 3600 seconds, got {secs}");
            return Err(Error::field(ErrorKind::InvalidArgument, "retry_after", problem));
        }
        self.retry_after = secs;
        Ok(())
    }

    /// The receiver without a journal (its limits: the body size a host reads up to).
    pub fn receiver(&self) -> &Arc<Receiver> {
        &self.plain
    }

    /// Whether a journal is configured (opened or not).
    pub fn has_journal(&self) -> bool {
        !matches!(self.journal, JournalSource::None)
    }

    /// The receiver with the journal, opening the journal if this is the first request that
    /// needs it. `Ok(None)` when no journal is configured. Errors: the journal's open.
    fn journaled(&self) -> Result<Option<&Arc<Receiver>>> {
        match &self.journal {
            JournalSource::None => Ok(None),
            JournalSource::Given(receiver) => Ok(Some(receiver)),
            JournalSource::Lazy { url, options, opened } => {
                if let Some(receiver) = opened.get() {
                    return Ok(Some(receiver));
                }
                let journal = Arc::new(Journal::open(url, options)?);
                let mut config = self.config.clone();
                config.set_journal(journal);
                let receiver = Arc::new(Receiver::new(config)?);
                // Inside the journal's fork guard: a fork never happens while a thread is in the
                // `OnceLock`'s set, which a child would inherit running and wait on for ever.
                let _inside = crate::journal::fork_guard::enter()?;
                // Two threads opening at once: one receiver is kept, the other dropped.
                let _ = opened.set(receiver);
                Ok(opened.get())
            }
        }
    }

    /// Takes one request: `method` as the request line has it (`POST`), the rest as the web
    /// server saw it. See the module documentation for every answer.
    pub fn receive<'a>(&self, method: &[u8], request: &Request<'a>) -> Received<'a> {
        let retry = self.retry_after;
        if method != b"POST" {
            return Received::Answer(Answer::method_not_allowed(method));
        }
        if let Err(error) = self.plain.authenticate(request) {
            let response = self.plain.error_response(&error);
            return Received::Answer(Answer::error_body(
                response.http_status,
                response.body.into_bytes(),
                format!("refused: {error}"),
                retry,
            ));
        }
        let event = match self.plain.parse(request.body) {
            Ok(event) => event,
            Err(error) => {
                let mut log = format!("refused: {error}");
                if error.ids.as_ref().is_some_and(|ids| ids.index.is_some()) {
                    match self.journaled() {
                        Ok(Some(receiver)) => receiver.record_refusal(&error),
                        Ok(None) => {}
                        Err(journal) => log.push_str(&format!(" (its index is not recorded: {journal})")),
                    }
                }
                let response = self.plain.error_response(&error);
                return Received::Answer(Answer::error_body(
                    response.http_status,
                    response.body.into_bytes(),
                    log,
                    retry,
                ));
            }
        };
        if !self.has_journal() {
            return Received::Handle(Box::new(Handling {
                event,
                receiver: self.plain.clone(),
                delivery: None,
                claim: None,
                log: String::new(),
            }));
        }
        let delivery = Delivery::of(&event);
        if delivery.key().is_none() {
            return Received::Handle(Box::new(self.unclaimed(event, delivery)));
        }
        let receiver = match self.journaled() {
            Ok(receiver) => receiver.expect("a journal is configured").clone(),
            Err(error) => return Received::Answer(Answer::error(&error, "journal", retry)),
        };
        let journal = receiver.journal().expect("the journaled receiver has its journal");
        let begun = if self.optimistic { journal.begin_optimistic(&delivery) } else { journal.begin(&delivery) };
        match begun {
            Ok(Begin::New(claim)) => {
                let log = if claim.attempt() > 1 { format!("attempt {}", claim.attempt()) } else { String::new() };
                Received::Handle(Box::new(Handling {
                    event,
                    receiver,
                    delivery: Some(delivery),
                    claim: Some(claim),
                    log,
                }))
            }
            Ok(Begin::Done(stored)) => {
                Received::Answer(Answer::reply(200, stored, "repeated delivery answered from the journal".to_owned()))
            }
            Ok(Begin::NotReplayable) => Received::Handle(Box::new(Handling {
                event,
                receiver,
                delivery: Some(delivery),
                claim: None,
                log: String::new(),
            })),
            Ok(Begin::Busy) => {
                let problem = "another worker is handling this delivery and did not finish within the busy wait";
                Received::Answer(Answer::error(&Error::field(ErrorKind::Busy, "event", problem), "journal", retry))
            }
            Ok(Begin::Conflict(error)) => Received::Answer(Answer::error(&error, "journal", retry)),
            Err(error) => Received::Answer(Answer::error(&error, "journal", retry)),
        }
    }

    /// An event never answered from the journal (a balance query, an event without key): its
    /// index, when it has one, is recorded best effort, and the logic runs whatever the journal
    /// does.
    fn unclaimed<'a>(&self, event: Event<'a>, delivery: Delivery) -> Handling<'a> {
        let mut log = String::new();
        if delivery.index().is_some() {
            let recorded = self.journaled().and_then(|receiver| {
                let journal = receiver.and_then(|r| r.journal()).expect("a journal is configured");
                journal.begin(&delivery)
            });
            if let Err(error) = recorded {
                log = format!("journal: the index of this {} is not recorded: {error}", delivery.name());
            }
        }
        Handling { event, receiver: self.plain.clone(), delivery: Some(delivery), claim: None, log }
    }

    /// The final answer after the partner's logic ran on an event `receive` handed out, with
    /// what became of its claim (`claim`, from the `Handling`). See the module documentation.
    /// `delivery` is the handling's (needed to answer a repeat found only now, when optimistic).
    pub fn complete(
        &self,
        receiver: &Receiver,
        claim: Option<&Claim>,
        delivery: Option<&Delivery>,
        outcome: Outcome<'_>,
    ) -> (Answer, Settled) {
        let retry = self.retry_after;
        let failure = match outcome {
            Outcome::Failed(why) => format!("logic: {why}"),
            Outcome::Reply { body: [], .. } => "logic: no reply was built for the event".to_owned(),
            Outcome::Reply { staged, .. } if claim.is_none() && !staged.is_empty() => {
                "logic: statements were staged on an event that holds no claim: none of them ran".to_owned()
            }
            Outcome::Reply { status, body, staged } => {
                let Some(claim) = claim else {
                    return (Answer::reply(status, body.to_vec(), String::new()), Settled::Unclaimed);
                };
                let journal = receiver.journal().expect("a claimed event's receiver has its journal");
                let finished = match delivery.filter(|_| self.optimistic) {
                    Some(delivery) => journal.finish_optimistic(claim, delivery, body, staged),
                    None => journal.finish_with(claim, body, staged).map(|()| Finished::Stored),
                };
                match finished {
                    Ok(Finished::Stored) => {
                        return (Answer::reply(status, body.to_vec(), String::new()), Settled::Finished);
                    }
                    Ok(Finished::Answered(found)) => return (self.found_at_finish(journal, found), Settled::Finished),
                    Err(error) if error.kind == ErrorKind::ClaimLost => {
                        return (Answer::unavailable(format!("journal: {error}"), retry), Settled::Lost(error));
                    }
                    Err(error) => format!("journal: {error}"),
                }
            }
        };
        let Some(claim) = claim else { return (Answer::unavailable(failure, retry), Settled::Unclaimed) };
        let journal = receiver.journal().expect("a claimed event's receiver has its journal");
        match journal.abandon(claim) {
            Ok(()) => (Answer::unavailable(format!("{failure}; the claim is released"), retry), Settled::Released),
            Err(error) if error.kind == ErrorKind::ClaimLost => {
                (Answer::unavailable(format!("{failure}; {error}"), retry), Settled::Lost(error))
            }
            Err(error) => (
                Answer::unavailable(
                    format!("{failure}; releasing the claim failed too, its lease ends it: {error}"),
                    retry,
                ),
                Settled::Held,
            ),
        }
    }

    /// The answer to a key the journal turned out to hold when an optimistic claim was finished:
    /// the logic's run took no effect (none of its staged statements ran).
    fn found_at_finish(&self, journal: &Journal, found: Begin) -> Answer {
        let retry = self.retry_after;
        match found {
            Begin::Done(stored) => Answer::reply(200, stored, "repeated delivery answered from the journal".to_owned()),
            Begin::Conflict(error) => Answer::error(&error, "journal", retry),
            Begin::New(taken) => {
                // Handled before, its reply pruned or its content changed: the logic must know
                // it (`Claim::reply_pruned`, `Claim::differing`); released for the next delivery.
                let released = journal.abandon(&taken).err().map(|e| format!("; releasing it failed: {e}"));
                let log = format!(
                    "journal: {} was handled before and must run again knowing it (attempt {}){}",
                    taken.key(),
                    taken.attempt(),
                    released.unwrap_or_default()
                );
                Answer::unavailable(log, retry)
            }
            Begin::Busy | Begin::NotReplayable => {
                let problem = "another worker is handling this delivery and did not finish within the busy wait";
                Answer::error(&Error::field(ErrorKind::Busy, "event", problem), "journal", retry)
            }
        }
    }

    /// The whole request in one call, for Rust hosts: `logic` gets the event and the receiver
    /// to build its reply with, and answers the reply (status, body, staged statements) or why
    /// it failed.
    pub fn serve(
        &self,
        method: &[u8],
        request: &Request<'_>,
        logic: impl FnOnce(&Event<'_>, &Receiver) -> std::result::Result<Reply, String>,
    ) -> Answer {
        let handling = match self.receive(method, request) {
            Received::Answer(answer) => return answer,
            Received::Handle(handling) => handling,
        };
        let result = logic(&handling.event, &handling.receiver);
        let outcome = match &result {
            Ok(reply) => Outcome::Reply { status: reply.status, body: &reply.body, staged: &reply.staged },
            Err(why) => Outcome::Failed(why),
        };
        let (mut answer, _) =
            self.complete(&handling.receiver, handling.claim.as_ref(), handling.delivery.as_ref(), outcome);
        if answer.log.is_empty() {
            answer.log = handling.log;
        }
        answer
    }
}

/// A reply of the partner's logic, for `Endpoint::serve`.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    pub staged: Vec<Staged>,
}
