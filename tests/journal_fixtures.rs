//! Journals of earlier schema versions (3, 4 and 5), written by the releases that wrote them, open
//! with this one and keep every record, gap, counter, conflict and index jump:
//! `tests/fixtures/journal/v<N>.sqlite` (a SQLite file) and `v<N>.postgres.sql` (`pg_dump
//! --inserts` of a PostgreSQL journal, restored into a throw-away cluster; skipped with a message
//! when PostgreSQL is not installed). Each was written by `fill` through the public API of the
//! code of its version (`cargo test --test journal_fixtures -- --ignored make_fixtures` writes
//! the pair of the checkout's version; run it only on a checkout of the version it is to be).

use std::path::{Path, PathBuf};

use slotpartner::journal::{Begin, Delivery, Finished, Journal, JournalOptions, RecordState, SqlValue, Staged};

#[path = "e2e/cluster.rs"]
mod cluster;
use cluster::{Cluster, TempDir};

#[path = "e2e/refunds.rs"]
mod refunds;
use refunds::{handle, new_claim, plain_refund, refund, reply};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/journal").join(name)
}

fn options() -> JournalOptions {
    JournalOptions { max_index_jump: 1000, ..JournalOptions::default() }
}

/// What the fixtures hold, written through the journal: refunds 1-5 and 7 handled (index 6
/// missing), refund 2 delivered again (a replay), refund 3 again with other content (a
/// conflict), refund 8 abandoned (unfinished), refund 9 claimed and never finished (in
/// progress), a refusal at index 10, refund 5000 far beyond (an index jump), one claimed at
/// finish (refund 11, with its reply).
fn fill(url: &str) {
    let journal = Journal::open(url, &options()).expect("open");
    for n in [1, 2, 3, 4, 5, 7] {
        let claim = new_claim(&journal, &plain_refund(n));
        journal.finish(&claim, &reply(n)).expect("finish");
    }
    assert!(matches!(journal.begin(&plain_refund(2)).unwrap(), Begin::Done(_)));
    assert!(matches!(journal.begin(&refund(3, 3, "another-request")).unwrap(), Begin::Conflict(_)));
    journal.abandon(&new_claim(&journal, &plain_refund(8))).expect("abandon");
    drop(new_claim(&journal, &plain_refund(9)));
    journal.record_refused(10, Some("gameSessionBuyRefund"), Some(10)).expect("refused");
    let claim = new_claim(&journal, &plain_refund(5000));
    journal.finish(&claim, &reply(5000)).expect("finish");
    let at_finish = Journal::open(url, &JournalOptions { claim_at_finish: true, ..options() }).expect("open");
    let claim = new_claim(&at_finish, &plain_refund(11));
    at_finish.finish(&claim, &reply(11)).expect("finish");
}

fn done_reply(journal: &Journal, delivery: &Delivery) -> Vec<u8> {
    match journal.begin(delivery).expect("begin") {
        Begin::Done(reply) => reply,
        other => panic!("expected Done for {:?}, got {other:?}", delivery.key()),
    }
}

/// Everything `fill` wrote, read with this release's code (before the checks' own deliveries).
fn check(url: &str) {
    let journal = Journal::open(url, &options()).expect("open with this release");
    let status = journal.status().expect("status");
    assert_eq!(
        (status.handled, status.replayed, status.conflicts, status.refused, status.in_progress),
        (8, 1, 1, 1, 1),
        "{status:?}"
    );
    assert_eq!((status.missing, status.open_conflicts, status.index_jumps), (1, 1, 1), "{status:?}");
    assert_eq!((status.highest_index, status.watermark, status.numbering), (Some(5000), Some(5), 1), "{status:?}");
    assert_eq!(journal.missing(10).unwrap(), vec![(6, 6)]);
    // Refund 8 abandoned; refund 9's claim counts once its lease is seen expired.
    let unfinished = journal.unfinished(10).unwrap();
    assert!(unfinished == vec![8] || unfinished == vec![8, 9], "{unfinished:?}");
    assert_eq!(status.unfinished, unfinished.len() as u64, "{status:?}");
    let conflicts = journal.conflicts(false, 10).unwrap();
    assert_eq!(conflicts.len(), 1);
    assert!(conflicts[0].differing.iter().any(|d| d.contains("partnerGameRequestIdentifier")), "{conflicts:?}");
    let jumps = journal.index_jumps(false, 10).unwrap();
    assert_eq!(jumps.len(), 1, "{jumps:?}");
    assert_eq!(jumps[0].index, 5000);
    for n in [1, 2, 3, 4, 5, 7, 11, 5000] {
        let records = journal.lookup(n).unwrap();
        assert_eq!(records.len(), 1, "refund {n}: {records:?}");
        assert_eq!((records[0].state, records[0].reply.as_deref()), (RecordState::Done, Some(&reply(n)[..])), "{n}");
        assert_eq!(done_reply(&journal, &plain_refund(n)), reply(n));
    }
    assert_eq!(journal.lookup(8).unwrap()[0].state, RecordState::Abandoned);
    assert_eq!(journal.lookup(10).unwrap()[0].state, RecordState::Refused);
    // The abandoned refund runs again as its second attempt.
    assert_eq!(new_claim(&journal, &plain_refund(8)).attempt(), 2);
}

