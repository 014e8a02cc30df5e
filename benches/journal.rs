//! Journal throughput: deliveries per second through `Journal::begin` + `Journal::finish` with
//! durable replies (the default options), beside the same rows written with plain SQL through
//! the same crate (`rusqlite`, `postgres`) in the same durability mode: per delivery, one
//! transaction inserting the claim (SQLite `synchronous=NORMAL`, PostgreSQL
//! `synchronous_commit=off`) and one updating the row with the reply (`FULL`, `on`). Journal and
//! plain SQL run in alternating rounds (the order swapped every round); the medians are printed
//! with the cost ratio (journal time / plain SQL time per delivery). On SQLite with one worker
//! and with four threads, on PostgreSQL (a throw-away cluster on loopback, as the tests start
//! it; skipped with a message when PostgreSQL is not installed) likewise. Then repeats: `begin`
//! on each delivery the one-worker rounds finished (answered with the stored reply, the repeat
//! counted and its index recorded), beside a plain SELECT of the stored row by key (no writes).
//!
//!
//! Then the optimistic path (`claim_at_finish`, `Journal::begin_optimistic` +
//! `Journal::finish_optimistic` with one staged credit `INSERT`: one durable transaction a
//! delivery) beside the hand-written single transaction a partner would write for the same
//! promise: an idempotency row (the key and the stored reply) and the credit row, committed
//! durably (SQLite `synchronous=FULL`, PostgreSQL `synchronous_commit=on`), through the same
//! crates (`BEGIN`, two `INSERT`s and `COMMIT`, each its own round trip on PostgreSQL, as
//! `postgres::Transaction` sends them, each prepared once; the journal writes its transaction in
//! two). On PostgreSQL twice: the journal's statements unnamed (the default, parsed and planned
//! every time), and kept prepared (`statement_cache_size=64`, row `pg prep`).
//!
//! Aims (issue 8): a cost ratio of at most 1.3, and at least 2,000 deliveries/s on SQLite with
//! four workers. The run prints whether each is met; it does not fail on them (timings depend
//! on the machine).
//!
//! `cargo bench --bench journal` (`make bench`); `SLOTPARTNER_BENCH_ROUNDS` and
//! `SLOTPARTNER_BENCH_DELIVERIES` (per round) change the defaults of 9 and 600 (half that on
//! PostgreSQL).

#[path = "../tests/e2e/cluster.rs"]
mod cluster;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Instant;

use cluster::{Cluster, TempDir, now_ms};
use slotpartner::journal::{Begin, Delivery, Finished, Journal, JournalOptions, SqlValue, Staged};
use slotpartner::{ParseOptions, parse};

const REPLY: &[u8] = br#"{"refund":{"success":true,"errorMessage":""}}"#;
const LEASE_MS: i64 = 30_000;

fn refund(n: i64) -> Delivery {
    let body = format!(
        r#"{{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-{n}","playerIdentifier":"player-1","playerPartnerIdentifier":"partner-1","transactionId":{n},"buyTransactionId":{},"gameSessionId":5,"partnerGameRequestIdentifier":"req-{n}","gameId":1003,"isMobile":false,"index":{n}}}"#,
        n + 1_000_000_000
    );
    Delivery::of(&parse(body.as_bytes(), &ParseOptions::default()).expect("a valid refund"))
}

/// `workers` slices of deliveries, numbered from `first`.
fn batches(first: i64, per_round: usize, workers: usize) -> Vec<Vec<Delivery>> {
    let per_worker = per_round / workers;
    (0..workers).map(|w| (0..per_worker).map(|i| refund(first + (w * per_worker + i) as i64)).collect()).collect()
}

/// Runs `work` on each batch in its own thread (or this one for a single batch); deliveries/s.
fn timed<W: Fn(&[Delivery]) + Sync>(batches: &[Vec<Delivery>], work: W) -> f64 {
    let total: usize = batches.iter().map(Vec::len).sum();
    let started = Instant::now();
    if let [only] = batches {
        work(only);
    } else {
        thread::scope(|s| {
            for batch in batches {
                let work = &work;
                s.spawn(move || work(batch));
            }
        });
    }
    total as f64 / started.elapsed().as_secs_f64()
}

