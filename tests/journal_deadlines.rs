//! Every call into a PostgreSQL journal returns within its deadline, whatever the server or the
//! network does: a listener that accepts and never answers (the connect's deadline covers TCP,
//! TLS, authentication and start-up), a server backend stopped with `SIGSTOP` in the middle of
//! `begin`, `finish` and `prune` (each round trip's deadline, `command_timeout`), and a proxy
//! that stops forwarding the server's answers once the `COMMIT` is sent. A call past its deadline
//! fails with the journal's transient error, its connection is not used again, and the event is
//! credited once however the deliveries after it go. On a throw-away cluster (skipped, saying
//! so, where PostgreSQL is not installed); the silent listener needs none.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use slotpartner::ErrorKind;
use slotpartner::journal::{Begin, Journal, JournalOptions, PruneOptions, SqlValue, Staged};

#[path = "e2e/cluster.rs"]
mod cluster;
use cluster::Cluster;

#[path = "e2e/refunds.rs"]
mod refunds;
use refunds::{plain_refund, reply};

/// The slack allowed past a deadline before a call counts as hung (a loaded machine).
const SLACK: Duration = Duration::from_secs(4);

/// Runs `call` on a thread of its own and waits for it at most `deadline` + `SLACK`: a call
/// still waiting then fails the test (instead of hanging it), naming `what`.
fn within<T: Send + 'static>(what: &str, deadline: Duration, call: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, answered) = mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let _ = done.send(call());
    });
    match answered.recv_timeout(deadline + SLACK) {
        Ok(value) => {
            println!("{what}: answered in {} ms (deadline {} ms)", started.elapsed().as_millis(), deadline.as_millis());
            value
        }
        Err(_) => {
            panic!("{what}: still waiting after {} s (deadline {} s)", (deadline + SLACK).as_secs(), deadline.as_secs())
        }
    }
}

/// A listener on 127.0.0.1 that accepts every connection and never answers (nor closes one)
/// until dropped.
struct Silent {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Silent {
    fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                held.extend(stream.ok());
            }
        });
        Silent { port, stop, thread: Some(thread) }
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn an_open_against_a_silent_listener_returns_within_connect_timeout() {
    let silent = Silent::start();
    for (query, options, deadline) in [
        ("connect_timeout=1&sslmode=disable", JournalOptions::default(), Duration::from_secs(1)),
        // The default sslmode (prefer) asks for TLS first: that request has the deadline too.
        ("connect_timeout=1", JournalOptions::default(), Duration::from_secs(1)),
        // Without connect_timeout: the lock time-out, as documented.
        (
            "sslmode=disable",
            JournalOptions { lock_timeout: Duration::from_secs(1), ..JournalOptions::default() },
            Duration::from_secs(1),
        ),
    ] {
        let url = format!("postgres://me@127.0.0.1:{}/x?{query}", silent.port);
        let error = within(&format!("open {url}"), deadline, move || Journal::open(&url, &options).err())
            .expect("an open against a silent listener fails");
        assert_eq!(error.kind, ErrorKind::Journal, "{error}");
        assert!(error.message.contains("connect_timeout"), "{error}");
        assert!(error.message.contains("not connected within"), "{error}");
    }
}

#[test]
fn a_zero_or_malformed_command_timeout_is_refused() {
    for bad in ["0", "soon", "-3"] {
        let url = format!("postgres://me@127.0.0.1:1/x?command_timeout={bad}");
        let Err(error) = Journal::open(&url, &JournalOptions::default()) else { panic!("{url} was accepted") };
        assert_eq!(error.kind, ErrorKind::InvalidArgument, "{bad}: {error}");
        assert_eq!(error.field, "journal_url", "{bad}: {error}");
        assert!(error.message.contains("command_timeout"), "{bad}: {error}");
    }
    let options = JournalOptions { command_timeout: Some(Duration::ZERO), ..JournalOptions::default() };
    let Err(error) = Journal::open("postgres://me@127.0.0.1:1/x", &options) else { panic!("a zero time-out accepted") };
    assert_eq!(error.field, "command_timeout", "{error}");
}

