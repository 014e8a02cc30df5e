//! The reply builders through the C ABI: `sp_reply_result_new`, `sp_reply_balance_new`,
//! `sp_event_reply`, `sp_event_reply_balance` and `sp_receiver_reply_balance` (into a buffer of
//! any capacity) with any message, wrapper, currency and amounts (as bytes: not UTF-8, control
//! characters, quotes, backslashes, cut at a NUL as C cuts them).
//!
//! Properties: a model of the documented rules predicts whether each call builds a reply and,
//! when not, which argument it names; a built reply parses as JSON and holds exactly the wrapper,
//! the message (round-tripped byte for byte), the amounts and the currency given; a failed build
//! leaves the out-parameter alone and a clear last error (a message naming the argument, an HTTP
//! answer that is JSON); a reply into the host's buffer is written whole with its NUL when it
//! fits, and nothing is written past it or into a buffer too small; everything is freed.
#![no_main]

use std::ffi::CString;
use std::ptr;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use slotpartner::ffi::event::{sp_event, sp_event_free, sp_event_reply, sp_event_reply_balance};
use slotpartner::ffi::receiver::*;
use slotpartner::ffi::reply::{
    sp_buffer, sp_buffer_free, sp_receiver_reply_balance, sp_reply_balance_new, sp_reply_result_new,
};
use slotpartner::ffi::status::sp_status::{self, *};
use slotpartner::ffi::str::sp_str;
use slotpartner_fuzz::{c_string, last_error, view_bytes};

const MAX_AMOUNT: i64 = (1 << 53) - 1;

/// An amount, mostly near the edges of the valid range.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Amount {
    Small(u16),
    Max,
    OverMax,
    Negative(u8),
    Any(i64),
}

impl Amount {
    fn value(self) -> i64 {
        match self {
            Amount::Small(n) => i64::from(n),
            Amount::Max => MAX_AMOUNT,
            Amount::OverMax => MAX_AMOUNT + 1,
            Amount::Negative(n) => -1 - i64::from(n),
            Amount::Any(n) => n,
        }
    }
}

/// A string argument: NULL, or bytes (cut at a NUL) with a few common shapes to start from.
#[derive(Arbitrary, Debug, Clone)]
enum Text {
    Null,
    Bytes(Vec<u8>),
    Str(String),
    Eur,
}

