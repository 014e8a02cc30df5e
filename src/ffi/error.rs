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

use crate::callback::response::{self, Response};
use crate::error::Error;
use crate::ffi::args;
use crate::ffi::status::sp_status;
use crate::ffi::str::sp_str;

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
    status: sp_status,
    message: CText,
    field: CText,
    http_status: u16,
    body: CText,
    event_name: Option<CText>,
    index: Option<i64>,
    transaction_id: Option<i64>,
}

/// The whole last failure of the calling thread, from `sp_last_error`. Every view is valid like
/// `sp_last_error_message`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_error {
    /// What the failed call returned.
    pub status: sp_status,
    /// As `sp_last_error_message`.
    pub message: sp_str,
    /// As `sp_last_error_field`.
    pub field: sp_str,
    /// As `sp_last_error_response`: the HTTP status and JSON body an endpoint should answer.
    pub http_status: u16,
    pub response_body: sp_str,
    /// For a refused callback body: the event's name (`event`, or `action`) as far as the body
    /// let it be read; `{NULL, 0}` when it could not be, and for every other failure.
    pub event_name: sp_str,
    /// The event's index, when the refused body carried a readable one.
    pub has_index: bool,
    pub index: i64,
    /// The event's `transactionId`, when the refused body carried a readable one.
    pub has_transaction_id: bool,
    pub transaction_id: i64,
}

impl_zero_padded!(sp_error {
    status,
    message,
    field,
    http_status,
    response_body,
    event_name,
    has_index,
    index,
    has_transaction_id,
    transaction_id
});

thread_local! {
    static LAST_ERROR: RefCell<Option<LastError>> = const { RefCell::new(None) };
}

/// `s` as a C string; a NUL inside (none is expected) becomes U+FFFD rather than cutting it short.
fn c_string(s: String) -> CText {
    let mut bytes = if s.contains('\0') { s.replace('\0', "\u{FFFD}") } else { s }.into_bytes();
    bytes.push(0);
    CText(bytes)
}

/// A NUL-terminated string kept in a `Vec`, not a `CString`: a `CString` is a `Box`, and moving
/// a `Box` (as taking the last error out of its slot does) asserts that nothing else points
/// into it, which the views handed to C do.
pub struct CText(Vec<u8>);

impl CText {
    fn view(&self) -> sp_str {
        sp_str::of_nul_terminated(&self.0)
    }
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
    let ids = error.ids.as_deref();
    let last = LastError {
        status: sp_status::from(error.kind),
        message: c_string(error.message.clone()),
        field: c_string(error.field.clone()),
        http_status: response.http_status,
        body: c_string(response.body),
        event_name: ids.and_then(|ids| ids.name.clone()).map(c_string),
        index: ids.and_then(|ids| ids.index),
        transaction_id: ids.and_then(|ids| ids.transaction_id),
    };
    let status = last.status;
    store(last);
    status
}

/// Records a caught panic and returns `SP_ERR_PANIC`.
pub fn record_panic() -> sp_status {
    let last = LastError {
        status: sp_status::SP_ERR_PANIC,
        message: c_string("internal error: the library panicked; the call had no effect".to_owned()),
        field: c_string(String::new()),
        http_status: 500,
        body: c_string(r#"{"error":{"code":"internal_error","field":"","message":"internal error"}}"#.to_owned()),
        event_name: None,
        index: None,
        transaction_id: None,
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
    value_boundary!(sp_str::from_static(c""), { read(|e| e.message.view()) })
}

/// The field of the last failure on this thread, such as `jackpotPayout.moneyWon`, or a
/// configuration or argument name; empty when the failure concerns no single field or the last
/// call succeeded. Valid like `sp_last_error_message`.
#[unsafe(no_mangle)]
pub extern "C" fn sp_last_error_field() -> sp_str {
    value_boundary!(sp_str::from_static(c""), { read(|e| e.field.view()) })
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
            e.body.view()
        });
        if http == 0 {
            return sp_status::SP_ERR_INVALID_ARGUMENT;
        }
        status_out.write(http);
        body_out.write(body);
        sp_status::SP_OK
    })
}

/// The whole last failure of the calling thread in one call: its status, message, field, HTTP
/// answer, and for a refused callback body the event's name, index and `transactionId` as far as
/// the body let them be read (so that a host can log which delivery it refused). Writes `*out`
/// and returns `SP_OK`; writes nothing and returns `SP_ERR_INVALID_ARGUMENT` when the last call
/// succeeded. The views are valid like `sp_last_error_message`. Does not clear the last error.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_last_error(out: *mut sp_error) -> sp_status {
    value_boundary!(sp_status::SP_ERR_PANIC, {
        // SAFETY: the caller promises NULL or a writable pointer.
        let Ok(out) = (unsafe { args::out("out", out) }) else {
            return sp_status::SP_ERR_INVALID_ARGUMENT;
        };
        let view = CText::view;
        let whole = LAST_ERROR.try_with(|last| {
            last.try_borrow().ok()?.as_ref().map(|e| sp_error {
                status: e.status,
                message: e.message.view(),
                field: e.field.view(),
                http_status: e.http_status,
                response_body: e.body.view(),
                event_name: e.event_name.as_ref().map_or(sp_str::NONE, view),
                has_index: e.index.is_some(),
                index: e.index.unwrap_or(0),
                has_transaction_id: e.transaction_id.is_some(),
                transaction_id: e.transaction_id.unwrap_or(0),
            })
        });
        match whole.ok().flatten() {
            Some(error) => {
                out.write_zero_padded(error);
                sp_status::SP_OK
            }
            None => sp_status::SP_ERR_INVALID_ARGUMENT,
        }
    })
}
