//! The endpoint in one call: `sp_endpoint_receive` takes a whole request and gives an
//! `sp_exchange` holding either the final response or the event to run the partner's logic on;
//! `sp_exchange_complete` gives the final response after the logic.
//!
//! Two calls around the logic rather than a callback: PHP FFI leaks a PHP closure handed to C
//! as a function pointer, and Python's ctypes callbacks cannot carry exceptions across C. The
//! logic runs in the host's own language, between the two calls, with the event it was given.

use std::ffi::c_char;
use std::mem::MaybeUninit;
use std::sync::Arc;

use crate::callback::receiver::Request;
use crate::endpoint::{Answer, CONTENT_TYPE, Endpoint, Received, cgi};
use crate::error::{Error, ErrorKind};
use crate::ffi::event::{self, sp_event};
use crate::ffi::journal::sp_journal_config;
use crate::ffi::receiver::{request, sp_receiver_config};
use crate::ffi::status::sp_status;
use crate::ffi::str::sp_str;
use crate::ffi::{args, owned, shared};

/// A callback endpoint: a receiver's configuration and, optionally, a journal opened the first
/// time a request needs it. Created by `sp_endpoint_new`, freed by `sp_endpoint_free`. Make one
/// per process (a PHP-FPM worker, a WSGI process, a CGI run) and keep it: any number of threads
/// may use one endpoint at the same time. Exchanges it returns keep what they need of it alive.
pub struct sp_endpoint {
    inner: Arc<Endpoint>,
}

/// One header of a response: `name` and `value`, both views owned by the exchange.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_header {
    pub name: sp_str,
    pub value: sp_str,
}

/// The final response of an exchange. Every view is owned by the exchange and valid until
/// `sp_exchange_free`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_response {
    /// The HTTP status: 200, or the refusal's (401, 403, 405, 409, 413, 400, 500, 503). 0 while
    /// the exchange waits for `sp_exchange_complete`.
    pub status: u16,
    /// The body to send, byte for byte (JSON; a repeat's is the first reply's bytes).
    pub body: sp_str,
    /// The headers to send with it: `Retry-After: <seconds>` on a 503, `Allow: POST` on a 405,
    /// and last `Content-Type: application/json; charset=utf-8` always. `headers_len` entries.
    pub headers: *const sp_header,
    pub headers_len: usize,
    /// One line for the host's log (a refusal and why, a repeat, a failure with its cause, the
    /// journal's URL and server message included), empty when there is nothing to say. Never
    /// send it to the caller.
    pub log: sp_str,
}

/// One request through an endpoint. Created by `sp_endpoint_receive`, freed by
/// `sp_exchange_free`. Belongs to one thread at a time.
///
/// When `event` is NULL, `response` is final: send it. Otherwise run the partner's logic on
/// `event` (read it, build its reply with `sp_event_reply` or `sp_event_reply_balance`, stage the
/// ledger's credit with `sp_event_stage`), then call `sp_exchange_complete`, which fills
/// `response`. The event is owned by the exchange: never free it. The library never reads this
/// struct back (a host may write into it): it keeps its own copies.
#[repr(C)]
#[derive(Debug)]
pub struct sp_exchange {
    pub event: *mut sp_event,
    pub response: sp_response,
}

// `sp_exchange` has no padding of its own (see `write_view`).
const _: () = assert!(size_of::<sp_exchange>() == size_of::<*mut sp_event>() + size_of::<sp_response>());

/// The allocation behind an `sp_exchange` pointer: the public struct first, held as bytes
/// (`MaybeUninit`, the same layout) that `write_view` writes in place, its padding as zeros.
#[repr(C)]
struct ExchangeBox {
    view: MaybeUninit<sp_exchange>,
    /// The event handed to the logic, owned here (freed, and its claim released if still held,
    /// with the exchange); NULL when the request was answered at once.
    event: *mut sp_event,
    endpoint: Arc<Endpoint>,
    /// What the log says before the logic runs (`attempt 2`), kept for the final response.
    early_log: String,
    /// The final response's bytes, once there is one.
    answered: Option<Answered>,
}

