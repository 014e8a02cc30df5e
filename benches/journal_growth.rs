//! Journal growth: whether the cost of a delivery stays flat as the journal grows, and what a
//! delivery costs in bytes, before and after retention.
//!
//! Fills a journal through `Journal::begin` + `Journal::finish` (refunds, one thread, replies
//! written as `Synchronous::Normal`) to `SLOTPARTNER_GROWTH_DELIVERIES` deliveries (default
//! 5,000,000), and prints per segment of `SLOTPARTNER_GROWTH_SEGMENT` (default 1,000,000): new
//! deliveries a second over the segment, repeats a second (20,000 `begin`s of deliveries picked at
//! random among all handled so far, each answered with the stored reply), the journal's size and
//! bytes per delivery, and each next to the first segment. Then where the bytes go (tables and
//! indexes, and the average stored content, reply and key), then the first 90% are aged past the
//! retention by SQL and `Journal::prune` compacts them while nothing else runs, and the size is
//! printed again (SQLite after a checkpoint; PostgreSQL as it stands, autovacuum left to work).
//!
//! Aims: the last segment no slower than 1.2x the first, for new deliveries and for repeats, on
//! both backends. Printed, never asserted (timings are the machine's).
//!
//! `cargo bench --bench journal_growth` (`make bench-growth`, part of `make bench`);
//! `SLOTPARTNER_GROWTH_BACKENDS=sqlite` (or `postgres`) runs one backend. PostgreSQL is a
//! throw-away cluster on loopback, as the tests start it; skipped with a message when PostgreSQL is
//! not installed.

#[path = "../tests/e2e/cluster.rs"]
mod cluster;

use std::time::{Duration, Instant};

use cluster::{Cluster, TempDir};
use slotpartner::journal::{Begin, Delivery, Journal, JournalOptions, PruneOptions, Synchronous};
use slotpartner::{ParseOptions, parse};

const REPLY: &[u8] = br#"{"refund":{"success":true,"errorMessage":""}}"#;
const REPEATS: usize = 20_000;
const CHUNK: usize = 10_000;
const DAY_MS: i64 = 86_400_000;

/// Refund `n`, with identifiers as long as the service's (UUID-like session and request ids).
fn refund(n: i64) -> Delivery {
    let body = format!(
        r#"{{"event":"gameSessionBuyRefund","gameSessionIdentifier":"5f0c{n:028x}","playerIdentifier":"player-{p}","playerPartnerIdentifier":"partner-{p}","transactionId":{n},"buyTransactionId":{},"gameSessionId":{},"partnerGameRequestIdentifier":"9a1e{n:028x}","gameId":1003,"isMobile":false,"index":{n}}}"#,
        n + 1_000_000_000,
        n / 3 + 1,
        p = n % 50_000
    );
    Delivery::of(&parse(body.as_bytes(), &ParseOptions::default()).expect("a valid refund"))
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

/// A backend under test: its journal URL, SQL run behind the library's back, and where the
/// bytes go.
trait Backend {
    fn name(&self) -> &'static str;
    fn url(&self) -> String;
    fn exec(&self, sql: &str);
    /// (what, bytes) for the journal's tables and indexes, largest first, then the averages.
    fn breakdown(&self) -> Vec<(String, String)>;
    /// The size after pruning, once what the backend does for free space has run.
    fn settled_size(&self, journal: &Journal) -> u64;
}

struct Sqlite {
    dir: TempDir,
}

impl Sqlite {
    fn path(&self) -> std::path::PathBuf {
        self.dir.0.join("growth.db")
    }
}

impl Backend for Sqlite {
    fn name(&self) -> &'static str {
        "sqlite"
    }
    fn url(&self) -> String {
        format!("sqlite:{}", self.path().display())
    }
    fn exec(&self, sql: &str) {
        let db = rusqlite::Connection::open(self.path()).unwrap();
        db.busy_timeout(Duration::from_secs(30)).unwrap();
        db.execute_batch(sql).unwrap();
    }
    fn breakdown(&self) -> Vec<(String, String)> {
        let db = rusqlite::Connection::open(self.path()).unwrap();
        let mut out: Vec<(String, String)> = db
            .prepare("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 8")
            .unwrap()
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.to_string())))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        out.push(averages(|sql| db.query_row(sql, [], |r| r.get::<_, f64>(0)).unwrap_or(0.0)));
        out
    }
    fn settled_size(&self, journal: &Journal) -> u64 {
        self.exec("PRAGMA wal_checkpoint(TRUNCATE)");
        journal.status().unwrap().size_bytes.unwrap_or(0)
    }
}

