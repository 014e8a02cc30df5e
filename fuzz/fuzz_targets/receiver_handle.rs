//! `sp_receiver_handle` through the C ABI on any body, token, address and forwarded header, with
//! any receiver settings.
//!
//! Input: the first `SETUP_BYTES` bytes choose the settings and the request's headers (read with
//! `arbitrary`; all zeros is the default receiver, the right token, a production address), the
//! rest is the body. Properties:
//! - an accepted body is strict JSON: serde_json's grammar accepts it, a duplicate-key walk finds
//!   no repeated key, and `serde_json::Value` reads it too, except for a number beyond a double
//!   in a field the spec does not define for the event (the library keeps such a field raw: a
//!   field the spec does not define never refuses money; see tests/fuzz_regressions.rs);
//! - the typed fields, the extra fields and the index agree with that independent reading;
//! - a refused body leaves the out-parameter alone and gets `sp_last_error_response` with a body
//!   that is itself JSON and never claims `"success":true`;
//! - the source and token checks come first: where the request fails them, the body is not
//!   looked at; where it passes them, `sp_receiver_handle` answers as `sp_receiver_parse` does;
//! - every string handed out is NUL-terminated UTF-8 without NUL inside; everything is freed;
//! - `sp_receiver_handle_record` answers as `sp_receiver_handle` does: the same refusal word for
//!   word, or a record whose numbers and strings are the event's, within
//!   `sizeof(sp_record) + len + 8` bytes.
#![no_main]

use std::ffi::CString;
use std::ptr;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use slotpartner::ffi::event::{
    sp_event, sp_event_field, sp_event_free, sp_event_kind, sp_event_reply, sp_event_reply_balance,
};
use slotpartner::ffi::receiver::*;
use slotpartner::ffi::record::{sp_receiver_handle_record, sp_record};
use slotpartner::ffi::status::sp_status::{self, *};
use slotpartner::ffi::str::sp_str;
use slotpartner_fuzz::{Reading, c_string, last_error, opt_view, plain_value_of, read_json, view_bytes};

const SETUP_BYTES: usize = 32;
const TOKEN: &[u8] = b"6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";
const SECOND_TOKEN: &[u8] = b"0b7e3c55-1a2b-4c3d-8e9f-000000000001";
const PRODUCTION: &str = "18.203.30.17";
const STAGING: &str = "34.254.138.20";

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq)]
enum Sources {
    Production,
    Any,
    Staging,
    Loopback,
    Custom,
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq)]
enum Trusted {
    Nothing,
    Loopback,
    Custom,
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq)]
enum Token {
    Right,
    RightUpper,
    Second,
    Missing,
    Empty,
    Wrong,
    Custom,
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq)]
enum Remote {
    Production,
    Staging,
    Loopback,
    MappedProduction,
    Missing,
    NotUtf8,
    Custom,
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq)]
enum Forwarded {
    Nothing,
    Production,
    Staging,
    Chain,
    NotUtf8,
    Garbage,
    Custom,
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq)]
enum IndexField {
    Default,
    Seq,
    TransactionId,
    Event,
}

#[derive(Arbitrary, Debug)]
struct Setup {
    sources: Sources,
    trusted: Trusted,
    token: Token,
    remote: Remote,
    forwarded: Forwarded,
    index_field: IndexField,
    strict_index: bool,
    reject_unknown: bool,
    omit_empty: bool,
    max_depth: Option<u8>,
    max_body: Option<u16>,
    /// The bytes of the `Custom` choices.
    custom: Vec<u8>,
}

