//! Retention: what `Journal::prune` removes, in small batches, each its own short transaction.
//!
//! A finished delivery older than the retention is compacted: its reply and content go, a digest
//! of its decisive content and the reply's outcome stay (`key::compact`), in a row under the
//! same key, so that a repeat still finds it on the claim's one lookup (`RecordState::Pruned`:
//! the same decisive content runs as the next attempt with `Claim::reply_pruned`, other content
//! is a conflict). Compact records older than a second, longer horizon are removed when asked
//! (`forget_older_than`): a repeat of one is then a new delivery, and only the partner's ledger
//! knows it. Never pruned: an unfinished delivery (claimed, abandoned, closed), a delivery with an
//! open conflict, the seen indexes (the runs, so no gap opens or closes), open index jumps, and
//! unresolved conflicts. Deliveries refused by validation and resolved conflicts older than the
//! retention are removed.

use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};

use super::admin;
use super::export::reply_outcome;
use super::key;
use super::lock::EXPORT_LOCK;
use super::sql::{self, Sql, SqlRow, Value};

/// What `Journal::prune` removes. Plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneOptions {
    /// Finished deliveries whose `finished_ms` is older than this are compacted (their reply and
    /// content removed, a digest kept). At least a day: the service resends a delivery for far
    /// less, and a reply younger than that is the exactly-once promise itself.
    pub older_than: Duration,
    /// Compact records older than this are removed entirely; `None` (the default) keeps them.
    /// Must be longer than `older_than`.
    pub forget_older_than: Option<Duration>,
    /// Rows per transaction (default 200): a delivery waits at most one batch for the journal.
    pub batch: usize,
    /// The pause between two batches (default 10 ms), so that deliveries are not queued behind
    /// a long run of batches.
    pub pause: Duration,
    /// Stop after this long, whatever is left (the next run goes on); `None`: until done.
    pub max_time: Option<Duration>,
}

impl PruneOptions {
    /// Retention of `older_than`, compact records kept, batches of 200 rows 10 ms apart.
    pub fn older_than(older_than: Duration) -> PruneOptions {
        PruneOptions {
            older_than,
            forget_older_than: None,
            batch: 200,
            pause: Duration::from_millis(10),
            max_time: None,
        }
    }

    pub(crate) fn check(&self) -> Result<()> {
        const DAY: Duration = Duration::from_secs(24 * 3600);
        let invalid = |field: &str, problem: &str| Err(Error::field(ErrorKind::InvalidArgument, field, problem));
        if self.older_than < DAY {
            return invalid(
                "older_than",
                "must be at least 1 day (24 hours): younger replies are what repeats are answered with",
            );
        }
        if self.older_than.as_millis() >= i64::MAX as u128 {
            return invalid("older_than", "is too large");
        }
        if let Some(forget) = self.forget_older_than {
            if forget <= self.older_than {
                return invalid("forget_older_than", "must be longer than older_than");
            }
            if forget.as_millis() >= i64::MAX as u128 {
                return invalid("forget_older_than", "is too large");
            }
        }
        // Nine parameters a row in the statement that moves them (SQLite takes 32,766).
        if self.batch == 0 || self.batch > 3_000 {
            return invalid("batch", "must be 1 to 3000 rows");
        }
        if self.pause > Duration::from_secs(60) {
            return invalid("pause", "must be at most 60 s");
        }
        Ok(())
    }
}

/// What `Journal::prune` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Finished deliveries compacted (reply and content removed, digest kept).
    pub compacted: u64,
    /// Compact records removed (`forget_older_than`).
    pub forgotten: u64,
    /// Records of deliveries refused by validation removed.
    pub refused_removed: u64,
    /// Resolved conflicts removed.
    pub conflicts_removed: u64,
    /// Transactions run.
    pub batches: u64,
    /// The longest a batch's transaction took: what a delivery may have waited for it.
    pub longest_batch: Duration,
    /// Bytes given back to the file system (SQLite journals created by this release, by
    /// incremental vacuum); 0 on PostgreSQL, whose autovacuum reuses the space.
    pub bytes_returned: u64,
    /// Whether nothing eligible is left (false when `max_time` stopped it first, or an export
    /// running: see `stopped_by`).
    pub complete: bool,
    /// Why it stopped before done: `max_time`, or an export running (who, since when: an export
    /// pages through the deliveries, and a delivery compacted under it would move past its page
    /// and be listed twice). `None` when complete.
    pub stopped_by: Option<String>,
    /// Whether it stopped at once for an export running (run it again once the export is done).
    pub export_running: bool,
}

