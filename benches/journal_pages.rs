//! What a new delivery costs the database, beside the hand-written idempotency transaction with
//! the same durability: `N` staged deliveries claimed at finish (`claim_at_finish`, one staged
//! credit `INSERT`, `finish_with`, `Synchronous::Full`) on a fresh journal, against `N`
//! transactions each inserting an idempotency row with its stored reply and the credit row.
//!
//! - SQLite (WAL, `synchronous=FULL`): the WAL frames a delivery (each frame one page written,
//!   two `pwrite64` calls), read from the WAL file itself after a `wal_checkpoint(TRUNCATE)`,
//!   and which b-tree (table or index) each frame's page belongs to (SQLite's `dbstat`); pages
//!   in no b-tree are the pointer map of an incremental-vacuum file or the header.
//! - PostgreSQL (a throw-away cluster with `pg_stat_statements`, skipped with a message when
//!   PostgreSQL is not installed): commits (`COMMIT` statements: both sides begin every
//!   transaction explicitly), statements, the server's execution and planning time and the WAL
//!   bytes written (`pg_stat_statements` with `track_planning`: the journal's statements are
//!   unnamed, planned at every call) a delivery, each statement listed; also for the logic run
//!   optimistically (`Journal::begin_optimistic`, `Journal::finish_optimistic`), and so again
//!   with the journal's statements kept prepared (`statement_cache_size=64`).
//!
//! Counts, not timings: the same on every machine. `cargo bench --bench journal_pages`;
//! `SLOTPARTNER_BENCH_DELIVERIES` changes the default of 128, the rows a SQLite journal folds at
//! once (schema version 5: the run's last delivery folds them all, so that the figure carries its
//! share of the folding); the WAL must not reach SQLite's automatic checkpoint, 1,000 frames,
//! meanwhile: the run says when it did.

#[path = "../tests/e2e/cluster.rs"]
mod cluster;

use std::collections::BTreeMap;
use std::path::Path;

use cluster::{Cluster, TempDir};
use slotpartner::journal::{Begin, Delivery, Journal, JournalOptions, SqlValue, Staged};
use slotpartner::{ParseOptions, parse};

const REPLY: &[u8] = br#"{"refund":{"success":true,"errorMessage":""}}"#;
const CREDITS: &str = "CREATE TABLE credits (transaction_id BIGINT PRIMARY KEY, amount BIGINT NOT NULL, note TEXT)";
/// The hand-written idempotency row: the key and the stored reply.
const IDEMPOTENCY: &str = "CREATE TABLE idempotency (key TEXT PRIMARY KEY, reply BYTEA NOT NULL)";

fn refund(n: i64) -> Delivery {
    let body = format!(
        r#"{{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-{n}","playerIdentifier":"player-1","playerPartnerIdentifier":"partner-1","transactionId":{n},"buyTransactionId":{},"gameSessionId":5,"partnerGameRequestIdentifier":"req-{n}","gameId":1003,"isMobile":false,"index":{n}}}"#,
        n + 1_000_000_000
    );
    Delivery::of(&parse(body.as_bytes(), &ParseOptions::default()).expect("a valid refund"))
}

fn credit(n: i64, sqlite: bool) -> Staged {
    let sql = if sqlite {
        "INSERT INTO credits (transaction_id, amount) VALUES (?1, ?2)"
    } else {
        "INSERT INTO credits (transaction_id, amount) VALUES ($1, $2)"
    };
    Staged::new(sql, vec![SqlValue::Int(n), SqlValue::Int(1299)]).expect("a valid statement")
}

fn options() -> JournalOptions {
    JournalOptions { claim_at_finish: true, ..JournalOptions::default() }
}

/// Deliveries `from..to` through the journal, each with its staged credit.
fn through_journal(journal: &Journal, from: i64, to: i64, sqlite: bool) {
    for n in from..to {
        match journal.begin(&refund(n)).expect("begin") {
            Begin::New(claim) => journal.finish_with(&claim, REPLY, &[credit(n, sqlite)]).expect("finish"),
            other => panic!("expected New, got {other:?}"),
        }
    }
}

