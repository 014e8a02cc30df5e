//! A SQLite journal's folding (schema version 5): a new delivery writes its row and the row's
//! key and index entries only; its index reaches the runs, and its done row the index of
//! finished deliveries, when the rows are folded: by the delivery that makes them a batch, and
//! before any figure is read. Each test asks what a partner or an operator sees (the status,
//! the gaps, the index jumps), and where the promise rests on the file, the file itself.

use slotpartner::journal::{Begin, Journal, JournalOptions, PruneOptions};

#[path = "e2e/cluster.rs"]
mod cluster;
use cluster::{Cluster, TempDir};

#[path = "e2e/refunds.rs"]
mod refunds;
use refunds::{days, handle, new_claim, plain_refund, refund, reply};

fn open(dir: &TempDir) -> (Journal, String) {
    let url = format!("sqlite:{}", dir.path().join("journal.sqlite").display());
    (Journal::open(&url, &JournalOptions { max_index_jump: 1000, ..JournalOptions::default() }).unwrap(), url)
}

fn raw(dir: &TempDir) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.path().join("journal.sqlite")).unwrap()
}

fn one(db: &rusqlite::Connection, sql: &str) -> i64 {
    db.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// The delivery path folds by itself: after a few hundred deliveries and no read, most of the
/// indexes are in the runs already and the rows left to fold are fewer than a batch; every
/// row at or below `folded_id` is folded and none above it.
#[test]
fn deliveries_fold_their_own_batches() {
    let dir = TempDir::new("slotpartner-fold-batches");
    let (journal, _) = open(&dir);
    for n in 1..=300 {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    let db = raw(&dir);
    let mark = one(&db, "SELECT value FROM sp_journal_meta WHERE key = 'folded_id'");
    assert!((300 - 128..300).contains(&mark), "folded up to row {mark}");
    assert_eq!(one(&db, "SELECT count(*) FROM sp_journal_delivery WHERE folded = 0"), 300 - mark);
    assert_eq!(one(&db, &format!("SELECT count(*) FROM sp_journal_delivery WHERE folded = 0 AND id <= {mark}")), 0);
    assert_eq!(one(&db, "SELECT hi FROM sp_journal_runs WHERE lo = 1"), mark, "one run, up to the last fold");
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.highest_index, status.watermark), (300, Some(300), Some(300)), "{status:?}");
    assert_eq!(status.missing, 0, "{status:?}");
}

