//! The journal's bookkeeping beside the deliveries, written once for both backends over
//! [`Sql`]: index jumps and reused indexes, ranges resolved by hand, conflicts, what recovery got
//! for each index and which to fetch next, the recovery lock, renumbering, and the migration from
//! schema version 1. None of it is on the usual delivery's path.
//!
//! It reads the deliveries folded (`folded = 1`, see `schema`, versions 5 and 6): on SQLite the
//! rows a delivery writes are folded before any of it runs (`Store::admin`, and before an index
//! is recorded), so that none is left out, and a read by index or by time goes through the
//! partial indexes of folded rows; on PostgreSQL every row is.

use std::collections::HashMap;

use serde::Serialize;

use crate::error::{Error, ErrorKind, Result};

use super::gaps::{self, Run, Runs};
use super::sql::{Sql, SqlRow, Value, int, row};

/// What an entry of the index-jump list records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JumpKind {
    /// An index more than `max_index_jump` beyond the highest seen: the stretch between is not
    /// counted missing (see `Journal::index_jumps`).
    Jump,
    /// An index seen before arriving with another event (a key the journal did not hold): the
    /// service may have restarted its numbering. Repeats while it is open are counted in it.
    Reused,
    /// An operator started a new numbering (`Journal::renumber`); kept for audit.
    Renumbered,
    /// An index arriving with the event of a key the journal holds at another index (its
    /// `previous_highest` is that index): the index is not counted seen, since only its own
    /// event closes it, and stays missing until recovered or resolved. Repeats while it is open
    /// are counted in it.
    Moved,
}

impl JumpKind {
    /// `jump`, `reused`, `renumbered`, `moved`.
    pub fn as_str(self) -> &'static str {
        match self {
            JumpKind::Jump => "jump",
            JumpKind::Reused => "reused",
            JumpKind::Renumbered => "renumbered",
            JumpKind::Moved => "moved",
        }
    }

    fn parse(text: &str) -> JumpKind {
        match text {
            "reused" => JumpKind::Reused,
            "renumbered" => JumpKind::Renumbered,
            "moved" => JumpKind::Moved,
            _ => JumpKind::Jump,
        }
    }
}

/// An index jump, a reused index or a renumbering, as the journal keeps it for the operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IndexJump {
    pub id: i64,
    pub kind: JumpKind,
    /// The index that jumped (or was reused; for a renumbering, the new first index).
    pub index: i64,
    /// The highest index seen before the jump; for a moved one, the index the event's key is
    /// held at.
    pub previous_highest: Option<i64>,
    /// The delivery that carried it, as far as the journal knows.
    pub key: Option<String>,
    pub name: Option<String>,
    /// For a reused index: the key that carried the index before.
    pub other_key: Option<String>,
    /// Reused indexes counted in this entry, and the last of them.
    pub count: i64,
    pub last_index: i64,
    pub numbering: i64,
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
    pub last_ms: i64,
    /// `accepted` (the numbering really moved: the stretch is no events) or `gap` (it did not:
    /// the stretch counts as missing); `None` while open.
    pub decision: Option<String>,
    pub decided_ms: Option<i64>,
    pub note: Option<String>,
}

/// A range of missing indexes an operator closed by hand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolution {
    pub id: i64,
    pub first: i64,
    pub last: i64,
    /// How many of its indexes were missing when it was closed.
    pub closed: i64,
    pub numbering: i64,
    pub note: String,
    pub at_ms: i64,
}

/// A delivery whose key came before with other decisive content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConflictRecord {
    pub id: i64,
    pub key: String,
    pub name: String,
    pub transaction_id: Option<i64>,
    pub index: Option<i64>,
    /// The canonical content the journal held, and the one that came.
    pub first_content: String,
    pub now_content: String,
    /// `field: first X, now Y` for each decisive field that differs.
    pub differing: Vec<String>,
    /// `refused` (the first was finished: this one got 409) or `handed_out` (the first was never
    /// finished: this one was handed out as new and its content kept).
    pub outcome: String,
    /// Deliveries of this content counted in the entry.
    pub count: i64,
    pub first_ms: i64,
    pub last_ms: i64,
    pub resolved_ms: Option<i64>,
    pub note: Option<String>,
}

/// What recovery got for one index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FetchOutcome {
    /// Fetched and handed on (or found handled meanwhile): the index is settled.
    Settled,
    /// The service answered 404.
    NotFound,
    /// Any other failure (the service, the event, the journal).
    Failed,
}

/// The journal's figures beside the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Extras {
    pub unfinished: u64,
    pub open_conflicts: u64,
    pub open_jumps: u64,
    pub resolved: u64,
    pub unrecoverable: u64,
    pub numbering: i64,
}

fn invalid(field: &str, problem: impl Into<String> + std::fmt::Display) -> Error {
    Error::field(ErrorKind::InvalidArgument, field, problem)
}

fn note_checked(note: &str) -> Result<&str> {
    let note = note.trim();
    if note.is_empty() {
        return Err(invalid("note", "must say why (it is kept for audit)"));
    }
    if note.len() > 4096 || note.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(invalid("note", "must be at most 4096 bytes of text without control characters"));
    }
    Ok(note)
}

fn opt_text(row: &SqlRow, i: usize) -> Option<String> {
    row.get(i).and_then(Value::text)
}

fn num(row: &SqlRow, i: usize) -> Option<i64> {
    row.get(i).and_then(Value::int)
}

fn meta(sql: &mut dyn Sql, key: &str) -> Result<Option<i64>> {
    int(sql, "SELECT value FROM sp_journal_meta WHERE key = ?1", &[key.into()])
}

fn set_meta(sql: &mut dyn Sql, key: &str, value: i64) -> Result<()> {
    sql.exec(
        "INSERT INTO sp_journal_meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        &[key.into(), value.into()],
    )?;
    Ok(())
}

/// The current numbering (1 until the first renumbering).
pub(crate) fn numbering(sql: &mut dyn Sql) -> Result<i64> {
    Ok(meta(sql, "numbering")?.unwrap_or(1))
}

/// The runs table over [`Sql`].
pub(crate) struct SqlRuns<'a>(pub &'a mut dyn Sql);

fn run_of(row: Option<SqlRow>) -> Option<Run> {
    row.and_then(|r| Some(Run { lo: num(&r, 0)?, hi: num(&r, 1)? }))
}

fn runs_of_rows(rows: Vec<SqlRow>) -> Vec<Run> {
    rows.into_iter().filter_map(|r| run_of(Some(r))).collect()
}

