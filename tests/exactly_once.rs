//! Exactly once under the failures a partner's workers meet, through the journal's Rust API:
//!
//! - a worker killed after `begin` and before `finish` loses nothing: after the lease the next
//!   delivery runs as attempt 2, the ledger's unique `transactionId` absorbs its credit, and the
//!   wallet holds one credit;
//! - 4 processes of 8 threads each calling `begin` on one key at once: exactly one `New`, every
//!   other `Done` with that worker's reply byte for byte, or `Busy` (SQLite, and PostgreSQL when
//!   installed, straight and through PgBouncer in transaction pooling mode, whose two server
//!   connections the 32 threads' connections share);
//! - faults: a reply over `max_reply_bytes` is refused and the claim kept; a full disk (a tiny
//!   tmpfs in a private mount namespace, else a file-size limit) gives `ErrorKind::Journal`
//!   errors and loses no stored reply.
//!
//! Child processes are this test binary run again on an `#[ignore]`d test with an environment
//! variable (the children do nothing without it). The end-to-end run through HTTP and the C ABI
//! is `tests/e2e/exactly_once.py` (`make test-e2e`).

#[path = "e2e/cluster.rs"]
mod cluster;
#[path = "e2e/pgbouncer.rs"]
mod pgbouncer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Barrier;
use std::thread;
use std::time::Duration;

use cluster::{Cluster, TempDir, have_tool, is_root, now_ms};
use pgbouncer::PgBouncer;
use slotpartner::journal::{Begin, Delivery, Journal, JournalOptions};
use slotpartner::{ErrorKind, ParseOptions, parse};

// ---------------------------------------------------------------------------------------------
// Deliveries, the demo ledger, child processes

/// A jackpot payout of `money_won` minor units.
fn payout(transaction_id: i64, index: i64, money_won: i64) -> Delivery {
    let body = format!(
        r#"{{"event":"jackpotPayout","index":{index},"jackpotIdentifier":"jp-major-eu","playerIdentifier":"svc-player-1001","playerPartnerIdentifier":"partner-42","currencyISO4217":"EUR","moneyWon":{money_won},"coinsWon":0,"isMoney":true,"epochReleasedMillis":1795300123456,"isPrimary":true,"transactionId":{transaction_id},"buyTransactionId":{},"partnerGameRequestIdentifier":"req-{transaction_id}","gameSessionId":5552,"gameId":12,"isMobile":false}}"#,
        transaction_id - 100_000
    );
    Delivery::of(&parse(body.as_bytes(), &ParseOptions::default()).expect("a valid payout"))
}

fn reply_for(transaction_id: i64) -> Vec<u8> {
    format!(r#"{{"payout":{{"success":true,"errorMessage":""}},"credited":{transaction_id}}}"#).into_bytes()
}

fn sqlite_url(path: &Path) -> String {
    format!("sqlite:{}", path.display())
}

fn open(url: &str, options: &JournalOptions) -> Journal {
    Journal::open(url, options).unwrap_or_else(|e| panic!("open {url}: {e}"))
}

/// The partner's ledger: a SQLite table whose primary key is the transactionId, so that a second
/// credit of one transaction is refused.
struct Ledger(rusqlite::Connection);

impl Ledger {
    fn open(path: &Path) -> Ledger {
        let db = rusqlite::Connection::open(path).unwrap();
        db.busy_timeout(Duration::from_secs(5)).unwrap();
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS credits (transaction_id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)",
        )
        .unwrap();
        Ledger(db)
    }

    /// Credits `amount` once: true when credited now, false when the unique key shows it was
    /// credited before (a delivery run again: treat it as done).
    fn credit(&self, transaction_id: i64, amount: i64) -> bool {
        match self.0.execute("INSERT INTO credits (transaction_id, amount) VALUES (?1, ?2)", [transaction_id, amount]) {
            Ok(_) => true,
            Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::ConstraintViolation => false,
            Err(e) => panic!("ledger: {e}"),
        }
    }

    fn credits(&self) -> Vec<(i64, i64)> {
        let mut statement = self.0.prepare("SELECT transaction_id, amount FROM credits ORDER BY 1").unwrap();
        statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?))).unwrap().map(Result::unwrap).collect()
    }
}