fn through_journal(journal: &Journal, deliveries: &[Delivery]) {
    for delivery in deliveries {
        match journal.begin(delivery).expect("begin") {
            Begin::New(claim) => journal.finish(&claim, REPLY).expect("finish"),
            other => panic!("expected New, got {other:?}"),
        }
    }
}

/// Repeats of finished deliveries: each `begin` answers with the stored reply.
fn replay_through_journal(journal: &Journal, deliveries: &[Delivery]) {
    for delivery in deliveries {
        match journal.begin(delivery).expect("begin") {
            Begin::Done(reply) => assert_eq!(reply, REPLY),
            other => panic!("expected Done, got {other:?}"),
        }
    }
}

/// The partner's credit, staged with the journal's finish (`?N` on SQLite, `$N` on PostgreSQL).
fn credit(delivery: &Delivery, sqlite: bool) -> Staged {
    let sql = if sqlite { CREDIT.replace('$', "?") } else { CREDIT.to_owned() };
    let id = delivery.transaction_id().unwrap_or(0);
    Staged::new(&sql, vec![SqlValue::Int(id), SqlValue::Int(1299)]).expect("a valid statement")
}

/// The optimistic path: no read before the logic, the reply stored with the staged credit in
/// one durable transaction.
fn optimistic_through_journal(journal: &Journal, deliveries: &[Delivery], sqlite: bool) {
    for delivery in deliveries {
        match journal.begin_optimistic(delivery).expect("begin") {
            Begin::New(claim) => {
                match journal.finish_optimistic(&claim, delivery, REPLY, &[credit(delivery, sqlite)]) {
                    Ok(Finished::Stored) => {}
                    other => panic!("expected Stored, got {other:?}"),
                }
            }
            other => panic!("expected New, got {other:?}"),
        }
    }
}

/// A claim token, as the journal writes one (16 bytes).
fn token(delivery: &Delivery) -> Vec<u8> {
    let n = delivery.transaction_id().unwrap_or(0);
    let mut token = n.to_le_bytes().to_vec();
    token.extend_from_slice(&now_ms().to_le_bytes());
    token
}

// ---------------------------------------------------------------------------------------------
// Plain SQL, the same rows

const SQLITE_TABLE: &str = "
CREATE TABLE IF NOT EXISTS plain_delivery (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, name TEXT NOT NULL, transaction_id INTEGER,
    first_index INTEGER, content TEXT NOT NULL, state TEXT NOT NULL, token BLOB,
    attempts INTEGER NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
    lease_until_ms INTEGER NOT NULL, finished_ms INTEGER, reply BLOB);
CREATE INDEX IF NOT EXISTS plain_delivery_transaction ON plain_delivery (transaction_id);";

const INSERT: &str = "INSERT INTO plain_delivery (key, name, transaction_id, first_index, content, state, token, attempts, created_ms, updated_ms, lease_until_ms) VALUES ($1, $2, $3, $4, $5, 'claimed', $6, 1, $7, $7, $8) ON CONFLICT (key) DO NOTHING";
const UPDATE: &str = "UPDATE plain_delivery SET state = 'done', reply = $3, token = NULL, updated_ms = $4, finished_ms = $4 WHERE key = $1 AND state = 'claimed' AND token = $2";
/// `UPDATE` on PostgreSQL, committed durably: the statement sets its own transaction's
/// `synchronous_commit`, as the journal's `finish` does (one round trip).
const POSTGRES_UPDATE: &str = "WITH durable AS (SELECT set_config('synchronous_commit', 'on', true)) UPDATE plain_delivery SET state = 'done', reply = $3, token = NULL, updated_ms = $4, finished_ms = $4 FROM durable WHERE key = $1 AND state = 'claimed' AND token = $2";

fn sqlite_plain_connection(path: &std::path::Path) -> rusqlite::Connection {
    let db = rusqlite::Connection::open(path).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    let mode: String = db.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    db.execute_batch(SQLITE_TABLE).unwrap();
    db
}