/// After `check`: the journal is of this release's version, a process of version 3 still running
/// cannot count a delivery into it (its finish fails: rolled back, credit and all), one of version
/// 4 can neither claim nor finish (it would record indexes without the rows not folded yet) nor
/// read its figures (they fail rather than leave out the newest deliveries), nor can one of
/// version 5 (it would look for another key at an index through a table read whole), on SQLite the index
/// of every row's `first_index` is gone (version 6 indexes the folded rows only), and new
/// deliveries, one claimed at finish with a staged credit, are stored and counted: the figures
/// the migration folded (handled, the indexes seen) go on from where version 3 left them.
/// `raw` runs a statement on the journal's database directly, answering whether it succeeded.
fn check_migrated(url: &str, version: i64, raw: &mut dyn FnMut(&str) -> bool) {
    assert_eq!(version, slotpartner::journal::SCHEMA_VERSION, "migrated in place");
    assert!(
        !raw("UPDATE sp_journal_counters SET handled = handled + 1, in_progress = in_progress - 1 WHERE shard = 0"),
        "version 3's count of a finish fails on a migrated journal"
    );
    assert!(!raw("SELECT SUM(handled_offset) FROM sp_journal_counters"), "version 4's sum of handled fails");
    assert!(
        !raw("UPDATE sp_journal_counters SET in_progress = in_progress + 1 WHERE shard = 0"),
        "version 4's count of a claim (and of its finish) fails on a migrated journal"
    );
    assert!(
        !raw("UPDATE sp_journal_counters SET in_flight = in_flight + 1 WHERE shard = 0"),
        "version 5's count of a claim (and of its finish) fails on a migrated journal"
    );
    assert!(!raw("DROP INDEX sp_journal_delivery_transaction"), "the index of transaction_id is gone");
    let sqlite = url.starts_with("sqlite:");
    if sqlite {
        assert!(!raw("DROP INDEX sp_journal_delivery_index"), "the index of every row's first_index is gone");
    }
    assert!(raw("CREATE TABLE credits (transaction_id BIGINT PRIMARY KEY, amount BIGINT NOT NULL)"));
    let journal = Journal::open(url, &options()).expect("open again");
    let before = journal.status().expect("status");
    handle(&journal, &plain_refund(12), &reply(12));
    let at_finish = Journal::open(url, &JournalOptions { claim_at_finish: true, ..options() }).expect("open");
    let credit = if sqlite {
        "INSERT INTO credits (transaction_id, amount) VALUES (?1, ?2)"
    } else {
        "INSERT INTO credits (transaction_id, amount) VALUES ($1, $2)"
    };
    let staged = [Staged::new(credit, vec![SqlValue::Int(13), SqlValue::Int(1299)]).unwrap()];
    let delivery = plain_refund(13);
    match at_finish.begin_optimistic(&delivery).expect("begin") {
        Begin::New(claim) => {
            assert!(matches!(at_finish.finish_optimistic(&claim, &delivery, &reply(13), &staged), Ok(Finished::Stored)))
        }
        other => panic!("expected New, got {other:?}"),
    }
    // A repeat of a delivery stored by version 3, claimed at finish: its stored reply.
    let repeat = plain_refund(11);
    match at_finish.begin_optimistic(&repeat).expect("begin") {
        Begin::New(claim) => match at_finish.finish_optimistic(&claim, &repeat, b"a second run", &[]) {
            Ok(Finished::Answered(Begin::Done(stored))) => assert_eq!(stored, reply(11)),
            other => panic!("expected the stored reply, got {other:?}"),
        },
        other => panic!("expected New, got {other:?}"),
    }
    let status = journal.status().expect("status");
    assert_eq!(status.handled, before.handled + 2, "{status:?}");
    assert_eq!(status.replayed, before.replayed + 1, "{status:?}");
    assert_eq!((status.missing, status.watermark, status.highest_index), (1, Some(5), Some(5000)), "{status:?}");
    assert_eq!(journal.lookup(13).unwrap()[0].reply.as_deref(), Some(&reply(13)[..]));
    // The gap at 6 closed by hand: the indexes seen, read from the runs, count it.
    assert_eq!(journal.resolve(6, 6, "settled with the service").unwrap(), 1);
    let status = journal.status().expect("status");
    assert_eq!((status.missing, status.watermark), (0, Some(13)), "{status:?}");
    assert!(journal.missing(10).unwrap().is_empty());
}