/// This test binary, running the ignored test `child` with `env` set; `prefix` wraps it (a
/// shell that sets limits, `unshare`).
fn child(prefix: &[&str], test: &str, env: &[(&str, &str)]) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut command = match prefix.split_first() {
        Some((first, rest)) => {
            let mut command = Command::new(first);
            command.args(rest).arg(exe);
            command
        }
        None => Command::new(exe),
    };
    command.args(["--ignored", "--exact", test, "--nocapture", "--test-threads=1"]);
    command.envs(env.iter().copied());
    command
}

fn describe(output: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// What follows `tag ` on the lines of a child's stdout that carry it (the test harness may
/// print its `test name ... ` before the first).
fn tagged(output: &Output, tag: &str) -> Vec<String> {
    let tag = format!("{tag} ");
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.lines().filter_map(|l| l.split_once(&tag).map(|(_, rest)| rest.to_owned())).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ---------------------------------------------------------------------------------------------
// (a) A worker killed between begin and finish

const KILLED_TX: i64 = 900_000_123;
const KILLED_MONEY: i64 = 150_000;

#[test]
fn worker_killed_after_begin_loses_nothing() {
    let dir = TempDir::new("slotpartner-killed");
    let journal_path = dir.path().join("journal.db");
    let ledger_path = dir.path().join("ledger.db");
    let url = sqlite_url(&journal_path);
    let options = JournalOptions { lease: Duration::from_secs(2), busy_wait: Duration::ZERO, ..Default::default() };
    let journal = open(&url, &options);

    // The worker: begins, credits the ledger, and dies before finish.
    let dir_text = dir.path().to_str().unwrap();
    let output = child(&[], "killed_worker_child", &[("SLOTPARTNER_KILLED_DIR", dir_text)]).output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(output.status.signal(), Some(6), "the worker should die of SIGABRT: {}", describe(&output));
    assert_eq!(tagged(&output, "WORKER"), ["new attempt 1", "credited"], "{}", describe(&output));

    let ledger = Ledger::open(&ledger_path);
    assert_eq!(ledger.credits(), [(KILLED_TX, KILLED_MONEY)]);
    let event = payout(KILLED_TX, 7, KILLED_MONEY);
    // Its claim is still held: a delivery now is told so (HTTP 503), it runs nothing.
    assert!(matches!(journal.begin(&event).unwrap(), Begin::Busy));
    assert_eq!(journal.status().unwrap().in_progress, 1);

    // After the lease, the next delivery takes the claim over as attempt 2.
    let record = journal.lookup(KILLED_TX).unwrap().pop().expect("the dead worker's claim");
    let lease_until = record.lease_until_ms.expect("a claimed record has a lease");
    thread::sleep(Duration::from_millis(u64::try_from(lease_until - now_ms() + 50).unwrap_or(0)));
    let claim = match journal.begin(&event).unwrap() {
        Begin::New(claim) => claim,
        other => panic!("expected New after the lease, got {other:?}"),
    };
    assert_eq!(claim.attempt(), 2);
    // The ledger's unique key says it is credited: the partner answers as the first attempt would.
    assert!(!ledger.credit(KILLED_TX, KILLED_MONEY), "the second credit must be refused by the unique key");
    journal.finish(&claim, &reply_for(KILLED_TX)).unwrap();

    // A third delivery is answered from the journal and runs nothing.
    match journal.begin(&event).unwrap() {
        Begin::Done(reply) => assert_eq!(reply, reply_for(KILLED_TX)),
        other => panic!("expected Done, got {other:?}"),
    }
    assert_eq!(ledger.credits(), [(KILLED_TX, KILLED_MONEY)], "exactly one credit");
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.replayed, status.in_progress), (1, 1, 0));
    assert_eq!(journal.lookup(KILLED_TX).unwrap()[0].attempts, 2);
}

/// The worker of `worker_killed_after_begin_loses_nothing`.
#[test]
#[ignore = "run by worker_killed_after_begin_loses_nothing"]
fn killed_worker_child() {
    let Some(dir) = std::env::var_os("SLOTPARTNER_KILLED_DIR").map(PathBuf::from) else { return };
    let options = JournalOptions { lease: Duration::from_secs(2), busy_wait: Duration::ZERO, ..Default::default() };
    let journal = open(&sqlite_url(&dir.join("journal.db")), &options);
    let ledger = Ledger::open(&dir.join("ledger.db"));
    let Begin::New(claim) = journal.begin(&payout(KILLED_TX, 7, KILLED_MONEY)).unwrap() else {
        panic!("the first delivery should be new");
    };
    println!("WORKER new attempt {}", claim.attempt());
    assert!(ledger.credit(KILLED_TX, KILLED_MONEY));
    println!("WORKER credited");
    std::process::abort(); // killed before finish
}

