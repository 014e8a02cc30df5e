//! The delivery journal's conformance suite: one function per behaviour, each run against SQLite,
//! against a throw-away PostgreSQL cluster started here (as an unprivileged user, on loopback,
//! stopped by a guard even when a behaviour panics), and against such a cluster through PgBouncer
//! in transaction pooling mode (`e2e/pgbouncer.rs`: a pool of two server connections a database,
//! which the journal's client connections share). Plus what only one backend has: read-only and
//! corrupt SQLite files, an unreachable PostgreSQL server.
//!
//! `cargo test --test journal -- --ignored --nocapture throughput` prints deliveries per second
//! through begin + finish on both backends.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use slotpartner::journal::{
    Begin, Claim, Delivery, ExistingJournal, FetchOutcome, Journal, JournalOptions, RecordState, SqlValue, Staged,
    Synchronous,
};
use slotpartner::{ErrorKind, ParseOptions, parse};

#[path = "e2e/cluster.rs"]
mod cluster;
use cluster::{Cluster, TempDir, free_port, unprivileged_prefix};

#[path = "e2e/pgbouncer.rs"]
mod pgbouncer;
use pgbouncer::PgBouncer;

/// Only its `run_suite`: this suite's backends can also set a journal's schema version.
#[path = "e2e/backends.rs"]
mod backends;

// ---------------------------------------------------------------------------------------------
// Deliveries

fn delivery(body: &str) -> Delivery {
    Delivery::of(&parse(body.as_bytes(), &ParseOptions::default()).expect("a valid body"))
}

/// A refund; `game_id` varies the content under the same key (the game, and with it the
/// partner's request identifier, a decisive field, unless it is 7).
fn refund(transaction_id: i64, index: Option<i64>, game_id: i64) -> Delivery {
    let index = index.map(|i| format!(",\"index\":{i}")).unwrap_or_default();
    let request =
        if game_id == 7 { format!("req-{transaction_id}") } else { format!("req-{transaction_id}-{game_id}") };
    delivery(&format!(
        r#"{{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-{transaction_id}","playerIdentifier":"player-1","transactionId":{transaction_id},"buyTransactionId":{},"gameSessionId":5,"partnerGameRequestIdentifier":"{request}","gameId":{game_id},"isMobile":false{index}}}"#,
        transaction_id + 1_000_000
    ))
}

/// A payout of `money` with `tail` (more fields, each with a leading comma) at the end.
fn payout(transaction_id: i64, index: i64, money: i64, tail: &str) -> Delivery {
    delivery(&format!(
        r#"{{"event":"jackpotPayout","jackpotIdentifier":"jp-1","playerIdentifier":"player-1","currencyISO4217":"EUR","moneyWon":{money},"coinsWon":0,"isMoney":true,"epochReleasedMillis":1700000000000,"isPrimary":true,"transactionId":{transaction_id},"buyTransactionId":{},"partnerGameRequestIdentifier":"req-{transaction_id}","gameSessionId":5,"gameId":7,"index":{index}{tail}}}"#,
        transaction_id + 1_000_000
    ))
}

/// An event the library does not know, keyed by its index.
fn indexed(index: i64) -> Delivery {
    delivery(&format!(r#"{{"event":"bonusGranted","index":{index},"amount":5}}"#))
}

fn balance(index: i64) -> Delivery {
    delivery(&format!(r#"{{"action":"getPlayerBalance","playerIdentifier":"player-1","index":{index}}}"#))
}

fn open(url: &str) -> Journal {
    Journal::open(url, &JournalOptions::default()).unwrap_or_else(|e| panic!("open {url}: {e}"))
}

fn open_with(url: &str, options: JournalOptions) -> Journal {
    Journal::open(url, &options).unwrap_or_else(|e| panic!("open {url}: {e}"))
}

fn new_claim(journal: &Journal, delivery: &Delivery) -> Claim {
    match journal.begin(delivery).expect("begin") {
        Begin::New(claim) => claim,
        other => panic!("expected New for {:?}, got {other:?}", delivery.key()),
    }
}

fn done_reply(journal: &Journal, delivery: &Delivery) -> Vec<u8> {
    match journal.begin(delivery).expect("begin") {
        Begin::Done(reply) => reply,
        other => panic!("expected Done for {:?}, got {other:?}", delivery.key()),
    }
}

/// Handles `delivery` from New to finish with `reply`.
fn handle(journal: &Journal, delivery: &Delivery, reply: &[u8]) {
    let claim = new_claim(journal, delivery);
    journal.finish(&claim, reply).expect("finish");
}

// ---------------------------------------------------------------------------------------------
// Backends

trait Backend: Sync {
    fn name(&self) -> &'static str;
    /// A URL for a journal of its own.
    fn url(&self, behaviour: &str) -> String;
    /// Writes `version` as the journal's schema version, behind the library's back.
    fn set_schema_version(&self, url: &str, version: i64);
    /// Creates a ledger table `credits (transaction_id, amount)`, without a unique key, in the
    /// journal's database.
    fn create_ledger(&self, url: &str);
    /// The ledger's rows: (transaction_id, amount), ordered.
    fn ledger(&self, url: &str) -> Vec<(i64, i64)>;
    /// The ledger's credit in this database's dialect: (transaction_id, amount).
    fn credit_sql(&self) -> &'static str;
    /// A statement that sleeps a third of a second, where the database has one.
    fn sleep_sql(&self) -> Option<&'static str>;
    /// The PostgreSQL cluster, to restart or reconfigure; `None` on SQLite.
    fn cluster(&self) -> Option<&Cluster> {
        None
    }
    /// A PostgreSQL client of the journal's database at `url`, straight to the server (behind
    /// the journal's back, past any pooler); `None` on SQLite.
    fn client(&self, _url: &str) -> Option<postgres::Client> {
        None
    }
}

struct Sqlite {
    dir: TempDir,
}

impl Backend for Sqlite {
    fn name(&self) -> &'static str {
        "sqlite"
    }
    fn url(&self, behaviour: &str) -> String {
        format!("sqlite:{}", self.dir.0.join(format!("{behaviour}.db")).display())
    }
    fn set_schema_version(&self, url: &str, version: i64) {
        let db = rusqlite::Connection::open(url.strip_prefix("sqlite:").unwrap()).unwrap();
        db.execute("UPDATE sp_journal_meta SET value = ?1 WHERE key = 'schema_version'", [version]).unwrap();
    }
    fn create_ledger(&self, url: &str) {
        let db = rusqlite::Connection::open(url.strip_prefix("sqlite:").unwrap()).unwrap();
        db.execute("CREATE TABLE credits (transaction_id INTEGER NOT NULL, amount INTEGER NOT NULL)", []).unwrap();
    }
    fn ledger(&self, url: &str) -> Vec<(i64, i64)> {
        let db = rusqlite::Connection::open(url.strip_prefix("sqlite:").unwrap()).unwrap();
        let mut rows = db.prepare("SELECT transaction_id, amount FROM credits ORDER BY 1, 2").unwrap();
        rows.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    }
    fn credit_sql(&self) -> &'static str {
        "INSERT INTO credits (transaction_id, amount) VALUES (?, ?)"
    }
    fn sleep_sql(&self) -> Option<&'static str> {
        None
    }
}

struct Postgres {
    cluster: Cluster,
}

impl Backend for Postgres {
    fn name(&self) -> &'static str {
        "postgres"
    }
    fn url(&self, behaviour: &str) -> String {
        self.cluster.schema_url(behaviour)
    }
    fn set_schema_version(&self, url: &str, version: i64) {
        postgres_set_schema_version(url, version);
    }
    fn create_ledger(&self, url: &str) {
        postgres_create_ledger(url);
    }
    fn ledger(&self, url: &str) -> Vec<(i64, i64)> {
        postgres_ledger(url)
    }
    fn credit_sql(&self) -> &'static str {
        "INSERT INTO credits (transaction_id, amount) VALUES ($1, $2)"
    }
    fn sleep_sql(&self) -> Option<&'static str> {
        Some("SELECT pg_sleep(0.3)")
    }
    fn cluster(&self) -> Option<&Cluster> {
        Some(&self.cluster)
    }
    fn client(&self, url: &str) -> Option<postgres::Client> {
        Some(postgres::Client::connect(url, postgres::NoTls).unwrap())
    }
}

/// PostgreSQL with the journal's statements kept prepared by name on each connection
/// (`statement_cache_size` in the URL, for a direct connection), schemas as for `Postgres`.
struct Prepared {
    cluster: Cluster,
}

/// What `Prepared` adds to a URL.
const STATEMENT_CACHE: &str = backends::KEPT_STATEMENTS;

impl Prepared {
    /// `url` without `STATEMENT_CACHE`, for a client other than the journal's.
    fn plain(url: &str) -> String {
        url.replacen(STATEMENT_CACHE, "", 1)
    }
}

impl Backend for Prepared {
    fn name(&self) -> &'static str {
        "postgres-prepared"
    }
    fn url(&self, behaviour: &str) -> String {
        format!("{}{STATEMENT_CACHE}", self.cluster.schema_url(behaviour))
    }
    fn set_schema_version(&self, url: &str, version: i64) {
        postgres_set_schema_version(&Prepared::plain(url), version);
    }
    fn create_ledger(&self, url: &str) {
        postgres_create_ledger(&Prepared::plain(url));
    }
    fn ledger(&self, url: &str) -> Vec<(i64, i64)> {
        postgres_ledger(&Prepared::plain(url))
    }
    fn credit_sql(&self) -> &'static str {
        "INSERT INTO credits (transaction_id, amount) VALUES ($1, $2)"
    }
    fn sleep_sql(&self) -> Option<&'static str> {
        Some("SELECT pg_sleep(0.3)")
    }
    fn cluster(&self) -> Option<&Cluster> {
        Some(&self.cluster)
    }
    fn client(&self, url: &str) -> Option<postgres::Client> {
        Some(postgres::Client::connect(&Prepared::plain(url), postgres::NoTls).unwrap())
    }
}

/// PostgreSQL through PgBouncer in transaction pooling mode: a database for each behaviour (the
/// pooler passes no `options`, so no schema in the URL), the journal's URL through the pooler,
/// what a behaviour does behind the journal's back straight to the cluster.
struct Pooled {
    bouncer: PgBouncer,
}

impl Backend for Pooled {
    fn name(&self) -> &'static str {
        "pgbouncer"
    }
    fn url(&self, behaviour: &str) -> String {
        self.bouncer.create_database(behaviour)
    }
    fn set_schema_version(&self, url: &str, version: i64) {
        postgres_set_schema_version(&self.bouncer.direct(url), version);
    }
    fn create_ledger(&self, url: &str) {
        postgres_create_ledger(&self.bouncer.direct(url));
    }
    fn ledger(&self, url: &str) -> Vec<(i64, i64)> {
        postgres_ledger(&self.bouncer.direct(url))
    }
    fn credit_sql(&self) -> &'static str {
        "INSERT INTO credits (transaction_id, amount) VALUES ($1, $2)"
    }
    fn sleep_sql(&self) -> Option<&'static str> {
        Some("SELECT pg_sleep(0.3)")
    }
    fn cluster(&self) -> Option<&Cluster> {
        Some(self.bouncer.cluster())
    }
    fn client(&self, url: &str) -> Option<postgres::Client> {
        Some(postgres::Client::connect(&self.bouncer.direct(url), postgres::NoTls).unwrap())
    }
}

fn postgres_set_schema_version(url: &str, version: i64) {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client.execute("UPDATE sp_journal_meta SET value = $1 WHERE key = 'schema_version'", &[&version]).unwrap();
}

fn postgres_create_ledger(url: &str) {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client.batch_execute("CREATE TABLE credits (transaction_id BIGINT NOT NULL, amount BIGINT NOT NULL)").unwrap();
}

fn postgres_ledger(url: &str) -> Vec<(i64, i64)> {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let rows = client.query("SELECT transaction_id, amount FROM credits ORDER BY 1, 2", &[]).unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

// ---------------------------------------------------------------------------------------------
// The suite

type Behaviour = fn(&dyn Backend);

const SUITE: &[(&str, Behaviour)] = &[
    ("new_done_replay", new_done_replay),
    ("conflict_keeps_the_first", conflict_keeps_the_first),
    ("busy_then_done", busy_then_done),
    ("abandon_gives_new_again", abandon_gives_new_again),
    ("lease_expiry_and_finish_after_takeover", lease_expiry_and_finish_after_takeover),
    ("balance_query_not_replayed_but_indexed", balance_query_not_replayed_but_indexed),
    ("refused_index_is_not_missing", refused_index_is_not_missing),
    ("gaps_from_the_first_seen", gaps_from_the_first_seen),
    ("gaps_from_a_configured_first", gaps_from_a_configured_first),
    ("watermark_survives_reopening", watermark_survives_reopening),
    ("unknown_schema_version_refused", unknown_schema_version_refused),
    ("open_existing_creates_and_migrates_nothing", open_existing_creates_and_migrates_nothing),
    ("reply_over_the_limit_refused", reply_over_the_limit_refused),
    ("eight_threads_one_key", eight_threads_one_key),
    ("unfinished_lists_abandoned_and_expired_claims", unfinished_lists_abandoned_and_expired_claims),
    ("an_index_jump_opens_no_gap", an_index_jump_opens_no_gap),
    ("a_jump_declared_a_gap_is_missing", a_jump_declared_a_gap_is_missing),
    ("key_spaces_never_meet", key_spaces_never_meet),
    ("a_resend_of_an_unfinished_payout_is_never_refused", a_resend_of_an_unfinished_payout_is_never_refused),
    ("a_conflict_on_a_finished_delivery_stays_visible", a_conflict_on_a_finished_delivery_stays_visible),
    ("unfinished_deliveries_are_counted", unfinished_deliveries_are_counted),
    ("gaps_resolved_by_hand", gaps_resolved_by_hand),
    ("a_renumbering_never_hides_missing_indexes", a_renumbering_never_hides_missing_indexes),
    ("an_index_is_closed_only_by_its_own_event", an_index_is_closed_only_by_its_own_event),
    (
        "a_reused_index_is_reported_and_renumbering_keeps_the_records",
        a_reused_index_is_reported_and_renumbering_keeps_the_records,
    ),
    ("recovery_works_through_every_gap", recovery_works_through_every_gap),
    ("one_holder_of_a_lock", one_holder_of_a_lock),
    ("a_lock_of_a_gone_process_is_taken_at_once", a_lock_of_a_gone_process_is_taken_at_once),
    ("counts_at_the_ends_of_the_index_range", counts_at_the_ends_of_the_index_range),
    ("traffic_that_reaches_a_jump_shows_the_gap_below", traffic_that_reaches_a_jump_shows_the_gap_below),
    (
        "a_restarted_numbering_never_replays_another_events_reply",
        a_restarted_numbering_never_replays_another_events_reply,
    ),
    ("a_handed_out_conflict_keeps_the_first_and_answers_both", a_handed_out_conflict_keeps_the_first_and_answers_both),
    ("tried_gaps_in_front_never_starve_the_plan", tried_gaps_in_front_never_starve_the_plan),
    ("an_unfinished_delivery_can_be_closed_by_hand", an_unfinished_delivery_can_be_closed_by_hand),
    (
        "an_unfinished_delivery_of_an_earlier_numbering_is_not_fetched",
        an_unfinished_delivery_of_an_earlier_numbering_is_not_fetched,
    ),
    ("the_whole_index_range_resolved", the_whole_index_range_resolved),
    ("the_clock_is_the_wall_clock_in_ms", the_clock_is_the_wall_clock_in_ms),
    ("an_open_again_with_another_first_index_stores_it", an_open_again_with_another_first_index_stores_it),
    ("a_claim_at_finish_is_written_by_finish_only", a_claim_at_finish_is_written_by_finish_only),
    ("two_claims_at_finish_of_one_key_credit_once", two_claims_at_finish_of_one_key_credit_once),
    ("a_claim_at_finish_abandoned_is_unfinished", a_claim_at_finish_abandoned_is_unfinished),
    (
        "a_claim_at_finish_never_finished_leaves_its_index_missing",
        a_claim_at_finish_never_finished_leaves_its_index_missing,
    ),
    ("a_claim_at_finish_across_a_renumbering_stores_nothing", a_claim_at_finish_across_a_renumbering_stores_nothing),
    ("a_claim_at_finish_answered_alike_records_its_index", a_claim_at_finish_answered_alike_records_its_index),
    (
        "a_claim_at_finish_answered_alike_at_another_index_leaves_it_missing",
        a_claim_at_finish_answered_alike_at_another_index_leaves_it_missing,
    ),
    ("a_renumbering_waits_for_a_claim_at_finish_in_flight", a_renumbering_waits_for_a_claim_at_finish_in_flight),
    (
        "claims_at_finish_in_pairs_through_a_restart_credit_once",
        claims_at_finish_in_pairs_through_a_restart_credit_once,
    ),
    (
        "a_claim_at_finish_whose_commit_answer_is_lost_is_stored_once",
        a_claim_at_finish_whose_commit_answer_is_lost_is_stored_once,
    ),
    ("a_newer_schema_is_refused_by_the_open_or_the_claim", a_newer_schema_is_refused_by_the_open_or_the_claim),
    (
        "a_claim_at_finish_across_a_renumbering_is_not_answered_by_the_new_numbering",
        a_claim_at_finish_across_a_renumbering_is_not_answered_by_the_new_numbering,
    ),
    ("a_staged_session_setting_leaves_the_lock_timeout_alone", a_staged_session_setting_leaves_the_lock_timeout_alone),
];

#[test]
fn sqlite_conformance() {
    backends::run_suite(SUITE, "sqlite", &Sqlite { dir: TempDir::new("slotpartner-journal") });
}

#[test]
fn postgres_conformance() {
    let Some(cluster) = Cluster::start("PostgreSQL half") else { return };
    backends::run_suite(SUITE, "postgres", &Postgres { cluster });
}

/// The same behaviours through PgBouncer in transaction pooling mode, unchanged.
#[test]
fn pgbouncer_conformance() {
    let Some(bouncer) = PgBouncer::start("PostgreSQL through PgBouncer") else { return };
    backends::run_suite(SUITE, "pgbouncer", &Pooled { bouncer });
}

/// The same behaviours with the journal's statements kept prepared (`statement_cache_size`).
#[test]
fn postgres_prepared_conformance() {
    let Some(cluster) = Cluster::start("PostgreSQL with statements kept prepared") else { return };
    backends::run_suite(SUITE, "postgres-prepared", &Prepared { cluster });
}

/// A connection keeps named statements only when its URL asks (`statement_cache_size`): a staged
/// statement, run in the journal's own session, counts that session's prepared statements. A
/// delivery claimed at finish is then stored by the storing statement itself, kept prepared,
/// instead of by a call of the function `sp_journal_store_unwritten`: a staged statement of the
/// next delivery sees it among the session's statements (and only then), as it sees the
/// statement taking the numbering's lock and setting the guard, prepared by name
/// (`sp_journal_guard`, `PREPARE`) at the first claim at finish. A cache smaller than a
/// delivery's statements keeps the first it met and sends the rest unnamed: the same statements,
/// by the same names, at every delivery (none prepared again), and the function stores. The
/// staged statement is kept too, in room of its own (it counts itself: two and one).
#[test]
fn postgres_statements_are_kept_prepared_only_when_the_url_asks() {
    let Some(cluster) = Cluster::start("PostgreSQL statements kept prepared") else { return };
    let cases =
        [("unnamed", "", Some(0)), ("named", STATEMENT_CACHE, None), ("small", "&statement_cache_size=2", Some(3))];
    for (schema, suffix, exactly) in cases {
        let plain = cluster.schema_url(schema);
        let mut client = postgres::Client::connect(&plain, postgres::NoTls).unwrap();
        let url = format!("{plain}{suffix}");
        client
            .batch_execute(
                "CREATE TABLE prepared_seen (at BIGSERIAL, n BIGINT NOT NULL, storing BIGINT NOT NULL, guard BIGINT NOT NULL, names TEXT)",
            )
            .unwrap();
        let count = || {
            let sql = "INSERT INTO prepared_seen (n, storing, guard, names) SELECT count(*) FILTER (WHERE NOT from_sql), count(*) FILTER (WHERE statement LIKE '%EXISTS (SELECT 1 FROM numbered) FROM durable%' AND statement NOT LIKE 'INSERT INTO prepared_seen%'), count(*) FILTER (WHERE name = 'sp_journal_guard'), string_agg(name, ' ' ORDER BY name) FILTER (WHERE NOT from_sql) FROM pg_prepared_statements";
            Staged::new(sql, Vec::new()).unwrap()
        };
        let journal = open(&url);
        for n in 1..=3 {
            let claim = new_claim(&journal, &refund(n, Some(n), 7));
            journal.finish_with(&claim, b"ok", &[count()]).expect("finish");
        }
        let at_finish = Journal::open(&url, &JournalOptions { claim_at_finish: true, ..Default::default() }).unwrap();
        for n in 4..=6 {
            let claim = new_claim(&at_finish, &refund(n, Some(n), 7));
            at_finish.finish_with(&claim, b"ok", &[count()]).expect("finish");
        }
        let seen: Vec<(i64, i64, Option<String>, i64)> = client
            .query("SELECT n, storing, names, guard FROM prepared_seen ORDER BY at", &[])
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
            .collect();
        assert_eq!(seen.len(), 6, "{schema}");
        match exactly {
            Some(n) => assert!(seen.iter().all(|s| s.0 == n), "{schema}: prepared statements seen {seen:?}"),
            None => assert!(seen.iter().all(|s| s.0 > 0), "{schema}: prepared statements seen {seen:?}"),
        }
        // The fifth and sixth deliveries' statements ran after a store claimed at finish.
        let stored_kept = exactly.is_none();
        assert!(seen[4..].iter().all(|s| (s.1 > 0) == stored_kept), "{schema}: {seen:?}");
        // The guard's statement, prepared at the first claim at finish where statements are kept.
        assert!(seen[..3].iter().all(|s| s.3 == 0), "{schema}: {seen:?}");
        assert!(seen[3..].iter().all(|s| (s.3 == 1) == (exactly != Some(0))), "{schema}: {seen:?}");
        if exactly == Some(3) {
            // Each journal's one connection: the same names at every delivery.
            assert!(seen[..3].iter().all(|s| s.2 == seen[0].2), "{schema}: {seen:?}");
            assert!(seen[3..].iter().all(|s| s.2 == seen[3].2), "{schema}: {seen:?}");
        }
    }
}

/// `Journal::clock_ms` reads the journal's wall clock (PostgreSQL's, this host's on SQLite) in
/// ms since the epoch: the throw-away cluster runs on this host, so both clocks agree.
fn the_clock_is_the_wall_clock_in_ms(b: &dyn Backend) {
    let journal = open(&b.url("clock"));
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let before = now();
    let clock = journal.clock_ms().unwrap();
    let after = now();
    assert!(before - 1000 <= clock && clock <= after + 1000, "{before} <= {clock} <= {after}");
}

fn new_done_replay(b: &dyn Backend) {
    let journal = open(&b.url("new_done_replay"));
    let first = refund(900002, Some(1), 7);
    let claim = new_claim(&journal, &first);
    assert_eq!((claim.attempt(), claim.key()), (1, "gameSessionBuyRefund:900002"));
    // Any bytes, stored and given back as they are.
    let reply = b"{\"refund\":{\"success\":true,\"errorMessage\":\"\"}}\n\0\xff ".to_vec();
    journal.finish(&claim, &reply).unwrap();
    // A repeat, with another index and formatting: the same delivery.
    let repeat = delivery(
        r#"{ "index": 3, "event":"gameSessionBuyRefund", "transactionId":900002, "gameSessionIdentifier":"gs-900002",
            "playerIdentifier":"player-1", "buyTransactionId":1900002, "gameSessionId":5,
            "partnerGameRequestIdentifier":"req-900002", "gameId":7, "isMobile":false, "newField":[1] }"#,
    );
    assert_eq!(done_reply(&journal, &repeat), reply);
    assert_eq!(done_reply(&journal, &first), reply);
    // A refusal is final and replayed too.
    let refused = refund(900003, Some(2), 7);
    let failure = br#"{"refund":{"success":false,"errorMessage":"unknown player"}}"#;
    handle(&journal, &refused, failure);
    assert_eq!(done_reply(&journal, &refused), failure);

    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.replayed, status.in_progress, status.conflicts), (2, 3, 0, 0));
    let records = journal.lookup(900002).unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(
        (record.key.as_str(), record.state, record.attempts),
        ("gameSessionBuyRefund:900002", RecordState::Done, 1)
    );
    assert_eq!(
        (record.index, record.transaction_id, record.reply.as_deref()),
        (Some(1), Some(900002), Some(&reply[..]))
    );
    assert!(record.finished_ms.is_some() && record.lease_until_ms.is_none() && record.created_ms > 0);
    assert!(journal.lookup(12345).unwrap().is_empty());
}