impl Runs for SqlRuns<'_> {
    type Error = Error;
    fn at_or_before(&mut self, at: i64) -> Result<Option<Run>> {
        Ok(run_of(row(
            self.0,
            "SELECT lo, hi FROM sp_journal_runs WHERE lo <= ?1 ORDER BY lo DESC LIMIT 1",
            &[at.into()],
        )?))
    }
    fn starting_within(&mut self, from: i64, to: i64) -> Result<Vec<Run>> {
        let sql = "SELECT lo, hi FROM sp_journal_runs WHERE lo >= ?1 AND lo <= ?2 ORDER BY lo";
        Ok(runs_of_rows(self.0.rows(sql, &[from.into(), to.into()])?))
    }
    fn remove(&mut self, lo: i64) -> Result<()> {
        self.0.exec("DELETE FROM sp_journal_runs WHERE lo = ?1", &[lo.into()]).map(drop)
    }
    fn put(&mut self, run: Run, seen: gaps::Seen) -> Result<()> {
        let params = [run.lo.into(), run.hi.into(), seen.first_ms.into(), seen.last_ms.into()];
        self.0.exec(super::schema::RUNS_PUT, &params).map(drop)
    }
    fn after(&mut self, after: i64, limit: usize) -> Result<Vec<Run>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let sql = "SELECT lo, hi FROM sp_journal_runs WHERE lo > ?1 ORDER BY lo LIMIT ?2";
        Ok(runs_of_rows(self.0.rows(sql, &[after.into(), limit.into()])?))
    }
    fn lowest(&mut self) -> Result<Option<Run>> {
        Ok(run_of(row(self.0, "SELECT lo, hi FROM sp_journal_runs ORDER BY lo LIMIT 1", &[])?))
    }
    fn highest(&mut self) -> Result<Option<Run>> {
        Ok(run_of(row(self.0, "SELECT lo, hi FROM sp_journal_runs ORDER BY lo DESC LIMIT 1", &[])?))
    }
    fn seen_below(&mut self, first: i64) -> Result<i64> {
        let runs = runs_of_rows(self.0.rows("SELECT lo, hi FROM sp_journal_runs WHERE lo < ?1", &[first.into()])?);
        let total: u64 = runs.iter().map(|run| gaps::span(run.lo, run.hi.min(first - 1))).sum();
        Ok(i64::try_from(total).unwrap_or(i64::MAX))
    }
}

/// The current numbering's index jumps that leave their stretch out of the gaps (open or
/// accepted, not those an operator declared a gap).
pub(crate) fn jumps(sql: &mut dyn Sql) -> Result<Vec<gaps::Jump>> {
    let numbering = numbering(sql)?;
    let rows = sql.rows(
        "SELECT idx, previous_highest FROM sp_journal_jumps WHERE kind = 'jump' AND numbering = ?1 AND (decision IS NULL OR decision = 'accepted') ORDER BY idx",
        &[numbering.into()],
    )?;
    Ok(rows.iter().filter_map(|r| Some(gaps::Jump { index: num(r, 0)?, previous_highest: num(r, 1)? })).collect())
}

/// The first index gap detection counts from: the configured one, else the lowest seen.
pub(crate) fn first_index(sql: &mut dyn Sql) -> Result<Option<i64>> {
    match meta(sql, "first_index")? {
        Some(first) => Ok(Some(first)),
        None => Ok(SqlRuns(sql).lowest()?.map(|run| run.lo)),
    }
}

/// The gap figures: first, highest, watermark, missing (index jumps left out).
pub(crate) fn summary(sql: &mut dyn Sql) -> Result<gaps::Summary> {
    let configured_first = meta(sql, "first_index")?;
    let seen = seen_count(sql)?;
    let jumps = jumps(sql)?;
    Ok(gaps::facts(&mut SqlRuns(sql), configured_first, seen, &jumps)?.summary())
}

/// The distinct indexes seen in the current numbering: the runs' sum, at most `i64::MAX` (every
/// index of `0..=i64::MAX` is one more than an `i64` counts). Read when asked rather than kept
/// in a row every new index would write (schema version 4); the runs are the gaps and one more.
pub(crate) fn seen_count(sql: &mut dyn Sql) -> Result<i64> {
    let rows = sql.rows("SELECT lo, hi FROM sp_journal_runs", &[])?;
    let sum: i128 = rows.iter().filter_map(|r| Some(i128::from(num(r, 1)?) - i128::from(num(r, 0)?) + 1)).sum();
    Ok(i64::try_from(sum).unwrap_or(i64::MAX))
}

/// At most `limit` missing ranges, in order, index jumps left out.
pub(crate) fn missing(sql: &mut dyn Sql, limit: usize) -> Result<Vec<(i64, i64)>> {
    let Some(first) = first_index(sql)? else { return Ok(Vec::new()) };
    let jumps = jumps(sql)?;
    gaps::missing(&mut SqlRuns(sql), first, &jumps, limit)
}

/// When the gap ending at `hi` was found missing: the earliest time of the runs above it, up to
/// the next index jump above it (the run of a stray index far above dates nothing below its
/// stretch). A lower gap of the same stretch is never younger.
fn gap_found_ms(sql: &mut dyn Sql, hi: i64, jumps: &[gaps::Jump]) -> Result<Option<i64>> {
    let below = jumps.iter().map(|jump| jump.index).filter(|&index| index > hi).min().unwrap_or(i64::MAX);
    int(sql, "SELECT MIN(since_ms) FROM sp_journal_runs WHERE lo > ?1 AND lo < ?2", &[hi.into(), below.into()])
}

/// How far ahead of the journal's clock a recorded time (when a gap was found, when a delivery
/// was last claimed or abandoned) may lie and still be taken as it is: the clocks of the hosts
/// sharing a journal differ by that much. A time further ahead was written by a host whose clock
/// was ahead and dates nothing: what it dates counts as old enough for any minimum age. That is
/// the safe side: fetching an event that was not lost only gets a repeat, answered from the
/// journal, whereas a gap taken as young for as long as that clock was ahead hides a lost event.
pub(crate) const AHEAD_TOLERANCE_MS: i64 = 60_000;

/// Whether a time `at` recorded in the journal is at least `age_ms` old at `now` (both on the
/// journal's clock), or lies more than `AHEAD_TOLERANCE_MS` ahead of it.
fn old_enough(at: i64, now: i64, age_ms: i64) -> bool {
    at <= now.saturating_sub(age_ms) || at > now.saturating_add(AHEAD_TOLERANCE_MS)
}

