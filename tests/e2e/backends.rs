//! The journal's two backends as the suites that run one set of behaviours on each see them:
//! SQLite files in a temporary folder, and schemas of a throw-away PostgreSQL cluster; and
//! `run_suite`, which runs every behaviour, reports each and fails naming those that failed.
//! Included with `#[path]` beside `cluster.rs` (`mod cluster;` at the including crate's root).

#![allow(dead_code)] // each includer uses part of it

use std::time::Instant;

use crate::cluster::{Cluster, TempDir};

/// A backend a behaviour runs on.
pub trait Backend {
    fn name(&self) -> &'static str;
    /// A URL for a journal of its own, named after the behaviour.
    fn url(&self, behaviour: &str) -> String;
    /// Runs `sql` (statements separated by `;`) on the database at `url`, behind the library's back.
    fn exec(&self, url: &str, sql: &str);
    /// The single integer `sql` answers on the database at `url`.
    fn count(&self, url: &str, sql: &str) -> i64;
    /// The placeholder of parameter `n` (from 1) in this database's dialect.
    fn param(&self, n: usize) -> String;
}

/// SQLite files in a temporary folder.
pub struct Sqlite(pub TempDir);

impl Sqlite {
    fn connect(url: &str) -> rusqlite::Connection {
        rusqlite::Connection::open(url.strip_prefix("sqlite:").unwrap()).unwrap()
    }
}

impl Backend for Sqlite {
    fn name(&self) -> &'static str {
        "sqlite"
    }
    fn url(&self, behaviour: &str) -> String {
        format!("sqlite:{}", self.0.path().join(format!("{behaviour}.db")).display())
    }
    fn exec(&self, url: &str, sql: &str) {
        Sqlite::connect(url).execute_batch(sql).unwrap();
    }
    fn count(&self, url: &str, sql: &str) -> i64 {
        Sqlite::connect(url).query_row(sql, [], |r| r.get(0)).unwrap()
    }
    fn param(&self, n: usize) -> String {
        format!("?{n}")
    }
}

/// Schemas of a throw-away PostgreSQL cluster, one for each behaviour.
pub struct Postgres(pub Cluster);

impl Postgres {
    fn connect(url: &str) -> postgres::Client {
        postgres::Client::connect(url, postgres::NoTls).unwrap()
    }
}

impl Backend for Postgres {
    fn name(&self) -> &'static str {
        "postgres"
    }
    fn url(&self, behaviour: &str) -> String {
        self.0.schema_url(behaviour)
    }
    fn exec(&self, url: &str, sql: &str) {
        Postgres::connect(url).batch_execute(sql).unwrap();
    }
    fn count(&self, url: &str, sql: &str) -> i64 {
        Postgres::connect(url).query_one(sql, &[]).unwrap().get(0)
    }
    fn param(&self, n: usize) -> String {
        format!("${n}")
    }
}

/// What `PostgresKept` adds to a journal's URL: its statements kept prepared by name, room for
/// all of them.
pub const KEPT_STATEMENTS: &str = "&statement_cache_size=64";

/// As `Postgres`, with the journal's statements kept prepared on each connection
/// (`KEPT_STATEMENTS` in its URL, for a direct connection); what a behaviour runs itself goes
/// without it.
pub struct PostgresKept(pub Cluster);

impl Backend for PostgresKept {
    fn name(&self) -> &'static str {
        "postgres-kept"
    }
    /// A schema of its own (`kept_<behaviour>`), beside `Postgres`'s on the same cluster.
    fn url(&self, behaviour: &str) -> String {
        format!("{}{KEPT_STATEMENTS}", self.0.schema_url(&format!("kept_{behaviour}")))
    }
    fn exec(&self, url: &str, sql: &str) {
        Postgres::connect(&url.replacen(KEPT_STATEMENTS, "", 1)).batch_execute(sql).unwrap();
    }
    fn count(&self, url: &str, sql: &str) -> i64 {
        Postgres::connect(&url.replacen(KEPT_STATEMENTS, "", 1)).query_one(sql, &[]).unwrap().get(0)
    }
    fn param(&self, n: usize) -> String {
        format!("${n}")
    }
}

/// A suite: each behaviour by name, run on a backend `B`.
pub type Suite<'a, B> = [(&'a str, fn(&B))];

/// Runs every behaviour of `suite` on `backend` (called `name` in the report), printing each
/// with its verdict and time, and fails naming those that failed.
pub fn run_suite<B: ?Sized>(suite: &Suite<'_, B>, name: &str, backend: &B) {
    let mut failed = Vec::new();
    for (behaviour_name, behaviour) in suite {
        let started = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| behaviour(backend)));
        let verdict = if result.is_ok() { "ok" } else { "FAILED" };
        println!("{name} {behaviour_name}: {verdict} ({} ms)", started.elapsed().as_millis());
        if result.is_err() {
            failed.push(*behaviour_name);
        }
    }
    assert!(failed.is_empty(), "{name} failed: {failed:?}");
}
