//! The export of handled deliveries, for reconciliation with the service's reports: every
//! delivery the journal holds whose first delivery falls in a period, in the journal's order,
//! with what its stored content and reply tell (players, amounts, game session, outcome).
//!
//! The journal is read a page at a time (`PAGE` rows by their `id`), each page in its own short
//! read transaction: memory stays constant however many rows a period holds, and no writer waits
//! for the export. A page first finds the `id`s of its next `PAGE` rows (the primary key alone),
//! then reads those of them created in the period, so that one transaction never reads more than
//! `PAGE` rows, even across a stretch of the journal outside the period. The whole journal is
//! gone through once: `created_ms` has no index (an index on it would cost every claim a write),
//! and the order of `id`s is not that of `created_ms` (a step of the wall clock, and retention,
//! which moves a compacted delivery to a new row at the end). For the same reason the number of
//! rows of a period is not counted ahead (it would be a second pass): `Journal::export_extent`
//! gives the range of `id`s instead, for a progress bar over the pass.
//!
//! Since retention moves rows, an export would meet a delivery compacted behind it twice, and miss
//! one compacted ahead of it: an export holds the journal's lock `EXPORT_LOCK` while it pages
//! (`ExportLock`), and `Journal::prune` does nothing while it is held. One export runs at a time
//! per journal; another is refused with `Busy` naming it.
//!
//! A row whose content is not a JSON object, or lacks a field, exports with that column empty:
//! the export never fails on what a row holds. A compact record (state `pruned`: its content
//! replaced by `{"digest":"...","outcome":"..."}`, its reply removed) exports its key, name,
//! `transactionId`, index, times, attempts and the outcome it kept, and no player or amount.
//!
//! A delivery claimed while the export passes its place may be left out: export a period that
//! has ended. Deliveries refused by validation are not exported (they were never handled; see
//! `Journal::status`, `refused`).

use std::time::{Duration, Instant};

use serde_json::{Map, Value as Json};

use crate::error::{Error, ErrorKind, Result};

use super::Journal;
use super::lock::{EXPORT_LOCK, host_name};
use super::sql::{Sql, SqlRow, Value, row};

/// Rows of the journal per page, each page one read transaction.
pub(crate) const PAGE: i64 = 1000;

/// One delivery as exported: plain data owned by whoever holds it (`Journal::export` lends each
/// row to its callback for the duration of the call). An empty (`None`) column is a value the
/// delivery does not have (a refund has no amount) or that its stored content does not tell
/// (a compact record's player, an unreadable content).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportRow {
    /// The journal's row number: rows come in its order (first claims, and a delivery compacted
    /// by retention where it was compacted). A position for a progress bar (see
    /// `Journal::export_extent`); not a column of the files.
    pub id: i64,
    /// The index of the delivery's first delivery.
    pub index: Option<i64>,
    /// The journal's key (`jackpotPayout:900002`; `event#17#bonusGranted` for an event keyed by
    /// its index).
    pub key: String,
    /// The event's name (`event`, or `action` for an action callback).
    pub event: String,
    pub transaction_id: Option<i64>,
    pub player_identifier: Option<String>,
    pub player_partner_identifier: Option<String>,
    /// `moneyWon`, `coinsWon`, `isMoney` and `currencyISO4217` of a payout.
    pub money_won: Option<i64>,
    pub coins_won: Option<i64>,
    pub is_money: Option<bool>,
    pub currency: Option<String>,
    pub game_session_id: Option<i64>,
    /// For a finished delivery, what its stored reply tells: `success`, `failure` or `unknown`
    /// (see `reply_outcome`); for a compact record, the outcome it kept; for one not finished,
    /// its state (`claimed`, `abandoned`, `closed`).
    pub outcome: String,
    /// The stored reply's `errorMessage`, when it has one that is not empty.
    pub error_message: Option<String>,
    /// `done`, `pruned`, `claimed`, `abandoned` or `closed`.
    pub state: String,
    /// How many times the delivery was claimed.
    pub attempts: i64,
    /// When it was first delivered (claimed), in ms since the Unix epoch (on PostgreSQL, the
    /// server's clock): the time the period is about.
    pub first_delivery_ms: i64,
    /// Its last change: the last claim, its finish, abandonment or closing. A repeat answered
    /// from the journal changes nothing, so this is not the time of the last repeat.
    pub last_update_ms: i64,
    /// When its reply was stored.
    pub finished_ms: Option<i64>,
}

