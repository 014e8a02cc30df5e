//! The journal's tables, for both backends, and their version.
//!
//! Every table (and, from version 4, the one function on PostgreSQL) is named `sp_journal_*`, so
//! that a journal may live in a database the partner also uses. `sp_journal_meta` holds
//! `schema_version` (a later release migrates from it; a journal of a newer version is refused),
//! `seen_count` until version 4 (distinct indexes seen) and, when configured, `first_index`.
//!
//! - `sp_journal_delivery`: a row per key: the canonical content, the state (`claimed`, `done`,
//!   `abandoned`), the claim token, attempts, lease, times and the stored reply.
//! - `sp_journal_runs`: the seen indexes as runs `lo..=hi` (see `gaps.rs`).
//! - `sp_journal_seen` (PostgreSQL only): indexes seen and not yet merged into the runs, so that
//!   concurrent deliveries on several hosts do not queue on the runs; merged in batches.
//! - `sp_journal_refused`: deliveries refused by validation whose index could be read.
//! - `sp_journal_counters`: handled (from version 4 an offset only), replayed, conflicts, refused,
//!   in progress; in several rows
//!   (shards) on PostgreSQL so that concurrent transactions rarely update the same row.
//!
//! Two clocks. Every `*_ms` column but the two leases (`created_ms`, `updated_ms`, `finished_ms`,
//! a lock's `since_ms`, the bookkeeping's times) is a wall-clock time for people (ms since the
//! Unix epoch; on PostgreSQL the server's clock): a step of that clock moves them and nothing
//! else; recovery's order of retries (`sp_journal_fetch.last_ms`) is the most it decides. A lease,
//! `lease_until_ms` of a claim and `until_ms` of a lock, is on the lease clock
//! (`sql::LeaseClock`): on PostgreSQL the server's clock again; on SQLite the host's
//! `CLOCK_BOOTTIME` (ms since the boot), with the boot's identity in `lease_boot`, a lease of
//! another boot or of none (NULL: written by version 1, by the wall clock) being over. On
//! PostgreSQL `lease_boot` stays NULL.
//!
//! Version 2 adds (created on a new journal, and by the migration from version 1):
//! - `sp_journal_jumps`: index jumps (an index far beyond the highest seen) and reused indexes (an
//!   index seen before arriving with another event), until an operator accepts them;
//! - `sp_journal_resolved`: ranges of missing indexes an operator closed by hand, with a note;
//! - `sp_journal_conflicts`: deliveries whose key came before with other decisive content, both
//!   contents and the differing fields, until an operator resolves them;
//! - `sp_journal_fetch`: what recovery got for a missing index (tries, 404s, the last outcome);
//! - `sp_journal_locks`: who holds a named lock (the recovery lock), since when, until when;
//! - `sp_journal_runs_archive`: the runs of an earlier numbering (see `Journal::renumber`);
//! - meta `numbering`: the current numbering, 1 until the first renumbering;
//! - `lease_boot` of `sp_journal_delivery` and `sp_journal_locks`: the boot a SQLite lease was
//!   set in (see above); a claim of version 1 has none, so it counts as expired.
//!
//! Version 4 writes less a delivery (see docs/experiments-2026-12.md), keeping every figure:
//! - the count of distinct indexes seen is the runs' sum, read when asked (`admin::seen_count`),
//!   instead of a `seen_count` row written at every new index; the row is renamed
//!   `runs_merge_lock`, which only the merging of `sp_journal_seen` locks (PostgreSQL);
//! - handled is folded when read: the deliveries done now, plus those compacted since (meta
//!   `pruned`, counted by `prune` as it compacts a finished delivery: the only way a row leaves
//!   `done`), plus `sp_journal_counters.handled_offset`, which the migration sets so that the
//!   figure is what version 3 counted. A compacted delivery taken over and finished again is
//!   done again: handled twice, as version 3 counted it. The column was `handled`: a process of
//!   an older release still running against a migrated journal fails at its finish (the
//!   transaction, the partner's statements with it, rolled back) instead of counting twice;
//! - no index of `sp_journal_delivery.transaction_id`: `Journal::lookup` reads a transaction's
//!   deliveries by their keys (`key::transaction_keys`), through the key's index;
//! - on PostgreSQL, the function `sp_journal_store_unwritten` (the journal's only function,
//!   named as its tables are): the statement storing a delivery claimed at finish, whose plan
//!   the server connection keeps (see `postgres::FINISH_UNWRITTEN`).
//!
//! Version 5 writes a new delivery on SQLite as its row and the row's key and index entries
//! only, the hand-written idempotency row's work plus the index (see docs/experiments-2026-12.md):
//! - `sp_journal_delivery.folded` (1 unless said otherwise, so that a row another release
//!   writes counts as folded): a row SQLite's delivery path writes has 0 until it is folded, in
//!   batches (every `sqlite::FOLD_EVERY` rows, in the writing transaction; before an operator's
//!   or a monitor's read, `Store::admin`; before an index is recorded by any other path): its
//!   index is merged into the runs then (judged for an index jump in the order the rows were
//!   written, as if recorded at once: `gaps::add_arrived`; noted with its key), instead of a runs
//!   row written a delivery. Since a later release of the same schema, the check for a reused
//!   index is made then too (`sqlite::note_reused`), not at every new row: the record of a
//!   reused index carries the fold's time, at most `FOLD_EVERY` rows late; a row deleted by
//!   hand before its fold is never judged; and while a process of the release before still
//!   writes to the journal (a rolling upgrade), a reuse it noted at its row is noted again by
//!   the fold, its record's count one higher. Meta `folded_id` is the newest row folded: every row above it has
//!   0 (the rows a delivery writes, numbered up from the highest id), every row at or below it
//!   1 (lowered when a delete leaves it above the highest id, which SQLite would number again);
//! - the partial index of finished deliveries, which `prune` and the oldest record read, holds
//!   folded rows only (`sp_journal_delivery_done_folded`); handled sums it with the done rows
//!   not folded yet, read through the row ids above `folded_id` (`COUNTERS_SUM_SQLITE`);
//! - the counters' `handled_offset` is renamed `handled_base` and `in_progress` `in_flight`: a
//!   process of version 4 still running against a migrated journal, which would record indexes
//!   without the rows not folded (missing a reused index, or compacting such a row with its
//!   index never merged), fails at each claim and finish instead (its transaction, the partner's
//!   statements with it, rolled back: the service delivers again), and cannot read figures
//!   that would leave out the rows not folded.
//!
//! PostgreSQL has the column (always 1: its indexes are merged from `sp_journal_seen`, since its
//! row ids commit out of order) and the rename, and keeps its index of finished deliveries.
//!
//! Version 6 writes a new delivery on SQLite as its row and its key's entry only, as the
//! hand-written idempotency row (see docs/experiments-2026-12.md): the index of `first_index`
//! holds folded rows only (`sp_journal_delivery_index_folded`, which replaces
//! `sp_journal_delivery_index`), each entering it when its row is folded; a reader of the
//! deliveries at an index reads it with `folded = 1`, and the rows not folded yet (a few
//! hundred at most) through the row ids above `folded_id`. Every reader outside the delivery
//! path folds first (`Store::admin`), so that there are none. The counters' `in_flight` is
//! renamed `claims_open`, on both backends: a process of version 5 still running against a
//! migrated journal, whose look for another key at a delivery's index would read the whole
//! table now (under SQLite's write lock, every delivery), fails at each claim and finish instead
//! (as one of version 4 does, see version 5), and stores nothing claimed at finish, as
//! `schema_version` is checked with every such delivery. PostgreSQL changes nothing else.
//!
//! Keys of events without a `transactionId` moved to their own key spaces in version 2
//! (`event#<index>#<name>`, `action#<index>#<name>`); the migration moves version 1's
//! `<name>:<index>` keys to `event#<index>#<name>` (version 1 did not keep whether a name came
//! from `action`; unknown actions are far rarer than unknown events).