/// The bytes the final response views: each NUL-terminated, in heap buffers that never move.
struct Answered {
    status: u16,
    body: Vec<u8>,
    log: Vec<u8>,
    retry_after: Vec<u8>,
    allow_post: bool,
    /// The views of `sent_headers` handed out: the host may write into them, so the library
    /// never reads them back.
    headers: Vec<sp_header>,
}

impl Answered {
    fn of(answer: Answer, early_log: &str) -> Answered {
        let nul_terminated = |mut bytes: Vec<u8>| {
            bytes.push(0);
            bytes
        };
        let log = if answer.log.is_empty() { early_log.to_owned() } else { answer.log };
        let mut answered = Answered {
            status: answer.status,
            body: nul_terminated(answer.body),
            log: nul_terminated(log.replace('\0', " ").into_bytes()),
            retry_after: nul_terminated(answer.retry_after.map(|s| s.to_string()).unwrap_or_default().into_bytes()),
            allow_post: answer.allow_post,
            headers: Vec::new(),
        };
        answered.headers = answered
            .sent_headers()
            .map(|(name, value)| sp_header {
                name: sp_str::of_nul_terminated(name),
                value: sp_str::of_nul_terminated(value),
            })
            .collect();
        answered
    }

    /// The headers to send, each name and value with its NUL: `Retry-After` when the answer
    /// says when to come back, `Allow` on a 405, and last `Content-Type`. Made from the answer's
    /// own bytes (static, or its `retry_after`), never from the views handed out.
    fn sent_headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        // `retry_after` is its NUL alone when the answer has none.
        let retry_after = (self.retry_after.len() > 1).then_some((&b"Retry-After\0"[..], &self.retry_after[..]));
        let allow = self.allow_post.then_some((&b"Allow\0"[..], &b"POST\0"[..]));
        let content_type = (&b"Content-Type\0"[..], content_type().to_bytes_with_nul());
        retry_after.into_iter().chain(allow).chain([content_type])
    }

    fn view(&self) -> sp_response {
        sp_response {
            status: self.status,
            body: sp_str::of_nul_terminated(&self.body),
            headers: self.headers.as_ptr(),
            headers_len: self.headers.len(),
            log: sp_str::of_nul_terminated(&self.log),
        }
    }
}

/// `CONTENT_TYPE` as a C string.
fn content_type() -> &'static std::ffi::CStr {
    const C: &std::ffi::CStr = c"application/json; charset=utf-8";
    debug_assert_eq!(C.to_bytes(), CONTENT_TYPE.as_bytes());
    C
}

impl Drop for ExchangeBox {
    fn drop(&mut self) {
        // SAFETY: `event` is NULL or the event this exchange made and owns; nothing else frees it.
        unsafe { event::free_exchange_event(self.event) };
    }
}

/// Makes an endpoint from a receiver's configuration (copied: free it whenever you like) and,
/// when `journal` is not NULL, a journal's configuration (copied too). The journal is not opened
/// here: the first request that needs it opens it (a request refused by its source or token, and
/// a balance query, never need it), and it stays open for the endpoint's life; a journal that
/// cannot be opened answers that request 503 and is tried again by the next. A receiver
/// configuration that carries an open journal (`sp_receiver_config_set_journal`) uses that one.
///
/// Fails with `SP_ERR_INVALID_ARGUMENT` naming the setting: no token (`token`), a journal both
/// attached to the receiver configuration and given here (`journal`). `*out` is written only on
/// success.
///
/// # Safety
/// `receiver` is NULL or live; `journal` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_endpoint_new(
    receiver: *const sp_receiver_config,
    journal: *const sp_journal_config,
    out: *mut *mut sp_endpoint,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or live / writable pointers.
        let (receiver, out) = unsafe { (args::object("receiver", receiver)?, args::out("out", out)?) };
        // SAFETY: NULL or live, by the caller's promise.
        let journal = unsafe { journal.as_ref() }.map(|j| (j.url.as_str(), j.options.clone()));
        let endpoint = Endpoint::new(receiver.config.clone(), journal)?;
        out.write(owned::into_raw(sp_endpoint { inner: Arc::new(endpoint) }));
        Ok(())
    })
}

