//! What the tests of the `slotpartner` command share: running the built binary, scratch files,
//! a sandbox in-process, and a partner's callback endpoint (a small HTTP server on loopback
//! running the library's `Receiver` and journal, crediting a ledger keyed by transactionId).

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use slotpartner::journal::{Begin, Delivery, Journal, JournalOptions, Synchronous};
use slotpartner::{EventKind, Receiver, ReceiverConfig, Request};
use slotpartner_sandbox::burst::{EventMix, EventSet};
use slotpartner_sandbox::{ServerConfig, ServerHandle};

pub const BIN: &str = env!("CARGO_BIN_EXE_slotpartner");
pub const TOKEN: &str = slotpartner_sandbox::DEFAULT_TOKEN;

/// A scratch directory of one test, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("slotpartner-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    pub fn write(&self, name: &str, content: &[u8]) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, content).unwrap();
        path
    }

    /// `sqlite:<dir>/journal.db`.
    pub fn journal_url(&self) -> String {
        format!("sqlite:{}", self.path("journal.db").display())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a run of the command gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn of(output: Output) -> Run {
        Run {
            code: output.status.code().expect("exited, not killed"),
            stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
        }
    }

    /// Asserts the exit status, showing the output when it differs.
    pub fn expect(self, code: i32) -> Run {
        assert_eq!(self.code, code, "exit status\n--- stdout\n{}--- stderr\n{}", self.stdout, self.stderr);
        self
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }

    /// An error run: exactly one line on stderr, starting `slotpartner: `, nothing on stdout.
    pub fn one_error_line(&self) -> &str {
        assert_eq!(self.stderr.lines().count(), 1, "one line on stderr:\n{}", self.stderr);
        assert!(self.stderr.starts_with("slotpartner: "), "{}", self.stderr);
        assert!(self.stdout.is_empty(), "nothing on stdout:\n{}", self.stdout);
        self.stderr.trim_end()
    }
}

/// Runs the command with `args`, no `SLOTPARTNER_*` variables from the test's environment,
/// `env` added, and `stdin` as its standard input.
pub fn run_with(args: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> Run {
    let mut command = Command::new(BIN);
    command.args(args);
    for (name, _) in std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v))) {
        if name.starts_with("SLOTPARTNER_") {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied());
    command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("the slotpartner binary runs");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    Run::of(child.wait_with_output().unwrap())
}

pub fn run(args: &[&str]) -> Run {
    run_with(args, &[], None)
}

/// A journal opened as the partner's endpoint opens it: counting from index 1.
pub fn open_journal(url: &str) -> Arc<Journal> {
    let options =
        JournalOptions { first_index: Some(1), synchronous: Synchronous::Normal, ..JournalOptions::default() };
    Arc::new(Journal::open(url, &options).unwrap())
}

/// A sandbox in-process knowing the events of `count` indexes from 1 (seed `seed`, mixed).
pub fn sandbox(seed: u64, count: u64) -> ServerHandle {
    slotpartner_sandbox::quiet_logs();
    let events = Some(EventSet { seed, mix: EventMix::Mixed, first_index: 1, count });
    slotpartner_sandbox::run_server(ServerConfig { events, ..ServerConfig::default() }).unwrap()
}

/// One credit of the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credit {
    pub event: String,
    pub index: Option<i64>,
    pub money: i64,
    /// How many times it was credited (must stay 1).
    pub times: u32,
}

/// The partner's callback endpoint: sources loopback only, the partner token, the journal;
/// every new refund or payout credits the ledger, keyed by transactionId.
pub struct Endpoint {
    pub url: String,
    pub ledger: Arc<Mutex<BTreeMap<i64, Credit>>>,
    state: Arc<State>,
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
}

struct State {
    receiver: Receiver,
    journal: Arc<Journal>,
    ledger: Arc<Mutex<BTreeMap<i64, Credit>>>,
    /// Indexes answered HTTP 500 before anything is read into the journal (a broken endpoint).
    failing: Mutex<Vec<i64>>,
    /// Indexes whose delivery waits this long before it is handled (a slow endpoint).
    slow: Mutex<HashMap<i64, Duration>>,
    /// When a delivery of the first index arrives, the second body arrives first (a late
    /// delivery of a lost event, during a recovery).
    late: Mutex<HashMap<i64, String>>,
    requests: Mutex<u64>,
}