impl Text {
    fn c(&self) -> Option<CString> {
        match self {
            Text::Null => None,
            Text::Bytes(b) => Some(c_string(b)),
            Text::Str(s) => Some(c_string(s.as_bytes())),
            Text::Eur => Some(c_string(b"EUR")),
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq)]
enum Kind {
    Refund,
    Payout,
    Balance,
    Other,
}

#[derive(Arbitrary, Debug)]
enum Call {
    Result { wrapper: Text, success: bool, message: Text, omit: bool },
    Balance { wrapper: Text, money: Amount, currency: Text, coins: Amount, error: Text },
    EventReply { kind: Kind, config: Config, success: bool, message: Text },
    EventBalance { kind: Kind, config: Config, money: Amount, currency: Text, coins: Amount },
    ReceiverBalance { config: Config, money: Amount, currency: Text, coins: Amount, capacity: u8 },
}

#[derive(Arbitrary, Debug)]
struct Config {
    wrapper: Option<Text>,
    currency: Option<Text>,
    failure_status: Option<u16>,
    omit: bool,
}

/// A C argument as the library reads it: `None` for NULL, `Err(())` when not UTF-8.
type Arg = Option<Result<String, ()>>;

fn arg(c: &Option<CString>) -> Arg {
    c.as_ref().map(|c| c.to_str().map(str::to_owned).map_err(|_| ()))
}

fn cptr(c: &Option<CString>) -> *const std::ffi::c_char {
    c.as_ref().map_or(ptr::null(), |c| c.as_ptr())
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && !s.chars().any(char::is_control)
}

fn is_currency(s: &str) -> bool {
    s.len() == 3 && s.bytes().all(|b| b.is_ascii_uppercase())
}

/// A required text argument: the string, or the argument's name as the failure.
fn required(name: &'static str, a: &Arg) -> Result<String, &'static str> {
    match a {
        Some(Ok(s)) => Ok(s.clone()),
        _ => Err(name),
    }
}

/// An optional text argument (NULL is `""`).
fn optional(name: &'static str, a: &Arg) -> Result<String, &'static str> {
    match a {
        None => Ok(String::new()),
        Some(Ok(s)) => Ok(s.clone()),
        Some(Err(())) => Err(name),
    }
}

fn q(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

/// The documented rules of a result reply: the exact text it must be, or the argument it must
/// name.
fn result_model(wrapper: &str, success: bool, message: &str, omit: bool) -> Result<String, &'static str> {
    if !is_name(wrapper) {
        return Err("wrapper");
    }
    if success != message.is_empty() {
        return Err("message");
    }
    Ok(if success && omit {
        format!(r#"{{{}:{{"success":true}}}}"#, q(wrapper))
    } else {
        format!(r#"{{{}:{{"success":{success},"errorMessage":{}}}}}"#, q(wrapper), q(message))
    })
}

/// A refused balance query's reply: no balance stated.
fn balance_failure_model(wrapper: &str, message: &str) -> Result<String, &'static str> {
    if !is_name(wrapper) {
        return Err("wrapper");
    }
    if message.is_empty() {
        return Err("message");
    }
    Ok(format!(r#"{{{}:{{"errorMessage":{}}}}}"#, q(wrapper), q(message)))
}

/// The documented rules of a balance reply.
fn balance_model(wrapper: &str, money: i64, currency: &str, coins: i64, error: &str) -> Result<String, &'static str> {
    if !error.is_empty() {
        return balance_failure_model(wrapper, error);
    }
    if !is_name(wrapper) {
        return Err("wrapper");
    }
    for (name, v) in [("money", money), ("coins", coins)] {
        if !(0..=MAX_AMOUNT).contains(&v) {
            return Err(name);
        }
    }
    if !is_currency(currency) {
        return Err("currency");
    }
    Ok(format!(
        r#"{{{}:{{"money":{money},"currencyISO4217":{},"coins":{coins},"errorMessage":""}}}}"#,
        q(wrapper),
        q(currency)
    ))
}

/// Compares a call's outcome with the model's. `message` is the message the reply must carry.
fn check(status: sp_status, built: Option<&[u8]>, expected: Result<String, &'static str>, message: &str, call: &Call) {
    match expected {
        Ok(expected) => {
            assert_eq!(status, SP_OK, "{call:?}");
            let text = built.expect("a reply");
            let got = slotpartner_fuzz::plain_value_of(text)
                .unwrap_or_else(|e| panic!("reply is not JSON ({e}): {}", String::from_utf8_lossy(text)));
            assert_eq!(text, expected.as_bytes(), "{call:?}");
            // The message round-trips through a JSON reader.
            let inner = got.as_object().filter(|o| o.len() == 1).and_then(|o| o.values().next()).expect("a wrapper");
            let carried = inner.get("errorMessage").map_or(Some(""), Value::as_str);
            assert_eq!(carried, Some(message), "{call:?}");
        }
        Err(field) => {
            assert!(built.is_none());
            let (text, got_field, http, _) = last_error(status);
            assert_eq!(got_field, field, "{call:?}: {text}");
            assert!(text.contains(field), "{text:?} does not name {field}");
            assert!(http == 500 || (status == SP_ERR_UNKNOWN_EVENT && http == 400), "{status:?} {http}");
        }
    }
}

/// Builds `sp_reply_*_new` output and frees it.
fn buffer_text(status: sp_status, out: *mut sp_buffer, sentinel: *mut sp_buffer) -> Option<Vec<u8>> {
    if status != SP_OK {
        assert_eq!(out, sentinel, "out written on failure");
        return None;
    }
    // SAFETY: a live buffer handed out just now, freed once.
    unsafe {
        let text = view_bytes("buffer", (*out).text).to_vec();
        sp_buffer_free(out);
        Some(text)
    }
}

const BODIES: [&[u8]; 4] = [
    br#"{"event":"gameSessionBuyRefund","gameSessionIdentifier":"g","playerIdentifier":"p","transactionId":1,"buyTransactionId":1,"gameSessionId":1,"partnerGameRequestIdentifier":"r","gameId":1,"isMobile":false}"#,
    br#"{"event":"jackpotPayout","jackpotIdentifier":"j","playerIdentifier":"p","currencyISO4217":"EUR","moneyWon":1,"coinsWon":0,"isMoney":true,"epochReleasedMillis":1,"isPrimary":true,"transactionId":5,"buyTransactionId":4,"partnerGameRequestIdentifier":"r","gameSessionId":3,"gameId":2}"#,
    br#"{"action":"getPlayerBalance","playerIdentifier":"p"}"#,
    br#"{"event":"somethingElse","index":3}"#,
];

/// A receiver configured as `config` says, and the settings it took; `None` when a setting was
/// refused (checked against the model).
fn receiver(config: &Config) -> Option<(*mut sp_receiver, String, String, u16)> {
    let (mut cfg, mut receiver) = (ptr::null_mut(), ptr::null_mut());
    let mut wrapper = "playerBalance".to_owned();
    let mut currency = "EUR".to_owned();
    let mut failure_status = 500;
    // SAFETY: live configuration, valid strings, writable out-params.
    unsafe {
        assert_eq!(sp_receiver_config_new(&mut cfg), SP_OK);
        assert_eq!(sp_receiver_config_add_token(cfg, c"6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f".as_ptr()), SP_OK);
        assert_eq!(sp_receiver_config_set_sources(cfg, c"any".as_ptr()), SP_OK);
        assert_eq!(sp_receiver_config_set_omit_empty_error_message(cfg, config.omit), SP_OK);
        let mut ok = true;
        if let Some(text) = &config.wrapper {
            let c = text.c();
            let status = sp_receiver_config_set_balance_wrapper(cfg, cptr(&c));
            match required("balance_wrapper", &arg(&c)).and_then(|w| is_name(&w).then_some(w).ok_or("balance_wrapper"))
            {
                Ok(w) => {
                    assert_eq!(status, SP_OK);
                    wrapper = w;
                }
                Err(field) => {
                    assert_eq!(last_error(status).1, field);
                    ok = false;
                }
            }
        }
        if let Some(text) = &config.currency {
            let c = text.c();
            let status = sp_receiver_config_set_balance_currency(cfg, cptr(&c));
            match required("balance_currency", &arg(&c))
                .and_then(|w| is_currency(&w).then_some(w).ok_or("balance_currency"))
            {
                Ok(w) => {
                    assert_eq!(status, SP_OK);
                    currency = w;
                }
                Err(field) => {
                    assert_eq!(last_error(status).1, field);
                    ok = false;
                }
            }
        }
        if let Some(http) = config.failure_status {
            let status = sp_receiver_config_set_balance_failure_http_status(cfg, http);
            if http == 200 || (400..=599).contains(&http) {
                assert_eq!(status, SP_OK);
                failure_status = http;
            } else {
                assert_eq!(last_error(status).1, "balance_failure_http_status");
                ok = false;
            }
        }
        if ok {
            assert_eq!(sp_receiver_new(cfg, &mut receiver), SP_OK);
        }
        sp_receiver_config_free(cfg);
        ok.then_some((receiver, wrapper, currency, failure_status))
    }
}

/// The event of `kind`, parsed by `receiver`.
fn event(receiver: *const sp_receiver, kind: Kind) -> *mut sp_event {
    let body = BODIES[kind as usize];
    let mut ev = ptr::null_mut();
    // SAFETY: live receiver, readable body, writable out.
    assert_eq!(unsafe { sp_receiver_parse(receiver, body.as_ptr(), body.len(), &mut ev) }, SP_OK);
    ev
}

fuzz_target!(|call: Call| {
    match &call {
        Call::Result { wrapper, success, message, omit } => {
            let (w, m) = (wrapper.c(), message.c());
            let expected = required("wrapper", &arg(&w))
                .and_then(|w| Ok((w, optional("message", &arg(&m))?)))
                .and_then(|(w, m)| result_model(&w, *success, &m, *omit));
            let said = optional("message", &arg(&m)).unwrap_or_default();
            let sentinel = ptr::dangling_mut::<sp_buffer>();
            let mut out = sentinel;
            // SAFETY: NUL-terminated strings or NULL, writable out.
            let status = unsafe { sp_reply_result_new(cptr(&w), *success, cptr(&m), *omit, &mut out) };
            let text = buffer_text(status, out, sentinel);
            check(status, text.as_deref(), expected, &said, &call);
        }
        Call::Balance { wrapper, money, currency, coins, error } => {
            let (w, c, e) = (wrapper.c(), currency.c(), error.c());
            let (money, coins) = (money.value(), coins.value());
            let expected = required("wrapper", &arg(&w))
                .and_then(|w| Ok((w, required("currency", &arg(&c))?, optional("error_message", &arg(&e))?)))
                .and_then(|(w, c, e)| balance_model(&w, money, &c, coins, &e));
            let sentinel = ptr::dangling_mut::<sp_buffer>();
            let mut out = sentinel;
            // SAFETY: NUL-terminated strings or NULL, writable out.
            let status = unsafe { sp_reply_balance_new(cptr(&w), money, cptr(&c), coins, cptr(&e), &mut out) };
            let text = buffer_text(status, out, sentinel);
            let said = optional("error_message", &arg(&e)).unwrap_or_default();
            check(status, text.as_deref(), expected, &said, &call);
        }
        Call::EventReply { kind, config, success, message } => {
            let Some((receiver, wrapper, _, failure_status)) = receiver(config) else { return };
            let ev = event(receiver, *kind);
            let m = message.c();
            let expected = optional("message", &arg(&m)).and_then(|m| match kind {
                Kind::Refund => result_model("refund", *success, &m, config.omit),
                Kind::Payout => result_model("payout", *success, &m, config.omit),
                Kind::Balance if *success => Err("success"),
                Kind::Balance => balance_failure_model(&wrapper, &m),
                Kind::Other => Err("event"),
            });
            let sentinel = sp_str { ptr: c"sentinel".as_ptr(), len: 8 };
            let mut out = sentinel;
            // SAFETY: live event, NUL-terminated string or NULL, writable out.
            let status = unsafe { sp_event_reply(ev, *success, cptr(&m), &mut out) };
            let text = (status == SP_OK).then(|| {
                // SAFETY: the event's own view, valid until it is freed.
                unsafe { view_bytes("reply", out) }.to_vec()
            });
            if status != SP_OK {
                assert_eq!(out.ptr, sentinel.ptr, "out written on failure");
            } else {
                // SAFETY: live event.
                let http = unsafe { (*ev).reply_http_status };
                let want = if *kind == Kind::Balance { failure_status } else { 200 };
                assert_eq!(http, want);
            }
            let said = optional("message", &arg(&m)).unwrap_or_default();
            check(status, text.as_deref(), expected, &said, &call);
            // SAFETY: freed once each.
            unsafe {
                sp_event_free(ev);
                sp_receiver_free(receiver);
            }
        }
        Call::EventBalance { kind, config, money, currency, coins } => {
            let Some((receiver, wrapper, default_currency, _)) = receiver(config) else { return };
            let ev = event(receiver, *kind);
            let c = currency.c();
            let (money, coins) = (money.value(), coins.value());
            let expected = match (kind, arg(&c)) {
                (Kind::Balance, None) => balance_model(&wrapper, money, &default_currency, coins, ""),
                (Kind::Balance, Some(Ok(c))) => balance_model(&wrapper, money, &c, coins, ""),
                (Kind::Balance, Some(Err(()))) => Err("currency"),
                _ => match arg(&c) {
                    Some(Err(())) => Err("currency"),
                    _ => Err("event"),
                },
            };
            let mut out = sp_str::NONE;
            // SAFETY: live event, NUL-terminated string or NULL, writable out.
            let status = unsafe { sp_event_reply_balance(ev, money, cptr(&c), coins, &mut out) };
            let text = (status == SP_OK).then(|| {
                // SAFETY: the event's own view, valid until it is freed.
                unsafe { view_bytes("reply", out) }.to_vec()
            });
            if status == SP_OK {
                // SAFETY: live event.
                assert_eq!(unsafe { (*ev).reply_http_status }, 200);
            } else {
                assert!(out.ptr.is_null(), "out written on failure");
            }
            check(status, text.as_deref(), expected, "", &call);
            // SAFETY: freed once each.
            unsafe {
                sp_event_free(ev);
                sp_receiver_free(receiver);
            }
        }
        Call::ReceiverBalance { config, money, currency, coins, capacity } => {
            let Some((receiver, wrapper, default_currency, _)) = receiver(config) else { return };
            let c = currency.c();
            let (money, coins) = (money.value(), coins.value());
            let expected = match arg(&c) {
                None => balance_model(&wrapper, money, &default_currency, coins, ""),
                Some(Ok(c)) => balance_model(&wrapper, money, &c, coins, ""),
                Some(Err(())) => Err("currency"),
            };
            let capacity = usize::from(*capacity);
            let mut out = vec![0xAAu8; 256];
            let mut len = usize::MAX;
            // SAFETY: live receiver, NUL-terminated string or NULL, `out` writable beyond
            // `capacity`, writable `len`.
            let status = unsafe {
                sp_receiver_reply_balance(receiver, money, cptr(&c), coins, out.as_mut_ptr().cast(), capacity, &mut len)
            };
            match &expected {
                Ok(text) if capacity <= text.len() => {
                    assert_eq!(last_error(status).1, "capacity", "{call:?}");
                    assert_eq!(len, text.len());
                    assert!(out.iter().all(|&b| b == 0xAA), "written into a buffer too small");
                }
                Ok(text) => {
                    assert_eq!(len, text.len());
                    assert_eq!(out[len], 0, "NUL-terminated");
                    assert!(out[len + 1..].iter().all(|&b| b == 0xAA), "written past the NUL");
                    check(status, Some(&out[..len]), expected.clone(), "", &call);
                }
                Err(_) => {
                    assert_eq!(len, usize::MAX, "len written on failure");
                    assert!(out.iter().all(|&b| b == 0xAA), "written on failure");
                    check(status, None, expected.clone(), "", &call);
                }
            }
            // SAFETY: freed once.
            unsafe { sp_receiver_free(receiver) };
        }
    }
});
