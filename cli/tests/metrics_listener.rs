//! `slotpartner metrics --listen` among strangers' connections: silent ones renewed before their
//! time-out, heads sent a byte a second, floods of idle ones. Every scrape made meanwhile is
//! answered in full within `PROMPT`: a stranger's connection costs a scrape nothing.

#[path = "support/metrics_server.rs"]
mod metrics_server;
mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use metrics_server::MetricsServer;
use support::*;

/// How long a scrape may take: generous, as a busy machine may be slow (reading the journal and
/// answering take milliseconds).
const PROMPT: Duration = Duration::from_secs(3);
/// The listener's time for a request head (`REQUEST_TIME` in cli/src/metrics/listener.rs).
const HEAD_TIME: Duration = Duration::from_secs(5);
/// The connections the listener keeps at most (`MAX_CONNECTIONS` in cli/src/metrics/listener.rs).
const LISTENER_KEEPS: usize = 512;

/// How strangers use their connections.
#[derive(Clone, Copy)]
enum Manner {
    /// Connect and send nothing; each connection is replaced by a new one every `renew`.
    Silent { renew: Duration },
    /// Send a request head one byte a second, never finishing it; a connection the listener
    /// closes is replaced by a new one.
    Trickle,
}

/// `count` strangers' connections to `addr`, kept up by a thread until stopped or dropped.
struct Strangers {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Duration>>>,
}

impl Strangers {
    /// The connections are all open when this returns.
    fn start(addr: &str, count: usize, manner: Manner) -> Strangers {
        let connect = {
            let addr = addr.to_owned();
            move || (TcpStream::connect(&addr).unwrap(), Instant::now())
        };
        let mut open: Vec<(TcpStream, Instant)> = (0..count).map(|_| connect()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            const HEAD: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: stranger\r\nX-Slow: ";
            let mut lives = Vec::new();
            let mut sent = vec![0usize; count];
            let tick = match manner {
                Manner::Silent { renew } => renew,
                Manner::Trickle => Duration::from_secs(1),
            };
            let mut next = Instant::now() + tick;
            while !stopped.load(Ordering::SeqCst) {
                if Instant::now() < next {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                next += tick;
                for (i, connection) in open.iter_mut().enumerate() {
                    match manner {
                        // One at a time: never twice the connections open.
                        Manner::Silent { .. } => *connection = connect(),
                        Manner::Trickle => {
                            let byte = HEAD.get(sent[i]).copied().unwrap_or(b'a');
                            if is_closed(&connection.0) || connection.0.write_all(&[byte]).is_err() {
                                lives.push(connection.1.elapsed());
                                (*connection, sent[i]) = (connect(), 0);
                            } else {
                                sent[i] += 1;
                            }
                        }
                    }
                }
            }
            lives
        });
        Strangers { stop, thread: Some(thread) }
    }

    /// Stops the thread (closing its connections); how long each connection the listener closed
    /// had lived.
    fn stop(mut self) -> Vec<Duration> {
        self.halt()
    }

    fn halt(&mut self) -> Vec<Duration> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().map(|thread| thread.join().unwrap()).unwrap_or_default()
    }
}

impl Drop for Strangers {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Whether the listener closed `stream` (read without waiting: end of stream or an error).
fn is_closed(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let closed = !matches!((&*stream).read(&mut [0u8; 64]), Err(e) if e.kind() == ErrorKind::WouldBlock);
    stream.set_nonblocking(false).unwrap();
    closed
}

/// Makes `count` scrapes, `pause` apart; panics naming every one not answered within `PROMPT`.
fn scrape_promptly(server: &MetricsServer, count: usize, pause: Duration, among: &str) {
    let mut failed = Vec::new();
    let mut slowest = Duration::ZERO;
    for i in 0..count {
        match server.scrape_within(PROMPT) {
            Ok(took) => slowest = slowest.max(took),
            Err(why) => failed.push(format!("scrape {i}: {why}")),
        }
        std::thread::sleep(pause);
    }
    assert!(failed.is_empty(), "{} of {count} scrapes among {among} failed:\n{}", failed.len(), failed.join("\n"));
    println!("{count} scrapes among {among}: the slowest answered in {slowest:?}");
}

fn journal(scratch: &Scratch) -> String {
    journal_of_refunds(scratch, 3, &[2]).0
}

#[test]
fn silent_connections_renewed_before_their_time_out_hold_up_no_scrape() {
    let scratch = Scratch::new("metrics-silent");
    let server = MetricsServer::start(&journal(&scratch));
    // As reported: 8 silent connections renewed every 4.5 s, under the 5 s given for a head.
    let strangers = Strangers::start(&server.addr, 8, Manner::Silent { renew: Duration::from_millis(4500) });
    scrape_promptly(&server, 20, Duration::from_millis(500), "8 silent connections renewed");
    strangers.stop();
}

#[test]
fn heads_sent_a_byte_a_second_hold_up_no_scrape_and_are_closed_in_time() {
    let scratch = Scratch::new("metrics-trickle");
    let server = MetricsServer::start(&journal(&scratch));
    let strangers = Strangers::start(&server.addr, 16, Manner::Trickle);
    scrape_promptly(&server, 16, Duration::from_millis(500), "16 heads sent a byte a second");
    // Long enough for each to be closed at least once.
    std::thread::sleep(HEAD_TIME + Duration::from_secs(3));
    let lives = strangers.stop();
    assert!(lives.len() >= 16, "each closed by the listener at least once: {lives:?}");
    // The time for a head is the whole head's, however often a byte comes (slack: a busy machine
    // and the stranger's second between looks).
    let longest = lives.iter().max().unwrap();
    assert!(*longest <= HEAD_TIME + Duration::from_secs(4), "a trickling head lived {longest:?}");
}

#[test]
fn a_head_that_never_ends_is_cut_off_long_before_its_time_out() {
    let scratch = Scratch::new("metrics-endless");
    let server = MetricsServer::start(&journal(&scratch));
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream.set_write_timeout(Some(HEAD_TIME * 2)).unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nX-Endless: ").unwrap();
    // As fast as loopback takes it, the head's time-out would let gigabytes through; the
    // listener takes 32 KiB of head (and the sockets' buffers hold a few MiB).
    let chunk = [b'a'; 64 * 1024];
    let mut sent = 0usize;
    while stream.write_all(&chunk).is_ok() {
        sent += chunk.len();
        assert!(sent < 64 << 20, "64 MiB of head taken");
    }
    println!("the listener cut the head off after {sent} bytes had been sent");
    scrape_promptly(&server, 1, Duration::ZERO, "an endless head cut off");
}

#[test]
fn floods_of_idle_connections_hold_up_no_scrape() {
    let scratch = Scratch::new("metrics-flood");
    let server = MetricsServer::start(&journal(&scratch));
    let strangers = Strangers::start(&server.addr, 200, Manner::Silent { renew: Duration::from_secs(4) });
    scrape_promptly(&server, 10, Duration::from_millis(200), "200 idle connections");
    strangers.stop();
    // More than the listener keeps, renewed: the oldest still sending their head make room, from
    // the first scrape on (none of them timed out yet).
    let count = LISTENER_KEEPS + 88;
    let strangers = Strangers::start(&server.addr, count, Manner::Silent { renew: Duration::from_secs(4) });
    scrape_promptly(&server, 20, Duration::from_millis(400), &format!("{count} idle connections renewed"));
    strangers.stop();
}
