//! Backing up a live SQLite journal and restoring from the copy: a backup taken in the middle of
//! a burst of deliveries by several threads holds exactly a moment of the journal (every
//! delivery finished before it started answers its reply from the copy, the copy's gaps are the
//! indexes really missing among those it recorded, its counters agree with its records), it is
//! a sound SQLite file and a journal of its own; a backup never replaces a file; and a
//! PostgreSQL journal is left to `pg_dump`, whose command the refusal gives (run here against a
//! throw-away cluster, skipped when PostgreSQL is not installed).

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use slotpartner::journal::{Begin, Delivery, Journal, JournalOptions};
use slotpartner::{ErrorKind, ParseOptions, parse};

#[path = "e2e/cluster.rs"]
mod cluster;
use cluster::{Cluster, TempDir};

/// A refund with transactionId and index `n`, as `benches/journal.rs` builds them.
fn refund(n: i64) -> Delivery {
    let body = format!(
        r#"{{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-{n}","playerIdentifier":"player-1","playerPartnerIdentifier":"partner-1","transactionId":{n},"buyTransactionId":{},"gameSessionId":5,"partnerGameRequestIdentifier":"req-{n}","gameId":1003,"isMobile":false,"index":{n}}}"#,
        n + 1_000_000_000
    );
    Delivery::of(&parse(body.as_bytes(), &ParseOptions::default()).expect("a valid refund"))
}

/// The reply stored for delivery `n`: its own bytes, `pad` bytes longer.
fn reply(n: i64, pad: usize) -> Vec<u8> {
    format!(r#"{{"refund":{{"success":true,"errorMessage":""}},"n":{n},"pad":"{}"}}"#, "x".repeat(pad)).into_bytes()
}

/// Handles delivery `n` from New to finish.
fn handle(journal: &Journal, n: i64, pad: usize) {
    match journal.begin(&refund(n)).expect("begin") {
        Begin::New(claim) => journal.finish(&claim, &reply(n, pad)).expect("finish"),
        other => panic!("expected New for {n}, got {other:?}"),
    }
}

/// What `missing` answers for `seen`: ranges from the lowest to the highest index not in it.
fn gaps_of(seen: &BTreeSet<i64>) -> Vec<(i64, i64)> {
    let mut gaps = Vec::new();
    let mut next = match seen.first() {
        Some(first) => *first,
        None => return gaps,
    };
    for &index in seen {
        if index > next {
            gaps.push((next, index - 1));
        }
        next = index + 1;
    }
    gaps
}

/// Files in `dir` whose name holds `.partial-` (a backup's temporary file).
fn partial_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.contains(".partial-"))
        .collect()
}

/// Deliveries before the burst (with 16 KiB replies: a journal of several backup steps).
const BEFORE: i64 = 600;
const THREADS: i64 = 4;

/// Indexes the burst never delivers.
fn skipped(n: i64) -> bool {
    n % 97 == 0 || (1_201..=1_210).contains(&n)
}

