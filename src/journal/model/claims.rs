//! Claims: what `begin` decides when the key is already in the journal, and the claim a worker
//! holds between `begin` and `finish`, shared by both backends.

use crate::error::{Error, ErrorKind, Result};

use super::key::{Delivery, conflict_error, decisive_differences};

/// The state of a journal row, as stored (`claimed`, `done`, `abandoned`) or, for a delivery
/// refused by validation, `refused`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordState {
    /// A worker holds the claim until `finish`, `abandon` or the end of its lease.
    Claimed,
    /// The reply is stored; every later delivery gets it.
    Done,
    /// Released by `abandon`: the next delivery runs the partner's logic again.
    Abandoned,
    /// Refused by validation (`Journal::record_refused`); its index counts as seen.
    Refused,
    /// Abandoned, then closed by an operator (`Journal::close_unfinished`): no longer counted
    /// unfinished nor fetched; a later delivery of it still runs as the next attempt.
    Closed,
    /// Done, then compacted by `Journal::prune`: the reply and the content are gone; a digest of
    /// the decisive content and the reply's outcome are kept. A later delivery of it runs as the
    /// next attempt, flagged `Claim::reply_pruned` (its ledger's unique key decides); one with
    /// other decisive content is a conflict.
    Pruned,
}

impl RecordState {
    /// The name stored in the journal.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordState::Claimed => "claimed",
            RecordState::Done => "done",
            RecordState::Abandoned => "abandoned",
            RecordState::Refused => "refused",
            RecordState::Closed => "closed",
            RecordState::Pruned => "pruned",
        }
    }

    pub(crate) fn parse(text: &str) -> Result<RecordState> {
        match text {
            "claimed" => Ok(RecordState::Claimed),
            "done" => Ok(RecordState::Done),
            "abandoned" => Ok(RecordState::Abandoned),
            "refused" => Ok(RecordState::Refused),
            "closed" => Ok(RecordState::Closed),
            "pruned" => Ok(RecordState::Pruned),
            other => {
                Err(Error::new(ErrorKind::Journal, format!("journal: unknown delivery state {other:?} in the journal")))
            }
        }
    }
}

/// A delivery claimed by this worker: run the partner's logic, then `Journal::finish` it with the
/// reply (or `Journal::abandon` it after a transient failure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub(crate) key: String,
    pub(crate) token: [u8; 16],
    pub(crate) attempt: i64,
    pub(crate) index: Option<i64>,
    pub(crate) transaction_id: Option<i64>,
    /// When the key came before with other decisive content and was never finished: the
    /// fields that differ (`name: first X, now Y`); empty otherwise.
    pub(crate) differing: Vec<String>,
    /// The process that claimed it: a forked child holds a copy of its parent's claims, which
    /// are not its own to finish, abandon or release.
    pub(crate) pid: u32,
    /// Whether the delivery was handled before and its reply pruned (see `reply_pruned`).
    pub(crate) reply_pruned: bool,
    /// A claim `begin` wrote nothing for (`JournalOptions::claim_at_finish`, a key the journal
    /// did not hold): the delivery that `finish` stores done, or `abandon` abandoned. `None` for
    /// a claim `begin` wrote.
    pub(crate) unwritten: Option<Box<Unwritten>>,
}

/// What `finish` writes for a claim `begin` wrote nothing for: the delivery's name and content
/// as the journal stores them (see `key::Delivery::stored`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unwritten {
    pub name: String,
    pub content: String,
    /// The journal's numbering when `begin` handed it out: stored only in that numbering (an
    /// operator's `renumber` meanwhile makes its `finish` and `abandon` fail as `ClaimLost`,
    /// as it renames a written claim of the old numbering).
    pub numbering: i64,
}

impl Claim {
    /// The claim `begin` hands out under `JournalOptions::claim_at_finish` for `key`, which the
    /// journal does not hold, in its numbering `numbering`: the first attempt, nothing written.
    pub(crate) fn unwritten(delivery: &Delivery, key: &str, numbering: i64) -> Result<Claim> {
        Ok(Claim {
            key: key.to_owned(),
            token: new_token()?,
            attempt: 1,
            index: delivery.index(),
            transaction_id: delivery.transaction_id(),
            differing: Vec::new(),
            pid: std::process::id(),
            reply_pruned: false,
            unwritten: Some(Box::new(Unwritten {
                name: delivery.name().to_owned(),
                content: delivery.stored().to_owned(),
                numbering,
            })),
        })
    }

    /// Whether this process took the claim (not a child forked since, holding a copy).
    pub fn held_by_this_process(&self) -> bool {
        self.pid == std::process::id()
    }

