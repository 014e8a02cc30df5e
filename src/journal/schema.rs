//! The journal's tables, for both backends, and their version.
//!
//! Every table is named `sp_journal_*`, so that a journal may live in a database the partner also
//! uses. `sp_journal_meta` holds `schema_version` (a later release migrates from it; a journal of a
//! newer version is refused), `seen_count` (distinct indexes seen) and, when configured,
//! `first_index`.
//!
//! - `sp_journal_delivery`: a row per key: the canonical content, the state (`claimed`, `done`,
//!   `abandoned`), the claim token, attempts, lease, times and the stored reply.
//! - `sp_journal_runs`: the seen indexes as runs `lo..=hi` (see `gaps.rs`).
//! - `sp_journal_seen` (PostgreSQL only): indexes seen and not yet merged into the runs, so that
//!   concurrent deliveries on several hosts do not queue on the runs; merged in batches.
//! - `sp_journal_refused`: deliveries refused by validation whose index could be read.
//! - `sp_journal_counters`: handled, replayed, conflicts, refused, in progress; in several rows
//!   (shards) on PostgreSQL so that concurrent transactions rarely update the same row.

use crate::error::{Error, ErrorKind};

/// The schema this release writes and reads.
pub(crate) const VERSION: i64 = 1;

/// Counter shards on PostgreSQL (SQLite has one writer at a time, so one row).
pub(crate) const PG_SHARDS: i64 = 16;

pub(crate) const SQLITE: &str = "
CREATE TABLE sp_journal_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO sp_journal_meta (key, value) VALUES ('schema_version', 1), ('seen_count', 0);
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

pub(crate) const POSTGRES: &str = "
CREATE TABLE sp_journal_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
INSERT INTO sp_journal_meta (key, value) VALUES ('schema_version', 1), ('seen_count', 0);
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

/// Refuses a journal whose schema this release does not know.
pub(crate) fn check_version(label: &str, found: Option<i64>) -> Result<(), Error> {
    match found {
        Some(VERSION) => Ok(()),
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
            Counter::InProgress => "UPDATE sp_journal_counters SET in_progress = in_progress + ?2 WHERE shard = ?1",
        }
    }

    pub fn postgres_update(self) -> &'static str {
        match self {
            Counter::Replayed => "UPDATE sp_journal_counters SET replayed = replayed + $2 WHERE shard = $1",
            Counter::Conflicts => "UPDATE sp_journal_counters SET conflicts = conflicts + $2 WHERE shard = $1",
            Counter::Refused => "UPDATE sp_journal_counters SET refused = refused + $2 WHERE shard = $1",
            Counter::InProgress => "UPDATE sp_journal_counters SET in_progress = in_progress + $2 WHERE shard = $1",
        }
    }
}

/// The counters' sums: handled, replayed, conflicts, refused, in progress.
pub(crate) const COUNTERS_SUM: &str = "SELECT CAST(COALESCE(SUM(handled), 0) AS BIGINT), CAST(COALESCE(SUM(replayed), 0) AS BIGINT), CAST(COALESCE(SUM(conflicts), 0) AS BIGINT), CAST(COALESCE(SUM(refused), 0) AS BIGINT), CAST(COALESCE(SUM(in_progress), 0) AS BIGINT) FROM sp_journal_counters";
