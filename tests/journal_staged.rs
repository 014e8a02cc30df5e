//! Staged statements (`Journal::finish_with`), on SQLite and on a throw-away PostgreSQL cluster
//! (skipped with a message when PostgreSQL is not installed): the partner's statements commit
//! with the stored reply or not at all, run once however often the event is delivered, never
//! run for a claim lost to another delivery, bind every kind of value to the column's own type,
//! and survive a connection lost in their middle (PostgreSQL: the whole transaction runs again
//! on a fresh connection, and the credit is made once). The same for a claim written at finish
//! (`claim_at_finish`), whose statements PostgreSQL is sent together with the storing one: a
//! failure among them names its statement and stores nothing, a statement refused keeps the ones
//! after it from running, and the transaction's own lock wait timing out is not blamed on a
//! statement; and the round trips of a delivery are counted.

use std::time::Duration;

use slotpartner::ErrorKind;
use slotpartner::journal::{Begin, Finished, Journal, JournalOptions, PruneOptions, RecordState, SqlValue, Staged};

#[path = "e2e/cluster.rs"]
mod cluster;
use cluster::{Cluster, TempDir};

#[path = "e2e/backends.rs"]
mod backends;
use backends::{Backend, KEPT_STATEMENTS, Postgres, PostgresKept, Sqlite, run_suite};

#[path = "e2e/refunds.rs"]
mod refunds;
use refunds::{DAY_MS, days, new_claim, plain_refund, refund, reply, state_of};

/// A journal at `url` with the partner's ledger table beside it.
fn journal_with_ledger(b: &dyn Backend, url: &str, options: &JournalOptions) -> Journal {
    let journal = Journal::open(url, options).unwrap_or_else(|e| panic!("open {url}: {e}"));
    b.exec(url, "CREATE TABLE credits (transaction_id BIGINT PRIMARY KEY, amount BIGINT NOT NULL, note TEXT)");
    journal
}

/// The ledger's credit of refund `n`.
fn credit(b: &dyn Backend, n: i64, amount: i64) -> Staged {
    let sql = format!("INSERT INTO credits (transaction_id, amount) VALUES ({}, {})", b.param(1), b.param(2));
    Staged::new(sql, vec![SqlValue::Int(n), SqlValue::Int(amount)]).unwrap()
}

/// A ledger without a unique key: only the journal makes a payment exactly once.
const PAYMENTS: &str = "CREATE TABLE payments (transaction_id BIGINT NOT NULL, amount BIGINT NOT NULL)";

/// The payment of refund `n` into `PAYMENTS`.
fn payment(b: &dyn Backend, n: i64) -> Staged {
    let sql = format!("INSERT INTO payments (transaction_id, amount) VALUES ({}, {})", b.param(1), b.param(2));
    Staged::new(sql, vec![SqlValue::Int(n), SqlValue::Int(5)]).unwrap()
}

fn credits(b: &dyn Backend, url: &str) -> i64 {
    b.count(url, "SELECT count(*) FROM credits")
}

type Behaviour = fn(&dyn Backend);

const SUITE: &[(&str, Behaviour)] = &[
    ("staged_statements_commit_with_the_reply_and_run_once", staged_statements_commit_with_the_reply_and_run_once),
    ("a_failing_statement_leaves_nothing_and_the_claim_held", a_failing_statement_leaves_nothing_and_the_claim_held),
    ("a_claim_lost_to_another_delivery_runs_nothing", a_claim_lost_to_another_delivery_runs_nothing),
    ("every_kind_of_value_reaches_its_column", every_kind_of_value_reaches_its_column),
    ("rows_a_statement_returns_are_dropped", rows_a_statement_returns_are_dropped),
    (
        "at_finish_a_failing_statement_among_several_stores_nothing",
        at_finish_a_failing_statement_among_several_stores_nothing,
    ),
    (
        "optimistic_deliveries_store_once_and_repeats_get_the_stored_reply",
        optimistic_deliveries_store_once_and_repeats_get_the_stored_reply,
    ),
    (
        "optimistic_conflicts_takeovers_and_renumberings_answer_as_begin",
        optimistic_conflicts_takeovers_and_renumberings_answer_as_begin,
    ),
    (
        "an_optimistic_repeat_of_a_pruned_delivery_never_runs_blind",
        an_optimistic_repeat_of_a_pruned_delivery_never_runs_blind,
    ),
    (
        "a_statement_unsetting_the_guard_stores_nothing_at_finish",
        a_statement_unsetting_the_guard_stores_nothing_at_finish,
    ),
    (
        "optimistic_repeats_and_renumberings_found_by_the_storing_statement",
        optimistic_repeats_and_renumberings_found_by_the_storing_statement,
    ),
];

#[test]
fn sqlite_staged() {
    run_suite(SUITE, "sqlite", &Sqlite(TempDir::new("slotpartner-staged")));
}

#[test]
fn postgres_staged() {
    let Some(cluster) = Cluster::start("PostgreSQL staged statements") else { return };
    let backend = Postgres(cluster);
    run_suite(SUITE, "postgres", &backend);
    a_connection_lost_among_the_statements_runs_them_again_once(&backend);
    a_session_changed_by_a_statement_is_not_kept(&backend, "");
    a_table_changed_under_a_kept_connection_fails_no_later_finish(&backend, "");
    staged_statements_are_kept_prepared_where_the_journals_are(&backend, "");
    round_trips_of_a_delivery(&backend, "");
    round_trips_of_an_optimistic_delivery(&backend, "");
    a_lock_wait_of_the_begin_is_not_blamed_on_a_staged_statement(&backend, "");
    a_lock_wait_of_the_begin_is_not_blamed_on_a_staged_statement(&backend, KEPT_STATEMENTS);
    a_refused_statement_keeps_the_ones_after_it_from_running(&backend);
    // The same with the journal's statements kept prepared: a claim at finish is then stored
    // by the storing statement itself, not a call of the function.
    round_trips_of_a_delivery(&backend, KEPT_STATEMENTS);
    staged_statements_are_kept_prepared_where_the_journals_are(&backend, KEPT_STATEMENTS);
    a_session_changed_by_a_statement_is_not_kept(&backend, KEPT_STATEMENTS);
    a_table_changed_under_a_kept_connection_fails_no_later_finish(&backend, KEPT_STATEMENTS);
    round_trips_of_an_optimistic_delivery(&backend, KEPT_STATEMENTS);
    the_guard_statement_dropped_by_a_partners_function_is_prepared_again(&backend);
    run_suite(SUITE, "postgres-kept", &PostgresKept(backend.0));
}

/// What a claim at finish answers where it stores nothing: the statement unsetting the guard,
/// a repeat found at finish (answered alike, or with the stored reply), a renumbering.
const NOT_STORED: &[(&str, Behaviour)] = &[
    (
        "a_statement_unsetting_the_guard_stores_nothing_at_finish",
        a_statement_unsetting_the_guard_stores_nothing_at_finish,
    ),
    (
        "optimistic_deliveries_store_once_and_repeats_get_the_stored_reply",
        optimistic_deliveries_store_once_and_repeats_get_the_stored_reply,
    ),
    (
        "optimistic_conflicts_takeovers_and_renumberings_answer_as_begin",
        optimistic_conflicts_takeovers_and_renumberings_answer_as_begin,
    ),
    (
        "optimistic_repeats_and_renumberings_found_by_the_storing_statement",
        optimistic_repeats_and_renumberings_found_by_the_storing_statement,
    ),
];