/// Deliveries `from..to` run optimistically (`begin_optimistic`, `finish_optimistic`).
fn through_journal_optimistic(journal: &Journal, from: i64, to: i64, sqlite: bool) {
    use slotpartner::journal::Finished;
    for n in from..to {
        let delivery = refund(n);
        match journal.begin_optimistic(&delivery).expect("begin") {
            Begin::New(claim) => match journal.finish_optimistic(&claim, &delivery, REPLY, &[credit(n, sqlite)]) {
                Ok(Finished::Stored) => {}
                other => panic!("expected Stored, got {other:?}"),
            },
            other => panic!("expected New, got {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// SQLite

/// The page numbers of the frames in the WAL at `db`'s side (`<db>-wal`), in order, and how many
/// of them end a commit.
fn wal_frames(db: &Path) -> (Vec<u32>, usize) {
    let wal = std::fs::read(format!("{}-wal", db.display())).unwrap_or_default();
    if wal.len() < 32 {
        return (Vec::new(), 0);
    }
    let page_size = u32::from_be_bytes(wal[8..12].try_into().unwrap()) as usize;
    let salt = &wal[16..24];
    let (mut pages, mut commits, mut at) = (Vec::new(), 0, 32);
    while at + 24 + page_size <= wal.len() {
        let header = &wal[at..at + 24];
        if &header[8..16] != salt {
            break; // a frame of an earlier generation of the WAL
        }
        pages.push(u32::from_be_bytes(header[0..4].try_into().unwrap()));
        if u32::from_be_bytes(header[4..8].try_into().unwrap()) != 0 {
            commits += 1;
        }
        at += 24 + page_size;
    }
    (pages, commits)
}

/// Empties the WAL of the file at `db` (no other connection may be reading).
fn checkpoint(db: &Path) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0)).unwrap();
    assert_eq!(busy, 0, "the checkpoint was blocked");
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).unwrap();
}

/// Which b-tree each page of the file at `db` belongs to (after a checkpoint).
fn page_owners(db: &Path) -> BTreeMap<u32, String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let owners = conn
        .prepare("SELECT pageno, name FROM dbstat")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get::<_, u32>(0)?, r.get::<_, String>(1)?)))?.collect());
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).unwrap();
    owners.unwrap_or_default()
}

struct Frames {
    frames: usize,
    commits: usize,
    by_owner: BTreeMap<String, usize>,
}

/// Runs `work` and reads what it wrote to the WAL of `db`.
fn frames_of(db: &Path, work: impl FnOnce()) -> Frames {
    checkpoint(db);
    work();
    let (pages, commits) = wal_frames(db);
    checkpoint(db);
    let owners = page_owners(db);
    let mut by_owner = BTreeMap::new();
    for page in &pages {
        let owner = owners.get(page).cloned().unwrap_or_else(|| "(no b-tree: pointer map, header)".to_owned());
        *by_owner.entry(owner).or_insert(0) += 1;
    }
    Frames { frames: pages.len(), commits, by_owner }
}

fn print_frames(what: &str, frames: &Frames, deliveries: usize) {
    let per = |n: usize| n as f64 / deliveries as f64;
    println!(
        "{what}: {:.2} WAL frames a delivery ({:.2} pwrite64), {:.2} commits",
        per(frames.frames),
        2.0 * per(frames.frames),
        per(frames.commits)
    );
    for (owner, n) in &frames.by_owner {
        println!("    {:<44} {:>6.2}", owner, per(*n));
    }
    if frames.frames >= 1000 {
        println!("    (1,000 frames or more: SQLite may have checkpointed meanwhile; use fewer deliveries)");
    }
}