/// Makes an endpoint from one JSON object of settings (`settings`/`len`, UTF-8): the
/// receiver's and the journal's settings under the names of their C setters
/// (`sp_receiver_config_set_<key>`, `sp_journal_config_set_<key>`), `token` (a string or a list
/// of two), `journal` (the URL; absent or null for none), `retry_after` (seconds, default 5) and
/// `optimistic` (default false: with `claim_at_finish`, the logic runs before any read of the
/// journal and a repeat is found when the reply is stored, answered with the stored reply and
/// none of its staged statements run; only for logic whose every effect is staged or absorbed
/// by the ledger's unique key), each optional with its default. For example
/// `{"token":"6f1c2a3e-...","sources":"production","journal":"sqlite:/var/lib/partner/journal.db","claim_at_finish":true}`.
/// An unknown key or a value of the wrong type is refused (`SP_ERR_INVALID_ARGUMENT`, field
/// `settings`, the message naming the key), as is a value out of its range (the field is the
/// setting's). The journal is opened as `sp_endpoint_new` says. `*out` is written only on
/// success.
///
/// # Safety
/// `settings` is NULL or `len` readable bytes; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_endpoint_from_settings(
    settings: *const c_char,
    len: usize,
    out: *mut *mut sp_endpoint,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (settings, out) = unsafe { (args::bytes("settings", settings.cast(), len)?, args::out("out", out)?) };
        let endpoint = Endpoint::from_settings(settings)?;
        out.write(owned::into_raw(sp_endpoint { inner: Arc::new(endpoint) }));
        Ok(())
    })
}

/// Makes an endpoint from the environment: each setting of `sp_endpoint_from_settings` from the
/// variable `SLOTPARTNER_<KEY>` (`SLOTPARTNER_TOKEN`, `SLOTPARTNER_SOURCES`,
/// `SLOTPARTNER_TRUSTED_PROXIES`, `SLOTPARTNER_JOURNAL`, `SLOTPARTNER_CLAIM_AT_FINISH`, ...), as
/// libpq reads `PGHOST`: unset or empty leaves the default; a switch is `1`/`true`/`yes`/`on` or
/// `0`/`false`/`no`/`off`; `SLOTPARTNER_TOKEN` may hold two tokens separated by a comma. Made for
/// a CGI program, which lives one request. Fails with `SP_ERR_INVALID_ARGUMENT` naming the
/// variable whose text cannot be read, or the setting whose value is refused (without a token:
/// field `token`, the message asking whether `SLOTPARTNER_TOKEN` is set). `*out` is written only
/// on success.
///
/// # Safety
/// `out` is NULL or writable. Reads the environment: no other thread may change it meanwhile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_endpoint_from_environment(out: *mut *mut sp_endpoint) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or a writable pointer.
        let out = unsafe { args::out("out", out)? };
        let endpoint = Endpoint::from_environment()?;
        out.write(owned::into_raw(sp_endpoint { inner: Arc::new(endpoint) }));
        Ok(())
    })
}

/// `sp_endpoint_from_settings`, but the same endpoint for the same settings (byte for byte)
/// within this process: the first call makes it, every later call finds it, its journal open
/// and its connections kept. Made for hosts whose variables die with each request while the
/// process lives on (PHP-FPM: call it at the top of every request, one call, and free the
/// handle at the end). Each call gives a handle of its own, freed with `sp_endpoint_free`; the
/// endpoint itself lives as long as the process. At most 16 settings are kept; more make an
/// endpoint per call, as `sp_endpoint_from_settings`. A forked child finds its parent's
/// endpoints, and their journal opens connections of its own. `sp_endpoint_set_retry_after` is
/// refused on a shared endpoint: give `retry_after` in the settings.
///
/// # Safety
/// As for `sp_endpoint_from_settings`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_endpoint_shared(
    settings: *const c_char,
    len: usize,
    out: *mut *mut sp_endpoint,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (settings, out) = unsafe { (args::bytes("settings", settings.cast(), len)?, args::out("out", out)?) };
        out.write(owned::into_raw(sp_endpoint { inner: shared::endpoint(settings)? }));
        Ok(())
    })
}