/// A server whose messages are translated (set up in a French locale: `lc_messages`) quotes the
/// storing statement's deliberate failure in its own language's marks,
/// `« slotpartner: not stored: key »`: a claim at finish that stores nothing still answers as in
/// English (a repeat its stored reply, a renumbering `ClaimLost`, the guard unset its own error),
/// unnamed and kept prepared, instead of the server's words as a failure of the journal (503 for
/// every repeat of a stored delivery, and after a renumbering for every optimistic delivery of
/// the process, whose numbering is read again only on `ClaimLost`).
#[test]
fn postgres_staged_on_a_server_speaking_another_language() {
    let Some(cluster) = Cluster::start_speaking("PostgreSQL speaking French", "fr") else { return };
    if !cluster.speaks() {
        println!("SKIP a server speaking French: its messages come in English (no translations, or lc_messages C)");
        return;
    }
    let backend = Postgres(cluster);
    run_suite(NOT_STORED, "postgres-fr", &backend);
    run_suite(NOT_STORED, "postgres-kept-fr", &PostgresKept(backend.0));
}

/// The partner's staged statements kept prepared (`KEPT_STATEMENTS`), where a connection's
/// kept statement meets what a fresh one would not: each behaviour with its claim at `begin`
/// and at finish.
#[test]
fn postgres_staged_statements_kept_prepared() {
    let Some(cluster) = Cluster::start("PostgreSQL staged statements kept prepared") else { return };
    let backend = Postgres(cluster);
    for (options, name) in [(JournalOptions::default(), "begin"), (at_finish(), "at_finish")] {
        a_table_changed_under_every_kept_connection_fails_no_later_finish(&backend, &options, name);
        a_statements_own_feature_not_supported_is_named(&backend, &options, name);
        null_and_bytes_in_turn_reach_their_column(&backend, &options, name);
        a_statement_refused_at_prepare_is_named_and_the_claim_held(&backend, &options, name);
        a_stale_statement_then_a_lost_connection_credits_once(&backend, &options, name);
    }
}

/// A delivery meeting a statement kept stale on a pooled connection, then, on the fresh one, its
/// connection killed among the statements: run again once more, the credit made once.
fn a_stale_statement_then_a_lost_connection_credits_once(b: &Postgres, options: &JournalOptions, name: &str) {
    let url = b.url(&format!("stale_then_lost_{name}"));
    journal_with_ledger(b, &url, options);
    b.exec(&url, "CREATE SEQUENCE runs");
    let journal = Journal::open(&format!("{url}{KEPT_STATEMENTS}"), options).expect("open");
    let claim = new_claim(&journal, &plain_refund(1));
    journal.finish_with(&claim, &reply(1), &[returning(1)]).expect("first");
    b.exec(&url, "ALTER TABLE credits ADD COLUMN extra TEXT");
    let kill_once =
        Staged::new("SELECT CASE WHEN nextval('runs') = 1 THEN pg_terminate_backend(pg_backend_pid()) END", vec![])
            .unwrap();
    let claim = new_claim(&journal, &plain_refund(2));
    journal.finish_with(&claim, &reply(2), &[returning(2), kill_once]).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(b.count(&url, "SELECT last_value FROM runs"), 2, "{name}: the statements after the stale one ran twice");
    assert_eq!(credits(b, &url), 2, "{name}");
    assert_eq!(state_of(&journal, 2), RecordState::Done, "{name}");
    println!("postgres a_stale_statement_then_a_lost_connection_credits_once {name}: ok");
}

/// A table changed (a column added) under a `RETURNING *` statement kept prepared on every one
/// of the pool's connections ("cached plan must not change result type" on each): the next
/// deliveries are stored, however many of the kept connections are stale.
fn a_table_changed_under_every_kept_connection_fails_no_later_finish(
    b: &Postgres,
    options: &JournalOptions,
    name: &str,
) {
    let url = b.url(&format!("every_kept_stale_{name}"));
    journal_with_ledger(b, &url, options);
    let journal = Journal::open(&format!("{url}{KEPT_STATEMENTS}"), options).expect("open");
    // Six deliveries at once, each holding its connection a while: six connections kept, each
    // with the statement prepared.
    let slow = || Staged::new("SELECT pg_sleep(0.3)", vec![]).unwrap();
    std::thread::scope(|scope| {
        for n in 1..=6 {
            let journal = &journal;
            scope.spawn(move || {
                let claim = new_claim(journal, &plain_refund(n));
                journal.finish_with(&claim, &reply(n), &[returning(n), slow()]).expect("first deliveries");
            });
        }
    });
    b.exec(&url, "ALTER TABLE credits ADD COLUMN extra TEXT");
    for n in 7..=12 {
        let claim = new_claim(&journal, &plain_refund(n));
        journal.finish_with(&claim, &reply(n), &[returning(n)]).unwrap_or_else(|e| panic!("{name}: delivery {n}: {e}"));
    }
    assert_eq!(credits(b, &url), 12);
    println!("postgres a_table_changed_under_every_kept_connection_fails_no_later_finish {name}: ok");
}

/// A staged statement failing with SQLSTATE 0A000 of its own (a trigger refusing the row as
/// "not supported"), sent by name: told as that statement's failure, as when sent unnamed (not
/// as a failure of the database after the work ran on fresh connections), the claim still held.
fn a_statements_own_feature_not_supported_is_named(b: &Postgres, options: &JournalOptions, name: &str) {
    let url = b.url(&format!("own_0a000_{name}"));
    journal_with_ledger(b, &url, options);
    b.exec(
        &url,
        "CREATE FUNCTION refuse_big() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.amount > 1000 THEN RAISE EXCEPTION 'amounts over 1000 are not supported' USING ERRCODE = 'feature_not_supported'; END IF; RETURN NEW; END $$",
    );
    b.exec(&url, "CREATE TRIGGER refuse_big BEFORE INSERT ON credits FOR EACH ROW EXECUTE FUNCTION refuse_big()");
    for kept in ["", KEPT_STATEMENTS] {
        b.exec(&url, "DELETE FROM credits");
        let journal = Journal::open(&format!("{url}{kept}"), options).expect("open");
        let first = 100 * i64::from(kept.is_empty());
        // The credit's text kept by a delivery before.
        let claim = new_claim(&journal, &plain_refund(first + 1));
        journal.finish_with(&claim, &reply(first + 1), &[credit(b, first + 1, 10)]).expect("a small credit");
        let claim = new_claim(&journal, &plain_refund(first + 2));
        let error = journal.finish_with(&claim, &reply(first + 2), &[credit(b, first + 2, 5000)]).unwrap_err();
        assert_eq!((error.kind, error.field.as_str()), (ErrorKind::Journal, "statements[0]"), "{name} {kept}: {error}");
        assert!(error.message.contains("not supported"), "{name} {kept}: {error}");
        journal.finish_with(&claim, &reply(first + 2), &[credit(b, first + 2, 50)]).expect("finished again");
        assert_eq!(credits(b, &url), 2);
    }
    println!("postgres a_statements_own_feature_not_supported_is_named {name}: ok");
}