/// What a stored reply tells of the delivery's handling: `success` or `failure` (the `success`
/// field of the reply's object, or of the one object its wrapper holds, as in
/// `{"refund":{"success":true,"errorMessage":""}}`), else `unknown`.
pub(crate) fn reply_outcome(reply: &[u8]) -> &'static str {
    serde_json::from_slice::<Json>(reply).map_or("unknown", |json| outcome_of(&json))
}

/// The object of a reply that carries `success`: the reply's own, or the one its wrapper holds.
fn reply_body(reply: &Json) -> Option<&Map<String, Json>> {
    let outer = reply.as_object()?;
    if outer.contains_key("success") {
        return Some(outer);
    }
    outer.values().find_map(|inner| inner.as_object().filter(|inner| inner.contains_key("success")))
}

fn outcome_of(reply: &Json) -> &'static str {
    match reply_body(reply).and_then(|body| body.get("success")).and_then(Json::as_bool) {
        Some(true) => "success",
        Some(false) => "failure",
        None => "unknown",
    }
}

/// The journal's lock `EXPORT_LOCK`, held by an export while it pages through the deliveries
/// (see the module's text), under a lease renewed as the export goes, so that the lock of an
/// export whose process died lapses by itself. Borrows the journal; released when dropped.
pub(crate) struct ExportLock<'j> {
    journal: &'j Journal,
    holder: String,
    /// The process that took it: a forked child dropping a copy leaves it to the parent.
    pid: u32,
    renewed: Instant,
}

impl<'j> ExportLock<'j> {
    /// How long the lock holds without renewal.
    const LEASE: Duration = Duration::from_secs(15 * 60);
    /// How often `keep` renews it.
    const RENEW_AFTER: Duration = Duration::from_secs(30);

    /// Takes the lock. Errors: `Busy` naming the export that holds it and since when.
    pub fn take(journal: &'j Journal) -> Result<ExportLock<'j>> {
        let run = super::hex::hex(&super::claims::new_token()?[..4]);
        let holder = format!("export, pid {} on {} (run {run})", std::process::id(), host_name());
        match journal.take_lock(EXPORT_LOCK, &holder, Self::LEASE) {
            Ok(()) => Ok(ExportLock { journal, holder, pid: std::process::id(), renewed: Instant::now() }),
            Err(error) if error.kind == ErrorKind::Busy => {
                let held = error.message.strip_prefix("lock: ").unwrap_or(&error.message);
                Err(Error::field(
                    ErrorKind::Busy,
                    "lock",
                    format!("another export of this journal is running, so this one does not start: {held}"),
                ))
            }
            Err(error) => Err(error),
        }
    }

    /// Renews the lease when due, before the next page. Errors: `Journal` when the export was
    /// held up longer than the lease (its reader stopped reading): retention may have run
    /// meanwhile, so what it wrote cannot be trusted.
    pub fn keep(&mut self) -> Result<()> {
        let since = self.renewed.elapsed();
        if since >= Self::LEASE {
            return Err(Error::new(
                ErrorKind::Journal,
                format!(
                    "the export was held up {} s between two pages, longer than its lock's lease of {} s: retention may have moved rows meanwhile; export again",
                    since.as_secs(),
                    Self::LEASE.as_secs()
                ),
            ));
        }
        if since >= Self::RENEW_AFTER {
            self.journal.take_lock(EXPORT_LOCK, &self.holder, Self::LEASE)?;
            self.renewed = Instant::now();
        }
        Ok(())
    }
}

impl Drop for ExportLock<'_> {
    fn drop(&mut self) {
        if self.pid == std::process::id() {
            let _ = self.journal.release_lock(EXPORT_LOCK, &self.holder);
        }
    }
}

/// Refuses a period that holds no time: `until_ms` must be after `since_ms`.
pub(crate) fn check_period(since_ms: i64, until_ms: i64) -> Result<()> {
    if until_ms <= since_ms {
        let problem = format!("must be after since_ms ({since_ms}), got {until_ms}");
        return Err(Error::field(ErrorKind::InvalidArgument, "until_ms", problem));
    }
    Ok(())
}

/// The lowest and highest `id` of the journal's deliveries; `None` when it holds none.
pub(crate) fn extent(sql: &mut dyn Sql) -> Result<Option<(i64, i64)>> {
    let ends = row(sql, "SELECT MIN(id), MAX(id) FROM sp_journal_delivery", &[])?;
    Ok(ends.and_then(|r| Some((r.first()?.int()?, r.get(1)?.int()?))))
}