/// `sp_endpoint_shared` found by a key of the caller's choosing (`key`/`key_len`, any bytes),
/// for a host that can tell cheaply whether its settings are the same as last time but not
/// what they are (PHP reading a variable per setting from the environment: the key is their
/// raw texts, the settings their values once read, checked and written as JSON). A key must
/// name one settings text for ever within the process: make it of everything the settings are
/// made from, and begin it with what names the way they are made from it.
///
/// With `settings` NULL (and `len` 0), only finds: `*out` gets a handle of the endpoint kept
/// under `key`, or NULL when none is (`SP_OK` either way). With `settings`, as
/// `sp_endpoint_shared`, and the endpoint is kept under `key` too (the first 16 keys of the
/// process; an endpoint not kept keeps no key), so that later calls find it by the key alone.
/// A key that names an endpoint kept with other settings is refused (`SP_ERR_INVALID_ARGUMENT`,
/// field `key`). Each handle is the caller's, freed with `sp_endpoint_free`; the key and the
/// settings are copied. `*out` is written only on success.
///
/// # Safety
/// `key` is NULL or `key_len` readable bytes; `settings` is NULL or `len` readable bytes; `out`
/// is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_endpoint_shared_keyed(
    key: *const c_char,
    key_len: usize,
    settings: *const c_char,
    len: usize,
    out: *mut *mut sp_endpoint,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (key, settings, out) = unsafe {
            if key.is_null() {
                return Err(args::null("key").into());
            }
            let key = args::bytes("key", key.cast(), key_len)?;
            let settings = if settings.is_null() && len == 0 {
                None
            } else {
                Some(args::bytes("settings", settings.cast(), len)?)
            };
            (key, settings, args::out("out", out)?)
        };
        let endpoint = match settings {
            None => shared::find(key),
            Some(settings) => Some(shared::endpoint_keyed(key, settings)?),
        };
        out.write(endpoint.map_or(std::ptr::null_mut(), |inner| owned::into_raw(sp_endpoint { inner })));
        Ok(())
    })
}

/// Sets the `Retry-After` of every 503 the endpoint answers, in seconds (1 to 3600; default 5).
/// Set it before the first request: it fails with `SP_ERR_INVALID_ARGUMENT` (field `endpoint`)
/// while an exchange of the endpoint is alive, and (field `retry_after`) out of range.
///
/// # Safety
/// `endpoint` is NULL or live and used by no other thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_endpoint_set_retry_after(endpoint: *mut sp_endpoint, seconds: u32) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or a live endpoint it does not share now.
        let endpoint = unsafe { args::object_mut("endpoint", endpoint)? };
        let Some(inner) = Arc::get_mut(&mut endpoint.inner) else {
            let problem = "is in use by an exchange: set Retry-After before the first request";
            return Err(Error::field(ErrorKind::InvalidArgument, "endpoint", problem).into());
        };
        inner.set_retry_after(seconds)?;
        Ok(())
    })
}

/// Frees an endpoint. NULL is allowed and does nothing. Exchanges still alive keep what they
/// need of it (the journal among it) until they are freed.
///
/// # Safety
/// `endpoint` is NULL or came from `sp_endpoint_new`, is used by no other thread now and not
/// used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_endpoint_free(endpoint: *mut sp_endpoint) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<sp_endpoint, _>(endpoint) } })
}