/// A cluster, a ledger table, and the journal's backends found by their application name.
struct Server {
    cluster: Cluster,
}

impl Server {
    /// A journal URL of its own (a schema named `name`), with the application name `name` and
    /// a command time-out of a second.
    fn url(&self, name: &str) -> String {
        format!("{}&application_name={name}&command_timeout=1", self.cluster.schema_url(name))
    }

    fn ledger(&self, url: &str) {
        let direct = self.direct(url);
        let mut client = postgres::Client::connect(&direct, postgres::NoTls).unwrap();
        client
            .batch_execute("CREATE TABLE credits (transaction_id BIGINT PRIMARY KEY, amount BIGINT NOT NULL)")
            .unwrap();
    }

    /// `url` without the parameters only the journal reads.
    fn direct(&self, url: &str) -> String {
        url.replace("&command_timeout=1", "")
    }

    fn credits(&self, url: &str) -> i64 {
        let mut client = postgres::Client::connect(&self.direct(url), postgres::NoTls).unwrap();
        client.query_one("SELECT count(*) FROM credits", &[]).unwrap().get(0)
    }

    /// The process ids of the server backends serving the application `name`.
    fn backends(&self, name: &str) -> Vec<i32> {
        let mut client = self.cluster.client();
        client
            .query("SELECT pid FROM pg_stat_activity WHERE application_name = $1", &[&name])
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    }
}

/// Stops the backends of `pids` (`SIGSTOP`) until dropped (`SIGCONT`), also when a test fails.
struct Stopped(Vec<i32>);

impl Stopped {
    fn new(pids: Vec<i32>) -> Stopped {
        assert!(!pids.is_empty(), "no backend to stop");
        signal("-STOP", &pids);
        Stopped(pids)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal("-CONT", &self.0);
    }
}

fn signal(which: &str, pids: &[i32]) {
    let status = Command::new("kill").arg(which).args(pids.iter().map(i32::to_string)).status().expect("kill");
    assert!(status.success(), "kill {which} {pids:?}");
}

fn credit(n: i64) -> Staged {
    Staged::new(
        "INSERT INTO credits (transaction_id, amount) VALUES ($1, $2) ON CONFLICT (transaction_id) DO NOTHING",
        vec![SqlValue::Int(n), SqlValue::Int(1000)],
    )
    .unwrap()
}