fn sqlite_plain(db: &mut rusqlite::Connection, deliveries: &[Delivery]) {
    use rusqlite::{TransactionBehavior, params};
    for delivery in deliveries {
        let key = delivery.key().unwrap();
        let token = token(delivery);
        let now = now_ms();
        db.pragma_update(None, "synchronous", "NORMAL").unwrap();
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
        let inserted = tx
            .prepare_cached(&INSERT.replace('$', "?"))
            .unwrap()
            .execute(params![
                key,
                delivery.name(),
                delivery.transaction_id(),
                delivery.index(),
                delivery.fingerprint(),
                token,
                now,
                now + LEASE_MS
            ])
            .unwrap();
        tx.commit().unwrap();
        assert_eq!(inserted, 1);
        db.pragma_update(None, "synchronous", "FULL").unwrap();
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
        let updated = tx
            .prepare_cached(&UPDATE.replace('$', "?"))
            .unwrap()
            .execute(params![key, token, REPLY, now_ms()])
            .unwrap();
        tx.commit().unwrap();
        assert_eq!(updated, 1);
    }
}

const POSTGRES_TABLE: &str = "
CREATE TABLE IF NOT EXISTS plain_delivery (
    id BIGSERIAL PRIMARY KEY, key TEXT NOT NULL UNIQUE, name TEXT NOT NULL, transaction_id BIGINT,
    first_index BIGINT, content TEXT NOT NULL, state TEXT NOT NULL, token BYTEA,
    attempts BIGINT NOT NULL, created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL,
    lease_until_ms BIGINT NOT NULL, finished_ms BIGINT, reply BYTEA);
CREATE INDEX IF NOT EXISTS plain_delivery_transaction ON plain_delivery (transaction_id);";

fn postgres_plain_client(url: &str) -> postgres::Client {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client.batch_execute("SET synchronous_commit TO off").unwrap();
    client
}

fn postgres_plain(client: &mut postgres::Client, deliveries: &[Delivery]) {
    let insert = client.prepare(INSERT).unwrap();
    let update = client.prepare(POSTGRES_UPDATE).unwrap();
    for delivery in deliveries {
        let key = delivery.key().unwrap();
        let token = token(delivery);
        let now = now_ms();
        // The claim: one statement, committed with synchronous_commit=off (the session's).
        let inserted = client
            .execute(
                &insert,
                &[
                    &key,
                    &delivery.name(),
                    &delivery.transaction_id(),
                    &delivery.index(),
                    &delivery.fingerprint(),
                    &token,
                    &now,
                    &(now + LEASE_MS),
                ],
            )
            .unwrap();
        assert_eq!(inserted, 1);
        // The reply: committed durably (see UPDATE).
        let updated = client.execute(&update, &[&key, &token, &REPLY, &now_ms()]).unwrap();
        assert_eq!(updated, 1);
    }
}

/// The hand-written single transaction: the partner's credit and idempotency tables.
/// The journal's staged credit goes to `credits`, the hand-written one to `hand_credits` (on
/// PostgreSQL both in one database; each side is given the same transaction ids).
const CREDITS: &str = "CREATE TABLE IF NOT EXISTS credits (transaction_id BIGINT PRIMARY KEY, amount BIGINT NOT NULL)";
const HAND_CREDITS: &str =
    "CREATE TABLE IF NOT EXISTS hand_credits (transaction_id BIGINT PRIMARY KEY, amount BIGINT NOT NULL)";
const HAND_CREDIT: &str = "INSERT INTO hand_credits (transaction_id, amount) VALUES ($1, $2)";
const IDEMPOTENCY: &str = "CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, reply BYTEA NOT NULL)";
const CREDIT: &str = "INSERT INTO credits (transaction_id, amount) VALUES ($1, $2)";
const IDEMPOTENCY_INSERT: &str = "INSERT INTO idempotency (key, reply) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING";