/// Takes one request as the web server saw it: `method` (`"POST"`), the `X-Service-Token`
/// header's value (`token`), the peer address (`remote_addr`, CGI `REMOTE_ADDR`), the
/// `X-Forwarded-For` header's value (`forwarded_for`, read only from a trusted proxy), and the
/// body (`body`/`len`; read at most the receiver's body limit plus one byte, so that a larger
/// body is refused 413). Absent headers are NULL. `*out` gets the exchange: a final response
/// (`event` NULL) or an event for the partner's logic. Every answer the request can get is
/// decided here and in `sp_exchange_complete`, and shows in `response`, so this call fails only
/// for its arguments:
///
/// - a method other than POST: 405 with `Allow: POST`;
/// - the source, then the token, before anything else: 403, 401;
/// - the body: 413, 400, or 200 with the event's failure reply naming the invalid field;
/// - a balance query goes to the logic without the journal (a journal that is down does not
///   refuse it); its index, if any, is recorded best effort;
/// - a refund, payout or journaled other event is claimed: a repeat is answered with the stored
///   reply (200) and runs nothing; the same key with other content 409; a claim busy in another
///   worker or a journal that fails 503 with `Retry-After`; a new one goes to the logic.
///
/// Fails with `SP_ERR_INVALID_ARGUMENT` for a NULL `endpoint`, `method` or `out`, or a NULL
/// `body` with a `len` that is not 0; `*out` is written only on success. May wait up to the
/// journal's busy wait, and for a journal's open its connect timeout.
///
/// # Safety
/// `endpoint` is NULL or live; the strings are NULL or NUL-terminated; `body` is NULL (with
/// `len` 0) or `len` readable bytes; `out` is NULL or writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn sp_endpoint_receive(
    endpoint: *const sp_endpoint,
    method: *const c_char,
    token: *const c_char,
    remote_addr: *const c_char,
    forwarded_for: *const c_char,
    body: *const u8,
    len: usize,
    out: *mut *mut sp_exchange,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (endpoint, method, out, request) = unsafe {
            let endpoint = &args::object("endpoint", endpoint)?.inner;
            let method = args::opt_bytes_z(method).ok_or_else(|| args::null("method"))?;
            let out = args::out("out", out)?;
            (endpoint, method, out, request(token, remote_addr, forwarded_for, body, len)?)
        };
        out.write(exchange_of(endpoint, endpoint.receive(method, &request)));
        Ok(())
    })
}

/// The exchange of what `Endpoint::receive` found (the event copied out of the request), handed
/// out as `owned::into_raw` does.
fn exchange_of(endpoint: &Arc<Endpoint>, received: Received<'_>) -> *mut sp_exchange {
    let (event, answered, early_log) = match received {
        Received::Answer(answer) => (std::ptr::null_mut(), Some(Answered::of(answer, "")), String::new()),
        Received::Handle(mut handling) => {
            let early_log = std::mem::take(&mut handling.log);
            (event::into_raw_handling(handling), None, early_log)
        }
    };
    let response = answered.as_ref().map_or(EMPTY_RESPONSE, Answered::view);
    let exchange =
        ExchangeBox { view: MaybeUninit::uninit(), event, endpoint: Arc::clone(endpoint), early_log, answered };
    let raw = owned::into_raw::<ExchangeBox, ExchangeBox>(exchange);
    // SAFETY: the box just made, not handed out yet: the view is written where it stays (a
    // move would leave its padding undefined again).
    write_view(unsafe { &mut (*raw).view }, Some(event), response);
    raw.cast()
}

/// Writes an exchange's public struct (`event` NULL for one answered at once), or only its
/// `response` when `event` is `None` (`sp_exchange_complete`: what the host may have written
/// into `event` stays), its padding as zeros (`zero_padded!`).
fn write_view(view: &mut MaybeUninit<sp_exchange>, event: Option<*mut sp_event>, response: sp_response) {
    let at = view.as_mut_ptr();
    // SAFETY: `at` is the whole of `view`, writable and aligned; only raw pointers into it are
    // written, nothing the host may have written there is read. `sp_exchange` has no padding of
    // its own (a pointer, then a struct of pointer alignment), only its response has.
    unsafe {
        if let Some(event) = event {
            (&raw mut (*at).event).write(event);
        }
        zero_padded!(&raw mut (*at).response, response, sp_response { status, body, headers, headers_len, log });
    }
}

