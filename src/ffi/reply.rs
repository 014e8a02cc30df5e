//! Reply bodies built without an event: `sp_reply_result_new` for any wrapper key and
//! `sp_reply_balance_new`, each handing out an `sp_buffer` freed with `sp_buffer_free`.

use std::ffi::c_char;

use crate::callback::reply;
use crate::ffi::args;
use crate::ffi::owned;
use crate::ffi::status::sp_status;
use crate::ffi::str::sp_str;

/// A reply body the library allocated. `text` views it (NUL-terminated) until `sp_buffer_free`.
/// One thread at a time.
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

/// Frees a buffer. NULL is allowed and does nothing.
///
/// # Safety
/// `buffer` is NULL or came from an `sp_reply_*_new` function and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_buffer_free(buffer: *mut sp_buffer) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<BufferBox, _>(buffer) } })
}
