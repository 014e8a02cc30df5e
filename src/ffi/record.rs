//! `sp_receiver_handle_record`: a callback handled into the caller's own buffer, for hosts that
//! pay for every crossing and every read of a field (PHP, Python). One call and no allocation
//! the host must free: the event's numbers in one fixed header (`sp_record`), its strings right
//! after it, in the order of `sp_event.strings`.

use std::ffi::{c_char, c_void};
use std::mem::{align_of, size_of};

use crate::callback::event::{Event, EventKind};
use crate::callback::receiver::Request;
use crate::error::{Error, ErrorKind};
use crate::ffi::args;
use crate::ffi::event::{block_len, for_each_block_string, kind_of, sp_event_kind};
use crate::ffi::receiver::{refused, request, sp_receiver};
use crate::ffi::spare;
use crate::ffi::status::sp_status;

/// The header of a record written by `sp_receiver_handle_record`: every number and flag of the
/// event, with `strings_len` bytes of strings right after it (at
/// `(const uint8_t *)record + sizeof(sp_record)`), laid out as `sp_event.strings` describes: the
/// six typed string slots (refund 5, payout 6, balance query 2, in the order of the typed
/// structs; unused and absent ones empty), then each extra field's name and raw JSON, then the
/// event's name, each followed by a NUL byte. Splitting them at NUL bytes gives
/// 6 + 2 × `extra_fields_len` + 1 strings (and an empty one after the last NUL).
///
/// The numbers of another kind's struct are 0 and its flags false. The record belongs to the
/// caller's buffer: the library keeps no pointer into it and nothing in it is to be freed.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_record {
    /// Bytes written: this header and the strings after it.
    pub size: usize,
    /// Bytes of strings after the header, their NULs included.
    pub strings_len: usize,
    /// How many extra fields (name and raw JSON, as `sp_event.extra_fields`) the strings hold.
    pub extra_fields_len: usize,
    pub kind: sp_event_kind,
    /// As in `sp_event`.
    pub has_index: bool,
    pub index_unreadable: bool,
    /// Whether `is_mobile` says something: always for a refund, when the body states it for a
    /// payout, never for the other kinds.
    pub has_is_mobile: bool,
    pub is_mobile: bool,
    pub index: i64,
    /// Refund and payout.
    pub transaction_id: i64,
    pub buy_transaction_id: i64,
    pub game_session_id: i64,
    pub game_id: i64,
    /// Payout only: `money_won` in minor units; amounts are 0 to 2^53-1.
    pub money_won: i64,
    pub coins_won: i64,
    pub epoch_released_millis: i64,
    pub is_money: bool,
    pub is_primary: bool,
}

/// The header of `event`'s record of `size` bytes, `strings_len` of them strings.
fn header(event: &Event<'_>, size: usize, strings_len: usize) -> sp_record {
    let mut record = sp_record {
        size,
        strings_len,
        extra_fields_len: event.extra.len(),
        kind: kind_of(&event.kind),
        has_index: event.index.is_some(),
        index_unreadable: event.index_unreadable,
        has_is_mobile: false,
        is_mobile: false,
        index: event.index.unwrap_or(0),
        transaction_id: 0,
        buy_transaction_id: 0,
        game_session_id: 0,
        game_id: 0,
        money_won: 0,
        coins_won: 0,
        epoch_released_millis: 0,
        is_money: false,
        is_primary: false,
    };
    match &event.kind {
        EventKind::BuyRefund(r) => {
            (record.transaction_id, record.buy_transaction_id) = (r.transaction_id, r.buy_transaction_id);
            (record.game_session_id, record.game_id) = (r.game_session_id, r.game_id);
            (record.has_is_mobile, record.is_mobile) = (true, r.is_mobile);
        }
        EventKind::JackpotPayout(p) => {
            (record.transaction_id, record.buy_transaction_id) = (p.transaction_id, p.buy_transaction_id);
            (record.game_session_id, record.game_id) = (p.game_session_id, p.game_id);
            (record.money_won, record.coins_won, record.is_money) = (p.money_won, p.coins_won, p.is_money);
            (record.epoch_released_millis, record.is_primary) = (p.epoch_released_millis, p.is_primary);
            (record.has_is_mobile, record.is_mobile) = (p.is_mobile.is_some(), p.is_mobile.unwrap_or(false));
        }
        EventKind::BalanceQuery(_) | EventKind::Other => {}
    }
    record
}

/// Whether `len` bytes at `start` share a byte with `other`.
fn overlaps(start: usize, len: usize, other: &[u8]) -> bool {
    let other_start = other.as_ptr().addr();
    len > 0 && !other.is_empty() && start < other_start + other.len() && other_start < start + len
}

fn bad_record(field: &str, problem: impl std::fmt::Display) -> Error {
    Error::field(ErrorKind::InvalidArgument, field, problem)
}