fn sqlite(deliveries: i64) -> (Frames, Frames) {
    let dir = TempDir::new("slotpartner-bench-pages");
    let path = dir.path().join("journal.db");
    let journal = Journal::open(&format!("sqlite:{}", path.display()), &options()).expect("open the journal");
    rusqlite::Connection::open(&path).unwrap().execute_batch(CREDITS).unwrap();
    // Warm: the tables' first pages allocated, the connection pooled.
    through_journal(&journal, 1, 21, true);
    let ours = frames_of(&path, || through_journal(&journal, 21, 21 + deliveries, true));

    let plain = dir.path().join("plain.db");
    let mut db = rusqlite::Connection::open(&plain).unwrap();
    let mode: String = db.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    db.pragma_update(None, "synchronous", "FULL").unwrap();
    db.execute_batch(&format!("{CREDITS}; {}", IDEMPOTENCY.replace("BYTEA", "BLOB"))).unwrap();
    let mut by_hand = |from: i64, to: i64| {
        for n in from..to {
            let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).unwrap();
            let key = refund(n).key().unwrap().to_owned();
            let stored = tx
                .execute(
                    "INSERT INTO idempotency (key, reply) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
                    (&key, REPLY),
                )
                .unwrap();
            assert_eq!(stored, 1);
            tx.execute("INSERT INTO credits (transaction_id, amount) VALUES (?1, ?2)", (n, 1299)).unwrap();
            tx.commit().unwrap();
        }
    };
    by_hand(1, 21);
    let theirs = frames_of(&plain, || by_hand(21, 21 + deliveries));
    drop(db);
    (ours, theirs)
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

struct Server {
    commits: f64,
    statements: f64,
    exec_us: f64,
    /// Planning (`pg_stat_statements.track_planning`): an unnamed statement is planned every time.
    plan_us: f64,
    /// Bytes of write-ahead log the statements wrote (all of it flushed at a durable commit).
    wal_bytes: f64,
    listed: Vec<(f64, f64, f64, String)>,
}

fn reset(client: &mut postgres::Client) {
    client.batch_execute("SELECT pg_stat_statements_reset()").unwrap();
}

/// What the server counted since `reset`, a delivery, leaving out the statistics' own queries
/// (the statistics are read from another database).
fn server_counts(stats: &mut postgres::Client, database: &str, deliveries: i64) -> Server {
    let per = deliveries as f64;
    let rows = stats
        .query(
            "SELECT s.calls, s.total_exec_time, s.total_plan_time, s.query, s.wal_bytes::float8 FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1 ORDER BY s.total_exec_time DESC",
            &[&database],
        )
        .unwrap();
    let (mut commits, mut statements, mut exec_us, mut plan_us, mut wal_bytes, mut listed) =
        (0.0, 0.0, 0.0, 0.0, 0.0, Vec::new());
    for row in rows {
        let (calls, ms, plan_ms, query): (i64, f64, f64, String) = (row.get(0), row.get(1), row.get(2), row.get(3));
        statements += calls as f64 / per;
        // Every transaction of both sides is explicit: a commit is a COMMIT statement.
        if query.trim().eq_ignore_ascii_case("commit") {
            commits += calls as f64 / per;
        }
        exec_us += ms * 1000.0 / per;
        plan_us += plan_ms * 1000.0 / per;
        wal_bytes += row.get::<_, f64>(4) / per;
        let shown: String = query.chars().take(80).collect();
        listed.push((calls as f64 / per, ms * 1000.0 / per, plan_ms * 1000.0 / per, shown.replace('\n', " ")));
    }
    Server { commits, statements, exec_us, plan_us, wal_bytes, listed }
}

fn print_server(what: &str, server: &Server) {
    println!(
        "{what}: {:.2} commits, {:.2} statements, {:.0} us of server execution and {:.0} us of planning, {:.0} bytes of WAL a delivery",
        server.commits, server.statements, server.exec_us, server.plan_us, server.wal_bytes
    );
    for (calls, us, plan_us, query) in &server.listed {
        println!("    {calls:>5.2} x {us:>6.1} us (+{plan_us:>5.1} planning)  {query}");
    }
}