use crate::error::{Error, ErrorKind};

/// The schema this release writes and reads.
pub(crate) const VERSION: i64 = 6;

/// `PRAGMA application_id` of a SQLite journal: `SPJ1` in ASCII. A database marked otherwise, or
/// holding tables but no journal, is refused rather than turned into one.
pub(crate) const APPLICATION_ID: i64 = 0x5350_4A31;

/// Counter shards on PostgreSQL (SQLite has one writer at a time, so one row).
pub(crate) const PG_SHARDS: i64 = 16;

pub(crate) const SQLITE: &str = "
CREATE TABLE sp_journal_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO sp_journal_meta (key, value) VALUES ('schema_version', 3), ('seen_count', 0), ('numbering', 1);
CREATE TABLE sp_journal_delivery (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    transaction_id INTEGER,
    first_index INTEGER,
    content TEXT NOT NULL,
    state TEXT NOT NULL,
    token BLOB,
    attempts INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    lease_until_ms INTEGER NOT NULL,
    finished_ms INTEGER,
    reply BLOB
);
CREATE INDEX sp_journal_delivery_transaction ON sp_journal_delivery (transaction_id);
CREATE TABLE sp_journal_runs (lo INTEGER PRIMARY KEY, hi INTEGER NOT NULL);
CREATE TABLE sp_journal_refused (
    id INTEGER PRIMARY KEY,
    idx INTEGER NOT NULL,
    name TEXT,
    transaction_id INTEGER,
    at_ms INTEGER NOT NULL
);
CREATE INDEX sp_journal_refused_transaction ON sp_journal_refused (transaction_id);
CREATE TABLE sp_journal_counters (
    shard INTEGER PRIMARY KEY,
    handled INTEGER NOT NULL DEFAULT 0,
    replayed INTEGER NOT NULL DEFAULT 0,
    conflicts INTEGER NOT NULL DEFAULT 0,
    refused INTEGER NOT NULL DEFAULT 0,
    in_progress INTEGER NOT NULL DEFAULT 0
);
INSERT INTO sp_journal_counters (shard) VALUES (0);
";

