//! `sp_receiver_handle_record` called from Rust as a C host calls it: its record must say
//! exactly what `sp_event` says for the same body, refuse what `sp_receiver_handle` refuses in
//! the same words, and never write where it was not asked to.

use std::ffi::{CStr, CString, c_char, c_void};
use std::mem::size_of;
use std::path::Path;
use std::ptr;

use slotpartner::ffi::error::{sp_last_error_field, sp_last_error_message, sp_last_error_response};
use slotpartner::ffi::event::{sp_event, sp_event_free, sp_event_kind, sp_event_reply_balance};
use slotpartner::ffi::journal::{sp_journal, sp_journal_config_free, sp_journal_config_new, sp_journal_open};
use slotpartner::ffi::receiver::*;
use slotpartner::ffi::record::{sp_receiver_handle_record, sp_record};
use slotpartner::ffi::reply::sp_receiver_reply_balance;
use slotpartner::ffi::status::sp_status::{self, *};
use slotpartner::ffi::str::sp_str;

mod common;
use common::{TOKEN, receiver};

const PRODUCTION: &CStr = c"18.203.30.17";
const HEADER: usize = size_of::<sp_record>();
/// The most a record takes beyond its header and the body's length (see the function's docs).
const SPARE: usize = 8;
/// Fixtures compiled in, for the tests miri runs (which cannot open files).
const REFUND: &[u8] = include_bytes!("fixtures/refund.json");
const BALANCE: &[u8] = include_bytes!("fixtures/balance.json");

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)).unwrap()
}

fn text(s: sp_str) -> String {
    // SAFETY: a view the library handed out, alive until the next call on this thread.
    String::from_utf8(unsafe { std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len) }.to_vec()).unwrap()
}

fn last_error() -> (String, String, u16, String) {
    let (mut http, mut body) = (0u16, sp_str::NONE);
    // SAFETY: valid out-pointers.
    assert_eq!(unsafe { sp_last_error_response(&mut http, &mut body) }, SP_OK);
    (text(sp_last_error_message()), text(sp_last_error_field()), http, text(body))
}

/// An 8-byte aligned buffer of `bytes` bytes (rounded up), every byte 0xAA.
fn buffer(bytes: usize) -> Vec<u64> {
    vec![0xAAAA_AAAA_AAAA_AAAA; bytes.div_ceil(8)]
}

fn as_bytes(buffer: &[u64]) -> &[u8] {
    // SAFETY: any u64 slice is readable as bytes.
    unsafe { std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>(), buffer.len() * 8) }
}

/// `sp_receiver_handle_record` from the production address, every other argument raw.
///
/// # Safety
/// As for `sp_receiver_handle_record`.
unsafe fn record_raw(
    r: *const sp_receiver,
    token: *const c_char,
    body: *const u8,
    len: usize,
    record: *mut c_void,
    capacity: usize,
    size: *mut usize,
) -> sp_status {
    // SAFETY: forwarded caller promises.
    unsafe { sp_receiver_handle_record(r, token, PRODUCTION.as_ptr(), ptr::null(), body, len, record, capacity, size) }
}

/// `sp_receiver_handle_record` into `out` (capacity: its whole length), as a C host calls it.
fn handle_record(r: *const sp_receiver, token: *const c_char, body: &[u8], out: &mut [u64]) -> (sp_status, usize) {
    let mut size = usize::MAX;
    let capacity = out.len() * 8;
    // SAFETY: valid pointers; `out` is writable for its whole length.
    let status =
        unsafe { record_raw(r, token, body.as_ptr(), body.len(), out.as_mut_ptr().cast(), capacity, &mut size) };
    (status, size)
}

/// The header and the strings of a record written into `out`.
fn read(out: &[u64]) -> (sp_record, Vec<String>) {
    // SAFETY: the buffer is aligned and holds a record the library wrote.
    let header = unsafe { out.as_ptr().cast::<sp_record>().read() };
    let strings = &as_bytes(out)[HEADER..HEADER + header.strings_len];
    (header, split(strings))
}

fn split(block: &[u8]) -> Vec<String> {
    let mut parts: Vec<String> = block.split(|&b| b == 0).map(|s| String::from_utf8(s.to_vec()).unwrap()).collect();
    assert_eq!(parts.pop().as_deref(), Some(""), "the block ends with a NUL");
    parts
}

