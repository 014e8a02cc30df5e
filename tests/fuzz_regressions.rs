//! What the fuzz targets (`fuzz/`) found or made us decide, pinned: each finding is a test here.
//!
//! A number beyond a double (`900719E9254741982`, found by a first run from outside): JSON's
//! grammar allows it and the library accepts it inside a field the spec does not define, keeping
//! it as raw text, while `serde_json::Value` (and many hosts' parsers) refuses the whole body.
//! Decision: accept. A field the spec does not define must never make us refuse money, and
//! refusing a refund or a payout because of a field we do not read would do exactly that; the
//! value reaches the host as the raw text it was (`sp_event_field`), and a host that parses the
//! raw body itself must expect such numbers. Inside a typed field the same number is refused,
//! naming the field; as the index (a guessed field) it leaves the event without an index unless
//! the index is strict.
//!
//! Findings, each fixed in `src/` and pinned below:
//! 1. `receiver_handle` ("valid JSON refused as invalid"): the same number nested inside an
//!    undefined field (`"meta":{"x":[900719E9254741982]}`) refused the whole event as invalid
//!    JSON, a payout refused for a field the library does not read; now accepted like the
//!    top-level one (`json::StrictValue` takes nested values raw).
//! 2. `reply_builders` (a reply keyed `$serde_json::private::RawValue` that serde_json's `Value`
//!    reads as the JSON inside its string): the ids of a refused body (`sp_last_error`'s name,
//!    index and `transactionId`, and the index a journal records as refused) were read through
//!    `Value`, so a body could carry them inside a string, and a number beyond a double anywhere
//!    hid them all; now each is read from its own top-level value.

use std::ffi::CStr;
use std::ptr;

use serde_json::Value;
use slotpartner::ffi::error::{sp_last_error_field, sp_last_error_response};
use slotpartner::ffi::event::{sp_event, sp_event_field, sp_event_free, sp_event_kind};
use slotpartner::ffi::receiver::*;
use slotpartner::ffi::status::sp_status::{self, *};
use slotpartner::ffi::str::sp_str;
use slotpartner::{ErrorKind, EventKind, ParseOptions, parse};

const TOKEN: &CStr = c"6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";
const HUGE: &str = "900719E9254741982";

fn payout(extra: &str) -> String {
    format!(
        r#"{{"event":"jackpotPayout","jackpotIdentifier":"jp-1","playerIdentifier":"p-2","currencyISO4217":"EUR","moneyWon":150000,"coinsWon":25,"isMoney":true,"epochReleasedMillis":1700000000123,"isPrimary":true,"transactionId":2001,"buyTransactionId":2000,"partnerGameRequestIdentifier":"req-2","gameSessionId":88,"gameId":9{extra}}}"#
    )
}

fn value_refuses(body: &str) -> bool {
    serde_json::from_str::<Value>(body).is_err_and(|e| e.to_string().contains("number out of range"))
}

fn c_receiver(strict_index: bool) -> *mut sp_receiver {
    let (mut config, mut receiver) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers throughout.
    unsafe {
        assert_eq!(sp_receiver_config_new(&mut config), SP_OK);
        assert_eq!(sp_receiver_config_add_token(config, TOKEN.as_ptr()), SP_OK);
        assert_eq!(sp_receiver_config_set_sources(config, c"any".as_ptr()), SP_OK);
        assert_eq!(sp_receiver_config_set_strict_index(config, strict_index), SP_OK);
        assert_eq!(sp_receiver_new(config, &mut receiver), SP_OK);
        sp_receiver_config_free(config);
    }
    receiver
}

fn handle(receiver: *const sp_receiver, body: &str) -> (sp_status, *mut sp_event) {
    let mut out = ptr::null_mut();
    // SAFETY: a live receiver, readable body, writable out.
    let status = unsafe {
        sp_receiver_handle(receiver, TOKEN.as_ptr(), ptr::null(), ptr::null(), body.as_ptr(), body.len(), &mut out)
    };
    (status, out)
}

/// The text of a view the library handed out.
fn text(view: sp_str) -> String {
    // SAFETY: a live view of `len` bytes.
    String::from_utf8(unsafe { std::slice::from_raw_parts(view.ptr.cast::<u8>(), view.len) }.to_vec()).unwrap()
}