impl Endpoint {
    /// Over plain HTTP on loopback.
    pub fn start(journal: Arc<Journal>) -> Endpoint {
        Endpoint::start_with(journal, None)
    }

    /// Over HTTPS with a certificate for 127.0.0.1 signed by a CA of its own; the CA's PEM.
    pub fn start_tls(journal: Arc<Journal>) -> (Endpoint, String) {
        let certs = slotpartner_sandbox::tls::generate().unwrap();
        (Endpoint::start_with(journal, Some(certs.server_config)), certs.ca_pem)
    }

    fn start_with(journal: Arc<Journal>, tls: Option<Arc<rustls::ServerConfig>>) -> Endpoint {
        let mut config = ReceiverConfig::default();
        config.add_token(TOKEN).unwrap();
        config.set_sources("127.0.0.1,::1").unwrap();
        config.set_journal(Arc::clone(&journal));
        let ledger = Arc::new(Mutex::new(BTreeMap::new()));
        let state = Arc::new(State {
            receiver: Receiver::new(config).unwrap(),
            journal,
            ledger: Arc::clone(&ledger),
            failing: Mutex::new(Vec::new()),
            slow: Mutex::new(HashMap::new()),
            late: Mutex::new(HashMap::new()),
            requests: Mutex::new(0),
        });
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let thread_state = Arc::clone(&state);
        accept_each(listener, tls.clone(), Arc::clone(&stop), move |conn, peer| serve(conn, peer, &thread_state));
        let scheme = if tls.is_some() { "https" } else { "http" };
        Endpoint { url: format!("{scheme}://{addr}/callback"), ledger, state, stop, addr }
    }

    /// Answers deliveries of `index` with HTTP 500 (until `heal`).
    pub fn fail_index(&self, index: i64) {
        self.state.failing.lock().unwrap().push(index);
    }

    /// Makes deliveries of `index` wait `pause` before they are handled.
    pub fn slow_index(&self, index: i64, pause: Duration) {
        self.state.slow.lock().unwrap().insert(index, pause);
    }

    pub fn heal(&self) {
        self.state.failing.lock().unwrap().clear();
    }

    /// When `trigger` is delivered, `late_body` is handled first, as a late delivery.
    pub fn late_delivery_on(&self, trigger: i64, late_body: String) {
        self.state.late.lock().unwrap().insert(trigger, late_body);
    }

    pub fn requests(&self) -> u64 {
        *self.state.requests.lock().unwrap()
    }

    /// transactionId → credit.
    pub fn credits(&self) -> BTreeMap<i64, Credit> {
        self.ledger.lock().unwrap().clone()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

/// One HTTP/1.1 request as the test servers read it (one a connection): its head as it came
/// (request line and headers), the headers by lower-case name, and the `Content-Length` bytes
/// of its body.
pub struct HttpRequest {
    pub head: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// The next request on `reader`; `None` when the client went away before all of it came.
    pub fn read(reader: &mut impl BufRead) -> Option<HttpRequest> {
        let (mut head, mut headers) = (String::new(), HashMap::new());
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).ok()? == 0 {
                return None;
            }
            head.push_str(&line);
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
            }
        }
        let length = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        Some(HttpRequest { head, headers, body })
    }

    /// The header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// One request per connection, answered with `Connection: close`.
fn serve<S: Read + Write>(stream: S, peer: &str, state: &State) {
    let mut reader = BufReader::new(stream);
    let Some(request) = HttpRequest::read(&mut reader) else { return };
    *state.requests.lock().unwrap() += 1;
    let (status, answer) = handle(state, request.header("x-service-token"), peer, &request.body);
    let reason = if status == 200 { "OK" } else { "Error" };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        answer.len()
    );
    let stream = reader.get_mut();
    let _ = stream.write_all(response.as_bytes()).and_then(|()| stream.flush());
}