/// A claim taken before a fold and finished after it is counted handled once, as is each
/// delivery on either side of the fold; a gap below the rows not folded yet stays a gap.
#[test]
fn handled_counts_each_delivery_once_across_a_fold() {
    let dir = TempDir::new("slotpartner-fold-handled");
    let (journal, _) = open(&dir);
    let early = new_claim(&journal, &plain_refund(1));
    for n in 3..=200 {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    let before = journal.status().unwrap();
    assert_eq!((before.handled, before.in_progress, before.missing), (198, 1, 1), "{before:?}");
    journal.finish(&early, &reply(1)).unwrap();
    let after = journal.status().unwrap();
    assert_eq!((after.handled, after.in_progress, after.missing), (199, 0, 1), "{after:?}");
    assert_eq!(journal.missing(10).unwrap(), vec![(2, 2)]);
    // The figures read without a fold (nothing left to fold) agree.
    assert_eq!(journal.status().unwrap().handled, 199);
}

/// An index jump and an index reused by another event are noted with their keys whether the
/// rows involved are folded or not yet.
#[test]
fn jumps_and_reused_indexes_are_noted_across_a_fold() {
    let dir = TempDir::new("slotpartner-fold-jumps");
    let (journal, _) = open(&dir);
    for n in 1..=10 {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    // Index 5 again, with another event: not folded yet (the first is not folded either).
    handle(&journal, &refund(1005, 5, "req-1005"), &reply(1005));
    // Far beyond: a jump, noted when folded (here by the read).
    handle(&journal, &plain_refund(9000), &reply(9000));
    let jumps = journal.index_jumps(false, 10).unwrap();
    assert_eq!(jumps.len(), 2, "{jumps:?}");
    let reused = jumps.iter().find(|j| j.index == 5).expect("the reused index");
    assert_eq!(reused.key.as_deref(), Some("gameSessionBuyRefund:1005"), "{reused:?}");
    assert_eq!(reused.other_key.as_deref(), Some("gameSessionBuyRefund:5"), "{reused:?}");
    let jump = jumps.iter().find(|j| j.index == 9000).expect("the jump");
    assert_eq!((jump.key.as_deref(), jump.previous_highest), (Some("gameSessionBuyRefund:9000"), Some(10)), "{jump:?}");
    // Index 7 again, with another event, after the fold: reused, found in the runs (noted on
    // the record of reused indexes, which counts them).
    handle(&journal, &refund(1007, 7, "req-1007"), &reply(1007));
    let jumps = journal.index_jumps(false, 10).unwrap();
    let reused = jumps.iter().find(|j| j.index == 5).expect("the reused indexes");
    assert_eq!((reused.count, reused.last_index), (2, 7), "{jumps:?}");
}

/// Refunds 1-5 handled and folded, then rows 4 and 5 deleted by hand.
fn five_with_the_top_two_deleted(dir: &TempDir) -> (Journal, rusqlite::Connection) {
    let (journal, _) = open(dir);
    for n in 1..=5 {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    assert_eq!(journal.status().unwrap().handled, 5, "folded by the read");
    let db = raw(dir);
    db.execute("DELETE FROM sp_journal_delivery WHERE id >= 4", []).unwrap();
    (journal, db)
}

/// Deleting the newest rows (by hand, or forgetting old compact records when nothing newer is
/// left) lets SQLite number a new row at or below `folded_id`: the mark comes down, at the next
/// delivery or the next operator's work, so that the next delivery's index is seen and its row
/// counted.
#[test]
fn a_new_row_after_deletes_at_the_top_is_still_folded() {
    for operator_first in [false, true] {
        let dir = TempDir::new("slotpartner-fold-deletes");
        let (journal, db) = five_with_the_top_two_deleted(&dir);
        if operator_first {
            journal.prune(&PruneOptions::older_than(days(7))).unwrap();
            assert_eq!(one(&db, "SELECT value FROM sp_journal_meta WHERE key = 'folded_id'"), 3, "the mark came down");
        }
        handle(&journal, &plain_refund(7), &reply(7));
        assert_eq!(one(&db, "SELECT id FROM sp_journal_delivery WHERE transaction_id = 7"), 4, "numbered again");
        let status = journal.status().unwrap();
        // Handled counts the rows there are: 1-3 and 7 (the two deleted went with their rows).
        assert_eq!((status.handled, status.highest_index, status.missing), (4, Some(7), 1), "{status:?}");
        assert_eq!(journal.missing(10).unwrap(), vec![(6, 6)]);
        assert!(matches!(journal.begin(&plain_refund(7)).unwrap(), Begin::Done(_)));
    }
}

/// A refund whose body carries no index (valid under the lenient default): keyed by its
/// `transactionId`, stored with no index.
fn refund_without_index(n: i64) -> slotpartner::journal::Delivery {
    refunds::delivery(&format!(
        r#"{{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-{n}","playerIdentifier":"player-1","transactionId":{n},"buyTransactionId":{},"gameSessionId":5,"partnerGameRequestIdentifier":"req-{n}","gameId":3,"isMobile":false}}"#,
        n + 1_000_000
    ))
}

/// After deletes at the top leave `folded_id` above the highest row, a delivery without an
/// index is numbered again below the mark: it must still be counted handled, now and after
/// the operator's next work (which settles the mark) and the next deliveries, and its done row
/// must be found by `prune` and the oldest record as every other.
#[test]
fn a_delivery_without_an_index_after_deletes_at_the_top_is_counted() {
    let dir = TempDir::new("slotpartner-fold-deletes-no-index");
    let (journal, db) = five_with_the_top_two_deleted(&dir);
    handle(&journal, &refund_without_index(100), &reply(100));
    assert_eq!(one(&db, "SELECT id FROM sp_journal_delivery WHERE transaction_id = 100"), 4, "numbered again");
    // Rows 1-3 and the refund without an index.
    assert_eq!(journal.status().unwrap().handled, 4, "right after the delivery");
    journal.prune(&PruneOptions::older_than(days(7))).unwrap();
    handle(&journal, &plain_refund(6), &reply(6));
    let status = journal.status().unwrap();
    assert_eq!(status.handled, 5, "after the operator's work and another delivery: {status:?}");
    assert_eq!(
        one(
            &db,
            "SELECT count(*) FROM sp_journal_delivery WHERE folded = 0 AND id <= (SELECT value FROM sp_journal_meta WHERE key = 'folded_id')"
        ),
        0,
        "no row at or below folded_id is left unfolded"
    );
}

/// Whether an index jump is noted, and so what counts missing, does not depend on whether a
/// monitor read the journal between two deliveries: index 1020 lands more than
/// `max_index_jump` (1000) beyond the highest seen (10), and is a jump whenever it is read;
/// index 500 arrives after it. A journal read between the two and one read only after both
/// agree (as every delivery recorded its index at once until version 4).
#[test]
fn a_jump_does_not_depend_on_when_the_journal_was_read() {
    jump_whenever_read(|name| {
        let dir = TempDir::new(name);
        let url = format!("sqlite:{}", dir.path().join("journal.sqlite").display());
        (url, Box::new(dir))
    });
}

/// The same on PostgreSQL, whose deliveries' indexes wait in `sp_journal_seen` until merged.
#[test]
fn postgres_a_jump_does_not_depend_on_when_the_journal_was_read() {
    let Some(cluster) = Cluster::start("PostgreSQL jumps whenever read") else { return };
    let mut made = 0;
    jump_whenever_read(|_| {
        made += 1;
        (cluster.create_database(&format!("jumps{made}")), Box::new(()))
    });
}

fn jump_whenever_read(mut journal_at: impl FnMut(&str) -> (String, Box<dyn std::any::Any>)) {
    let mut seen = Vec::new();
    for read_between in [true, false] {
        let (url, _keep) = journal_at("slotpartner-fold-jump-order");
        let journal =
            Journal::open(&url, &JournalOptions { max_index_jump: 1000, ..JournalOptions::default() }).unwrap();
        for n in 1..=10 {
            handle(&journal, &plain_refund(n), &reply(n));
        }
        journal.status().unwrap();
        handle(&journal, &plain_refund(1020), &reply(1020));
        if read_between {
            journal.status().unwrap();
        }
        handle(&journal, &plain_refund(500), &reply(500));
        let status = journal.status().unwrap();
        let jumps: Vec<(i64, Option<i64>)> =
            journal.index_jumps(false, 10).unwrap().iter().map(|j| (j.index, j.previous_highest)).collect();
        seen.push((read_between, status.missing, status.index_jumps, jumps));
    }
    assert_eq!((seen[0].1, seen[0].2), (seen[1].1, seen[1].2), "missing and open jumps, read between or not: {seen:?}");
    assert_eq!(seen[0].3, seen[1].3, "{seen:?}");
    assert_eq!(seen[0].3, vec![(1020, Some(10))], "{seen:?}");
}

/// A reused index is noted once, when its delivery came: `prune` compacting the rows of an
/// index reused before (decided by the operator) writes their compact records above
/// `folded_id`, already folded; the fold after it judges nothing of them again, so that no
/// reused index is noted anew (none open, the decided one's count unchanged).
#[test]
fn a_compaction_notes_no_reused_index_again() {
    let dir = TempDir::new("slotpartner-fold-compacted-reuse");
    let (journal, _) = open(&dir);
    for n in 1..=6 {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    handle(&journal, &refund(1005, 5, "req-1005"), &reply(1005));
    let jumps = journal.index_jumps(false, 10).unwrap();
    assert_eq!(jumps.len(), 1, "{jumps:?}");
    journal.accept_jump(jumps[0].id, "the service resent index 5 with another event").unwrap();
    assert!(journal.index_jumps(false, 10).unwrap().is_empty());
    let db = raw(&dir);
    let shift = "UPDATE sp_journal_delivery SET created_ms = created_ms - ?1, updated_ms = updated_ms - ?1, finished_ms = finished_ms - ?1 WHERE transaction_id <> 6";
    db.execute(shift, [30 * refunds::DAY_MS]).unwrap();
    let report = journal.prune(&PruneOptions::older_than(days(7))).unwrap();
    assert_eq!(report.compacted, 6, "{report:?}");
    // The next delivery, and the read after it, fold the compact records with it.
    handle(&journal, &plain_refund(7), &reply(7));
    let open = journal.index_jumps(false, 10).unwrap();
    assert!(open.is_empty(), "a reuse noted again by the compaction: {open:?}");
    let all = journal.index_jumps(true, 10).unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].count, 1, "{all:?}");
}