/// The missing ranges found missing at least `age_ms` ago on the journal's clock (or more than
/// `AHEAD_TOLERANCE_MS` ahead of it), at most `limit`, in order (see `gap_found_ms`).
pub(crate) fn missing_older_than(sql: &mut dyn Sql, age_ms: i64, limit: usize) -> Result<Vec<(i64, i64)>> {
    let now = sql.now_ms()?;
    let jumps = jumps(sql)?;
    let mut old = Vec::new();
    for (lo, hi) in missing(sql, limit)? {
        if gap_found_ms(sql, hi, &jumps)?.is_some_and(|found| old_enough(found, now, age_ms)) {
            old.push((lo, hi));
        }
    }
    Ok(old)
}

/// What `Status` tells of the journal's age and upkeep.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Vitals {
    pub pruned: u64,
    pub forgotten: u64,
    pub oldest_record_ms: Option<i64>,
    pub last_delivery_ms: Option<i64>,
    pub oldest_gap_ms: Option<i64>,
    pub first_index_stored: bool,
    pub tail_checked: Option<(i64, i64)>,
}

/// The counters of `prune`, the oldest stored reply (through the index of finished deliveries),
/// the last new index seen (the runs' latest) and when the oldest missing index was found
/// missing (see `missing_older_than`).
pub(crate) fn vitals(sql: &mut dyn Sql) -> Result<Vitals> {
    // The lowest gap below each index jump is the oldest of its stretch.
    let jumps = jumps(sql)?;
    let mut oldest_gap_ms: Option<i64> = None;
    let mut stretch = None;
    for (_, hi) in missing(sql, 1_000)? {
        let below = jumps.iter().map(|jump| jump.index).filter(|&index| index > hi).min();
        if stretch == Some(below) {
            continue;
        }
        stretch = Some(below);
        if let Some(found) = gap_found_ms(sql, hi, &jumps)? {
            oldest_gap_ms = Some(oldest_gap_ms.map_or(found, |oldest| oldest.min(found)));
        }
    }
    Ok(Vitals {
        pruned: super::count(meta(sql, "pruned")?.unwrap_or(0)),
        forgotten: super::count(meta(sql, "forgotten")?.unwrap_or(0)),
        oldest_record_ms: int(
            sql,
            "SELECT MIN(finished_ms) FROM sp_journal_delivery WHERE state = 'done' AND folded = 1",
            &[],
        )?,
        last_delivery_ms: int(sql, "SELECT MAX(last_ms) FROM sp_journal_runs", &[])?,
        oldest_gap_ms,
        first_index_stored: meta(sql, "first_index")?.is_some(),
        tail_checked: meta(sql, "tail_checked_index")?.zip(meta(sql, "tail_checked_ms")?),
    })
}

/// Notes that the service had no event at `index`, the one after the highest seen (asked by
/// recovery's probe of the tail): the tail was where the journal thinks, now.
pub(crate) fn note_tail_checked(sql: &mut dyn Sql, index: i64) -> Result<()> {
    let now = sql.now_ms()?;
    set_meta(sql, "tail_checked_index", index)?;
    set_meta(sql, "tail_checked_ms", now)
}

/// The condition of an unfinished delivery: abandoned, or claimed with its lease run out on the
/// lease clock. Its parameters are `unfinished_params`: `?1` now on the lease clock, `?2` its
/// boot (a lease of another boot or of none ran out too; on PostgreSQL `?2` and every
/// `lease_boot` are NULL, so the server's clock alone judges); a query's own start at `?3`.
macro_rules! unfinished_where {
    () => {
        "state IN ('claimed', 'abandoned') AND (state = 'abandoned' OR lease_until_ms <= ?1 OR lease_boot IS DISTINCT FROM ?2)"
    };
}
/// `unfinished_where!`, for the statements built at run time.
const UNFINISHED_WHERE: &str = unfinished_where!();

/// `?1` and `?2` of `UNFINISHED_WHERE`: now on the lease clock, and its boot.
fn unfinished_params(sql: &mut dyn Sql) -> Result<[Value; 2]> {
    let clock = sql.lease_clock()?;
    Ok([clock.now_ms.into(), clock.boot.as_deref().into()])
}

/// The indexes of unfinished deliveries of the current numbering (an index of an earlier one
/// names no event now), in order, at most `limit`.
pub(crate) fn unfinished(sql: &mut dyn Sql, limit: usize) -> Result<Vec<i64>> {
    unfinished_updated_by(sql, limit, i64::MAX, i64::MAX)
}

/// `unfinished`, leaving out the deliveries updated (claimed, abandoned) after `updated_by` and
/// by `ahead_by` (ms since the Unix epoch, on the journal's clock): an update after `ahead_by`
/// was written by a host whose clock was ahead, and counts as old (see `AHEAD_TOLERANCE_MS`).
fn unfinished_updated_by(sql: &mut dyn Sql, limit: usize, updated_by: i64, ahead_by: i64) -> Result<Vec<i64>> {
    let [now, boot] = unfinished_params(sql)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let since = meta(sql, "numbering_from_id")?.unwrap_or(0);
    let text = format!(
        "SELECT first_index FROM sp_journal_delivery WHERE {UNFINISHED_WHERE} AND first_index IS NOT NULL AND id > ?4 AND (updated_ms <= ?5 OR updated_ms > ?6) ORDER BY first_index LIMIT ?3"
    );
    let params = [now, boot, limit.into(), since.into(), updated_by.into(), ahead_by.into()];
    Ok(sql.rows(&text, &params)?.iter().filter_map(|r| num(r, 0)).collect())
}

/// Closes the unfinished deliveries at `index` by hand (settled another way, or of an earlier
/// numbering): they are no longer counted unfinished nor fetched, and `note` is kept with them;
/// a later delivery of such a key still runs as its next attempt. The number closed.
pub(crate) fn close_unfinished(sql: &mut dyn Sql, index: i64, note: &str) -> Result<u64> {
    let note = note_checked(note)?;
    let [now, boot] = unfinished_params(sql)?;
    // The current numbering's deliveries at the index; only when it has none, an earlier
    // numbering's (a claim in flight at the renumbering whose worker died since).
    let since = meta(sql, "numbering_from_id")?.unwrap_or(0);
    let rows = sql.rows(UNFINISHED_AT, &[now, boot, index.into(), since.into()])?;
    let current = rows.iter().any(|r| num(r, 2) == Some(1));
    let keys: Vec<(String, String)> = rows
        .iter()
        .filter(|r| !current || num(r, 2) == Some(1))
        .filter_map(|r| Some((opt_text(r, 0)?, opt_text(r, 1)?)))
        .collect();
    if keys.is_empty() {
        return Err(invalid("index", format!("no unfinished delivery carries index {index}")));
    }
    let numbering = numbering(sql)?;
    let at = sql.now_ms()?;
    for (key, state) in &keys {
        sql.exec(
            "UPDATE sp_journal_delivery SET state = 'closed', token = NULL, updated_ms = ?2 WHERE key = ?1 AND state IN ('claimed', 'abandoned')",
            &[key.as_str().into(), at.into()],
        )?;
        if state == "claimed" {
            // An expired claim was counted in progress; a closed one is not.
            sql.exec("UPDATE sp_journal_counters SET claims_open = claims_open - 1 WHERE shard = 0", &[])?;
        }
        let note = format!("closed unfinished {key}: {note}");
        sql.exec(
            "INSERT INTO sp_journal_resolved (lo, hi, closed, numbering, note, at_ms) VALUES (?1, ?1, 0, ?2, ?3, ?4)",
            &[index.into(), numbering.into(), note.as_str().into(), at.into()],
        )?;
    }
    sql.exec("DELETE FROM sp_journal_fetch WHERE idx = ?1", &[index.into()])?;
    Ok(keys.len() as u64)
}