/// The event `sp_receiver_handle` gives for `body`, its strings block split, and the event.
fn event_of(r: *const sp_receiver, body: &[u8]) -> (*mut sp_event, Vec<String>) {
    let mut ev = ptr::null_mut();
    // SAFETY: valid pointers.
    let status = unsafe {
        sp_receiver_handle(r, TOKEN.as_ptr(), PRODUCTION.as_ptr(), ptr::null(), body.as_ptr(), body.len(), &mut ev)
    };
    assert_eq!(status, SP_OK, "{}", last_error().0);
    // SAFETY: a live event; its block is `strings_len` readable bytes.
    let strings = unsafe { std::slice::from_raw_parts((*ev).strings, (*ev).strings_len) };
    (ev, split(strings))
}

/// Checks that the record of `body` says what its `sp_event` says, and fits the documented bound.
fn assert_record_matches_event(r: *const sp_receiver, body: &[u8]) -> sp_record {
    let mut out = buffer(HEADER + body.len() + SPARE);
    let (status, size) = handle_record(r, TOKEN.as_ptr(), body, &mut out);
    assert_eq!(status, SP_OK, "{}", last_error().0);
    let (record, strings) = read(&out);
    assert_eq!((record.size, size), (HEADER + record.strings_len, record.size));
    assert!(record.size <= HEADER + body.len() + SPARE, "{} bytes for a {}-byte body", record.size, body.len());
    let (ev, event_strings) = event_of(r, body);
    assert_eq!(strings, event_strings);
    // SAFETY: a live event from event_of; its typed struct is non-NULL for its kind.
    unsafe {
        let e = &*ev;
        assert_eq!((record.kind, record.has_index, record.index), (e.kind, e.has_index, e.index));
        assert_eq!((record.index_unreadable, record.extra_fields_len), (e.index_unreadable, e.extra_fields_len));
        let numbers = [record.transaction_id, record.buy_transaction_id, record.game_session_id, record.game_id];
        let payout = [record.money_won, record.coins_won, record.epoch_released_millis];
        let flags = [record.has_is_mobile, record.is_mobile, record.is_money, record.is_primary];
        match e.kind {
            sp_event_kind::SP_EVENT_KIND_BUY_REFUND => {
                let s = &*e.buy_refund;
                assert_eq!(numbers, [s.transaction_id, s.buy_transaction_id, s.game_session_id, s.game_id]);
                assert_eq!((payout, flags), ([0; 3], [true, s.is_mobile, false, false]));
            }
            sp_event_kind::SP_EVENT_KIND_JACKPOT_PAYOUT => {
                let s = &*e.jackpot_payout;
                assert_eq!(numbers, [s.transaction_id, s.buy_transaction_id, s.game_session_id, s.game_id]);
                assert_eq!(payout, [s.money_won, s.coins_won, s.epoch_released_millis]);
                assert_eq!(flags, [s.has_is_mobile, s.is_mobile, s.is_money, s.is_primary]);
            }
            _ => assert_eq!((numbers, payout, flags), ([0; 4], [0; 3], [false; 4])),
        }
        sp_event_free(ev);
    }
    record
}

#[test]
fn a_record_says_what_the_event_says() {
    let r = receiver(|_| {});
    let kinds: Vec<sp_event_kind> =
        ["refund.json", "payout.json", "payout_minimal.json", "balance.json", "other_event.json"]
            .iter()
            .map(|name| assert_record_matches_event(r, &fixture(name)).kind)
            .collect();
    use sp_event_kind::*;
    let expected = [SP_EVENT_KIND_BUY_REFUND, SP_EVENT_KIND_JACKPOT_PAYOUT, SP_EVENT_KIND_JACKPOT_PAYOUT];
    assert_eq!(kinds, [&expected[..], &[SP_EVENT_KIND_BALANCE_QUERY, SP_EVENT_KIND_OTHER]].concat());
    // SAFETY: the receiver from `receiver`.
    unsafe { sp_receiver_free(r) };
}