fn conflict_keeps_the_first(b: &dyn Backend) {
    let journal = open_with(
        &b.url("conflict_keeps_the_first"),
        JournalOptions { busy_wait: Duration::ZERO, ..Default::default() },
    );
    let first = refund(900002, Some(1), 7);
    let claim = new_claim(&journal, &first);
    let other = refund(900002, Some(2), 8);
    // While the first is claimed, other content waits like any repeat (it may yet be abandoned,
    // and then it is handed out); once the first is done, it is refused.
    assert!(matches!(journal.begin(&other).unwrap(), Begin::Busy));
    journal.finish(&claim, b"first").unwrap();
    for _ in 0..2 {
        match journal.begin(&other).unwrap() {
            Begin::Conflict(error) => {
                assert_eq!(error.kind, ErrorKind::Conflict);
                assert_eq!(error.field, "gameSessionBuyRefund.transactionId");
                assert!(error.message.contains("900002"), "{error}");
                assert!(
                    error.message.contains(r#"partnerGameRequestIdentifier: first "req-900002", now "req-900002-8""#),
                    "{error}"
                );
            }
            answer => panic!("expected Conflict, got {answer:?}"),
        }
    }
    assert_eq!(done_reply(&journal, &first), b"first");
    let status = journal.status().unwrap();
    assert_eq!((status.conflicts, status.handled, status.replayed, status.open_conflicts), (2, 1, 1, 1));
}

fn busy_then_done(b: &dyn Backend) {
    let url = b.url("busy_then_done");
    let worker = open(&url);
    let waiting = open_with(&url, JournalOptions { busy_wait: Duration::from_secs(5), ..Default::default() });
    let impatient = open_with(&url, JournalOptions { busy_wait: Duration::from_millis(200), ..Default::default() });
    let event = refund(1, Some(1), 7);
    let claim = new_claim(&worker, &event);

    let started = Instant::now();
    assert!(matches!(impatient.begin(&event).unwrap(), Begin::Busy));
    assert!(started.elapsed() >= Duration::from_millis(200), "waited {:?}", started.elapsed());

    thread::scope(|s| {
        let other = s.spawn(|| waiting.begin(&event).unwrap());
        thread::sleep(Duration::from_millis(300));
        worker.finish(&claim, b"the reply").unwrap();
        match other.join().unwrap() {
            Begin::Done(reply) => assert_eq!(reply, b"the reply"),
            answer => panic!("expected Done after the wait, got {answer:?}"),
        }
    });
}

fn abandon_gives_new_again(b: &dyn Backend) {
    let journal = open(&b.url("abandon_gives_new_again"));
    let event = refund(77, Some(1), 7);
    let first = new_claim(&journal, &event);
    assert_eq!(journal.status().unwrap().in_progress, 1);
    journal.abandon(&first).unwrap();
    assert_eq!(journal.status().unwrap().in_progress, 0);
    assert_eq!(journal.lookup(77).unwrap()[0].state, RecordState::Abandoned);
    let second = new_claim(&journal, &event);
    assert_eq!(second.attempt(), 2);
    let error = journal.abandon(&first).unwrap_err();
    assert_eq!(error.kind, ErrorKind::ClaimLost, "{error}");
    let error = journal.finish(&first, b"stale").unwrap_err();
    assert_eq!(error.kind, ErrorKind::ClaimLost, "{error}");
    journal.finish(&second, b"second").unwrap();
    assert_eq!(done_reply(&journal, &event), b"second");
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.in_progress), (1, 0));
    assert_eq!(journal.lookup(77).unwrap()[0].attempts, 2);
}

fn lease_expiry_and_finish_after_takeover(b: &dyn Backend) {
    let options = JournalOptions { lease: Duration::from_millis(300), busy_wait: Duration::ZERO, ..Default::default() };
    let journal = open_with(&b.url("lease_expiry"), options);
    let event = refund(5, Some(1), 7);
    let dead = new_claim(&journal, &event);
    assert!(matches!(journal.begin(&event).unwrap(), Begin::Busy));
    thread::sleep(Duration::from_millis(400));
    let taken = new_claim(&journal, &event);
    assert_eq!(taken.attempt(), 2);
    // The first worker wakes up: its claim is gone, nothing is overwritten.
    let error = journal.finish(&dead, b"late").unwrap_err();
    assert_eq!(error.kind, ErrorKind::ClaimLost);
    assert!(error.message.contains("attempt 2"), "{error}");
    journal.finish(&taken, b"taken over").unwrap();
    assert_eq!(done_reply(&journal, &event), b"taken over");
    assert_eq!(journal.status().unwrap().in_progress, 0);
}

fn unfinished_lists_abandoned_and_expired_claims(b: &dyn Backend) {
    let options = JournalOptions { lease: Duration::from_millis(300), busy_wait: Duration::ZERO, ..Default::default() };
    let journal = open_with(&b.url("unfinished"), options);
    let done = new_claim(&journal, &refund(1, Some(1), 7));
    journal.finish(&done, b"done").unwrap();
    let abandoned = new_claim(&journal, &refund(2, Some(2), 7));
    journal.abandon(&abandoned).unwrap();
    let _dies = new_claim(&journal, &refund(3, Some(3), 7));
    let _live = new_claim(&journal, &refund(4, Some(4), 7));
    assert_eq!(journal.unfinished(10).unwrap(), vec![2], "a live claim is not unfinished yet");
    thread::sleep(Duration::from_millis(400));
    assert_eq!(journal.unfinished(10).unwrap(), vec![2, 3, 4]);
    assert_eq!(journal.unfinished(1).unwrap(), vec![2]);
    // Taken over and finished: no longer unfinished; nothing is missing all along.
    let taken = new_claim(&journal, &refund(3, Some(3), 7));
    journal.finish(&taken, b"taken").unwrap();
    assert_eq!(journal.unfinished(10).unwrap(), vec![2, 4]);
    assert!(journal.missing(10).unwrap().is_empty());
}

fn balance_query_not_replayed_but_indexed(b: &dyn Backend) {
    let journal = open(&b.url("balance_query"));
    handle(&journal, &refund(1, Some(1), 7), b"r1");
    for _ in 0..2 {
        assert!(matches!(journal.begin(&balance(2)).unwrap(), Begin::NotReplayable));
    }
    handle(&journal, &refund(3, Some(3), 7), b"r3");
    assert_eq!(journal.missing(10).unwrap(), vec![]);
    let status = journal.status().unwrap();
    assert_eq!((status.missing, status.highest_index, status.watermark, status.handled), (0, Some(3), Some(3), 2));
    // An unknown event without an index has no key either.
    assert!(matches!(journal.begin(&delivery(r#"{"event":"ping"}"#)).unwrap(), Begin::NotReplayable));
}

fn refused_index_is_not_missing(b: &dyn Backend) {
    let journal = open(&b.url("refused_index"));
    handle(&journal, &refund(11, Some(1), 7), b"r");
    journal.record_refused(2, Some("gameSessionBuyRefund"), Some(12)).unwrap();
    handle(&journal, &refund(13, Some(3), 7), b"r");
    journal.record_refused(5, None, None).unwrap();
    assert_eq!(journal.missing(10).unwrap(), vec![(4, 4)]);
    let status = journal.status().unwrap();
    assert_eq!((status.refused, status.missing, status.highest_index, status.watermark), (2, 1, Some(5), Some(3)));
    let records = journal.lookup(12).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].state, records[0].index, records[0].name.as_deref()),
        (RecordState::Refused, Some(2), Some("gameSessionBuyRefund"))
    );
    assert!(journal.record_refused(-1, None, None).is_err());
}

fn gaps_from_the_first_seen(b: &dyn Backend) {
    let journal = open(&b.url("gaps_first_seen"));
    assert_eq!(journal.status().unwrap().first_index, None);
    for index in [10, 11, 14, 17, 18, 20, 14] {
        handle_or_replay(&journal, &indexed(index));
    }
    assert_eq!(journal.missing(10).unwrap(), vec![(12, 13), (15, 16), (19, 19)]);
    assert_eq!(journal.missing(2).unwrap(), vec![(12, 13), (15, 16)]);
    let status = journal.status().unwrap();
    assert_eq!(
        (status.first_index, status.highest_index, status.watermark, status.missing),
        (Some(10), Some(20), Some(11), 5)
    );
    for index in [12, 13] {
        handle_or_replay(&journal, &indexed(index));
    }
    let status = journal.status().unwrap();
    assert_eq!((status.watermark, status.missing), (Some(14), 3));
    // An index below the first seen (reordered) becomes the first.
    handle_or_replay(&journal, &indexed(8));
    assert_eq!(journal.missing(10).unwrap(), vec![(9, 9), (15, 16), (19, 19)]);
    let status = journal.status().unwrap();
    assert_eq!((status.first_index, status.watermark, status.missing), (Some(8), Some(8), 4));
}

fn gaps_from_a_configured_first(b: &dyn Backend) {
    let url = b.url("gaps_configured_first");
    let journal = open_with(&url, JournalOptions { first_index: Some(5), ..Default::default() });
    for index in [3, 7, 8] {
        handle_or_replay(&journal, &indexed(index));
    }
    assert_eq!(journal.missing(10).unwrap(), vec![(5, 6)]);
    let status = journal.status().unwrap();
    assert_eq!(
        (status.first_index, status.highest_index, status.watermark, status.missing),
        (Some(5), Some(8), None, 2)
    );
    // The configured first index is stored: a journal opened without one counts from it too.
    let later = open(&url);
    for index in [5, 6] {
        handle_or_replay(&later, &indexed(index));
    }
    let status = later.status().unwrap();
    assert_eq!((status.first_index, status.watermark, status.missing), (Some(5), Some(8), 0));
    assert_eq!(later.missing(10).unwrap(), vec![]);
}

/// A journal opened again in the same process (as PHP-FPM opens one every request) skips the
/// checks an earlier open settled, but not a first index that open did not store.
fn an_open_again_with_another_first_index_stores_it(b: &dyn Backend) {
    let url = b.url("open_again_first_index");
    for _ in 0..3 {
        assert_eq!(open(&url).status().unwrap().first_index, None);
    }
    let configured = open_with(&url, JournalOptions { first_index: Some(7), ..Default::default() });
    assert_eq!(configured.status().unwrap().first_index, Some(7));
    let again = open_with(&url, JournalOptions { first_index: Some(9), ..Default::default() });
    assert_eq!(again.status().unwrap().first_index, Some(9));
}

fn handle_or_replay(journal: &Journal, delivery: &Delivery) {
    match journal.begin(delivery).unwrap() {
        Begin::New(claim) => journal.finish(&claim, b"ok").unwrap(),
        Begin::Done(_) => {}
        answer => panic!("{answer:?}"),
    }
}

fn watermark_survives_reopening(b: &dyn Backend) {
    let url = b.url("watermark_reopen");
    {
        let journal = open(&url);
        for index in (1..=50).filter(|&i| i != 25) {
            handle(&journal, &refund(index + 500, Some(index), 7), b"ok");
        }
    }
    let journal = open(&url);
    let status = journal.status().unwrap();
    assert_eq!((status.watermark, status.highest_index, status.missing, status.handled), (Some(24), Some(50), 1, 49));
    assert_eq!(journal.missing(10).unwrap(), vec![(25, 25)]);
    handle(&journal, &refund(525, Some(25), 7), b"ok");
    let status = open(&url).status().unwrap();
    assert_eq!((status.watermark, status.missing), (Some(50), 0));
}

fn unknown_schema_version_refused(b: &dyn Backend) {
    let url = b.url("schema_version");
    handle(&open(&url), &refund(1, Some(1), 7), b"ok");
    b.set_schema_version(&url, 99);
    let error = Journal::open(&url, &JournalOptions::default()).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Journal);
    assert!(error.message.contains("schema version 99") && error.message.contains("newer"), "{error}");
    b.set_schema_version(&url, 1);
    assert_eq!(done_reply(&open(&url), &refund(1, Some(1), 7)), b"ok");
}

/// `Journal::open_existing` opens a current journal and nothing else: where there is none it
/// creates none, and an older one stays at its version (`open` would migrate it).
fn open_existing_creates_and_migrates_nothing(b: &dyn Backend) {
    let url = b.url("open_existing");
    let existing = || Journal::open_existing(&url, &JournalOptions::default());
    for _ in 0..2 {
        match existing() {
            Ok(ExistingJournal::Absent { reason }) => {
                assert!(reason.contains("sp_journal_meta") || reason.contains("no such file"), "{reason}");
                assert!(!reason.contains("password"), "{reason}");
            }
            other => panic!("expected no journal, got {other:?}"),
        }
    }
    if let Some(path) = url.strip_prefix("sqlite:") {
        assert!(!Path::new(path).exists(), "no file was created");
    }
    handle(&open(&url), &refund(1, Some(1), 7), b"ok");
    handle(&open(&url), &refund(3, Some(3), 7), b"ok");
    match existing() {
        Ok(ExistingJournal::Current(journal)) => {
            assert_eq!(done_reply(&journal, &refund(1, Some(1), 7)), b"ok");
            assert_eq!(journal.status().unwrap().missing, 1);
        }
        other => panic!("expected the current journal, got {other:?}"),
    }
    b.set_schema_version(&url, 2);
    for _ in 0..2 {
        match existing() {
            Ok(ExistingJournal::Older { version: 2 }) => {}
            other => panic!("expected an older journal left at version 2, got {other:?}"),
        }
    }
    b.set_schema_version(&url, 99);
    let error = existing().unwrap_err();
    assert!(error.message.contains("schema version 99") && error.message.contains("newer"), "{error}");
    // Back at version 2, `open` migrates it as ever.
    b.set_schema_version(&url, 2);
    assert_eq!(done_reply(&open(&url), &refund(1, Some(1), 7)), b"ok");
    assert!(matches!(existing(), Ok(ExistingJournal::Current(_))));
}