/// The figures beside the counters; `not_found_limit` decides what is unrecoverable.
pub(crate) fn extras(sql: &mut dyn Sql, not_found_limit: u32) -> Result<Extras> {
    let lease_now = unfinished_params(sql)?;
    let count = |sql: &mut dyn Sql, text: &str, params: &[Value]| -> Result<u64> {
        Ok(int(sql, text, params)?.and_then(|n| u64::try_from(n).ok()).unwrap_or(0))
    };
    let numbering = numbering(sql)?;
    let unfinished =
        count(sql, &format!("SELECT count(*) FROM sp_journal_delivery WHERE {UNFINISHED_WHERE}"), &lease_now)?;
    let open_conflicts = count(sql, "SELECT count(*) FROM sp_journal_conflicts WHERE resolved_ms IS NULL", &[])?;
    let open_jumps = count(sql, "SELECT count(*) FROM sp_journal_jumps WHERE decision IS NULL", &[])?;
    let resolved = count(
        sql,
        "SELECT CAST(COALESCE(SUM(closed), 0) AS BIGINT) FROM sp_journal_resolved WHERE numbering = ?1",
        &[numbering.into()],
    )?;
    let unrecoverable = unrecoverable(sql, not_found_limit, usize::MAX)?.len() as u64;
    // (One query for the missing ones, one for the unfinished: no query per index.)
    Ok(Extras { unfinished, open_conflicts, open_jumps, resolved, unrecoverable, numbering })
}

/// Records an index jump (`kind` jump) or a reused index (`kind` reused; counted into the open
/// entry of that kind, if any, so that a restarted numbering makes one entry, not thousands).
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_jump(
    sql: &mut dyn Sql,
    kind: JumpKind,
    index: i64,
    previous_highest: Option<i64>,
    key: Option<&str>,
    name: Option<&str>,
    other_key: Option<&str>,
) -> Result<()> {
    let now = sql.now_ms()?;
    let numbering = numbering(sql)?;
    if kind == JumpKind::Reused {
        let open = int(
            sql,
            "SELECT id FROM sp_journal_jumps WHERE kind = 'reused' AND decision IS NULL AND numbering = ?1 ORDER BY id DESC LIMIT 1",
            &[numbering.into()],
        )?;
        if let Some(id) = open {
            sql.exec(
                "UPDATE sp_journal_jumps SET count = count + 1, last_idx = ?2, last_ms = ?3 WHERE id = ?1",
                &[id.into(), index.into(), now.into()],
            )?;
            return Ok(());
        }
    }
    if kind == JumpKind::Moved {
        let open = int(
            sql,
            "SELECT id FROM sp_journal_jumps WHERE kind = 'moved' AND decision IS NULL AND numbering = ?1 AND idx = ?2 AND key = ?3 LIMIT 1",
            &[numbering.into(), index.into(), key.into()],
        )?;
        if let Some(id) = open {
            sql.exec(
                "UPDATE sp_journal_jumps SET count = count + 1, last_ms = ?2 WHERE id = ?1",
                &[id.into(), now.into()],
            )?;
            return Ok(());
        }
    }
    let (key, name) = match (key, name) {
        (Some(key), name) => (Some(key.to_owned()), name.map(str::to_owned)),
        _ => {
            let known = row(sql, NAMED_AT, &[index.into()])?;
            match known {
                Some(r) => (opt_text(&r, 0), opt_text(&r, 1)),
                None => {
                    let refused =
                        row(sql, "SELECT name FROM sp_journal_refused WHERE idx = ?1 LIMIT 1", &[index.into()])?;
                    (refused.as_ref().map(|_| format!("refused:{index}")), refused.and_then(|r| opt_text(&r, 0)))
                }
            }
        }
    };
    sql.exec(
        "INSERT INTO sp_journal_jumps (kind, idx, previous_highest, key, name, other_key, count, last_idx, numbering, at_ms, last_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?2, ?7, ?8, ?8)",
        &[
            kind.as_str().into(),
            index.into(),
            previous_highest.into(),
            key.as_deref().into(),
            name.as_deref().into(),
            other_key.into(),
            numbering.into(),
            now.into(),
        ],
    )?;
    Ok(())
}

/// The index jumps, reused indexes and renumberings, newest first, at most `limit`; decided ones
/// too when `all`.
pub(crate) fn index_jumps(sql: &mut dyn Sql, all: bool, limit: usize) -> Result<Vec<IndexJump>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let filter = if all { "" } else { "WHERE decision IS NULL" };
    let text = format!(
        "SELECT id, kind, idx, previous_highest, key, name, other_key, count, last_idx, numbering, at_ms, last_ms, decision, decided_ms, note FROM sp_journal_jumps {filter} ORDER BY id DESC LIMIT ?1"
    );
    let rows = sql.rows(&text, &[limit.into()])?;
    Ok(rows
        .iter()
        .map(|r| IndexJump {
            id: num(r, 0).unwrap_or(0),
            kind: JumpKind::parse(&opt_text(r, 1).unwrap_or_default()),
            index: num(r, 2).unwrap_or(0),
            previous_highest: num(r, 3),
            key: opt_text(r, 4),
            name: opt_text(r, 5),
            other_key: opt_text(r, 6),
            count: num(r, 7).unwrap_or(1),
            last_index: num(r, 8).unwrap_or(0),
            numbering: num(r, 9).unwrap_or(1),
            at_ms: num(r, 10).unwrap_or(0),
            last_ms: num(r, 11).unwrap_or(0),
            decision: opt_text(r, 12),
            decided_ms: num(r, 13),
            note: opt_text(r, 14),
        })
        .collect())
}

