//! Retention and the journal's vitals, on SQLite and on a throw-away PostgreSQL cluster (skipped
//! with a message when PostgreSQL is not installed): `prune` compacts what is old and nothing
//! else, a repeat of a compacted delivery is never silent, `forget_older_than` removes compact
//! records, pruning runs beside a burst of deliveries, SQLite gives the space back, and the gap
//! ages behind `missing_older_than` and `Status::oldest_gap_ms`.
//!
//! Records are aged by moving their times back with SQL behind the library's back (the
//! retention's minimum is a day).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use slotpartner::ErrorKind;
use slotpartner::journal::{Begin, Journal, JournalOptions, PruneOptions, RecordState};

#[path = "e2e/cluster.rs"]
mod cluster;
use cluster::{Cluster, TempDir};

#[path = "e2e/backends.rs"]
mod backends;
use backends::{Backend, Postgres, Sqlite, run_suite};

#[path = "e2e/refunds.rs"]
mod refunds;
use refunds::{DAY_MS, days, delivery, handle, new_claim, plain_refund, refund, reply, state_of};

/// Moves every time of the deliveries with `transaction_id <= up_to` back by `days`.
fn age(b: &dyn Backend, url: &str, up_to: i64, days: i64) {
    let shift = days * DAY_MS;
    b.exec(
        url,
        &format!(
            "UPDATE sp_journal_delivery SET created_ms = created_ms - {shift}, updated_ms = updated_ms - {shift}, finished_ms = finished_ms - {shift} WHERE transaction_id <= {up_to}"
        ),
    );
}

type Behaviour = fn(&dyn Backend);

const SUITE: &[(&str, Behaviour)] = &[
    ("prune_compacts_only_what_is_old_and_settled", prune_compacts_only_what_is_old_and_settled),
    ("a_repeat_of_a_pruned_delivery_is_never_silent", a_repeat_of_a_pruned_delivery_is_never_silent),
    ("compact_records_are_forgotten_only_when_asked", compact_records_are_forgotten_only_when_asked),
    ("prune_beside_a_burst", prune_beside_a_burst),
    ("gap_ages_and_vitals", gap_ages_and_vitals),
    ("retention_run_by_the_library", retention_run_by_the_library),
    ("a_journal_of_version_2_migrates", a_journal_of_version_2_migrates),
];

#[test]
fn sqlite_retention() {
    run_suite(SUITE, "sqlite", &Sqlite(TempDir::new("slotpartner-retention")));
}

#[test]
fn postgres_retention() {
    let Some(cluster) = Cluster::start("PostgreSQL retention") else { return };
    run_suite(SUITE, "postgres", &Postgres(cluster));
}

// ---------------------------------------------------------------------------------------------
// Behaviours

fn prune_compacts_only_what_is_old_and_settled(b: &dyn Backend) {
    let url = b.url("compacts");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    for n in 1..=10 {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    // 11 abandoned, 12 claimed and left (its worker "died"), 13 finished with a conflict open.
    let abandoned = new_claim(&journal, &plain_refund(11));
    journal.abandon(&abandoned).unwrap();
    let _held = new_claim(&journal, &plain_refund(12));
    handle(&journal, &plain_refund(13), &reply(13));
    assert!(matches!(journal.begin(&refund(13, 13, "other")).unwrap(), Begin::Conflict(_)));
    // Index 15 never came: a gap that must stay.
    handle(&journal, &plain_refund(16), &reply(16));
    let missing_before = journal.missing(10).unwrap();
    assert_eq!(missing_before, vec![(14, 15)]);
    age(b, &url, 13, 100);

    let report = journal.prune(&PruneOptions::older_than(days(90))).unwrap();
    assert_eq!(report.compacted, 10, "{report:?}");
    assert!(report.complete && report.batches >= 2, "{report:?}");
    for n in 1..=10 {
        assert_eq!(state_of(&journal, n), RecordState::Pruned, "delivery {n}");
        assert_eq!(journal.lookup(n).unwrap()[0].reply, None);
    }
    assert_eq!(state_of(&journal, 11), RecordState::Abandoned);
    assert_eq!(state_of(&journal, 12), RecordState::Claimed);
    assert_eq!(state_of(&journal, 13), RecordState::Done, "an open conflict keeps its delivery whole");
    assert_eq!(state_of(&journal, 16), RecordState::Done, "young deliveries stay");
    assert_eq!(journal.missing(10).unwrap(), missing_before, "prune never moves a gap");
    let status = journal.status().unwrap();
    assert_eq!((status.pruned, status.forgotten, status.handled), (10, 0, 12), "{status:?}");
    // Nothing left: a second run compacts nothing.
    assert_eq!(journal.prune(&PruneOptions::older_than(days(90))).unwrap().compacted, 0);
    // Once the conflict is resolved, its delivery goes too.
    let conflict = journal.conflicts(false, 10).unwrap()[0].id;
    journal.resolve_conflict(conflict, "settled with the service").unwrap();
    assert_eq!(journal.prune(&PruneOptions::older_than(days(90))).unwrap().compacted, 1);
    assert_eq!(state_of(&journal, 13), RecordState::Pruned);

    // Retentions under a day are refused, naming the option.
    let error = journal.prune(&PruneOptions::older_than(Duration::from_secs(3600))).unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidArgument);
    assert!(error.message.contains("older_than"), "{error}");
}