/// `sp_endpoint_receive` for a CGI program (RFC 3875): the request is read from the environment
/// (`REQUEST_METHOD`, `HTTP_X_SERVICE_TOKEN`, `REMOTE_ADDR`, `HTTP_X_FORWARDED_FOR`,
/// `CONTENT_LENGTH`) and standard input (at most the body limit plus one byte, so that a larger
/// body is refused 413 unread). A `CONTENT_LENGTH` that is not a number, or a body shorter than
/// it says, is answered 400 (field `CONTENT_LENGTH`); an unset `REQUEST_METHOD` 405. Write the
/// final response with `sp_exchange_write_cgi`. Fails only for a NULL argument.
///
/// # Safety
/// `endpoint` is NULL or live; `out` is NULL or writable. Reads the environment and standard
/// input: no other thread may change or read them meanwhile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_endpoint_receive_cgi(
    endpoint: *const sp_endpoint,
    out: *mut *mut sp_exchange,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (endpoint, out) = unsafe { (&args::object("endpoint", endpoint)?.inner, args::out("out", out)?) };
        let max_body = endpoint.receiver().parse_options().max_body_bytes;
        let exchange = match cgi::read_request(max_body, &mut std::io::stdin().lock()) {
            Err(answer) => exchange_of(endpoint, Received::Answer(answer)),
            Ok(cgi) => {
                let request = Request {
                    token: cgi.token.as_deref(),
                    remote_addr: cgi.remote_addr.as_deref(),
                    forwarded_for: cgi.forwarded_for.as_deref(),
                    body: &cgi.body,
                };
                exchange_of(endpoint, endpoint.receive(&cgi.method, &request))
            }
        };
        out.write(exchange);
        Ok(())
    })
}

/// Writes the exchange's final response to the file descriptor `fd` (1, standard output, for a
/// CGI program) as CGI wants it: `Status: <status> <reason>`, each header, a blank line, the
/// body, in one write. Writes nothing of `response.log`: that line is for the host's log.
/// Fails with `SP_ERR_INVALID_ARGUMENT` (field `exchange`) for an exchange that waits for
/// `sp_exchange_complete`, and (field `fd`) when the write fails (the message says why).
///
/// # Safety
/// `exchange` is NULL or live; `fd` is an open file descriptor the call may write to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_exchange_write_cgi(exchange: *const sp_exchange, fd: i32) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or a live exchange, only read here.
        let b = unsafe { args::object("exchange", exchange.cast::<ExchangeBox>())? };
        let Some(answered) = &b.answered else {
            let problem = "waits for sp_exchange_complete: it has no response yet";
            return Err(Error::field(ErrorKind::InvalidArgument, "exchange", problem).into());
        };
        let headers: Vec<(&[u8], &[u8])> =
            answered.sent_headers().map(|(name, value)| (without_nul(name), without_nul(value))).collect();
        let reason = crate::endpoint::reason_phrase(answered.status).to_str().unwrap_or("Unknown");
        if fd < 0 {
            return Err(Error::field(ErrorKind::InvalidArgument, "fd", format!("{fd} is not a file descriptor")).into());
        }
        // SAFETY: the caller promises an open descriptor; ManuallyDrop leaves it open.
        let mut file =
            std::mem::ManuallyDrop::new(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) });
        let body = &answered.body[..answered.body.len() - 1];
        cgi::write_response(&mut *file, answered.status, reason, &headers, body).map_err(|e| {
            Error::field(ErrorKind::InvalidArgument, "fd", format!("the response could not be written: {e}"))
        })?;
        Ok(())
    })
}

/// `text` without the NUL it ends with.
fn without_nul(text: &[u8]) -> &[u8] {
    &text[..text.len() - 1]
}