/// Every body of the receiver fuzz corpus that is accepted: the record matches the event and
/// stays within `sizeof(sp_record) + len + 8` bytes, escapes, empty values and many fields
/// included.
#[test]
fn every_accepted_corpus_body_has_a_matching_record_within_the_bound() {
    let r = receiver(|config| {
        // SAFETY: a live configuration.
        unsafe { assert_eq!(sp_receiver_config_set_sources(config, c"any".as_ptr()), SP_OK) };
    });
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/receiver_handle");
    let mut accepted = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        // The fuzz input's first 32 bytes choose its settings; the rest is the body.
        let input = std::fs::read(entry.unwrap().path()).unwrap();
        let body = input.get(32..).unwrap_or_default();
        let mut out = buffer(HEADER + body.len() + SPARE);
        if handle_record(r, TOKEN.as_ptr(), body, &mut out).0 == SP_OK {
            assert_record_matches_event(r, body);
            accepted += 1;
        }
    }
    assert!(accepted > 100, "only {accepted} corpus bodies accepted");
    // SAFETY: the receiver from `receiver`.
    unsafe { sp_receiver_free(r) };
}

#[test]
fn a_too_small_buffer_gets_the_size_needed_and_nothing_written() {
    let r = receiver(|_| {});
    let body = fixture("payout.json");
    let mut small = buffer(HEADER + 16);
    let (status, needed) = handle_record(r, TOKEN.as_ptr(), &body, &mut small);
    assert_eq!(status, SP_ERR_INVALID_ARGUMENT);
    let (message, field, _, _) = last_error();
    assert_eq!(field, "capacity");
    assert_eq!(message, format!("capacity: is {} bytes; this event's record needs {needed}", HEADER + 16));
    assert!(as_bytes(&small).iter().all(|&b| b == 0xAA), "written on failure");
    // Exactly the size asked for fits, and nothing after it is touched.
    let mut exact = buffer(needed + 8);
    let (status, size) = handle_record(r, TOKEN.as_ptr(), &body, &mut exact[..needed.div_ceil(8)]);
    assert_eq!((status, size), (SP_OK, needed));
    assert!(as_bytes(&exact)[needed.div_ceil(8) * 8..].iter().all(|&b| b == 0xAA));
    // SAFETY: the receiver from `receiver`.
    unsafe { sp_receiver_free(r) };
}

#[test]
fn refusals_are_those_of_sp_receiver_handle_word_for_word() {
    let r = receiver(|_| {});
    let bodies =
        ["invalid_money_float.json", "duplicate_key.json", "not_json.json", "invalid_utf8.json", "refund.json"];
    for (name, token) in bodies.iter().zip([TOKEN, TOKEN, TOKEN, TOKEN, c"not-the-token"]) {
        let body = fixture(name);
        let mut out = buffer(HEADER + body.len() + SPARE);
        let (status, size) = handle_record(r, token.as_ptr(), &body, &mut out);
        let refused = last_error();
        assert_eq!(size, usize::MAX, "{name}: size written on a refusal");
        assert!(as_bytes(&out).iter().all(|&b| b == 0xAA), "{name}: record written on a refusal");
        let mut ev = ptr::null_mut();
        // SAFETY: valid pointers.
        let expected = unsafe {
            sp_receiver_handle(r, token.as_ptr(), PRODUCTION.as_ptr(), ptr::null(), body.as_ptr(), body.len(), &mut ev)
        };
        assert_ne!(expected, SP_OK, "{name}");
        assert_eq!((status, refused), (expected, last_error()), "{name}");
    }
    // SAFETY: the receiver from `receiver`.
    unsafe { sp_receiver_free(r) };
}