/// The page after `id` `after`: the highest `id` among the next `PAGE` rows of the journal, and
/// those of them whose `created_ms` lies in `since_ms..until_ms`, in order; `None` when no row
/// follows `after`.
pub(crate) fn page(
    sql: &mut dyn Sql,
    after: i64,
    since_ms: i64,
    until_ms: i64,
) -> Result<Option<(i64, Vec<ExportRow>)>> {
    let last = super::sql::int(
        sql,
        "SELECT MAX(id) FROM (SELECT id FROM sp_journal_delivery WHERE id > ?1 ORDER BY id LIMIT ?2) AS page",
        &[after.into(), PAGE.into()],
    )?;
    let Some(last) = last else { return Ok(None) };
    let rows = sql.rows(
        "SELECT id, first_index, key, name, transaction_id, content, state, attempts, created_ms, updated_ms, finished_ms, reply FROM sp_journal_delivery WHERE id > ?1 AND id <= ?2 AND created_ms >= ?3 AND created_ms < ?4 ORDER BY id",
        &[after.into(), last.into(), since_ms.into(), until_ms.into()],
    )?;
    Ok(Some((last, rows.iter().map(row_of).collect())))
}

/// A row of `page`'s query as exported.
fn row_of(r: &SqlRow) -> ExportRow {
    let num = |i: usize| r.get(i).and_then(Value::int);
    let text = |i: usize| r.get(i).and_then(Value::text);
    let content: Map<String, Json> =
        text(5).and_then(|c| serde_json::from_str(&super::key::from_stored(&c)).ok()).unwrap_or_default();
    let field_text = |name: &str| content.get(name).and_then(Json::as_str).map(str::to_owned);
    let field_int = |name: &str| content.get(name).and_then(Json::as_i64);
    let state = text(6).unwrap_or_default();
    let reply = text(11);
    let outcome = match state.as_str() {
        "done" => reply.as_deref().map_or("unknown", |reply| reply_outcome(reply.as_bytes())).to_owned(),
        "pruned" => match content.get("outcome").and_then(Json::as_str) {
            Some(kept @ ("success" | "failure")) => kept.to_owned(),
            _ => "unknown".to_owned(),
        },
        other => other.to_owned(),
    };
    let error_message = reply
        .and_then(|reply| serde_json::from_str::<Json>(&reply).ok())
        .as_ref()
        .and_then(reply_body)
        .and_then(|body| body.get("errorMessage"))
        .and_then(Json::as_str)
        .filter(|message| !message.is_empty())
        .map(str::to_owned);
    ExportRow {
        id: num(0).unwrap_or(0),
        index: num(1),
        key: text(2).unwrap_or_default(),
        event: text(3).unwrap_or_default(),
        transaction_id: num(4),
        player_identifier: field_text("playerIdentifier"),
        player_partner_identifier: field_text("playerPartnerIdentifier"),
        money_won: field_int("moneyWon"),
        coins_won: field_int("coinsWon"),
        is_money: content.get("isMoney").and_then(Json::as_bool),
        currency: field_text("currencyISO4217"),
        game_session_id: field_int("gameSessionId"),
        outcome,
        error_message,
        state,
        attempts: num(7).unwrap_or(0),
        first_delivery_ms: num(8).unwrap_or(0),
        last_update_ms: num(9).unwrap_or(0),
        finished_ms: num(10),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_read_one_level_down() {
        assert_eq!(reply_outcome(br#"{"refund":{"success":true,"errorMessage":""}}"#), "success");
        assert_eq!(reply_outcome(br#"{"payout":{"success":false,"errorMessage":"no"}}"#), "failure");
        assert_eq!(reply_outcome(br#"{"success":false}"#), "failure");
        assert_eq!(reply_outcome(br#"{"refund":{"success":"yes"}}"#), "unknown");
        assert_eq!(reply_outcome(br#"{"refund":{}}"#), "unknown");
        assert_eq!(reply_outcome(br#"[{"success":true}]"#), "unknown");
        assert_eq!(reply_outcome(b"not json"), "unknown");
        assert_eq!(reply_outcome(b""), "unknown");
    }

    /// A row as `page` reads it: id, first_index, key, name, transaction_id, content, state,
    /// attempts, created_ms, updated_ms, finished_ms, reply.
    fn sql_row(key: &str, content: &str, state: &str, reply: Option<&str>) -> SqlRow {
        vec![
            Value::from(7),
            Value::from(41),
            Value::from(key),
            Value::from(key.split(':').next()),
            Value::from(900_002),
            Value::from(content),
            Value::from(state),
            Value::from(2),
            Value::from(1_000),
            Value::from(2_000),
            Value::Int(reply.map(|_| 2_000)),
            Value::from(reply),
        ]
    }

    #[test]
    fn a_payout_exports_its_player_amounts_and_outcome() {
        let content = r#"{"event":"jackpotPayout","jackpotIdentifier":"j","playerIdentifier":"p-1","playerPartnerIdentifier":null,"currencyISO4217":"EUR","moneyWon":1500,"coinsWon":0,"isMoney":true,"epochReleasedMillis":1,"isPrimary":true,"transactionId":900002,"buyTransactionId":4,"partnerGameRequestIdentifier":"r","gameSessionId":3,"gameId":2,"bonusCode":null,"isMobile":null}"#;
        let reply = r#"{"payout":{"success":false,"errorMessage":"jackpot unknown"}}"#;
        let row = row_of(&sql_row("jackpotPayout:900002", content, "done", Some(reply)));
        // The content as the journal stores it (by position) reads the same.
        let stored = super::super::key::stored_form(content);
        assert!(stored.starts_with('['), "{stored}");
        assert_eq!(row_of(&sql_row("jackpotPayout:900002", &stored, "done", Some(reply))), row);
        assert_eq!(
            row,
            ExportRow {
                id: 7,
                index: Some(41),
                key: "jackpotPayout:900002".to_owned(),
                event: "jackpotPayout".to_owned(),
                transaction_id: Some(900_002),
                player_identifier: Some("p-1".to_owned()),
                player_partner_identifier: None,
                money_won: Some(1500),
                coins_won: Some(0),
                is_money: Some(true),
                currency: Some("EUR".to_owned()),
                game_session_id: Some(3),
                outcome: "failure".to_owned(),
                error_message: Some("jackpot unknown".to_owned()),
                state: "done".to_owned(),
                attempts: 2,
                first_delivery_ms: 1_000,
                last_update_ms: 2_000,
                finished_ms: Some(2_000),
            }
        );
    }

    #[test]
    fn a_refund_has_no_amount_and_an_empty_error_message_is_none() {
        let content = r#"{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-1","playerIdentifier":null,"playerPartnerIdentifier":"pp-1","transactionId":900002,"buyTransactionId":800001,"gameSessionId":5,"partnerGameRequestIdentifier":"r-1","gameId":7,"isMobile":false,"bonusCode":null}"#;
        let row = row_of(&sql_row(
            "gameSessionBuyRefund:900002",
            content,
            "done",
            Some(r#"{"refund":{"success":true,"errorMessage":""}}"#),
        ));
        assert_eq!((row.player_identifier, row.player_partner_identifier.as_deref()), (None, Some("pp-1")));
        assert_eq!((row.money_won, row.coins_won, row.is_money, row.currency), (None, None, None, None));
        assert_eq!((row.game_session_id, row.outcome.as_str(), row.error_message), (Some(5), "success", None));
    }

    #[test]
    fn compact_records_unreadable_contents_and_unfinished_deliveries_export_what_is_left() {
        let compact =
            row_of(&sql_row("jackpotPayout:900002", r#"{"digest":"ab12","outcome":"failure"}"#, "pruned", None));
        assert_eq!((compact.outcome.as_str(), compact.state.as_str()), ("failure", "pruned"));
        assert_eq!(
            (compact.key.as_str(), compact.transaction_id, compact.index),
            ("jackpotPayout:900002", Some(900_002), Some(41))
        );
        assert_eq!((compact.player_identifier, compact.money_won, compact.error_message), (None, None, None));
        let odd = row_of(&sql_row("jackpotPayout:900002", r#"{"digest":"ab12","outcome":"maybe"}"#, "pruned", None));
        assert_eq!(odd.outcome, "unknown");
        let unreadable = row_of(&sql_row("gameSessionBuyRefund:900002", "not json", "done", Some("<html>")));
        assert_eq!((unreadable.outcome.as_str(), unreadable.player_identifier), ("unknown", None));
        let mistyped = row_of(&sql_row(
            "jackpotPayout:900002",
            r#"{"moneyWon":"1500","isMoney":1,"playerIdentifier":5}"#,
            "done",
            None,
        ));
        assert_eq!((mistyped.money_won, mistyped.is_money, mistyped.player_identifier), (None, None, None));
        assert_eq!(mistyped.outcome, "unknown", "done without a reply");
        for state in ["claimed", "abandoned", "closed"] {
            let row = row_of(&sql_row("gameSessionBuyRefund:900002", "{}", state, None));
            assert_eq!((row.outcome.as_str(), row.finished_ms), (state, None));
        }
    }

    #[test]
    fn a_period_must_hold_time() {
        assert!(check_period(0, 1).is_ok());
        assert!(check_period(i64::MIN, i64::MAX).is_ok());
        let error = check_period(5, 5).unwrap_err();
        assert_eq!((error.kind, error.field.as_str()), (ErrorKind::InvalidArgument, "until_ms"));
    }
}