/// What the request's headers must give, where the model knows: `Some(Ok)` passes both checks,
/// `Some(Err(status))` fails one, `None` unknown (a custom value).
fn auth_model(s: &Setup) -> Option<Result<(), sp_status>> {
    let source = match s.sources {
        Sources::Any => Ok(()),
        Sources::Custom => return None,
        sources => {
            let remote = match s.remote {
                Remote::Production | Remote::MappedProduction => Some(PRODUCTION),
                Remote::Staging => Some(STAGING),
                Remote::Loopback => Some("127.0.0.1"),
                Remote::Missing | Remote::NotUtf8 => None,
                Remote::Custom => return None,
            };
            let client = match (remote, s.trusted, s.forwarded) {
                (_, Trusted::Custom, _) | (_, _, Forwarded::Custom) => return None,
                (Some("127.0.0.1"), Trusted::Loopback, forwarded) => match forwarded {
                    Forwarded::Nothing => Some("127.0.0.1"),
                    Forwarded::Production | Forwarded::Chain => Some(PRODUCTION),
                    Forwarded::Staging => Some(STAGING),
                    Forwarded::NotUtf8 | Forwarded::Garbage => None,
                    Forwarded::Custom => unreachable!(),
                },
                (remote, _, _) => remote,
            };
            let allowed = match (sources, client) {
                (_, None) => false,
                (Sources::Production, Some(c)) => c == PRODUCTION,
                (Sources::Staging, Some(c)) => c == STAGING,
                (Sources::Loopback, Some(c)) => c == "127.0.0.1",
                _ => unreachable!(),
            };
            if allowed { Ok(()) } else { Err(SP_ERR_FORBIDDEN_SOURCE) }
        }
    };
    let token = match s.token {
        Token::Right | Token::RightUpper | Token::Second => Ok(()),
        Token::Missing | Token::Empty => Err(SP_ERR_MISSING_TOKEN),
        Token::Wrong => Err(SP_ERR_WRONG_TOKEN),
        Token::Custom => return None,
    };
    Some(source.and(token))
}

/// Builds the receiver the setup describes; `None` when a setting is refused (checked to be
/// refused clearly, naming the setting).
fn receiver(s: &Setup, custom: &str) -> Option<*mut sp_receiver> {
    let (mut config, mut receiver) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: live configuration, NUL-terminated strings, writable out-params.
    unsafe {
        assert_eq!(sp_receiver_config_new(&mut config), SP_OK);
        let mut ok = true;
        let mut set = |status: sp_status, field: &str| {
            if status != SP_OK {
                let (_, got, _, _) = last_error(status);
                assert_eq!(got, field, "{status:?}");
                ok = false;
            }
        };
        set(sp_receiver_config_add_token(config, c_string(TOKEN).as_ptr()), "token");
        set(sp_receiver_config_add_token(config, c_string(SECOND_TOKEN).as_ptr()), "token");
        let sources = match s.sources {
            Sources::Production => "production".to_owned(),
            Sources::Any => "any".to_owned(),
            Sources::Staging => "staging".to_owned(),
            Sources::Loopback => "127.0.0.1, ::1".to_owned(),
            Sources::Custom => custom.to_owned(),
        };
        set(sp_receiver_config_set_sources(config, c_string(sources.as_bytes()).as_ptr()), "sources");
        let trusted = match s.trusted {
            Trusted::Nothing => "",
            Trusted::Loopback => "127.0.0.0/8",
            Trusted::Custom => custom,
        };
        set(sp_receiver_config_set_trusted_proxies(config, c_string(trusted.as_bytes()).as_ptr()), "trusted_proxies");
        let index = match s.index_field {
            IndexField::Default => "index",
            IndexField::Seq => "seq",
            IndexField::TransactionId => "transactionId",
            IndexField::Event => "event",
        };
        set(sp_receiver_config_set_index_field(config, c_string(index.as_bytes()).as_ptr()), "index_field");
        set(sp_receiver_config_set_strict_index(config, s.strict_index), "");
        set(sp_receiver_config_set_reject_unknown_events(config, s.reject_unknown), "");
        set(sp_receiver_config_set_omit_empty_error_message(config, s.omit_empty), "");
        if let Some(depth) = s.max_depth {
            let status = sp_receiver_config_set_max_depth(config, usize::from(depth));
            assert_eq!(status == SP_OK, (1..=100).contains(&depth), "depth {depth}");
            set(status, "max_depth");
        }
        if let Some(bytes) = s.max_body {
            let status = sp_receiver_config_set_max_body_bytes(config, usize::from(bytes));
            assert_eq!(status == SP_OK, bytes >= 2, "max_body {bytes}");
            set(status, "max_body_bytes");
        }
        let built = ok && sp_receiver_new(config, &mut receiver) == SP_OK;
        sp_receiver_config_free(config);
        if !ok {
            return None;
        }
        assert!(built && !receiver.is_null());
    }
    Some(receiver)
}