/// Decides an open index jump or reused index: `accept` (the numbering really moved: a jump's
/// stretch is no events) or not (a jump's stretch counts as missing again, to be fetched).
pub(crate) fn decide_jump(sql: &mut dyn Sql, id: i64, accept: bool, note: &str) -> Result<()> {
    let note = note_checked(note)?;
    let now = sql.now_ms()?;
    let decision = if accept { "accepted" } else { "gap" };
    let changed = sql.exec(
        "UPDATE sp_journal_jumps SET decision = ?2, decided_ms = ?3, note = ?4 WHERE id = ?1 AND decision IS NULL",
        &[id.into(), decision.into(), now.into(), note.into()],
    )?;
    if changed == 0 {
        return Err(invalid("id", format!("no open index jump has id {id} (see the list of index jumps)")));
    }
    Ok(())
}

/// Closes the missing indexes of `first..=last` by hand, keeping `note` for audit; the number
/// of indexes that were missing.
pub(crate) fn resolve(sql: &mut dyn Sql, first: i64, last: i64, note: &str) -> Result<u64> {
    let note = note_checked(note)?;
    if first < 0 || last < first {
        return Err(invalid("range", format!("{first}-{last} is not a range of indexes (first <= last, both >= 0)")));
    }
    let highest = SqlRuns(sql).highest()?.map(|run| run.hi);
    if highest.is_none_or(|highest| last > highest) {
        let shown = highest.map_or("none".to_owned(), |h| h.to_string());
        return Err(invalid(
            "range",
            format!("{first}-{last} reaches beyond the highest index seen ({shown}): nothing is missing there"),
        ));
    }
    let now = sql.now_ms()?;
    let closed = gaps::add(&mut SqlRuns(sql), first, last, gaps::Seen { first_ms: now, last_ms: None })?;
    let numbering = numbering(sql)?;
    let now = sql.now_ms()?;
    sql.exec(
        "INSERT INTO sp_journal_resolved (lo, hi, closed, numbering, note, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        &[first.into(), last.into(), closed.into(), numbering.into(), note.into(), now.into()],
    )?;
    sql.exec("DELETE FROM sp_journal_fetch WHERE idx >= ?1 AND idx <= ?2", &[first.into(), last.into()])?;
    Ok(u64::try_from(closed).unwrap_or(0))
}

/// The ranges resolved by hand, newest first, at most `limit`.
pub(crate) fn resolutions(sql: &mut dyn Sql, limit: usize) -> Result<Vec<Resolution>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = sql.rows(
        "SELECT id, lo, hi, closed, numbering, note, at_ms FROM sp_journal_resolved ORDER BY id DESC LIMIT ?1",
        &[limit.into()],
    )?;
    Ok(rows
        .iter()
        .map(|r| Resolution {
            id: num(r, 0).unwrap_or(0),
            first: num(r, 1).unwrap_or(0),
            last: num(r, 2).unwrap_or(0),
            closed: num(r, 3).unwrap_or(0),
            numbering: num(r, 4).unwrap_or(1),
            note: opt_text(r, 5).unwrap_or_default(),
            at_ms: num(r, 6).unwrap_or(0),
        })
        .collect())
}

/// A conflict as the claim found it, to record.
pub(crate) struct ConflictSeen<'a> {
    pub key: &'a str,
    pub name: &'a str,
    pub transaction_id: Option<i64>,
    pub index: Option<i64>,
    pub first_content: &'a str,
    pub now_content: &'a str,
    pub differing: &'a [String],
    pub handed_out: bool,
}

impl<'a> ConflictSeen<'a> {
    pub fn of(
        delivery: &'a super::Delivery,
        key: &'a str,
        first_content: &'a str,
        differing: &'a [String],
        handed_out: bool,
    ) -> Self {
        ConflictSeen {
            key,
            name: delivery.name(),
            transaction_id: delivery.transaction_id(),
            index: delivery.index(),
            first_content,
            now_content: delivery.fingerprint(),
            differing,
            handed_out,
        }
    }
}

/// What the journal answers a delivery whose decisive content differs from its finished key's:
/// `true` when this content was handed out on the key before (the stored reply is its reply
/// too); else the conflict is recorded (a repeat of an open one with the same content is counted
/// into it), and for a key of an event without `transactionId` the reuse of its index is
/// recorded too (the service may have restarted its numbering).
pub(crate) fn answer_conflict(sql: &mut dyn Sql, seen: &ConflictSeen<'_>) -> Result<bool> {
    let handed_out = int(
        sql,
        "SELECT id FROM sp_journal_conflicts WHERE key = ?1 AND now_content = ?2 AND outcome = 'handed_out' LIMIT 1",
        &[seen.key.into(), seen.now_content.into()],
    )?;
    if handed_out.is_some() {
        return Ok(true);
    }
    record_conflict(sql, seen)?;
    if let (None, Some(index)) = (seen.transaction_id, seen.index) {
        record_jump(sql, JumpKind::Reused, index, None, Some(seen.key), Some(seen.name), Some(seen.key))?;
    }
    Ok(false)
}

/// Records a conflict (a repeat of an open one with the same content is counted into it).
pub(crate) fn record_conflict(sql: &mut dyn Sql, seen: &ConflictSeen<'_>) -> Result<()> {
    let now = sql.now_ms()?;
    let outcome = if seen.handed_out { "handed_out" } else { "refused" };
    let counted = sql.exec(
        "UPDATE sp_journal_conflicts SET count = count + 1, last_ms = ?3 WHERE key = ?1 AND now_content = ?2 AND outcome = ?4 AND resolved_ms IS NULL",
        &[seen.key.into(), seen.now_content.into(), now.into(), outcome.into()],
    )?;
    if counted > 0 {
        return Ok(());
    }
    sql.exec(
        "INSERT INTO sp_journal_conflicts (key, name, transaction_id, idx, first_content, now_content, differing, outcome, count, first_ms, last_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 1, ?9, ?9)",
        &[
            seen.key.into(),
            seen.name.into(),
            seen.transaction_id.into(),
            seen.index.into(),
            seen.first_content.into(),
            seen.now_content.into(),
            seen.differing.join("\n").as_str().into(),
            outcome.into(),
            now.into(),
        ],
    )?;
    Ok(())
}

