//! A small HTTP/1.1 server loop: std `TcpListener`, one thread per connection,
//! optional rustls on top, httparse for the request head, `Content-Length`
//! bodies only, keep-alive until the client closes or says `Connection: close`.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use rustls::{ServerConfig, ServerConnection, StreamOwned};
use serde::Serialize;
use serde_json::json;

/// Queues one line for standard error (see [`log_line`]).
macro_rules! log_line {
    ($($arg:tt)*) => {
        $crate::http::log_line(format!($($arg)*))
    };
}

/// Whether request logging is off (see [`crate::quiet_logs`]).
pub static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes `line` to standard error from a logger thread. Request handling
/// never waits for it: when stderr is a pipe nobody reads, lines are dropped
/// instead of stalling the server.
pub fn log_line(line: String) {
    if QUIET.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    static LOGGER: OnceLock<Option<SyncSender<String>>> = OnceLock::new();
    let sender = LOGGER.get_or_init(|| {
        let (tx, rx) = mpsc::sync_channel::<String>(4096);
        let spawned = thread::Builder::new().name("log".into()).spawn(move || {
            for line in rx {
                let mut err = io::stderr().lock();
                let _ = writeln!(err, "{line}");
            }
        });
        spawned.ok().map(|_| tx)
    });
    if let Some(tx) = sender {
        let _ = tx.try_send(line);
    }
}

/// Largest accepted request body (bigger: 413).
pub const MAX_BODY: usize = 1 << 20;
/// Largest accepted request head (bigger: 431).
const MAX_HEAD: usize = 64 * 1024;
/// How long a connection may take to deliver a request head (and then its
/// body); an idle keep-alive connection is closed after this.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_CONNECTIONS: usize = 512;
const MAX_HEADERS: usize = 64;

/// A complete request.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// Request target as sent (path and query).
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// First value of a header (name compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The target without its query string.
    pub fn path(&self) -> &str {
        self.target.split(['?', '#']).next().unwrap_or("")
    }
}

/// Writes a streamed body of a known length.
pub type StreamFn = Box<dyn FnOnce(&mut dyn Write) -> io::Result<()> + Send>;

/// What a response carries.
pub enum Body {
    Bytes(Vec<u8>),
    Stream {
        len: u64,
        write: StreamFn,
    },
    /// Close the connection without answering.
    Hangup,
}