fn index_name(s: &Setup) -> &'static str {
    match s.index_field {
        IndexField::Default => "index",
        IndexField::Seq => "seq",
        IndexField::TransactionId => "transactionId",
        IndexField::Event => "event",
    }
}

const REFUND_FIELDS: &[&str] = &[
    "event",
    "gameSessionIdentifier",
    "playerIdentifier",
    "playerPartnerIdentifier",
    "transactionId",
    "buyTransactionId",
    "gameSessionId",
    "partnerGameRequestIdentifier",
    "gameId",
    "isMobile",
    "bonusCode",
];
const PAYOUT_FIELDS: &[&str] = &[
    "event",
    "jackpotIdentifier",
    "playerIdentifier",
    "playerPartnerIdentifier",
    "currencyISO4217",
    "moneyWon",
    "coinsWon",
    "isMoney",
    "epochReleasedMillis",
    "isPrimary",
    "transactionId",
    "buyTransactionId",
    "partnerGameRequestIdentifier",
    "gameSessionId",
    "gameId",
    "bonusCode",
    "isMobile",
];
const BALANCE_FIELDS: &[&str] = &["action", "playerIdentifier", "playerPartnerIdentifier"];

/// The reference value of top-level field `name`: `None` when absent or `null`.
fn reference<'r>(fields: &'r [(String, Value)], name: &str) -> Option<&'r Value> {
    fields.iter().find(|(k, _)| k == name).map(|(_, v)| v).filter(|v| !v.is_null())
}