struct Postgres {
    /// Kept for the bench's length: dropping it stops the cluster.
    _cluster: Cluster,
    url: String,
}

impl Backend for Postgres {
    fn name(&self) -> &'static str {
        "postgres"
    }
    fn url(&self) -> String {
        self.url.clone()
    }
    fn exec(&self, sql: &str) {
        let mut client = postgres::Client::connect(&self.url(), postgres::NoTls).unwrap();
        client.batch_execute(sql).unwrap();
    }
    fn breakdown(&self) -> Vec<(String, String)> {
        let mut client = postgres::Client::connect(&self.url(), postgres::NoTls).unwrap();
        let rows = client
            .query(
                "SELECT c.relname::text, pg_relation_size(c.oid) FROM pg_class c WHERE c.relname LIKE 'sp\\_journal\\_%' AND c.relnamespace = current_schema()::regnamespace ORDER BY 2 DESC LIMIT 8",
                &[],
            )
            .unwrap();
        let mut out: Vec<(String, String)> =
            rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1).to_string())).collect();
        out.push(averages(|sql| {
            let sql = sql.replace("length(", "pg_column_size(");
            client.query_one(sql.as_str(), &[]).ok().and_then(|r| r.get::<_, Option<f64>>(0)).unwrap_or(0.0)
        }));
        out
    }
    fn settled_size(&self, journal: &Journal) -> u64 {
        // What autovacuum does in time, at once: the space of removed rows becomes reusable (the
        // size stays: PostgreSQL gives space back to the file system only with VACUUM FULL).
        self.exec("VACUUM (ANALYZE) sp_journal_delivery");
        journal.status().unwrap().size_bytes.unwrap_or(0)
    }
}

/// The average stored content, reply and key, in bytes, through `value(sql)`.
fn averages(mut value: impl FnMut(&str) -> f64) -> (String, String) {
    let mut parts = Vec::new();
    for column in ["content", "reply", "key"] {
        let sql = format!("SELECT CAST(AVG(length({column})) AS DOUBLE PRECISION) FROM sp_journal_delivery");
        parts.push(format!("{column} {:.0}", value(&sql)));
    }
    ("average bytes per row".to_owned(), parts.join(", "))
}

/// Handles deliveries `from..to` as new, timing only the journal's calls; deliveries a second.
fn fill(journal: &Journal, from: i64, to: i64) -> f64 {
    let mut spent = Duration::ZERO;
    let mut next = from;
    while next < to {
        let end = (next + CHUNK as i64).min(to);
        let chunk: Vec<Delivery> = (next..end).map(refund).collect();
        let started = Instant::now();
        for delivery in &chunk {
            match journal.begin(delivery).expect("begin") {
                Begin::New(claim) => journal.finish(&claim, REPLY).expect("finish"),
                other => panic!("expected New, got {other:?}"),
            }
        }
        spent += started.elapsed();
        next = end;
    }
    (to - from) as f64 / spent.as_secs_f64()
}