/// What one batch removed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Batch {
    pub compacted: u64,
    pub forgotten: u64,
    pub refused_removed: u64,
    pub conflicts_removed: u64,
    /// Who runs an export, when one runs: the batch did nothing.
    pub export_running: Option<String>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.compacted + self.forgotten + self.refused_removed + self.conflicts_removed == 0
    }
}

fn ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The finished deliveries older than `?1`, the oldest first, at most `?2` (every row is folded
/// when an operator's work runs: `Store::admin` folds first; `folded = 1` lets SQLite read its
/// partial index of them).
const CANDIDATES: &str = "SELECT d.id, d.key, d.name, d.transaction_id, d.first_index, d.content, d.reply, d.attempts, d.created_ms, d.updated_ms, d.finished_ms FROM sp_journal_delivery d WHERE d.state = 'done' AND d.folded = 1 AND d.finished_ms < ?1 ORDER BY d.finished_ms LIMIT ?2";
/// Removes at most `?2` compact records older than `?1`; the state checked again on the row
/// itself: a repeat may have taken it over meanwhile.
const FORGET_DELETE: &str = "DELETE FROM sp_journal_delivery WHERE id IN (SELECT id FROM sp_journal_delivery WHERE state = 'pruned' AND finished_ms < ?1 ORDER BY finished_ms LIMIT ?2) AND state = 'pruned'";
/// Removes at most `?2` refused deliveries older than `?1`.
const REFUSED_DELETE: &str = "DELETE FROM sp_journal_refused WHERE id IN (SELECT id FROM sp_journal_refused WHERE at_ms < ?1 ORDER BY at_ms LIMIT ?2)";
/// Removes at most `?2` refusals resolved before `?1`; never a handed-out conflict, which says
/// which content the stored reply answers.
const CONFLICTS_DELETE: &str = "DELETE FROM sp_journal_conflicts WHERE id IN (SELECT id FROM sp_journal_conflicts WHERE resolved_ms IS NOT NULL AND outcome = 'refused' AND resolved_ms < ?1 ORDER BY resolved_ms LIMIT ?2)";

/// One batch, in the caller's write transaction: at most `options.batch` rows of each kind.
/// Nothing while an export runs (`EXPORT_LOCK` held): `Batch::export_running` names it.
pub(crate) fn batch(sql: &mut dyn Sql, options: &PruneOptions) -> Result<Batch> {
    let mut done = Batch::default();
    if let Some(holder) = admin::live_lock(sql, EXPORT_LOCK)? {
        done.export_running = Some(holder);
        return Ok(done);
    }
    let now = sql.now_ms()?;
    let retention = ms(options.older_than);
    // A clock stepped ahead on the host that prunes does not age a reply finished just now: the
    // cutoff is never later than the newest stored reply's time less the retention.
    let newest =
        sql::int(sql, "SELECT MAX(finished_ms) FROM sp_journal_delivery WHERE state = 'done' AND folded = 1", &[])?;
    let cutoff = now.min(newest.unwrap_or(now)).saturating_sub(retention);
    let limit = i64::try_from(options.batch).unwrap_or(i64::MAX);
    let numbering_from_id = sql::int(sql, "SELECT value FROM sp_journal_meta WHERE key = 'numbering_from_id'", &[])?;
    // Candidates, locked on PostgreSQL (rows another transaction holds are left for the next
    // batch); the oldest first.
    let rows: Vec<SqlRow> = sql.rows(&format!("{CANDIDATES}{}", sql.lock_rows()), &[cutoff.into(), limit.into()])?;
    // Checked now, in a statement of its own (on PostgreSQL a fresh snapshot, the rows held): a
    // delivery whose conflict is open, or whose key was handed out with other content (whose
    // reply is this row's), stays whole.
    let keys: Vec<Value> = rows.iter().filter_map(|row| row.get(1).cloned()).collect();
    let kept: std::collections::HashSet<String> = if keys.is_empty() {
        Default::default()
    } else {
        let list = placeholders(1, keys.len());
        sql.rows(
            &format!(
                "SELECT key FROM sp_journal_conflicts WHERE key IN ({list}) AND (resolved_ms IS NULL OR outcome = 'handed_out')"
            ),
            &keys,
        )?
        .iter()
        .filter_map(|r| r.first().and_then(Value::text))
        .collect()
    };
    let mut moved: Vec<(i64, Vec<Value>)> = Vec::new();
    for row in &rows {
        let (Some(id), Some(key_text), Some(content)) =
            (row.first().and_then(Value::int), row.get(1).and_then(Value::text), row.get(5).and_then(Value::text))
        else {
            continue;
        };
        if kept.contains(&key_text) {
            continue;
        }
        let reply = row.get(6).and_then(Value::text).unwrap_or_default();
        let compact = key::compact(&key::from_stored(&content), reply_outcome(reply.as_bytes()));
        // A compacted delivery moves to a new row (a new `id`, the same key): SQLite frees a
        // page only once no row is left on it, and rows shrunk in place would leave every page
        // sparse and never reused (new rows go to the end). A delivery of an earlier numbering
        // is compacted in place: a new `id` would count it in the current one.
        if numbering_from_id.is_some_and(|from| id <= from) {
            done.compacted += sql.exec(
                "UPDATE sp_journal_delivery SET state = 'pruned', content = ?2, reply = NULL, token = NULL WHERE id = ?1 AND state = 'done'",
                &[id.into(), compact.as_str().into()],
            )?;
            continue;
        }
        let column = |i: usize| row.get(i).cloned().unwrap_or(Value::Int(None));
        let values = vec![
            column(1),
            column(2),
            column(3),
            column(4),
            compact.as_str().into(),
            column(7),
            column(8),
            column(9),
            column(10),
        ];
        moved.push((id, values));
    }
    // The moves, three statements for the batch: the rows still finished leave, and come back
    // compacted.
    if !moved.is_empty() {
        let ids: Vec<Value> = moved.iter().map(|(id, _)| Value::from(*id)).collect();
        let gone: std::collections::HashSet<i64> = sql
            .rows(
                &format!(
                    "DELETE FROM sp_journal_delivery WHERE id IN ({}) AND state = 'done' RETURNING id",
                    placeholders(1, ids.len())
                ),
                &ids,
            )?
            .iter()
            .filter_map(|r| r.first().and_then(Value::int))
            .collect();
        let rows: Vec<Value> =
            moved.into_iter().filter(|(id, _)| gone.contains(id)).flat_map(|(_, values)| values).collect();
        if !rows.is_empty() {
            let tuples: Vec<String> = (0..rows.len() / 9)
                .map(|r| {
                    let p = |k: usize| format!("?{}", r * 9 + k);
                    format!(
                        "({}, {}, {}, {}, {}, 'pruned', {}, {}, {}, 0, {})",
                        p(1),
                        p(2),
                        p(3),
                        p(4),
                        p(5),
                        p(6),
                        p(7),
                        p(8),
                        p(9)
                    )
                })
                .collect();
            done.compacted += sql.exec(
                &format!(
                    "INSERT INTO sp_journal_delivery (key, name, transaction_id, first_index, content, state, attempts, created_ms, updated_ms, lease_until_ms, finished_ms) VALUES {}",
                    tuples.join(", ")
                ),
                &rows,
            )?;
        }
    }
    if let Some(forget) = options.forget_older_than {
        let forget_cutoff = now.min(newest.unwrap_or(now)).saturating_sub(ms(forget));
        // The state checked again on the row itself: a repeat may have taken it over meanwhile.
        done.forgotten = sql.exec(FORGET_DELETE, &[forget_cutoff.into(), limit.into()])?;
    }
    done.refused_removed = sql.exec(REFUSED_DELETE, &[cutoff.into(), limit.into()])?;
    done.conflicts_removed = sql.exec(CONFLICTS_DELETE, &[cutoff.into(), limit.into()])?;
    for (counter, n) in [("pruned", done.compacted), ("forgotten", done.forgotten)] {
        if n > 0 {
            sql.exec(
                "UPDATE sp_journal_meta SET value = value + ?2 WHERE key = ?1",
                &[counter.into(), i64::try_from(n).unwrap_or(i64::MAX).into()],
            )?;
        }
    }
    Ok(done)
}

/// `?first, ?first+1, ...`: `n` numbered parameters.
fn placeholders(first: usize, n: usize) -> String {
    (first..first + n).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ")
}

/// Whether the library's own retention may run a batch now: at most one a second for the whole
/// journal, whichever process asks first (`retention_ran_ms` in the meta table, on the journal's
/// clock).
pub(crate) fn retention_due(sql: &mut dyn Sql) -> Result<bool> {
    let now = sql.now_ms()?;
    sql.exec(
        "INSERT INTO sp_journal_meta (key, value) VALUES ('retention_ran_ms', 0) ON CONFLICT (key) DO NOTHING",
        &[],
    )?;
    let won = sql.exec(
        "UPDATE sp_journal_meta SET value = ?1 WHERE key = 'retention_ran_ms' AND (value <= ?2 OR value > ?1)",
        &[now.into(), now.saturating_sub(1_000).into()],
    )?;
    Ok(won == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every statement of a batch finds its rows through an index, never by reading a whole
    /// table (a batch runs once a second under the library's own retention, holding SQLite's
    /// write lock).
    #[test]
    fn batches_never_scan_a_table() {
        let db = rusqlite::Connection::open_in_memory().unwrap();
        for ddl in [crate::journal::schema::SQLITE, crate::journal::schema::SQLITE_V2] {
            db.execute_batch(ddl).unwrap();
        }
        for (table, column, kind) in crate::journal::schema::SQLITE_V3_COLUMNS {
            db.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {kind}")).unwrap();
        }
        db.execute_batch(crate::journal::schema::SQLITE_V3).unwrap();
        for (table, column, kind) in crate::journal::schema::SQLITE_V5_COLUMNS {
            db.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {kind}")).unwrap();
        }
        db.execute_batch(crate::journal::schema::SQLITE_V5).unwrap();
        for statement in [CANDIDATES, FORGET_DELETE, REFUSED_DELETE, CONFLICTS_DELETE] {
            let mut plan = db.prepare(&format!("EXPLAIN QUERY PLAN {statement}")).unwrap();
            let details: Vec<String> =
                plan.query_map([0i64, 200], |r| r.get::<_, String>(3)).unwrap().map(|d| d.unwrap()).collect();
            assert!(!details.iter().any(|d| d.starts_with("SCAN ")), "{statement}: {details:?}");
        }
    }

    #[test]
    fn options_are_checked_field_by_field() {
        let day = Duration::from_secs(86_400);
        assert!(PruneOptions::older_than(day).check().is_ok());
        let message = |o: PruneOptions| o.check().unwrap_err().message;
        assert!(message(PruneOptions::older_than(day / 2)).contains("older_than"));
        let forget_short = PruneOptions { forget_older_than: Some(day), ..PruneOptions::older_than(day) };
        assert!(message(forget_short).contains("forget_older_than"));
        assert!(message(PruneOptions { batch: 0, ..PruneOptions::older_than(day) }).contains("batch"));
        assert!(message(PruneOptions { batch: 3_001, ..PruneOptions::older_than(day) }).contains("batch"));
        assert!(PruneOptions { batch: 3_000, ..PruneOptions::older_than(day) }.check().is_ok());
        assert!(message(PruneOptions::older_than(Duration::MAX)).contains("older_than"));
    }
}