/// Checks one accepted event against the independent reading of its body.
///
/// # Safety
/// `ev` is a live event from the library.
unsafe fn check_accepted(s: &Setup, reading: &Reading<'_>, ev: *mut sp_event) {
    assert!(reading.duplicate.is_none(), "accepted with duplicate key {:?}", reading.duplicate);
    // SAFETY: live event.
    let e = unsafe { &*ev };
    // SAFETY: the event's own views.
    let name = unsafe { opt_view("name", e.name) }.expect("a name");
    // Each top-level field as a Value, where Value reads it.
    let mut values = Vec::new();
    let mut refused_by_value = Vec::new();
    for (key, raw) in &reading.fields {
        match slotpartner_fuzz::plain_value(raw.get()) {
            Ok(v) => values.push((key.clone(), v)),
            Err(error) => {
                assert!(error.contains("number out of range"), "{key}: Value refuses it: {error}");
                refused_by_value.push(key.clone());
            }
        }
    }
    match &reading.value {
        Ok(v) => assert!(v.is_object() && refused_by_value.is_empty()),
        Err(error) => assert!(!refused_by_value.is_empty(), "Value refuses the body ({error}), no field alone"),
    }
    let (spec, name_field): (&[&str], &str) = match e.kind {
        sp_event_kind::SP_EVENT_KIND_BUY_REFUND => (REFUND_FIELDS, "event"),
        sp_event_kind::SP_EVENT_KIND_JACKPOT_PAYOUT => (PAYOUT_FIELDS, "event"),
        sp_event_kind::SP_EVENT_KIND_BALANCE_QUERY => (BALANCE_FIELDS, "action"),
        sp_event_kind::SP_EVENT_KIND_OTHER => {
            assert!(!s.reject_unknown, "unknown event {name:?} accepted under reject_unknown_events");
            let by_event = reference(&values, "event").is_some();
            (if by_event { &["event"] } else { &["action"] }, if by_event { "event" } else { "action" })
        }
    };
    assert_eq!(reference(&values, name_field).and_then(Value::as_str), Some(name), "the name");
    // The extra fields: every other top-level field, in body order, raw text exactly as sent.
    let expected: Vec<&(String, &serde_json::value::RawValue)> =
        reading.fields.iter().filter(|(k, _)| !spec.contains(&k.as_str())).collect();
    let extras: &[slotpartner::ffi::event::sp_field] = if e.extra_fields_len == 0 {
        assert!(e.extra_fields.is_null());
        &[]
    } else {
        // SAFETY: `extra_fields_len` entries owned by the event.
        unsafe { std::slice::from_raw_parts(e.extra_fields, e.extra_fields_len) }
    };
    assert_eq!(extras.len(), expected.len(), "extra fields of {name}");
    for (field, (key, raw)) in extras.iter().zip(expected) {
        // SAFETY: the event's own views.
        let (got_name, got_json) =
            unsafe { (view_bytes("extra name", field.name), view_bytes("extra json", field.json)) };
        assert_eq!(got_name, key.as_bytes());
        assert_eq!(got_json, raw.get().as_bytes());
        let mut out = sp_str::NONE;
        let cname = CString::new(key.as_bytes()).expect("no NUL: control characters are refused");
        // SAFETY: live event, NUL-terminated name, writable out.
        assert_eq!(unsafe { sp_event_field(ev, cname.as_ptr(), &mut out) }, SP_OK);
        // SAFETY: the event's own view.
        assert_eq!(unsafe { view_bytes("sp_event_field", out) }, raw.get().as_bytes());
    }
    for key in &refused_by_value {
        assert!(!spec.contains(&key.as_str()), "{key}: a spec field Value refuses was accepted");
    }
    // The index: an extra field, a non-negative integer up to 2^63-1, else unreadable (or refused
    // under strict_index); null is absent.
    let index_name = index_name(s);
    let index_raw = expected_index(reading, spec, index_name);
    match index_raw {
        None => assert!(!e.has_index && !e.index_unreadable, "no index field, has_index {}", e.has_index),
        Some(raw) => match slotpartner_fuzz::plain_value(raw) {
            Ok(Value::Null) => assert!(!e.has_index && !e.index_unreadable),
            Ok(v) if v.as_u64().is_some_and(|n| n <= i64::MAX as u64) => {
                assert!(e.has_index && !e.index_unreadable && e.index == v.as_i64().unwrap(), "index {raw}");
            }
            _ => {
                assert!(!s.strict_index, "strict index accepted {raw}");
                assert!(!e.has_index && e.index_unreadable, "index {raw}");
            }
        },
    }
    // The typed fields agree with the reference reading.
    let int = |n: &str| reference(&values, n).and_then(Value::as_i64);
    let string = |n: &str| reference(&values, n).and_then(Value::as_str);
    let boolean = |n: &str| reference(&values, n).and_then(Value::as_bool);
    let id = |n: &str, got: i64| assert_eq!(Some(got), int(n).filter(|v| *v >= 0), "{n}");
    let amount = |n: &str, got: i64| {
        id(n, got);
        assert!(got < 1 << 53, "{n} {got}");
    };
    let ident = |n: &str, got: sp_str, required: bool| {
        // SAFETY: the event's own views.
        let got = unsafe { opt_view(n, got) };
        assert_eq!(got, string(n), "{n}");
        if let Some(got) = got {
            assert!(!got.is_empty() && got.len() <= 256 && !got.chars().any(char::is_control), "{n} {got:?}");
        } else {
            assert!(!required, "{n} missing");
        }
    };
    let player = |a: sp_str, b: sp_str| {
        ident("playerIdentifier", a, false);
        ident("playerPartnerIdentifier", b, false);
        assert!(!a.ptr.is_null() || !b.ptr.is_null(), "no player");
    };
    match e.kind {
        sp_event_kind::SP_EVENT_KIND_BUY_REFUND => {
            assert_eq!(name, "gameSessionBuyRefund");
            // SAFETY: non-NULL exactly for this kind, owned by the event.
            let r = unsafe { &*e.buy_refund };
            assert!(e.jackpot_payout.is_null() && e.balance_query.is_null());
            ident("gameSessionIdentifier", r.game_session_identifier, true);
            player(r.player_identifier, r.player_partner_identifier);
            id("transactionId", r.transaction_id);
            id("buyTransactionId", r.buy_transaction_id);
            id("gameSessionId", r.game_session_id);
            ident("partnerGameRequestIdentifier", r.partner_game_request_identifier, true);
            id("gameId", r.game_id);
            assert_eq!(Some(r.is_mobile), boolean("isMobile"));
            ident("bonusCode", r.bonus_code, false);
        }
        sp_event_kind::SP_EVENT_KIND_JACKPOT_PAYOUT => {
            assert_eq!(name, "jackpotPayout");
            // SAFETY: non-NULL exactly for this kind, owned by the event.
            let p = unsafe { &*e.jackpot_payout };
            assert!(e.buy_refund.is_null() && e.balance_query.is_null());
            ident("jackpotIdentifier", p.jackpot_identifier, true);
            player(p.player_identifier, p.player_partner_identifier);
            // SAFETY: the event's own view.
            let currency = unsafe { opt_view("currency", p.currency_iso4217) }.expect("currency");
            assert_eq!(Some(currency), string("currencyISO4217"));
            assert!(currency.len() == 3 && currency.bytes().all(|b| b.is_ascii_uppercase()), "{currency:?}");
            amount("moneyWon", p.money_won);
            amount("coinsWon", p.coins_won);
            assert_eq!(Some(p.is_money), boolean("isMoney"));
            id("epochReleasedMillis", p.epoch_released_millis);
            assert_eq!(Some(p.is_primary), boolean("isPrimary"));
            id("transactionId", p.transaction_id);
            id("buyTransactionId", p.buy_transaction_id);
            ident("partnerGameRequestIdentifier", p.partner_game_request_identifier, true);
            id("gameSessionId", p.game_session_id);
            id("gameId", p.game_id);
            ident("bonusCode", p.bonus_code, false);
            assert_eq!(p.has_is_mobile.then_some(p.is_mobile), boolean("isMobile"));
        }
        sp_event_kind::SP_EVENT_KIND_BALANCE_QUERY => {
            assert_eq!(name, "getPlayerBalance");
            // SAFETY: non-NULL exactly for this kind, owned by the event.
            let q = unsafe { &*e.balance_query };
            assert!(e.buy_refund.is_null() && e.jackpot_payout.is_null());
            player(q.player_identifier, q.player_partner_identifier);
        }
        sp_event_kind::SP_EVENT_KIND_OTHER => {
            assert!(e.buy_refund.is_null() && e.jackpot_payout.is_null() && e.balance_query.is_null());
        }
    }
    // SAFETY: live event, writable out-params.
    unsafe { check_replies(ev, s) };
}

