//! The callback receiver: `sp_receiver_config_*` to configure it once, `sp_receiver_new`, then
//! `sp_receiver_handle` per callback.

use std::ffi::c_char;
use std::sync::Arc;

use crate::callback::receiver::{Receiver, ReceiverConfig, Request};
use crate::error::Result;
use crate::ffi::args;
use crate::ffi::error::Failure;
use crate::ffi::event::{self, sp_event};
use crate::ffi::owned;
use crate::ffi::spare;
use crate::ffi::status::sp_status;

/// A receiver's settings, filled in by the `sp_receiver_config_set_*` functions. Created by
/// `sp_receiver_config_new`, freed by `sp_receiver_config_free`. One thread at a time.
pub struct sp_receiver_config {
    pub(crate) config: ReceiverConfig,
}

/// A configured callback receiver. Created by `sp_receiver_new`, freed by `sp_receiver_free`.
/// Immutable: any number of threads may use one receiver at the same time. Events it returns
/// stay valid after it is freed.
pub struct sp_receiver {
    pub(crate) inner: Arc<Receiver>,
}

/// Creates a configuration with the defaults: no token (add one), sources `production`, no
/// trusted proxies, 64 KiB bodies, depth 32, identifiers up to 256 bytes, index field `index`
/// read leniently (an unreadable index leaves the event without one), unknown events passed through, balance wrapper `playerBalance` in `EUR`, `errorMessage: ""`
/// on success. On success `*out` owns the configuration; free it with `sp_receiver_config_free`.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_new(out: *mut *mut sp_receiver_config) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or writable.
        let out = unsafe { args::out("out", out) }?;
        out.write(owned::into_raw(sp_receiver_config { config: ReceiverConfig::default() }));
        Ok(())
    })
}

/// Frees a configuration. NULL is allowed and does nothing.
///
/// # Safety
/// `config` is NULL or came from `sp_receiver_config_new` and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_free(config: *mut sp_receiver_config) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<sp_receiver_config, _>(config) } })
}

/// Applies `change` to the configuration behind `config`.
unsafe fn configure(
    config: *mut sp_receiver_config,
    change: impl FnOnce(&mut ReceiverConfig) -> Result<()>,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or a live configuration it does not share.
        let config = unsafe { args::object_mut("config", config) }?;
        Ok(change(&mut config.config)?)
    })
}

/// Adds an accepted partner token (a UUID such as `6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f`). Add a
/// second one during a token rotation; at most two. Compared in constant time with the
/// `X-Service-Token` header of every callback.
///
/// # Safety
/// `config` is NULL or live; `token` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_add_token(
    config: *mut sp_receiver_config,
    token: *const c_char,
) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe { configure(config, |c| c.add_token(args::text("token", token)?)) }
}

/// Sets the allowed source addresses: `"any"`, or a comma-separated list of `staging`,
/// `production` (the spec's addresses), IPv4/IPv6 addresses and CIDR ranges. Default
/// `"production"`.
///
/// # Safety
/// `config` is NULL or live; `sources` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_set_sources(
    config: *mut sp_receiver_config,
    sources: *const c_char,
) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe { configure(config, |c| c.set_sources(args::text("sources", sources)?)) }
}

/// Sets the proxies (comma-separated addresses and CIDR ranges) whose `X-Forwarded-For` header
/// is believed; `""` for none (the default: forwarding headers are never trusted).
///
/// # Safety
/// `config` is NULL or live; `proxies` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_set_trusted_proxies(
    config: *mut sp_receiver_config,
    proxies: *const c_char,
) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe { configure(config, |c| c.set_trusted_proxies(args::text("trusted_proxies", proxies)?)) }
}

/// Sets the largest body accepted, in bytes (default 65536).
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_set_max_body_bytes(
    config: *mut sp_receiver_config,
    bytes: usize,
) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe { configure(config, |c| c.set_max_body_bytes(bytes)) }
}

/// Sets the deepest nesting accepted, 1 to 100, the top-level object being 1 (default 32).
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_set_max_depth(config: *mut sp_receiver_config, depth: usize) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe { configure(config, |c| c.set_max_depth(depth)) }
}

/// Sets the longest identifier or code accepted, in bytes (default 256).
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_set_max_identifier_bytes(
    config: *mut sp_receiver_config,
    bytes: usize,
) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe { configure(config, |c| c.set_max_identifier_bytes(bytes)) }
}

/// Sets the name of the service's consecutive event index field (default `"index"`; the spec
/// does not show it).
///
/// # Safety
/// `config` is NULL or live; `name` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_set_index_field(
    config: *mut sp_receiver_config,
    name: *const c_char,
) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe { configure(config, |c| c.set_index_field(args::text("index_field", name)?)) }
}