#[test]
fn a_backup_in_the_middle_of_a_burst_holds_one_moment_of_the_journal_and_restores() {
    let dir = TempDir::new("slotpartner-backup");
    let url = format!("sqlite:{}", dir.path().join("journal.db").display());
    let journal = Arc::new(Journal::open(&url, &JournalOptions::default()).expect("open"));
    for n in (1..=BEFORE).filter(|n| !skipped(*n)) {
        handle(&journal, n, 16 * 1024);
    }

    // The burst: each thread delivers every THREADS-th index in order until told to stop;
    // `finished` collects what `finish` returned for.
    let finished = Arc::new(Mutex::new(BTreeSet::new()));
    finished.lock().unwrap().extend((1..=BEFORE).filter(|n| !skipped(*n)));
    let count = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..THREADS)
        .map(|w| {
            let (journal, finished) = (Arc::clone(&journal), Arc::clone(&finished));
            let (count, stop) = (Arc::clone(&count), Arc::clone(&stop));
            thread::spawn(move || {
                for n in (BEFORE + 1..).filter(|n| n % THREADS == w && !skipped(*n)) {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    handle(&journal, n, (n % 50) as usize);
                    finished.lock().unwrap().insert(n);
                    count.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    let wait_for = |target: usize| {
        while count.load(Ordering::SeqCst) < target {
            assert!(Instant::now() < deadline, "the burst stalled at {} deliveries", count.load(Ordering::SeqCst));
            thread::sleep(Duration::from_millis(1));
        }
    };
    wait_for(1_000);
    // Every delivery in `done_before` was committed before the backup began.
    let done_before = finished.lock().unwrap().clone();
    let before_backup = count.load(Ordering::SeqCst);
    let dest = dir.path().join("backup.db");
    let report = journal.backup(&dest).expect("backup");
    let after_backup = count.load(Ordering::SeqCst);
    assert!(after_backup > before_backup, "no delivery was handled while the backup ran: writers were held up");
    wait_for(after_backup + 500);
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.join().unwrap();
    }

    // The live journal: every delivery handled, the indexes never delivered missing.
    let all = finished.lock().unwrap().clone();
    let live = journal.status().unwrap();
    assert_eq!(live.handled as usize, all.len());
    assert_eq!(journal.missing(1_000_000).unwrap(), gaps_of(&all));

    // The file: in place, 0600, nothing temporary left, sound, the size reported.
    let meta = std::fs::metadata(&dest).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "the backup holds player identifiers: 0600");
    assert_eq!(report.bytes, meta.len());
    assert_eq!(report.bytes, report.pages * 4096);
    assert!(report.pages > 2_048, "a journal of several steps ({} pages)", report.pages);
    assert!(partial_files(dir.path()).is_empty(), "{:?}", partial_files(dir.path()));
    {
        let db = rusqlite::Connection::open(&dest).unwrap();
        let check: String = db.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
        let mode: String = db.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal", "the copy is a WAL journal as the original");
    }

    // The copy is a journal of its own.
    let copy = Journal::open(&format!("sqlite:{}", dest.display()), &JournalOptions::default()).expect("open the copy");
    let status = copy.status().unwrap();
    // What it recorded, read through its own API, before any delivery touches it.
    let mut seen = BTreeSet::new();
    let (mut done, mut claimed) = (BTreeSet::new(), 0_u64);
    for n in 1..=*all.last().unwrap() {
        let records = copy.deliveries_at(n).unwrap();
        assert!(records.len() <= 1, "index {n}: {records:?}");
        if let Some((key, state, transaction_id)) = records.first() {
            assert_eq!((key.as_str(), *transaction_id), (format!("gameSessionBuyRefund:{n}").as_str(), Some(n)));
            seen.insert(n);
            match state.as_str() {
                "done" => {
                    done.insert(n);
                }
                "claimed" => claimed += 1,
                other => panic!("index {n} is {other} in the copy"),
            }
        }
    }
    assert!(done_before.is_subset(&done), "a delivery finished before the backup is not done in the copy");
    assert!(done.len() < all.len(), "the copy holds deliveries finished after the backup started");
    assert!(seen.iter().all(|n| !skipped(*n)), "a skipped index is recorded in the copy");
    // Its gaps: exactly the indexes missing among those it recorded, the skipped ones among them.
    let gaps = copy.missing(1_000_000).unwrap();
    assert_eq!(gaps, gaps_of(&seen));
    let missing: BTreeSet<i64> = gaps.iter().flat_map(|&(first, last)| first..=last).collect();
    assert!(missing.is_disjoint(&seen), "an index both seen and missing");
    let highest = *seen.last().unwrap();
    assert!(highest > 1_210, "the copy reaches beyond the skipped range (highest {highest})");
    assert!((1..=highest).filter(|n| skipped(*n)).all(|n| missing.contains(&n)), "a skipped index not missing");
    // Its counters agree with its records.
    assert_eq!(status.handled, done.len() as u64);
    assert_eq!(status.in_progress, claimed);
    assert_eq!((status.replayed, status.conflicts, status.refused, status.unfinished), (0, 0, 0, 0));
    assert_eq!(status.missing, missing.len() as u64);
    assert_eq!((status.first_index, status.highest_index), (Some(1), Some(highest)));
    assert_eq!(status.watermark, Some(gaps.first().map_or(highest, |&(first, _)| first - 1)));

    // Restored from the copy: every delivery finished before the backup is answered with its
    // exact reply, and runs nothing.
    for &n in &done_before {
        match copy.begin(&refund(n)).unwrap() {
            Begin::Done(stored) => {
                let pad = if n <= BEFORE { 16 * 1024 } else { (n % 50) as usize };
                assert_eq!(stored, reply(n, pad), "delivery {n}");
            }
            other => panic!("delivery {n} finished before the backup: expected Done from the copy, got {other:?}"),
        }
    }
    assert_eq!(copy.status().unwrap().replayed, done_before.len() as u64);
}

#[test]
fn a_backup_never_replaces_a_file_and_names_dest() {
    let dir = TempDir::new("slotpartner-backup-refused");
    let path = dir.path().join("journal.db");
    let journal = Journal::open(&format!("sqlite:{}", path.display()), &JournalOptions::default()).unwrap();
    handle(&journal, 1, 10);
    let refused = |dest: &Path, says: &str| {
        let error = journal.backup(dest).expect_err("refused");
        assert_eq!((error.kind, error.field.as_str()), (ErrorKind::InvalidArgument, "dest"), "{}", error.message);
        assert!(error.message.contains(says), "{}", error.message);
    };

    let existing = dir.path().join("existing.db");
    std::fs::write(&existing, b"yesterday's backup").unwrap();
    refused(&existing, "exists");
    assert_eq!(std::fs::read(&existing).unwrap(), b"yesterday's backup", "the file was touched");
    refused(&path, "exists");
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(dir.path().join("nowhere.db"), &link).unwrap();
    refused(&link, "exists");
    assert!(!dir.path().join("nowhere.db").exists(), "written through a link");
    refused(&dir.path().join("no-such-folder").join("backup.db"), "cannot create");
    refused(Path::new(""), "names no file");
    refused(dir.path(), "exists");
    assert!(partial_files(dir.path()).is_empty());

    // A new name is taken; taking it again is refused, the first backup untouched.
    let dest = dir.path().join("backup.db");
    let report = journal.backup(&dest).unwrap();
    assert!(report.pages >= 1 && report.bytes == std::fs::metadata(&dest).unwrap().len());
    let first = std::fs::read(&dest).unwrap();
    handle(&journal, 2, 10);
    refused(&dest, "exists");
    assert_eq!(std::fs::read(&dest).unwrap(), first);
    let copy = Journal::open(&format!("sqlite:{}", dest.display()), &JournalOptions::default()).unwrap();
    assert_eq!(copy.status().unwrap().handled, 1);
}

#[test]
fn a_postgresql_journal_is_left_to_pg_dump() {
    let Some(cluster) = Cluster::start("PostgreSQL backup hint") else { return };
    let url = cluster.schema_url("backup");
    let journal = Journal::open(&url, &JournalOptions::default()).unwrap();
    handle(&journal, 1, 10);
    let dir = TempDir::new("slotpartner-backup-pg");
    let dest = dir.path().join("backup.db");
    let error = journal.backup(&dest).expect_err("PostgreSQL has its own tools");
    assert_eq!((error.kind, error.field.as_str()), (ErrorKind::InvalidArgument, "journal_url"));
    let command = "(umask 077 && pg_dump --format=custom --table='sp_journal_*' --file=journal.dump JOURNAL_URL)";
    assert!(error.message.contains(command), "{}", error.message);
    assert!(!error.message.contains(&cluster.port().to_string()), "the journal's URL named: {}", error.message);
    assert!(!dest.exists());

    // The command given works on the journal's URL (libpq reads it as the library does).
    if !Path::new("/usr/bin/pg_dump").exists() {
        println!("SKIP pg_dump of the journal: no /usr/bin/pg_dump (Debian package `postgresql-client`)");
        return;
    }
    // As given, by a shell whose umask lets others read what it writes: the dump is 0600.
    let dump = dir.path().join("journal.dump");
    let given = command.replace("JOURNAL_URL", &format!("'{url}'"));
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("umask 022 && cd '{}' && {given}", dir.path().display())])
        .output()
        .unwrap();
    assert!(out.status.success(), "{given}: {}", String::from_utf8_lossy(&out.stderr));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&dump).unwrap().permissions().mode() & 0o777, 0o600);
    let list = std::process::Command::new("pg_restore").arg("--list").arg(&dump).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.contains("TABLE DATA backup sp_journal_delivery"), "{list}");

    // Restored as the hint says into a new server's database (the schema made first, as the
    // dump of its tables does not make it), the journal takes deliveries claimed at finish,
    // whose storing statement is the schema's function.
    let restored = cluster.create_database("restored");
    let mut client = postgres::Client::connect(&restored, postgres::NoTls).unwrap();
    client.batch_execute("CREATE SCHEMA backup").unwrap();
    let restored_url = format!("{restored}?options=-csearch_path%3Dbackup");
    let out = std::process::Command::new("pg_restore")
        .args(["--clean", "--if-exists", "--single-transaction", &format!("--dbname={restored_url}")])
        .arg(&dump)
        .output()
        .unwrap();
    assert!(out.status.success(), "pg_restore: {}", String::from_utf8_lossy(&out.stderr));
    let journal = Journal::open(&restored_url, &JournalOptions { claim_at_finish: true, ..JournalOptions::default() })
        .expect("open the restored journal");
    assert_eq!(journal.status().unwrap().handled, 1);
    handle(&journal, 2, 10);
    assert_eq!(journal.status().unwrap().handled, 2);
}