/// Handles one callback like `sp_receiver_handle` (source, token, body: the same checks, the
/// same refusals, the same `sp_last_error_response`), but writes the event into the caller's
/// buffer `record` (`capacity` bytes, aligned for `sp_record`, 8 bytes on 64-bit hosts) instead
/// of allocating an `sp_event`: one call, nothing to free. Read the header as an `sp_record`
/// and the strings after it.
///
/// A record takes `sizeof(sp_record)` plus at most the body's length plus 8 bytes (strings are
/// unescaped, so never longer than in the body, each with its NUL); a buffer of
/// `sizeof(sp_record) + len + 8` bytes always fits. `*size` (when `size` is not NULL) gets the
/// record's size on success, and when `capacity` is too small (`SP_ERR_INVALID_ARGUMENT`, field
/// `capacity`: nothing is written into `record`) the size it needs: handle the same callback
/// again with a larger buffer.
///
/// For a receiver without a journal only (`SP_ERR_INVALID_ARGUMENT`, field `receiver`,
/// otherwise): a journaled delivery is claimed through its `sp_event`. The reply is built apart:
/// a reply the host keeps (a refund's or payout's success reply is the same bytes every time),
/// `sp_receiver_reply_balance` (a balance, into the host's buffer), or `sp_reply_result_new` and
/// `sp_reply_balance_new` (failures). An unknown event
/// (`SP_EVENT_KIND_OTHER`) has no reply: answer it as `sp_event_reply` would, with HTTP 400.
///
/// Refused with `SP_ERR_INVALID_ARGUMENT` before anything is written: a NULL or misaligned
/// `record`, and a record that would be written over a byte of the body, the token, the address
/// or the forwarded header (the record is written while they are read).
///
/// # Safety
/// As for `sp_receiver_handle`; `record` is NULL or points to `capacity` writable bytes that
/// nothing else reads or writes during the call; `size` is NULL or writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn sp_receiver_handle_record(
    receiver: *const sp_receiver,
    token: *const c_char,
    remote_addr: *const c_char,
    forwarded_for: *const c_char,
    body: *const u8,
    len: usize,
    record: *mut c_void,
    capacity: usize,
    size: *mut usize,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (receiver, request) = unsafe {
            (&args::object("receiver", receiver)?.inner, request(token, remote_addr, forwarded_for, body, len)?)
        };
        if receiver.journal().is_some() {
            let problem = "has a journal: its deliveries are claimed through an sp_event (sp_receiver_handle)";
            return Err(bad_record("receiver", problem).into());
        }
        if record.is_null() {
            return Err(args::null("record").into());
        }
        if record.addr() % align_of::<sp_record>() != 0 {
            let problem = format!("must be aligned to {} bytes (for sp_record)", align_of::<sp_record>());
            return Err(bad_record("record", problem).into());
        }
        let event = receiver.handle_with(&request, spare::take()).map_err(|error| refused(receiver, error))?;
        let strings_len = block_len(&event);
        let needed = size_of::<sp_record>() + strings_len;
        // `*size` is written once the body is no longer read: a careless host's `size` may
        // point anywhere in its own memory, the body included.
        let report_size = || {
            if !size.is_null() {
                // SAFETY: the caller promises NULL or a writable size_t.
                unsafe { size.write(needed) };
            }
        };
        if capacity < needed {
            drop(event);
            report_size();
            let problem = format!("is {capacity} bytes; this event's record needs {needed}");
            return Err(bad_record("capacity", problem).into());
        }
        let Request { token, remote_addr, forwarded_for, body } = request;
        let inputs =
            [body, token.unwrap_or_default(), remote_addr.unwrap_or_default(), forwarded_for.unwrap_or_default()];
        if inputs.into_iter().any(|input| overlaps(record.addr(), needed, input)) {
            let problem = "would be written over the body, the token, the address or the forwarded header";
            return Err(bad_record("record", problem).into());
        }
        // SAFETY: `record` is aligned, non-NULL and (the caller promises) `capacity >= needed`
        // writable bytes nothing else uses; it overlaps none of the inputs `event` borrows.
        unsafe {
            // Its padding as zeros (a typed write would leave whatever bytes were there).
            zero_padded!(
                record.cast::<sp_record>(),
                header(&event, needed, strings_len),
                sp_record {
                    size,
                    strings_len,
                    extra_fields_len,
                    kind,
                    has_index,
                    index_unreadable,
                    has_is_mobile,
                    is_mobile,
                    index,
                    transaction_id,
                    buy_transaction_id,
                    game_session_id,
                    game_id,
                    money_won,
                    coins_won,
                    epoch_released_millis,
                    is_money,
                    is_primary,
                }
            );
            let mut at = record.cast::<u8>().add(size_of::<sp_record>());
            for_each_block_string(&event, |text| {
                if !text.is_empty() {
                    // Most typed slots of an event are empty: no call for them.
                    std::ptr::copy_nonoverlapping(text.as_ptr(), at, text.len());
                }
                at.add(text.len()).write(0);
                at = at.add(text.len() + 1);
            });
        }
        spare::put_back(event.extra);
        report_size();
        Ok(())
    })
}