/// One text whose parameter is NULL in one delivery and bytes in the next (declared `bytea`),
/// in turn: each reaches the `bytea` column as it was, the text kept with the types it was
/// first prepared with and sent unnamed with the others.
fn null_and_bytes_in_turn_reach_their_column(b: &Postgres, options: &JournalOptions, name: &str) {
    let url = b.url(&format!("null_bytes_{name}"));
    journal_with_ledger(b, &url, options);
    b.exec(&url, "CREATE TABLE blobs (n BIGINT PRIMARY KEY, b BYTEA)");
    let journal = Journal::open(&format!("{url}{KEPT_STATEMENTS}"), options).expect("open");
    let insert = |n: i64, value: SqlValue| {
        Staged::new("INSERT INTO blobs (n, b) VALUES ($1, $2)", vec![SqlValue::Int(n), value]).unwrap()
    };
    let value = |n: i64| if n % 2 == 1 { SqlValue::Null } else { SqlValue::Blob(vec![0, 1, 2, 0xff, n as u8]) };
    for n in 1..=6 {
        let claim = new_claim(&journal, &plain_refund(n));
        journal.finish_with(&claim, &reply(n), &[insert(n, value(n))]).unwrap_or_else(|e| panic!("{name} {n}: {e}"));
    }
    assert_eq!(b.count(&url, "SELECT count(*) FROM blobs WHERE n % 2 = 1 AND b IS NULL"), 3);
    assert_eq!(b.count(&url, "SELECT count(*) FROM blobs WHERE n % 2 = 0 AND b = '\\x000102ff'::bytea || set_byte('\\x00'::bytea, 0, n::int)"), 3);
    println!("postgres null_and_bytes_in_turn_reach_their_column {name}: ok");
}

/// A staged statement the server refuses when it is prepared (its table missing), after one
/// kept before and before one new: named, nothing stored, the claim held; the same delivery
/// with good statements then stores, on the same journal.
fn a_statement_refused_at_prepare_is_named_and_the_claim_held(b: &Postgres, options: &JournalOptions, name: &str) {
    let url = b.url(&format!("refused_at_prepare_{name}"));
    journal_with_ledger(b, &url, options);
    let journal = Journal::open(&format!("{url}{KEPT_STATEMENTS}"), options).expect("open");
    let claim = new_claim(&journal, &plain_refund(1));
    journal.finish_with(&claim, &reply(1), &[credit(b, 1, 10)]).expect("first");
    let missing = Staged::new("INSERT INTO no_such_table (x) VALUES ($1)", vec![SqlValue::Int(1)]).unwrap();
    let note =
        Staged::new("UPDATE credits SET note = $1 WHERE transaction_id = 1", vec![SqlValue::Text("x".into())]).unwrap();
    let claim = new_claim(&journal, &plain_refund(2));
    let error = journal
        .finish_with(&claim, &reply(2), &[credit(b, 2, 10), note.clone(), missing, credit(b, 3, 1)])
        .unwrap_err();
    assert_eq!((error.kind, error.field.as_str()), (ErrorKind::Journal, "statements[2]"), "{name}: {error}");
    assert!(error.message.contains("no_such_table"), "{name}: {error}");
    assert_eq!(credits(b, &url), 1);
    journal.finish_with(&claim, &reply(2), &[credit(b, 2, 10), note]).expect("finished again");
    assert_eq!(credits(b, &url), 2);
    assert_eq!(b.count(&url, "SELECT count(*) FROM credits WHERE note = 'x'"), 1);
    println!("postgres a_statement_refused_at_prepare_is_named_and_the_claim_held {name}: ok");
}

// ---------------------------------------------------------------------------------------------
// Behaviours

fn staged_statements_commit_with_the_reply_and_run_once(b: &dyn Backend) {
    let url = b.url("commit_once");
    let journal = journal_with_ledger(b, &url, &JournalOptions::default());
    let claim = new_claim(&journal, &plain_refund(1));
    let note = format!("UPDATE credits SET note = {} WHERE transaction_id = {}", b.param(1), b.param(2));
    let staged =
        [credit(b, 1, 1299), Staged::new(note, vec![SqlValue::Text("first".into()), SqlValue::Int(1)]).unwrap()];
    journal.finish_with(&claim, &reply(1), &staged).expect("finish_with");
    // In order: the UPDATE found the INSERT's row.
    assert_eq!(
        b.count(&url, "SELECT count(*) FROM credits WHERE transaction_id = 1 AND amount = 1299 AND note = 'first'"),
        1
    );
    assert_eq!(state_of(&journal, 1), RecordState::Done);
    // Every later delivery gets the stored reply and runs nothing: the credit stays one.
    for _ in 0..3 {
        match journal.begin(&plain_refund(1)).expect("begin") {
            Begin::Done(stored) => assert_eq!(stored, reply(1)),
            other => panic!("expected Done, got {other:?}"),
        }
    }
    assert_eq!(credits(b, &url), 1);
    // No statements: finish_with is finish.
    let claim = new_claim(&journal, &plain_refund(2));
    journal.finish_with(&claim, &reply(2), &[]).expect("finish_with nothing");
    assert_eq!(state_of(&journal, 2), RecordState::Done);
    assert_eq!(credits(b, &url), 1);
}

fn a_failing_statement_leaves_nothing_and_the_claim_held(b: &dyn Backend) {
    let url = b.url("failing");
    let journal = journal_with_ledger(b, &url, &JournalOptions::default());
    let claim = new_claim(&journal, &plain_refund(1));
    let missing = Staged::new("INSERT INTO no_such_table (x) VALUES (1)", vec![]).unwrap();
    let error = journal.finish_with(&claim, &reply(1), &[credit(b, 1, 500), missing]).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Journal, "{error}");
    assert_eq!(error.field, "statements[1]", "{error}");
    assert!(error.message.contains("staged statement 2 (INSERT INTO no_such_table"), "{error}");
    assert!(error.message.contains("no_such_table"), "the database's words: {error}");
    // The first statement's credit went with the rollback; no reply was stored.
    assert_eq!(credits(b, &url), 0);
    assert_eq!(state_of(&journal, 1), RecordState::Claimed);
    // A unique violation is refused the same way, naming the first statement.
    b.exec(&url, "INSERT INTO credits (transaction_id, amount) VALUES (1, 1)");
    let error = journal.finish_with(&claim, &reply(1), &[credit(b, 1, 500)]).unwrap_err();
    assert_eq!(error.field, "statements[0]", "{error}");
    assert_eq!(state_of(&journal, 1), RecordState::Claimed);
    b.exec(&url, "DELETE FROM credits");
    // The claim is still this worker's: finishing again with good statements stores both.
    journal.finish_with(&claim, &reply(1), &[credit(b, 1, 500)]).expect("finish again");
    assert_eq!(credits(b, &url), 1);
    assert_eq!(state_of(&journal, 1), RecordState::Done);
}