fn a_repeat_of_a_pruned_delivery_is_never_silent(b: &dyn Backend) {
    let url = b.url("repeat");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    handle(&journal, &plain_refund(1), &reply(1));
    handle(&journal, &plain_refund(2), &reply(2));
    age(b, &url, 2, 100);
    handle(&journal, &plain_refund(3), &reply(3));
    assert_eq!(journal.prune(&PruneOptions::older_than(days(90))).unwrap().compacted, 2);

    // The same delivery again: handed out as the next attempt, flagged, never replayed empty.
    let claim = new_claim(&journal, &plain_refund(1));
    assert!(claim.reply_pruned());
    assert_eq!(claim.attempt(), 2);
    journal.finish(&claim, b"again").unwrap();
    match journal.begin(&plain_refund(1)).unwrap() {
        Begin::Done(stored) => assert_eq!(stored, b"again"),
        other => panic!("expected the new reply, got {other:?}"),
    }
    // Handled twice, as it ran twice; compacting it again counts nothing more.
    assert_eq!(journal.status().unwrap().handled, 4);
    age(b, &url, 1, 100);
    assert_eq!(journal.prune(&PruneOptions::older_than(days(90))).unwrap().compacted, 1);
    assert_eq!((journal.status().unwrap().handled, journal.status().unwrap().pruned), (4, 3));
    // A resend whose non-decisive field changed (isMobile) is the same delivery.
    let mobile = delivery(
        r#"{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-2","playerIdentifier":"player-1","transactionId":2,"buyTransactionId":1000002,"gameSessionId":5,"partnerGameRequestIdentifier":"req-2","gameId":9,"isMobile":true,"index":2}"#,
    );
    // Other decisive content under the pruned key: a conflict, whatever was stored.
    match journal.begin(&refund(2, 2, "another request")).unwrap() {
        Begin::Conflict(error) => {
            assert_eq!(error.kind, ErrorKind::Conflict);
            assert!(error.message.contains("pruned"), "{error}");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let claim = new_claim(&journal, &mobile);
    assert!(claim.reply_pruned() && claim.attempt() == 2);
    journal.abandon(&claim).unwrap();
    // Released, it is still a delivery handled before: the next attempt is flagged too.
    let claim = new_claim(&journal, &plain_refund(2));
    assert!(claim.reply_pruned() && claim.attempt() == 3, "{claim:?}");
    journal.abandon(&claim).unwrap();
}

fn compact_records_are_forgotten_only_when_asked(b: &dyn Backend) {
    let url = b.url("forget");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    for n in 1..=5 {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    age(b, &url, 3, 400);
    age(b, &url, 5, 100);
    handle(&journal, &plain_refund(6), &reply(6));
    let options = PruneOptions { forget_older_than: Some(days(365)), ..PruneOptions::older_than(days(90)) };
    let report = journal.prune(&options).unwrap();
    // 1-3 compacted and forgotten in the same run; 4-5 compacted and kept.
    assert_eq!((report.compacted, report.forgotten), (5, 3), "{report:?}");
    assert!(journal.lookup(1).unwrap().is_empty());
    assert_eq!(state_of(&journal, 4), RecordState::Pruned);
    let status = journal.status().unwrap();
    assert_eq!((status.pruned, status.forgotten, status.handled), (5, 3, 6));
    // A forgotten delivery is new again: only the partner's ledger knows it.
    let claim = new_claim(&journal, &plain_refund(1));
    assert!(!claim.reply_pruned() && claim.attempt() == 1);
    journal.abandon(&claim).unwrap();
    let bad = PruneOptions { forget_older_than: Some(days(30)), ..PruneOptions::older_than(days(90)) };
    assert!(journal.prune(&bad).unwrap_err().message.contains("forget_older_than"));
}

/// Prune compacts 3,000 old deliveries while four threads deliver new ones: every new delivery
/// is handled (none refused, none lost), and every old one is compacted. The longest batch and
/// the slowest delivery during the prune are printed (not asserted: timings are the machine's).
fn prune_beside_a_burst(b: &dyn Backend) {
    const OLD: i64 = 3_000;
    let url = b.url("burst");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    for n in 1..=OLD {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    age(b, &url, OLD, 100);
    handle(&journal, &plain_refund(OLD + 1_000_000), &reply(0));
    let stop = AtomicBool::new(false);
    let slowest_us = AtomicU64::new(0);
    let handled = AtomicU64::new(0);
    let report = thread::scope(|s| {
        for worker in 0..4i64 {
            let (journal, stop, slowest_us, handled) = (&journal, &stop, &slowest_us, &handled);
            s.spawn(move || {
                let mut n = OLD + 1 + worker;
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    handle(journal, &plain_refund(n), &reply(n));
                    slowest_us.fetch_max(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                    handled.fetch_add(1, Ordering::Relaxed);
                    n += 4;
                }
            });
        }
        let options = PruneOptions { batch: 100, ..PruneOptions::older_than(days(90)) };
        let report = journal.prune(&options);
        stop.store(true, Ordering::Relaxed);
        report
    })
    .unwrap();
    let burst = handled.load(Ordering::Relaxed);
    println!(
        "{}: pruned {} in {} batches beside {burst} new deliveries; longest batch {:?}, slowest delivery {} us",
        b.name(),
        report.compacted,
        report.batches,
        report.longest_batch,
        slowest_us.load(Ordering::Relaxed)
    );
    assert_eq!(report.compacted, OLD as u64);
    let status = journal.status().unwrap();
    assert_eq!(status.handled, OLD as u64 + 1 + burst);
    assert_eq!(status.in_progress, 0);
    assert_eq!(state_of(&journal, OLD + 1), RecordState::Done);
}

fn gap_ages_and_vitals(b: &dyn Backend) {
    let url = b.url("ages");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    let empty = journal.status().unwrap();
    assert_eq!((empty.oldest_record_ms, empty.last_delivery_ms, empty.oldest_gap_ms), (None, None, None));
    assert!(empty.size_bytes.unwrap() > 0);
    for n in [1, 2, 3, 5, 6] {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    // The gap at 4 opened when 5 came; make that ten minutes ago (once the indexes are in the
    // runs: PostgreSQL merges them in batches, before any read of the gaps).
    journal.missing(1).unwrap();
    b.exec(&url, "UPDATE sp_journal_runs SET since_ms = since_ms - 600000 WHERE lo = 5");
    handle(&journal, &plain_refund(9), &reply(9));
    // 7-8 are young: 9 came just now.
    assert_eq!(journal.missing(10).unwrap(), vec![(4, 4), (7, 8)]);
    assert_eq!(journal.missing_older_than(Duration::from_secs(300), 10).unwrap(), vec![(4, 4)]);
    assert_eq!(journal.missing_older_than(Duration::from_secs(900), 10).unwrap(), vec![]);
    assert_eq!(journal.missing_older_than(Duration::ZERO, 10).unwrap(), vec![(4, 4), (7, 8)]);
    let status = journal.status().unwrap();
    let now = cluster::now_ms();
    let gap_age = now - status.oldest_gap_ms.unwrap();
    assert!((590_000..700_000).contains(&gap_age), "the oldest gap is ten minutes old, not {gap_age} ms");
    assert!(now - status.last_delivery_ms.unwrap() < 60_000);
    assert!(status.oldest_record_ms.unwrap() <= status.last_delivery_ms.unwrap());
    // Filling 4 leaves 7-8, dated by 9.
    handle(&journal, &plain_refund(4), &reply(4));
    let young = now - journal.status().unwrap().oldest_gap_ms.unwrap();
    assert!(young < 60_000, "{young}");
    // A run absorbing an older one keeps the older time: 8 extends 9's run downwards.
    journal.missing(1).unwrap();
    b.exec(&url, "UPDATE sp_journal_runs SET since_ms = since_ms - 3600000 WHERE lo = 9");
    handle(&journal, &plain_refund(12), &reply(12));
    handle(&journal, &plain_refund(8), &reply(8));
    assert_eq!(journal.missing(10).unwrap(), vec![(7, 7), (10, 11)]);
    let oldest = now - journal.status().unwrap().oldest_gap_ms.unwrap();
    assert!((3_500_000..3_800_000).contains(&oldest), "the run 8-9 keeps 9's time: {oldest} ms");
}

fn retention_run_by_the_library(b: &dyn Backend) {
    let url = b.url("library_retention");
    let short = JournalOptions { retention: Some(Duration::from_secs(60)), ..JournalOptions::default() };
    let error = Journal::open(&url, &short).unwrap_err();
    assert!(error.message.contains("retention"), "{error}");
    let options = JournalOptions { retention: Some(days(90)), ..JournalOptions::default() };
    let journal = Journal::open(&url, &options).unwrap();
    for n in 1..=20 {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    age(b, &url, 20, 100);
    // The next finish a second on runs a batch.
    thread::sleep(Duration::from_millis(1100));
    handle(&journal, &plain_refund(21), &reply(21));
    let status = journal.status().unwrap();
    assert_eq!(status.pruned, 20, "{status:?}");
    assert_eq!(state_of(&journal, 21), RecordState::Done);
}

/// A journal of schema version 2 (the previous release: no times on the runs, no retention
/// indexes, contents stored as objects) opens as version 3: its replies are answered, its gaps
/// are dated from the upgrade, and it prunes.
fn a_journal_of_version_2_migrates(b: &dyn Backend) {
    let url = b.url("version_2");
    {
        let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
        for n in [1, 2, 4] {
            handle(&journal, &plain_refund(n), &reply(n));
        }
        journal.missing(1).unwrap();
    }
    let object = plain_refund(1).fingerprint().replace('\'', "''");
    b.exec(
        &url,
        &format!(
            "DROP INDEX IF EXISTS sp_journal_delivery_done; DROP INDEX IF EXISTS sp_journal_delivery_done_folded; DROP INDEX sp_journal_delivery_pruned;
             ALTER TABLE sp_journal_runs DROP COLUMN since_ms; ALTER TABLE sp_journal_runs DROP COLUMN last_ms;
             DELETE FROM sp_journal_meta WHERE key IN ('pruned', 'forgotten');
             UPDATE sp_journal_delivery SET content = '{object}' WHERE transaction_id = 1;
             UPDATE sp_journal_meta SET value = 2 WHERE key = 'schema_version'"
        ),
    );
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    match journal.begin(&plain_refund(1)).unwrap() {
        Begin::Done(stored) => assert_eq!(stored, reply(1), "a content stored as an object still matches"),
        other => panic!("expected Done, got {other:?}"),
    }
    assert!(matches!(journal.begin(&refund(1, 1, "other")).unwrap(), Begin::Conflict(_)));
    let status = journal.status().unwrap();
    assert_eq!(status.missing, 1);
    let since_upgrade = cluster::now_ms() - status.oldest_gap_ms.expect("the gap is dated from the upgrade");
    assert!((0..60_000).contains(&since_upgrade), "{since_upgrade}");
    assert_eq!(status.last_delivery_ms, None, "unknown until the next new index");
    handle(&journal, &plain_refund(5), &reply(5));
    assert!(cluster::now_ms() - journal.status().unwrap().last_delivery_ms.unwrap() < 60_000);
    age(b, &url, 4, 100);
    // 1 has an open conflict now: it stays whole.
    assert_eq!(journal.prune(&PruneOptions::older_than(days(90))).unwrap().compacted, 2);
    assert_eq!(state_of(&journal, 1), RecordState::Done);
    let claim = new_claim(&journal, &plain_refund(2));
    assert!(claim.reply_pruned());
    journal.abandon(&claim).unwrap();
}

/// A new SQLite journal gives the space of compacted deliveries back to the file system.
#[test]
fn sqlite_gives_the_space_back() {
    let dir = TempDir::new("slotpartner-retention-space");
    let path = dir.0.join("space.db");
    let url = format!("sqlite:{}", path.display());
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    let big = vec![b'x'; 2_000];
    for n in 1..=2_000 {
        handle(&journal, &plain_refund(n), &big);
    }
    let checkpoint = || {
        let db = rusqlite::Connection::open(&path).unwrap();
        db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
        std::fs::metadata(&path).unwrap().len()
    };
    let before = checkpoint();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("UPDATE sp_journal_delivery SET finished_ms = finished_ms - ?1", [100 * DAY_MS])
        .unwrap();
    handle(&journal, &plain_refund(2_001), &reply(2_001));
    let report = journal.prune(&PruneOptions::older_than(days(90))).unwrap();
    let after = checkpoint();
    println!("{before} bytes before, {after} after; {report:?}");
    assert_eq!(report.compacted, 2_000);
    assert!(report.bytes_returned > 3_000_000, "{report:?}");
    assert!(after < before / 3, "{before} -> {after}");
    assert!(journal.status().unwrap().size_bytes.unwrap() < before);
}