/// What the partner's endpoint does with one delivery.
fn handle(state: &State, token: Option<&str>, peer: &str, body: &[u8]) -> (u16, String) {
    let request =
        Request { token: token.map(str::as_bytes), remote_addr: Some(peer.as_bytes()), forwarded_for: None, body };
    let event = match state.receiver.handle(&request) {
        Ok(event) => event,
        Err(error) => {
            let response = state.receiver.error_response(&error);
            return (response.http_status, response.body);
        }
    };
    if let Some(index) = event.index {
        let pause = state.slow.lock().unwrap().get(&index).copied();
        if let Some(pause) = pause {
            std::thread::sleep(pause);
        }
        if state.failing.lock().unwrap().contains(&index) {
            return (500, r#"{"error":"the partner's database is down"}"#.to_owned());
        }
        let late = state.late.lock().unwrap().remove(&index);
        if let Some(late) = late {
            let (status, _) = handle(state, token, peer, late.as_bytes());
            assert_eq!(status, 200, "the late delivery is handled");
        }
    }
    match state.journal.begin(&Delivery::of(&event)).unwrap() {
        Begin::New(claim) => {
            let (transaction_id, money) = match &event.kind {
                EventKind::BuyRefund(r) => (r.transaction_id, 0),
                EventKind::JackpotPayout(p) => (p.transaction_id, p.money_won),
                _ => panic!("only refunds and payouts in these tests"),
            };
            let mut ledger = state.ledger.lock().unwrap();
            let credit = ledger.entry(transaction_id).or_insert_with(|| Credit {
                event: event.name.to_string(),
                index: event.index,
                money,
                times: 0,
            });
            credit.times += 1;
            drop(ledger);
            let reply = state.receiver.reply(&event, true, "").unwrap();
            state.journal.finish(&claim, reply.as_bytes()).unwrap();
            (200, reply)
        }
        Begin::Done(reply) => (200, String::from_utf8(reply).unwrap()),
        Begin::Busy => (503, r#"{"error":"busy"}"#.to_owned()),
        Begin::Conflict(error) => (409, state.receiver.error_response(&error).body),
        Begin::NotReplayable => panic!("only refunds and payouts in these tests"),
    }
}

/// Writes the sandbox's CA certificate for `--ca-file`.
pub fn ca_file(scratch: &Scratch, sandbox: &ServerHandle) -> PathBuf {
    scratch.write("sandbox-ca.pem", sandbox.ca_pem().as_bytes())
}

pub fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A refund body: `transaction_id` at `index` (its buyTransactionId a million above).
pub fn refund_body(transaction_id: i64, index: i64) -> String {
    format!(
        r#"{{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-{transaction_id}","playerIdentifier":"player-1","transactionId":{transaction_id},"buyTransactionId":{},"gameSessionId":5,"partnerGameRequestIdentifier":"req-{transaction_id}","gameId":1001,"isMobile":false,"index":{index}}}"#,
        transaction_id + 1_000_000
    )
}

/// The journal's delivery of a body the library accepts.
pub fn delivery(body: &str) -> Delivery {
    Delivery::of(&slotpartner::parse(body.as_bytes(), &slotpartner::ParseOptions::default()).unwrap())
}

/// A journal of refunds (transactionId 700 + index) handled at the indexes 1 to `last` but those
/// in `skip`.
pub fn journal_of_refunds(scratch: &Scratch, last: i64, skip: &[i64]) -> (String, Arc<Journal>) {
    let url = scratch.journal_url();
    let journal = open_journal(&url);
    for index in (1..=last).filter(|i| !skip.contains(i)) {
        let Begin::New(claim) = journal.begin(&delivery(&refund_body(700 + index, index))).unwrap() else { panic!() };
        journal.finish(&claim, b"{}").unwrap();
    }
    // Read once: the indexes are folded into the runs, where a test may move their times.
    journal.status().unwrap();
    (url, journal)
}

/// A summary line's `key=value` pairs (`recover`'s text output).
pub fn summary(out: &Run) -> HashMap<String, String> {
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("summary "))
        .flat_map(|l| l.split(' '))
        .filter_map(|pair| pair.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect()
}

/// A connection a test server serves: plain TCP, or TLS over it.
pub trait Conn: Read + Write {}
impl<T: Read + Write> Conn for T {}

/// Accepts connections on `listener` on a thread of its own until `stop` is raised (the next
/// connection then ends it), and serves each on a thread of its own, over TLS when `tls` is
/// given, with `serve` (the connection and the peer's address).
pub fn accept_each(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    stop: Arc<AtomicBool>,
    serve: impl Fn(&mut dyn Conn, &str) + Send + Sync + 'static,
) {
    let serve = Arc::new(serve);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let peer = stream.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
            let (serve, tls) = (Arc::clone(&serve), tls.clone());
            std::thread::spawn(move || match tls {
                None => serve(&mut stream, &peer),
                Some(config) => {
                    let Ok(connection) = rustls::ServerConnection::new(config) else { return };
                    serve(&mut rustls::StreamOwned::new(connection, stream), &peer);
                }
            });
        }
    });
}