    /// The error for `verb` (finish, abandon) of a claim a forked child holds a copy of.
    pub(crate) fn not_this_process(&self, verb: &str) -> Error {
        Error::new(
            ErrorKind::ClaimLost,
            format!(
                "journal: cannot {verb} {} (attempt {}): the claim was taken by process {}, not this one (a child forked since holds a copy, not the claim); nothing was stored",
                self.key, self.attempt, self.pid
            ),
        )
    }

    /// The decisive fields in which this delivery differs from an earlier, never finished one
    /// of the same key (`moneyWon: first 100, now 200`); empty when it does not. Such a delivery
    /// is handed out as new (nothing was stored for the first, so the first was never answered
    /// as handled) and recorded as an open conflict for the operator; the partner's ledger, keyed
    /// by `transactionId`, absorbs a second credit if the first attempt's logic had run.
    pub fn differing(&self) -> &[String] {
        &self.differing
    }

    /// Whether this delivery was handled before, longer ago than the journal keeps replies
    /// (`Journal::prune` compacted it): the reply is gone, the same decisive content was seen.
    /// It is handed out as the next attempt; the partner's ledger, keyed by `transactionId`,
    /// decides, exactly as after a crash between its commit and `finish`.
    pub fn reply_pruned(&self) -> bool {
        self.reply_pruned
    }

    /// Which attempt this is: 1 for the first delivery, 2 and on after a worker's lease expired
    /// or after `abandon`. From 2 on, the partner's logic may have run before: its ledger must
    /// refuse a second credit for the same `transactionId`. With
    /// `JournalOptions::claim_at_finish`, attempt 1 does not say that: a worker that died before
    /// its `finish` left nothing, so the next delivery is attempt 1 again, and two deliveries at
    /// once are both attempt 1; only staged statements are made exactly once by the journal,
    /// any other effect is the ledger's unique key's to absorb on every attempt.
    pub fn attempt(&self) -> i64 {
        self.attempt
    }

    /// The delivery's key (`gameSessionBuyRefund:900002`).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The delivery's index, if it carried one.
    pub fn index(&self) -> Option<i64> {
        self.index
    }

    /// The refund's or payout's `transactionId`.
    pub fn transaction_id(&self) -> Option<i64> {
        self.transaction_id
    }
}

/// A fresh random claim token.
pub(crate) fn new_token() -> Result<[u8; 16]> {
    let mut token = [0; 16];
    getrandom::fill(&mut token)
        .map_err(|e| Error::new(ErrorKind::Journal, format!("journal: no random claim token: {e}")))?;
    Ok(token)
}

/// The row a key already has, read inside the transaction that may change it.
#[derive(Debug)]
pub(crate) struct Existing {
    pub content: String,
    pub state: RecordState,
    pub attempts: i64,
    pub lease_until_ms: i64,
    pub reply: Option<Vec<u8>>,
    /// The time of the transaction, on the same clock as `lease_until_ms`.
    pub now_ms: i64,
    /// Whether the row has a `finished_ms` although it is not done: the delivery was finished,
    /// then compacted by `prune` (the only way out of `done`) and taken over since; the takeover
    /// brought its full content back, so this is what says it was handled before.
    pub finished_before: bool,
}

/// What `begin` does with a key the journal holds.
#[derive(Debug)]
pub(crate) enum Decision {
    /// Other decisive content on a finished delivery: refuse, keep the first (count a conflict,
    /// record it with the differing fields), unless this content was handed out before on the
    /// key (see `TakeOver`) and a reply is stored: then answer the stored reply, which is the
    /// reply to it too. `stored` is `None` when the reply was pruned.
    Conflict { error: Error, differing: Vec<String>, stored: Option<Vec<u8>> },
    /// Done: answer with the stored reply (count a replay).
    Replay(Vec<u8>),
    /// Abandoned, or claimed past its lease: claim it again as attempt `attempt`.
    /// `reopened` when it was abandoned (it was not counted in progress any more). `differing`
    /// when its decisive content differs from the stored one: the row keeps the first content
    /// (what the first attempt may have acted on) and the conflict is recorded as handed out,
    /// so that a later delivery of either content is answered with the one stored reply.
    /// `pruned` when the row was compacted by `prune` (the claim says `reply_pruned`).
    TakeOver { attempt: i64, reopened: bool, differing: Vec<String>, pruned: bool },
    /// Another worker holds a live claim: wait, then look again.
    Held,
}