/// An empty file, and a SQLite database of no journal, stay byte for byte as they were when
/// `open_existing` looks at them.
#[test]
fn open_existing_writes_nothing_into_a_sqlite_file_without_a_journal() {
    let dir = TempDir::new("slotpartner-open-existing");
    let empty = dir.0.join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let other = dir.0.join("other.db");
    rusqlite::Connection::open(&other).unwrap().execute_batch("PRAGMA user_version = 7").unwrap();
    for path in [&empty, &other] {
        let before = std::fs::read(path).unwrap();
        let url = format!("sqlite:{}", path.display());
        match Journal::open_existing(&url, &JournalOptions::default()) {
            Ok(ExistingJournal::Absent { reason }) => assert!(reason.contains("no sp_journal_meta"), "{reason}"),
            other => panic!("expected no journal in {url}, got {other:?}"),
        }
        assert_eq!(std::fs::read(path).unwrap(), before, "{url}");
    }
    assert!(!dir.0.join("empty.db-wal").exists());
}

fn reply_over_the_limit_refused(b: &dyn Backend) {
    let options = JournalOptions { max_reply_bytes: 16, busy_wait: Duration::ZERO, ..Default::default() };
    let journal = open_with(&b.url("reply_limit"), options);
    let event = refund(1, Some(1), 7);
    let claim = new_claim(&journal, &event);
    let error = journal.finish(&claim, &[b'x'; 17]).unwrap_err();
    assert_eq!((error.kind, error.field.as_str()), (ErrorKind::InvalidArgument, "reply"));
    assert!(error.message.contains("16 bytes"), "{error}");
    // The claim stays held.
    assert!(matches!(journal.begin(&event).unwrap(), Begin::Busy));
    journal.finish(&claim, &[b'y'; 16]).unwrap();
    assert_eq!(done_reply(&journal, &event), [b'y'; 16]);
}

fn eight_threads_one_key(b: &dyn Backend) {
    let url = b.url("eight_threads");
    open(&url);
    let barrier = Barrier::new(8);
    let event = refund(4242, Some(1), 7);
    let answers: Vec<Begin> = thread::scope(|s| {
        let workers: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    let journal = open(&url);
                    barrier.wait();
                    let answer = journal.begin(&event).unwrap();
                    if let Begin::New(claim) = &answer {
                        thread::sleep(Duration::from_millis(100));
                        journal.finish(claim, b"only once").unwrap();
                    }
                    answer
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let new = answers.iter().filter(|a| matches!(a, Begin::New(_))).count();
    assert_eq!(new, 1, "{answers:?}");
    for answer in &answers {
        match answer {
            Begin::New(claim) => assert_eq!(claim.attempt(), 1),
            Begin::Done(reply) => assert_eq!(reply, b"only once"),
            Begin::Busy => {}
            other => panic!("{other:?}"),
        }
    }
    let status = open(&url).status().unwrap();
    assert_eq!((status.handled, status.in_progress), (1, 0));
}

// ---------------------------------------------------------------------------------------------
// One backend only

/// PostgreSQL commits a stored reply durably exactly when asked: the server is told to wait
/// `commit_delay` (0.1 s) before each WAL flush a commit waits for, so that a durable commit
/// takes at least that long and one committed with `synchronous_commit=off` does not wait.
/// `finish` with `Synchronous::Full` must wait (four of five at least: a signal may cut the
/// server's sleep short); `begin` (claims are never durable) and `finish` with
/// `Synchronous::Normal` must not (the fastest of five is under the delay: robust to a loaded
/// machine). Committing without the wait makes every call fast, failing the first check.
#[test]
fn postgres_durable_replies_wait_for_the_flush() {
    let Some(cluster) = Cluster::start("PostgreSQL durability") else { return };
    const DELAY: Duration = Duration::from_millis(100);
    let url =
        |schema: &str| format!("{}%20-ccommit_delay%3D100000%20-ccommit_siblings%3D0", cluster.schema_url(schema));
    let timed = |run: &mut dyn FnMut()| {
        let started = Instant::now();
        run();
        started.elapsed()
    };
    let run = |synchronous: Synchronous, first: i64| -> (Vec<Duration>, Vec<Duration>) {
        let options = JournalOptions { synchronous, ..JournalOptions::default() };
        let journal = open_with(&url(&format!("durability_{}", first)), options);
        let (mut begins, mut finishes) = (Vec::new(), Vec::new());
        for transaction_id in first..first + 5 {
            let mut claim = None;
            begins.push(timed(&mut || claim = Some(new_claim(&journal, &refund(transaction_id, None, 7)))));
            let claim = claim.unwrap();
            finishes.push(timed(&mut || journal.finish(&claim, b"{}").expect("finish")));
        }
        (begins, finishes)
    };
    let (full_begins, full_finishes) = run(Synchronous::Full, 100);
    let waited = full_finishes.iter().filter(|d| **d >= DELAY).count();
    assert!(waited >= 4, "durable finishes returned before the flush: {full_finishes:?}");
    assert!(full_begins.iter().min().unwrap() < &DELAY, "claims waited for a flush: {full_begins:?}");
    let (_, normal_finishes) = run(Synchronous::Normal, 200);
    assert!(
        normal_finishes.iter().min().unwrap() < &DELAY,
        "Synchronous::Normal waited for a flush: {normal_finishes:?}"
    );
}

#[test]
fn other_schemes_are_refused() {
    for url in ["mysql://user:secret@host/db", "journal.db", "", "sqlite:", "sqlite::memory:"] {
        let error = Journal::open(url, &JournalOptions::default()).unwrap_err();
        assert_eq!((error.kind, error.field.as_str()), (ErrorKind::InvalidArgument, "journal_url"), "{url}: {error}");
        assert!(!error.message.contains("secret"), "{error}");
    }
    let error =
        Journal::open("sqlite:/tmp/x.db", &JournalOptions { lease: Duration::ZERO, ..Default::default() }).unwrap_err();
    assert_eq!((error.kind, error.field.as_str()), (ErrorKind::InvalidArgument, "lease"));
}

/// A journal file restored (replaced) while a worker still has the old one open: the worker's
/// next delivery goes into the file now at the path, not into the unlinked old one where no
/// reader would ever find it; a file removed under it fails the delivery (nothing written
/// where nobody reads) instead of creating an empty journal.
#[test]
fn a_sqlite_file_replaced_under_a_worker_is_written_where_it_now_is() {
    let dir = TempDir::new("replaced");
    let path = dir.path().join("journal.db");
    let url = format!("sqlite:{}", path.display());
    let worker = open(&url);
    handle(&worker, &refund(1, Some(1), 7), b"one");
    let copy = dir.path().join("copy.db");
    worker.backup(&copy).expect("backup");
    handle(&worker, &refund(2, Some(2), 7), b"two");
    // The restore, with the worker still running.
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    std::fs::rename(&copy, &path).unwrap();
    handle(&worker, &refund(3, Some(3), 7), b"three");
    // Read behind the library's back (in this process, the journal's handles share one pool).
    let reader = rusqlite::Connection::open(&path).unwrap();
    let held = |id: i64| -> i64 {
        reader
            .query_row("SELECT count(*) FROM sp_journal_delivery WHERE transaction_id = ?1", [id], |r| r.get(0))
            .unwrap()
    };
    assert_eq!((held(1), held(2), held(3)), (1, 0, 1), "the delivery after the restore is in the restored file");
    drop(reader);
    // Removed: the worker's next delivery fails, and no empty journal appears in its place.
    std::fs::remove_file(&path).unwrap();
    let error = worker.begin(&refund(4, Some(4), 7)).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Journal, "{error}");
    assert!(error.message.contains("file is gone"), "{error}");
    assert!(!path.exists());
}

#[test]
fn corrupt_sqlite_file_is_a_clear_error() {
    let dir = TempDir::new("slotpartner-journal-corrupt");
    let path = dir.0.join("corrupt.db");
    std::fs::write(&path, b"this is not a SQLite database, just text. ".repeat(200)).unwrap();
    let error = Journal::open(&format!("sqlite:{}", path.display()), &JournalOptions::default()).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Journal);
    assert!(error.message.contains("corrupt.db") && error.message.contains("not a"), "{error}");

    let error =
        Journal::open(&format!("sqlite:{}/no/such/dir/j.db", dir.0.display()), &JournalOptions::default()).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Journal);
    assert!(error.message.contains("cannot open"), "{error}");
}

/// Root writes any file; the check runs as `nobody` then, in a child process of this binary.
#[test]
fn read_only_sqlite_file_is_a_clear_error() {
    let dir = TempDir::new("slotpartner-journal-ro");
    let path = dir.0.join("read-only.db");
    handle(&open(&format!("sqlite:{}", path.display())), &refund(1, Some(1), 7), b"ok");
    let mut permissions = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o444);
    std::fs::set_permissions(&path, permissions).unwrap();
    // A fresh path for the child (this process keeps its connections to the first one).
    let copy = dir.0.join("copy.db");
    std::fs::copy(&path, &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::metadata(&path).unwrap().permissions()).unwrap();
    let mut command = match unprivileged_prefix().as_deref() {
        Some([runner, args @ ..]) => {
            let mut command = Command::new(runner);
            command.args(args).arg(std::env::current_exe().unwrap());
            command
        }
        Some([]) => Command::new(std::env::current_exe().unwrap()),
        None => {
            println!("SKIP read-only SQLite file: running as root without runuser or setpriv to drop privileges");
            return;
        }
    };
    let output = command
        .args(["--ignored", "--exact", "read_only_child", "--nocapture", "--test-threads=1"])
        .env("SLOTPARTNER_RO_JOURNAL", &copy)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "child failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let verdict = stdout.find("read-only child: ok").map(|at| stdout[at..].lines().next().unwrap_or_default());
    println!("{}", verdict.unwrap_or_else(|| panic!("no verdict from the child:\n{stdout}")));
}

/// The child of `read_only_sqlite_file_is_a_clear_error`.
#[test]
#[ignore = "run by read_only_sqlite_file_is_a_clear_error"]
fn read_only_child() {
    let Some(path) = std::env::var_os("SLOTPARTNER_RO_JOURNAL") else { return };
    let error =
        Journal::open(&format!("sqlite:{}", Path::new(&path).display()), &JournalOptions::default()).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Journal);
    assert!(error.message.contains("read-only"), "{error}");
    println!("read-only child: ok ({error})");
}