/// The response of an exchange that waits for `sp_exchange_complete`.
const EMPTY_RESPONSE: sp_response =
    sp_response { status: 0, body: sp_str::NONE, headers: std::ptr::null(), headers_len: 0, log: sp_str::NONE };

/// After the partner's logic ran on `exchange->event`: fills `exchange->response` with the final
/// response. `failure` is NULL when the logic succeeded, or says why it failed for a reason that
/// may pass (its ledger is down: it goes to the log). `reply`/`len` is the reply to send, or NULL
/// (with `len` 0) for the reply last built for the event (`sp_event_reply`,
/// `sp_event_reply_balance`) with its status (200; a refused balance query's is 500 by default);
/// give a reply only for an event that has no reply builder (`SP_EVENT_KIND_OTHER`), sent 200.
///
/// With a claim, the reply is stored in the journal with the staged statements (one
/// transaction) and then sent. Any failure after the claim (the logic's `failure`, no reply
/// built, a staged statement or the journal failing, the claim lost to another worker) releases
/// the claim and answers 503 with `Retry-After`, so that the service delivers again; the log
/// line says what failed. The exchange alone settles its event's claim: `sp_event_finish` and
/// `sp_event_abandon` on it are refused. So `SP_OK` does not mean a 200: read
/// `response.status`.
///
/// Fails with `SP_ERR_INVALID_ARGUMENT` (field `exchange`) for an exchange answered at once
/// (`event` NULL) or completed already, leaving its response as it is; for a NULL `reply` with
/// a `len` that is not 0.
///
/// # Safety
/// `exchange` is NULL or live and used by no other thread; `failure` is NULL or
/// NUL-terminated; `reply` is NULL or `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_exchange_complete(
    exchange: *mut sp_exchange,
    failure: *const c_char,
    reply: *const u8,
    len: usize,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented; the failure text
        // and the reply are copied before the exchange changes (a host may pass the exchange's
        // own views back in).
        let (failure, reply, b) = unsafe {
            let failure = args::opt_bytes_z(failure).map(|text| String::from_utf8_lossy(text).into_owned());
            let reply = if reply.is_null() { None } else { Some(args::bytes("reply", reply, len)?.to_vec()) };
            (failure, reply, args::object_mut("exchange", exchange.cast::<ExchangeBox>())?)
        };
        if b.event.is_null() || b.answered.is_some() {
            let problem =
                if b.event.is_null() { "was answered at once (its event is NULL)" } else { "was completed already" };
            return Err(Error::field(ErrorKind::InvalidArgument, "exchange", problem).into());
        }
        if reply.is_none() && len != 0 {
            return Err(args::null("reply").into());
        }
        // SAFETY: `b.event` is the live event this exchange made with `into_raw_handling` and owns.
        let answer = unsafe { event::complete(b.event, &b.endpoint, failure.as_deref(), reply.as_deref())? };
        let answered = Answered::of(answer, &b.early_log);
        write_view(&mut b.view, None, answered.view());
        b.answered = Some(answered);
        Ok(())
    })
}

/// Frees an exchange and its event. An event whose claim is still held (the exchange was never
/// completed) releases it, as a failure would: the next delivery runs the logic again. NULL is
/// allowed and does nothing.
///
/// # Safety
/// `exchange` is NULL or came from `sp_endpoint_receive`, is used by no other thread now and not
/// used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_exchange_free(exchange: *mut sp_exchange) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<ExchangeBox, _>(exchange) } })
}

/// The reason phrase of an HTTP status the endpoint answers (`"Service Unavailable"` for 503), for
/// a CGI `Status:` line or an HTTP/1.1 status line; `"Unknown"` for another. A static string:
/// never free it.
#[unsafe(no_mangle)]
pub extern "C" fn sp_http_reason(status: u16) -> *const c_char {
    value_boundary!(c"Unknown".as_ptr(), { crate::endpoint::reason_phrase(status).as_ptr() })
}
