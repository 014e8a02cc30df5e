//! `metrics --listen ADDR`: the HTTP/1.1 listener a Prometheus scrape reads (`GET /metrics`).
//!
//! hyper serves each connection as a task of one tokio thread: a connection waiting for its client
//! costs a socket and a few KiB, never a thread, so strangers' connections, however many and
//! however slow, hold up no scrape. Each connection is bounded:
//!
//! - its request head within [`REQUEST_TIME`] of connecting, however often a byte comes (hyper's
//!   header read time-out; closed without an answer), at most [`MAX_HEAD`] bytes (431); a request
//!   target over [`MAX_TARGET`] is answered 414;
//! - one request a connection (no keep-alive), the whole of it (head, journal read, answer) within
//!   [`CONNECTION_TIME`], after which it is closed, answered or not;
//! - at most [`MAX_CONNECTIONS`] open: a new one beyond closes the oldest still sending its head
//!   (see [`super::connections`]);
//! - the journal is read on tokio's blocking threads, at most [`MAX_READS`] reads at once, so that
//!   the thread serving the connections never waits for it.

use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::net::{TcpListener as StdTcpListener, ToSocketAddrs};
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Poll;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::connections::{Closed, Connections};
use crate::args::{JournalOpt, MetricsArgs};
use crate::{Fail, Outcome, Verdict};

/// Connections open at once: far more than scrapes need (one every 15 s or so from each
/// Prometheus server), well under the 1024 file descriptors a process is commonly allowed.
const MAX_CONNECTIONS: usize = 512;
/// How long a client has to send its whole request head, from connecting.
const REQUEST_TIME: Duration = Duration::from_secs(5);
/// How long a connection lives at most: its head, the journal read and the answer's write.
const CONNECTION_TIME: Duration = Duration::from_secs(30);
/// The longest request head taken (longer ones are answered 431).
const MAX_HEAD: usize = 32 * 1024;
/// The longest request target taken (longer ones are answered 414).
const MAX_TARGET: usize = 8 * 1024;
/// Journal reads at once; more scrapes at once wait for one to end.
const MAX_READS: usize = 4;
/// The pause after a failure to accept (no file descriptor left, and the like), so as not to spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// `metrics --listen ADDR`: serves `GET /metrics` until stopped.
pub fn serve(args: &MetricsArgs) -> Outcome {
    let url = super::journal_url(&args.journal)?.to_owned();
    let addresses: Vec<_> = args
        .listen
        .to_socket_addrs()
        .map_err(|e| Fail(format!("listen: {:?} is not an address to listen on ({e})", args.listen)))?
        .collect();
    let listener = StdTcpListener::bind(&addresses[..])
        .map_err(|e| Fail(format!("listen: cannot listen on {}: {e}", args.listen)))?;
    let bound = listener.local_addr().map_err(|e| Fail(format!("listen: {e}")))?;
    listener.set_nonblocking(true).map_err(|e| Fail(format!("listen: {e}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| Fail(format!("listen: cannot start serving: {e}")))?;
    let listener = {
        let _entered = runtime.enter();
        TcpListener::from_std(listener).map_err(|e| Fail(format!("listen: {e}")))?
    };
    eprintln!("listening on {bound}");
    let shared = Arc::new(Shared {
        journal: JournalOpt {
            journal: Some(url),
            max_index_jump: args.journal.max_index_jump,
            not_found_limit: args.journal.not_found_limit,
        },
        http: http1_settings(),
        connections: Mutex::new(Connections::new(MAX_CONNECTIONS)),
        reads: Arc::new(Semaphore::new(MAX_READS)),
    });
    runtime.block_on(accept_each(listener, shared));
    Ok(Verdict::Good)
}

/// hyper's settings for every connection: HTTP/1.1 (and 1.0), one request a connection.
fn http1_settings() -> http1::Builder {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(REQUEST_TIME)
        .max_header_size(MAX_HEAD)
        .max_buf_size(MAX_HEAD)
        // A connection is one scrape: its life is bounded by the head's time, the journal read
        // and the answer, never by a client keeping it idle.
        .keep_alive(false)
        // A client that shuts its sending side after the request still gets the answer.
        .half_close(true)
        .title_case_headers(true);
    http
}

/// What every connection shares.
struct Shared {
    /// The journal, opened afresh for each scrape.
    journal: JournalOpt,
    http: http1::Builder,
    connections: Mutex<Connections>,
    /// [`MAX_READS`] permits to read the journal.
    reads: Arc<Semaphore>,
}

impl Shared {
    fn connections(&self) -> MutexGuard<'_, Connections> {
        self.connections.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The exposition of the journal read now, on a blocking thread once a read's permit is free
    /// (a warning on stderr when it is unreadable, written there too); `None` if the read panicked.
    async fn exposition(self: &Arc<Self>) -> Option<String> {
        let permit = Arc::clone(&self.reads).acquire_owned().await.ok()?;
        let shared = Arc::clone(self);
        let read = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let url = shared.journal.journal.as_deref().unwrap_or("");
            let (body, error) = super::render(&shared.journal, url);
            if let Some(error) = error {
                eprintln!("slotpartner: warning: journal unreadable: {error}");
            }
            body
        });
        read.await.ok()
    }
}

/// Accepts connections for ever, each served by a task of its own.
async fn accept_each(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        // All being answered: this one is closed at once (dropped).
        let Some((number, closed)) = shared.connections().admit() else { continue };
        tokio::spawn(serve_connection(stream, number, closed, Arc::clone(&shared)));
    }
}

/// Serves connection `number` until it is answered, fails, runs out of time, or is `closed` to
/// make room; it is forgotten however it ends.
async fn serve_connection(stream: TcpStream, number: u64, closed: Closed, shared: Arc<Shared>) {
    let _forget = Forget { number, shared: Arc::clone(&shared) };
    let service = {
        let shared = Arc::clone(&shared);
        service_fn(move |request| {
            shared.connections().answering(number);
            answer(request, Arc::clone(&shared))
        })
    };
    let served = shared.http.serve_connection(TokioIo::new(stream), service);
    let mut served = pin!(tokio::time::timeout(CONNECTION_TIME, served));
    let mut closed = pin!(closed);
    poll_fn(|cx| {
        if closed.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        served.as_mut().poll(cx).map(drop)
    })
    .await;
}

/// Forgets connection `number` when its task ends, however it ends.
struct Forget {
    number: u64,
    shared: Arc<Shared>,
}

impl Drop for Forget {
    fn drop(&mut self) {
        self.shared.connections().ended(self.number);
    }
}

/// The answer to one request.
async fn answer(request: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<String>, Infallible> {
    let target = request.uri().path_and_query().map_or("", |p| p.as_str());
    if target.len() > MAX_TARGET {
        return Ok(plain(StatusCode::URI_TOO_LONG, "request target too long\n"));
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Ok(response);
    }
    if request.uri().path() != "/metrics" {
        return Ok(plain(StatusCode::NOT_FOUND, "not found: the metrics are at /metrics\n"));
    }
    drop(request);
    Ok(match shared.exposition().await {
        Some(body) => response(StatusCode::OK, super::CONTENT_TYPE, body),
        None => plain(StatusCode::INTERNAL_SERVER_ERROR, "the journal's read failed\n"),
    })
}

/// A plain text answer.
fn plain(status: StatusCode, body: &str) -> Response<String> {
    response(status, "text/plain; charset=utf-8", body.to_owned())
}

/// An answer of `status` with `body` (its length sent; hyper leaves the body out for HEAD).
fn response(status: StatusCode, content_type: &'static str, body: String) -> Response<String> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