/// The raw text of the index field, when it is among the event's extra fields.
fn expected_index<'r>(reading: &'r Reading<'_>, spec: &[&str], index_name: &str) -> Option<&'r str> {
    if spec.contains(&index_name) {
        return None;
    }
    reading.fields.iter().find(|(k, _)| k == index_name).map(|(_, raw)| raw.get())
}

/// Every accepted event can be answered: known events with a JSON reply, unknown ones refused
/// clearly.
///
/// # Safety
/// `ev` is a live event.
unsafe fn check_replies(ev: *mut sp_event, s: &Setup) {
    // SAFETY: live event, valid arguments.
    unsafe {
        let kind = (*ev).kind;
        let mut out = sp_str::NONE;
        let status = sp_event_reply(ev, false, c"refused by the fuzzer".as_ptr(), &mut out);
        if kind == sp_event_kind::SP_EVENT_KIND_OTHER {
            assert_eq!(last_error(status).2, 400);
        } else {
            assert_eq!(status, SP_OK);
            let reply = plain_value_of(view_bytes("reply", out)).expect("reply is JSON");
            assert!(!slotpartner_fuzz::claims_success(&reply), "{reply}");
        }
        let status = sp_event_reply_balance(ev, 12345, ptr::null(), 0, &mut out);
        if kind == sp_event_kind::SP_EVENT_KIND_BALANCE_QUERY {
            assert_eq!(status, SP_OK);
            let reply = plain_value_of(view_bytes("reply", out)).expect("reply is JSON");
            assert_eq!(reply["playerBalance"]["money"], 12345, "{reply}");
        } else {
            assert_eq!(last_error(status).1, "event");
        }
        if matches!(kind, sp_event_kind::SP_EVENT_KIND_BUY_REFUND | sp_event_kind::SP_EVENT_KIND_JACKPOT_PAYOUT) {
            assert_eq!(sp_event_reply(ev, true, ptr::null(), &mut out), SP_OK);
            let reply = plain_value_of(view_bytes("reply", out)).expect("reply is JSON");
            let inner = reply.as_object().and_then(|o| o.values().next()).expect("a wrapper");
            assert_eq!(inner["success"], true);
            assert_eq!(inner.get("errorMessage").is_none(), s.omit_empty, "{reply}");
        }
    }
}