pub(crate) fn decide(existing: Existing, delivery: &Delivery) -> Decision {
    let differing = decisive_differences(&existing.content, delivery.fingerprint());
    let expired = existing.lease_until_ms <= existing.now_ms;
    // A compacted delivery taken over and released (abandoned, closed) or left past its lease is
    // still a delivery handled before whose reply was pruned: decided as `Pruned` is, so that
    // its next attempt is flagged too.
    let state = match existing.state {
        RecordState::Abandoned | RecordState::Closed if existing.finished_before => RecordState::Pruned,
        RecordState::Claimed if expired && existing.finished_before => RecordState::Pruned,
        state => state,
    };
    match state {
        RecordState::Done if differing.is_empty() => Decision::Replay(existing.reply.unwrap_or_default()),
        RecordState::Done => Decision::Conflict {
            error: conflict_error(delivery, &differing),
            differing,
            stored: Some(existing.reply.unwrap_or_default()),
        },
        RecordState::Pruned if differing.is_empty() => Decision::TakeOver {
            attempt: existing.attempts + 1,
            reopened: existing.state != RecordState::Claimed,
            differing,
            pruned: true,
        },
        RecordState::Pruned => {
            Decision::Conflict { error: conflict_error(delivery, &differing), differing, stored: None }
        }
        RecordState::Abandoned | RecordState::Closed => {
            Decision::TakeOver { attempt: existing.attempts + 1, reopened: true, differing, pruned: false }
        }
        RecordState::Claimed if expired => {
            Decision::TakeOver { attempt: existing.attempts + 1, reopened: false, differing, pruned: false }
        }
        RecordState::Claimed | RecordState::Refused => Decision::Held,
    }
}

/// The claim `begin` hands out when the key's row is a claim carrying `token`, the token of the
/// very call looking: this worker's own claim, made (or taken over) by a statement whose answer
/// was lost with its connection and that was run again on a fresh one. It is this worker's, at
/// the attempt stored (never another worker's claim to wait for, nor one to take over as the
/// next attempt); `differing` as it was when claimed. `None` when the row is not such a claim.
pub(crate) fn own_claim(
    existing: &Existing,
    holder: Option<&[u8]>,
    token: &[u8; 16],
    delivery: &Delivery,
) -> Option<(i64, Vec<String>)> {
    (existing.state == RecordState::Claimed && holder == Some(&token[..]))
        .then(|| (existing.attempts, decisive_differences(&existing.content, delivery.fingerprint())))
}

/// Whether the row's state and attempt count (`now`) show `claim` settled as `state` (`Done` by
/// its `finish`, `Abandoned` by its `abandon`) at its own attempt: a retried statement whose
/// first run committed before its answer was lost. Another worker finishes or abandons the key
/// only after taking it over, at a higher attempt.
pub(crate) fn settled_at_own_attempt(claim: &Claim, now: Option<(RecordState, i64)>, state: RecordState) -> bool {
    now == Some((state, claim.attempt))
}

/// The error for `finish` or `abandon` of a claim written at finish (`Claim::unwritten`, handed
/// out in numbering `then`) after an operator renumbered the journal.
pub(crate) fn renumbered_error(claim: &Claim, verb: &str, then: i64) -> Error {
    Error::new(
        ErrorKind::ClaimLost,
        format!(
            "journal: cannot {verb} {} (attempt {}): the journal was renumbered since it was claimed (in numbering {then}), and it was claimed at finish; nothing was stored",
            claim.key, claim.attempt
        ),
    )
}

/// The error for `finish` or `abandon` of a claim this worker no longer holds; `now` is the row's
/// state and attempt count (`None`: the key is not in the journal at all).
pub(crate) fn lost_error(claim: &Claim, verb: &str, now: Option<(RecordState, i64)>) -> Error {
    let why = match now {
        None => "the journal has no such delivery".to_owned(),
        Some((state, _)) if claim.unwritten.is_some() => format!(
            "it was claimed at finish and another delivery of it was stored first (now {}); none of this one's staged statements took effect",
            state.as_str()
        ),
        Some((state, attempts)) if attempts > claim.attempt => {
            format!("its lease expired and it was taken over by attempt {attempts} (now {})", state.as_str())
        }
        Some((RecordState::Done, _)) => "it is finished already".to_owned(),
        Some((RecordState::Abandoned, _)) => "it was abandoned".to_owned(),
        Some((state, _)) => format!("it is {}", state.as_str()),
    };
    Error::new(
        ErrorKind::ClaimLost,
        format!(
            "journal: cannot {verb} {} (attempt {}): the claim is no longer held: {why}; nothing was stored",
            claim.key, claim.attempt
        ),
    )
}