fn a_claim_lost_to_another_delivery_runs_nothing(b: &dyn Backend) {
    let url = b.url("lost");
    let options = JournalOptions { lease: Duration::from_millis(50), ..JournalOptions::default() };
    let journal = journal_with_ledger(b, &url, &options);
    let first = new_claim(&journal, &plain_refund(1));
    std::thread::sleep(Duration::from_millis(120));
    let second = new_claim(&journal, &plain_refund(1));
    assert_eq!(second.attempt(), 2);
    let error = journal.finish_with(&first, &reply(1), &[credit(b, 1, 700)]).unwrap_err();
    assert_eq!(error.kind, ErrorKind::ClaimLost, "{error}");
    assert_eq!(credits(b, &url), 0, "the lost claim's statement never ran");
    journal.finish_with(&second, &reply(1), &[credit(b, 1, 700)]).expect("the holder finishes");
    assert_eq!(credits(b, &url), 1);
    // The holder finished first: the late worker is told its claim was lost (not that its
    // credit collided with the holder's), and nothing of its runs.
    let late = new_claim(&journal, &plain_refund(2));
    std::thread::sleep(Duration::from_millis(120));
    let holder = new_claim(&journal, &plain_refund(2));
    journal.finish_with(&holder, &reply(2), &[credit(b, 2, 700)]).expect("the holder finishes first");
    let error = journal.finish_with(&late, &reply(2), &[credit(b, 2, 700)]).unwrap_err();
    assert_eq!(error.kind, ErrorKind::ClaimLost, "{error}");
    assert_eq!(credits(b, &url), 2);
}

fn every_kind_of_value_reaches_its_column(b: &dyn Backend) {
    let url = b.url("kinds");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    let postgres = b.name().starts_with("postgres");
    // On PostgreSQL, text reaches numeric, uuid and timestamptz columns, and an integer a
    // smaller integer column: the server reads each in text format as its column's type.
    let table = if postgres {
        "CREATE TABLE kinds (small INTEGER, big BIGINT, txt TEXT, raw BYTEA, amount NUMERIC(12,2), id UUID, at TIMESTAMPTZ, flag BOOLEAN)"
    } else {
        "CREATE TABLE kinds (small INTEGER, big BIGINT, txt TEXT, raw BLOB, amount TEXT, id TEXT, at TEXT, flag INTEGER)"
    };
    b.exec(&url, table);
    let placeholders: Vec<String> = (1..=8).map(|n| b.param(n)).collect();
    let sql = format!("INSERT INTO kinds VALUES ({})", placeholders.join(", "));
    let rows = [
        vec![
            SqlValue::Int(7),
            SqlValue::Int(i64::MIN),
            SqlValue::Text("Grüße, 'quoted' \\ \"x\"".into()),
            SqlValue::Blob(vec![0, 1, 0xff, b'\\', b'x']),
            SqlValue::Text("12.34".into()),
            SqlValue::Text("123e4567-e89b-12d3-a456-426614174000".into()),
            SqlValue::Text("2026-11-26T08:00:00Z".into()),
            SqlValue::Int(1),
        ],
        vec![
            SqlValue::Null,
            SqlValue::Int(i64::MAX),
            SqlValue::Text(String::new()),
            SqlValue::Blob(Vec::new()),
            SqlValue::Null,
            SqlValue::Null,
            SqlValue::Null,
            SqlValue::Int(0),
        ],
    ];
    let claim = new_claim(&journal, &plain_refund(1));
    let staged: Vec<Staged> = rows.iter().map(|row| Staged::new(sql.clone(), row.clone()).unwrap()).collect();
    journal.finish_with(&claim, &reply(1), &staged).expect("finish_with");
    let checks = [
        "SELECT count(*) FROM kinds WHERE small = 7 AND big = -9223372036854775808 AND txt = 'Grüße, ''quoted'' \\ \"x\"'",
        "SELECT count(*) FROM kinds WHERE small IS NULL AND big = 9223372036854775807 AND txt = '' AND amount IS NULL",
    ];
    for check in checks {
        assert_eq!(b.count(&url, check), 1, "{check}");
    }
    if postgres {
        let typed = "SELECT count(*) FROM kinds WHERE raw = '\\x0001ff5c78'::bytea AND amount = 12.34 AND id = '123e4567-e89b-12d3-a456-426614174000' AND at = '2026-11-26 08:00:00+00' AND flag";
        assert_eq!(b.count(&url, typed), 1);
        assert_eq!(b.count(&url, "SELECT count(*) FROM kinds WHERE raw = ''::bytea AND NOT flag"), 1);
        // Bytes are sent as bytea: bound to a column of another type they are refused by the
        // server, naming the statement; to a text column PostgreSQL stores bytea's text form.
        let claim = new_claim(&journal, &plain_refund(2));
        let wrong = Staged::new("INSERT INTO kinds (big) VALUES ($1)", vec![SqlValue::Blob(vec![1])]).unwrap();
        let error = journal.finish_with(&claim, &reply(2), &[wrong]).unwrap_err();
        assert_eq!(error.field, "statements[0]", "{error}");
        assert!(error.message.contains("is of type bigint but expression is of type bytea"), "{error}");
        let as_text = Staged::new("INSERT INTO kinds (txt) VALUES ($1)", vec![SqlValue::Blob(vec![1, 0xff])]).unwrap();
        journal.finish_with(&claim, &reply(2), &[as_text]).expect("bytes to a text column");
        assert_eq!(b.count(&url, "SELECT count(*) FROM kinds WHERE txt = '\\x01ff'"), 1);
    } else {
        assert_eq!(b.count(&url, "SELECT count(*) FROM kinds WHERE raw = x'0001ff5c78' AND amount = '12.34'"), 1);
        assert_eq!(b.count(&url, "SELECT count(*) FROM kinds WHERE typeof(raw) = 'blob' AND length(raw) = 0"), 1);
    }
}

/// A statement that ends its own connection the first time it runs (a sequence counts the runs:
/// sequences are not rolled back): the transaction is run again whole on a fresh connection, the
/// reply and the credit are stored once; with the claim written by `begin` and at finish (whose
/// statements went with the storing one: nothing of them was stored).
fn a_connection_lost_among_the_statements_runs_them_again_once(b: &Postgres) {
    for (name, options) in [("connection_lost", JournalOptions::default()), ("connection_lost_at_finish", at_finish())]
    {
        let url = b.url(name);
        let journal = journal_with_ledger(b, &url, &options);
        b.exec(&url, "CREATE SEQUENCE runs");
        let claim = new_claim(&journal, &plain_refund(1));
        let kill_once =
            Staged::new("SELECT CASE WHEN nextval('runs') = 1 THEN pg_terminate_backend(pg_backend_pid()) END", vec![])
                .unwrap();
        journal.finish_with(&claim, &reply(1), &[credit(b, 1, 900), kill_once]).expect("finish_with, run again");
        assert_eq!(b.count(&url, "SELECT last_value FROM runs"), 2, "{name}: run twice: the first connection died");
        assert_eq!(credits(b, &url), 1, "{name}");
        assert_eq!(state_of(&journal, 1), RecordState::Done, "{name}");
    }
    println!("postgres a_connection_lost_among_the_statements_runs_them_again_once: ok");
}

/// A statement that returns rows (`RETURNING`) runs on both backends, its rows dropped.
fn rows_a_statement_returns_are_dropped(b: &dyn Backend) {
    let url = b.url("returned_rows");
    let journal = journal_with_ledger(b, &url, &JournalOptions::default());
    let claim = new_claim(&journal, &plain_refund(1));
    let sql =
        format!("INSERT INTO credits (transaction_id, amount) VALUES ({}, 5) RETURNING transaction_id", b.param(1));
    journal.finish_with(&claim, &reply(1), &[Staged::new(sql, vec![SqlValue::Int(1)]).unwrap()]).expect("finish_with");
    assert_eq!(credits(b, &url), 1);
}