#[test]
fn unreachable_postgres_is_a_clear_error() {
    let port = free_port();
    let url = format!("postgres://someone:secret@127.0.0.1:{port}/journal");
    let options = JournalOptions { lock_timeout: Duration::from_secs(2), ..Default::default() };
    let started = Instant::now();
    let error = Journal::open(&url, &options).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Journal);
    assert!(error.message.contains(&format!("127.0.0.1:{port}/journal")), "{error}");
    assert!(!error.message.contains("secret"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

// ---------------------------------------------------------------------------------------------
// Throughput (not a timed test: it prints)

fn throughput(url: &str, threads: usize, per_thread: usize, offset: i64) -> f64 {
    let journal = Arc::new(open(url));
    let started = Instant::now();
    thread::scope(|s| {
        for t in 0..threads {
            let journal = Arc::clone(&journal);
            s.spawn(move || {
                for i in 0..per_thread {
                    let n = offset + (t * per_thread + i) as i64;
                    let claim = new_claim(&journal, &refund(n, Some(n), 7));
                    journal.finish(&claim, br#"{"refund":{"success":true,"errorMessage":""}}"#).unwrap();
                }
            });
        }
    });
    (threads * per_thread) as f64 / started.elapsed().as_secs_f64()
}

#[test]
#[ignore = "prints throughput; run with --ignored --nocapture"]
fn throughput_begin_finish() {
    let dir = TempDir::new("slotpartner-journal-bench");
    let sqlite = format!("sqlite:{}", dir.0.join("bench.db").display());
    println!("sqlite, 1 thread:   {:.0} deliveries/s", throughput(&sqlite, 1, 3000, 0));
    println!("sqlite, 4 threads:  {:.0} deliveries/s", throughput(&sqlite, 4, 1000, 100_000));
    let Some(cluster) = Cluster::start("PostgreSQL half") else { return };
    let postgres = cluster.url();
    println!("postgres, 1 thread: {:.0} deliveries/s", throughput(&postgres, 1, 2000, 0));
    println!("postgres, 4 threads: {:.0} deliveries/s", throughput(&postgres, 4, 1000, 100_000));
    let status = open(&postgres).status().unwrap();
    assert_eq!(status.handled, 6000);
}

// ---------------------------------------------------------------------------------------------
// Holes a hostile or unlucky day reaches

fn finish_with(journal: &Journal, delivery: &Delivery, reply: &str) {
    let claim = new_claim(journal, delivery);
    journal.finish(&claim, reply.as_bytes()).unwrap();
}

const FAR: i64 = 1_000_000_000_000;

fn an_index_jump_opens_no_gap(b: &dyn Backend) {
    let journal = open(&b.url("an_index_jump_opens_no_gap"));
    for i in 1..=5 {
        handle(&journal, &indexed(i), b"ok");
    }
    handle(&journal, &indexed(FAR), b"ok");
    let status = journal.status().unwrap();
    assert_eq!((status.missing, status.index_jumps, status.highest_index), (0, 1, Some(FAR)), "{status:?}");
    assert!(Journal::needs_attention(&status), "an open jump needs the operator");
    // A real lost event after the jump is found, and recovery asks for it, not for 6..FAR-1.
    handle(&journal, &indexed(FAR + 2), b"ok");
    assert_eq!(journal.missing(10).unwrap(), vec![(FAR + 1, FAR + 1)]);
    assert_eq!(journal.status().unwrap().missing, 1);
    assert_eq!(journal.recovery_plan(10).unwrap(), vec![FAR + 1]);
    // Traffic that goes on below the jump keeps its own gaps.
    handle(&journal, &indexed(7), b"ok");
    assert_eq!(journal.missing(10).unwrap(), vec![(6, 6), (FAR + 1, FAR + 1)]);
    let jumps = journal.index_jumps(false, 10).unwrap();
    assert_eq!(jumps.len(), 1, "{jumps:?}");
    let jump = &jumps[0];
    assert_eq!((jump.index, jump.previous_highest, jump.kind.as_str()), (FAR, Some(5), "jump"));
    assert_eq!(jump.key.as_deref(), Some(format!("event#{FAR}#bonusGranted").as_str()));
    assert_eq!(journal.accept_jump(jump.id, "").unwrap_err().field, "note");
    journal.accept_jump(jump.id, "the service moved its numbering (ticket 42)").unwrap();
    let status = journal.status().unwrap();
    assert_eq!((status.index_jumps, status.missing), (0, 2));
    assert_eq!(journal.index_jumps(true, 10).unwrap()[0].decision.as_deref(), Some("accepted"));
    assert_eq!(journal.accept_jump(jump.id, "again").unwrap_err().field, "id");
    // A window wide enough takes the same index as a gap of its size.
    let wide = open_with(
        &b.url("an_index_jump_wide"),
        JournalOptions { max_index_jump: i64::MAX, ..JournalOptions::default() },
    );
    handle(&wide, &indexed(1), b"ok");
    handle(&wide, &indexed(FAR), b"ok");
    assert_eq!(wide.status().unwrap().missing, (FAR - 2) as u64);
}

fn a_jump_declared_a_gap_is_missing(b: &dyn Backend) {
    let options = JournalOptions { max_index_jump: 100, ..JournalOptions::default() };
    let journal = open_with(&b.url("a_jump_declared_a_gap_is_missing"), options);
    handle(&journal, &indexed(1), b"ok");
    handle(&journal, &indexed(500), b"ok");
    assert_eq!(journal.status().unwrap().missing, 0);
    let id = journal.index_jumps(false, 10).unwrap()[0].id;
    journal.jump_is_gap(id, "an outage: fetch them").unwrap();
    let status = journal.status().unwrap();
    assert_eq!((status.missing, status.index_jumps), (498, 0));
    assert_eq!(journal.missing(10).unwrap(), vec![(2, 499)]);
}

fn key_spaces_never_meet(b: &dyn Backend) {
    let journal = open(&b.url("key_spaces_never_meet"));
    let n = 900002;
    let kinds = [
        refund(n, None, 7),
        payout(n, 1, 100, ""),
        delivery(&format!(r#"{{"action":"jackpotPayout","index":{n}}}"#)),
        delivery(&format!(r#"{{"action":"gameSessionBuyRefund","index":{n}}}"#)),
        delivery(&format!(r#"{{"event":"getPlayerBalance","index":{n}}}"#)),
        delivery(&format!(r#"{{"action":"bonusGranted","index":{n}}}"#)),
        delivery(&format!(r#"{{"event":"bonusGranted","index":{n}}}"#)),
    ];
    for (i, a) in kinds.iter().enumerate() {
        for (j, other) in kinds.iter().enumerate() {
            if i != j {
                assert_ne!(a.key(), other.key(), "kinds {i} and {j} share a key");
            }
        }
    }
    for (i, kind) in kinds.iter().enumerate() {
        finish_with(&journal, kind, &format!("reply {i}"));
    }
    for (i, kind) in kinds.iter().enumerate() {
        assert_eq!(done_reply(&journal, kind), format!("reply {i}").into_bytes(), "kind {i}");
    }
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.conflicts, status.open_conflicts), (kinds.len() as u64, 0, 0));
}

fn a_resend_of_an_unfinished_payout_is_never_refused(b: &dyn Backend) {
    let journal = open(&b.url("a_resend_of_an_unfinished_payout_is_never_refused"));
    let first = payout(900002, 1, 100, r#","isMobile":false"#);
    let claim = new_claim(&journal, &first);
    journal.abandon(&claim).unwrap(); // the partner's database was down: 503
    // Delivered again with isMobile absent, then null: the same delivery.
    for tail in ["", r#","isMobile":null"#] {
        let again = payout(900002, 1, 100, tail);
        let claim = new_claim(&journal, &again);
        assert!(claim.attempt() >= 2 && claim.differing().is_empty(), "{claim:?}");
        journal.abandon(&claim).unwrap();
    }
    assert_eq!(journal.status().unwrap().open_conflicts, 0);
    // Delivered again with another amount: handed out, never refused forever, and flagged.
    let changed = payout(900002, 1, 250, "");
    let claim = new_claim(&journal, &changed);
    assert_eq!(claim.differing(), ["moneyWon: first 100, now 250"]);
    journal.finish(&claim, b"paid").unwrap();
    assert_eq!(done_reply(&journal, &changed), b"paid");
    let status = journal.status().unwrap();
    assert_eq!((status.open_conflicts, status.unfinished), (1, 0));
    assert!(Journal::needs_attention(&status));
    let conflicts = journal.conflicts(false, 10).unwrap();
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    let c = &conflicts[0];
    assert_eq!(
        (c.outcome.as_str(), c.key.as_str(), c.transaction_id),
        ("handed_out", "jackpotPayout:900002", Some(900002))
    );
    assert!(c.first_content.contains("\"moneyWon\":100") && c.now_content.contains("\"moneyWon\":250"), "{c:?}");
    journal.resolve_conflict(c.id, "paid 250 as the service says").unwrap();
    assert_eq!(journal.status().unwrap().open_conflicts, 0);
    assert_eq!(journal.conflicts(true, 10).unwrap()[0].note.as_deref(), Some("paid 250 as the service says"));
}

fn a_conflict_on_a_finished_delivery_stays_visible(b: &dyn Backend) {
    let journal = open(&b.url("a_conflict_on_a_finished_delivery_stays_visible"));
    finish_with(&journal, &payout(900003, 1, 100, r#","isMobile":false"#), "paid");
    // Only fields that decide nothing changed: the stored reply.
    let cosmetic = payout(900003, 1, 100, r#","isMobile":true,"bonusCode":"B1""#);
    assert_eq!(done_reply(&journal, &cosmetic), b"paid");
    // The amount changed: refused, counted, listed until resolved.
    for _ in 0..2 {
        match journal.begin(&payout(900003, 1, 999, "")).unwrap() {
            Begin::Conflict(error) => assert!(error.message.contains("moneyWon: first 100, now 999"), "{error}"),
            other => panic!("expected a conflict, got {other:?}"),
        }
    }
    let status = journal.status().unwrap();
    assert_eq!((status.conflicts, status.open_conflicts), (2, 1));
    let c = &journal.conflicts(false, 10).unwrap()[0];
    assert_eq!((c.outcome.as_str(), c.count), ("refused", 2));
    assert_eq!(c.differing, ["moneyWon: first 100, now 999"]);
}

fn unfinished_deliveries_are_counted(b: &dyn Backend) {
    // A lease a loaded machine cannot outlast between the claim and the first status (a 50 ms
    // one was over before it on a machine running six suites at once), then slept past.
    let lease = Duration::from_secs(1);
    let options = JournalOptions { lease, ..JournalOptions::default() };
    let journal = open_with(&b.url("unfinished_deliveries_are_counted"), options);
    let abandoned = new_claim(&journal, &refund(1, Some(1), 7));
    journal.abandon(&abandoned).unwrap();
    let claimed = Instant::now();
    let _expired = new_claim(&journal, &refund(2, Some(2), 7));
    let status = journal.status().unwrap();
    assert_eq!((status.unfinished, status.in_progress, status.missing), (1, 1, 0));
    assert!(Journal::needs_attention(&status), "an abandoned delivery needs attention");
    thread::sleep(lease.saturating_sub(claimed.elapsed()) + Duration::from_millis(100));
    assert_eq!(journal.status().unwrap().unfinished, 2);
    assert_eq!(journal.recovery_plan(10).unwrap(), vec![1, 2]);
    handle(&journal, &refund(1, Some(1), 7), b"ok");
    handle(&journal, &refund(2, Some(2), 7), b"ok");
    let status = journal.status().unwrap();
    assert_eq!((status.unfinished, status.in_progress), (0, 0));
    assert!(!Journal::needs_attention(&status));
}

fn gaps_resolved_by_hand(b: &dyn Backend) {
    let journal = open(&b.url("gaps_resolved_by_hand"));
    for i in [1, 2, 5, 9] {
        handle(&journal, &indexed(i), b"ok");
    }
    assert_eq!(journal.status().unwrap().missing, 5);
    assert_eq!(journal.resolve(3, 4, " ").unwrap_err().field, "note");
    assert_eq!(journal.resolve(4, 3, "x").unwrap_err().field, "range");
    assert_eq!(journal.resolve(8, 10, "x").unwrap_err().field, "range");
    assert_eq!(journal.resolve(3, 4, "the service confirms 3 and 4 were never sent").unwrap(), 2);
    assert_eq!(journal.resolve(2, 6, "overlapping").unwrap(), 1);
    let status = journal.status().unwrap();
    assert_eq!((status.missing, status.resolved), (2, 3));
    assert_eq!(journal.missing(10).unwrap(), vec![(7, 8)]);
    let resolutions = journal.resolutions(10).unwrap();
    assert_eq!(resolutions.len(), 2);
    assert_eq!((resolutions[1].first, resolutions[1].last, resolutions[1].closed), (3, 4, 2));
    assert_eq!(resolutions[1].note, "the service confirms 3 and 4 were never sent");
}

/// An index is counted seen only with its own event: an event the journal holds at another
/// index arriving with this one (a repeat answered from the journal, or a conflict refused)
/// leaves the index missing, and records the anomaly (`moved`) for the operator; a repeat at
/// its own index is a plain repeat.
fn an_index_is_closed_only_by_its_own_event(b: &dyn Backend) {
    use slotpartner::journal::JumpKind;
    let journal = open(&b.url("an_index_is_closed_only_by_its_own_event"));
    handle(&journal, &refund(900_000_001, Some(5), 7), b"five");
    // A repeat at its own index: answered, nothing anomalous.
    assert!(matches!(journal.begin(&refund(900_000_001, Some(5), 7)).unwrap(), Begin::Done(_)));
    // The same event carrying index 6: answered from the journal, index 6 not closed by it.
    match journal.begin(&refund(900_000_001, Some(6), 7)).unwrap() {
        Begin::Done(stored) => assert_eq!(stored, b"five"),
        other => panic!("expected Done, got {other:?}"),
    }
    // Another content under the same key carrying index 8: refused, index 8 not closed either.
    assert!(matches!(journal.begin(&refund(900_000_001, Some(8), 12)).unwrap(), Begin::Conflict(_)));
    handle(&journal, &indexed(9), b"nine");
    let status = journal.status().unwrap();
    assert_eq!(journal.missing(10).unwrap(), vec![(6, 8)], "{status:?}");
    assert_eq!(status.index_jumps, 2, "{status:?}");
    assert!(Journal::needs_attention(&status));
    let moved: Vec<(i64, Option<i64>)> = journal
        .index_jumps(false, 10)
        .unwrap()
        .iter()
        .filter(|j| j.kind == JumpKind::Moved)
        .map(|j| (j.index, j.previous_highest))
        .collect();
    assert_eq!(moved, vec![(8, Some(5)), (6, Some(5))]);
    // Delivered again at 6: counted in the same entry, not a new one.
    let _ = journal.begin(&refund(900_000_001, Some(6), 7)).unwrap();
    let jumps = journal.index_jumps(false, 10).unwrap();
    assert_eq!(jumps.iter().find(|j| j.index == 6).map(|j| j.count), Some(2));
}

/// A renumbering with indexes missing in the current numbering is refused, naming them (they
/// would vanish from every count with the old runs); given up on purpose, each missing range is
/// recorded as resolved with the renumbering's note, for audit.
fn a_renumbering_never_hides_missing_indexes(b: &dyn Backend) {
    let journal = open(&b.url("a_renumbering_never_hides_missing_indexes"));
    for i in [1, 2, 5, 6, 20] {
        handle(&journal, &indexed(i), b"ok");
    }
    assert_eq!(journal.status().unwrap().missing, 15);
    let error = journal.renumber(1, "the service restarted").unwrap_err();
    assert_eq!((error.kind, error.field.as_str()), (ErrorKind::InvalidArgument, "first_index"), "{error}");
    assert!(error.message.contains("3-4, 7-19"), "{error}");
    let status = journal.status().unwrap();
    assert_eq!((status.numbering, status.missing), (1, 15), "nothing changed");
    assert_eq!(journal.renumber_giving_up_gaps(1, "the service restarted").unwrap(), 2);
    let status = journal.status().unwrap();
    assert_eq!((status.numbering, status.missing), (2, 0));
    let resolutions = journal.resolutions(10).unwrap();
    let given_up: Vec<(i64, i64, i64)> = resolutions.iter().map(|r| (r.first, r.last, r.closed)).collect();
    assert_eq!(given_up, vec![(7, 19, 13), (3, 4, 2)]);
    assert!(
        resolutions.iter().all(|r| r.note == "given up by renumbering from 1: the service restarted"),
        "{resolutions:?}"
    );
    // Nothing missing: renumbering again needs nothing given up.
    handle(&journal, &indexed(1), b"ok");
    assert_eq!(journal.renumber(1, "once more").unwrap(), 3);
}

fn a_reused_index_is_reported_and_renumbering_keeps_the_records(b: &dyn Backend) {
    let journal = open(&b.url("a_reused_index_is_reported_and_renumbering"));
    for i in 1..=5 {
        finish_with(&journal, &refund(100 + i, Some(i), 7), "old");
    }
    finish_with(&journal, &indexed(6), "old unknown");
    // The service restarted its numbering: index 2 arrives with another event.
    finish_with(&journal, &refund(900, Some(2), 7), "new");
    finish_with(&journal, &refund(901, Some(3), 7), "new");
    let status = journal.status().unwrap();
    assert_eq!(status.index_jumps, 1, "{status:?}");
    let reused = &journal.index_jumps(false, 10).unwrap()[0];
    assert_eq!((reused.kind.as_str(), reused.index, reused.count, reused.last_index), ("reused", 2, 2, 3));
    assert_eq!(reused.other_key.as_deref(), Some("gameSessionBuyRefund:102"));
    // Renumbering: gap detection starts afresh; every record and reply stays.
    assert_eq!(journal.renumber(1, "the service restarted at 1").unwrap(), 2);
    let status = journal.status().unwrap();
    assert_eq!((status.numbering, status.index_jumps, status.missing, status.highest_index), (2, 0, 0, None));
    handle(&journal, &indexed(1), b"x");
    handle(&journal, &indexed(3), b"x");
    assert_eq!(journal.missing(10).unwrap(), vec![(2, 2)]);
    // An unknown event of the new numbering never meets the old one's record at index 6.
    finish_with(&journal, &indexed(6), "new unknown");
    assert_eq!(done_reply(&journal, &refund(101, Some(1), 7)), b"old");
    assert_eq!(journal.lookup(103).unwrap().len(), 1);
}

fn recovery_works_through_every_gap(b: &dyn Backend) {
    let journal = open(&b.url("recovery_works_through_every_gap"));
    handle(&journal, &indexed(1), b"ok");
    handle(&journal, &indexed(8), b"ok");
    assert_eq!(journal.recovery_plan(3).unwrap(), vec![2, 3, 4]);
    for i in [2, 3, 4] {
        journal.note_fetch(i, FetchOutcome::Failed).unwrap();
        thread::sleep(Duration::from_millis(3));
    }
    // Untried ones first, then the least recently tried.
    assert_eq!(journal.recovery_plan(3).unwrap(), vec![5, 6, 7]);
    assert_eq!(journal.recovery_plan(5).unwrap(), vec![5, 6, 7, 2, 3]);
    // 404 for not_found_limit runs: unrecoverable, reported, no longer fetched.
    for _ in 0..3 {
        journal.note_fetch(5, FetchOutcome::NotFound).unwrap();
    }
    assert_eq!(journal.unrecoverable(10).unwrap(), vec![5]);
    assert_eq!(journal.status().unwrap().unrecoverable, 1);
    assert!(!journal.recovery_plan(10).unwrap().contains(&5));
    // Settled: gone from the bookkeeping; resolved by hand: no longer unrecoverable.
    journal.resolve(5, 5, "the service confirms 5 does not exist").unwrap();
    assert_eq!(journal.status().unwrap().unrecoverable, 0);
}

fn one_holder_of_a_lock(b: &dyn Backend) {
    let journal = open(&b.url("one_holder_of_a_lock"));
    journal.take_lock("recover", "run A", Duration::from_secs(60)).unwrap();
    journal.take_lock("recover", "run A", Duration::from_secs(60)).unwrap();
    let busy = journal.take_lock("recover", "run B", Duration::from_secs(60)).unwrap_err();
    assert_eq!(busy.kind, ErrorKind::Busy);
    assert!(busy.message.contains("run A") && busy.message.contains(" since "), "{busy}");
    journal.release_lock("recover", "run B").unwrap();
    assert!(journal.take_lock("recover", "run B", Duration::from_secs(60)).is_err(), "only the holder releases");
    journal.release_lock("recover", "run A").unwrap();
    journal.take_lock("recover", "run B", Duration::from_millis(1)).unwrap();
    thread::sleep(Duration::from_millis(20));
    journal.take_lock("recover", "run C", Duration::from_secs(60)).unwrap(); // B's lease ran out
}

/// A recovery lock held by a process of this host that is gone (a run killed with SIGKILL)
/// is taken over at once, whatever its lease; one of a live process, or of another host, waits
/// out its lease.
fn a_lock_of_a_gone_process_is_taken_at_once(b: &dyn Backend) {
    use slotpartner::journal::{RECOVERY_LOCK, RecoveryLock, holder_text};
    let journal = std::sync::Arc::new(open(&b.url("a_lock_of_a_gone_process_is_taken_at_once")));
    let mut child = std::process::Command::new("sleep").arg("60").spawn().expect("sleep");
    let holder = holder_text("slotpartner recover", child.id()).unwrap();
    journal.take_lock(RECOVERY_LOCK, &holder, Duration::from_secs(3600)).unwrap();
    let busy = RecoveryLock::take(std::sync::Arc::clone(&journal), "second run", Duration::from_secs(60)).unwrap_err();
    assert_eq!(busy.kind, ErrorKind::Busy, "{busy}");
    assert!(busy.message.contains(&format!("pid {}", child.id())), "{busy}");
    let _ = child.kill();
    let _ = child.wait();
    let taken = RecoveryLock::take(std::sync::Arc::clone(&journal), "second run", Duration::from_secs(60))
        .expect("the holder's process is gone");
    drop(taken);
    // The same dead process named on another host: its lease alone decides.
    let elsewhere = holder.replace(&format!(" on {} (", slotpartner::journal::host_name()), " on elsewhere.example (");
    journal.take_lock(RECOVERY_LOCK, &elsewhere, Duration::from_secs(3600)).unwrap();
    let busy = RecoveryLock::take(std::sync::Arc::clone(&journal), "third run", Duration::from_secs(60)).unwrap_err();
    assert_eq!(busy.kind, ErrorKind::Busy, "{busy}");
}

fn counts_at_the_ends_of_the_index_range(b: &dyn Backend) {
    let options = JournalOptions { max_index_jump: i64::MAX, ..JournalOptions::default() };
    let journal = open_with(&b.url("counts_at_the_ends_of_the_index_range"), options);
    handle(&journal, &indexed(0), b"ok");
    handle(&journal, &indexed(i64::MAX), b"ok");
    let status = journal.status().unwrap();
    assert_eq!((status.first_index, status.highest_index), (Some(0), Some(i64::MAX)));
    assert_eq!(status.missing, (i64::MAX - 1) as u64);
    assert_eq!(journal.missing(3).unwrap(), vec![(1, i64::MAX - 1)]);
    assert_eq!(journal.recovery_plan(3).unwrap(), vec![1, 2, 3]);
}

/// A journal written by the previous release (schema version 1, `tests/fixtures/journal/v1.sqlite`:
/// refunds at 1, 2, 4, the unknown event `bonusGranted` at 5 under the old key `bonusGranted:5`,
/// a payout abandoned at 6, a refusal at 8) opens, migrates in place and keeps every answer.
#[test]
fn sqlite_journal_of_the_previous_release_migrates_in_place() {
    let dir = TempDir::new("slotpartner-journal-v1");
    let path = dir.0.join("v1.sqlite");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/journal/v1.sqlite"), &path).unwrap();
    let url = format!("sqlite:{}", path.display());
    let journal = open(&url);
    let db = rusqlite::Connection::open(&path).unwrap();
    let version: i64 =
        db.query_row("SELECT value FROM sp_journal_meta WHERE key = 'schema_version'", [], |r| r.get(0)).unwrap();
    assert_eq!(version, slotpartner::journal::SCHEMA_VERSION);
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.missing, status.unfinished, status.refused), (4, 2, 1, 1), "{status:?}");
    assert_eq!((status.numbering, status.index_jumps, status.open_conflicts), (1, 0, 0));
    assert_eq!(journal.missing(10).unwrap(), vec![(3, 3), (7, 7)]);
    assert_eq!(done_reply(&journal, &indexed(5)), b"{\"ok\":true}");
    let repeat = delivery(
        r#"{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-900002","playerIdentifier":"player-1","transactionId":900002,"buyTransactionId":1900002,"gameSessionId":5,"partnerGameRequestIdentifier":"req-900002","gameId":7,"isMobile":false,"index":2}"#,
    );
    assert_eq!(done_reply(&journal, &repeat), br#"{"refund":{"success":true,"errorMessage":"","tid":900002}}"#);
    let payout = delivery(
        r#"{"event":"jackpotPayout","jackpotIdentifier":"j","playerIdentifier":"p","currencyISO4217":"EUR","moneyWon":100,"coinsWon":0,"isMoney":true,"epochReleasedMillis":1,"isPrimary":true,"transactionId":900006,"buyTransactionId":4,"partnerGameRequestIdentifier":"r","gameSessionId":3,"gameId":2,"index":6}"#,
    );
    let claim = new_claim(&journal, &payout);
    assert_eq!((claim.attempt(), claim.differing().len()), (2, 0));
    // Opening again finds the current version and changes nothing.
    drop(journal);
    assert_eq!(open(&url).status().unwrap().handled, 4);
}

/// The same migration on PostgreSQL: a journal taken back to version 1's tables and keys opens
/// as the current version with its records.
#[test]
fn postgres_journal_of_version_1_migrates_in_place() {
    let Some(cluster) = Cluster::start("PostgreSQL migration") else { return };
    let url = cluster.schema_url("v1");
    {
        let journal = open(&url);
        handle(&journal, &indexed(5), b"kept");
        handle(&journal, &refund(900001, Some(1), 7), b"refund kept");
    }
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client
        .batch_execute(
            "DROP TABLE sp_journal_jumps, sp_journal_resolved, sp_journal_conflicts, sp_journal_fetch, sp_journal_locks, sp_journal_runs_archive;
             DROP INDEX sp_journal_delivery_index; DROP INDEX sp_journal_delivery_open;
             ALTER TABLE sp_journal_delivery DROP COLUMN lease_boot;
             DELETE FROM sp_journal_meta WHERE key = 'numbering';
             UPDATE sp_journal_meta SET value = 1 WHERE key = 'schema_version';
             UPDATE sp_journal_delivery SET key = 'bonusGranted:5' WHERE key = 'event#5#bonusGranted';",
        )
        .unwrap();
    let journal = open(&url);
    let version: i64 =
        client.query_one("SELECT value FROM sp_journal_meta WHERE key = 'schema_version'", &[]).unwrap().get(0);
    assert_eq!(version, slotpartner::journal::SCHEMA_VERSION);
    assert_eq!(done_reply(&journal, &indexed(5)), b"kept");
    assert_eq!(done_reply(&journal, &refund(900001, Some(1), 7)), b"refund kept");
    journal.resolve(2, 4, "migrated journals take resolutions").unwrap();
    assert_eq!(journal.status().unwrap().numbering, 1);
}

/// The journal's files are the owner's alone (0600 under umask 022): they hold player
/// identifiers and replies.
#[test]
fn sqlite_files_are_created_for_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("slotpartner-journal-modes");
    let path = dir.0.join("journal.db");
    let journal = open(&format!("sqlite:{}", path.display()));
    handle(&journal, &refund(1, Some(1), 7), b"ok");
    for file in ["journal.db", "journal.db-wal", "journal.db-shm"] {
        let mode = std::fs::metadata(dir.0.join(file)).unwrap_or_else(|e| panic!("{file}: {e}")).permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{file} has mode {:o}", mode & 0o777);
    }
    let db = rusqlite::Connection::open(&path).unwrap();
    let id: i64 = db.query_row("PRAGMA application_id", [], |r| r.get(0)).unwrap();
    assert_eq!(id, 0x5350_4A31);
}

/// Through a dangling symbolic link the journal's file is still created for the owner only.
#[test]
fn sqlite_file_behind_a_dangling_link_is_created_for_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("slotpartner-journal-link");
    let target = dir.0.join("elsewhere.db");
    let link = dir.0.join("journal.db");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let journal = open(&format!("sqlite:{}", link.display()));
    handle(&journal, &refund(1, Some(1), 7), b"ok");
    for file in ["elsewhere.db", "elsewhere.db-wal", "elsewhere.db-shm"] {
        let mode = std::fs::metadata(dir.0.join(file)).unwrap_or_else(|e| panic!("{file}: {e}")).permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{file} has mode {:o}", mode & 0o777);
    }
}

/// Another program's database at the journal's path is refused, naming the path, and left as
/// it was (not switched to WAL, no tables added); an empty file becomes a journal.
#[test]
fn sqlite_database_of_another_program_is_refused() {
    let dir = TempDir::new("slotpartner-journal-foreign");
    for (name, setup) in [
        ("plain.db", "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)"),
        ("marked.db", "PRAGMA application_id = 1234"),
    ] {
        let path = dir.0.join(name);
        let db = rusqlite::Connection::open(&path).unwrap();
        db.execute_batch(setup).unwrap();
        drop(db);
        let before = std::fs::read(&path).unwrap();
        let url = format!("sqlite:{}", path.display());
        let error = Journal::open(&url, &JournalOptions::default()).unwrap_err();
        assert_eq!((error.kind, error.field.as_str()), (ErrorKind::InvalidArgument, "journal_url"), "{error}");
        assert!(error.message.contains(&url) && error.message.contains("another program's database"), "{error}");
        assert_eq!(std::fs::read(&path).unwrap(), before, "{name} was changed");
        assert!(!dir.0.join(format!("{name}-wal")).exists());
    }
    let empty = dir.0.join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    open(&format!("sqlite:{}", empty.display())).status().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Leases under a stepped wall clock (an NTP step, a resumed virtual machine): on SQLite they go
// by a clock no step moves, on PostgreSQL by the server's; a worker whose wall clock is off
// neither takes over a live claim nor keeps a dead one beyond its lease.

/// How far off the wall clock is (ms) for the worker that claims, and for the one that comes next.
const CLOCK_STEPS: [(i64, i64); 4] = [(0, 45_000), (0, -45_000), (45_000, 0), (-45_000, 0)];

/// Runs `work` on a thread of its own whose wall clock, as the journal reads it, is `offset_ms`
/// off: a worker on a host whose clock was stepped.
fn on_a_clock<T: Send>(offset_ms: i64, work: impl FnOnce() -> T + Send) -> T {
    thread::scope(|s| {
        s.spawn(move || {
            slotpartner::journal::shift_wall_clock_for_tests(offset_ms);
            work()
        })
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

const CLOCK_SUITE: &[(&str, Behaviour)] = &[
    ("a_stepped_clock_takes_no_live_claim", a_stepped_clock_takes_no_live_claim),
    ("a_stepped_clock_keeps_no_dead_claim", a_stepped_clock_keeps_no_dead_claim),
    ("a_stepped_clock_neither_steals_nor_keeps_a_lock", a_stepped_clock_neither_steals_nor_keeps_a_lock),
];

fn run_clock_suite(backend: &dyn Backend) {
    let mut failed = Vec::new();
    for (name, behaviour) in CLOCK_SUITE {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| behaviour(backend)));
        println!("{} {name}: {}", backend.name(), if result.is_ok() { "ok" } else { "FAILED" });
        if result.is_err() {
            failed.push(*name);
        }
    }
    assert!(failed.is_empty(), "{} failed: {failed:?}", backend.name());
}

/// On SQLite the wall clock may be stepped under the workers of a host: leases do not see it.
#[test]
fn sqlite_leases_ignore_wall_clock_steps() {
    run_clock_suite(&Sqlite { dir: TempDir::new("slotpartner-journal-clock") });
}

/// On PostgreSQL a worker's own clock plays no part: the server's judges every lease.
#[test]
fn postgres_leases_ignore_the_client_clock() {
    let Some(cluster) = Cluster::start("PostgreSQL leases") else { return };
    run_clock_suite(&Postgres { cluster });
}

/// A claim with a 30 s lease stays its worker's when the next delivery comes from a worker whose
/// clock is 45 s ahead or behind (or when the claimer's was): busy, not unfinished, its lease
/// shown 30 s from now, and its worker finishes it.
fn a_stepped_clock_takes_no_live_claim(b: &dyn Backend) {
    let options = JournalOptions { busy_wait: Duration::ZERO, ..JournalOptions::default() };
    assert_eq!(options.lease, Duration::from_secs(30));
    let journal = open_with(&b.url("stepped_clock_live"), options);
    for (i, (holder, other)) in CLOCK_STEPS.into_iter().enumerate() {
        let index = i as i64 + 1;
        let event = refund(4500 + index, Some(index), 7);
        let claim = on_a_clock(holder, || new_claim(&journal, &event));
        let (begun, unfinished, status) = on_a_clock(other, || {
            (journal.begin(&event).unwrap(), journal.unfinished(10).unwrap(), journal.status().unwrap())
        });
        let clocks = format!("claimed on a clock {holder} ms off, delivered again on one {other} ms off");
        assert!(matches!(begun, Begin::Busy), "a live claim was taken over ({clocks}): {begun:?}");
        assert!(unfinished.is_empty() && status.unfinished == 0, "a live claim counted unfinished ({clocks})");
        assert_eq!(status.in_progress, 1, "{clocks}");
        let record = journal.lookup(4500 + index).unwrap().remove(0);
        let left = record.lease_until_ms.expect("a claimed record has a lease") - cluster::now_ms();
        assert!((25_000..=31_000).contains(&left), "the lease ends in {left} ms, not about 30 s ({clocks})");
        on_a_clock(holder, || journal.finish(&claim, b"first")).unwrap_or_else(|e| panic!("{clocks}: {e}"));
        assert_eq!(on_a_clock(other, || done_reply(&journal, &event)), b"first");
    }
}

/// A claim whose worker died is taken over as soon as its lease ends, whatever the clocks of the
/// worker that claimed it and of the next delivery's say; not before.
fn a_stepped_clock_keeps_no_dead_claim(b: &dyn Backend) {
    let lease = Duration::from_millis(600);
    let options = JournalOptions { lease, busy_wait: Duration::ZERO, ..JournalOptions::default() };
    let journal = open_with(&b.url("stepped_clock_dead"), options);
    for (i, (holder, other)) in CLOCK_STEPS.into_iter().enumerate() {
        let index = i as i64 + 1;
        let event = refund(4600 + index, Some(index), 7);
        let clocks = format!("claimed on a clock {holder} ms off, delivered again on one {other} ms off");
        let claimed = Instant::now();
        let dead = on_a_clock(holder, || new_claim(&journal, &event));
        let early = on_a_clock(other, || journal.begin(&event).unwrap());
        if claimed.elapsed() < lease {
            assert!(matches!(early, Begin::Busy), "taken over before its lease ended ({clocks}): {early:?}");
        }
        thread::sleep(lease.saturating_sub(claimed.elapsed()) + Duration::from_millis(100));
        let (unfinished, taken) =
            on_a_clock(other, || (journal.unfinished(10).unwrap(), journal.begin(&event).unwrap()));
        assert_eq!(unfinished, vec![index], "the dead claim is unfinished ({clocks})");
        let taken = match taken {
            Begin::New(claim) => claim,
            other => panic!("a dead claim was kept beyond its lease ({clocks}): {other:?}"),
        };
        assert_eq!(taken.attempt(), 2, "{clocks}");
        let lost = on_a_clock(holder, || journal.finish(&dead, b"late")).unwrap_err();
        assert_eq!(lost.kind, ErrorKind::ClaimLost, "{clocks}: {lost}");
        on_a_clock(other, || journal.finish(&taken, b"taken over")).unwrap();
        assert_eq!(done_reply(&journal, &event), b"taken over");
    }
}

/// The recovery lock's lease goes by the same clock as the claims'.
fn a_stepped_clock_neither_steals_nor_keeps_a_lock(b: &dyn Backend) {
    let journal = open(&b.url("stepped_clock_lock"));
    for (holder, other) in CLOCK_STEPS {
        let clocks = format!("taken on a clock {holder} ms off, wanted on one {other} ms off");
        on_a_clock(holder, || journal.take_lock("recover", "run A", Duration::from_secs(60))).unwrap();
        let busy = on_a_clock(other, || journal.take_lock("recover", "run B", Duration::from_secs(60)));
        let busy = busy.expect_err(&format!("a live lock was taken ({clocks})"));
        assert_eq!(busy.kind, ErrorKind::Busy, "{clocks}: {busy}");
        // Run A renews for a short lease, then dies: run B gets the lock when that lease ends.
        on_a_clock(holder, || journal.take_lock("recover", "run A", Duration::from_millis(300))).unwrap();
        thread::sleep(Duration::from_millis(400));
        on_a_clock(other, || journal.take_lock("recover", "run B", Duration::from_secs(60)))
            .unwrap_or_else(|e| panic!("a dead lock was kept beyond its lease ({clocks}): {e}"));
        journal.release_lock("recover", "run B").unwrap();
    }
}

/// Leases of an earlier boot of the host are over (their workers died with it), and so are those
/// of claims and locks whose rows carry no boot (written before leases went by the boot's clock).
#[test]
fn sqlite_leases_of_another_boot_are_over() {
    let dir = TempDir::new("slotpartner-journal-boot");
    let url = format!("sqlite:{}", dir.0.join("boot.db").display());
    let journal = open_with(&url, JournalOptions { busy_wait: Duration::ZERO, ..JournalOptions::default() });
    let (rebooted, unbooted) = (refund(4701, Some(1), 7), refund(4702, Some(2), 7));
    let _died = new_claim(&journal, &rebooted);
    let _died_too = new_claim(&journal, &unbooted);
    journal.take_lock("recover", "run A", Duration::from_secs(3600)).unwrap();
    assert!(matches!(journal.begin(&rebooted).unwrap(), Begin::Busy));
    assert!(journal.take_lock("recover", "run B", Duration::from_secs(60)).is_err());
    assert!(journal.unfinished(10).unwrap().is_empty());
    let db = rusqlite::Connection::open(dir.0.join("boot.db")).unwrap();
    let boot: String = db
        .query_row("SELECT lease_boot FROM sp_journal_delivery WHERE transaction_id = 4701", [], |r| r.get(0))
        .unwrap();
    assert_eq!(boot, std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap().trim());
    db.execute_batch(
        "UPDATE sp_journal_delivery SET lease_boot = '00000000-0000-4000-8000-000000000000' WHERE transaction_id = 4701;
         UPDATE sp_journal_delivery SET lease_boot = NULL WHERE transaction_id = 4702;
         UPDATE sp_journal_locks SET lease_boot = '00000000-0000-4000-8000-000000000000';",
    )
    .unwrap();
    assert_eq!(journal.unfinished(10).unwrap(), vec![1, 2]);
    assert_eq!(journal.status().unwrap().unfinished, 2);
    let shown = journal.lookup(4701).unwrap().remove(0).lease_until_ms.unwrap();
    assert!(shown <= cluster::now_ms(), "a lease of another boot is shown as over");
    assert_eq!(new_claim(&journal, &rebooted).attempt(), 2);
    assert_eq!(new_claim(&journal, &unbooted).attempt(), 2);
    journal.take_lock("recover", "run B", Duration::from_secs(60)).unwrap();
}

/// A claim written by schema version 1 (a wall-clock lease, no boot) counts as expired once the
/// journal is migrated, however far in the future its lease was set.
#[test]
fn sqlite_claims_of_version_1_count_as_expired() {
    let dir = TempDir::new("slotpartner-journal-v1-claim");
    let path = dir.0.join("v1.sqlite");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/journal/v1.sqlite"), &path).unwrap();
    let event = refund(4801, Some(9), 7);
    let now = cluster::now_ms();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "INSERT INTO sp_journal_delivery (key, name, transaction_id, first_index, content, state, token, attempts, created_ms, updated_ms, lease_until_ms) VALUES (?1, ?2, ?3, ?4, ?5, 'claimed', zeroblob(16), 1, ?6, ?6, ?7)",
            rusqlite::params![event.key(), event.name(), 4801, 9, event.fingerprint(), now, now + 3_600_000],
        )
        .unwrap();
    let journal = open_with(
        &format!("sqlite:{}", path.display()),
        JournalOptions { busy_wait: Duration::ZERO, ..JournalOptions::default() },
    );
    assert!(journal.unfinished(10).unwrap().contains(&9));
    let claim = new_claim(&journal, &event);
    assert_eq!((claim.attempt(), claim.differing().len()), (2, 0));
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL restarted under the journal

/// After `pg_ctl restart`, every connection the journal keeps is dead: the next call on each
/// must be retried on a fresh connection, not fail. Four threads first leave several
/// connections in the pool; after the restart, deliveries, a replay, `status` and `lookup` all
/// succeed.
#[test]
fn postgres_restart_between_two_deliveries() {
    let Some(cluster) = Cluster::start("PostgreSQL restart between deliveries") else { return };
    let url = cluster.schema_url("restart_between");
    let journal = open(&url);
    let barrier = Barrier::new(4);
    thread::scope(|s| {
        for t in 0..4 {
            let (barrier, url) = (&barrier, &url);
            s.spawn(move || {
                let journal = open(url);
                barrier.wait();
                let claim = new_claim(&journal, &refund(t, Some(t), 7));
                barrier.wait(); // four claims at once: four connections, all pooled after
                journal.finish(&claim, format!("first {t}").as_bytes()).unwrap();
            });
        }
    });
    cluster.restart();
    let second = refund(10, Some(10), 7);
    let claim = new_claim(&journal, &second);
    assert_eq!(claim.attempt(), 1);
    journal.finish(&claim, b"second").expect("finish after the restart");
    for t in 0..4 {
        assert_eq!(done_reply(&journal, &refund(t, Some(t), 7)), format!("first {t}").as_bytes());
    }
    for n in 11..15 {
        handle(&journal, &refund(n, Some(n), 7), b"later");
    }
    assert_eq!(done_reply(&journal, &second), b"second");
    let status = journal.status().expect("status after the restart");
    assert_eq!((status.handled, status.replayed, status.in_progress), (9, 5, 0));
    assert_eq!(journal.lookup(10).unwrap()[0].attempts, 1);
}

/// One journal call of the burst: who made it, when, and what came of it.
#[derive(Debug)]
struct Call {
    n: i64,
    step: &'static str,
    started_ms: u128,
    ended_ms: u128,
    /// `Ok(attempt)` for a `begin` (0 unless New), `Ok(0)` for a `finish`; the error's kind
    /// and message otherwise.
    outcome: std::result::Result<i64, (ErrorKind, String)>,
}

/// A burst of 200 deliveries over 6 s through four workers: four threads of this process, each
/// with a journal handle of its own, opened on a URL of its own (its own `application_name`),
/// so that each keeps connections of its own, as four worker processes would. Each worker
/// gets its deliveries in waves (10 deliveries 30 ms apart, then 900 ms of nothing; the
/// workers' waves 300 ms apart), the partner's logic taking 0 to 40 ms each; the server is
/// restarted (`pg_ctl restart -m fast`) once 80 are handled, so that some workers are busy
/// while it restarts and others idle with connections the restart killed. A call may fail only
/// if it was made while the server restarted, and only with a `Journal` error; every delivery
/// reported finished has its reply stored; attempt 1 of a key is given out once. Then the
/// service delivers the failed ones again: they are taken over once their lease ends and
/// finished, and the counters agree with the rows.
#[test]
fn postgres_restart_in_the_middle_of_a_burst() {
    let Some(cluster) = Cluster::start("PostgreSQL restart in a burst") else { return };
    let url = cluster.schema_url("restart_burst");
    let lease = Duration::from_secs(3);
    let options = || JournalOptions { lease, busy_wait: Duration::ZERO, ..JournalOptions::default() };
    open_with(&url, options());
    let epoch = Instant::now();
    let handled = std::sync::atomic::AtomicUsize::new(0);
    let reply_of = |n: i64| format!("{{\"reply\":{n}}}").into_bytes();
    let (calls, window) = thread::scope(|s| {
        let workers: Vec<_> = (0..4i64)
            .map(|t| {
                let (url, handled, options) = (&url, &handled, &options);
                s.spawn(move || {
                    let journal = open_with(&format!("{url}&application_name=burst-{t}"), options());
                    let mut calls = Vec::new();
                    for (i, n) in (1..=200).filter(|n| n % 4 == t).enumerate() {
                        // Deliveries come when the service sends them, whatever came of the last:
                        // worker t's i-th at wave (i / 10) × 1200 + t × 300 + (i % 10) × 30 ms.
                        let (wave, within) = (i as u64 / 10, i as u64 % 10);
                        let due = Duration::from_millis(wave * 1200 + t as u64 * 300 + within * 30);
                        thread::sleep(due.saturating_sub(epoch.elapsed()));
                        let delivery = refund(n, Some(n), 7);
                        let started_ms = epoch.elapsed().as_millis();
                        let begun = journal.begin(&delivery);
                        let ended_ms = epoch.elapsed().as_millis();
                        let outcome = match &begun {
                            Ok(Begin::New(claim)) => Ok(claim.attempt()),
                            Ok(_) => Ok(0),
                            Err(e) => Err((e.kind, e.message.clone())),
                        };
                        let claim = match begun {
                            Ok(Begin::New(claim)) => Some(claim),
                            _ => None,
                        };
                        calls.push(Call { n, step: "begin", started_ms, ended_ms, outcome });
                        let Some(claim) = claim else { continue };
                        thread::sleep(Duration::from_millis((n as u64 * 37) % 40)); // the partner's logic
                        let started_ms = epoch.elapsed().as_millis();
                        let finished = journal.finish(&claim, &reply_of(n));
                        let ended_ms = epoch.elapsed().as_millis();
                        let outcome = finished.map(|()| 0).map_err(|e| (e.kind, e.message));
                        calls.push(Call { n, step: "finish", started_ms, ended_ms, outcome });
                        handled.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    calls
                })
            })
            .collect();
        while handled.load(std::sync::atomic::Ordering::Relaxed) < 80 {
            thread::sleep(Duration::from_millis(5));
        }
        let from = epoch.elapsed().as_millis();
        cluster.restart();
        let window = (from, epoch.elapsed().as_millis());
        let calls: Vec<Call> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        (calls, window)
    });
    let in_window = |c: &Call| c.started_ms <= window.1 && c.ended_ms >= window.0;
    let failed: Vec<&Call> = calls.iter().filter(|c| c.outcome.is_err()).collect();
    let made_in_window = calls.iter().filter(|c| in_window(c)).count();
    println!(
        "restart took {} ms; {} calls, {made_in_window} made while it restarted; {} failed ({} begin, {} finish)",
        window.1 - window.0,
        calls.len(),
        failed.len(),
        failed.iter().filter(|c| c.step == "begin").count(),
        failed.iter().filter(|c| c.step == "finish").count(),
    );
    for c in &failed {
        println!("  failed: {} {} at {}..{} ms: {:?}", c.step, c.n, c.started_ms, c.ended_ms, c.outcome);
    }
    let outside: Vec<&&Call> = failed.iter().filter(|c| !in_window(c)).collect();
    assert!(outside.is_empty(), "calls failed that the restart did not have to fail (window {window:?}): {outside:#?}");
    for c in &failed {
        let (kind, message) = c.outcome.as_ref().unwrap_err();
        assert_eq!(*kind, ErrorKind::Journal, "{c:?}");
        assert!(message.contains("restart_burst") || message.contains("127.0.0.1"), "{message}");
    }
    let news = |n: i64| calls.iter().filter(|c| c.n == n && c.step == "begin" && c.outcome == Ok(1)).count();
    for n in 1..=200 {
        assert!(news(n) <= 1, "attempt 1 of {n} given out {} times", news(n));
        let begin_failed = calls.iter().any(|c| c.n == n && c.step == "begin" && c.outcome.is_err());
        assert_eq!(news(n) == 1, !begin_failed, "{n}: a begin answers New attempt 1 or fails");
    }
    // The rows: every finish reported is stored; no key was claimed twice.
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let rows = client.query("SELECT transaction_id, state, attempts, reply FROM sp_journal_delivery", &[]).unwrap();
    let row = |n: i64| rows.iter().find(|r| r.get::<_, Option<i64>>(0) == Some(n));
    for c in calls.iter().filter(|c| c.step == "finish") {
        let stored = row(c.n).map(|r| (r.get::<_, String>(1), r.get::<_, i64>(2), r.get::<_, Option<Vec<u8>>>(3)));
        if c.outcome.is_ok() {
            assert_eq!(stored, Some(("done".to_owned(), 1, Some(reply_of(c.n)))), "{c:?}");
        }
    }
    for r in &rows {
        assert_eq!(r.get::<_, i64>(2), 1, "{:?} was claimed more than once", r.get::<_, Option<i64>>(0));
    }
    // The service delivers again what was not answered: each is handled once more and only once.
    let journal = open_with(&url, JournalOptions { busy_wait: lease * 2, ..options() });
    let unanswered: Vec<i64> = (1..=200).filter(|n| row(*n).is_none_or(|r| r.get::<_, String>(1) != "done")).collect();
    for &n in &unanswered {
        let claim = new_claim(&journal, &refund(n, Some(n), 7));
        let expected = if row(n).is_some() { 2 } else { 1 };
        assert_eq!(claim.attempt(), expected, "{n}");
        journal.finish(&claim, &reply_of(n)).unwrap();
    }
    for n in 1..=200 {
        assert_eq!(done_reply(&journal, &refund(n, Some(n), 7)), reply_of(n), "{n}");
    }
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.in_progress, status.missing), (200, 0, 0));
    println!("{} delivered again after the burst", unanswered.len());
}

// ---------------------------------------------------------------------------------------------
// What an outside review of the above reproduced

fn traffic_that_reaches_a_jump_shows_the_gap_below(b: &dyn Backend) {
    let options = JournalOptions { max_index_jump: 10, ..JournalOptions::default() };
    let journal = open_with(&b.url("traffic_that_reaches_a_jump"), options);
    for i in 1..=5 {
        handle(&journal, &indexed(i), b"ok");
    }
    handle(&journal, &indexed(100), b"stray");
    let id = journal.index_jumps(false, 1).unwrap()[0].id;
    journal.accept_jump(id, "looked real").unwrap();
    for i in (6..=99).filter(|&i| i != 50) {
        handle(&journal, &indexed(i), b"ok");
    }
    assert_eq!(journal.missing(10).unwrap(), vec![(50, 50)]);
    let status = journal.status().unwrap();
    assert_eq!((status.missing, status.watermark), (1, Some(49)));
    assert!(Journal::needs_attention(&status));
    assert_eq!(journal.recovery_plan(10).unwrap(), vec![50]);
}

fn bonus(index: i64, who: &str, amount: i64) -> Delivery {
    delivery(&format!(r#"{{"event":"bonusGranted","index":{index},"player":"{who}","amount":{amount}}}"#))
}

fn a_restarted_numbering_never_replays_another_events_reply(b: &dyn Backend) {
    let journal = open(&b.url("a_restarted_numbering_never_replays"));
    for i in 1..=3 {
        finish_with(&journal, &bonus(i, "alice", 10), "credited alice 10");
    }
    // A repeat with other formatting is the same event.
    let repeat = delivery(r#"{ "amount" : 10, "player":"alice", "event":"bonusGranted", "index":1 }"#);
    assert_eq!(done_reply(&journal, &repeat), b"credited alice 10");
    // The service restarted its numbering: bob's bonus at index 1 is not alice's.
    match journal.begin(&bonus(1, "bob", 5000)).unwrap() {
        Begin::Conflict(error) => assert!(error.message.contains(r#"player: first "alice", now "bob""#), "{error}"),
        other => panic!("bob's bonus must not get alice's reply: {other:?}"),
    }
    let status = journal.status().unwrap();
    assert!(status.index_jumps >= 1 && status.open_conflicts == 1, "{status:?}");
    assert!(Journal::needs_attention(&status));
    let reused = journal.index_jumps(false, 10).unwrap();
    assert!(reused.iter().any(|j| j.kind.as_str() == "reused" && j.index == 1), "{reused:?}");
}

fn a_handed_out_conflict_keeps_the_first_and_answers_both(b: &dyn Backend) {
    let journal = open(&b.url("a_handed_out_conflict_keeps_the_first"));
    let body = |player: &str| {
        delivery(&format!(
            r#"{{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-1","playerIdentifier":"{player}","transactionId":700,"buyTransactionId":1700,"gameSessionId":5,"partnerGameRequestIdentifier":"req-700","gameId":7,"isMobile":false,"index":1}}"#
        ))
    };
    let (alice, mallory, eve) = (body("alice"), body("mallory"), body("eve"));
    let claim = new_claim(&journal, &alice); // the ledger credits alice, then the partner fails
    journal.abandon(&claim).unwrap();
    let claim = new_claim(&journal, &mallory);
    assert_eq!((claim.attempt(), claim.differing().len()), (2, 1));
    journal.finish(&claim, b"already credited").unwrap();
    // Both contents get the one stored reply; the first content stays the journal's.
    assert_eq!(done_reply(&journal, &alice), b"already credited");
    assert_eq!(done_reply(&journal, &mallory), b"already credited");
    let record = &journal.lookup(700).unwrap()[0];
    assert_eq!(record.state, RecordState::Done);
    // A third content is refused.
    assert!(matches!(journal.begin(&eve).unwrap(), Begin::Conflict(_)));
    let conflicts = journal.conflicts(false, 10).unwrap();
    let outcomes: Vec<&str> = conflicts.iter().map(|c| c.outcome.as_str()).collect();
    assert_eq!(outcomes, ["refused", "handed_out"]);
    assert!(conflicts[1].first_content.contains("alice") && conflicts[1].now_content.contains("mallory"));
}

fn tried_gaps_in_front_never_starve_the_plan(b: &dyn Backend) {
    let journal = open(&b.url("tried_gaps_in_front_never_starve"));
    for i in [1, 3, 5, 7, 9, 11, 20] {
        handle(&journal, &indexed(i), b"ok");
    }
    for i in [2, 4, 6, 8, 10] {
        for _ in 0..3 {
            journal.note_fetch(i, FetchOutcome::NotFound).unwrap();
        }
    }
    assert_eq!(journal.recovery_plan(5).unwrap(), vec![12, 13, 14, 15, 16]);
    assert_eq!(journal.unrecoverable(10).unwrap(), vec![2, 4, 6, 8, 10]);
    // Failing (not 404) ones stay in the rotation, behind the untried.
    for i in 12..=19 {
        journal.note_fetch(i, FetchOutcome::Failed).unwrap();
    }
    assert_eq!(journal.recovery_plan(3).unwrap().len(), 3);
}

fn an_unfinished_delivery_can_be_closed_by_hand(b: &dyn Backend) {
    let journal = open(&b.url("an_unfinished_delivery_can_be_closed"));
    handle(&journal, &indexed(4), b"ok");
    let claim = new_claim(&journal, &indexed(5));
    journal.abandon(&claim).unwrap();
    handle(&journal, &indexed(6), b"ok");
    assert_eq!(journal.recovery_plan(10).unwrap(), vec![5]);
    for _ in 0..3 {
        journal.note_fetch(5, FetchOutcome::NotFound).unwrap();
    }
    // 404 for not_found_limit runs: no longer fetched, reported, still unfinished.
    assert_eq!(journal.recovery_plan(10).unwrap(), Vec::<i64>::new());
    assert_eq!(journal.unrecoverable(10).unwrap(), vec![5]);
    assert_eq!(journal.status().unwrap().unfinished, 1);
    assert_eq!(journal.close_unfinished(6, "x").unwrap_err().field, "index");
    assert_eq!(journal.close_unfinished(5, "").unwrap_err().field, "note");
    assert_eq!(journal.close_unfinished(5, "the service lost it; paid by hand").unwrap(), 1);
    let status = journal.status().unwrap();
    assert_eq!((status.unfinished, status.unrecoverable), (0, 0));
    assert!(!Journal::needs_attention(&status));
    // Should it ever come again, it runs as the next attempt.
    assert_eq!(new_claim(&journal, &indexed(5)).attempt(), 2);
}

fn an_unfinished_delivery_of_an_earlier_numbering_is_not_fetched(b: &dyn Backend) {
    let options = JournalOptions { lease: Duration::from_millis(300), ..JournalOptions::default() };
    let journal = open_with(&b.url("unfinished_of_an_earlier_numbering"), options);
    handle(&journal, &refund(1, Some(4), 7), b"ok");
    let abandoned = new_claim(&journal, &refund(2, Some(5), 7));
    journal.abandon(&abandoned).unwrap();
    // Unfinished deliveries are settled before a renumbering, never carried across it.
    let refused = journal.renumber(1, "the service restarted").unwrap_err();
    assert!(refused.field == "first_index" && refused.message.contains("(5)"), "{refused}");
    journal.close_unfinished(5, "paid by hand").unwrap();
    // A claim in flight at the renumbering whose worker dies after it.
    let _in_flight = new_claim(&journal, &refund(3, Some(6), 7));
    journal.renumber(1, "the service restarted").unwrap();
    thread::sleep(Duration::from_millis(400));
    handle(&journal, &indexed(1), b"ok");
    let status = journal.status().unwrap();
    assert_eq!((status.unfinished, status.in_progress), (1, 1), "still unfinished, for the operator");
    assert_eq!(journal.recovery_plan(10).unwrap(), Vec::<i64>::new(), "its index names no event now");
    // The new numbering's own unfinished delivery at the same index is closed first, alone.
    let current = new_claim(&journal, &indexed(6));
    journal.abandon(&current).unwrap();
    assert_eq!(journal.status().unwrap().unfinished, 2);
    assert_eq!(journal.close_unfinished(6, "the service lost it").unwrap(), 1);
    assert_eq!(journal.lookup(3).unwrap()[0].state, RecordState::Claimed);
    assert_eq!(journal.close_unfinished(6, "the old numbering's, paid by hand").unwrap(), 1);
    let status = journal.status().unwrap();
    assert_eq!((status.unfinished, status.in_progress), (0, 0), "{status:?}");
}

fn the_whole_index_range_resolved(b: &dyn Backend) {
    let options = JournalOptions { max_index_jump: i64::MAX, ..JournalOptions::default() };
    let journal = open_with(&b.url("the_whole_index_range_resolved"), options);
    handle(&journal, &indexed(0), b"ok");
    handle(&journal, &indexed(i64::MAX), b"ok");
    assert_eq!(journal.resolve(1, i64::MAX - 1, "everything between was never sent").unwrap(), (i64::MAX - 1) as u64);
    let status = journal.status().unwrap();
    assert_eq!((status.missing, status.watermark), (0, Some(i64::MAX)));
    assert!(journal.missing(5).unwrap().is_empty());
    assert!(!Journal::needs_attention(&status));
}

/// A TCP proxy in front of the cluster that can cut a connection the moment the server answers
/// a message carrying a marker and ends its transaction, without passing the answers on: the
/// server did the work (and committed it) and the journal never hears so, as when the server
/// dies at that moment; or hears only a pooler's FATAL error in their place, as when PgBouncer's
/// server connection dies under a client's transaction.
struct Cutter {
    port: u16,
    /// What the next cuts wait for, in order: each met only after the one before it.
    armed: Arc<std::sync::Mutex<std::collections::VecDeque<Marker>>>,
    cuts: Arc<std::sync::atomic::AtomicUsize>,
}

/// What the `Cutter` waits for the client to send.
struct Marker {
    bytes: Vec<u8>,
    /// Whether it must be the whole of what the client sends at once.
    alone: bool,
    /// Whether the client is told `POOLER_FATAL` before the cut.
    fatal: bool,
}

/// What PgBouncer 1.18 sends a client whose server connection died under it, before it closes
/// the client's connection: an ErrorResponse, SQLSTATE 08P01, of severity ERROR (its pooler
/// errors are ERRORs; the connection's end, seen only after it, is what makes it fatal). The
/// journal takes it for a lost connection by its class, 08, whatever its severity.
fn pooler_fatal() -> Vec<u8> {
    let fields: Vec<u8> = [(b'S', "ERROR"), (b'V', "ERROR"), (b'C', "08P01"), (b'M', "server conn crashed?")]
        .iter()
        .flat_map(|&(code, text)| std::iter::once(code).chain(text.bytes()).chain([0]))
        .chain([0])
        .collect();
    let length = u32::try_from(fields.len() + 4).unwrap();
    [&[b'E'][..], &length.to_be_bytes(), &fields].concat()
}

impl Marker {
    fn found_in(&self, sent: &[u8]) -> bool {
        if self.alone { sent == self.bytes.as_slice() } else { sent.windows(self.bytes.len()).any(|w| w == self.bytes) }
    }
}

/// The simple query `COMMIT`, as a client sends it.
const COMMIT_QUERY: &[u8] = b"Q\0\0\0\x0bCOMMIT\0";
/// The server's ReadyForQuery outside a transaction: what it did before is committed.
const READY_IDLE: &[u8] = b"Z\0\0\0\x05I";

impl Cutter {
    fn start(server_port: u16) -> Cutter {
        use std::io::{Read, Write};
        use std::net::{Shutdown, TcpListener, TcpStream};
        use std::sync::atomic::{AtomicU8, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cutter = Cutter { port, armed: Arc::default(), cuts: Arc::default() };
        let (armed, cuts) = (Arc::clone(&cutter.armed), Arc::clone(&cutter.cuts));
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", server_port)) else { continue };
                // 0: not armed for this connection; 1: to be cut; 2: to be cut after POOLER_FATAL.
                let cut = Arc::new(AtomicU8::new(0));
                let (mut from, mut to) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (armed, marked) = (Arc::clone(&armed), Arc::clone(&cut));
                thread::spawn(move || {
                    let mut buffer = vec![0; 1 << 16];
                    while let Ok(n @ 1..) = from.read(&mut buffer) {
                        let mut markers = armed.lock().unwrap();
                        if let Some(found) = markers
                            .front()
                            .is_some_and(|marker| marker.found_in(&buffer[..n]))
                            .then(|| markers.pop_front())
                            .flatten()
                        {
                            marked.store(if found.fatal { 2 } else { 1 }, Ordering::SeqCst);
                        }
                        drop(markers);
                        if to.write_all(&buffer[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Both);
                });
                let (mut from, mut to, cuts) = (server, client, Arc::clone(&cuts));
                thread::spawn(move || {
                    let mut buffer = vec![0; 1 << 16];
                    while let Ok(n @ 1..) = from.read(&mut buffer) {
                        let how = cut.load(Ordering::SeqCst);
                        if how > 0 {
                            // Swallowed until the server ends the transaction: the statement
                            // and its COMMIT may be answered apart.
                            if !buffer[..n].windows(READY_IDLE.len()).any(|w| w == READY_IDLE) {
                                continue;
                            }
                            cuts.fetch_add(1, Ordering::SeqCst);
                            if how == 2 {
                                // The connection's end comes later: the error is all the
                                // journal hears of its request.
                                let _ = to.write_all(&pooler_fatal());
                                thread::sleep(Duration::from_millis(300));
                            }
                            let _ = from.shutdown(Shutdown::Both);
                            break;
                        }
                        if to.write_all(&buffer[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Both);
                });
            }
        });
        cutter
    }

    /// Cuts the connection that next sends `marker`, once the server answered it.
    fn arm(&self, marker: &[u8]) {
        *self.armed.lock().unwrap() = [Marker { bytes: marker.to_vec(), alone: false, fatal: false }].into();
    }

    /// As `arm`, once the markers armed before are met: a cut after them (the same call run
    /// again on a fresh connection, say). A connection cut before the server ended its
    /// transaction hears nothing more: its request waits out its `command_timeout`.
    fn arm_after(&self, marker: &[u8]) {
        self.armed.lock().unwrap().push_back(Marker { bytes: marker.to_vec(), alone: false, fatal: false });
    }

    /// As `arm`, the client told a pooler's FATAL error (`pooler_fatal`) before the cut.
    fn arm_fatal(&self, marker: &[u8]) {
        *self.armed.lock().unwrap() = [Marker { bytes: marker.to_vec(), alone: false, fatal: true }].into();
    }

    /// Cuts the connection that next sends `COMMIT` on its own (the end of a transaction of
    /// several statements: one of a single statement sends its `COMMIT` with it), once the
    /// server answered it.
    fn arm_commit(&self) {
        *self.armed.lock().unwrap() = [Marker { bytes: COMMIT_QUERY.to_vec(), alone: true, fatal: false }].into();
    }

    /// As `arm_commit`, the client told a pooler's FATAL error (`pooler_fatal`) before the cut.
    fn arm_commit_fatal(&self) {
        *self.armed.lock().unwrap() = [Marker { bytes: COMMIT_QUERY.to_vec(), alone: true, fatal: true }].into();
    }

    fn cuts(&self) -> usize {
        self.cuts.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// When the connection dies after the server did a statement's work and before its answer
/// came back, the journal runs the statement again on a fresh connection and recognises its
/// own work: a claim by its token (a new one, and one taken over at COMMIT), a stored reply
/// and a release by their attempt. An operator's change is not made twice: its lost COMMIT is
/// reported, not run again.
#[test]
fn postgres_recognises_its_own_work_when_the_answer_is_lost() {
    let Some(cluster) = Cluster::start("PostgreSQL lost answers") else { return };
    cluster.schema_url("lost_answers");
    let cutter = Cutter::start(cluster.port());
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres?options=-csearch_path%3Dlost_answers", cutter.port);
    let options = JournalOptions { busy_wait: Duration::ZERO, ..JournalOptions::default() };
    let journal = open_with(&url, options);
    let rows = |n: i64| {
        let mut client = cluster.client();
        client.batch_execute("SET search_path TO lost_answers").unwrap();
        let row = client
            .query_one("SELECT state, attempts FROM sp_journal_delivery WHERE transaction_id = $1", &[&n])
            .unwrap();
        (row.get::<_, String>(0), row.get::<_, i64>(1))
    };
    // A new claim whose answer is lost: this worker's, attempt 1, counted in progress once.
    let event = refund(7001, None, 7);
    cutter.arm(b"gameSessionBuyRefund:7001");
    let claim = match journal.begin(&event).expect("begin whose first answer was lost") {
        Begin::New(claim) => claim,
        other => panic!("the worker's own claim was not recognised: {other:?}"),
    };
    assert_eq!((cutter.cuts(), claim.attempt()), (1, 1));
    assert_eq!(rows(7001), ("claimed".to_owned(), 1));
    assert_eq!(journal.status().unwrap().in_progress, 1);
    // Its finish whose answer is lost: stored by the first run, reported stored.
    cutter.arm(b"the reply of 7001");
    journal.finish(&claim, b"the reply of 7001").expect("finish whose first answer was lost");
    assert_eq!(cutter.cuts(), 2);
    assert_eq!(done_reply(&journal, &event), b"the reply of 7001");
    // An abandon whose answer is lost, then a take-over whose COMMIT's answer is lost.
    let event = refund(7002, None, 7);
    let claim = new_claim(&journal, &event);
    cutter.arm(b"gameSessionBuyRefund:7002");
    journal.abandon(&claim).expect("abandon whose first answer was lost");
    assert_eq!(cutter.cuts(), 3);
    assert_eq!(rows(7002), ("abandoned".to_owned(), 1));
    cutter.arm_commit();
    let claim = match journal.begin(&event).expect("a take-over whose COMMIT answer was lost") {
        Begin::New(claim) => claim,
        other => panic!("the worker's own take-over was not recognised: {other:?}"),
    };
    assert_eq!((cutter.cuts(), claim.attempt()), (4, 2));
    assert_eq!(rows(7002), ("claimed".to_owned(), 2));
    journal.finish(&claim, b"second").unwrap();
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.in_progress, status.unfinished), (2, 0, 0));
    // An operator's renumbering whose COMMIT's answer is lost: reported, done once.
    cutter.arm_commit();
    let error = journal.renumber(1, "after a restart of the service").unwrap_err();
    assert_eq!(cutter.cuts(), 5);
    assert_eq!(error.kind, ErrorKind::Journal);
    assert!(error.message.contains("may or may not have been made"), "{error}");
    assert_eq!(journal.status().unwrap().numbering, 2, "renumbered once");
}

/// A pooler's own FATAL error in place of the answer (PgBouncer's `server conn crashed?`, SQLSTATE
/// 08P01, when its server connection died under the transaction; the server did the work) ends
/// the connection as a lost one does: the work runs again on a fresh connection and recognises
/// its first run (a claim by its token, a stored reply by its attempt), also when the error is
/// the whole answer to a `COMMIT` sent alone (then the connection's end is not seen first).
#[test]
fn postgres_a_poolers_fatal_error_in_place_of_the_answer_is_a_lost_connection() {
    let Some(cluster) = Cluster::start("PostgreSQL, a pooler's FATAL error") else { return };
    cluster.schema_url("pooler_fatal");
    let cutter = Cutter::start(cluster.port());
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres?options=-csearch_path%3Dpooler_fatal", cutter.port);
    let journal = open_with(&url, JournalOptions { busy_wait: Duration::ZERO, ..JournalOptions::default() });
    let event = refund(7101, None, 7);
    cutter.arm_fatal(b"gameSessionBuyRefund:7101");
    let claim = match journal.begin(&event).expect("begin answered by the pooler's FATAL error") {
        Begin::New(claim) => claim,
        other => panic!("the worker's own claim was not recognised: {other:?}"),
    };
    assert_eq!((cutter.cuts(), claim.attempt()), (1, 1));
    cutter.arm_fatal(b"the reply of 7101");
    journal.finish(&claim, b"the reply of 7101").expect("finish answered by the pooler's FATAL error");
    assert_eq!(cutter.cuts(), 2);
    assert_eq!(done_reply(&journal, &event), b"the reply of 7101");
    // A finish with a staged credit: its transaction's COMMIT, sent alone, answered so.
    let mut client = cluster.client();
    client.batch_execute("CREATE TABLE pooler_fatal.credits (transaction_id BIGINT, amount BIGINT)").unwrap();
    let claim = new_claim(&journal, &refund(7102, None, 7));
    let credit = Staged::new("INSERT INTO credits VALUES ($1, 5)", vec![SqlValue::Int(7102)]).unwrap();
    cutter.arm_commit_fatal();
    journal.finish_with(&claim, b"credited", &[credit]).expect("a COMMIT answered by the pooler's FATAL error");
    assert_eq!(cutter.cuts(), 3);
    assert_eq!(client.query("SELECT * FROM pooler_fatal.credits", &[]).unwrap().len(), 1, "credited once");
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.in_progress), (2, 0));
}

// ---------------------------------------------------------------------------------------------
// JournalOptions::claim_at_finish

fn at_finish() -> JournalOptions {
    JournalOptions { claim_at_finish: true, busy_wait: Duration::ZERO, ..Default::default() }
}

fn credit(b: &dyn Backend, transaction_id: i64, amount: i64) -> Vec<Staged> {
    vec![Staged::new(b.credit_sql(), vec![SqlValue::Int(transaction_id), SqlValue::Int(amount)]).unwrap()]
}

/// PostgreSQL: a staged `SELECT set_config('lock_timeout', '0', false)` (a function call, which
/// staging does not refuse as it does `SET`) changes the session of the server connection it ran
/// on, which a pool (the journal's own, or PgBouncer's) hands to the next delivery. That delivery
/// still waits for a table lock no longer than the journal's lock time-out (2 s) and fails, rather
/// than waiting for the lock's holder (15 s); once the lock is gone, deliveries go through. With
/// the claim written by `begin` and at finish.
fn a_staged_session_setting_leaves_the_lock_timeout_alone(b: &dyn Backend) {
    if b.cluster().is_none() {
        return; // SQLite has no session settings to change
    }
    let lock_timeout = Duration::from_secs(2);
    for (name, options) in [
        ("staged_lock_timeout", JournalOptions { busy_wait: Duration::ZERO, lock_timeout, ..Default::default() }),
        ("staged_lock_timeout_at_finish", JournalOptions { lock_timeout, ..at_finish() }),
    ] {
        let url = b.url(name);
        let journal = open_with(&url, options);
        b.create_ledger(&url);
        let claim = new_claim(&journal, &refund(1, Some(1), 7));
        let mut staged = credit(b, 1, 100);
        staged.push(Staged::new("SELECT set_config('lock_timeout', '0', false)", Vec::new()).unwrap());
        journal.finish_with(&claim, b"credited", &staged).expect("finish with the setting staged");
        let (locked, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let mut holder = b.client(&url).expect("a PostgreSQL client");
        let holding = thread::spawn(move || {
            let mut tx = holder.transaction().unwrap();
            tx.batch_execute("LOCK TABLE sp_journal_delivery IN ACCESS EXCLUSIVE MODE").unwrap();
            locked.0.send(()).unwrap();
            let _ = release.1.recv_timeout(Duration::from_secs(15));
            tx.rollback().unwrap();
        });
        locked.1.recv().unwrap();
        let started = Instant::now();
        let waited = journal.begin(&refund(2, Some(2), 7));
        let elapsed = started.elapsed();
        release.0.send(()).unwrap();
        holding.join().unwrap();
        let error = waited.expect_err("a delivery while the table is locked");
        assert_eq!(error.kind, ErrorKind::Journal, "{name}: {error}");
        assert!(error.message.contains("lock timeout"), "{name}: {error}");
        assert!(elapsed < Duration::from_secs(10), "{name}: waited {elapsed:?} for the lock, not the lock time-out");
        handle(&journal, &refund(2, Some(2), 7), b"after the lock");
        assert_eq!(b.ledger(&url), vec![(1, 100)], "{name}");
    }
}

/// `begin` writes nothing for a new key; `finish` stores the delivery, its credit, its index and
/// its count together; a repeat gets the stored reply, as without the option.
fn a_claim_at_finish_is_written_by_finish_only(b: &dyn Backend) {
    let url = b.url("at_finish_written_by_finish");
    let journal = open_with(&url, at_finish());
    b.create_ledger(&url);
    let event = refund(11, Some(4), 7);
    let claim = new_claim(&journal, &event);
    assert_eq!(claim.attempt(), 1);
    assert!(journal.lookup(11).unwrap().is_empty(), "begin wrote nothing");
    let status = journal.status().unwrap();
    assert_eq!((status.in_progress, status.highest_index), (0, None), "nor counted it, nor its index");
    journal.finish_with(&claim, b"{\"ok\":11}", &credit(b, 11, 500)).unwrap();
    assert_eq!(b.ledger(&url), vec![(11, 500)]);
    let record = &journal.lookup(11).unwrap()[0];
    assert_eq!((record.state, record.attempts, record.index), (RecordState::Done, 1, Some(4)));
    assert_eq!(record.reply.as_deref(), Some(&b"{\"ok\":11}"[..]));
    assert_eq!(done_reply(&journal, &event), b"{\"ok\":11}");
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.replayed, status.in_progress), (1, 1, 0));
    assert_eq!(status.highest_index, Some(4));
    // Other content under the key is a conflict, as without the option; it came with index 5,
    // which it does not close (the key is held at 4): recorded as moved.
    assert!(matches!(journal.begin(&refund(11, Some(5), 8)).unwrap(), Begin::Conflict(_)));
    // The same index under another key is reported as reused.
    journal.finish(&new_claim(&journal, &refund(12, Some(4), 7)), b"{}").unwrap();
    let jumps = journal.index_jumps(true, 10).unwrap();
    let kinds: Vec<(slotpartner::journal::JumpKind, i64)> = jumps.iter().map(|j| (j.kind, j.index)).collect();
    use slotpartner::journal::JumpKind::{Moved, Reused};
    assert_eq!(kinds, vec![(Reused, 4), (Moved, 5)], "{jumps:?}");
    assert_eq!(jumps[0].other_key.as_deref(), Some("gameSessionBuyRefund:11"));
}

/// Two deliveries of one key at once both run the logic; the first `finish` stores its reply and
/// credit, the second fails as `ClaimLost` and its credit is rolled back (the ledger here has no
/// unique key to absorb it): one credit, the first reply.
fn two_claims_at_finish_of_one_key_credit_once(b: &dyn Backend) {
    let url = b.url("at_finish_credit_once");
    let journal = open_with(&url, at_finish());
    let other_process = open_with(&url, at_finish());
    b.create_ledger(&url);
    let event = refund(21, Some(1), 7);
    let first = new_claim(&journal, &event);
    let second = new_claim(&other_process, &event);
    journal.finish_with(&first, b"first", &credit(b, 21, 100)).unwrap();
    let error = other_process.finish_with(&second, b"second", &credit(b, 21, 100)).unwrap_err();
    assert_eq!(error.kind, ErrorKind::ClaimLost, "{error}");
    assert!(error.message.contains("claimed at finish"), "{error}");
    assert_eq!(b.ledger(&url), vec![(21, 100)]);
    assert_eq!(done_reply(&other_process, &event), b"first");
    // The same reply: handled once, that reply stored; the second's credit rolled back all the same.
    let (fifth, sixth) =
        (new_claim(&journal, &refund(23, Some(3), 7)), new_claim(&other_process, &refund(23, Some(3), 7)));
    other_process.finish_with(&sixth, b"same", &credit(b, 23, 300)).unwrap();
    journal.finish_with(&fifth, b"same", &credit(b, 23, 300)).unwrap();
    assert_eq!(b.ledger(&url), vec![(21, 100), (23, 300)]);
    assert_eq!(done_reply(&journal, &refund(23, Some(3), 7)), b"same");
    // Without staged statements the same.
    let (third, fourth) = (new_claim(&journal, &refund(22, Some(2), 7)), new_claim(&journal, &refund(22, Some(2), 7)));
    other_process.finish(&fourth, b"fourth").unwrap();
    assert_eq!(journal.finish(&third, b"third").unwrap_err().kind, ErrorKind::ClaimLost);
    assert_eq!(done_reply(&journal, &refund(22, Some(2), 7)), b"fourth");
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.in_progress, status.missing), (3, 0, 0));
}

/// `abandon` stores the delivery abandoned: it counts unfinished, recovery would fetch it, and
/// the next delivery takes it as attempt 2 (a claim written by `begin`, as for any key the
/// journal holds).
fn a_claim_at_finish_abandoned_is_unfinished(b: &dyn Backend) {
    let url = b.url("at_finish_abandoned");
    let journal = open_with(&url, at_finish());
    let event = refund(31, Some(3), 7);
    let first = new_claim(&journal, &event);
    journal.abandon(&first).unwrap();
    assert_eq!(journal.lookup(31).unwrap()[0].state, RecordState::Abandoned);
    assert_eq!(journal.unfinished(10).unwrap(), vec![3]);
    let status = journal.status().unwrap();
    assert_eq!((status.in_progress, status.unfinished, status.missing), (0, 1, 0));
    let second = new_claim(&journal, &event);
    assert_eq!(second.attempt(), 2);
    assert_eq!(journal.status().unwrap().in_progress, 1);
    // The first one's finish after its abandon: the key is taken.
    assert_eq!(journal.finish(&first, b"late").unwrap_err().kind, ErrorKind::ClaimLost);
    journal.finish(&second, b"second").unwrap();
    assert_eq!(done_reply(&journal, &event), b"second");
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.in_progress, status.unfinished), (1, 0, 0));
}

/// A worker that dies between `begin` and `finish` leaves no trace but a missing index, which
/// recovery fetches; the redelivery is handled as new.
fn a_claim_at_finish_never_finished_leaves_its_index_missing(b: &dyn Backend) {
    let url = b.url("at_finish_never_finished");
    let journal = open_with(&url, at_finish());
    handle(&journal, &refund(41, Some(1), 7), b"one");
    let _dies = new_claim(&journal, &refund(42, Some(2), 7));
    handle(&journal, &refund(43, Some(3), 7), b"three");
    assert_eq!(journal.missing(10).unwrap(), vec![(2, 2)]);
    assert!(journal.unfinished(10).unwrap().is_empty());
    assert_eq!(journal.recovery_plan(10).unwrap(), vec![2]);
    handle(&journal, &refund(42, Some(2), 7), b"two");
    assert!(journal.missing(10).unwrap().is_empty());
    assert_eq!(done_reply(&journal, &refund(42, Some(2), 7)), b"two");
}

/// An operator renumbering while a claim at finish is in flight: its finish and abandon store
/// nothing (`ClaimLost`), as a written claim of the old numbering is renamed out of the way;
/// the new numbering's index 4 is a new event, not answered with the old one's reply.
fn a_claim_at_finish_across_a_renumbering_stores_nothing(b: &dyn Backend) {
    let journal = open_with(&b.url("at_finish_across_renumber"), at_finish());
    for index in 1..=3 {
        handle(&journal, &indexed(index), b"old");
    }
    let in_flight = new_claim(&journal, &indexed(4));
    let released = new_claim(&journal, &indexed(5));
    journal.renumber(1, "the service restarted its numbering").unwrap();
    let error = journal.finish(&in_flight, b"old #4").unwrap_err();
    assert_eq!(error.kind, ErrorKind::ClaimLost, "{error}");
    assert!(error.message.contains("renumbered"), "{error}");
    assert_eq!(journal.abandon(&released).unwrap_err().kind, ErrorKind::ClaimLost);
    let status = journal.status().unwrap();
    assert_eq!((status.highest_index, status.unfinished), (None, 0));
    let fresh = new_claim(&journal, &indexed(4));
    journal.finish(&fresh, b"new #4").unwrap();
    assert_eq!(done_reply(&journal, &indexed(4)), b"new #4");
}

/// Two deliveries of one refund at once, both at its index 2, answered with the same reply: the
/// second finish succeeds on the first's stored reply, records its index (nothing missing, no
/// anomaly) and counts as a replay.
fn a_claim_at_finish_answered_alike_records_its_index(b: &dyn Backend) {
    let url = b.url("at_finish_alike_index");
    let (journal, other_process) = (open_with(&url, at_finish()), open_with(&url, at_finish()));
    // Both at index 2, the event's own (the same event at another index is the next behaviour's).
    let first = new_claim(&journal, &refund(51, Some(2), 7));
    let second = new_claim(&other_process, &refund(51, Some(2), 7));
    handle(&journal, &refund(50, Some(1), 7), b"ok");
    journal.finish(&first, b"ok").unwrap();
    other_process.finish(&second, b"ok").unwrap();
    handle(&journal, &refund(52, Some(3), 7), b"ok");
    assert!(journal.missing(10).unwrap().is_empty());
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.replayed, status.highest_index, status.index_jumps), (3, 1, Some(3), 0));
}

/// Claims at finish of one event carrying two indexes (the service answering index 6 with event
/// 5, only its index changed), both begun before either finished: the second finish is answered
/// alike (same content, same reply), and must not close index 6 with event 5's delivery, as
/// `an_index_is_closed_only_by_its_own_event` requires of a claim made at `begin`: index 6 stays
/// missing and the anomaly is recorded as `moved`.
fn a_claim_at_finish_answered_alike_at_another_index_leaves_it_missing(b: &dyn Backend) {
    use slotpartner::journal::JumpKind;
    let url = b.url("at_finish_alike_moved");
    let (journal, other_process) = (open_with(&url, at_finish()), open_with(&url, at_finish()));
    let own = new_claim(&journal, &refund(900_000_001, Some(5), 7));
    let moved = new_claim(&other_process, &refund(900_000_001, Some(6), 7));
    journal.finish(&own, b"five").unwrap();
    let _ = other_process.finish(&moved, b"five");
    handle(&journal, &indexed(9), b"nine");
    let status = journal.status().unwrap();
    assert_eq!(
        journal.missing(10).unwrap(),
        vec![(6, 8)],
        "index 6 was closed by event 5's delivery (claimed at finish): {status:?}"
    );
    let moved: Vec<(i64, Option<i64>)> = journal
        .index_jumps(false, 10)
        .unwrap()
        .iter()
        .filter(|j| j.kind == JumpKind::Moved)
        .map(|j| (j.index, j.previous_highest))
        .collect();
    assert_eq!(moved, vec![(6, Some(5))], "{status:?}");
}

/// A renumbering while the finish of a claim at finish is running (its staged statement sleeps)
/// waits for it: the delivery is stored in the old numbering and renamed with it, and the new
/// numbering's index 2 is a new event. (SQLite: the write lock serialises them; nothing to see.)
fn a_renumbering_waits_for_a_claim_at_finish_in_flight(b: &dyn Backend) {
    let Some(sleep) = b.sleep_sql() else { return };
    let journal = open_with(&b.url("renumber_waits_for_at_finish"), at_finish());
    handle(&journal, &indexed(1), b"one");
    let claim = new_claim(&journal, &indexed(2));
    thread::scope(|s| {
        let finishing = s.spawn(|| journal.finish_with(&claim, b"two", &[Staged::new(sleep, Vec::new()).unwrap()]));
        thread::sleep(Duration::from_millis(100));
        journal.renumber(1, "the service restarted its numbering").unwrap();
        finishing.join().unwrap().expect("the finish in flight commits first");
    });
    assert_eq!(journal.status().unwrap().highest_index, None);
    let fresh = new_claim(&journal, &indexed(2));
    journal.finish(&fresh, b"new two").unwrap();
    assert_eq!(done_reply(&journal, &indexed(2)), b"new two");
}

/// Every key delivered twice at once, both claimed at finish, finished from 8 threads in a
/// shuffled order, half of the pairs with one reply, half with two; on PostgreSQL the server
/// restarted mid-burst, a finish failing with `Journal` finished again (as a partner retries).
/// One credit for each stored delivery and none without (the ledger has no unique key to
/// absorb a second); every successful finish's reply is the stored one; all handled, nothing
/// missing.
fn claims_at_finish_in_pairs_through_a_restart_credit_once(b: &dyn Backend) {
    const KEYS: i64 = 200;
    let url = b.url("at_finish_pairs_restart");
    let journals: Vec<Journal> = (0..2).map(|_| open_with(&url, at_finish())).collect();
    b.create_ledger(&url);
    let mut work = Vec::new();
    for k in 1..=KEYS {
        let event = refund(100_000 + k, Some(k), 7);
        for (which, journal) in journals.iter().enumerate() {
            let reply = if k % 2 == 0 { b"same".to_vec() } else { format!("reply {which}").into_bytes() };
            work.push((k, which, new_claim(journal, &event), reply));
        }
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64; // xorshift: a fixed shuffle
    for i in (1..work.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        work.swap(i, (seed % (i as u64 + 1)) as usize);
    }
    let (work, outcomes) = (Mutex::new(work), Mutex::new(Vec::new()));
    thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                while let Some((k, which, claim, reply)) = work.lock().unwrap().pop() {
                    let mut staged = credit(b, 100_000 + k, k);
                    if let Some(sleep) = b.sleep_sql() {
                        // Slower finishes, so that the restart lands among them.
                        staged.push(Staged::new(sleep.replace("0.3", "0.002"), Vec::new()).unwrap());
                    }
                    // Retried while the server restarts, however long a busy machine takes.
                    let deadline = Instant::now() + Duration::from_secs(120);
                    let result = loop {
                        match journals[which].finish_with(&claim, &reply, &staged) {
                            Err(e) if e.kind == ErrorKind::Journal && Instant::now() < deadline => {
                                thread::sleep(Duration::from_millis(100))
                            }
                            other => break other,
                        }
                    };
                    outcomes.lock().unwrap().push((k, reply, result));
                }
            });
        }
        if let Some(cluster) = b.cluster() {
            thread::sleep(Duration::from_millis(150));
            cluster.restart();
        }
    });
    let ledger = b.ledger(&url);
    let (mut stored_here, mut lost) = (0, 0);
    for (k, reply, result) in outcomes.into_inner().unwrap() {
        let record = journals[0].lookup(100_000 + k).unwrap().into_iter().next().expect("stored");
        assert_eq!(record.state, RecordState::Done, "key {k}");
        assert_eq!(ledger.iter().filter(|(id, _)| *id == 100_000 + k).count(), 1, "key {k}: one credit");
        match result {
            Ok(()) => {
                assert_eq!(record.reply.as_deref(), Some(&reply[..]), "key {k}: a success answers the stored reply");
                stored_here += 1;
            }
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::ClaimLost, "key {k}: {e}");
                lost += 1;
            }
        }
    }
    assert_eq!(ledger.len() as i64, KEYS);
    assert!(lost >= KEYS / 2 - 5 && stored_here >= KEYS + KEYS / 2 - 5, "{stored_here} succeeded, {lost} lost");
    let status = journals[0].status().unwrap();
    assert_eq!((status.handled as i64, status.missing, status.in_progress), (KEYS, 0, 0));
}

/// PostgreSQL: the server commits a finish and the answer to `COMMIT` is lost (the backend
/// ended while waiting for a synchronous standby that does not exist, so the commit is local
/// and the client sees its connection close), with staged statements and without. The run on
/// a fresh connection finds its own first run's row by the token: success, one credit.
fn a_claim_at_finish_whose_commit_answer_is_lost_is_stored_once(b: &dyn Backend) {
    let Some(cluster) = b.cluster() else { return };
    struct Standby<'a>(&'a Cluster);
    impl Standby<'_> {
        fn set(&self, names: &str) {
            let mut client = self.0.client();
            client.batch_execute(&format!("ALTER SYSTEM SET synchronous_standby_names = '{names}'")).unwrap();
            client.batch_execute("SELECT pg_reload_conf()").unwrap();
        }
    }
    impl Drop for Standby<'_> {
        fn drop(&mut self) {
            self.set(""); // never left waiting for a standby, also when an assertion failed
        }
    }
    let url = b.url("at_finish_commit_answer_lost");
    b.create_ledger(&url);
    let journal = open_with(&url, at_finish());
    let standby = Standby(cluster);
    for (k, staged) in [(71, true), (72, false)] {
        let claim = new_claim(&journal, &refund(k, Some(k - 70), 7));
        standby.set("nobody_there");
        thread::sleep(Duration::from_millis(300));
        let stage = if staged { credit(b, k, 1) } else { Vec::new() };
        let result = thread::scope(|s| {
            let finishing = s.spawn(|| journal.finish_with(&claim, b"committed", &stage));
            let mut ended = false;
            for _ in 0..250 {
                let sql = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'";
                if !cluster.client().query(sql, &[]).unwrap().is_empty() {
                    ended = true;
                    break;
                }
                thread::sleep(Duration::from_millis(20));
            }
            standby.set("");
            assert!(ended, "no backend waited for the standby");
            finishing.join().unwrap()
        });
        result.expect("committed by the first run: the second recognises it");
        assert_eq!(journal.lookup(k).unwrap()[0].reply.as_deref(), Some(&b"committed"[..]));
    }
    drop(standby);
    assert_eq!(b.ledger(&url), vec![(71, 1)]);
    assert_eq!(journal.status().unwrap().handled, 2);
}

/// With claim at finish, a process that found the journal current may open it again without
/// reading its schema version (PostgreSQL, where PHP-FPM opens it every request): a journal that
/// another release moved to a newer schema meanwhile is then refused by the next `begin`, a
/// repeat included, before anything is handed out or answered. (SQLite reads it at every open.)
fn a_newer_schema_is_refused_by_the_open_or_the_claim(b: &dyn Backend) {
    let url = b.url("at_finish_newer_schema");
    handle(&open_with(&url, at_finish()), &refund(1, Some(1), 7), b"ok");
    b.set_schema_version(&url, 99);
    let newer = |e: &slotpartner::Error| {
        e.kind == ErrorKind::Journal && e.message.contains("schema version 99") && e.message.contains("newer")
    };
    match Journal::open(&url, &at_finish()) {
        Err(e) => assert!(newer(&e), "{e}"),
        Ok(journal) => {
            for event in [refund(2, Some(2), 7), refund(1, Some(1), 7)] {
                let e = journal.begin(&event).unwrap_err();
                assert!(newer(&e), "{e}");
            }
        }
    }
    b.set_schema_version(&url, slotpartner::journal::SCHEMA_VERSION);
    assert_eq!(done_reply(&open_with(&url, at_finish()), &refund(1, Some(1), 7)), b"ok");
}

/// A claim at finish of the old numbering's index 4, a renumbering, the new numbering's index 4
/// (the same body) handled with the very reply the old one then finishes with, its staged
/// statement failing: the finish must not pass for the new event's stored reply (the old event
/// was stored nowhere, its credit rolled back): `ClaimLost`, nothing counted.
fn a_claim_at_finish_across_a_renumbering_is_not_answered_by_the_new_numbering(b: &dyn Backend) {
    let url = b.url("at_finish_alike_new_numbering");
    let journal = open_with(&url, at_finish());
    b.create_ledger(&url);
    let old = new_claim(&journal, &indexed(4));
    journal.renumber(1, "the service restarted its numbering").unwrap();
    handle(&journal, &indexed(4), b"ok");
    let replayed = journal.status().unwrap().replayed;
    // A NULL amount in a NOT NULL column: the statement fails.
    let failing = vec![Staged::new(b.credit_sql(), vec![SqlValue::Int(4), SqlValue::Null]).unwrap()];
    let error = journal.finish_with(&old, b"ok", &failing).unwrap_err();
    assert_eq!(error.kind, ErrorKind::ClaimLost, "{error}");
    assert!(error.message.contains("renumbered"), "{error}");
    assert!(b.ledger(&url).is_empty());
    assert_eq!(journal.status().unwrap().replayed, replayed);
}

/// PostgreSQL: a claim at finish commits while a renumbering waits for it, and the answer to
/// its `COMMIT` is lost; the renumbering renames the stored row before the finish runs again on
/// a fresh connection. The second run finds its own row under the new key by the token: the
/// finish succeeds (the event was stored once), and nothing runs twice.
#[test]
fn postgres_a_lost_commit_answer_across_a_renumbering_is_recognised() {
    lost_commit_across_a_renumbering("", "lost_commit_renumber");
}

/// The same with the journal's statements kept prepared, the at-finish store sent as the storing
/// statement itself (`statement_cache_size`, room for all of them), and by a cache of one
/// statement (full before the store: the function stores, the rest sent unnamed).
#[test]
fn postgres_a_lost_commit_answer_across_a_renumbering_is_recognised_with_statements_kept() {
    lost_commit_across_a_renumbering(STATEMENT_CACHE, "lost_commit_renumber_kept");
    lost_commit_across_a_renumbering("&statement_cache_size=1", "lost_commit_renumber_kept1");
}

fn lost_commit_across_a_renumbering(cache: &str, schema: &str) {
    let Some(cluster) = Cluster::start("PostgreSQL lost commit across a renumbering") else { return };
    let direct = cluster.schema_url(schema);
    let cutter = Cutter::start(cluster.port());
    let through =
        format!("postgres://postgres@127.0.0.1:{}/postgres?options=-csearch_path%3D{schema}{cache}", cutter.port);
    let pg = Postgres { cluster };
    let journal = open_with(&through, at_finish());
    let operator = open_with(&direct, JournalOptions::default());
    pg.create_ledger(&direct);
    handle(&journal, &indexed(1), b"one");
    let claim = new_claim(&journal, &indexed(2));
    let mut staged = credit(&pg, 2, 100);
    staged.push(Staged::new("SELECT pg_sleep(0.5)", Vec::new()).unwrap());
    // The `COMMIT` is written with the statements and the storing one, before the sleep: the
    // next one written is theirs.
    cutter.arm(COMMIT_QUERY);
    let result = thread::scope(|s| {
        let finishing = s.spawn(|| journal.finish_with(&claim, b"two", &staged));
        thread::sleep(Duration::from_millis(150)); // inside its sleep, holding the numbering's lock
        operator.renumber(1, "the service restarted its numbering").unwrap();
        finishing.join().unwrap()
    });
    assert_eq!(cutter.cuts(), 1);
    let mut client = postgres::Client::connect(&direct, postgres::NoTls).unwrap();
    let rows = client.query("SELECT key, reply FROM sp_journal_delivery WHERE key LIKE '%event#2#%'", &[]).unwrap();
    let rows: Vec<(String, Option<Vec<u8>>)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(rows, vec![("n1/event#2#bonusGranted".to_owned(), Some(b"two".to_vec()))]);
    assert_eq!(pg.ledger(&direct), vec![(2, 100)]);
    result.expect("stored by the first run, before the renumbering renamed it");
}

/// PostgreSQL, claim at finish: the answer to the finish's round trip (the statements, the
/// storing one and `COMMIT`) is lost once the server committed it, and the run on a fresh
/// connection gets no answer within `command_timeout` to its first statement (looking for the
/// first run's row). The finish fails; its message must say that the change may or may not have
/// been made (the first run's commit was never confirmed: here it was made, the delivery and its
/// credit stored), never that nothing was committed.
#[test]
fn postgres_a_rerun_failing_after_a_lost_commit_answer_leaves_the_outcome_unknown() {
    let Some(cluster) = Cluster::start("PostgreSQL rerun after a lost commit answer") else { return };
    let direct = cluster.schema_url("rerun_unknown");
    let cutter = Cutter::start(cluster.port());
    let through = format!(
        "postgres://postgres@127.0.0.1:{}/postgres?options=-csearch_path%3Drerun_unknown&command_timeout=1",
        cutter.port
    );
    postgres_create_ledger(&direct);
    let pg = Postgres { cluster };
    let journal = open_with(&through, at_finish());
    let claim = new_claim(&journal, &refund(1, Some(1), 7));
    cutter.arm(COMMIT_QUERY);
    // The rerun's look for its first run's row by the token (`STORED_BY_TOKEN`).
    cutter.arm_after(b"key IN ($1, $3) AND token = $2");
    let error = journal.finish_with(&claim, b"credited", &credit(&pg, 1, 100)).unwrap_err();
    assert_eq!(cutter.cuts(), 1);
    assert_eq!(postgres_ledger(&direct), vec![(1, 100)], "the first run committed");
    assert_eq!(error.kind, ErrorKind::Journal, "{error}");
    assert!(error.message.contains("may or may not have been made"), "{error}");
    assert!(!error.message.contains("nothing of the transaction was committed"), "{error}");
    assert_eq!(journal.lookup(1).unwrap()[0].reply.as_deref(), Some(&b"credited"[..]));
}

// ---------------------------------------------------------------------------------------------
// The recovery lock of a live run elsewhere on this machine

/// The variable that makes `recovery_lock_holder_in_a_namespace` hold the lock of the journal
/// it names; without it that test does nothing.
const HOLD_LOCK: &str = "SLOTPARTNER_TEST_HOLD_RECOVERY_LOCK";

/// Not a test of its own: run by the tests below as another process, inside namespaces they
/// give it (`unshare`), with `HOLD_LOCK` naming a journal. It takes the recovery lock, prints its
/// holder text, and holds the lock until its standard input closes.
#[test]
fn recovery_lock_holder_in_a_namespace() {
    use std::io::Read;
    let Ok(url) = std::env::var(HOLD_LOCK) else { return };
    let journal = Arc::new(open(&url));
    let lock = slotpartner::journal::RecoveryLock::take(journal, "slotpartner recover", Duration::from_secs(3600))
        .expect("the lock is free");
    println!("holder: {}", lock.holder());
    let _ = std::io::stdin().read(&mut [0u8; 1]);
    drop(lock);
}

/// A live recovery run, holding the journal's lock, started by `unshare` with `namespaces`
/// (`--fork --kill-child` added: it ends with `unshare`); stopped when dropped.
struct LiveHolder {
    unshare: std::process::Child,
    holder: String,
}

impl LiveHolder {
    /// `None` (saying so) where namespaces cannot be made here (not root).
    fn start(namespaces: &[&str], wrapper: &[&str], url: &str) -> Option<LiveHolder> {
        use std::io::BufRead;
        let exe = std::env::current_exe().unwrap();
        let mut unshare = Command::new("unshare")
            .args(namespaces)
            .args(["--fork", "--kill-child"])
            .args(wrapper)
            .arg(&exe)
            .args(["--exact", "recovery_lock_holder_in_a_namespace", "--nocapture", "--test-threads=1"])
            .env(HOLD_LOCK, url)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .ok()?;
        let stdout = unshare.stdout.take().unwrap();
        let holder = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|line| line.split_once("holder: ").map(|(_, holder)| holder.to_owned()));
        match holder {
            Some(holder) => Some(LiveHolder { unshare, holder }),
            None => {
                let _ = unshare.kill();
                let _ = unshare.wait();
                println!("SKIPPED: unshare {namespaces:?} is not allowed here (root is needed)");
                None
            }
        }
    }

    fn is_alive(&mut self) -> bool {
        self.unshare.try_wait().unwrap().is_none()
    }
}

impl Drop for LiveHolder {
    fn drop(&mut self) {
        drop(self.unshare.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && self.is_alive() {
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

/// A recovery run in a container of this machine (a PID namespace of its own, the same host
/// name and boot, as with `docker run --network host`) holds the lock: its process id means
/// nothing in this namespace (no such process, or another one), yet it is alive. A second run
/// here must wait out its lease; it takes the lock over at once.
#[test]
fn a_live_recovery_lock_in_another_pid_namespace_is_not_taken_over() {
    let dir = TempDir::new("slotpartner-lock-pidns");
    let url = format!("sqlite:{}", dir.0.join("journal.db").display());
    let journal = Arc::new(open(&url));
    let Some(mut live) = LiveHolder::start(&["--pid", "--mount-proc"], &[], &url) else { return };
    let taken = slotpartner::journal::RecoveryLock::take(Arc::clone(&journal), "second run", Duration::from_secs(60));
    assert!(live.is_alive(), "the holder is still running");
    let error = taken.map(|lock| lock.holder().to_owned()).expect_err(&format!(
        "a live run's lock was taken over: it is held by {:?}, a running process of another PID namespace",
        live.holder
    ));
    assert_eq!(error.kind, ErrorKind::Busy, "{error}");
}

/// A recovery run on another host that has this host's name (cloned machines, containers on
/// several hosts with one `--hostname`) holds a PostgreSQL journal's lock: another boot
/// identity, the same name. A run here must wait out its lease; it takes the live run's lock at
/// once, reading the other boot as an earlier one of its own. The other host is a process in a
/// mount namespace of its own whose `/proc/sys/kernel/random/boot_id` is another boot's.
#[test]
fn a_live_recovery_lock_of_another_host_with_this_name_is_not_taken_over() {
    let Some(cluster) = Cluster::start("the recovery lock of another host of this name") else { return };
    let url = cluster.schema_url("lock_same_name");
    let journal = Arc::new(open(&url));
    let dir = TempDir::new("slotpartner-lock-host");
    let boot = dir.0.join("boot_id");
    std::fs::write(&boot, "0badb007-0000-4000-8000-000000000000\n").unwrap();
    let boot = boot.display().to_string();
    let wrapper = ["sh", "-c", r#"mount --bind "$0" /proc/sys/kernel/random/boot_id && exec "$@""#, &boot];
    let Some(mut live) = LiveHolder::start(&["--mount"], &wrapper, &url) else { return };
    assert!(live.holder.contains("process 0badb007:"), "the holder names the other boot: {}", live.holder);
    let taken = slotpartner::journal::RecoveryLock::take(Arc::clone(&journal), "second run", Duration::from_secs(60));
    assert!(live.is_alive(), "the holder is still running");
    let error = taken.map(|lock| lock.holder().to_owned()).expect_err(&format!(
        "a live run's lock was taken over: it is held by {:?}, a running process of another host of this name",
        live.holder
    ));
    assert_eq!(error.kind, ErrorKind::Busy, "{error}");
}