fn sqlite_journal_keeps_everything(from: i64) {
    let dir = TempDir::new(&format!("slotpartner-journal-v{from}"));
    let path = dir.path().join("journal.sqlite");
    std::fs::copy(fixture(&format!("v{from}.sqlite")), &path).unwrap();
    let version: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT value FROM sp_journal_meta WHERE key = 'schema_version'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, from, "the fixture is of version {from}");
    let url = format!("sqlite:{}", path.display());
    check(&url);
    let db = rusqlite::Connection::open(&path).unwrap();
    let version = db.query_row("SELECT value FROM sp_journal_meta WHERE key = 'schema_version'", [], |r| r.get(0));
    check_migrated(&url, version.unwrap(), &mut |sql| db.execute_batch(sql).is_ok());
}

#[test]
fn sqlite_journal_of_version_3_keeps_everything() {
    sqlite_journal_keeps_everything(3);
}

#[test]
fn sqlite_journal_of_version_4_keeps_everything() {
    sqlite_journal_keeps_everything(4);
}

/// Version 5's journal holds rows not folded yet (the last two `fill` wrote): version 6 puts
/// them in the index of `first_index` when it folds them.
#[test]
fn sqlite_journal_of_version_5_keeps_everything() {
    sqlite_journal_keeps_everything(5);
}

/// A process of version 5 still running against a SQLite journal migrated to version 6 (a
/// long-lived worker that opened the journal before the migration: it checks the version at
/// its open, not at a claim) either fails at each claim, as one of version 4 does (see
/// `check_migrated`), or finds another key at a delivery's index without reading the whole
/// table: version 5's statement for it (`note_row`, every delivery with an index, under the
/// write lock) reads `first_index = ?1` through an index of every row's `first_index`, which
/// version 6 drops for one of the folded rows only.
///
/// Fails on schema version 6 as first written (dbb67de): version 5's claim still counts itself
/// in flight, and its statement reads the whole table, for every delivery, holding the write
/// lock that every other worker waits on (about 0.3 s a delivery on a journal of 500,000
/// rows against a few microseconds through an index).
#[test]
fn sqlite_a_version_5_process_still_running_reads_no_whole_table_a_delivery() {
    let dir = TempDir::new("slotpartner-journal-v5-running");
    let path = dir.path().join("journal.sqlite");
    std::fs::copy(fixture("v5.sqlite"), &path).unwrap();
    Journal::open(&format!("sqlite:{}", path.display()), &options()).expect("migrated");
    let db = rusqlite::Connection::open(&path).unwrap();
    // Version 5's claim: its row, and its count in flight (rolled back here).
    let tx = db.unchecked_transaction().unwrap();
    let claims = tx.execute("UPDATE sp_journal_counters SET in_flight = in_flight + 1 WHERE shard = 0", []).is_ok();
    drop(tx);
    // Then version 5's look for another key at the index.
    let reused_by =
        "SELECT key FROM sp_journal_delivery WHERE first_index = ?1 AND key <> ?2 AND (?3 OR folded = 0) LIMIT 1";
    let mut explain = db.prepare(&format!("EXPLAIN QUERY PLAN {reused_by}")).unwrap();
    // Unbound parameters are NULL: the plan does not depend on them.
    let mut rows = explain.raw_query();
    let mut plan: Vec<String> = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        plan.push(row.get(3).unwrap());
    }
    let scans = plan.iter().any(|d| d.starts_with("SCAN sp_journal_delivery"));
    assert!(
        !claims || !scans,
        "a process of version 5 claims on a journal of version {} and reads the whole table a delivery: {plan:?}",
        slotpartner::journal::SCHEMA_VERSION
    );
}

