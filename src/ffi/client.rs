//! The client of the service's action address: `sp_client_config_*` to configure it once,
//! `sp_client_new`, then `sp_client_get_games` and `sp_client_call` from any thread.

use std::ffi::c_char;
use std::time::Duration;

use crate::client::{Client, ClientConfig, TrustRoots};
use crate::error::{Error, ErrorKind, Result};
use crate::ffi::args;
use crate::ffi::games::{self, sp_games};
use crate::ffi::owned;
use crate::ffi::reply::{self, sp_buffer};
use crate::ffi::status::sp_status;

/// Which certificate authorities a client trusts besides extra ones (values for
/// `sp_client_config_set_trust_roots`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum sp_trust_roots {
    /// Mozilla's root certificates, bundled in the library (the default).
    SP_TRUST_ROOTS_BUNDLED = 0,
    /// The operating system's certificate store.
    SP_TRUST_ROOTS_SYSTEM = 1,
    /// Only the certificates added with `sp_client_config_add_ca_*`.
    SP_TRUST_ROOTS_EXTRA_ONLY = 2,
}

/// A client's settings. Created by `sp_client_config_new`, freed by `sp_client_config_free`.
/// One thread at a time.
pub struct sp_client_config {
    config: ClientConfig,
}

/// A client of the service. Created by `sp_client_new`, freed by `sp_client_free`. Immutable
/// and thread-safe: share one client among all threads; it keeps connections alive between
/// calls.
pub struct sp_client {
    pub(crate) client: Client,
}

/// Creates a configuration for the service at `base_url` (`https://` only: an `http://` URL is
/// refused here, before any connection, because the token would travel in clear) with the
/// partner `token` (a UUID). Defaults: connect time-out 5000 ms, overall time-out 15000 ms,
/// 2 retries of `getGames` after 200 ms then 400 ms, bundled Mozilla roots, no proxy (the
/// environment is never consulted), answers up to 8 MiB, strict games. On success `*out` owns
/// the configuration; free it with `sp_client_config_free`.
///
/// # Safety
/// The strings are NULL or NUL-terminated; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_new(
    base_url: *const c_char,
    token: *const c_char,
    out: *mut *mut sp_client_config,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers.
        let (base_url, token, out) =
            unsafe { (args::text("base_url", base_url)?, args::text("token", token)?, args::out("out", out)?) };
        let config = ClientConfig::new(base_url, token)?;
        out.write(owned::into_raw(sp_client_config { config }));
        Ok(())
    })
}

/// Frees a configuration. NULL is allowed and does nothing.
///
/// # Safety
/// `config` is NULL or came from `sp_client_config_new` and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_free(config: *mut sp_client_config) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<sp_client_config, _>(config) } })
}

/// Applies `change` to the configuration behind `config`.
unsafe fn configure(config: *mut sp_client_config, change: impl FnOnce(&mut ClientConfig) -> Result<()>) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or a live configuration it does not share.
        let config = unsafe { args::object_mut("config", config) }?;
        Ok(change(&mut config.config)?)
    })
}

/// Sets the time allowed to open a connection (TCP and TLS), in milliseconds (at least 1).
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_set_connect_timeout_ms(config: *mut sp_client_config, ms: u64) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe { configure(config, |c| c.set_connect_timeout(Duration::from_millis(ms))) }
}

/// Sets the time allowed for a whole call, answer included, in milliseconds (at least 1).
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_set_timeout_ms(config: *mut sp_client_config, ms: u64) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe { configure(config, |c| c.set_timeout(Duration::from_millis(ms))) }
}

/// Sets how often `getGames` is tried again (0 to 10) after a connection failure, a time-out or
/// a 5xx answer, waiting `backoff_ms`, then twice as long each time. `sp_client_call` is never
/// retried: an action may not be safe to repeat.
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_set_retries(
    config: *mut sp_client_config,
    retries: u32,
    backoff_ms: u64,
) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe { configure(config, |c| c.set_retries(retries, Duration::from_millis(backoff_ms))) }
}

/// Sets which roots to trust besides extra certificates: an `sp_trust_roots` value.
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_set_trust_roots(config: *mut sp_client_config, roots: i32) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |c| {
            c.set_trust_roots(match roots {
                0 => TrustRoots::Bundled,
                1 => TrustRoots::System,
                2 => TrustRoots::ExtraOnly,
                other => {
                    let problem = format!("expected an sp_trust_roots value (0, 1 or 2), got {other}");
                    return Err(Error::field(ErrorKind::InvalidArgument, "roots", problem));
                }
            });
            Ok(())
        })
    }
}

/// Trusts the CA certificates in the PEM text `pem` (`len` bytes) as well.
///
/// # Safety
/// `config` is NULL or live; `pem` is NULL (with `len` 0) or `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_add_ca_pem(
    config: *mut sp_client_config,
    pem: *const u8,
    len: usize,
) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe { configure(config, |c| c.add_ca_pem(args::bytes("pem", pem, len)?)) }
}

/// Trusts the CA certificates in the PEM file at `path` as well.
///
/// # Safety
/// `config` is NULL or live; `path` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_add_ca_file(config: *mut sp_client_config, path: *const c_char) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe { configure(config, |c| c.add_ca_file(args::text("path", path)?)) }
}