/// A response, plus what the request log line should say about it.
pub struct Response {
    pub status: u16,
    pub content_type: Option<&'static str>,
    pub headers: Vec<(&'static str, String)>,
    pub body: Body,
    /// The `action` of the request, for the log line.
    pub action: Option<String>,
}

pub const JSON_UTF8: &str = "application/json; charset=utf-8";

impl Response {
    /// A JSON response (struct fields keep their declared order).
    pub fn json<T: Serialize + ?Sized>(status: u16, value: &T) -> Response {
        let body = serde_json::to_vec(value).unwrap_or_else(|e| {
            format!(r#"{{"error":{{"code":"internal","message":"serialisation failed: {e}"}}}}"#).into_bytes()
        });
        Response { status, content_type: Some(JSON_UTF8), headers: Vec::new(), body: Body::Bytes(body), action: None }
    }

    /// `{"error":{"code":...,"message":...}}`.
    pub fn error(status: u16, code: &str, message: &str) -> Response {
        Response::json(status, &json!({"error": {"code": code, "message": message}}))
    }

    pub fn with_action(mut self, action: Option<String>) -> Response {
        self.action = action;
        self
    }
}

/// Produces the response to a request.
pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// A running listener; stopped by [`ListenerHandle::stop`] or on drop.
pub struct ListenerHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl ListenerHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections (open connections finish on their own).
    pub fn stop(&self) {
        if !self.stop.swap(true, Ordering::SeqCst) {
            // Wake the blocking accept() so it sees the flag.
            let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        }
    }
}

impl Drop for ListenerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Serves `listener` on a background thread, with TLS when `tls` is given.
/// `scheme` labels the log lines.
pub fn spawn(
    listener: TcpListener,
    tls: Option<Arc<ServerConfig>>,
    scheme: &'static str,
    handler: Handler,
) -> io::Result<ListenerHandle> {
    let addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_flag = Arc::clone(&stop);
    let active = Arc::new(AtomicUsize::new(0));
    thread::Builder::new().name(format!("{scheme}-accept")).spawn(move || {
        for sock in listener.incoming() {
            if stop_flag.load(Ordering::SeqCst) {
                break;
            }
            let sock = match sock {
                Ok(s) => s,
                Err(e) => {
                    log_line!("{scheme} accept failed: {e}");
                    thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            if active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                log_line!("{scheme} too many connections; closing a new one");
                continue;
            }
            active.fetch_add(1, Ordering::SeqCst);
            let guard = ActiveGuard(Arc::clone(&active));
            let tls = tls.clone();
            let handler = Arc::clone(&handler);
            let spawned = thread::Builder::new().name(format!("{scheme}-conn")).spawn(move || {
                let _guard = guard;
                handle_socket(sock, tls, scheme, &handler);
            });
            if let Err(e) = spawned {
                log_line!("{scheme} could not start a connection thread: {e}");
            }
        }
    })?;
    Ok(ListenerHandle { addr, stop })
}

struct ActiveGuard(Arc<AtomicUsize>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A byte stream the loop can end politely.
trait Conn: Read + Write {
    fn finish(&mut self) {}
}

impl Conn for TcpStream {}

impl Conn for StreamOwned<ServerConnection, TcpStream> {
    fn finish(&mut self) {
        self.conn.send_close_notify();
        let _ = self.flush();
    }
}

fn handle_socket(sock: TcpStream, tls: Option<Arc<ServerConfig>>, scheme: &str, handler: &Handler) {
    let _ = sock.set_nodelay(true);
    let _ = sock.set_write_timeout(Some(WRITE_TIMEOUT));
    let control = match sock.try_clone() {
        Ok(c) => c,
        Err(e) => {
            log_line!("{scheme} socket clone failed: {e}");
            return;
        }
    };
    match tls {
        None => serve(sock, &control, scheme, handler),
        Some(cfg) => match ServerConnection::new(cfg) {
            Ok(conn) => serve(StreamOwned::new(conn, sock), &control, scheme, handler),
            Err(e) => log_line!("{scheme} TLS setup failed: {e}"),
        },
    }
}

enum ReadOutcome {
    Data,
    Closed,
    TimedOut,
    Failed(io::Error),
}

/// Reads more bytes into `buf`, giving up at `deadline`.
fn read_some<C: Conn>(conn: &mut C, sock: &TcpStream, buf: &mut Vec<u8>, deadline: Instant) -> ReadOutcome {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let now = Instant::now();
        if now >= deadline {
            return ReadOutcome::TimedOut;
        }
        let _ = sock.set_read_timeout(Some(deadline - now));
        match conn.read(&mut chunk) {
            Ok(0) => return ReadOutcome::Closed,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return ReadOutcome::Data;
            }
            Err(e) => match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                    return ReadOutcome::TimedOut;
                }
                io::ErrorKind::UnexpectedEof
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe => return ReadOutcome::Closed,
                _ => return ReadOutcome::Failed(e),
            },
        }
    }
}

struct Head {
    method: String,
    target: String,
    minor_version: u8,
    headers: Vec<(String, String)>,
    len: usize,
}

/// Parses a request head; `Ok(None)` while it is incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, String> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Partial) => Ok(None),
        Ok(httparse::Status::Complete(len)) => Ok(Some(Head {
            method: req.method.unwrap_or("").to_string(),
            target: req.path.unwrap_or("").to_string(),
            minor_version: req.version.unwrap_or(1),
            headers: req
                .headers
                .iter()
                .map(|h| {
                    let value = String::from_utf8_lossy(h.value).trim().to_string();
                    (h.name.to_string(), value)
                })
                .collect(),
            len,
        })),
        Err(e) => Err(format!("malformed request head: {e}")),
    }
}