// ---------------------------------------------------------------------------------------------
// (b) 4 processes of 8 threads on one key

const PROCESSES: usize = 4;
const THREADS: usize = 8;
const CONTENDED_TX: i64 = 900_004_242;

#[test]
fn four_processes_eight_threads_one_key_sqlite() {
    let dir = TempDir::new("slotpartner-one-key");
    one_key(&sqlite_url(&dir.path().join("journal.db")));
}

#[test]
fn four_processes_eight_threads_one_key_postgres() {
    let Some(cluster) = Cluster::start("PostgreSQL: 4 processes and 8 threads on one key") else { return };
    one_key(&cluster.schema_url("one_key"));
}

#[test]
fn four_processes_eight_threads_one_key_pgbouncer() {
    let Some(bouncer) = PgBouncer::start("PostgreSQL through PgBouncer: 4 processes and 8 threads on one key") else {
        return;
    };
    one_key(&bouncer.create_database("one_key"));
}

fn one_key(url: &str) {
    open(url, &JournalOptions::default()); // creates the tables
    // A start time far enough ahead for every process to start and connect.
    let start = (now_ms() + 1500).to_string();
    let workers: Vec<_> = (0..PROCESSES)
        .map(|_| {
            child(&[], "one_key_child", &[("SLOTPARTNER_ONE_KEY_URL", url), ("SLOTPARTNER_ONE_KEY_START", &start)])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Every worker waited for before any is judged: none is left running when one failed.
    let outputs: Vec<Output> = workers.into_iter().map(|worker| worker.wait_with_output().unwrap()).collect();
    let mut answers = Vec::new();
    for output in outputs {
        assert!(output.status.success(), "a worker failed: {}", describe(&output));
        let lines = tagged(&output, "ANSWER");
        assert_eq!(lines.len(), THREADS, "{}", describe(&output));
        answers.extend(lines);
    }
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for answer in &answers {
        *kinds.entry(answer.split(' ').next().unwrap()).or_default() += 1;
    }
    println!("{url}: {kinds:?}");
    let new: Vec<&String> = answers.iter().filter(|a| a.starts_with("new ")).collect();
    assert_eq!(new.len(), 1, "exactly one New across {PROCESSES} processes of {THREADS} threads: {answers:?}");
    // "new 1 <reply>": attempt 1, and the reply that worker stored.
    let (attempt, reply) = new[0]["new ".len()..].split_once(' ').unwrap();
    assert_eq!(attempt, "1");
    for answer in &answers {
        match answer.split_once(' ') {
            Some(("new", _)) => {}
            Some(("done", stored)) => assert_eq!(stored, reply, "a Done reply differs from the first"),
            None if answer == "busy" => {}
            _ => panic!("unexpected answer {answer:?}"),
        }
    }
    let done = kinds.get("done").copied().unwrap_or(0) as u64;
    let status = open(url, &JournalOptions::default()).status().unwrap();
    assert_eq!((status.handled, status.replayed, status.in_progress, status.conflicts), (1, done, 0, 0));
}

/// One process of `one_key`: 8 threads that call begin at the agreed time.
#[test]
#[ignore = "run by four_processes_eight_threads_one_key_*"]
fn one_key_child() {
    let (Ok(url), Ok(start)) = (std::env::var("SLOTPARTNER_ONE_KEY_URL"), std::env::var("SLOTPARTNER_ONE_KEY_START"))
    else {
        return;
    };
    let start: i64 = start.parse().unwrap();
    // A thread that fails ends the process: the others would wait at the barrier for it forever.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |panic| {
        report(panic);
        std::process::exit(101);
    }));
    let barrier = Barrier::new(THREADS);
    let event = payout(CONTENDED_TX, 1, 5000);
    let answers: Vec<String> = thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (url, barrier, event) = (&url, &barrier, &event);
                s.spawn(move || {
                    let journal = open(url, &JournalOptions::default());
                    journal.status().unwrap(); // a connection of its own, ready
                    barrier.wait();
                    thread::sleep(Duration::from_millis(u64::try_from(start - now_ms()).unwrap_or(0)));
                    match journal.begin(event).unwrap() {
                        Begin::New(claim) => {
                            thread::sleep(Duration::from_millis(200)); // the partner's logic
                            let reply = format!("handled by process {} thread {t}", std::process::id());
                            journal.finish(&claim, reply.as_bytes()).unwrap();
                            format!("new {} {}", claim.attempt(), hex(reply.as_bytes()))
                        }
                        Begin::Done(reply) => format!("done {}", hex(&reply)),
                        Begin::Busy => "busy".to_owned(),
                        other => format!("other {other:?}"),
                    }
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for answer in answers {
        println!("ANSWER {answer}");
    }
}

// ---------------------------------------------------------------------------------------------
// (c) Faults

#[test]
fn reply_over_the_limit_is_refused_and_the_claim_kept() {
    let dir = TempDir::new("slotpartner-reply-limit");
    let url = sqlite_url(&dir.path().join("journal.db"));
    let options = JournalOptions { max_reply_bytes: 1024, busy_wait: Duration::ZERO, ..Default::default() };
    let journal = open(&url, &options);
    let event = payout(900_000_001, 1, 700);
    let Begin::New(claim) = journal.begin(&event).unwrap() else { panic!("expected New") };
    let error = journal.finish(&claim, &[b'x'; 1025]).unwrap_err();
    assert_eq!((error.kind, error.field.as_str()), (ErrorKind::InvalidArgument, "reply"), "{error}");
    assert!(
        error.message.contains("1025 bytes")
            && error.message.contains("1024 bytes")
            && error.message.contains("still held"),
        "{error}"
    );
    // Nothing stored, the claim held: another worker is told it is busy, not handed a reply.
    assert!(matches!(open(&url, &options).begin(&event).unwrap(), Begin::Busy));
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.in_progress), (0, 1));
    // The worker finishes with a reply that fits; that is what every repeat gets.
    let reply = reply_for(900_000_001);
    journal.finish(&claim, &reply).unwrap();
    match journal.begin(&event).unwrap() {
        Begin::Done(stored) => assert_eq!(stored, reply),
        other => panic!("expected Done, got {other:?}"),
    }
}

