//! Retention, gap ages and the move of compacted deliveries on a bad day: what a resend, an
//! export, an operator, a stepped clock or a concurrent delivery meets while `prune` (by hand or
//! the journal's own retention) runs. Each test's text tells the failure it guards against: each
//! failed before the journal was made to hold.
//!
//! Records are aged with SQL behind the library's back (the retention's minimum is a day). The
//! PostgreSQL tests run on a throw-away cluster and are skipped with a message when PostgreSQL
//! is not installed; where a race needs a window wider than a few milliseconds, a trigger added
//! behind the library's back holds the other transaction open (`pg_sleep`), so that the order of
//! events is forced, not hoped for.

use std::thread;
use std::time::{Duration, Instant};

use slotpartner::journal::{
    Begin, Delivery, Journal, JournalOptions, PruneOptions, RecordState, shift_wall_clock_for_tests,
};

#[path = "e2e/cluster.rs"]
mod cluster;
use cluster::{Cluster, TempDir};

#[path = "e2e/refunds.rs"]
mod refunds;
use refunds::{DAY_MS, days, delivery, handle, new_claim, plain_refund, refund, reply, state_of};

fn now_ms() -> i64 {
    cluster::now_ms()
}

/// Resets this thread's wall clock when dropped, also when an assertion fails.
struct ClockShift;

impl ClockShift {
    fn by(offset_ms: i64) -> ClockShift {
        shift_wall_clock_for_tests(offset_ms);
        ClockShift
    }
}

impl Drop for ClockShift {
    fn drop(&mut self) {
        shift_wall_clock_for_tests(0);
    }
}

// ---------------------------------------------------------------------------------------------
// SQLite

fn sqlite_url(dir: &TempDir, name: &str) -> String {
    format!("sqlite:{}", dir.0.join(format!("{name}.db")).display())
}

fn sqlite_exec(url: &str, sql: &str) {
    let db = rusqlite::Connection::open(url.strip_prefix("sqlite:").unwrap()).unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    db.execute_batch(sql).unwrap();
}

/// Moves every time of the deliveries with `transaction_id <= up_to` back by `days`.
fn age_deliveries_sql(up_to: i64, days: i64) -> String {
    let shift = days * DAY_MS;
    format!(
        "UPDATE sp_journal_delivery SET created_ms = created_ms - {shift}, updated_ms = updated_ms - {shift}, finished_ms = finished_ms - {shift} WHERE transaction_id <= {up_to}"
    )
}

/// Moves every time of every conflict back by `days`.
fn age_conflicts_sql(days: i64) -> String {
    let shift = days * DAY_MS;
    format!(
        "UPDATE sp_journal_conflicts SET first_ms = first_ms - {shift}, last_ms = last_ms - {shift}, resolved_ms = resolved_ms - {shift}"
    )
}

/// A resend with other decisive content that was handed out (attempt 2 of a delivery whose first attempt
/// was abandoned) and finished: the journal answers it with the stored reply, as it answers the
/// first content. Returns the two contents: (first, handed out).
fn handed_out_and_finished(journal: &Journal) -> (Delivery, Delivery) {
    let first = refund(1, 1, "req-first");
    let resend = refund(1, 1, "req-resent");
    let claim = new_claim(journal, &first);
    journal.abandon(&claim).unwrap();
    let claim = new_claim(journal, &resend);
    assert_eq!(claim.attempt(), 2);
    assert!(!claim.differing().is_empty(), "the resend differs in a decisive field");
    journal.finish(&claim, &reply(1)).unwrap();
    for content in [&first, &resend] {
        match journal.begin(content).unwrap() {
            Begin::Done(stored) => assert_eq!(stored, reply(1)),
            other => panic!("before pruning, either content gets the stored reply; got {other:?}"),
        }
    }
    (first, resend)
}

