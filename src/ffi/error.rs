//! The calling thread's last failure: `sp_last_error_message`, `sp_last_error_field` and
//! `sp_last_error_response`. Every other status-returning call replaces it: it returns with the
//! last error cleared when it succeeds and set when it fails; these three accessors and
//! `sp_status_name` read it without clearing it, so all of them may be read, in any order, for
//! one failure.
//!
//! **Lifetime** (the one rule every view of the last error follows): a view returned by these
//! accessors stays valid until the next status-returning `sp_` call on the same thread
//! *returns*, so it may be handed to that very call as an argument (for instance
//! `sp_event_reply(ev, false, sp_last_error_message().ptr, &out)`), or until the thread exits.
//!
//! Every access to the thread-local slot goes through `try_with`, so calls from a thread that is
//! being torn down (a `pthread_key_create` destructor runs after Rust's thread-locals are gone)
//! neither panic nor abort: they work, only without a last error to read.

use std::cell::RefCell;
use std::ffi::CString;

use crate::error::Error;
use crate::ffi::args;
use crate::ffi::status::sp_status;
use crate::ffi::str::sp_str;
use crate::response::{self, Response};

/// A failed call: the error and, when the caller knows better than the generic mapping (a
/// receiver knows the event's wrapper), the answer an endpoint should give.
pub struct Failure {
    pub error: Error,
    pub response: Option<Response>,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure { error, response: None }
    }
}

/// One recorded failure, as C strings the accessors view.
pub struct LastError {
    message: CString,
    field: CString,
    http_status: u16,
    body: CString,
}

thread_local! {
    static LAST_ERROR: RefCell<Option<LastError>> = const { RefCell::new(None) };
}

/// `s` as a C string; a NUL inside (none is expected) becomes U+FFFD rather than cutting it short.
fn c_string(s: String) -> CString {
    CString::new(s).unwrap_or_else(|e| {
        let cleaned = String::from_utf8_lossy(&e.into_vec()).replace('\0', "\u{FFFD}");
        CString::new(cleaned).unwrap_or_default()
    })
}

/// Takes the thread's last error out of its slot, leaving none. The caller keeps it alive until
/// its call returns (see the lifetime rule above). `None` also when the thread is exiting.
pub fn take() -> Option<LastError> {
    LAST_ERROR.try_with(|last| last.try_borrow_mut().ok().and_then(|mut slot| slot.take())).ok().flatten()
}

/// Stores `last` as the thread's last error; does nothing on a thread being torn down.
fn store(last: LastError) {
    let _ = LAST_ERROR.try_with(|slot| slot.try_borrow_mut().map(|mut s| *s = Some(last)));
}

/// Records `error` as the thread's last failure, with the answer an endpoint should give (by
/// default the generic mapping of its kind), and returns its status.
pub fn record(error: &Error, response: Option<Response>) -> sp_status {
    let response = response.unwrap_or_else(|| response::error_body(error));
    let last = LastError {
        message: c_string(error.message.clone()),
        field: c_string(error.field.clone()),
        http_status: response.http_status,
        body: c_string(response.body),
    };
    store(last);
    sp_status::from(error.kind)
}

/// Records a caught panic and returns `SP_ERR_PANIC`.
pub fn record_panic() -> sp_status {
    let last = LastError {
        message: c"internal error: the library panicked; the call had no effect".to_owned(),
        field: CString::default(),
        http_status: 500,
        body: c_string(r#"{"error":{"code":"internal_error","field":"","message":"internal error"}}"#.to_owned()),
    };
    store(last);
    sp_status::SP_ERR_PANIC
}

/// What `pick` views of the last error, or `""` when there is none (or the thread is exiting).
fn read(pick: impl FnOnce(&LastError) -> sp_str) -> sp_str {
    let picked = LAST_ERROR.try_with(|last| last.try_borrow().ok().and_then(|e| e.as_ref().map(pick)));
    picked.ok().flatten().unwrap_or(sp_str::from_static(c""))
}

/// The message of the last failure on this thread, such as
/// `jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5`; empty when the last
/// call succeeded. Valid until the next status-returning `sp_` call on this thread returns (so it
/// may be passed to that call), or until the thread exits; the accessors do not clear it.
#[unsafe(no_mangle)]
pub extern "C" fn sp_last_error_message() -> sp_str {
    value_boundary!(sp_str::from_static(c""), { read(|e| sp_str::of_nul_terminated(e.message.as_bytes_with_nul())) })
}

/// The field of the last failure on this thread, such as `jackpotPayout.moneyWon`, or a
/// configuration or argument name; empty when the failure concerns no single field or the last
/// call succeeded. Valid like `sp_last_error_message`.
#[unsafe(no_mangle)]
pub extern "C" fn sp_last_error_field() -> sp_str {
    value_boundary!(sp_str::from_static(c""), { read(|e| sp_str::of_nul_terminated(e.field.as_bytes_with_nul())) })
}

/// The answer an HTTP endpoint should give for the last failure on this thread: the HTTP status
/// and the JSON body. After `sp_receiver_handle` fails on a known event with invalid fields, this
/// is HTTP 200 with the event's wrapper, `success` false and the field-naming message; after
/// other refusals it is 401, 403, 413 or 400, and 500 for a bad argument or a panic, with
/// `{"error":{"code","field","message"}}`; after a failed call to the service (`sp_client_*`),
/// 502, or 504 for a time-out, should a host relay it.
/// Writes nothing and returns `SP_ERR_INVALID_ARGUMENT` when the last call succeeded. The body
/// is valid like `sp_last_error_message`. Does not clear the last error.
///
/// # Safety
/// `http_status` and `body` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_last_error_response(http_status: *mut u16, body: *mut sp_str) -> sp_status {
    value_boundary!(sp_status::SP_ERR_PANIC, {
        // SAFETY: the caller promises NULL or writable pointers.
        let (Ok(status_out), Ok(body_out)) =
            (unsafe { args::out("http_status", http_status) }, unsafe { args::out("body", body) })
        else {
            return sp_status::SP_ERR_INVALID_ARGUMENT;
        };
        let mut http = 0u16;
        let body = read(|e| {
            http = e.http_status;
            sp_str::of_nul_terminated(e.body.as_bytes_with_nul())
        });
        if http == 0 {
            return sp_status::SP_ERR_INVALID_ARGUMENT;
        }
        status_out.write(http);
        body_out.write(body);
        sp_status::SP_OK
    })
}