#[test]
fn a_number_beyond_a_double_in_an_undefined_field_is_accepted_and_kept_raw() {
    for extra in [format!(r#","note":{HUGE}"#), format!(r#","meta":{{"x":[1,{HUGE}]}}"#), format!(r#","n":-{HUGE}"#)] {
        let body = payout(&extra);
        assert!(value_refuses(&body), "serde_json's Value should refuse {body}");
        let event = parse(body.as_bytes(), &ParseOptions::default()).unwrap_or_else(|e| panic!("{extra}: {e:?}"));
        assert!(matches!(event.kind, EventKind::JackpotPayout(ref p) if p.money_won == 150000));
        let (name, raw) = extra[2..].split_once("\":").unwrap();
        assert_eq!(event.field(name), Some(raw), "kept exactly as sent");

        let receiver = c_receiver(false);
        let (status, ev) = handle(receiver, &body);
        assert_eq!(status, SP_OK);
        let mut out = sp_str::NONE;
        let cname = std::ffi::CString::new(name).unwrap();
        // SAFETY: live event, NUL-terminated name, writable out; freed once.
        unsafe {
            assert_eq!((*ev).kind, sp_event_kind::SP_EVENT_KIND_JACKPOT_PAYOUT);
            assert_eq!(sp_event_field(ev, cname.as_ptr(), &mut out), SP_OK);
            assert_eq!(text(out), raw);
            sp_event_free(ev);
            sp_receiver_free(receiver);
        }
    }
    // Unknown events too: their fields are all undefined, also a field another event defines.
    let other = format!(r#"{{"event":"gameSessionStart","x":{HUGE}}}"#);
    assert!(value_refuses(&other));
    assert_eq!(parse(other.as_bytes(), &ParseOptions::default()).unwrap().field("x"), Some(HUGE));
    for nested in [
        format!(r#"{{"event":"gameSessionStart","moneyWon":[{HUGE}]}}"#),
        payout(&format!(r#","coinsLost":{{"a":{HUGE}}}"#)),
    ] {
        assert!(value_refuses(&nested));
        parse(nested.as_bytes(), &ParseOptions::default()).unwrap_or_else(|e| panic!("{nested}: {e}"));
    }
}

#[test]
fn a_number_beyond_a_double_nested_in_a_typed_field_is_its_wrong_type() {
    let body = payout("").replace("150000", &format!("[{HUGE}]"));
    let error = parse(body.as_bytes(), &ParseOptions::default()).unwrap_err();
    assert_eq!((error.kind, error.field.as_str()), (ErrorKind::WrongType, "jackpotPayout.moneyWon"), "{error}");
}

#[test]
fn the_rules_on_nested_values_still_hold_around_such_numbers() {
    for (extra, kind) in [
        (format!(r#","meta":{{"a":{HUGE},"a":1}}"#), ErrorKind::DuplicateKey),
        (format!(r#","meta":[{HUGE},"\ud800"]"#), ErrorKind::InvalidJson),
        (format!(r#","meta":[{HUGE},{{"k\u0001":1}}]"#), ErrorKind::InvalidValue),
        (format!(r#","meta":[{HUGE},{}{}]"#, "[".repeat(40), "]".repeat(40)), ErrorKind::TooDeep),
    ] {
        let error = parse(payout(&extra).as_bytes(), &ParseOptions::default()).unwrap_err();
        assert_eq!((error.kind, error.field.as_str()), (kind, "jackpotPayout.meta"), "{extra}: {error}");
    }
}

#[test]
fn the_ids_of_a_refused_body_are_its_own_top_level_values() {
    let options = ParseOptions::default();
    // Inside a string: not the body's ids.
    let smuggled =
        r#"{"$serde_json::private::RawValue":"{\"event\":\"jackpotPayout\",\"index\":7,\"transactionId\":5}"}"#;
    let error = parse(smuggled.as_bytes(), &options).unwrap_err();
    assert_eq!(error.ids, None, "{error:?}");
    let nested = r#"{"event":"jackpotPayout","index":{"$serde_json::private::RawValue":"7"},"transactionId":{"$serde_json::private::RawValue":"5"}}"#;
    let ids = parse(nested.as_bytes(), &options).unwrap_err().ids.expect("the name is readable");
    assert_eq!((ids.name.as_deref(), ids.index, ids.transaction_id), (Some("jackpotPayout"), None, None));
    // A number beyond a double elsewhere does not hide them.
    let body = payout(r#","index":12"#).replace("150000", HUGE);
    let ids = parse(body.as_bytes(), &options).unwrap_err().ids.expect("ids");
    assert_eq!((ids.name.as_deref(), ids.index, ids.transaction_id), (Some("jackpotPayout"), Some(12), Some(2001)));
}

#[test]
fn a_number_beyond_a_double_in_a_typed_field_is_refused_naming_it() {
    let body = payout("").replace("150000", HUGE);
    let error = parse(body.as_bytes(), &ParseOptions::default()).unwrap_err();
    assert_eq!(error.field, "jackpotPayout.moneyWon");
    assert!(matches!(error.kind, ErrorKind::WrongType | ErrorKind::OutOfRange), "{error}");
    assert!(error.message.contains(HUGE), "{error}");

    let receiver = c_receiver(false);
    let (status, ev) = handle(receiver, &body);
    assert!(ev.is_null() && status != SP_OK);
    let (mut http, mut answer) = (0u16, sp_str::NONE);
    // SAFETY: writable out-params; views read before the next call.
    unsafe {
        assert_eq!(text(sp_last_error_field()), "jackpotPayout.moneyWon");
        assert_eq!(sp_last_error_response(&mut http, &mut answer), SP_OK);
        sp_receiver_free(receiver);
    }
    let answer: Value = serde_json::from_str(&text(answer)).expect("the answer is JSON");
    assert_eq!((http, &answer["payout"]["success"]), (200, &Value::Bool(false)), "{answer}");
}

#[test]
fn a_number_beyond_a_double_as_the_index_leaves_the_event_without_one_unless_strict() {
    let body = payout(&format!(r#","index":{HUGE}"#));
    let event = parse(body.as_bytes(), &ParseOptions::default()).expect("lenient index");
    assert_eq!((event.index, event.index_unreadable, event.field("index")), (None, true, Some(HUGE)));

    let strict = ParseOptions { strict_index: true, ..ParseOptions::default() };
    let error = parse(body.as_bytes(), &strict).unwrap_err();
    assert_eq!(error.field, "jackpotPayout.index");

    let receiver = c_receiver(true);
    let (status, ev) = handle(receiver, &body);
    assert!(ev.is_null() && status != SP_OK);
    // SAFETY: a live receiver, freed once.
    unsafe { sp_receiver_free(receiver) };
}