/// How a full disk is simulated for the child.
enum FullDisk {
    /// A 1 MiB tmpfs mounted over the folder in a private mount namespace (`unshare`): the
    /// disk really fills (ENOSPC), and the mount disappears with the child.
    Tmpfs(Vec<String>),
    /// A file-size limit (`ulimit -f`, SIGXFSZ ignored): writes past it fail with EFBIG.
    FileSizeLimit(Vec<String>),
}

fn full_disk_method(dir: &Path) -> Option<FullDisk> {
    let script = format!(r#"mount -t tmpfs -o size=1m slotpartner-full "{}" && exec "$0" "$@""#, dir.display());
    if have_tool("unshare") {
        // Root needs only a mount namespace; others map themselves to root in a user namespace.
        let namespaces: &[&str] = if is_root() { &["--mount"] } else { &["--map-root-user", "--mount"] };
        let mut prefix: Vec<String> =
            std::iter::once("unshare").chain(namespaces.iter().copied()).map(Into::into).collect();
        prefix.extend(["--propagation".into(), "private".into(), "sh".into(), "-c".into(), script]);
        // Can this machine do it (a container may refuse the namespace or the mount)?
        let probe = Command::new(&prefix[0]).args(&prefix[1..]).arg("true").output();
        if probe.is_ok_and(|p| p.status.success()) {
            return Some(FullDisk::Tmpfs(prefix));
        }
    }
    if have_tool("sh") {
        // 2,000 blocks of 512 bytes: the journal file and its WAL may not grow past 1 MiB.
        let script = r#"trap '' XFSZ; ulimit -f 2000 && exec "$0" "$@""#;
        return Some(FullDisk::FileSizeLimit(vec!["sh".into(), "-c".into(), script.into()]));
    }
    None
}

#[test]
fn full_disk_gives_journal_errors_and_loses_nothing() {
    let dir = TempDir::new("slotpartner-full-disk");
    let mount = dir.path().join("disk");
    std::fs::create_dir(&mount).unwrap();
    let (how, prefix) = match full_disk_method(&mount) {
        Some(FullDisk::Tmpfs(prefix)) => ("a 1 MiB tmpfs", prefix),
        Some(FullDisk::FileSizeLimit(prefix)) => ("a 1 MiB file-size limit (no mount namespace here)", prefix),
        None => {
            println!("SKIP full disk: neither unshare (a private tmpfs) nor sh (ulimit -f) is available");
            return;
        }
    };
    let prefix: Vec<&str> = prefix.iter().map(String::as_str).collect();
    let output =
        child(&prefix, "full_disk_child", &[("SLOTPARTNER_FULL_DIR", mount.to_str().unwrap())]).output().unwrap();
    assert!(output.status.success(), "full disk ({how}): {}", describe(&output));
    let verdict = tagged(&output, "FULL");
    assert!(verdict.last().is_some_and(|v| v.starts_with("ok")), "{}", describe(&output));
    println!("full disk simulated with {how}:");
    for line in verdict {
        println!("  {line}");
    }
}

/// The child of `full_disk_gives_journal_errors_and_loses_nothing`, on the small disk.
#[test]
#[ignore = "run by full_disk_gives_journal_errors_and_loses_nothing"]
fn full_disk_child() {
    let Some(dir) = std::env::var_os("SLOTPARTNER_FULL_DIR").map(PathBuf::from) else { return };
    let options = JournalOptions { lease: Duration::from_millis(300), busy_wait: Duration::ZERO, ..Default::default() };
    let journal = open(&sqlite_url(&dir.join("journal.db")), &options);
    // Ballast, removed once the disk is full, as an operator frees space.
    let ballast = dir.join("ballast");
    std::fs::write(&ballast, vec![0u8; 256 * 1024]).unwrap();
    let reply = |tx: i64| {
        let mut reply = reply_for(tx);
        reply.resize(2048, b' '); // fills the disk sooner
        reply
    };
    // Deliveries until the disk is full.
    let mut finished = Vec::new();
    let mut failure = None;
    for tx in 900_000_001..900_010_000 {
        let event = payout(tx, tx - 900_000_000, 100);
        let claim = match journal.begin(&event) {
            Ok(Begin::New(claim)) => claim,
            Ok(other) => panic!("expected New, got {other:?}"),
            Err(error) => {
                failure = Some(("begin", tx, error));
                break;
            }
        };
        match journal.finish(&claim, &reply(tx)) {
            Ok(()) => finished.push(tx),
            Err(error) => {
                failure = Some(("finish", tx, error));
                break;
            }
        }
    }
    let Some((step, failed_tx, error)) = failure else { panic!("the disk never filled") };
    println!("FULL {} deliveries stored, then {step} of transaction {failed_tx} failed: {error}", finished.len());
    assert!(!finished.is_empty(), "the first deliveries should fit");
    assert_eq!(error.kind, ErrorKind::Journal, "{error}");
    assert!(error.message.contains("journal.db"), "the error names the journal: {error}");
    if std::env::var("SLOTPARTNER_FULL_ENOSPC").as_deref() == Ok("1") {
        assert!(error.message.contains("disk is full"), "the error says why: {error}");
    }

    // Space again: every stored reply is there, byte for byte, and the failed delivery is handled.
    std::fs::remove_file(&ballast).unwrap();
    thread::sleep(Duration::from_millis(350)); // any claim the failure left expires
    for &tx in &finished {
        match journal.begin(&payout(tx, tx - 900_000_000, 100)) {
            Ok(Begin::Done(stored)) => assert_eq!(stored, reply(tx), "transaction {tx}"),
            other => panic!("transaction {tx} lost its reply: {other:?}"),
        }
    }
    let event = payout(failed_tx, failed_tx - 900_000_000, 100);
    let Begin::New(claim) = journal.begin(&event).unwrap() else { panic!("the failed delivery should run again") };
    journal.finish(&claim, &reply(failed_tx)).unwrap();
    let status = journal.status().unwrap();
    assert_eq!((status.handled, status.in_progress, status.missing), (finished.len() as u64 + 1, 0, 0));
    println!(
        "FULL ok: {} stored replies replayed after space was freed, the failed delivery handled as attempt {}",
        finished.len(),
        claim.attempt()
    );
}