/// The columns version 2 adds to tables of version 1 on SQLite, each added with `SQLITE_V2`
/// unless the table has it (SQLite has no `ADD COLUMN IF NOT EXISTS`): table, column, type.
/// `sp_journal_locks` is listed too, for a table created without it.
pub(crate) const SQLITE_V2_COLUMNS: &[(&str, &str, &str)] =
    &[("sp_journal_delivery", "lease_boot", "TEXT"), ("sp_journal_locks", "lease_boot", "TEXT")];

/// The tables version 2 adds, on SQLite (run on a new journal and by the migration, with
/// `SQLITE_V2_COLUMNS`).
pub(crate) const SQLITE_V2: &str = "
CREATE INDEX IF NOT EXISTS sp_journal_delivery_index ON sp_journal_delivery (first_index);
CREATE INDEX IF NOT EXISTS sp_journal_delivery_open ON sp_journal_delivery (state) WHERE state IN ('claimed', 'abandoned');
CREATE TABLE IF NOT EXISTS sp_journal_jumps (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    idx INTEGER NOT NULL,
    previous_highest INTEGER,
    key TEXT,
    name TEXT,
    other_key TEXT,
    count INTEGER NOT NULL DEFAULT 1,
    last_idx INTEGER NOT NULL,
    numbering INTEGER NOT NULL,
    at_ms INTEGER NOT NULL,
    last_ms INTEGER NOT NULL,
    decision TEXT,
    decided_ms INTEGER,
    note TEXT
);
CREATE TABLE IF NOT EXISTS sp_journal_resolved (
    id INTEGER PRIMARY KEY,
    lo INTEGER NOT NULL,
    hi INTEGER NOT NULL,
    closed INTEGER NOT NULL,
    numbering INTEGER NOT NULL,
    note TEXT NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sp_journal_conflicts (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    transaction_id INTEGER,
    idx INTEGER,
    first_content TEXT NOT NULL,
    now_content TEXT NOT NULL,
    differing TEXT NOT NULL,
    outcome TEXT NOT NULL,
    count INTEGER NOT NULL DEFAULT 1,
    first_ms INTEGER NOT NULL,
    last_ms INTEGER NOT NULL,
    resolved_ms INTEGER,
    note TEXT
);
CREATE INDEX IF NOT EXISTS sp_journal_conflicts_key ON sp_journal_conflicts (key);
CREATE TABLE IF NOT EXISTS sp_journal_fetch (
    idx INTEGER PRIMARY KEY,
    tries INTEGER NOT NULL,
    not_found INTEGER NOT NULL,
    last_ms INTEGER NOT NULL,
    last_outcome TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sp_journal_locks (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    since_ms INTEGER NOT NULL,
    until_ms INTEGER NOT NULL,
    lease_boot TEXT
);
CREATE TABLE IF NOT EXISTS sp_journal_runs_archive (
    numbering INTEGER NOT NULL,
    lo INTEGER NOT NULL,
    hi INTEGER NOT NULL,
    PRIMARY KEY (numbering, lo)
);
";

pub(crate) const POSTGRES: &str = "
CREATE TABLE sp_journal_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
INSERT INTO sp_journal_meta (key, value) VALUES ('schema_version', 3), ('seen_count', 0), ('numbering', 1);
CREATE TABLE sp_journal_delivery (
    id BIGSERIAL PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    transaction_id BIGINT,
    first_index BIGINT,
    content TEXT NOT NULL,
    state TEXT NOT NULL,
    token BYTEA,
    attempts BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    lease_until_ms BIGINT NOT NULL,
    finished_ms BIGINT,
    reply BYTEA
);
CREATE INDEX sp_journal_delivery_transaction ON sp_journal_delivery (transaction_id);
CREATE TABLE sp_journal_runs (lo BIGINT PRIMARY KEY, hi BIGINT NOT NULL);
CREATE TABLE sp_journal_seen (idx BIGINT PRIMARY KEY);
CREATE TABLE sp_journal_refused (
    id BIGSERIAL PRIMARY KEY,
    idx BIGINT NOT NULL,
    name TEXT,
    transaction_id BIGINT,
    at_ms BIGINT NOT NULL
);
CREATE INDEX sp_journal_refused_transaction ON sp_journal_refused (transaction_id);
CREATE TABLE sp_journal_counters (
    shard BIGINT PRIMARY KEY,
    handled BIGINT NOT NULL DEFAULT 0,
    replayed BIGINT NOT NULL DEFAULT 0,
    conflicts BIGINT NOT NULL DEFAULT 0,
    refused BIGINT NOT NULL DEFAULT 0,
    in_progress BIGINT NOT NULL DEFAULT 0
);
INSERT INTO sp_journal_counters (shard) SELECT generate_series(0, 15);
";

/// The tables version 2 adds, on PostgreSQL (`lease_boot` stays NULL there: the server's clock
/// has no boot; the column is there for the SQL both backends share).
pub(crate) const POSTGRES_V2: &str = "
ALTER TABLE sp_journal_delivery ADD COLUMN IF NOT EXISTS lease_boot TEXT;
CREATE INDEX IF NOT EXISTS sp_journal_delivery_index ON sp_journal_delivery (first_index);
CREATE INDEX IF NOT EXISTS sp_journal_delivery_open ON sp_journal_delivery (state) WHERE state IN ('claimed', 'abandoned');
CREATE TABLE IF NOT EXISTS sp_journal_jumps (
    id BIGSERIAL PRIMARY KEY,
    kind TEXT NOT NULL,
    idx BIGINT NOT NULL,
    previous_highest BIGINT,
    key TEXT,
    name TEXT,
    other_key TEXT,
    count BIGINT NOT NULL DEFAULT 1,
    last_idx BIGINT NOT NULL,
    numbering BIGINT NOT NULL,
    at_ms BIGINT NOT NULL,
    last_ms BIGINT NOT NULL,
    decision TEXT,
    decided_ms BIGINT,
    note TEXT
);
CREATE TABLE IF NOT EXISTS sp_journal_resolved (
    id BIGSERIAL PRIMARY KEY,
    lo BIGINT NOT NULL,
    hi BIGINT NOT NULL,
    closed BIGINT NOT NULL,
    numbering BIGINT NOT NULL,
    note TEXT NOT NULL,
    at_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS sp_journal_conflicts (
    id BIGSERIAL PRIMARY KEY,
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    transaction_id BIGINT,
    idx BIGINT,
    first_content TEXT NOT NULL,
    now_content TEXT NOT NULL,
    differing TEXT NOT NULL,
    outcome TEXT NOT NULL,
    count BIGINT NOT NULL DEFAULT 1,
    first_ms BIGINT NOT NULL,
    last_ms BIGINT NOT NULL,
    resolved_ms BIGINT,
    note TEXT
);
CREATE INDEX IF NOT EXISTS sp_journal_conflicts_key ON sp_journal_conflicts (key);
CREATE TABLE IF NOT EXISTS sp_journal_fetch (
    idx BIGINT PRIMARY KEY,
    tries BIGINT NOT NULL,
    not_found BIGINT NOT NULL,
    last_ms BIGINT NOT NULL,
    last_outcome TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sp_journal_locks (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    since_ms BIGINT NOT NULL,
    until_ms BIGINT NOT NULL,
    lease_boot TEXT
);
ALTER TABLE sp_journal_locks ADD COLUMN IF NOT EXISTS lease_boot TEXT;
CREATE TABLE IF NOT EXISTS sp_journal_runs_archive (
    numbering BIGINT NOT NULL,
    lo BIGINT NOT NULL,
    hi BIGINT NOT NULL,
    PRIMARY KEY (numbering, lo)
);
";

/// Inserts the run `?1..=?2`, or sets the `hi` of the run starting at `?1`, with its times (see
/// `gaps::Runs::put`): `since_ms`, when its earliest index was seen, dates the gap below it: the
/// earliest of the runs it absorbs (those starting within it, before they are removed) and `?3`,
/// never later than `?3` (a time written by a clock that ran ahead does not outlive it);
/// `last_ms`, when an index was last added (`Status::last_delivery_ms`): the latest of theirs and
/// `?4` (NULL for indexes closed by hand). `?3` and `?4` on the journal's wall clock.
pub(crate) const RUNS_PUT: &str = "INSERT INTO sp_journal_runs (lo, hi, since_ms, last_ms) SELECT CAST(?1 AS BIGINT), CAST(?2 AS BIGINT), CASE WHEN MIN(since_ms) IS NULL OR MIN(since_ms) > CAST(?3 AS BIGINT) THEN CAST(?3 AS BIGINT) ELSE MIN(since_ms) END, CASE WHEN CAST(?4 AS BIGINT) IS NULL OR MAX(last_ms) > CAST(?4 AS BIGINT) THEN MAX(last_ms) ELSE CAST(?4 AS BIGINT) END FROM sp_journal_runs WHERE lo >= ?1 AND lo <= ?2 ON CONFLICT (lo) DO UPDATE SET hi = excluded.hi, since_ms = excluded.since_ms, last_ms = excluded.last_ms";

/// The data migration from version 1 (after the version 2 tables exist), in order; the same SQL
/// on both backends.
pub(crate) const MIGRATE_V1: &[&str] = &[
    // Version 1 kept only an unknown event's name as its content: marked, so that repeats of it
    // are compared by name (see `key::LEGACY_MARK`).
    "UPDATE sp_journal_delivery SET content = substr(content, 1, length(content) - 1) || ',\"(journal v1)\":true}' WHERE transaction_id IS NULL AND first_index IS NOT NULL",
    "UPDATE sp_journal_delivery SET key = 'event#' || CAST(first_index AS TEXT) || '#' || name WHERE transaction_id IS NULL AND first_index IS NOT NULL",
    "INSERT INTO sp_journal_meta (key, value) VALUES ('numbering', 1) ON CONFLICT (key) DO NOTHING",
    "UPDATE sp_journal_meta SET value = 2 WHERE key = 'schema_version'",
];

/// The columns version 3 adds on SQLite (table, column, type), each unless the table has it.
pub(crate) const SQLITE_V3_COLUMNS: &[(&str, &str, &str)] =
    &[("sp_journal_runs", "since_ms", "INTEGER"), ("sp_journal_runs", "last_ms", "INTEGER")];

/// What version 3 adds, on SQLite after `SQLITE_V3_COLUMNS` (on a new journal and by the
/// migration): the indexes `prune` finds old finished deliveries and old compact records by
/// (each holds only rows of its state, so a row leaves it as it is compacted or removed), old
/// refused deliveries and resolved refusals, and the bookkeeping of pruning.
pub(crate) const SQLITE_V3: &str = "
CREATE INDEX IF NOT EXISTS sp_journal_delivery_done ON sp_journal_delivery (finished_ms) WHERE state = 'done';
CREATE INDEX IF NOT EXISTS sp_journal_delivery_pruned ON sp_journal_delivery (finished_ms) WHERE state = 'pruned';
CREATE INDEX IF NOT EXISTS sp_journal_refused_at ON sp_journal_refused (at_ms);
CREATE INDEX IF NOT EXISTS sp_journal_conflicts_resolved ON sp_journal_conflicts (resolved_ms) WHERE resolved_ms IS NOT NULL AND outcome = 'refused';
INSERT INTO sp_journal_meta (key, value) VALUES ('pruned', 0), ('forgotten', 0) ON CONFLICT (key) DO NOTHING;
";

/// What version 3 adds, on PostgreSQL (see `SQLITE_V3`).
pub(crate) const POSTGRES_V3: &str = "
ALTER TABLE sp_journal_runs ADD COLUMN IF NOT EXISTS since_ms BIGINT;
ALTER TABLE sp_journal_runs ADD COLUMN IF NOT EXISTS last_ms BIGINT;
ALTER TABLE sp_journal_seen ADD COLUMN IF NOT EXISTS at_ms BIGINT;
CREATE INDEX IF NOT EXISTS sp_journal_delivery_done ON sp_journal_delivery (finished_ms) WHERE state = 'done';
CREATE INDEX IF NOT EXISTS sp_journal_delivery_pruned ON sp_journal_delivery (finished_ms) WHERE state = 'pruned';
CREATE INDEX IF NOT EXISTS sp_journal_refused_at ON sp_journal_refused (at_ms);
CREATE INDEX IF NOT EXISTS sp_journal_conflicts_resolved ON sp_journal_conflicts (resolved_ms) WHERE resolved_ms IS NOT NULL AND outcome = 'refused';
INSERT INTO sp_journal_meta (key, value) VALUES ('pruned', 0), ('forgotten', 0) ON CONFLICT (key) DO NOTHING;
";

/// The data migration to version 3 (after its tables and columns exist), the same SQL on both
/// backends; `?1` is now on the journal's wall clock. Runs seen before the upgrade have no time:
/// their gaps count their age from the upgrade, and the last delivery is unknown until the next.
pub(crate) const MIGRATE_V2: &[&str] = &[
    "UPDATE sp_journal_runs SET since_ms = ?1 WHERE since_ms IS NULL",
    "UPDATE sp_journal_meta SET value = 3 WHERE key = 'schema_version'",
];

/// What version 4 changes on SQLite, in the migration's transaction while the counters still
/// have version 3's `handled` column (`sqlite::add_v4` runs it only then): the handled deliveries
/// that the done rows and the compactions do not show go to shard 0, the other shards' are
/// cleared, and the column is renamed `handled_offset` (see the module's notes on version 4).
pub(crate) const SQLITE_V4_HANDLED: &str = "
UPDATE sp_journal_counters SET handled = (SELECT SUM(handled) FROM sp_journal_counters) - (SELECT count(*) FROM sp_journal_delivery WHERE state = 'done') - COALESCE((SELECT value FROM sp_journal_meta WHERE key = 'pruned'), 0) WHERE shard = 0;
UPDATE sp_journal_counters SET handled = 0 WHERE shard <> 0;
ALTER TABLE sp_journal_counters RENAME COLUMN handled TO handled_offset;
";

/// `SQLITE_V4_HANDLED` on PostgreSQL, run only while the column is version 3's.
pub(crate) const POSTGRES_V4: &str = "
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'sp_journal_counters'::regclass AND attname = 'handled' AND NOT attisdropped) THEN
        UPDATE sp_journal_counters SET handled = (SELECT SUM(handled) FROM sp_journal_counters) - (SELECT count(*) FROM sp_journal_delivery WHERE state = 'done') - COALESCE((SELECT value FROM sp_journal_meta WHERE key = 'pruned'), 0) WHERE shard = 0;
        UPDATE sp_journal_counters SET handled = 0 WHERE shard <> 0;
        ALTER TABLE sp_journal_counters RENAME COLUMN handled TO handled_offset;
    END IF;
END
$$;
";

/// Deliveries whose `transactionId` is not in their key (`key::transaction_keys`): none was ever
/// written so; the migration to version 4, whose `Journal::lookup` finds a transaction by its
/// keys, refuses a journal holding one (changed by hand) rather than lose sight of it.
pub(crate) const UNKEYED_TRANSACTIONS: &str = "SELECT count(*) FROM sp_journal_delivery WHERE transaction_id IS NOT NULL AND NOT (name IN ('gameSessionBuyRefund', 'jackpotPayout') AND key = name || ':' || CAST(transaction_id AS TEXT))";

/// The data migration to version 4 (after `SQLITE_V4_HANDLED` or `POSTGRES_V4`, and the check of
/// `UNKEYED_TRANSACTIONS`), the same SQL on both backends.
pub(crate) const MIGRATE_V3: &[&str] = &[
    "UPDATE sp_journal_meta SET key = 'runs_merge_lock', value = 0 WHERE key = 'seen_count'",
    "DROP INDEX IF EXISTS sp_journal_delivery_transaction",
    "UPDATE sp_journal_meta SET value = 4 WHERE key = 'schema_version'",
];

/// What version 5 changes on SQLite (after `SQLITE_V5_COLUMNS`; see the module's notes): every
/// row written before is folded. Run again, it changes nothing.
pub(crate) const SQLITE_V5: &str = "
DROP INDEX IF EXISTS sp_journal_delivery_done;
CREATE INDEX IF NOT EXISTS sp_journal_delivery_done_folded ON sp_journal_delivery (finished_ms) WHERE state = 'done' AND folded = 1;
INSERT INTO sp_journal_meta (key, value) SELECT 'folded_id', COALESCE(MAX(id), 0) FROM sp_journal_delivery WHERE true ON CONFLICT (key) DO NOTHING;
";

/// Version 5's renames of the counters on SQLite (`POSTGRES_V5` makes them there), run only while `handled_offset` has its
/// version 4 name (see the module's notes).
pub(crate) const V5_COUNTERS: &str = "ALTER TABLE sp_journal_counters RENAME COLUMN handled_offset TO handled_base; ALTER TABLE sp_journal_counters RENAME COLUMN in_progress TO in_flight;";

/// The column version 5 adds on SQLite (table, column, type), unless the table has it.
pub(crate) const SQLITE_V5_COLUMNS: &[(&str, &str, &str)] =
    &[("sp_journal_delivery", "folded", "INTEGER NOT NULL DEFAULT 1")];

/// What version 5 changes on PostgreSQL, run only while the counters have `handled_offset`.
pub(crate) const POSTGRES_V5: &str = "
ALTER TABLE sp_journal_delivery ADD COLUMN IF NOT EXISTS folded BIGINT NOT NULL DEFAULT 1;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'sp_journal_counters'::regclass AND attname = 'handled_offset' AND NOT attisdropped) THEN
        ALTER TABLE sp_journal_counters RENAME COLUMN handled_offset TO handled_base;
        ALTER TABLE sp_journal_counters RENAME COLUMN in_progress TO in_flight;
    END IF;
END
$$;
";

/// The data migration to version 5 (after `SQLITE_V5` or `POSTGRES_V5`), the same SQL on both
/// backends.
pub(crate) const MIGRATE_V4: &[&str] = &["UPDATE sp_journal_meta SET value = 5 WHERE key = 'schema_version'"];

/// What version 6 changes on SQLite (see the module's notes): the index of `first_index` holds
/// folded rows only. Run again, it changes nothing.
pub(crate) const SQLITE_V6: &str = "
DROP INDEX IF EXISTS sp_journal_delivery_index;
CREATE INDEX IF NOT EXISTS sp_journal_delivery_index_folded ON sp_journal_delivery (first_index) WHERE folded = 1;
";

/// Version 6's rename of the counter of claims in flight on SQLite (`POSTGRES_V6` makes it
/// there), run only while the column has its version 5 name (see the module's notes).
pub(crate) const V6_COUNTERS: &str = "ALTER TABLE sp_journal_counters RENAME COLUMN in_flight TO claims_open;";

/// What version 6 changes on PostgreSQL, run only while the counters have `in_flight`.
pub(crate) const POSTGRES_V6: &str = "
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'sp_journal_counters'::regclass AND attname = 'in_flight' AND NOT attisdropped) THEN
        ALTER TABLE sp_journal_counters RENAME COLUMN in_flight TO claims_open;
    END IF;
END
$$;
";

/// The data migration to version 6 (after `SQLITE_V6`), the same SQL on both backends.
pub(crate) const MIGRATE_V5: &[&str] = &["UPDATE sp_journal_meta SET value = 6 WHERE key = 'schema_version'"];

/// Refuses a journal whose schema this release does not know; `Ok(Some(version))` when it is of
/// an earlier version this release migrates from (1 to 5), `Ok(None)` when it is current.
pub(crate) fn check_version(label: &str, found: Option<i64>) -> Result<Option<i64>, Error> {
    match found {
        Some(VERSION) => Ok(None),
        Some(version @ (1..=5)) => Ok(Some(version)),
        Some(version) if version > VERSION => Err(Error::new(
            ErrorKind::Journal,
            format!(
                "{label}: the journal has schema version {version}, newer than this release of slotpartner understands (version {VERSION}); upgrade slotpartner"
            ),
        )),
        Some(version) => Err(Error::new(
            ErrorKind::Journal,
            format!(
                "{label}: the journal has schema version {version}, which this release cannot migrate (it writes version {VERSION})"
            ),
        )),
        None => Err(Error::new(
            ErrorKind::Journal,
            format!("{label}: sp_journal_meta has no schema_version: not a slotpartner journal, or damaged"),
        )),
    }
}

/// A counter column of `sp_journal_counters` changed on its own (`finish` changes two at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counter {
    Replayed,
    Conflicts,
    Refused,
    InProgress,
}

