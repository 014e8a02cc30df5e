//! Reply bodies built without an event: `sp_reply_result_new` for any wrapper key and
//! `sp_reply_balance_new`, each handing out an `sp_buffer` freed with `sp_buffer_free`; and
//! `sp_receiver_reply_balance`, a receiver's successful balance reply written into the caller's
//! own buffer.

use std::ffi::c_char;

use crate::callback::reply;
use crate::error::{Error, ErrorKind};
use crate::ffi::args;
use crate::ffi::owned;
use crate::ffi::receiver::sp_receiver;
use crate::ffi::status::sp_status;
use crate::ffi::str::sp_str;

/// A reply body (or a JSON report) the library allocated. `text` views it (NUL-terminated) until
/// `sp_buffer_free`. One thread at a time.
#[repr(C)]
#[derive(Debug)]
pub struct sp_buffer {
    pub text: sp_str,
}

/// The allocation behind an `sp_buffer` pointer: the public struct first, then the bytes.
#[repr(C)]
struct BufferBox {
    view: sp_buffer,
    bytes: Vec<u8>,
}

/// Hands out `text` as a buffer the caller frees with `sp_buffer_free`.
pub(crate) fn into_raw(text: String) -> *mut sp_buffer {
    let mut bytes = text.into_bytes();
    bytes.push(0);
    let view = sp_buffer { text: sp_str::of_nul_terminated(&bytes) };
    owned::into_raw::<BufferBox, _>(BufferBox { view, bytes })
}

/// Builds `{"<wrapper>":{"success":<success>,"errorMessage":"<message>"}}` for any wrapper key
/// (`refund`, `payout`, or one the spec does not show). `message` must be NULL or empty when
/// `success` is true and must explain the failure when it is false; it is JSON-escaped. When
/// `omit_empty_message` is true a success leaves `errorMessage` out. On success `*out` owns the
/// buffer; free it with `sp_buffer_free`.
///
/// # Safety
/// `wrapper` and `message` are NULL or NUL-terminated; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_reply_result_new(
    wrapper: *const c_char,
    success: bool,
    message: *const c_char,
    omit_empty_message: bool,
    out: *mut *mut sp_buffer,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (wrapper, message, out) =
            unsafe { (args::text("wrapper", wrapper)?, args::opt_text("message", message)?, args::out("out", out)?) };
        let text = reply::result(wrapper, success, message.unwrap_or(""), omit_empty_message)?;
        out.write(into_raw(text));
        Ok(())
    })
}

/// Builds `{"<wrapper>":{"money":<money>,"currencyISO4217":"<currency>","coins":<coins>,"errorMessage":""}}`
/// (the balance reply shape existing integrations use) when `error_message` is NULL or empty;
/// `money` and `coins` must then be 0 to 2^53-1, `currency` three uppercase letters. A
/// non-empty `error_message` builds a failure that states no balance (a `"money":0` could show
/// the player an empty wallet): `{"<wrapper>":{"errorMessage":"<error_message>"}}`, with
/// `money`, `currency` and `coins` unused; send it with an error status (the receiver uses 500
/// by default). On success `*out` owns the buffer; free it with `sp_buffer_free`.
///
/// # Safety
/// The strings are NULL or NUL-terminated; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_reply_balance_new(
    wrapper: *const c_char,
    money: i64,
    currency: *const c_char,
    coins: i64,
    error_message: *const c_char,
    out: *mut *mut sp_buffer,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (wrapper, currency, error_message, out) = unsafe {
            (
                args::text("wrapper", wrapper)?,
                args::text("currency", currency)?,
                args::opt_text("error_message", error_message)?,
                args::out("out", out)?,
            )
        };
        let text = reply::balance(wrapper, money, currency, coins, error_message.unwrap_or(""))?;
        out.write(into_raw(text));
        Ok(())
    })
}

/// Writes the successful reply to a balance query into the caller's buffer `out` of `capacity`
/// bytes, NUL-terminated, as `sp_event_reply_balance` builds it from the receiver's settings:
/// `{"playerBalance":{"money":<money>,"currencyISO4217":"<currency>","coins":<coins>,"errorMessage":""}}`
/// (wrapper and default currency as configured; `currency` NULL for the configured one; `money`
/// in minor units; `money` and `coins` 0 to 2^53-1). For hosts reading events through
/// `sp_receiver_handle_record`: no allocation, nothing to free. A failure reply, which states no
/// balance, comes from `sp_reply_balance_new` with an error message.
///
/// `*len` (when `len` is not NULL) gets the reply's length without its NUL, on success and when
/// `capacity` is too small alike: the buffer needs `*len + 1` bytes. A reply never takes more
/// than 99 bytes plus twice the length of the configured wrapper, its NUL included. A smaller
/// buffer fails with `SP_ERR_INVALID_ARGUMENT` (field `capacity`) and nothing is written into
/// it; so do NULL `out` (field `out`) and invalid amounts or currency (fields `money`, `coins`,
/// `currency`). Nothing past the reply's NUL is written, whatever `capacity` says. `currency`
/// is read before anything is written: it may lie inside `out`.
///
/// # Safety
/// `receiver` is NULL or live; `currency` is NULL or NUL-terminated (it may lie inside `out`);
/// `out` is NULL or points to `capacity` writable bytes that no other thread uses during the
/// call; `len` is NULL or writable (it may lie inside `out`, past the reply).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_receiver_reply_balance(
    receiver: *const sp_receiver,
    money: i64,
    currency: *const c_char,
    coins: i64,
    out: *mut c_char,
    capacity: usize,
    len: *mut usize,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (receiver, currency) =
            unsafe { (&args::object("receiver", receiver)?.inner, args::opt_text("currency", currency)?) };
        if out.is_null() {
            return Err(args::null("out").into());
        }
        let balance = receiver.checked_balance(money, currency, coins)?;
        let (mut money_digits, mut coins_digits) = (itoa::Buffer::new(), itoa::Buffer::new());
        let pieces = balance.pieces(&mut money_digits, &mut coins_digits);
        let reply_len: usize = pieces.iter().map(|piece| piece.len()).sum();
        // `*len` is written last: a careless host's `len` may point into `out`.
        let report_len = || {
            if !len.is_null() {
                // SAFETY: the caller promises NULL or a writable size_t.
                unsafe { len.write(reply_len) };
            }
        };
        if capacity <= reply_len {
            report_len();
            let problem = format!("is {capacity} bytes; this reply needs {} with its NUL", reply_len + 1);
            return Err(Error::field(ErrorKind::InvalidArgument, "capacity", problem).into());
        }
        // SAFETY: `out` is non-NULL and (the caller promises) `capacity > reply_len` writable
        // bytes nothing else uses; the pieces are the receiver's, on this stack, or copied here.
        unsafe {
            let mut at = out.cast::<u8>();
            for piece in pieces {
                std::ptr::copy_nonoverlapping(piece.as_ptr(), at, piece.len());
                at = at.add(piece.len());
            }
            at.write(0);
        }
        report_len();
        Ok(())
    })
}

/// Frees a buffer. NULL is allowed and does nothing.
///
/// # Safety
/// `buffer` is NULL or came from an `sp_reply_*_new` function or `sp_journal_report` and is not
/// used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_buffer_free(buffer: *mut sp_buffer) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<BufferBox, _>(buffer) } })
}