/// A delivery whose key was handed out with other content stays whole. A first attempt
/// (content A) is abandoned; the resend with other decisive content (B) is handed out as attempt
/// 2, finished, and from then on both A and B are answered with the stored reply (the handed-out
/// conflict record says B's reply is the stored one). The operator resolves the conflict. A
/// compact record keeps one content's digest, so compacting the delivery would refuse B (whose
/// reply was stored) with 409 forever: `prune` leaves it whole, and both are still answered.
#[test]
fn a_handed_out_content_keeps_its_delivery_whole() {
    let dir = TempDir::new("slotpartner-review-handed-out");
    let url = sqlite_url(&dir, "handed_out");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    let (first, resend) = handed_out_and_finished(&journal);
    let conflict = journal.conflicts(false, 10).unwrap()[0].id;
    journal.resolve_conflict(conflict, "the service confirmed the corrected request").unwrap();
    sqlite_exec(&url, &format!("{}; {}", age_deliveries_sql(1, 100), age_conflicts_sql(100)));
    handle(&journal, &plain_refund(2), &reply(2));
    let report = journal.prune(&PruneOptions::older_than(days(90))).unwrap();
    assert_eq!((report.compacted, report.conflicts_removed), (0, 0), "{report:?}");
    assert_eq!(state_of(&journal, 1), RecordState::Done);
    for content in [&resend, &first] {
        match journal.begin(content).unwrap() {
            Begin::Done(stored) => assert_eq!(stored, reply(1)),
            other => panic!("either content still gets the stored reply; got {other:?}"),
        }
    }
}

/// A resolved handed-out conflict is never pruned: it says which content the stored reply
/// answers. As above, content B was handed out and its reply stored; here the conflict was
/// resolved long before (the delivery stays young and whole). `prune` keeps the record (older
/// than the retention): a resend of B is still answered with the stored reply, not refused with
/// 409 and recorded as a new open conflict.
#[test]
fn pruning_keeps_a_resolved_handed_out_conflict() {
    let dir = TempDir::new("slotpartner-review-resolved");
    let url = sqlite_url(&dir, "resolved");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    let (_first, resend) = handed_out_and_finished(&journal);
    let conflict = journal.conflicts(false, 10).unwrap()[0].id;
    journal.resolve_conflict(conflict, "settled").unwrap();
    sqlite_exec(&url, &age_conflicts_sql(100));
    let report = journal.prune(&PruneOptions::older_than(days(90))).unwrap();
    assert_eq!((report.compacted, report.conflicts_removed), (0, 0), "{report:?}");
    assert_eq!(state_of(&journal, 1), RecordState::Done);

    match journal.begin(&resend).unwrap() {
        Begin::Done(stored) => assert_eq!(stored, reply(1)),
        other => panic!("the stored reply is still there and was the answer to this content; got {other:?}"),
    }
}