/// A statement that changes the session in a way no check at staging sees (`set_config(...,
/// false)` of the search path): the journal's own statements after it find no table, so that
/// finish fails storing nothing, and the connection is dropped, not kept for the next delivery:
/// every later delivery is handled.
fn a_session_changed_by_a_statement_is_not_kept(b: &Postgres, kept: &str) {
    let url = b.url(&format!("session_changed{}", suffix(kept)));
    journal_with_ledger(b, &url, &JournalOptions::default());
    let journal = Journal::open(&format!("{url}{kept}"), &JournalOptions::default()).expect("open");
    b.exec(&url, "CREATE SCHEMA IF NOT EXISTS elsewhere");
    let claim = new_claim(&journal, &plain_refund(1));
    let away = Staged::new("SELECT set_config('search_path', 'elsewhere', false)", vec![]).unwrap();
    let error = journal.finish_with(&claim, &reply(1), &[credit(b, 1, 10), away]).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Journal, "{error}");
    assert_eq!(credits(b, &url), 0);
    journal.abandon(&claim).expect("abandon on a fresh connection");
    for n in 1..=6 {
        let claim = new_claim(&journal, &plain_refund(n));
        journal.finish_with(&claim, &reply(n), &[credit(b, n, 10)]).unwrap_or_else(|e| panic!("delivery {n}: {e}"));
    }
    assert_eq!(credits(b, &url), 6);
    println!("postgres a_session_changed_by_a_statement_is_not_kept{}: ok", suffix(kept));
}

/// A table changed under a statement run before on a kept connection (`RETURNING *` after a
/// column was added, which a statement kept prepared fails with "cached plan must not change
/// result type"): no later finish fails, the staged statements kept prepared too (`kept`: the
/// delivery runs again on a fresh connection, where it is prepared again).
fn a_table_changed_under_a_kept_connection_fails_no_later_finish(b: &Postgres, kept: &str) {
    let url = b.url(&format!("plan_changed{}", suffix(kept)));
    journal_with_ledger(b, &url, &JournalOptions::default());
    let journal = Journal::open(&format!("{url}{kept}"), &JournalOptions::default()).expect("open");
    let claim = new_claim(&journal, &plain_refund(1));
    journal.finish_with(&claim, &reply(1), &[returning(1)]).expect("first");
    b.exec(&url, "ALTER TABLE credits ADD COLUMN extra TEXT");
    for n in 2..=4 {
        let claim = new_claim(&journal, &plain_refund(n));
        journal.finish_with(&claim, &reply(n), &[returning(n)]).unwrap_or_else(|e| panic!("delivery {n}: {e}"));
    }
    assert_eq!(credits(b, &url), 4);
    println!("postgres a_table_changed_under_a_kept_connection_fails_no_later_finish{}: ok", suffix(kept));
}

/// Refund `n`'s credit of 5, answering its row (`RETURNING *`): a statement whose result type
/// changes with its table, which a statement kept prepared then fails ("cached plan must not
/// change result type").
fn returning(n: i64) -> Staged {
    Staged::new("INSERT INTO credits (transaction_id, amount) VALUES ($1, 5) RETURNING *", vec![SqlValue::Int(n)])
        .unwrap()
}

/// A behaviour's name's suffix for a URL keeping statements prepared (`kept`).
fn suffix(kept: &str) -> &'static str {
    if kept.is_empty() { "" } else { "_kept" }
}

/// Where the journal's statements are kept prepared (`kept`), the partner's staged ones are
/// too, prepared in the protocol's way (not by `PREPARE`) once a connection: a statement staged
/// after the credit finds the credit's among the session's prepared statements at every
/// delivery. Sent unnamed, they never are.
fn staged_statements_are_kept_prepared_where_the_journals_are(b: &Postgres, kept: &str) {
    let url = b.url(&format!("staged_prepared{}", suffix(kept)));
    journal_with_ledger(b, &url, &JournalOptions::default());
    b.exec(&url, "CREATE TABLE observed (n BIGINT NOT NULL, prepared BIGINT NOT NULL)");
    let journal = Journal::open(&format!("{url}{kept}"), &JournalOptions::default()).expect("open");
    let credit_sql = credit(b, 0, 0).sql().to_owned();
    let observe = |n: i64| {
        let sql = "INSERT INTO observed SELECT $1, count(*) FROM pg_prepared_statements WHERE NOT from_sql AND statement = $2";
        Staged::new(sql, vec![SqlValue::Int(n), SqlValue::Text(credit_sql.clone())]).unwrap()
    };
    for n in 1..=3 {
        let claim = new_claim(&journal, &plain_refund(n));
        journal.finish_with(&claim, &reply(n), &[credit(b, n, 10), observe(n)]).expect("finish");
    }
    assert_eq!(credits(b, &url), 3);
    let prepared = b.count(&url, "SELECT count(*) FROM observed WHERE prepared = 1");
    assert_eq!(prepared, if kept.is_empty() { 0 } else { 3 }, "deliveries that found the credit prepared");
    println!("postgres staged_statements_are_kept_prepared_where_the_journals_are{}: ok", suffix(kept));
}

fn at_finish() -> JournalOptions {
    JournalOptions { claim_at_finish: true, ..JournalOptions::default() }
}

/// A claim written at finish whose second of three statements fails: the error names it, and
/// nothing is stored (neither the first statement's credit, nor the delivery, nor the third);
/// the event is new to the next delivery, which stores it all.
fn at_finish_a_failing_statement_among_several_stores_nothing(b: &dyn Backend) {
    let url = b.url("at_finish_failing");
    let journal = journal_with_ledger(b, &url, &at_finish());
    let claim = new_claim(&journal, &plain_refund(1));
    let missing = Staged::new("INSERT INTO no_such_table (x) VALUES (1)", vec![]).unwrap();
    let error = journal.finish_with(&claim, &reply(1), &[credit(b, 1, 500), missing, credit(b, 2, 500)]).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Journal, "{error}");
    assert_eq!(error.field, "statements[1]", "{error}");
    assert!(error.message.contains("staged statement 2 (INSERT INTO no_such_table"), "{error}");
    assert!(error.message.contains("no_such_table"), "the database's words: {error}");
    assert_eq!(credits(b, &url), 0);
    assert!(journal.lookup(1).expect("lookup").is_empty(), "no delivery stored");
    // The last statement failing (a unique violation) is named the same way.
    b.exec(&url, "INSERT INTO credits (transaction_id, amount) VALUES (2, 1)");
    let claim = new_claim(&journal, &plain_refund(1));
    let error = journal.finish_with(&claim, &reply(1), &[credit(b, 1, 500), credit(b, 2, 500)]).unwrap_err();
    assert_eq!(error.field, "statements[1]", "{error}");
    assert_eq!(credits(b, &url), 1, "only the row inserted by hand");
    b.exec(&url, "DELETE FROM credits");
    let claim = new_claim(&journal, &plain_refund(1));
    journal.finish_with(&claim, &reply(1), &[credit(b, 1, 500), credit(b, 2, 500)]).expect("finish");
    assert_eq!(credits(b, &url), 2);
    assert_eq!(state_of(&journal, 1), RecordState::Done);
}