/// Sends requests through the proxy at `url` (`http://host:port` or `socks5://host:port`, with
/// optional `user:password@`); NULL for a direct connection (the default).
///
/// # Safety
/// `config` is NULL or live; `url` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_set_proxy(config: *mut sp_client_config, url: *const c_char) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe { configure(config, |c| c.set_proxy(args::opt_text("url", url)?)) }
}

/// Sets the largest answer body accepted, in bytes (at least 1024; default 8 MiB).
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_set_max_response_bytes(
    config: *mut sp_client_config,
    bytes: u64,
) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe { configure(config, |c| c.set_max_response_bytes(bytes)) }
}

/// Sets the operation that fetches a lost event again, sent as `action` (default `"getEvent"`;
/// the spec does not show it).
///
/// # Safety
/// `config` is NULL or live; `action` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_set_fetch_action(
    config: *mut sp_client_config,
    action: *const c_char,
) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe { configure(config, |c| c.set_fetch_action(args::text("fetch_action", action)?)) }
}

/// Sets the parameter that carries the lost event's index in the fetch request (default
/// `"index"`; the spec does not show it).
///
/// # Safety
/// `config` is NULL or live; `name` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_set_fetch_index_param(
    config: *mut sp_client_config,
    name: *const c_char,
) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe { configure(config, |c| c.set_fetch_index_param(args::text("fetch_index_param", name)?)) }
}

/// Sets the key of the fetch answer that holds the event (default `"event"`, for
/// `{"event":{...}}`); `""` when the answer is the event itself.
///
/// # Safety
/// `config` is NULL or live; `key` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_set_fetch_event_key(
    config: *mut sp_client_config,
    key: *const c_char,
) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe { configure(config, |c| c.set_fetch_event_key(args::text("fetch_event_key", key)?)) }
}

/// When `lenient` is true, a game missing a field of spec 2.1 gets the field's empty value
/// instead of failing the call (the spec does not show which fields are required; the default
/// requires them all).
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_config_set_lenient_games(config: *mut sp_client_config, lenient: bool) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |c| {
            c.set_lenient_games(lenient);
            Ok(())
        })
    }
}

/// Creates a client from `config` (which is copied: free it whenever you like). No connection is
/// opened yet. On success `*out` owns the client; free it with `sp_client_free`.
///
/// # Safety
/// `config` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_new(config: *const sp_client_config, out: *mut *mut sp_client) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers.
        let (config, out) = unsafe { (args::object("config", config)?, args::out("out", out)?) };
        let client = Client::new(config.config.clone())?;
        out.write(owned::into_raw(sp_client { client }));
        Ok(())
    })
}

/// Frees a client and closes its connections. NULL is allowed and does nothing.
///
/// # Safety
/// `client` is NULL or came from `sp_client_new`, is used by no other thread now and not used
/// afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_free(client: *mut sp_client) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<sp_client, _>(client) } })
}

/// Calls `getGames` in `locale` (`"en-US"`; `"en_US"` is sent as `"en-US"`; anything else is
/// refused before any connection), for the game `game_id`, or for all games when `game_id` is
/// negative. On success `*out` owns the games; free them with `sp_games_free`. Fails with
/// `SP_ERR_HTTP_STATUS` (status and start of the body in the message), `SP_ERR_BAD_RESPONSE`
/// (the field named), `SP_ERR_TIMEOUT`, `SP_ERR_TLS`, `SP_ERR_CONNECT` or
/// `SP_ERR_RESPONSE_TOO_LARGE`. Blocks for up to the time-out times the tries.
///
/// # Safety
/// `client` is NULL or live; `locale` is NULL or NUL-terminated; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_get_games(
    client: *const sp_client,
    locale: *const c_char,
    game_id: i64,
    out: *mut *mut sp_games,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers.
        let (client, locale, out) =
            unsafe { (args::object("client", client)?, args::text("locale", locale)?, args::out("out", out)?) };
        let games = client.client.get_games(locale, (game_id >= 0).then_some(game_id))?;
        out.write(games::into_raw(&games));
        Ok(())
    })
}

/// Calls any `action` with `params`, the JSON text (`len` bytes) of an object of its parameters
/// (NULL for none), sent as `{"action":<action>, ...params}`: how to reach operations the spec
/// does not show. Not retried. On success `*out` owns the answer body (JSON); free it with
/// `sp_buffer_free`. Fails like `sp_client_get_games`.
///
/// # Safety
/// `client` is NULL or live; `action` is NULL or NUL-terminated; `params` is NULL (with `len` 0)
/// or `len` readable bytes; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_client_call(
    client: *const sp_client,
    action: *const c_char,
    params: *const u8,
    len: usize,
    out: *mut *mut sp_buffer,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers.
        let (client, action, params, out) = unsafe {
            (
                args::object("client", client)?,
                args::text("action", action)?,
                args::bytes("params", params, len)?,
                args::out("out", out)?,
            )
        };
        let params = if params.is_empty() { "{}" } else { args::utf8("params", params)? };
        let answer = client.client.call(action, params)?;
        out.write(reply::into_raw(answer));
        Ok(())
    })
}