/// When `strict` is true, an event whose index field (see `sp_receiver_config_set_index_field`)
/// is present but not a non-negative integer is refused, naming the field (HTTP 200 with the
/// event's wrapper and `success` false). By default (false) such an event is handled with no
/// index: `has_index` false, `index_unreadable` true, the raw value readable with
/// `sp_event_field`. The spec shows neither the index's name nor its format, so a guess about it
/// never refuses money unless asked to.
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_set_strict_index(
    config: *mut sp_receiver_config,
    strict: bool,
) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |c| {
            c.set_strict_index(strict);
            Ok(())
        })
    }
}

/// When `reject` is true, events other than `gameSessionBuyRefund`, `jackpotPayout` and
/// `getPlayerBalance` fail with `SP_ERR_UNKNOWN_EVENT` (HTTP 400) instead of being passed
/// through as `SP_EVENT_KIND_OTHER` (the default).
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_set_reject_unknown_events(
    config: *mut sp_receiver_config,
    reject: bool,
) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |c| {
            c.set_reject_unknown_events(reject);
            Ok(())
        })
    }
}

/// Sets the wrapper key of balance replies (default `"playerBalance"`; the spec does not show
/// the balance reply).
///
/// # Safety
/// `config` is NULL or live; `wrapper` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_set_balance_wrapper(
    config: *mut sp_receiver_config,
    wrapper: *const c_char,
) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe { configure(config, |c| c.set_balance_wrapper(args::text("balance_wrapper", wrapper)?)) }
}

/// Sets the currency balance replies use when the caller names none (default `"EUR"`).
///
/// # Safety
/// `config` is NULL or live; `currency` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_set_balance_currency(
    config: *mut sp_receiver_config,
    currency: *const c_char,
) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe { configure(config, |c| c.set_balance_currency(args::text("balance_currency", currency)?)) }
}

/// Sets the HTTP status a refused balance query is answered with: 200, or an error status from
/// 400 to 599 (default 500, so that no client reads the answer as a wallet). The body states no
/// balance either way: `{"playerBalance":{"errorMessage":"..."}}`. After `sp_event_reply`,
/// `sp_event.reply_http_status` holds the status to send.
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_set_balance_failure_http_status(
    config: *mut sp_receiver_config,
    http_status: u16,
) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe { configure(config, |c| c.set_balance_failure_http_status(http_status)) }
}

/// Journals the deliveries of receivers made from this configuration: their events can be
/// claimed with `sp_event_begin`, and a body refused by validation whose index can be read is
/// recorded as seen and refused (not reported missing). The receiver keeps the journal open;
/// free `journal` whenever you like. Default: no journal.
///
/// # Safety
/// `config` is NULL or live; `journal` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_set_journal(
    config: *mut sp_receiver_config,
    journal: *const crate::ffi::journal::sp_journal,
) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe {
        configure(config, |c| {
            c.set_journal(std::sync::Arc::clone(&args::object("journal", journal)?.inner));
            Ok(())
        })
    }
}

/// When `omit` is true, successful replies leave `errorMessage` out instead of sending `""`
/// (the default, as existing integrations do).
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_config_set_omit_empty_error_message(
    config: *mut sp_receiver_config,
    omit: bool,
) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |c| {
            c.set_omit_empty_error_message(omit);
            Ok(())
        })
    }
}

/// Creates a receiver from `config` (which is copied: free it whenever you like). Fails with
/// `SP_ERR_INVALID_ARGUMENT` (field `token`) when no token was added. On success `*out` owns the
/// receiver; free it with `sp_receiver_free`.
///
/// # Safety
/// `config` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_new(config: *const sp_receiver_config, out: *mut *mut sp_receiver) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or live / writable pointers.
        let (config, out) = unsafe { (args::object("config", config)?, args::out("out", out)?) };
        let receiver = Receiver::new(config.config.clone())?;
        out.write(owned::into_raw(sp_receiver { inner: Arc::new(receiver) }));
        Ok(())
    })
}

/// Frees a receiver. NULL is allowed and does nothing. Events it returned stay valid.
///
/// # Safety
/// `receiver` is NULL or came from `sp_receiver_new`, is used by no other thread now and not
/// used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_free(receiver: *mut sp_receiver) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<sp_receiver, _>(receiver) } })
}