/// Delivers refund `n` again and again, as the service would, until its stored reply answers:
/// a new claim is finished with its credit staged, a busy one (its lease not yet expired) is
/// waited for. Fails after 20 s.
fn deliver_until_done(journal: &Journal, n: i64) {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        match journal.begin(&plain_refund(n)) {
            Ok(Begin::Done(stored)) => {
                assert_eq!(stored, reply(n));
                return;
            }
            Ok(Begin::New(claim)) => {
                if let Err(e) = journal.finish_with(&claim, &reply(n), &[credit(n)]) {
                    println!("a redelivery's finish failed ({e}); delivering again");
                }
            }
            Ok(Begin::Busy) => std::thread::sleep(Duration::from_millis(200)),
            Ok(other) => panic!("refund {n}: {other:?}"),
            Err(e) => {
                println!("a redelivery failed ({e}); delivering again");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    panic!("refund {n} was not answered from the journal within 20 s");
}

fn options(claim_at_finish: bool) -> JournalOptions {
    JournalOptions { lease: Duration::from_secs(1), claim_at_finish, ..JournalOptions::default() }
}

fn assert_timed_out(error: &slotpartner::Error) {
    assert_eq!(error.kind, ErrorKind::Journal, "{error}");
    assert!(error.message.contains("within command_timeout (1 s)"), "{error}");
}

#[test]
fn postgres_calls_return_within_their_deadlines() {
    let Some(cluster) = Cluster::start("PostgreSQL deadlines") else { return };
    let server = Arc::new(Server { cluster });
    for claim_at_finish in [false, true] {
        a_stopped_backend_fails_begin_in_time(&server, claim_at_finish);
        a_stopped_backend_fails_finish_in_time(&server, claim_at_finish);
        an_unanswered_commit_fails_in_time_and_credits_once(&server, claim_at_finish);
    }
    a_stopped_backend_fails_prune_in_time(&server);
}

fn a_stopped_backend_fails_begin_in_time(server: &Arc<Server>, claim_at_finish: bool) {
    let name = format!("stopped_begin_{claim_at_finish}");
    let url = server.url(&name);
    server.ledger(&url);
    let journal = Arc::new(Journal::open(&url, &options(claim_at_finish)).expect("open"));
    let stopped = Stopped::new(server.backends(&name));
    let during = Arc::clone(&journal);
    let error =
        within("begin on a stopped backend", Duration::from_secs(1), move || during.begin(&plain_refund(1)).err())
            .expect("begin on a stopped backend fails");
    assert_timed_out(&error);
    drop(stopped);
    // The next deliveries go on a fresh connection; the event is credited once.
    deliver_until_done(&journal, 1);
    deliver_until_done(&journal, 1);
    assert_eq!(server.credits(&url), 1);
    println!("postgres a_stopped_backend_fails_begin_in_time (claim_at_finish {claim_at_finish}): ok");
}

fn a_stopped_backend_fails_finish_in_time(server: &Arc<Server>, claim_at_finish: bool) {
    let name = format!("stopped_finish_{claim_at_finish}");
    let url = server.url(&name);
    server.ledger(&url);
    let journal = Arc::new(Journal::open(&url, &options(claim_at_finish)).expect("open"));
    let Begin::New(claim) = journal.begin(&plain_refund(2)).expect("begin") else { panic!("a new claim") };
    let stopped = Stopped::new(server.backends(&name));
    let during = Arc::clone(&journal);
    let error = within("finish on a stopped backend", Duration::from_secs(1), move || {
        during.finish_with(&claim, &reply(2), &[credit(2)]).err()
    })
    .expect("finish on a stopped backend fails");
    assert_timed_out(&error);
    drop(stopped);
    deliver_until_done(&journal, 2);
    assert_eq!(server.credits(&url), 1);
    println!("postgres a_stopped_backend_fails_finish_in_time (claim_at_finish {claim_at_finish}): ok");
}

fn a_stopped_backend_fails_prune_in_time(server: &Arc<Server>) {
    let name = "stopped_prune";
    let url = server.url(name);
    server.ledger(&url);
    let journal = Arc::new(Journal::open(&url, &options(false)).expect("open"));
    deliver_until_done(&journal, 3);
    let stopped = Stopped::new(server.backends(name));
    let during = Arc::clone(&journal);
    let error = within("prune on a stopped backend", Duration::from_secs(1), move || {
        during.prune(&PruneOptions::older_than(Duration::from_secs(24 * 3600))).err()
    })
    .expect("prune on a stopped backend fails");
    assert_timed_out(&error);
    drop(stopped);
    journal.prune(&PruneOptions::older_than(Duration::from_secs(24 * 3600))).expect("prune once the server answers");
    println!("postgres a_stopped_backend_fails_prune_in_time: ok");
}

/// Through a proxy that stops forwarding the server's answers once armed and the client has
/// sent a `COMMIT`: the finish fails in time saying the change may have been made, and the
/// deliveries after it get the stored reply (the server did commit), the credit made once.
fn an_unanswered_commit_fails_in_time_and_credits_once(server: &Arc<Server>, claim_at_finish: bool) {
    let name = format!("unanswered_commit_{claim_at_finish}");
    let url = server.url(&name);
    server.ledger(&url);
    let proxy = MuteAfterCommit::start(server.cluster.port());
    let proxied = url.replacen(&format!(":{}/", server.cluster.port()), &format!(":{}/", proxy.port), 1);
    let journal = Arc::new(Journal::open(&proxied, &options(claim_at_finish)).expect("open through the proxy"));
    let Begin::New(claim) = journal.begin(&plain_refund(4)).expect("begin") else { panic!("a new claim") };
    proxy.armed.store(true, Ordering::SeqCst);
    let during = Arc::clone(&journal);
    let error = within("finish whose COMMIT is not answered", Duration::from_secs(1), move || {
        during.finish_with(&claim, &reply(4), &[credit(4)]).err()
    })
    .expect("a finish whose COMMIT is not answered fails");
    assert_timed_out(&error);
    assert!(error.message.contains("may or may not have been made"), "{error}");
    assert!(proxy.muted.load(Ordering::SeqCst), "the proxy saw the COMMIT");
    let direct = Journal::open(&url, &options(claim_at_finish)).expect("open directly");
    deliver_until_done(&direct, 4);
    assert_eq!(server.credits(&url), 1);
    println!("postgres an_unanswered_commit_fails_in_time_and_credits_once (claim_at_finish {claim_at_finish}): ok");
}

/// A TCP proxy to the cluster that, once `armed`, stops forwarding the server's bytes after the
/// client has sent one holding `COMMIT` (which it forwards): the server commits, the client
/// never hears so. Its connections stay open until the process ends the test.
struct MuteAfterCommit {
    port: u16,
    armed: Arc<AtomicBool>,
    muted: Arc<AtomicBool>,
}

impl MuteAfterCommit {
    fn start(server_port: u16) -> MuteAfterCommit {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (armed, muted) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (arm, mute) = (Arc::clone(&armed), Arc::clone(&muted));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", server_port)) else { continue };
                let (arm, mute_up, mute_down) = (Arc::clone(&arm), Arc::clone(&mute), Arc::clone(&mute));
                let (mut from_client, mut to_server) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let mut buffer = vec![0; 1 << 16];
                    while let Ok(n @ 1..) = from_client.read(&mut buffer) {
                        let commit = buffer[..n].windows(7).any(|w| w == b"COMMIT\0");
                        if arm.load(Ordering::SeqCst) && commit {
                            mute_up.store(true, Ordering::SeqCst);
                        }
                        if to_server.write_all(&buffer[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to_server.shutdown(Shutdown::Both);
                });
                let (mut from_server, mut to_client) = (server, client);
                std::thread::spawn(move || {
                    let mut buffer = vec![0; 1 << 16];
                    while let Ok(n @ 1..) = from_server.read(&mut buffer) {
                        if mute_down.load(Ordering::SeqCst) {
                            continue;
                        }
                        if to_client.write_all(&buffer[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to_client.shutdown(Shutdown::Both);
                });
            }
        });
        MuteAfterCommit { port, armed, muted }
    }
}

/// SQLite's waits are its busy time-out (`lock_timeout`): a journal whose write lock another
/// connection holds fails `begin` and `finish` within it, as the journal's transient error, and
/// the event is credited once after the lock is released.
#[test]
fn sqlite_waits_end_at_the_lock_timeout() {
    let dir = cluster::TempDir::new("slotpartner-deadlines");
    let path = dir.path().join("journal.db");
    let url = format!("sqlite:{}", path.display());
    let options = JournalOptions {
        lock_timeout: Duration::from_secs(1),
        lease: Duration::from_secs(1),
        ..JournalOptions::default()
    };
    let journal = Arc::new(Journal::open(&url, &options).expect("open"));
    let ledger = rusqlite::Connection::open(&path).unwrap();
    ledger.execute_batch("CREATE TABLE credits (transaction_id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)").unwrap();
    let sqlite_credit = |n: i64| {
        Staged::new(
            "INSERT INTO credits (transaction_id, amount) VALUES (?1, ?2) ON CONFLICT (transaction_id) DO NOTHING",
            vec![SqlValue::Int(n), SqlValue::Int(1000)],
        )
        .unwrap()
    };
    let Begin::New(claim) = journal.begin(&plain_refund(1)).expect("begin") else { panic!("a new claim") };
    ledger.execute_batch("BEGIN IMMEDIATE").unwrap();
    let during = Arc::clone(&journal);
    let staged = [sqlite_credit(1)];
    let error = within("finish while another connection writes", Duration::from_secs(1), move || {
        during.finish_with(&claim, &reply(1), &staged).err()
    })
    .expect("finish while the journal is locked fails");
    assert_eq!(error.kind, ErrorKind::Journal, "{error}");
    let during = Arc::clone(&journal);
    let error = within("begin while another connection writes", Duration::from_secs(1), move || {
        during.begin(&plain_refund(2)).err()
    })
    .expect("begin while the journal is locked fails");
    assert_eq!(error.kind, ErrorKind::Journal, "{error}");
    ledger.execute_batch("ROLLBACK").unwrap();
    let started = Instant::now();
    loop {
        match journal.begin(&plain_refund(1)).expect("begin") {
            Begin::Done(stored) => break assert_eq!(stored, reply(1)),
            Begin::New(claim) => journal.finish_with(&claim, &reply(1), &[sqlite_credit(1)]).expect("finish"),
            Begin::Busy if started.elapsed() < Duration::from_secs(20) => {
                std::thread::sleep(Duration::from_millis(200))
            }
            other => panic!("{other:?}"),
        }
    }
    let credits: i64 = ledger.query_row("SELECT count(*) FROM credits", [], |r| r.get(0)).unwrap();
    assert_eq!(credits, 1);
}

/// The variable that makes `open_in_a_namespace` open the journal it names; without it that
/// test does nothing.
const OPEN_URL: &str = "SLOTPARTNER_TEST_OPEN_URL";

/// Not a test of its own: run by `an_open_whose_host_name_does_not_resolve_in_time_returns_within_connect_timeout`
/// as another process, in a mount namespace whose `/etc/resolv.conf` it gives. Opens the journal
/// `OPEN_URL` names and says how long the call took.
#[test]
fn open_in_a_namespace() {
    let Ok(url) = std::env::var(OPEN_URL) else { return };
    let started = Instant::now();
    let error = Journal::open(&url, &JournalOptions::default()).err();
    println!("open answered in {} ms: {error:?}", started.elapsed().as_millis());
}

/// A name server that receives and never answers (a resolver stalled, its packets dropped:
/// here a UDP socket on 127.0.0.2:53, the only name server of the child's resolv.conf, with
/// glibc's time-out 20 s): opening `postgres://me@journal-db.example/x?connect_timeout=1` must
/// return within the connect's deadline. The deadline fires, yet the call returns only once the
/// resolver gave up: the client's runtime, dropped with the failed connect, waits for its
/// blocking thread still in getaddrinfo (tokio's Runtime drop joins its blocking pool).
#[test]
fn an_open_whose_host_name_does_not_resolve_in_time_returns_within_connect_timeout() {
    let Ok(silent_dns) = std::net::UdpSocket::bind("127.0.0.2:53") else {
        println!("SKIPPED: cannot listen on 127.0.0.2:53 (root is needed)");
        return;
    };
    let dir = cluster::TempDir::new("slotpartner-stalled-dns");
    let resolv = dir.path().join("resolv.conf");
    std::fs::write(&resolv, "nameserver 127.0.0.2\noptions timeout:20 attempts:1\n").unwrap();
    let exe = std::env::current_exe().unwrap();
    let deadline = Duration::from_secs(1);
    let started = Instant::now();
    let mut child = Command::new("unshare")
        .args(["--mount", "--fork", "--kill-child", "sh", "-c"])
        .arg(r#"mount --bind "$0" /etc/resolv.conf && exec "$@""#)
        .arg(&resolv)
        .arg(&exe)
        .args(["--exact", "open_in_a_namespace", "--nocapture", "--test-threads=1"])
        .env(OPEN_URL, "postgres://me@journal-db.example:5432/x?connect_timeout=1&sslmode=disable")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("unshare");
    let waited = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(40) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    drop(silent_dns);
    let mut said = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut said);
    let status = waited.expect("the open still waiting after 40 s");
    if !status.success() {
        println!("SKIPPED: the child could not run in a mount namespace of its own ({status}): {said}");
        return;
    }
    let answered = said.lines().find_map(|l| l.split_once("open answered in ").map(|(_, rest)| rest.to_owned()));
    assert!(
        elapsed <= deadline + SLACK,
        "an open with connect_timeout=1 took {} ms while the name server stayed silent: {answered:?}",
        elapsed.as_millis()
    );
}