/// The conflicts, newest first, at most `limit`; resolved ones too when `all`.
pub(crate) fn conflicts(sql: &mut dyn Sql, all: bool, limit: usize) -> Result<Vec<ConflictRecord>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let filter = if all { "" } else { "WHERE resolved_ms IS NULL" };
    let text = format!(
        "SELECT id, key, name, transaction_id, idx, first_content, now_content, differing, outcome, count, first_ms, last_ms, resolved_ms, note FROM sp_journal_conflicts {filter} ORDER BY id DESC LIMIT ?1"
    );
    let rows = sql.rows(&text, &[limit.into()])?;
    Ok(rows
        .iter()
        .map(|r| ConflictRecord {
            id: num(r, 0).unwrap_or(0),
            key: opt_text(r, 1).unwrap_or_default(),
            name: opt_text(r, 2).unwrap_or_default(),
            transaction_id: num(r, 3),
            index: num(r, 4),
            first_content: opt_text(r, 5).unwrap_or_default(),
            now_content: opt_text(r, 6).unwrap_or_default(),
            differing: opt_text(r, 7)
                .unwrap_or_default()
                .split('\n')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            outcome: opt_text(r, 8).unwrap_or_default(),
            count: num(r, 9).unwrap_or(1),
            first_ms: num(r, 10).unwrap_or(0),
            last_ms: num(r, 11).unwrap_or(0),
            resolved_ms: num(r, 12),
            note: opt_text(r, 13),
        })
        .collect())
}

/// Marks an open conflict resolved, keeping `note` for audit.
pub(crate) fn resolve_conflict(sql: &mut dyn Sql, id: i64, note: &str) -> Result<()> {
    let note = note_checked(note)?;
    let now = sql.now_ms()?;
    let changed = sql.exec(
        "UPDATE sp_journal_conflicts SET resolved_ms = ?2, note = ?3 WHERE id = ?1 AND resolved_ms IS NULL",
        &[id.into(), now.into(), note.into()],
    )?;
    if changed == 0 {
        return Err(invalid("id", format!("no open conflict has id {id} (see the list of conflicts)")));
    }
    Ok(())
}

/// What a renumbering puts before the keys of index-keyed deliveries (`event#...`,
/// `action#...`) of the numbering it ends, `numbering`: `n1/` for the first.
pub(crate) fn numbering_prefix(numbering: i64) -> String {
    format!("n{numbering}/")
}

/// Starts a new numbering from `first`: the runs of the current one are archived, gap detection
/// starts afresh from `first`, index-keyed deliveries keep their records and replies under a key
/// of their numbering (`n1/event#17#bonusGranted`), so that the new numbering's events never
/// meet them. Refunds and payouts, keyed by `transactionId`, are untouched.
pub(crate) fn renumber(sql: &mut dyn Sql, first: i64, note: &str, give_up_gaps: bool) -> Result<i64> {
    let note = note_checked(note)?;
    if first < 0 {
        return Err(invalid("first_index", "must be a non-negative index"));
    }
    // The missing indexes of the current numbering would leave every count with the old runs:
    // refused, unless the operator gives them up, each range then recorded as resolved by hand.
    let open = missing(sql, 20)?;
    if !open.is_empty() && !give_up_gaps {
        let shown: Vec<String> =
            open.iter().map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") }).collect();
        let more = if open.len() == 20 { ", ..." } else { "" };
        return Err(invalid(
            "first_index",
            format!(
                "indexes of the current numbering are missing ({}{more}): recover them, resolve them by hand with a note, or give them up with this renumbering (recorded as resolved with its note)",
                shown.join(", ")
            ),
        ));
    }
    if give_up_gaps {
        let given_up = format!("given up by renumbering from {first}: {note}");
        loop {
            let open = missing(sql, 1000)?;
            if open.is_empty() {
                break;
            }
            for (lo, hi) in open {
                resolve(sql, lo, hi, &given_up)?;
            }
        }
    }
    let waiting = unfinished(sql, 10)?;
    if !waiting.is_empty() {
        let shown: Vec<String> = waiting.iter().map(i64::to_string).collect();
        return Err(invalid(
            "first_index",
            format!(
                "unfinished deliveries carry indexes of the current numbering ({}): let recovery settle them, or close them by hand, before renumbering",
                shown.join(", ")
            ),
        ));
    }
    let old = numbering(sql)?;
    let highest = SqlRuns(sql).highest()?.map(|run| run.hi);
    // Deliveries claimed up to now carry indexes of the old numbering (see `unfinished`).
    let last_id = int(sql, "SELECT MAX(id) FROM sp_journal_delivery", &[])?.unwrap_or(0);
    set_meta(sql, "numbering_from_id", last_id)?;
    sql.exec(
        "INSERT INTO sp_journal_runs_archive (numbering, lo, hi) SELECT ?1, lo, hi FROM sp_journal_runs",
        &[old.into()],
    )?;
    sql.exec("DELETE FROM sp_journal_runs", &[])?;
    sql.exec("DELETE FROM sp_journal_fetch", &[])?;
    let prefix = numbering_prefix(old);
    sql.exec(
        "UPDATE sp_journal_delivery SET key = ?1 || key WHERE transaction_id IS NULL AND (key LIKE 'event#%' OR key LIKE 'action#%')",
        &[prefix.as_str().into()],
    )?;
    set_meta(sql, "first_index", first)?;
    set_meta(sql, "numbering", old + 1)?;
    record_jump(sql, JumpKind::Renumbered, first, highest, None, None, None)?;
    let now = sql.now_ms()?;
    sql.exec(
        "UPDATE sp_journal_jumps SET decision = 'accepted', decided_ms = ?1, note = ?2 WHERE kind = 'renumbered' AND decision IS NULL",
        &[now.into(), note.into()],
    )?;
    // Whatever was open about the old numbering is settled by starting a new one.
    sql.exec(
        "UPDATE sp_journal_jumps SET decision = 'accepted', decided_ms = ?1, note = ?2 WHERE decision IS NULL AND numbering = ?3",
        &[now.into(), note.into(), old.into()],
    )?;
    Ok(old + 1)
}

/// Notes what recovery got for `index`.
pub(crate) fn note_fetch(sql: &mut dyn Sql, index: i64, outcome: FetchOutcome) -> Result<()> {
    if outcome == FetchOutcome::Settled {
        sql.exec("DELETE FROM sp_journal_fetch WHERE idx = ?1", &[index.into()])?;
        return Ok(());
    }
    let now = sql.now_ms()?;
    let (not_found, text) = match outcome {
        FetchOutcome::NotFound => (1, "not_found"),
        _ => (0, "failed"),
    };
    sql.exec(
        "INSERT INTO sp_journal_fetch (idx, tries, not_found, last_ms, last_outcome) VALUES (?1, 1, ?2, ?3, ?4) ON CONFLICT (idx) DO UPDATE SET tries = sp_journal_fetch.tries + 1, not_found = sp_journal_fetch.not_found + ?2, last_ms = ?3, last_outcome = ?4",
        &[index.into(), i64::from(not_found).into(), now.into(), text.into()],
    )?;
    Ok(())
}