/// Handles one callback: checks the source address, then the token, then parses and validates
/// the body. `token` is the `X-Service-Token` header (NULL when absent), `remote_addr` the peer
/// address (CGI `REMOTE_ADDR`; not looked at under sources `any`; when not UTF-8 it is no
/// address, a refused source), `forwarded_for` the
/// `X-Forwarded-For` header as bytes (NULL when absent; read only when the peer is a trusted
/// proxy, ignored unread otherwise), `body`/`len` the raw body (not NUL-terminated).
///
/// On success `*out` owns the event: read its fields directly, answer with `sp_event_reply` or
/// `sp_event_reply_balance`, then free it with `sp_event_free`. On failure `*out` is not written;
/// `sp_last_error_response` gives the HTTP status and body to answer with.
///
/// # Safety
/// `receiver` is NULL or live; the strings are NULL or NUL-terminated; `body` is NULL (with `len`
/// 0) or points to `len` readable bytes; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_handle(
    receiver: *const sp_receiver,
    token: *const c_char,
    remote_addr: *const c_char,
    forwarded_for: *const c_char,
    body: *const u8,
    len: usize,
    out: *mut *mut sp_event,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (receiver, out, request) = unsafe {
            let receiver = &args::object("receiver", receiver)?.inner;
            let out = args::out("out", out)?;
            (receiver, out, request(token, remote_addr, forwarded_for, body, len)?)
        };
        let parsed = receiver.handle_with(&request, spare::take());
        deliver(receiver, parsed, out)
    })
}

/// Checks the source address, then the token, of a callback, as `sp_receiver_handle` does
/// first, without its body: nothing is parsed and the receiver's journal is not touched. A host
/// calls it before it opens a journal (a process per request, such as CGI or PHP-FPM), so that a
/// caller without the token never makes it connect to the journal's storage: then it opens the
/// journal and handles the callback with a receiver that has it. The arguments are those of
/// `sp_receiver_handle`.
///
/// Fails as `sp_receiver_handle` fails for the same request: `SP_ERR_MISSING_TOKEN`,
/// `SP_ERR_WRONG_TOKEN` (HTTP 401), `SP_ERR_FORBIDDEN_SOURCE` (403); `sp_last_error_response`
/// gives the HTTP status and body to answer with.
///
/// # Safety
/// `receiver` is NULL or live; the strings are NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_authenticate(
    receiver: *const sp_receiver,
    token: *const c_char,
    remote_addr: *const c_char,
    forwarded_for: *const c_char,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented; no body.
        let (receiver, request) = unsafe {
            let receiver = &args::object("receiver", receiver)?.inner;
            (receiver, request(token, remote_addr, forwarded_for, std::ptr::null(), 0)?)
        };
        receiver.authenticate(&request).map_err(|error| refused(receiver, error))
    })
}

/// The request of a callback from the C arguments of `sp_receiver_handle`.
///
/// # Safety
/// The strings are NULL or NUL-terminated; `body` is NULL (with `len` 0) or points to `len`
/// readable bytes; all outlive `'a`.
pub(crate) unsafe fn request<'a>(
    token: *const c_char,
    remote_addr: *const c_char,
    forwarded_for: *const c_char,
    body: *const u8,
    len: usize,
) -> Result<Request<'a>> {
    // SAFETY: forwarded caller promises.
    unsafe {
        Ok(Request {
            token: args::opt_bytes_z(token),
            remote_addr: args::opt_bytes_z(remote_addr),
            forwarded_for: args::opt_bytes_z(forwarded_for),
            body: args::bytes("body", body, len)?,
        })
    }
}

/// Hands a parsed event to `out`, or turns the error into a failure with the receiver's answer.
fn deliver(
    receiver: &Arc<Receiver>,
    parsed: Result<crate::callback::event::Event<'_>>,
    out: args::Out<'_, *mut sp_event>,
) -> std::result::Result<(), Failure> {
    match parsed {
        // Read where it lies: moved out of `parsed`, the event was copied first (about 300 bytes).
        Ok(ref parsed) => out.write(event::into_raw(parsed, receiver)),
        Err(error) => return Err(refused(receiver, error)),
    };
    if let Ok(crate::callback::event::Event { extra, .. }) = parsed {
        spare::put_back(extra);
    }
    Ok(())
}

/// A refused callback as a failure carrying the receiver's answer to it (HTTP status and body).
pub(crate) fn refused(receiver: &Receiver, error: crate::error::Error) -> Failure {
    let response = Some(receiver.error_response(&error));
    Failure { error, response }
}

/// Parses and validates a body without checking source or token (for tools and tests). Owns and
/// answers like `sp_receiver_handle`.
///
/// # Safety
/// As for `sp_receiver_handle`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_parse(
    receiver: *const sp_receiver,
    body: *const u8,
    len: usize,
    out: *mut *mut sp_event,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (receiver, out, body) = unsafe {
            (&args::object("receiver", receiver)?.inner, args::out("out", out)?, args::bytes("body", body, len)?)
        };
        let parsed = receiver.parse(body);
        deliver(receiver, parsed, out)
    })
}