impl Counter {
    /// `UPDATE ... SET <counter> = <counter> + ?2 WHERE shard = ?1` (PostgreSQL: `$1`, `$2`).
    pub fn sqlite_update(self) -> &'static str {
        match self {
            Counter::Replayed => "UPDATE sp_journal_counters SET replayed = replayed + ?2 WHERE shard = ?1",
            Counter::Conflicts => "UPDATE sp_journal_counters SET conflicts = conflicts + ?2 WHERE shard = ?1",
            Counter::Refused => "UPDATE sp_journal_counters SET refused = refused + ?2 WHERE shard = ?1",
            Counter::InProgress => "UPDATE sp_journal_counters SET claims_open = claims_open + ?2 WHERE shard = ?1",
        }
    }

    pub fn postgres_update(self) -> &'static str {
        match self {
            Counter::Replayed => "UPDATE sp_journal_counters SET replayed = replayed + $2 WHERE shard = $1",
            Counter::Conflicts => "UPDATE sp_journal_counters SET conflicts = conflicts + $2 WHERE shard = $1",
            Counter::Refused => "UPDATE sp_journal_counters SET refused = refused + $2 WHERE shard = $1",
            Counter::InProgress => "UPDATE sp_journal_counters SET claims_open = claims_open + $2 WHERE shard = $1",
        }
    }
}