/// The same request through `sp_receiver_handle_record`: `event` is what `sp_receiver_handle`
/// gave (then still live), `refusal` its status and message otherwise.
///
/// # Safety
/// `receiver` and `event` are live; the strings are NULL or NUL-terminated.
unsafe fn check_record(
    receiver: *const sp_receiver,
    request: [*const std::ffi::c_char; 3],
    body: &[u8],
    event: Result<*mut sp_event, (sp_status, String)>,
) {
    let header = std::mem::size_of::<sp_record>();
    let mut buffer = vec![0u64; (header + body.len() + 8).div_ceil(8)];
    let mut size = 0usize;
    // SAFETY: as promised; the buffer is aligned and writable for its whole length.
    let status = unsafe {
        let record = buffer.as_mut_ptr().cast();
        let [token, remote, forwarded] = request;
        sp_receiver_handle_record(
            receiver,
            token,
            remote,
            forwarded,
            body.as_ptr(),
            body.len(),
            record,
            buffer.len() * 8,
            &mut size,
        )
    };
    match event {
        Err((expected, message)) => {
            assert_eq!(status, expected, "record and handle disagree");
            assert_eq!(last_error(status).0, message);
        }
        Ok(ev) => {
            assert_eq!(status, SP_OK, "refused a record: {}", last_error(status).0);
            // SAFETY: the record was written; the event is live.
            unsafe {
                let record = buffer.as_ptr().cast::<sp_record>().read();
                let e = &*ev;
                assert!(record.size == size && size <= header + body.len() + 8, "{size} bytes");
                assert_eq!((record.kind, record.has_index, record.index), (e.kind, e.has_index, e.index));
                assert_eq!(record.extra_fields_len, e.extra_fields_len);
                let strings = std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>().add(header), record.strings_len);
                assert_eq!(strings, std::slice::from_raw_parts(e.strings, e.strings_len));
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (head, body) = data.split_at(data.len().min(SETUP_BYTES));
    let Ok(setup) = Setup::arbitrary(&mut Unstructured::new(head)) else { return };
    let custom = String::from_utf8_lossy(&setup.custom).into_owned();
    let Some(receiver) = receiver(&setup, &custom) else { return };

    let token = match setup.token {
        Token::Right => Some(c_string(TOKEN)),
        Token::RightUpper => Some(c_string(&TOKEN.to_ascii_uppercase())),
        Token::Second => Some(c_string(SECOND_TOKEN)),
        Token::Missing => None,
        Token::Empty => Some(c_string(b"")),
        Token::Wrong => Some(c_string(b"11111111-2222-3333-4444-555555555555")),
        Token::Custom => Some(c_string(&setup.custom)),
    };
    let remote = match setup.remote {
        Remote::Production => Some(c_string(PRODUCTION.as_bytes())),
        Remote::Staging => Some(c_string(STAGING.as_bytes())),
        Remote::Loopback => Some(c_string(b"127.0.0.1")),
        Remote::MappedProduction => Some(c_string(b"::ffff:18.203.30.17")),
        Remote::Missing => None,
        Remote::NotUtf8 => Some(c_string(b"\xff\xfe")),
        Remote::Custom => Some(c_string(&setup.custom)),
    };
    let forwarded = match setup.forwarded {
        Forwarded::Nothing => None,
        Forwarded::Production => Some(c_string(PRODUCTION.as_bytes())),
        Forwarded::Staging => Some(c_string(STAGING.as_bytes())),
        Forwarded::Chain => Some(c_string(b"1.2.3.4, 18.203.30.17")),
        Forwarded::NotUtf8 => Some(c_string(b"\xc3(")),
        Forwarded::Garbage => Some(c_string(b"nope")),
        Forwarded::Custom => Some(c_string(&setup.custom)),
    };
    let cptr = |c: &Option<CString>| c.as_ref().map_or(ptr::null(), |c| c.as_ptr());

    let sentinel = ptr::dangling_mut::<sp_event>();
    let mut out = sentinel;
    // SAFETY: a live receiver, NUL-terminated strings or NULL, `body` readable, `out` writable.
    let status = unsafe {
        sp_receiver_handle(receiver, cptr(&token), cptr(&remote), cptr(&forwarded), body.as_ptr(), body.len(), &mut out)
    };
    let reading = read_json(body);
    if status == SP_OK {
        assert!(!out.is_null() && out != sentinel);
        let reading = reading.unwrap_or_else(|e| panic!("accepted a body serde_json's grammar refuses: {e}"));
        // SAFETY: the live event just handed out.
        unsafe { check_accepted(&setup, &reading, out) };
        // SAFETY: as above.
        unsafe { check_record(receiver, [cptr(&token), cptr(&remote), cptr(&forwarded)], body, Ok(out)) };
        // SAFETY: freed once.
        unsafe { sp_event_free(out) };
    } else {
        assert_eq!(out, sentinel, "out written on failure {status:?}");
        let (message, _, http, answer) = last_error(status);
        // SAFETY: as above.
        unsafe {
            check_record(
                receiver,
                [cptr(&token), cptr(&remote), cptr(&forwarded)],
                body,
                Err((status, message.clone())),
            )
        };
        // Refused as invalid JSON or UTF-8 only when it is: strict JSON is refused only for the
        // library's own rules (duplicate keys, depth, types, values), which name them.
        if matches!(status, SP_ERR_INVALID_JSON | SP_ERR_INVALID_UTF8) {
            assert!(reading.is_err(), "valid JSON refused as {status:?}: {message}");
        }
        if http == 200 {
            // A known event with invalid fields: its wrapper, success false, a message.
            let inner = answer.as_object().filter(|o| o.len() == 1).and_then(|o| o.values().next());
            let message = inner.and_then(|i| i.get("errorMessage")).and_then(Value::as_str);
            assert!(message.is_some_and(|m| !m.is_empty()), "{answer}");
        }
    }

    // Authentication comes first; once it passes, the body decides alone.
    match auth_model(&setup) {
        Some(Err(expected)) => assert_eq!(status, expected, "{setup:?}"),
        Some(Ok(())) => {
            assert!(!matches!(status, SP_ERR_FORBIDDEN_SOURCE | SP_ERR_MISSING_TOKEN | SP_ERR_WRONG_TOKEN));
            let mut parsed = sentinel;
            // SAFETY: as above.
            let again = unsafe { sp_receiver_parse(receiver, body.as_ptr(), body.len(), &mut parsed) };
            assert_eq!(again, status, "handle and parse disagree");
            if again == SP_OK {
                // SAFETY: freed once.
                unsafe { sp_event_free(parsed) };
            }
        }
        None => {}
    }
    let limit = setup.max_body.map_or(65536, usize::from);
    assert!(status != SP_OK || body.len() <= limit, "accepted {} bytes over a limit of {limit}", body.len());
    // SAFETY: freed once.
    unsafe { sp_receiver_free(receiver) };
});