/// `REPEATS` repeats of deliveries picked at random among `0..handled`; repeats a second.
fn repeats(journal: &Journal, handled: i64, seed: &mut u64) -> f64 {
    let picks: Vec<Delivery> = (0..REPEATS)
        .map(|_| {
            *seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            refund(((*seed >> 33) % handled as u64) as i64)
        })
        .collect();
    let started = Instant::now();
    for delivery in &picks {
        match journal.begin(delivery).expect("begin") {
            Begin::Done(reply) => assert_eq!(reply, REPLY),
            other => panic!("expected Done, got {other:?}"),
        }
    }
    REPEATS as f64 / started.elapsed().as_secs_f64()
}

fn run(backend: &dyn Backend, total: usize, segment: usize) {
    let options = JournalOptions { synchronous: Synchronous::Normal, ..JournalOptions::default() };
    let journal = Journal::open(&backend.url(), &options).expect("open");
    println!("\n{}: {total} deliveries in segments of {segment}", backend.name());
    println!(
        "{:>10}  {:>12} {:>7}  {:>12} {:>7}  {:>14} {:>9}",
        "handled", "new/s", "x first", "repeats/s", "x first", "size bytes", "bytes/dlv"
    );
    let mut seed = 0x5EED_u64;
    let mut first: Option<(f64, f64)> = None;
    for s in 0..total / segment {
        let (from, to) = ((s * segment) as i64, ((s + 1) * segment) as i64);
        let new = fill(&journal, from, to);
        let repeat = repeats(&journal, to, &mut seed);
        let size = journal.status().unwrap().size_bytes.unwrap_or(0);
        let (first_new, first_repeat) = *first.get_or_insert((new, repeat));
        println!(
            "{to:>10}  {new:>12.0} {:>7.2}  {repeat:>12.0} {:>7.2}  {size:>14} {:>9.0}",
            first_new / new,
            first_repeat / repeat,
            size as f64 / to as f64
        );
    }
    if let Some((first_new, first_repeat)) = first {
        println!(
            "(x first: the first segment's rate over this one's; the aim is at most 1.20; first {first_new:.0} new/s, {first_repeat:.0} repeats/s)"
        );
    }
    println!("where the bytes go:");
    for (what, bytes) in backend.breakdown() {
        println!("  {what:<40} {bytes}");
    }
    let keep_from = (total / 10 * 9) as i64;
    backend.exec(&format!(
        "UPDATE sp_journal_delivery SET finished_ms = finished_ms - {} WHERE transaction_id < {keep_from}",
        100 * DAY_MS
    ));
    let started = Instant::now();
    let report = journal
        .prune(&PruneOptions {
            batch: 1_000,
            pause: Duration::ZERO,
            ..PruneOptions::older_than(Duration::from_secs(90 * 86_400))
        })
        .expect("prune");
    let size = backend.settled_size(&journal);
    println!(
        "pruned to the last 10%: {} compacted in {:.1} s ({} batches, longest {:?}), {} bytes given back; size {size} bytes, {:.0} per delivery (compact records included)",
        report.compacted,
        started.elapsed().as_secs_f64(),
        report.batches,
        report.longest_batch,
        report.bytes_returned,
        size as f64 / total as f64
    );
    println!("after the prune:");
    for (what, bytes) in backend.breakdown() {
        println!("  {what:<40} {bytes}");
    }
}

fn main() {
    let total = env_usize("SLOTPARTNER_GROWTH_DELIVERIES", 5_000_000);
    let segment = env_usize("SLOTPARTNER_GROWTH_SEGMENT", 1_000_000).clamp(1, total.max(1));
    let backends = std::env::var("SLOTPARTNER_GROWTH_BACKENDS").unwrap_or_else(|_| "sqlite,postgres".to_owned());
    if backends.contains("sqlite") {
        run(&Sqlite { dir: TempDir::new("slotpartner-growth") }, total, segment);
    }
    if backends.contains("postgres") {
        match Cluster::start("the growth benchmark on PostgreSQL") {
            Some(cluster) => run(&Postgres { url: cluster.schema_url("growth"), _cluster: cluster }, total, segment),
            None => println!("postgres: skipped (PostgreSQL is not installed)"),
        }
    }
}