/// The counters' sums: handled, replayed, conflicts, refused, in progress, on PostgreSQL.
/// Handled is folded here (see the module's notes on versions 4 and 5): the done rows, counted
/// over the partial index `sp_journal_delivery_done`, the compactions, and the base.
pub(crate) const COUNTERS_SUM: &str = "SELECT CAST(COALESCE(SUM(handled_base), 0) + (SELECT count(*) FROM sp_journal_delivery WHERE state = 'done') + COALESCE((SELECT value FROM sp_journal_meta WHERE key = 'pruned'), 0) AS BIGINT), CAST(COALESCE(SUM(replayed), 0) AS BIGINT), CAST(COALESCE(SUM(conflicts), 0) AS BIGINT), CAST(COALESCE(SUM(refused), 0) AS BIGINT), CAST(COALESCE(SUM(claims_open), 0) AS BIGINT) FROM sp_journal_counters";

/// `COUNTERS_SUM` on SQLite: the done rows folded, over the partial index
/// `sp_journal_delivery_done_folded`, and those not folded yet, through the row ids above
/// `folded_id` (a few hundred at most).
pub(crate) const COUNTERS_SUM_SQLITE: &str = "SELECT COALESCE(SUM(handled_base), 0) + (SELECT count(*) FROM sp_journal_delivery WHERE state = 'done' AND folded = 1) + (SELECT count(*) FROM sp_journal_delivery WHERE id > COALESCE((SELECT value FROM sp_journal_meta WHERE key = 'folded_id'), 0) AND folded = 0 AND state = 'done') + COALESCE((SELECT value FROM sp_journal_meta WHERE key = 'pruned'), 0), COALESCE(SUM(replayed), 0), COALESCE(SUM(conflicts), 0), COALESCE(SUM(refused), 0), COALESCE(SUM(claims_open), 0) FROM sp_journal_counters";