#[test]
fn a_receiver_with_a_journal_is_refused() {
    let dir = std::env::temp_dir().join(format!("slotpartner-record-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = CString::new(format!("sqlite:{}", dir.join("journal.db").display())).unwrap();
    let (mut config, mut journal): (_, *mut sp_journal) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers; each object is freed once.
    unsafe {
        assert_eq!(sp_journal_config_new(url.as_ptr(), &mut config), SP_OK);
        assert_eq!(sp_journal_open(config, &mut journal), SP_OK);
        sp_journal_config_free(config);
        let r = receiver(|c| assert_eq!(sp_receiver_config_set_journal(c, journal), SP_OK));
        let body = fixture("refund.json");
        let mut out = buffer(HEADER + body.len() + SPARE);
        assert_eq!(handle_record(r, TOKEN.as_ptr(), &body, &mut out).0, SP_ERR_INVALID_ARGUMENT);
        assert_eq!(last_error().1, "receiver");
        sp_receiver_free(r);
        slotpartner::ffi::journal::sp_journal_free(journal);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `sp_receiver_reply_balance` into `out` (capacity: its whole length): the status and `*len`.
fn reply_balance(
    r: *const sp_receiver,
    money: i64,
    currency: Option<&CStr>,
    coins: i64,
    out: &mut [u8],
) -> (sp_status, usize) {
    let mut len = usize::MAX;
    let currency = currency.map_or(ptr::null(), CStr::as_ptr);
    // SAFETY: valid pointers; `out` is writable for its whole length.
    let status =
        unsafe { sp_receiver_reply_balance(r, money, currency, coins, out.as_mut_ptr().cast(), out.len(), &mut len) };
    (status, len)
}

/// The reply `sp_event_reply_balance` builds for the fixture's balance query.
fn event_balance_reply(r: *const sp_receiver, money: i64, currency: Option<&CStr>, coins: i64) -> Vec<u8> {
    let (ev, _) = event_of(r, BALANCE);
    let mut reply = sp_str::NONE;
    // SAFETY: a live balance query event; valid pointers.
    let status =
        unsafe { sp_event_reply_balance(ev, money, currency.map_or(ptr::null(), CStr::as_ptr), coins, &mut reply) };
    assert_eq!(status, SP_OK, "{}", last_error().0);
    let bytes = text(reply).into_bytes();
    // SAFETY: the event from `event_of`, freed once.
    unsafe { sp_event_free(ev) };
    bytes
}

#[test]
fn a_balance_reply_into_the_hosts_buffer_is_the_events_reply() {
    let wrappers: [&CStr; 3] = [c"playerBalance", c"wallet \"main\" \\ \u{e9}t\u{e9}", c"b"];
    for wrapper in wrappers {
        let r = receiver(|config| {
            // SAFETY: a live configuration and NUL-terminated strings.
            unsafe {
                assert_eq!(sp_receiver_config_set_balance_wrapper(config, wrapper.as_ptr()), SP_OK);
                assert_eq!(sp_receiver_config_set_balance_currency(config, c"GBP".as_ptr()), SP_OK);
            }
        });
        for (money, currency, coins) in
            [(0, None, 0), (12_345, Some(c"EUR"), 7), ((1 << 53) - 1, Some(c"JPY"), (1 << 53) - 1)]
        {
            let expected = event_balance_reply(r, money, currency, coins);
            let mut out = vec![0xAAu8; 512];
            let (status, len) = reply_balance(r, money, currency, coins, &mut out);
            assert_eq!(status, SP_OK, "{}", last_error().0);
            assert_eq!(&out[..len], &expected[..], "{wrapper:?}");
            assert_eq!(out[len], 0, "NUL-terminated");
            assert!(out[len + 1..].iter().all(|&b| b == 0xAA), "written past the NUL");
        }
        // SAFETY: the receiver from `receiver`.
        unsafe { sp_receiver_free(r) };
    }
}

#[test]
fn a_balance_reply_takes_at_most_the_documented_bound() {
    // The longest reply: the largest amounts, and a wrapper whose every byte is escaped.
    let wrapper = CString::new("\"".repeat(40)).unwrap();
    let r = receiver(|config| {
        // SAFETY: a live configuration and a NUL-terminated string.
        assert_eq!(unsafe { sp_receiver_config_set_balance_wrapper(config, wrapper.as_ptr()) }, SP_OK);
    });
    let mut out = vec![0u8; 512];
    let (status, len) = reply_balance(r, (1 << 53) - 1, None, (1 << 53) - 1, &mut out);
    assert_eq!(status, SP_OK, "{}", last_error().0);
    assert_eq!(len + 1, 99 + 2 * wrapper.as_bytes().len(), "the bound is exact for the longest reply");
    let reply: serde_json::Value = serde_json::from_slice(&out[..len]).unwrap();
    assert_eq!(reply[wrapper.to_str().unwrap()]["money"], (1u64 << 53) - 1);
    // SAFETY: the receiver from `receiver`.
    unsafe { sp_receiver_free(r) };
}

#[test]
fn a_too_small_reply_buffer_gets_the_length_needed_and_nothing_written() {
    let r = receiver(|_| {});
    let expected = event_balance_reply(r, 500, None, 3);
    for capacity in [0, 1, expected.len()] {
        let mut out = vec![0xAAu8; capacity];
        let (status, len) = reply_balance(r, 500, None, 3, &mut out);
        assert_eq!(status, SP_ERR_INVALID_ARGUMENT);
        assert_eq!(len, expected.len());
        let (message, field, _, _) = last_error();
        assert_eq!(field, "capacity");
        assert!(message.contains(&format!("needs {} with its NUL", expected.len() + 1)), "{message}");
        assert!(out.iter().all(|&b| b == 0xAA), "written into a buffer too small");
    }
    let mut out = vec![0xAAu8; expected.len() + 1];
    assert_eq!(reply_balance(r, 500, None, 3, &mut out), (SP_OK, expected.len()));
    // SAFETY: the receiver from `receiver`.
    unsafe { sp_receiver_free(r) };
}

#[test]
fn a_balance_reply_refuses_what_the_events_reply_refuses() {
    let r = receiver(|_| {});
    for (money, currency, coins, field) in [
        (-1, None, 0, "money"),
        (1 << 53, None, 0, "money"),
        (0, None, -5, "coins"),
        (0, Some(c"eur"), 0, "currency"),
        (0, Some(c"EURO"), 0, "currency"),
        (0, Some(c""), 0, "currency"),
    ] {
        let mut out = vec![0xAAu8; 256];
        let (status, len) = reply_balance(r, money, currency, coins, &mut out);
        assert_eq!((status, len), (SP_ERR_INVALID_ARGUMENT, usize::MAX), "{field}");
        assert_eq!(last_error().1, field);
        assert!(out.iter().all(|&b| b == 0xAA));
    }
    // SAFETY: the receiver from `receiver`.
    unsafe { sp_receiver_free(r) };
}

/// As a careless host would call it (also run under miri).
mod careless_host {
    use super::*;

    #[test]
    fn a_balance_reply_with_null_pointers_or_a_lying_capacity() {
        let r = receiver(|_| {});
        let mut len = 7usize;
        // SAFETY: NULL receiver and NULL out are refused before anything is read or written.
        unsafe {
            let mut out = [0xAAu8; 200];
            let status =
                sp_receiver_reply_balance(ptr::null(), 1, ptr::null(), 0, out.as_mut_ptr().cast(), 200, &mut len);
            assert_eq!((status, last_error().1.as_str(), len), (SP_ERR_INVALID_ARGUMENT, "receiver", 7));
            let status = sp_receiver_reply_balance(r, 1, ptr::null(), 0, ptr::null_mut(), usize::MAX, &mut len);
            assert_eq!((status, last_error().1.as_str(), len), (SP_ERR_INVALID_ARGUMENT, "out", 7));
            assert!(out.iter().all(|&b| b == 0xAA));
            // A capacity of SIZE_MAX over a real buffer of 200 bytes, and a NULL len.
            let status =
                sp_receiver_reply_balance(r, 1, ptr::null(), 0, out.as_mut_ptr().cast(), usize::MAX, ptr::null_mut());
            assert_eq!(status, SP_OK);
            let end = out.iter().position(|&b| b == 0).unwrap();
            assert!(out[end + 1..].iter().all(|&b| b == 0xAA), "written past the NUL");
        }
        // SAFETY: the receiver from `receiver`.
        unsafe { sp_receiver_free(r) };
    }

    #[test]
    fn a_balance_reply_may_be_written_over_its_own_currency_and_length() {
        let r = receiver(|_| {});
        let expected = event_balance_reply(r, 42, Some(c"USD"), 1);
        let mut out = buffer(256);
        // SAFETY: the currency is the buffer's first bytes, `len` lies inside the buffer past the
        // reply (aligned); both are read or written only where documented.
        unsafe {
            let base = out.as_mut_ptr().cast::<u8>();
            ptr::copy_nonoverlapping(c"USD".as_ptr().cast::<u8>(), base, 4);
            let len_at = base.add(200).cast::<usize>();
            let status = sp_receiver_reply_balance(r, 42, base.cast(), 1, base.cast(), 256, len_at);
            assert_eq!(status, SP_OK, "{}", last_error().0);
            assert_eq!(len_at.read(), expected.len());
        }
        assert_eq!(&as_bytes(&out)[..expected.len()], &expected[..]);
        // The thread's last error as the currency: refused, naming it, without a crash.
        let mut out = [0xAAu8; 256];
        assert_eq!(reply_balance(r, -1, None, 0, &mut out).0, SP_ERR_INVALID_ARGUMENT);
        // SAFETY: the last error's own pointer, alive and NUL-terminated during the call.
        let status = unsafe {
            let currency = sp_last_error_message().ptr;
            sp_receiver_reply_balance(r, 1, currency, 0, out.as_mut_ptr().cast(), 256, ptr::null_mut())
        };
        assert_eq!((status, last_error().1.as_str()), (SP_ERR_INVALID_ARGUMENT, "currency"));
        assert!(out.iter().all(|&b| b == 0xAA));
        // SAFETY: the receiver from `receiver`.
        unsafe { sp_receiver_free(r) };
    }

    #[test]
    fn a_null_or_misaligned_record_is_refused_before_anything_is_written() {
        let r = receiver(|_| {});
        let body = BALANCE;
        let mut out = buffer(HEADER + body.len() + SPARE + 8);
        let misaligned = as_bytes(&out).as_ptr().wrapping_add(1).cast_mut().cast::<c_void>();
        for (record, problem) in [(ptr::null_mut(), "must not be NULL"), (misaligned, "must be aligned to 8 bytes")] {
            let mut size = 7usize;
            // SAFETY: valid pointers but the record, which the library must refuse unread.
            let status = unsafe { record_raw(r, TOKEN.as_ptr(), body.as_ptr(), body.len(), record, 4096, &mut size) };
            assert_eq!(status, SP_ERR_INVALID_ARGUMENT);
            let (message, field, _, _) = last_error();
            assert_eq!((field.as_str(), size), ("record", 7));
            assert!(message.starts_with(&format!("record: {problem}")), "{message}");
        }
        assert!(as_bytes(&out).iter().all(|&b| b == 0xAA));
        // A NULL size is allowed.
        // SAFETY: valid pointers; the buffer holds the record.
        let status = unsafe {
            let record = out.as_mut_ptr().cast::<c_void>();
            record_raw(r, TOKEN.as_ptr(), body.as_ptr(), body.len(), record, 4096, ptr::null_mut())
        };
        assert_eq!(status, SP_OK);
        // SAFETY: the receiver from `receiver`.
        unsafe { sp_receiver_free(r) };
    }

    #[test]
    fn a_record_written_over_its_own_body_is_refused() {
        let r = receiver(|_| {});
        let body = REFUND;
        // The body sits where the record's strings would go, as a host reusing one buffer for
        // both might put it.
        let mut out = buffer(HEADER + body.len() + SPARE);
        let at = HEADER;
        // SAFETY: `out` has room for the body at `at`.
        let inside = unsafe {
            let start = out.as_mut_ptr().cast::<u8>().add(at);
            ptr::copy_nonoverlapping(body.as_ptr(), start, body.len());
            start
        };
        let before = as_bytes(&out).to_vec();
        let capacity = out.len() * 8;
        // SAFETY: valid pointers; the record buffer and the body overlap, which must be refused.
        let status = unsafe {
            let record = out.as_mut_ptr().cast::<c_void>();
            record_raw(r, TOKEN.as_ptr(), inside, body.len(), record, capacity, ptr::null_mut())
        };
        assert_eq!(status, SP_ERR_INVALID_ARGUMENT);
        assert_eq!(last_error().1, "record");
        assert_eq!(as_bytes(&out), &before[..], "written over the body");
        // SAFETY: the receiver from `receiver`.
        unsafe { sp_receiver_free(r) };
    }

    #[test]
    fn a_capacity_of_size_max_writes_only_the_record() {
        let r = receiver(|_| {});
        let body = REFUND;
        let mut out = buffer(HEADER + body.len() + SPARE + 64);
        let mut size = 0usize;
        // SAFETY: valid pointers; the capacity lies, but the record fits in the real buffer.
        let status = unsafe {
            let record = out.as_mut_ptr().cast::<c_void>();
            record_raw(r, TOKEN.as_ptr(), body.as_ptr(), body.len(), record, usize::MAX, &mut size)
        };
        assert_eq!(status, SP_OK);
        assert!(as_bytes(&out)[size..].iter().all(|&b| b == 0xAA), "written past the record");
        // SAFETY: the receiver from `receiver`.
        unsafe { sp_receiver_free(r) };
    }

    #[test]
    fn the_last_error_message_may_be_the_token() {
        let r = receiver(|_| {});
        let body = REFUND;
        let mut out = buffer(HEADER + body.len() + SPARE);
        assert_eq!(handle_record(r, c"wrong".as_ptr(), body, &mut out).0, SP_ERR_WRONG_TOKEN);
        let (status, _) = handle_record(r, sp_last_error_message().ptr, body, &mut out);
        assert_eq!(status, SP_ERR_WRONG_TOKEN);
        assert!(as_bytes(&out).iter().all(|&b| b == 0xAA));
        // SAFETY: the receiver from `receiver`.
        unsafe { sp_receiver_free(r) };
    }
}