fn sqlite_by_hand(db: &mut rusqlite::Connection, deliveries: &[Delivery]) {
    use rusqlite::{TransactionBehavior, params};
    db.pragma_update(None, "synchronous", "FULL").unwrap();
    for delivery in deliveries {
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
        let stored = tx
            .prepare_cached(&IDEMPOTENCY_INSERT.replace('$', "?"))
            .unwrap()
            .execute(params![delivery.key().unwrap(), REPLY])
            .unwrap();
        assert_eq!(stored, 1);
        tx.prepare_cached(&HAND_CREDIT.replace('$', "?"))
            .unwrap()
            .execute(params![delivery.transaction_id(), 1299])
            .unwrap();
        tx.commit().unwrap();
    }
}

fn postgres_by_hand(client: &mut postgres::Client, deliveries: &[Delivery]) {
    let idempotency = client.prepare(IDEMPOTENCY_INSERT).unwrap();
    let credit = client.prepare(HAND_CREDIT).unwrap();
    for delivery in deliveries {
        let mut tx = client.transaction().unwrap();
        let stored = tx.execute(&idempotency, &[&delivery.key().unwrap(), &REPLY]).unwrap();
        assert_eq!(stored, 1);
        tx.execute(&credit, &[&delivery.transaction_id(), &1299i64]).unwrap();
        tx.commit().unwrap();
    }
}

/// A repeat answered with plain SQL: the stored row by key, its content and state checked.
const REPLAY_SELECT: &str = "SELECT content, state, reply FROM plain_delivery WHERE key = $1";

fn check_replay(delivery: &Delivery, content: &str, state: &str, reply: &[u8]) {
    assert!(content == delivery.fingerprint() && state == "done" && reply == REPLY, "not a finished delivery");
}