fn postgres(deliveries: i64) -> Option<(Server, Server, Server, Server)> {
    let cluster = Cluster::start("PostgreSQL half of the page bench")?;
    let mut admin = cluster.client();
    admin.batch_execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'").unwrap();
    drop(admin);
    cluster.restart();
    let mut stats = cluster.client();
    stats.batch_execute("CREATE EXTENSION pg_stat_statements").unwrap();
    // Known once the library is loaded; read by sessions from the reload on.
    stats.batch_execute("ALTER SYSTEM SET pg_stat_statements.track_planning = on").unwrap();
    stats.batch_execute("SELECT pg_reload_conf()").unwrap();
    let journal_url = cluster.create_database("pages_journal");
    let plain_url = cluster.create_database("pages_plain");
    let journal = Journal::open(&journal_url, &options()).expect("open the journal");
    postgres::Client::connect(&journal_url, postgres::NoTls).unwrap().batch_execute(CREDITS).unwrap();
    through_journal(&journal, 1, 21, false);
    reset(&mut stats);
    through_journal(&journal, 21, 21 + deliveries, false);
    let ours = server_counts(&mut stats, "pages_journal", deliveries);
    through_journal_optimistic(&journal, 1001, 1021, false);
    reset(&mut stats);
    through_journal_optimistic(&journal, 1021, 1021 + deliveries, false);
    let optimistic = server_counts(&mut stats, "pages_journal", deliveries);
    // The same with the journal's statements kept prepared (`statement_cache_size`, a direct
    // connection), in a database of its own.
    let kept_plain = cluster.create_database("pages_kept");
    let kept_journal = Journal::open(&format!("{kept_plain}?statement_cache_size=64"), &options()).expect("open");
    postgres::Client::connect(&kept_plain, postgres::NoTls).unwrap().batch_execute(CREDITS).unwrap();
    through_journal_optimistic(&kept_journal, 1, 21, false);
    reset(&mut stats);
    through_journal_optimistic(&kept_journal, 21, 21 + deliveries, false);
    let kept = server_counts(&mut stats, "pages_kept", deliveries);
    drop(kept_journal);

    let mut plain = postgres::Client::connect(&plain_url, postgres::NoTls).unwrap();
    plain.batch_execute(&format!("{CREDITS}; {IDEMPOTENCY}")).unwrap();
    let store =
        plain.prepare("INSERT INTO idempotency (key, reply) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING").unwrap();
    let credit = plain.prepare("INSERT INTO credits (transaction_id, amount) VALUES ($1, $2)").unwrap();
    let mut by_hand = |from: i64, to: i64| {
        for n in from..to {
            let mut tx = plain.transaction().unwrap();
            let key = refund(n).key().unwrap().to_owned();
            assert_eq!(tx.execute(&store, &[&key, &REPLY]).unwrap(), 1);
            tx.execute(&credit, &[&n, &1299i64]).unwrap();
            tx.commit().unwrap();
        }
    };
    by_hand(1, 21);
    reset(&mut stats);
    by_hand(21, 21 + deliveries);
    let theirs = server_counts(&mut stats, "pages_plain", deliveries);
    drop(journal);
    Some((ours, optimistic, kept, theirs))
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let deliveries = std::env::var("SLOTPARTNER_BENCH_DELIVERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &i64| n > 0)
        .unwrap_or(128);
    println!(
        "schema version {}; {deliveries} new deliveries, each with one staged credit",
        slotpartner::journal::SCHEMA_VERSION
    );
    let (ours, theirs) = sqlite(deliveries);
    print_frames("sqlite journal (claim at finish, staged credit)", &ours, deliveries as usize);
    print_frames("sqlite by hand (idempotency row + credit)", &theirs, deliveries as usize);
    let excess = (ours.frames as f64 - theirs.frames as f64) / deliveries as f64;
    println!(
        "aim: WAL frames at most the hand-written's + 2: {} (+{excess:.2})",
        if excess <= 2.0 { "met" } else { "NOT met" }
    );
    if let Some((ours, optimistic, kept, theirs)) = postgres(deliveries) {
        print_server("postgres journal (claim at finish, staged credit)", &ours);
        print_server("postgres journal optimistic (begin_optimistic, finish_optimistic)", &optimistic);
        print_server("postgres journal optimistic, statements kept prepared (statement_cache_size=64)", &kept);
        print_server("postgres by hand (idempotency row + credit)", &theirs);
    }
}