/// The indexes the service answered 404 for at least `not_found_limit` times that are still
/// missing, or carry an unfinished delivery, in order, at most `limit`: recovery no longer
/// fetches them; missing ones stay missing until resolved by hand, unfinished ones unfinished
/// until closed by hand (`close_unfinished`).
pub(crate) fn unrecoverable(sql: &mut dyn Sql, not_found_limit: u32, limit: usize) -> Result<Vec<i64>> {
    let not_found_limit = i64::from(not_found_limit.max(1));
    let missing = sql.rows(
        "SELECT f.idx FROM sp_journal_fetch f WHERE f.not_found >= ?1 AND COALESCE((SELECT r.hi FROM sp_journal_runs r WHERE r.lo <= f.idx ORDER BY r.lo DESC LIMIT 1), -1) < f.idx ORDER BY f.idx LIMIT ?2",
        &[not_found_limit.into(), i64::try_from(limit).unwrap_or(i64::MAX).into()],
    )?;
    let mut out: Vec<i64> = missing.iter().filter_map(|r| num(r, 0)).collect();
    let given_up: std::collections::HashSet<i64> = sql
        .rows("SELECT idx FROM sp_journal_fetch WHERE not_found >= ?1", &[not_found_limit.into()])?
        .iter()
        .filter_map(|r| num(r, 0))
        .collect();
    if !given_up.is_empty() {
        out.extend(unfinished(sql, usize::MAX)?.into_iter().filter(|index| given_up.contains(index)));
        out.sort_unstable();
        out.dedup();
        out.truncate(limit);
    }
    Ok(out)
}

/// What recovery fetches next, at most `limit`: unfinished deliveries first, then missing
/// indexes never tried, then those tried before, the least recently tried first; never those
/// that are unrecoverable. A run therefore works through every gap in turn instead of the same
/// first indexes each time. With `min_age_ms` above zero, only what is at least that old on the
/// journal's clock: indexes of gaps found missing that long ago (see `missing_older_than`) and
/// unfinished deliveries last claimed or abandoned that long ago; younger ones are left for a
/// later run (an event still on its way, the service's own retry). A time recorded more than
/// `AHEAD_TOLERANCE_MS` ahead of the journal's clock counts as old enough.
pub(crate) fn recovery_plan(
    sql: &mut dyn Sql,
    limit: usize,
    not_found_limit: u32,
    min_age_ms: i64,
) -> Result<Vec<i64>> {
    // What was tried and is seen now (and carries no unfinished delivery) is settled.
    sql.exec(FETCH_SETTLED, &[])?;
    let tried: HashMap<i64, (i64, i64)> = sql
        .rows("SELECT idx, not_found, last_ms FROM sp_journal_fetch", &[])?
        .iter()
        .filter_map(|r| Some((num(r, 0)?, (num(r, 1)?, num(r, 2)?))))
        .collect();
    let not_found_limit = i64::from(not_found_limit.max(1));
    let given_up = |index: &i64| tried.get(index).is_some_and(|(not_found, _)| *not_found >= not_found_limit);
    // A missing index is old enough when its gap was found missing by the cutoff, or more than
    // `AHEAD_TOLERANCE_MS` ahead of now (see `gap_found_ms`, `old_enough`); with no minimum age,
    // every one.
    let now = if min_age_ms > 0 { Some(sql.now_ms()?) } else { None };
    let (updated_by, ahead_by) = match now {
        Some(now) => (now.saturating_sub(min_age_ms), now.saturating_add(AHEAD_TOLERANCE_MS)),
        None => (i64::MAX, i64::MAX),
    };
    let jumps = jumps(sql)?;
    let old_gap = |sql: &mut dyn Sql, index: i64| -> Result<bool> {
        Ok(match now {
            None => true,
            Some(now) => gap_found_ms(sql, index, &jumps)?.is_some_and(|found| old_enough(found, now, min_age_ms)),
        })
    };
    let unfinished_now: std::collections::HashSet<i64> = if min_age_ms > 0 {
        unfinished(sql, usize::MAX)?.into_iter().collect()
    } else {
        std::collections::HashSet::new()
    };
    let mut plan: Vec<i64> =
        unfinished_updated_by(sql, limit, updated_by, ahead_by)?.into_iter().filter(|index| !given_up(index)).collect();
    let unfinished_old: std::collections::HashSet<i64> = plan.iter().copied().collect();
    // Never tried: walk the gaps in order until the plan is full. Each range holds an untried
    // index unless every index of it was tried, so `limit` ranges more than were tried suffice.
    let mut ranges = Vec::new();
    for (lo, hi) in missing(sql, limit.saturating_add(tried.len()).max(1))? {
        if old_gap(sql, hi)? {
            ranges.push((lo, hi));
        }
    }
    'ranges: for (lo, hi) in ranges {
        let mut index = lo;
        while plan.len() < limit {
            if !tried.contains_key(&index) {
                plan.push(index);
            }
            if index == hi {
                continue 'ranges;
            }
            index += 1;
        }
        break;
    }
    // Tried before and still missing or unfinished: least recently tried first; never those
    // given up on.
    // With a minimum age: an unfinished one only if old enough, a missing one only in an old gap.
    let mut in_old_gaps = std::collections::HashSet::new();
    if now.is_some() {
        for &index in tried.keys() {
            if !unfinished_now.contains(&index) && !given_up(&index) && old_gap(sql, index)? {
                in_old_gaps.insert(index);
            }
        }
    }
    let eligible = |index: i64| min_age_ms <= 0 || unfinished_old.contains(&index) || in_old_gaps.contains(&index);
    let mut again: Vec<(i64, i64)> = tried
        .iter()
        .filter(|(index, _)| !given_up(index) && eligible(**index))
        .map(|(&index, &(_, last_ms))| (last_ms, index))
        .collect();
    again.sort_unstable();
    for (_, index) in again {
        if plan.len() >= limit {
            break;
        }
        plan.push(index);
    }
    let mut seen = std::collections::HashSet::new();
    plan.retain(|index| seen.insert(*index));
    Ok(plan)
}

/// Who holds a named lock, since when and until when, on the wall clock (for people).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockHolder {
    pub holder: String,
    /// When the holder took the lock: a wall-clock time, as kept.
    pub since_ms: i64,
    /// When its lease ends unless renewed: the lease is kept on the lease clock (see
    /// `Journal::take_lock`); this is its end on the wall clock as read now.
    pub until_ms: i64,
}

