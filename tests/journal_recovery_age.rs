//! The recovery plan with a minimum age (`Journal::recovery_plan_older_than`), on SQLite and on a
//! throw-away PostgreSQL cluster (skipped with a message when PostgreSQL is not installed): gaps
//! found missing and deliveries abandoned a moment ago are left for a later run, older ones are
//! planned, and `recovery_plan(limit)` keeps planning everything. A time recorded on a clock
//! ahead by more than a minute dates nothing: what it dates counts as old enough.
//!
//! Times are moved back with SQL behind the library's back.

use std::time::Duration;

use slotpartner::journal::{Begin, Delivery, FetchOutcome, Journal, JournalOptions};
use slotpartner::{ParseOptions, parse};

#[path = "e2e/cluster.rs"]
mod cluster;
use cluster::{Cluster, TempDir};

fn refund(n: i64) -> Delivery {
    let body = format!(
        r#"{{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-{n}","playerIdentifier":"player-1","transactionId":{n},"buyTransactionId":{},"gameSessionId":5,"partnerGameRequestIdentifier":"req-{n}","gameId":3,"isMobile":false,"index":{n}}}"#,
        n + 1_000_000
    );
    Delivery::of(&parse(body.as_bytes(), &ParseOptions::default()).expect("a valid body"))
}

fn handle(journal: &Journal, n: i64) {
    let Begin::New(claim) = journal.begin(&refund(n)).unwrap() else { panic!("new {n}") };
    journal.finish(&claim, b"{}").unwrap();
}

fn check(url: &str, exec: &dyn Fn(&str)) {
    let options = JournalOptions { first_index: Some(1), ..JournalOptions::default() };
    let journal = Journal::open(url, &options).unwrap();
    // 1 and 4 handled (gap 2-3), 5 abandoned, 7 handled (gap 6).
    for n in [1, 4, 7] {
        handle(&journal, n);
    }
    let Begin::New(claim) = journal.begin(&refund(5)).unwrap() else { panic!("new 5") };
    journal.abandon(&claim).unwrap();
    let minute = Duration::from_secs(60);

    // Everything is a moment old: nothing is planned with a minute's minimum age.
    assert_eq!(journal.recovery_plan(100).unwrap(), vec![5, 2, 3, 6]);
    assert_eq!(journal.recovery_plan_older_than(100, Duration::ZERO).unwrap(), vec![5, 2, 3, 6]);
    assert_eq!(journal.recovery_plan_older_than(100, minute).unwrap(), Vec::<i64>::new());

    // Abandoned two minutes ago: planned.
    exec("UPDATE sp_journal_delivery SET updated_ms = updated_ms - 120000 WHERE first_index = 5");
    assert_eq!(journal.recovery_plan_older_than(100, minute).unwrap(), vec![5]);

    // Index 4 first seen two minutes ago: gap 2-3 was found missing then; gap 6 is still young.
    exec("UPDATE sp_journal_runs SET since_ms = since_ms - 120000 WHERE lo = 4");
    assert_eq!(journal.recovery_plan_older_than(100, minute).unwrap(), vec![5, 2, 3]);
    assert_eq!(journal.recovery_plan_older_than(2, minute).unwrap(), vec![5, 2]);

    // Tried before: still planned when old enough (after the untried), never when young.
    journal.note_fetch(2, FetchOutcome::Failed).unwrap();
    journal.note_fetch(6, FetchOutcome::Failed).unwrap();
    assert_eq!(journal.recovery_plan_older_than(100, minute).unwrap(), vec![5, 3, 2]);
    assert_eq!(journal.recovery_plan(100).unwrap(), vec![5, 3, 2, 6]);
    assert_eq!(journal.recovery_plan_older_than(100, Duration::from_secs(3600)).unwrap(), Vec::<i64>::new());

    // A clock ahead: the host that first saw index 7 had its clock ahead. Half a minute ahead is
    // a difference between hosts: gap 6 is as young as that time says.
    let hour = Duration::from_secs(3600);
    exec("UPDATE sp_journal_runs SET since_ms = since_ms + 30000 WHERE lo = 7");
    assert_eq!(journal.recovery_plan_older_than(100, minute).unwrap(), vec![5, 3, 2]);
    assert_eq!(journal.missing_older_than(minute, 100).unwrap(), vec![(2, 3)]);
    // A day ahead dates nothing: gap 6 counts as old enough, whatever the minimum age.
    exec("UPDATE sp_journal_runs SET since_ms = since_ms + 86400000 WHERE lo = 7");
    assert_eq!(journal.recovery_plan_older_than(100, minute).unwrap(), vec![5, 3, 2, 6]);
    assert_eq!(journal.recovery_plan_older_than(100, hour).unwrap(), vec![6]);
    assert_eq!(journal.missing_older_than(hour, 100).unwrap(), vec![(6, 6)]);
    assert_eq!(journal.missing_older_than(minute, 100).unwrap(), vec![(2, 3), (6, 6)]);
    // The same for a delivery abandoned on a clock a day ahead.
    exec("UPDATE sp_journal_delivery SET updated_ms = updated_ms + 86400000 WHERE first_index = 5");
    assert_eq!(journal.recovery_plan_older_than(100, hour).unwrap(), vec![5, 6]);
    // Without a minimum age, everything, as before.
    assert_eq!(journal.recovery_plan(100).unwrap(), vec![5, 3, 2, 6]);
}

#[test]
fn sqlite_recovery_plan_by_age() {
    let dir = TempDir::new("slotpartner-recovery-age");
    let path = dir.0.join("journal.db");
    let exec = |statement: &str| {
        let db = rusqlite::Connection::open(&path).unwrap();
        db.busy_timeout(Duration::from_secs(5)).unwrap();
        db.execute_batch(statement).unwrap();
    };
    check(&format!("sqlite:{}", path.display()), &exec);
}

#[test]
fn postgres_recovery_plan_by_age() {
    let Some(cluster) = Cluster::start("PostgreSQL recovery plan by age") else { return };
    let url = cluster.schema_url("recovery_age");
    let exec = |statement: &str| {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client.batch_execute(statement).unwrap();
    };
    check(&url, &exec);
}