fn sqlite_plain_replay(db: &mut rusqlite::Connection, deliveries: &[Delivery]) {
    let mut select = db.prepare_cached(&REPLAY_SELECT.replace('$', "?")).unwrap();
    for delivery in deliveries {
        let (content, state, reply): (String, String, Vec<u8>) =
            select.query_row([delivery.key().unwrap()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
        check_replay(delivery, &content, &state, &reply);
    }
}

fn postgres_plain_replay(client: &mut postgres::Client, deliveries: &[Delivery]) {
    let select = client.prepare(REPLAY_SELECT).unwrap();
    for delivery in deliveries {
        let row = client.query_one(&select, &[&delivery.key().unwrap()]).unwrap();
        check_replay(delivery, row.get(0), row.get(1), row.get(2));
    }
}

// ---------------------------------------------------------------------------------------------
// Rounds

struct Row {
    backend: &'static str,
    workers: usize,
    journal: f64,
    plain: f64,
}

impl Row {
    fn ratio(&self) -> f64 {
        self.plain / self.journal
    }
}

/// The table of `rows`: deliveries per second each way and the cost ratio.
fn print_rows(rows: &[Row]) {
    println!("{:<9} {:>7} {:>12} {:>14} {:>12}", "backend", "workers", "journal/s", "plain SQL/s", "cost ratio");
    for row in rows {
        println!(
            "{:<9} {:>7} {:>12.0} {:>14.0} {:>11.2}x",
            row.backend,
            row.workers,
            row.journal,
            row.plain,
            row.ratio()
        );
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Alternating rounds of `journal` and `plain`, each given the round's batches; the medians.
fn rounds(
    rounds: usize,
    per_round: usize,
    workers: usize,
    first: i64,
    journal: impl Fn(&[Vec<Delivery>]) -> f64,
    plain: impl Fn(&[Vec<Delivery>]) -> f64,
) -> (f64, f64) {
    let (mut journal_rates, mut plain_rates) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let base = first + (round * per_round) as i64;
        let ours = batches(base, per_round, workers);
        let theirs = batches(base, per_round, workers);
        if round % 2 == 0 {
            journal_rates.push(journal(&ours));
            plain_rates.push(plain(&theirs));
        } else {
            plain_rates.push(plain(&theirs));
            journal_rates.push(journal(&ours));
        }
    }
    (median(journal_rates), median(plain_rates))
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter or `--list` from `cargo test --benches` is ignored.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let round_count = env_number("SLOTPARTNER_BENCH_ROUNDS", 9);
    let per_round = env_number("SLOTPARTNER_BENCH_DELIVERIES", 600);
    let started = Instant::now();
    let mut table = Vec::new();

    // SQLite: a journal file and a plain file side by side in one folder.
    let dir = TempDir::new("slotpartner-bench-journal");
    let journal =
        Journal::open(&format!("sqlite:{}", dir.path().join("journal.db").display()), &JournalOptions::default())
            .expect("open the SQLite journal");
    // Connections are opened before the clock starts, as the journal's pool keeps them.
    let plain_path = dir.path().join("plain.db");
    let plain_connections: Vec<Mutex<rusqlite::Connection>> =
        (0..4).map(|_| Mutex::new(sqlite_plain_connection(&plain_path))).collect();
    let mut first = 1;
    let mut replays = Vec::new();
    let one_worker_first = first;
    for workers in [1, 4] {
        let (j, p) = rounds(
            round_count,
            per_round,
            workers,
            first,
            |batches| timed(batches, |batch| through_journal(&journal, batch)),
            |batches| {
                let next = AtomicUsize::new(0);
                timed(batches, |batch| {
                    sqlite_plain(&mut plain_connections[next.fetch_add(1, Ordering::Relaxed)].lock().unwrap(), batch)
                })
            },
        );
        table.push(Row { backend: "sqlite", workers, journal: j, plain: p });
        first += (round_count * per_round) as i64;
    }
    // Repeats of the deliveries the one-worker rounds finished, in the same order.
    let (j, p) = rounds(
        round_count,
        per_round,
        1,
        one_worker_first,
        |batches| timed(batches, |batch| replay_through_journal(&journal, batch)),
        |batches| timed(batches, |batch| sqlite_plain_replay(&mut plain_connections[0].lock().unwrap(), batch)),
    );
    replays.push(Row { backend: "sqlite", workers: 1, journal: j, plain: p });
    let mut optimistic = Vec::new();
    {
        let url = format!("sqlite:{}", dir.path().join("journal.db").display());
        let at_finish = Journal::open(&url, &JournalOptions { claim_at_finish: true, ..JournalOptions::default() })
            .expect("open the SQLite journal");
        rusqlite::Connection::open(dir.path().join("journal.db")).unwrap().execute_batch(CREDITS).unwrap();
        let by_hand_path = dir.path().join("by_hand.db");
        let by_hand = sqlite_plain_connection(&by_hand_path);
        by_hand.execute_batch(&format!("{HAND_CREDITS}; {}", IDEMPOTENCY.replace("BYTEA", "BLOB"))).unwrap();
        let by_hand = Mutex::new(by_hand);
        let (j, p) = rounds(
            round_count,
            per_round,
            1,
            first,
            |batches| timed(batches, |batch| optimistic_through_journal(&at_finish, batch, true)),
            |batches| timed(batches, |batch| sqlite_by_hand(&mut by_hand.lock().unwrap(), batch)),
        );
        optimistic.push(Row { backend: "sqlite", workers: 1, journal: j, plain: p });
        first += (round_count * per_round) as i64;
    }

    // PostgreSQL: one throw-away cluster, the journal and the plain table in one database.
    if let Some(cluster) = Cluster::start("PostgreSQL half of the journal bench") {
        let url = cluster.url();
        let journal = Journal::open(&url, &JournalOptions::default()).expect("open the PostgreSQL journal");
        cluster.client().batch_execute(POSTGRES_TABLE).unwrap();
        let plain_clients: Vec<Mutex<postgres::Client>> =
            (0..4).map(|_| Mutex::new(postgres_plain_client(&url))).collect();
        let pg_per_round = per_round / 2;
        let one_worker_first = first;
        for workers in [1, 4] {
            let (j, p) = rounds(
                round_count,
                pg_per_round,
                workers,
                first,
                |batches| timed(batches, |batch| through_journal(&journal, batch)),
                |batches| {
                    let next = AtomicUsize::new(0);
                    timed(batches, |batch| {
                        postgres_plain(&mut plain_clients[next.fetch_add(1, Ordering::Relaxed)].lock().unwrap(), batch)
                    })
                },
            );
            table.push(Row { backend: "postgres", workers, journal: j, plain: p });
            first += (round_count * pg_per_round) as i64;
        }
        let (j, p) = rounds(
            round_count,
            pg_per_round,
            1,
            one_worker_first,
            |batches| timed(batches, |batch| replay_through_journal(&journal, batch)),
            |batches| timed(batches, |batch| postgres_plain_replay(&mut plain_clients[0].lock().unwrap(), batch)),
        );
        replays.push(Row { backend: "postgres", workers: 1, journal: j, plain: p });
        let at_finish = Journal::open(&url, &JournalOptions { claim_at_finish: true, ..JournalOptions::default() })
            .expect("open the PostgreSQL journal");
        cluster.client().batch_execute(&format!("{CREDITS}; {HAND_CREDITS}; {IDEMPOTENCY}")).unwrap();
        let by_hand = Mutex::new(postgres::Client::connect(&url, postgres::NoTls).unwrap());
        by_hand.lock().unwrap().batch_execute("SET synchronous_commit TO on").unwrap();
        let (j, p) = rounds(
            round_count,
            pg_per_round,
            1,
            first,
            |batches| timed(batches, |batch| optimistic_through_journal(&at_finish, batch, false)),
            |batches| timed(batches, |batch| postgres_by_hand(&mut by_hand.lock().unwrap(), batch)),
        );
        optimistic.push(Row { backend: "postgres", workers: 1, journal: j, plain: p });
        first += (round_count * pg_per_round) as i64;
        // The same with the journal's statements kept prepared (a direct connection's
        // `statement_cache_size`), as the hand-written side prepares its two.
        let prepared = Journal::open(
            &format!("{url}?statement_cache_size=64"),
            &JournalOptions { claim_at_finish: true, ..JournalOptions::default() },
        )
        .expect("open the PostgreSQL journal");
        let (j, p) = rounds(
            round_count,
            pg_per_round,
            1,
            first,
            |batches| timed(batches, |batch| optimistic_through_journal(&prepared, batch, false)),
            |batches| timed(batches, |batch| postgres_by_hand(&mut by_hand.lock().unwrap(), batch)),
        );
        optimistic.push(Row { backend: "pg prep", workers: 1, journal: j, plain: p });
    }

    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    println!();
    println!(
        "journal throughput: begin + finish per delivery, durable replies; median of {round_count} alternating rounds of {per_round} deliveries ({} on PostgreSQL)",
        per_round / 2
    );
    print_rows(&table);
    println!(
        "repeats of finished deliveries: begin answering with the stored reply, beside a plain SELECT of it by key"
    );
    print_rows(&replays);
    println!(
        "optimistic: begin_optimistic + finish_optimistic with a staged credit, one durable transaction, beside the hand-written one (idempotency row + credit)"
    );
    print_rows(&optimistic);
    for row in optimistic.iter().filter(|r| r.backend != "sqlite") {
        println!(
            "aim: optimistic on PostgreSQL ({}), one worker, at most 1.3x the hand-written transaction: {} ({:.2}x)",
            if row.backend == "postgres" { "statements unnamed, the default" } else { "statement_cache_size=64" },
            verdict(row.ratio() <= 1.3),
            row.ratio()
        );
    }
    let worst = table.iter().max_by(|a, b| a.ratio().total_cmp(&b.ratio())).expect("rows");
    println!(
        "aim: cost at most 1.3x plain SQL: {} (highest {:.2}x, {} with {} worker{})",
        verdict(worst.ratio() <= 1.3),
        worst.ratio(),
        worst.backend,
        worst.workers,
        if worst.workers == 1 { "" } else { "s" }
    );
    let four = table.iter().find(|r| r.backend == "sqlite" && r.workers == 4).expect("sqlite row");
    println!(
        "aim: at least 2,000 deliveries/s on SQLite with 4 workers: {} ({:.0}/s)",
        verdict(four.journal >= 2000.0),
        four.journal
    );
    println!("({:.0} s)", started.elapsed().as_secs_f64());
}
