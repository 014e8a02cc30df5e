//! A partner's callback endpoint for `slotpartner check`: a small HTTP(S) server on loopback
//! running the library's `Receiver` (and journal) that answers balance queries, with a `Date`
//! header, and keeps every request it got. How it answers is chosen at start (`Setup`).

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use slotpartner::journal::{Begin, Delivery, Journal};
use slotpartner::{EventKind, Receiver, ReceiverConfig, Request};

use crate::support::{HttpRequest, accept_each};

/// The player the endpoint knows (its balance 12050 EUR, 0 coins); any other is refused.
pub const KNOWN_PLAYER: &str = "4711";

/// How the endpoint is set up.
pub struct Setup {
    /// The token it accepts.
    pub token: &'static str,
    /// Its source allow-list (`127.0.0.1,::1` lets the command through, `production` does not).
    pub sources: &'static str,
    /// Answers every authenticated request with this body (HTTP 200) instead of a balance reply.
    pub fixed_answer: Option<&'static str>,
    /// Over HTTPS with a certificate for 127.0.0.1 signed by a CA of its own.
    pub tls: bool,
    /// The journal it claims deliveries in.
    pub journal: Option<Arc<Journal>>,
    /// How far its clock, as its `Date` header tells, is ahead of the host's (in seconds).
    pub clock_ahead: u64,
    /// Answers every request with this, whatever it sent (a hand-written endpoint's answer).
    pub raw_answer: Option<RawAnswer>,
}

/// An answer given as it is: its status, more headers, and the body's bytes.
#[derive(Clone)]
pub struct RawAnswer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl RawAnswer {
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> RawAnswer {
        RawAnswer { status, headers: Vec::new(), body: body.into() }
    }
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            token: crate::support::TOKEN,
            sources: "127.0.0.1,::1",
            fixed_answer: None,
            tls: true,
            journal: None,
            clock_ahead: 0,
            raw_answer: None,
        }
    }
}

/// One request as the endpoint got it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub token: Option<String>,
    pub content_type: Option<String>,
    pub body: String,
    /// The event's name as the receiver read it (`getPlayerBalance`), or the refusal's status.
    pub outcome: String,
}

/// The endpoint; stops when dropped.
pub struct BalanceEndpoint {
    pub url: String,
    /// The PEM of the CA that signed its certificate (empty over plain HTTP).
    pub ca_pem: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
}

struct State {
    receiver: Receiver,
    fixed_answer: Option<&'static str>,
    journal: Option<Arc<Journal>>,
    clock_ahead: Duration,
    raw_answer: Option<RawAnswer>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl BalanceEndpoint {
    pub fn start(setup: Setup) -> BalanceEndpoint {
        let mut config = ReceiverConfig::default();
        config.add_token(setup.token).unwrap();
        config.set_sources(setup.sources).unwrap();
        let (tls, ca_pem) = if setup.tls {
            let certs = slotpartner_sandbox::tls::generate().unwrap();
            (Some(certs.server_config), certs.ca_pem)
        } else {
            (None, String::new())
        };
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(State {
            receiver: Receiver::new(config).unwrap(),
            fixed_answer: setup.fixed_answer,
            journal: setup.journal,
            clock_ahead: Duration::from_secs(setup.clock_ahead),
            raw_answer: setup.raw_answer,
            seen: Arc::clone(&seen),
        });
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        accept_each(listener, tls.clone(), Arc::clone(&stop), move |conn, peer| serve(conn, peer, &state));
        let scheme = if tls.is_some() { "https" } else { "http" };
        BalanceEndpoint { url: format!("{scheme}://{addr}/callback"), ca_pem, seen, stop, addr }
    }

    /// Every request it got, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for BalanceEndpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

/// One request per connection, answered with `Connection: close` and a `Date` header.
fn serve<S: Read + Write>(stream: S, peer: &str, state: &State) {
    let mut reader = BufReader::new(stream);
    let Some(request) = HttpRequest::read(&mut reader) else { return };
    let token = request.header("x-service-token").map(str::to_owned);
    let content_type = request.header("content-type").map(str::to_owned);
    let body = request.body;
    if let Some(raw) = &state.raw_answer {
        state.seen.lock().unwrap().push(Seen {
            token,
            content_type,
            body: String::from_utf8_lossy(&body).into_owned(),
            outcome: format!("raw {}", raw.status),
        });
        let mut head = format!("HTTP/1.1 {} Answer\r\nDate: {}\r\n", raw.status, http_date(SystemTime::now()));
        for (name, value) in &raw.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", raw.body.len()));
        let stream = reader.get_mut();
        let _ =
            stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&raw.body)).and_then(|()| stream.flush());
        return;
    }
    let (status, answer, outcome) = handle(state, token.as_deref(), peer, &body);
    state.seen.lock().unwrap().push(Seen {
        token,
        content_type,
        body: String::from_utf8_lossy(&body).into_owned(),
        outcome,
    });
    let response = format!(
        "HTTP/1.1 {status} {}\r\nDate: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        if status == 200 { "OK" } else { "Error" },
        http_date(SystemTime::now() + state.clock_ahead),
        answer.len()
    );
    let stream = reader.get_mut();
    let _ = stream.write_all(response.as_bytes()).and_then(|()| stream.flush());
}

/// What the endpoint answers, and what it made of the request.
fn handle(state: &State, token: Option<&str>, peer: &str, body: &[u8]) -> (u16, String, String) {
    let request =
        Request { token: token.map(str::as_bytes), remote_addr: Some(peer.as_bytes()), forwarded_for: None, body };
    let event = match state.receiver.handle(&request) {
        Ok(event) => event,
        Err(error) => {
            let response = state.receiver.error_response(&error);
            return (response.http_status, response.body, format!("refused {}", response.http_status));
        }
    };
    let name = event.name.to_string();
    if let Some(journal) = &state.journal {
        match journal.begin(&Delivery::of(&event)).unwrap() {
            Begin::NotReplayable => {}
            _ => panic!("only balance queries in these tests, got {name}"),
        }
    }
    if let Some(answer) = state.fixed_answer {
        return (200, answer.to_owned(), name);
    }
    let EventKind::BalanceQuery(query) = &event.kind else { panic!("only balance queries in these tests, got {name}") };
    let known = query.player_partner_identifier.as_deref() == Some(KNOWN_PLAYER);
    if known {
        (200, state.receiver.balance_reply(12_050, None, 0).unwrap(), name)
    } else {
        let reply = state.receiver.reply(&event, false, "unknown player").unwrap();
        (state.receiver.reply_http_status(slotpartner::KnownEvent::BalanceQuery, false), reply, name)
    }
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` (RFC 9110's IMF-fixdate).
fn http_date(time: SystemTime) -> String {
    let ms = i64::try_from(time.duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap();
    // `2024-06-11T08:30:05.123Z`
    let text = slotpartner::journal::rfc3339_ms(ms);
    let (year, month, day, clock) = (&text[..4], &text[5..7], &text[8..10], &text[11..19]);
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let weekday = DAYS[usize::try_from(ms.div_euclid(86_400_000).rem_euclid(7)).unwrap()];
    let month = MONTHS[month.parse::<usize>().unwrap() - 1];
    format!("{weekday}, {day} {month} {year} {clock} GMT")
}