/// A version 3 journal holding a delivery whose key does not name its `transactionId` (changed
/// by hand: the journal never writes one) is not migrated, since version 4 finds a transaction's
/// deliveries by their keys: the open fails naming the problem, and the journal stays at version
/// 3, whole.
#[test]
fn sqlite_journal_of_version_3_changed_by_hand_is_not_migrated() {
    let dir = TempDir::new("slotpartner-journal-v3-by-hand");
    let path = dir.path().join("v3.sqlite");
    std::fs::copy(fixture("v3.sqlite"), &path).unwrap();
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute("UPDATE sp_journal_delivery SET key = 'refund-4' WHERE key = 'gameSessionBuyRefund:4'", []).unwrap();
    let error = Journal::open(&format!("sqlite:{}", path.display()), &options()).unwrap_err();
    assert!(error.message.contains("transaction_id") && error.message.contains("by hand"), "{error}");
    let version: i64 =
        db.query_row("SELECT value FROM sp_journal_meta WHERE key = 'schema_version'", [], |r| r.get(0)).unwrap();
    let handled: i64 = db.query_row("SELECT SUM(handled) FROM sp_journal_counters", [], |r| r.get(0)).unwrap();
    assert_eq!((version, handled), (3, 8), "rolled back whole");
}

fn postgres_journal_keeps_everything(from: i64) {
    let Some(cluster) = Cluster::start(&format!("PostgreSQL journal of version {from}")) else { return };
    let url = cluster.create_database("old");
    let dump = std::fs::read_to_string(fixture(&format!("v{from}.postgres.sql"))).unwrap();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client.batch_execute(&dump).expect("restore the dump");
    client.batch_execute("RESET search_path").unwrap();
    let version: i64 =
        client.query_one("SELECT value FROM sp_journal_meta WHERE key = 'schema_version'", &[]).unwrap().get(0);
    assert_eq!(version, from, "the dump is of version {from}");
    check(&url);
    let version =
        client.query_one("SELECT value FROM sp_journal_meta WHERE key = 'schema_version'", &[]).unwrap().get(0);
    check_migrated(&url, version, &mut |sql| client.batch_execute(sql).is_ok());
}

#[test]
fn postgres_journal_of_version_3_keeps_everything() {
    postgres_journal_keeps_everything(3);
}

#[test]
fn postgres_journal_of_version_4_keeps_everything() {
    postgres_journal_keeps_everything(4);
}

#[test]
fn postgres_journal_of_version_5_keeps_everything() {
    postgres_journal_keeps_everything(5);
}

/// Writes both fixtures of this checkout's schema version with its code: run it on a checkout
/// of the version the fixtures are to be of, never over an older version's files.
#[test]
#[ignore]
fn make_fixtures() {
    let version = slotpartner::journal::SCHEMA_VERSION;
    let (sqlite_name, postgres_name) = (format!("v{version}.sqlite"), format!("v{version}.postgres.sql"));
    let dir = TempDir::new("slotpartner-make-fixtures");
    let path = dir.path().join("journal.sqlite");
    fill(&format!("sqlite:{}", path.display()));
    let copy = rusqlite::Connection::open(&path).unwrap();
    copy.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    let _ = std::fs::remove_file(fixture(&sqlite_name));
    copy.execute("VACUUM INTO ?1", [fixture(&sqlite_name).to_str().unwrap()]).unwrap();

    let cluster = Cluster::start("PostgreSQL fixture").expect("PostgreSQL is installed");
    let url = cluster.create_database("old");
    fill(&url);
    let dump = std::process::Command::new(cluster::postgres_bin().unwrap().join("pg_dump"))
        .args(["--inserts", "--no-owner", "--no-privileges", "-h", "127.0.0.1", "-U", "postgres"])
        .args(["-p", &cluster.port().to_string(), "old"])
        .output()
        .unwrap();
    assert!(dump.status.success(), "{}", String::from_utf8_lossy(&dump.stderr));
    // psql's own commands (`\\restrict`) and settings an older server lacks are left out.
    let text = String::from_utf8(dump.stdout).unwrap();
    let kept: Vec<&str> =
        text.lines().filter(|l| !l.starts_with("SET transaction_timeout") && !l.starts_with('\\')).collect();
    std::fs::write(fixture(&postgres_name), kept.join("\n") + "\n").unwrap();
}