fn has_token(headers: &[(String, String)], name: &str, token: &str) -> bool {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .flat_map(|(_, v)| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// The per-connection request loop.
fn serve<C: Conn>(mut conn: C, sock: &TcpStream, scheme: &str, handler: &Handler) {
    let mut buf: Vec<u8> = Vec::with_capacity(8 * 1024);
    loop {
        // Request head.
        let deadline = Instant::now() + READ_TIMEOUT;
        let head = loop {
            if !buf.is_empty() {
                match parse_head(&buf) {
                    Ok(Some(head)) => break head,
                    Ok(None) if buf.len() > MAX_HEAD => {
                        let resp = Response::error(431, "headerTooLarge", "request head larger than 64 KiB");
                        reject(&mut conn, sock, scheme, "-", "-", resp);
                        return;
                    }
                    Ok(None) => {}
                    Err(msg) => {
                        let resp = Response::error(400, "badRequest", &msg);
                        reject(&mut conn, sock, scheme, "-", "-", resp);
                        return;
                    }
                }
            }
            match read_some(&mut conn, sock, &mut buf, deadline) {
                ReadOutcome::Data => {}
                ReadOutcome::Closed | ReadOutcome::TimedOut => return,
                ReadOutcome::Failed(e) => {
                    log_line!("{scheme} connection error: {e}");
                    return;
                }
            }
        };
        buf.drain(..head.len);
        let (method, target) = (head.method.as_str(), head.target.as_str());

        // Body framing: Content-Length only.
        if head.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding")) {
            let resp = Response::error(
                411,
                "lengthRequired",
                "Transfer-Encoding (chunked) request bodies are not supported; send Content-Length",
            );
            reject(&mut conn, sock, scheme, method, target, resp);
            return;
        }
        let lengths: Vec<&str> = head
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.as_str())
            .collect();
        let body_len = match lengths.as_slice() {
            [] => Some(0),
            [first, rest @ ..] if rest.iter().all(|v| v == first) => parse_length(first),
            _ => None,
        };
        let Some(body_len) = body_len else {
            let resp = Response::error(400, "badRequest", "invalid Content-Length");
            reject(&mut conn, sock, scheme, method, target, resp);
            return;
        };
        if body_len > MAX_BODY as u64 {
            let resp = Response::error(413, "payloadTooLarge", "request body larger than 1 MiB");
            reject(&mut conn, sock, scheme, method, target, resp);
            return;
        }
        let body_len = body_len as usize;
        let wants_continue = buf.len() < body_len && has_token(&head.headers, "expect", "100-continue");
        if wants_continue && conn.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").and_then(|_| conn.flush()).is_err() {
            return;
        }
        let deadline = Instant::now() + READ_TIMEOUT;
        while buf.len() < body_len {
            match read_some(&mut conn, sock, &mut buf, deadline) {
                ReadOutcome::Data => {}
                ReadOutcome::Closed | ReadOutcome::TimedOut => return,
                ReadOutcome::Failed(e) => {
                    log_line!("{scheme} connection error: {e}");
                    return;
                }
            }
        }
        let body: Vec<u8> = buf.drain(..body_len).collect();

        let keep_alive = if head.minor_version == 0 {
            has_token(&head.headers, "connection", "keep-alive")
        } else {
            !has_token(&head.headers, "connection", "close")
        };
        let request = Request { method: head.method, target: head.target, headers: head.headers, body };
        let response = handler(&request);
        log(scheme, &request.method, &request.target, &response);
        if matches!(response.body, Body::Hangup) {
            let _ = sock.shutdown(Shutdown::Both);
            return;
        }
        let head_only = request.method == "HEAD";
        if let Err(e) = write_response(&mut conn, response, keep_alive, head_only) {
            log_line!("{scheme} write failed: {e}");
            return;
        }
        if !keep_alive {
            conn.finish();
            linger_close(sock);
            return;
        }
    }
}

fn parse_length(v: &str) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

fn log(scheme: &str, method: &str, target: &str, resp: &Response) {
    let action = resp.action.as_deref().unwrap_or("-");
    let status = match resp.body {
        Body::Hangup => "hangup".to_string(),
        _ => resp.status.to_string(),
    };
    log_line!("{scheme} {method} {target} action={action} status={status}");
}

/// Answers an unusable request and closes the connection.
fn reject<C: Conn>(conn: &mut C, sock: &TcpStream, scheme: &str, method: &str, target: &str, resp: Response) {
    log(scheme, method, target, &resp);
    if write_response(conn, resp, false, false).is_ok() {
        conn.finish();
    }
    linger_close(sock);
}

/// Half-closes and drains what the client still sends for a moment, so that
/// unread request bytes do not turn the close into a reset that could
/// destroy the response in flight.
fn linger_close(sock: &TcpStream) {
    let _ = sock.shutdown(Shutdown::Write);
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut sink = [0u8; 16 * 1024];
    let mut total = 0usize;
    let mut reader = sock;
    while total < 4 * MAX_BODY {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        let _ = sock.set_read_timeout(Some(deadline - now));
        match reader.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

fn write_response<C: Conn>(conn: &mut C, resp: Response, keep_alive: bool, head_only: bool) -> io::Result<()> {
    let no_body = matches!(resp.status, 100..=199 | 204 | 304);
    let mut head = format!("HTTP/1.1 {} {}\r\nServer: slotpartner-sandbox\r\n", resp.status, reason(resp.status));
    if let Some(ct) = resp.content_type {
        head.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    let len = match &resp.body {
        Body::Bytes(b) => b.len() as u64,
        Body::Stream { len, .. } => *len,
        Body::Hangup => 0,
    };
    if !no_body {
        head.push_str(&format!("Content-Length: {len}\r\n"));
    }
    for (name, value) in &resp.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(if keep_alive { "Connection: keep-alive\r\n\r\n" } else { "Connection: close\r\n\r\n" });
    let mut out = head.into_bytes();
    match resp.body {
        Body::Bytes(bytes) => {
            if !no_body && !head_only {
                out.extend_from_slice(&bytes);
            }
            conn.write_all(&out)?;
        }
        Body::Stream { write, .. } => {
            conn.write_all(&out)?;
            if !no_body && !head_only {
                write(conn)?;
            }
        }
        Body::Hangup => conn.write_all(&out)?,
    }
    conn.flush()
}