/// After pruning, an unknown callback whose content names `jackpotPayout` under `action` is
/// compared on a payout's decisive fields only, which it does not have. The compact record's
/// digest takes the name from an `action` field whenever the content has one, and when that name
/// is one of `DECISIVE`'s, keeps only a payout's fields: everything the callback really carries
/// (here `amount`) is left out. Before pruning, another callback at the same key (a restarted
/// numbering: same name and index, other content) is refused with 409 and its index recorded as
/// reused; after pruning it is handed out as a repeat of the first (`reply_pruned`), and a
/// partner that takes `reply_pruned` for "handled before" drops a new event. Shown for an
/// unknown action named `jackpotPayout` and for an unknown event carrying such an `action` field.
#[test]
fn an_unknown_callback_named_like_a_payout_keeps_its_content_in_the_digest() {
    let dir = TempDir::new("slotpartner-review-digest-name");
    let url = sqlite_url(&dir, "digest_name");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    let bodies = [
        r#"{"action":"jackpotPayout","index":7,"amount":5}"#,
        r#"{"event":"bonusGranted","action":"jackpotPayout","index":8,"amount":5}"#,
    ];
    for body in bodies {
        let first = delivery(body);
        assert!(first.key().is_some() && first.transaction_id().is_none(), "{:?}", first.key());
        handle(&journal, &first, b"{\"success\":true}");
        let other = delivery(&body.replace(r#""amount":5"#, r#""amount":5000"#));
        assert!(matches!(journal.begin(&other).unwrap(), Begin::Conflict(_)), "before pruning: {body}");
    }
    sqlite_exec(&url, "UPDATE sp_journal_delivery SET finished_ms = finished_ms - 100 * 86400000");
    handle(&journal, &plain_refund(1), &reply(1));
    assert_eq!(journal.prune(&PruneOptions::older_than(days(90))).unwrap().compacted, 0, "open conflicts keep them");
    for conflict in journal.conflicts(false, 10).unwrap() {
        journal.resolve_conflict(conflict.id, "looked at").unwrap();
    }
    assert_eq!(journal.prune(&PruneOptions::older_than(days(90))).unwrap().compacted, 2);
    let mut handed_out = Vec::new();
    for body in bodies {
        let other = delivery(&body.replace(r#""amount":5"#, r#""amount":5000"#));
        match journal.begin(&other).unwrap() {
            Begin::Conflict(_) => {}
            outcome => handed_out.push(format!("{body} with amount 5000: {outcome:?}")),
        }
    }
    assert!(handed_out.is_empty(), "other content at a compacted key was not refused: {handed_out:#?}");
}

/// An export running beside `prune` lists each delivery once. The export pages through the
/// journal by `id`, and a compacted delivery moves to a new row with a higher `id`: were prune to
/// run under it, every row the export had passed would come again at the end as a compact
/// record. Prune waits for the export's lock instead (`stopped_by` says so) and runs after.
#[test]
fn an_export_beside_prune_lists_each_delivery_once() {
    const DELIVERIES: i64 = 1_500;
    let dir = TempDir::new("slotpartner-review-export");
    let url = sqlite_url(&dir, "export");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    for n in 1..=DELIVERIES {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    sqlite_exec(&url, &age_deliveries_sql(DELIVERIES, 100));
    handle(&journal, &plain_refund(DELIVERIES + 1), &reply(0));
    let mut keys = Vec::new();
    let mut pruned = false;
    let rows = journal
        .export(0, i64::MAX, &mut |row| {
            keys.push(row.key.clone());
            if !pruned {
                // The nightly prune starts while the export is on its first page.
                pruned = true;
                let report = journal.prune(&PruneOptions::older_than(days(90))).unwrap();
                assert_eq!(report.compacted, 0, "{report:?}");
                assert!(
                    !report.complete && report.stopped_by.as_deref().is_some_and(|s| s.contains("export")),
                    "{report:?}"
                );
            }
            Ok(())
        })
        .unwrap();
    let mut distinct = keys.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!((rows, distinct.len()), (DELIVERIES as u64 + 1, DELIVERIES as usize + 1));
    assert_eq!(journal.prune(&PruneOptions::older_than(days(90))).unwrap().compacted, DELIVERIES as u64);
}

/// A forward step of the wall clock on the host that prunes compacts replies seconds old. The
/// journal's clock is stepped three days ahead (a virtual machine resumed with a stale offset, a
/// bad NTP answer) while the nightly `prune --older-than 1d` runs: the cutoff is taken from that
/// clock, and a delivery finished seconds ago is compacted. The service's retry of it (its answer
/// was lost) then runs the partner's logic again instead of getting the stored reply, though
/// the retention promises the reply for at least a day.
#[test]
fn a_forward_step_of_the_pruning_clock_compacts_no_fresh_reply() {
    let dir = TempDir::new("slotpartner-review-step-forward");
    let url = sqlite_url(&dir, "step_forward");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    handle(&journal, &plain_refund(1), &reply(1));
    let report = {
        let _stepped = ClockShift::by(3 * DAY_MS);
        journal.prune(&PruneOptions::older_than(days(1))).unwrap()
    };
    assert_eq!(report.compacted, 0, "a reply finished seconds ago was compacted: {report:?}");
    match journal.begin(&plain_refund(1)).unwrap() {
        Begin::Done(stored) => assert_eq!(stored, reply(1)),
        other => panic!("the retry of a delivery finished seconds ago must get its reply; got {other:?}"),
    }
}

/// A worker whose wall clock is behind writes a `finished_ms` that old: its reply lives the
/// retention less the step (the README says so, and why clocks are kept by NTP). One worker's
/// clock is three days behind while the others' is right; with the journal's own retention at
/// 30 days, the next batch run by any `finish` leaves that reply alone, and the retry gets it.
#[test]
fn a_reply_stored_by_a_clock_behind_lives_the_retention_less_the_step() {
    let dir = TempDir::new("slotpartner-review-step-back");
    let url = sqlite_url(&dir, "step_back");
    let options = JournalOptions { retention: Some(days(30)), ..JournalOptions::default() };
    let journal = Journal::open(&url, &options).unwrap();
    {
        let _behind = ClockShift::by(-3 * DAY_MS);
        handle(&journal, &plain_refund(1), &reply(1));
    }
    thread::sleep(Duration::from_millis(1_100));
    handle(&journal, &plain_refund(2), &reply(2));
    match journal.begin(&plain_refund(1)).unwrap() {
        Begin::Done(stored) => assert_eq!(stored, reply(1)),
        other => panic!("a reply stored a second ago must answer the retry; got {other:?}"),
    }
    // 28 days later by that worker's clock, it is 31 days old: past the retention.
    sqlite_exec(
        &url,
        &format!("UPDATE sp_journal_delivery SET finished_ms = finished_ms - {} WHERE transaction_id = 1", 28 * DAY_MS),
    );
    assert_eq!(journal.prune(&PruneOptions::older_than(days(30))).unwrap().compacted, 1);
}

/// A gap found while the wall clock was stepped ahead is hidden from every minimum-age look until
/// the clock catches up, however much traffic follows. Index 3 arrives on a clock one day ahead
/// (index 2 is missing from that moment); the clock is put right and 4..6 arrive. The run 3..6
/// keeps the earliest time of the runs it absorbed, i.e. tomorrow, so `missing_older_than` (and
/// `recovery_plan_older_than`, which recovery uses) leave the gap out for a day, and
/// `Status::oldest_gap_ms` says it was found missing tomorrow.
#[test]
fn a_gap_found_on_a_clock_ahead_is_not_hidden_from_minimum_age_looks() {
    let dir = TempDir::new("slotpartner-review-gap-step");
    let url = sqlite_url(&dir, "gap_step");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    handle(&journal, &plain_refund(1), &reply(1));
    {
        let _ahead = ClockShift::by(DAY_MS);
        handle(&journal, &plain_refund(3), &reply(3));
    }
    for n in 4..=6 {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    assert_eq!(journal.missing(10).unwrap(), vec![(2, 2)]);
    thread::sleep(Duration::from_millis(300));
    let status = journal.status().unwrap();
    let found = status.oldest_gap_ms.expect("a gap is open");
    assert!(found <= now_ms(), "the gap was found missing {} ms in the future", found - now_ms());
    assert_eq!(
        journal.missing_older_than(Duration::from_millis(100), 10).unwrap(),
        vec![(2, 2)],
        "the gap has been missing for 300 ms"
    );
}

/// A stray index (an open index jump) dates every gap found below it afterwards as old as
/// itself. The README says traffic going on below a stray index has its holes "missing as
/// usual"; but a gap's age is taken from the earliest run above it, and the stray index's run is
/// above every such hole. A week after a stray index, index 4 goes missing now: `status` says
/// the oldest gap was found a week ago, and `missing_older_than(1 h)` (recovery's minimum age)
/// lists it at once, so recovery fetches events that are still on their way.
#[test]
fn a_stray_index_dates_no_gap_below_its_stretch() {
    let dir = TempDir::new("slotpartner-review-stray");
    let url = sqlite_url(&dir, "stray");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    for n in [1, 2, 10_000_000] {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    assert_eq!(journal.index_jumps(false, 10).unwrap().len(), 1, "10,000,000 is an open index jump");
    let week = 7 * DAY_MS;
    sqlite_exec(
        &url,
        &format!(
            "UPDATE sp_journal_runs SET since_ms = since_ms - {week}, last_ms = last_ms - {week} WHERE lo = 10000000"
        ),
    );
    // A week later: 3 and 5 arrive, 4 is missing since just now.
    for n in [3, 5] {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    assert_eq!(journal.missing(10).unwrap(), vec![(4, 4)]);
    let found = journal.status().unwrap().oldest_gap_ms.unwrap();
    let listed = journal.missing_older_than(Duration::from_secs(3600), 10).unwrap();
    assert!(
        now_ms() - found < 60_000 && listed.is_empty(),
        "a gap found seconds ago is shown as found {} ms ago, and listed as older than an hour: {listed:?}",
        now_ms() - found
    );
}

/// Resolving a gap by hand counts as a delivery in `Status::last_delivery_ms`. The journal saw
/// its last new index two hours ago (the route to the partner is broken); the operator resolves
/// an old gap, and `last_delivery_ms` jumps to now, telling the monitor that deliveries arrive.
#[test]
fn resolving_a_gap_by_hand_leaves_the_last_delivery() {
    let dir = TempDir::new("slotpartner-review-resolve");
    let url = sqlite_url(&dir, "resolve");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    for n in [1, 2, 10] {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    // Read once, so that the indexes are in the runs (folded) before their times are moved back.
    journal.status().unwrap();
    sqlite_exec(&url, "UPDATE sp_journal_runs SET since_ms = since_ms - 7200000, last_ms = last_ms - 7200000");
    let before = journal.status().unwrap().last_delivery_ms.unwrap();
    assert!(now_ms() - before >= 7_000_000);
    assert_eq!(journal.resolve(3, 9, "the service confirms 3-9 never existed").unwrap(), 7);
    let after = journal.status().unwrap().last_delivery_ms.unwrap();
    assert_eq!(after, before, "no delivery came; the last one is {} ms old", now_ms() - after);
}

/// A compacted delivery of an earlier numbering comes back as an unfinished delivery of the
/// current one. `unfinished` (and recovery's plan, and the refusal to renumber again) tell the
/// current numbering's deliveries by `id > numbering_from_id`; the compaction moves a delivery
/// of the old numbering to a new row above that mark. A resend of that refund after the
/// retention is handed out (reply pruned) and abandoned: its index 5, of the old numbering,
/// is then listed as unfinished in the new numbering, where index 5 names another event that
/// recovery would fetch.
#[test]
fn a_compacted_delivery_of_an_earlier_numbering_stays_out_of_the_current_one() {
    let dir = TempDir::new("slotpartner-review-numbering");
    let url = sqlite_url(&dir, "numbering");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    for n in 4..=6 {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    assert_eq!(journal.renumber(1, "the service restarted its numbering").unwrap(), 2);
    handle(&journal, &plain_refund(101), &reply(101));
    sqlite_exec(&url, &age_deliveries_sql(6, 100));
    assert_eq!(journal.prune(&PruneOptions::older_than(days(90))).unwrap().compacted, 3);
    // The service resends refund 5 (its old index 5); the partner's database is down.
    let claim = new_claim(&journal, &plain_refund(5));
    assert!(claim.reply_pruned());
    journal.abandon(&claim).unwrap();
    assert_eq!(
        journal.unfinished(10).unwrap(),
        Vec::<i64>::new(),
        "index 5 belongs to the earlier numbering; in the current one it names another event"
    );
}

/// The journal's own retention runs a batch on every `finish` of a process per request. The
/// throttle ("at most once a second") is kept per journal handle, and a CGI process or a PHP-FPM
/// request opens its handle per request: each `finish` then runs a whole batch (here 200
/// compactions) after its own commit, holding the journal's write lock. Five requests within a
/// second run five batches. On PostgreSQL each batch also merges the seen indexes under the
/// `runs_merge_lock` row lock (`seen_count` before schema version 4), so every finish of every
/// host queues on that one row.
#[test]
fn the_libraries_retention_never_runs_on_every_finish_of_fresh_handles() {
    const OLD: i64 = 1_000;
    let dir = TempDir::new("slotpartner-review-fresh-handles");
    let url = sqlite_url(&dir, "fresh_handles");
    let setup = Journal::open(&url, &JournalOptions::default()).unwrap();
    for n in 1..=OLD {
        handle(&setup, &plain_refund(n), &reply(n));
    }
    sqlite_exec(&url, &age_deliveries_sql(OLD, 100));
    let options = JournalOptions { retention: Some(days(90)), ..JournalOptions::default() };
    let started = Instant::now();
    for n in 1..=5 {
        // One request: open, handle one delivery, close.
        let journal = Journal::open(&url, &options).unwrap();
        handle(&journal, &plain_refund(OLD + n), &reply(OLD + n));
    }
    let elapsed = started.elapsed();
    let pruned = setup.status().unwrap().pruned;
    let seconds = elapsed.as_secs() + 1;
    assert!(
        pruned <= 200 * seconds,
        "{pruned} deliveries compacted by the journal's own retention in {elapsed:?}: {} batches, not one a second",
        pruned / 200
    );
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

fn pg_exec(url: &str, sql: &str) {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client.batch_execute(sql).unwrap();
}

/// Waits until a session of the cluster sleeps in `pg_sleep` (the trigger holding a transaction
/// open).
fn await_sleeper(cluster: &Cluster) {
    let mut client = cluster.client();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let row = client.query_one("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'", &[]).unwrap();
        if row.get::<_, i64>(0) > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "no transaction reached the trigger");
        thread::sleep(Duration::from_millis(10));
    }
}

/// A trigger function that holds its transaction open for two seconds.
const SLOW: &str = "CREATE FUNCTION slow_down() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$;";

/// On PostgreSQL, `prune` compacts a delivery whose conflict opened during the batch. The batch
/// reads its candidates (finished, old, no open conflict) once, then deletes and re-inserts each
/// checking only that it is still `done`: a conflicting resend recorded meanwhile (committed
/// while the batch waits for the row the resend had locked) does not stop the compaction. The
/// README promises that a delivery whose conflict is open is never pruned; its reply is gone
/// while the operator still has to judge the conflict.
#[test]
fn postgres_prune_leaves_a_delivery_whose_conflict_opened_during_the_batch() {
    let Some(cluster) = Cluster::start("PostgreSQL retention review (conflict during a batch)") else { return };
    let url = cluster.schema_url("conflict_race");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    handle(&journal, &plain_refund(1), &reply(1));
    pg_exec(&url, &age_deliveries_sql(1, 100));
    // The resend's conflict is recorded in a transaction that takes two seconds to commit.
    pg_exec(
        &url,
        &format!(
            "{SLOW} CREATE TRIGGER slow_conflict AFTER INSERT ON sp_journal_conflicts FOR EACH ROW EXECUTE FUNCTION slow_down();"
        ),
    );
    thread::scope(|s| {
        let resend = s.spawn(|| journal.begin(&refund(1, 1, "another request")).unwrap());
        await_sleeper(&cluster);
        let report = journal.prune(&PruneOptions::older_than(days(90))).unwrap();
        assert!(matches!(resend.join().unwrap(), Begin::Conflict(_)));
        println!("{report:?}");
    });
    assert_eq!(journal.conflicts(false, 10).unwrap().len(), 1, "the conflict is open");
    assert_eq!(state_of(&journal, 1), RecordState::Done, "a delivery whose conflict is open must stay whole");
}

/// On PostgreSQL, `forget_older_than` deletes a compact record that a resend has just taken over.
/// The removal of compact records is `DELETE ... WHERE id IN (SELECT id ... WHERE state =
/// 'pruned' ...)`: when the row was claimed by a resend whose transaction commits while the
/// DELETE waits for it, PostgreSQL re-checks only the `id` and deletes the live claim. The
/// partner then runs its logic (the claim says `reply_pruned`), and its `finish` fails with
/// `ClaimLost`: the reply is never stored. Worse, while that worker still runs, the next
/// delivery of the same payout finds the key free and is handed out as attempt 1: two workers
/// run the same delivery at once. `in_progress` stays one too high for good.
#[test]
fn postgres_forget_leaves_a_compact_record_just_taken_over() {
    let Some(cluster) = Cluster::start("PostgreSQL retention review (forget beside a resend)") else { return };
    let url = cluster.schema_url("forget_race");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    handle(&journal, &plain_refund(1), &reply(1));
    pg_exec(&url, &age_deliveries_sql(1, 400));
    handle(&journal, &plain_refund(2), &reply(2));
    assert_eq!(journal.prune(&PruneOptions::older_than(days(90))).unwrap().compacted, 1);
    // The resend's take-over commits two seconds after its UPDATE.
    pg_exec(
        &url,
        &format!(
            "{SLOW} CREATE TRIGGER slow_take_over AFTER UPDATE ON sp_journal_delivery FOR EACH ROW WHEN (OLD.state = 'pruned' AND NEW.state = 'claimed') EXECUTE FUNCTION slow_down();"
        ),
    );
    let forget = PruneOptions { forget_older_than: Some(days(365)), ..PruneOptions::older_than(days(90)) };
    let claim = thread::scope(|s| {
        let resend = s.spawn(|| new_claim(&journal, &plain_refund(1)));
        await_sleeper(&cluster);
        let report = journal.prune(&forget).unwrap();
        println!("{report:?}");
        resend.join().unwrap()
    });
    assert!(claim.reply_pruned());
    // While the first worker runs the partner's logic, the service delivers it once more.
    let impatient = JournalOptions { busy_wait: Duration::from_millis(200), ..JournalOptions::default() };
    let again = Journal::open(&url, &impatient).unwrap().begin(&plain_refund(1)).unwrap();
    let finished = journal.finish(&claim, &reply(1));
    let status = journal.status().unwrap();
    assert!(
        matches!(again, Begin::Busy) && finished.is_ok() && status.in_progress == 0,
        "the live claim was deleted under its worker: a second delivery got {again:?} while it ran, its finish gave {finished:?}; {status:?}"
    );
}

/// On PostgreSQL, `Status::last_delivery_ms` and `oldest_gap_ms` are the time of the first
/// `status` (or any look at the gaps) after the delivery, not of the delivery. The seen indexes
/// wait in `sp_journal_seen` until a process has made 256 indexed deliveries or someone reads
/// the gaps; the runs are then stamped with the merge's time. A quiet journal (a few deliveries
/// per worker between two checks) therefore shows its last delivery and its gaps as just now
/// at every check: here a delivery three seconds old, and a gap found three seconds ago, are
/// both shown as found within the last half second.
#[test]
fn postgres_delivery_and_gap_times_are_those_of_the_arrival() {
    let Some(cluster) = Cluster::start("PostgreSQL retention review (times of the merge)") else { return };
    let url = cluster.schema_url("merge_times");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    for n in [1, 2, 4] {
        handle(&journal, &plain_refund(n), &reply(n));
    }
    let delivered = now_ms();
    thread::sleep(Duration::from_secs(3));
    let status = journal.status().unwrap();
    assert_eq!(status.missing, 1);
    let last = status.last_delivery_ms.unwrap();
    let gap = status.oldest_gap_ms.unwrap();
    assert!(
        last <= delivered + 500 && gap <= delivered + 500,
        "the last delivery was {} ms ago, shown as {} ms ago; the gap was found {} ms ago, shown as {} ms ago",
        now_ms() - delivered,
        now_ms() - last,
        now_ms() - delivered,
        now_ms() - gap
    );
}