/// A direct connection keeping statements prepared has the claim at finish's guard statement
/// prepared by name (`sp_journal_guard`): a partner's function that drops the session's prepared
/// statements (`DEALLOCATE ALL` in PL/pgSQL, which the check at staging cannot see) in a
/// delivery stored by the unnamed function (a cache of one statement, taken) costs the next
/// delivery a fresh connection, never a failure: every delivery is stored, each credited once.
fn the_guard_statement_dropped_by_a_partners_function_is_prepared_again(b: &Postgres) {
    let url = b.url("guard_deallocated");
    journal_with_ledger(b, &url, &at_finish());
    let journal = Journal::open(&format!("{url}&statement_cache_size=1"), &at_finish()).unwrap();
    b.exec(
        &url,
        "CREATE FUNCTION drop_prepared() RETURNS void LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'DEALLOCATE ALL'; END $$",
    );
    let dropping = || Staged::new("SELECT drop_prepared()", vec![]).unwrap();
    for n in 1..=6 {
        let claim = new_claim(&journal, &plain_refund(n));
        let mut staged = vec![credit(b, n, 10)];
        if n % 2 == 1 {
            staged.push(dropping());
        }
        journal.finish_with(&claim, &reply(n), &staged).unwrap_or_else(|e| panic!("delivery {n}: {e}"));
    }
    assert_eq!(credits(b, &url), 6);
    assert_eq!(b.count(&url, "SELECT count(*) FROM sp_journal_delivery WHERE state = 'done'"), 6);
    println!("postgres the_guard_statement_dropped_by_a_partners_function_is_prepared_again: ok");
}

/// A staged statement that unsets the transaction's guard (as one ending the transaction would
/// leave it unset, which the check at staging lets through as a function call): the finish of a
/// claim at finish fails, saying a statement ended the transaction, and nothing of the
/// transaction stays (the credit staged before it rolled back, no delivery stored); the next
/// delivery stores it all. SQLite has no such guard: there the statement is a plain read.
fn a_statement_unsetting_the_guard_stores_nothing_at_finish(b: &dyn Backend) {
    if b.name() == "sqlite" {
        return;
    }
    let url = b.url("guard_unset");
    let journal = journal_with_ledger(b, &url, &at_finish());
    let unset = Staged::new("SELECT set_config('slotpartner.guard', 'off', true)", vec![]).unwrap();
    let claim = new_claim(&journal, &plain_refund(1));
    let error = journal.finish_with(&claim, &reply(1), &[credit(b, 1, 500), unset]).unwrap_err();
    assert_eq!((error.kind, error.field.as_str()), (ErrorKind::Journal, "statements"), "{error}");
    assert!(error.message.contains("a staged statement ended the journal's transaction"), "{error}");
    assert_eq!(credits(b, &url), 0, "the credit staged before it rolled back");
    assert!(journal.lookup(1).expect("lookup").is_empty(), "no delivery stored");
    let claim = new_claim(&journal, &plain_refund(1));
    journal.finish_with(&claim, &reply(1), &[credit(b, 1, 500)]).expect("finish");
    assert_eq!((credits(b, &url), state_of(&journal, 1)), (1, RecordState::Done));
}

/// Through a proxy that counts the client's turns to speak (a round trip each), from a new
/// connection's first delivery (nothing is prepared): with a claim written at finish, `begin` is one round
/// trip (is the key held?) and `finish` with two statements is one (`BEGIN`, the statements, the
/// storing statement and `COMMIT` sent together); with the claim written by `begin`, one (the
/// claim) and three (`BEGIN` with the statement confirming the claim; the statements and the
/// storing one; `COMMIT`). The same with the journal's statements kept prepared (`kept`), whose
/// first delivery prepares them too.
fn round_trips_of_a_delivery(b: &Postgres, kept: &str) {
    for (name, options, expected) in
        [("round_trips_at_finish", at_finish(), (1, 1)), ("round_trips", JournalOptions::default(), (1, 3))]
    {
        let name = format!("{name}{}", if kept.is_empty() { "" } else { "_kept" });
        let url = b.url(&name);
        journal_with_ledger(b, &url, &options);
        let turns = Turns::start(b.0.port());
        let proxied = url.replacen(&format!(":{}/", b.0.port()), &format!(":{}/", turns.port), 1) + kept;
        let journal = Journal::open(&proxied, &options).expect("open through the proxy");
        let mut counted = Vec::new();
        for n in 1..=7 {
            let before = turns.count();
            let claim = new_claim(&journal, &plain_refund(n));
            let begun = turns.count();
            journal.finish_with(&claim, &reply(n), &[credit(b, n, 10), credit(b, n + 100, 10)]).expect("finish");
            counted.push((begun - before, turns.count() - begun));
        }
        // A call that counts an index seen may also merge the seen indexes (one in 256 of a
        // process's, the first one when the process id is a multiple of 256): a finish, or with
        // the claim written by `begin`, a begin. At most one of seven does, and the first
        // delivery may prepare statements.
        assert!(
            counted.iter().all(|&(begin, finish)| begin >= expected.0 && finish >= expected.1),
            "{name}: {counted:?}"
        );
        assert!(counted.iter().filter(|&&c| c == expected).count() >= 5, "{name} (begin, finish): {counted:?}");
        assert_eq!(credits(b, &url), 14);
        println!("postgres {name}: ok ((begin, finish) round trips: {counted:?})");
    }
}