/// Takes (or renews, for the same `holder`) the lock `name` for `lease_ms`; the current holder
/// when another holds it and its lease has not run out. The lease (`until_ms`, `lease_boot`) is
/// set and judged by the lease clock, as a claim's is, so that a process whose wall clock was
/// stepped neither takes a live lock nor keeps a dead one; `since_ms` is a wall-clock time.
/// Who holds the named lock, and since when, if its lease still runs.
pub(crate) fn live_lock(sql: &mut dyn Sql, name: &str) -> Result<Option<String>> {
    let Some(r) = row(
        sql,
        "SELECT holder, since_ms, until_ms, lease_boot FROM sp_journal_locks WHERE name = ?1",
        &[name.into()],
    )?
    else {
        return Ok(None);
    };
    let clock = sql.lease_clock()?;
    let runs = clock.runs(num(&r, 2).unwrap_or(0), opt_text(&r, 3).as_deref());
    Ok(runs.then(|| {
        format!(
            "{name} by {} since {}",
            opt_text(&r, 0).unwrap_or_default(),
            super::rfc3339_ms(num(&r, 1).unwrap_or(0))
        )
    }))
}

pub(crate) fn take_lock(
    sql: &mut dyn Sql,
    name: &str,
    holder: &str,
    lease_ms: i64,
) -> Result<std::result::Result<(), LockHolder>> {
    let clock = sql.lease_clock()?;
    let until = clock.until(lease_ms);
    let boot: Value = clock.boot.as_deref().into();
    let current = row(
        sql,
        "SELECT holder, since_ms, until_ms, lease_boot FROM sp_journal_locks WHERE name = ?1",
        &[name.into()],
    )?;
    if let Some(r) = current {
        let (held_until, held_boot) = (num(&r, 2).unwrap_or(0), opt_text(&r, 3));
        let runs = clock.runs(held_until, held_boot.as_deref());
        let held = LockHolder {
            holder: opt_text(&r, 0).unwrap_or_default(),
            since_ms: num(&r, 1).unwrap_or(0),
            until_ms: clock.wall_of(held_until, held_boot.as_deref()),
        };
        // A holder whose process is known gone (on this host) holds nothing any more.
        if held.holder != holder && runs && !super::lock::holder_is_gone(&held.holder) {
            return Ok(Err(held));
        }
        let since = if held.holder == holder && runs { held.since_ms } else { clock.wall_ms };
        sql.exec(
            "UPDATE sp_journal_locks SET holder = ?2, since_ms = ?3, until_ms = ?4, lease_boot = ?5 WHERE name = ?1",
            &[name.into(), holder.into(), since.into(), until.into(), boot],
        )?;
    } else {
        sql.exec(
            "INSERT INTO sp_journal_locks (name, holder, since_ms, until_ms, lease_boot) VALUES (?1, ?2, ?3, ?4, ?5)",
            &[name.into(), holder.into(), clock.wall_ms.into(), until.into(), boot],
        )?;
    }
    Ok(Ok(()))
}

/// Releases the lock `name` if `holder` holds it.
pub(crate) fn release_lock(sql: &mut dyn Sql, name: &str, holder: &str) -> Result<()> {
    sql.exec("DELETE FROM sp_journal_locks WHERE name = ?1 AND holder = ?2", &[name.into(), holder.into()])?;
    Ok(())
}

/// What the journal holds for an index: the keys of deliveries that carried it, with their
/// state and `transactionId`.
pub(crate) fn deliveries_at(sql: &mut dyn Sql, index: i64) -> Result<Vec<(String, String, Option<i64>)>> {
    let rows = sql.rows(DELIVERIES_AT, &[index.into()])?;
    Ok(rows
        .iter()
        .map(|r| (opt_text(r, 0).unwrap_or_default(), opt_text(r, 1).unwrap_or_default(), num(r, 2)))
        .collect())
}

/// The unfinished deliveries at the index `?3` (`?1`, `?2` as for `UNFINISHED_WHERE`), each with
/// whether it is of the current numbering (its id above `?4`).
const UNFINISHED_AT: &str = concat!(
    "SELECT key, state, CASE WHEN id > ?4 THEN 1 ELSE 0 END FROM sp_journal_delivery WHERE first_index = ?3 AND folded = 1 AND ",
    unfinished_where!()
);
/// A key and name delivered at the index `?1`.
const NAMED_AT: &str = "SELECT key, name FROM sp_journal_delivery WHERE first_index = ?1 AND folded = 1 LIMIT 1";
/// Forgets what recovery got for each index seen now that carries no unfinished delivery.
const FETCH_SETTLED: &str = "DELETE FROM sp_journal_fetch WHERE COALESCE((SELECT r.hi FROM sp_journal_runs r WHERE r.lo <= sp_journal_fetch.idx ORDER BY r.lo DESC LIMIT 1), -1) >= idx AND NOT EXISTS (SELECT 1 FROM sp_journal_delivery d WHERE d.first_index = sp_journal_fetch.idx AND d.folded = 1 AND d.state IN ('claimed', 'abandoned'))";
/// The deliveries at the index `?1`: key, state, `transactionId`.
const DELIVERIES_AT: &str =
    "SELECT key, state, transaction_id FROM sp_journal_delivery WHERE first_index = ?1 AND folded = 1 ORDER BY id";
/// Every read of the deliveries at an index, for the test that none reads the whole table.
#[cfg(test)]
pub(crate) const BY_INDEX: &[&str] = &[UNFINISHED_AT, NAMED_AT, FETCH_SETTLED, DELIVERIES_AT];

/// The migration's data steps from schema version `from` (1 to 5) to the current one; the
/// tables and columns of every later version exist already.
pub(crate) fn migrate(sql: &mut dyn Sql, from: i64) -> Result<()> {
    if from < 2 {
        for step in super::schema::MIGRATE_V1 {
            sql.exec(step, &[])?;
        }
    }
    if from < 3 {
        let now = sql.now_ms()?;
        for step in super::schema::MIGRATE_V2 {
            let params: &[Value] = if step.contains("?1") { &[Value::from(now)] } else { &[] };
            sql.exec(step, params)?;
        }
    }
    if from < 4 {
        let unkeyed = int(sql, super::schema::UNKEYED_TRANSACTIONS, &[])?.unwrap_or(0);
        if unkeyed > 0 {
            return Err(Error::new(
                ErrorKind::Journal,
                format!(
                    "sp_journal_delivery: {unkeyed} deliveries carry a transaction_id their key does not name (expected gameSessionBuyRefund:<id> or jackpotPayout:<id>); the journal was changed by hand and stays at its version: put the keys right, or ask for support"
                ),
            ));
        }
        for step in super::schema::MIGRATE_V3 {
            sql.exec(step, &[])?;
        }
    }
    if from < 5 {
        for step in super::schema::MIGRATE_V4 {
            sql.exec(step, &[])?;
        }
    }
    for step in super::schema::MIGRATE_V5 {
        sql.exec(step, &[])?;
    }
    Ok(())
}