/// A TCP proxy to the cluster counting the client's turns: the times it sends after the server
/// answered (or first). A request whose messages are written together is one turn.
struct Turns {
    port: u16,
    turns: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Turns {
    fn start(server_port: u16) -> Turns {
        use std::io::{Read, Write};
        use std::net::{TcpListener, TcpStream};
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let turns = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&turns);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", server_port)) else { continue };
                let answered = Arc::new(AtomicBool::new(true));
                let pipe = |mut from: TcpStream, mut to: TcpStream, on_read: Box<dyn Fn() + Send>| {
                    std::thread::spawn(move || {
                        let mut buffer = vec![0; 1 << 16];
                        while let Ok(n @ 1..) = from.read(&mut buffer) {
                            on_read();
                            if to.write_all(&buffer[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                };
                let (spoke, heard) = (Arc::clone(&answered), Arc::clone(&answered));
                let counted = Arc::clone(&counted);
                pipe(
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    Box::new(move || {
                        if spoke.swap(false, Ordering::SeqCst) {
                            counted.fetch_add(1, Ordering::SeqCst);
                        }
                    }),
                );
                pipe(server, client, Box::new(move || heard.store(true, Ordering::SeqCst)));
            }
        });
        Turns { port, turns }
    }

    fn count(&self) -> usize {
        self.turns.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The numbering's lock held past the journal's lock time-out while a claim at finish finishes
/// (the transaction's `BEGIN`, which takes the lock shared, written with the staged statements):
/// the lock wait's failure is the journal's (transient: deliver again), not the partner's
/// statement's, and nothing is stored.
fn a_lock_wait_of_the_begin_is_not_blamed_on_a_staged_statement(b: &Postgres, kept: &str) {
    const NUMBERING_LOCK: i64 = 8318265534402355826; // `spjnumbr`, the journal's
    let url = b.url(&format!("lock_wait_blame{}", suffix(kept)));
    let options = JournalOptions { lock_timeout: Duration::from_secs(1), ..at_finish() };
    journal_with_ledger(b, &url, &options);
    // Where statements are kept, the new text is prepared in the round trip the lock waits in.
    let journal = Journal::open(&format!("{url}{kept}"), &options).expect("open");
    // A delivery finished before the lock is taken.
    let claim = new_claim(&journal, &plain_refund(1));
    journal.finish_with(&claim, &reply(1), &[credit(b, 1, 10)]).expect("first finish");
    let (held, holding) = std::sync::mpsc::channel();
    let holder_url = url.clone();
    let holder = std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&holder_url, postgres::NoTls).unwrap();
        client.execute("SELECT pg_advisory_lock($1)", &[&NUMBERING_LOCK]).unwrap();
        held.send(()).unwrap();
        // Past the journal's lock time-out (1 s), released before a second wait would time out.
        std::thread::sleep(Duration::from_millis(1500));
        client.execute("SELECT pg_advisory_unlock($1)", &[&NUMBERING_LOCK]).unwrap();
    });
    holding.recv().unwrap();
    let claim = new_claim(&journal, &plain_refund(2));
    let new_text = Staged::new(
        "INSERT INTO credits (transaction_id, amount, note) VALUES ($1, 10, 'new')",
        vec![SqlValue::Int(2)],
    )
    .unwrap();
    let error = journal.finish_with(&claim, &reply(2), &[new_text]).unwrap_err();
    holder.join().unwrap();
    assert_eq!(error.kind, ErrorKind::Journal, "{error}");
    assert!(error.message.contains("lock timeout"), "{error}");
    assert_eq!(error.field, "", "the journal's lock wait blamed on the partner's statement: {error}");
    assert!(!error.message.contains("staged statement"), "{error}");
    assert_eq!(credits(b, &url), 1);
    assert!(journal.lookup(2).expect("lookup").is_empty());
    println!("postgres a_lock_wait_of_the_begin_is_not_blamed_on_a_staged_statement{}: ok", suffix(kept));
}

/// A statement whose parameter the server refuses (bytes for a bigint column), between two others:
/// it is named, nothing is stored, and the statement after it never ran (a sequence, which a
/// rollback does not undo, was not advanced), with the claim written by `begin` and at finish.
fn a_refused_statement_keeps_the_ones_after_it_from_running(b: &Postgres) {
    for (name, options) in [("refused_unsent", JournalOptions::default()), ("refused_unsent_at_finish", at_finish())] {
        let url = b.url(name);
        let journal = journal_with_ledger(b, &url, &options);
        b.exec(&url, "CREATE SEQUENCE after_refused");
        let claim = new_claim(&journal, &plain_refund(1));
        let bytes = Staged::new("UPDATE credits SET amount = $1", vec![SqlValue::Blob(vec![1, 2])]).unwrap();
        let after = Staged::new("SELECT nextval('after_refused')", vec![]).unwrap();
        let error = journal.finish_with(&claim, &reply(1), &[credit(b, 1, 10), bytes, after]).unwrap_err();
        assert_eq!(error.field, "statements[1]", "{name}: {error}");
        assert!(error.message.contains("is of type bigint but expression is of type bytea"), "{name}: {error}");
        assert_eq!(credits(b, &url), 0, "{name}");
        let ran = b.count(&url, "SELECT count(*) FROM after_refused WHERE is_called");
        assert_eq!(ran, 0, "{name}: the statement after the refused one ran");
    }
    println!("postgres a_refused_statement_keeps_the_ones_after_it_from_running: ok");
}

/// A claim handed out by `begin_optimistic`.
fn optimistic_claim(journal: &Journal, delivery: &slotpartner::journal::Delivery) -> slotpartner::journal::Claim {
    match journal.begin_optimistic(delivery).expect("begin_optimistic") {
        Begin::New(claim) => claim,
        other => panic!("expected New for {:?}, got {other:?}", delivery.key()),
    }
}

/// Logic run optimistically (`begin_optimistic`, `finish_optimistic`): a new delivery is stored
/// with its credit; a repeat, handed out as new without reading the journal, runs nothing and
/// gets the stored reply (not its own), counted as a replay with its index; the credit stays
/// one. Without `claim_at_finish` the call is refused, naming the option.
fn optimistic_deliveries_store_once_and_repeats_get_the_stored_reply(b: &dyn Backend) {
    let url = b.url("optimistic_once");
    let journal = journal_with_ledger(b, &url, &at_finish());
    for n in 1..=3 {
        let claim = optimistic_claim(&journal, &plain_refund(n));
        match journal.finish_optimistic(&claim, &plain_refund(n), &reply(n), &[credit(b, n, 100)]).expect("finish") {
            Finished::Stored => {}
            other => panic!("expected Stored, got {other:?}"),
        }
    }
    assert_eq!(credits(b, &url), 3);
    assert_eq!(state_of(&journal, 2), RecordState::Done);
    for _ in 0..2 {
        let claim = optimistic_claim(&journal, &plain_refund(2));
        match journal.finish_optimistic(&claim, &plain_refund(2), &reply(99), &[credit(b, 2, 100)]).expect("repeat") {
            Finished::Answered(Begin::Done(stored)) => assert_eq!(stored, reply(2)),
            other => panic!("expected the stored reply, got {other:?}"),
        }
    }
    // The very same reply: the event was handled once and this is its reply.
    let claim = optimistic_claim(&journal, &plain_refund(2));
    assert!(matches!(
        journal.finish_optimistic(&claim, &plain_refund(2), &reply(2), &[credit(b, 2, 100)]).expect("alike"),
        Finished::Stored
    ));
    assert_eq!(credits(b, &url), 3, "a repeat credits nothing");
    let status = journal.status().expect("status");
    assert_eq!((status.handled, status.replayed, status.missing, status.highest_index), (3, 3, 0, Some(3)));
    let refused = Journal::open(&url, &JournalOptions::default()).expect("open").begin_optimistic(&plain_refund(4));
    let error = refused.expect_err("without claim_at_finish");
    assert_eq!((error.kind, error.field.as_str()), (ErrorKind::InvalidArgument, "claim_at_finish"), "{error}");
}

/// A repeat with other content is refused and recorded as `begin` refuses it, and credits
/// nothing; an abandoned delivery is taken over and stored with this run's reply and credit; a
/// claim handed out before a renumbering stores nothing (`ClaimLost`), and the next delivery
/// of the event, in the new numbering, is stored.
fn optimistic_conflicts_takeovers_and_renumberings_answer_as_begin(b: &dyn Backend) {
    let url = b.url("optimistic_answers");
    let journal = journal_with_ledger(b, &url, &at_finish());
    let claim = optimistic_claim(&journal, &plain_refund(1));
    assert!(matches!(
        journal.finish_optimistic(&claim, &plain_refund(1), &reply(1), &[credit(b, 1, 5)]).unwrap(),
        Finished::Stored
    ));
    let other = refund(1, 1, "another-request");
    let claim = optimistic_claim(&journal, &other);
    match journal.finish_optimistic(&claim, &other, &reply(7), &[credit(b, 1, 7)]).expect("conflict") {
        Finished::Answered(Begin::Conflict(error)) => assert_eq!(error.kind, ErrorKind::Conflict, "{error}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(journal.conflicts(false, 10).expect("conflicts").len(), 1);
    assert_eq!(credits(b, &url), 1);

    let claim = optimistic_claim(&journal, &plain_refund(2));
    journal.abandon(&claim).expect("abandon");
    assert_eq!(state_of(&journal, 2), RecordState::Abandoned);
    let claim = optimistic_claim(&journal, &plain_refund(2));
    assert!(matches!(
        journal.finish_optimistic(&claim, &plain_refund(2), &reply(2), &[credit(b, 2, 5)]).expect("taken over"),
        Finished::Stored
    ));
    assert_eq!(state_of(&journal, 2), RecordState::Done);
    assert_eq!(credits(b, &url), 2);

    let claim = optimistic_claim(&journal, &plain_refund(3));
    journal.renumber(1, "the service restarted its indexes").expect("renumber");
    let error = journal.finish_optimistic(&claim, &plain_refund(3), &reply(3), &[credit(b, 3, 5)]).unwrap_err();
    assert_eq!(error.kind, ErrorKind::ClaimLost, "{error}");
    assert_eq!(credits(b, &url), 2, "nothing stored");
    assert!(journal.lookup(3).expect("lookup").is_empty());
    let claim = optimistic_claim(&journal, &plain_refund(3));
    assert!(matches!(
        journal.finish_optimistic(&claim, &plain_refund(3), &reply(3), &[credit(b, 3, 5)]).expect("finish"),
        Finished::Stored
    ));
    assert_eq!(credits(b, &url), 3);
}

/// Optimistic deliveries whose statements a repeat does not collide with (a ledger without a
/// unique key, made exactly once by the journal alone): the storing statement finds the repeat
/// (its key stored), which gets the stored reply and pays nothing; a claim handed out before a
/// renumbering stores nothing (`ClaimLost`), and the process's next deliveries, which read the
/// numbering again, are stored.
fn optimistic_repeats_and_renumberings_found_by_the_storing_statement(b: &dyn Backend) {
    let url = b.url("optimistic_found_at_finish");
    let journal = Journal::open(&url, &at_finish()).expect("open");
    b.exec(&url, PAYMENTS);
    let pay = |n: i64| payment(b, n);
    let paid = |n: i64| b.count(&url, &format!("SELECT count(*) FROM payments WHERE transaction_id = {n}"));
    let claim = optimistic_claim(&journal, &plain_refund(1));
    let stored = journal.finish_optimistic(&claim, &plain_refund(1), &reply(1), &[pay(1)]).expect("first");
    assert!(matches!(stored, Finished::Stored), "{stored:?}");
    for _ in 0..2 {
        let claim = optimistic_claim(&journal, &plain_refund(1));
        match journal.finish_optimistic(&claim, &plain_refund(1), &reply(99), &[pay(1)]).expect("a repeat") {
            Finished::Answered(Begin::Done(stored)) => assert_eq!(stored, reply(1)),
            other => panic!("expected the stored reply, got {other:?}"),
        }
    }
    assert_eq!(paid(1), 1, "a repeat paid");
    let claim = optimistic_claim(&journal, &plain_refund(2));
    journal.renumber(1, "the service restarted its indexes").expect("renumber");
    let error = journal.finish_optimistic(&claim, &plain_refund(2), &reply(2), &[pay(2)]).unwrap_err();
    assert_eq!(error.kind, ErrorKind::ClaimLost, "{error}");
    assert_eq!(paid(2), 0);
    for n in [2, 3] {
        let claim = optimistic_claim(&journal, &plain_refund(n));
        let stored = journal.finish_optimistic(&claim, &plain_refund(n), &reply(n), &[pay(n)]);
        assert!(matches!(stored, Ok(Finished::Stored)), "delivery {n} after the renumbering: {stored:?}");
        assert_eq!(paid(n), 1);
    }
}

/// A repeat of a delivery whose reply was pruned, run optimistically: the journal holds its key,
/// so the run is not stored; the claim is handed back flagged (`reply_pruned`) and released, as
/// the endpoint releases it; the next repeat is handed back flagged again, never stored with the
/// statements of a run that did not know (a ledger without a unique key would pay twice).
fn an_optimistic_repeat_of_a_pruned_delivery_never_runs_blind(b: &dyn Backend) {
    let url = b.url("optimistic_pruned");
    let journal = Journal::open(&url, &at_finish()).expect("open");
    b.exec(&url, PAYMENTS);
    let pay = |n: i64| payment(b, n);
    let claim = optimistic_claim(&journal, &plain_refund(1));
    assert!(matches!(
        journal.finish_optimistic(&claim, &plain_refund(1), &reply(1), &[pay(1)]).unwrap(),
        Finished::Stored
    ));
    b.exec(
        &url,
        &format!(
            "UPDATE sp_journal_delivery SET finished_ms = finished_ms - {} WHERE key = 'gameSessionBuyRefund:1'",
            100 * DAY_MS
        ),
    );
    let claim = optimistic_claim(&journal, &plain_refund(2));
    assert!(matches!(
        journal.finish_optimistic(&claim, &plain_refund(2), &reply(2), &[pay(2)]).unwrap(),
        Finished::Stored
    ));
    assert_eq!(journal.prune(&PruneOptions::older_than(days(90))).expect("prune").compacted, 1);
    for attempt in 2..=3 {
        let claim = optimistic_claim(&journal, &plain_refund(1));
        match journal.finish_optimistic(&claim, &plain_refund(1), &reply(1), &[pay(1)]).expect("repeat") {
            Finished::Answered(Begin::New(taken)) => {
                assert!(taken.reply_pruned() && taken.attempt() == attempt, "{taken:?}");
                journal.abandon(&taken).expect("released");
            }
            other => panic!("attempt {attempt}: expected the claim handed back, got {other:?}"),
        }
    }
    assert_eq!(b.count(&url, "SELECT count(*) FROM payments WHERE transaction_id = 1"), 1, "paid once");
}

/// Through the counting proxy: once the process knows the numbering, an optimistic delivery is
/// no round trip at `begin` and one at `finish` (`BEGIN`, the statements, the storing one and
/// `COMMIT` sent together), and one transaction; the same with the journal's statements kept
/// prepared (`kept`), once they are.
fn round_trips_of_an_optimistic_delivery(b: &Postgres, kept: &str) {
    let url = b.url(if kept.is_empty() { "round_trips_optimistic" } else { "round_trips_optimistic_kept" });
    journal_with_ledger(b, &url, &at_finish());
    let turns = Turns::start(b.0.port());
    let proxied = url.replacen(&format!(":{}/", b.0.port()), &format!(":{}/", turns.port), 1) + kept;
    let journal = Journal::open(&proxied, &at_finish()).expect("open through the proxy");
    let mut counted = Vec::new();
    for n in 1..=6 {
        let before = turns.count();
        let claim = optimistic_claim(&journal, &plain_refund(n));
        let begun = turns.count();
        let finished = journal.finish_optimistic(&claim, &plain_refund(n), &reply(n), &[credit(b, n, 10)]);
        assert!(matches!(finished.expect("finish"), Finished::Stored));
        counted.push((begun - before, turns.count() - begun));
    }
    assert!(counted[1..].iter().all(|&(begin, finish)| begin == 0 && finish >= 1), "{counted:?}");
    assert!(counted[1..].iter().filter(|&&c| c == (0, 1)).count() >= 4, "(begin, finish): {counted:?}");
    assert_eq!(credits(b, &url), 6);
    println!("postgres round_trips_of_an_optimistic_delivery: ok ((begin, finish) round trips: {counted:?})");
}
