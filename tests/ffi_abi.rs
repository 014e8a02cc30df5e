//! The C ABI called from Rust exactly as a C host calls it: raw pointers, sentinel out-params,
//! string views read through `ptr`/`len` and checked for their NUL terminator.

use std::ffi::{CStr, c_char};
use std::ptr;

use serde_json::{Value, json};
use slotpartner::ffi::error::{
    sp_error, sp_last_error, sp_last_error_field, sp_last_error_message, sp_last_error_response,
};
use slotpartner::ffi::event::{
    sp_balance_query, sp_buy_refund, sp_event, sp_event_field, sp_event_free, sp_event_kind, sp_event_reply,
    sp_event_reply_balance, sp_jackpot_payout,
};
use slotpartner::ffi::receiver::*;
use slotpartner::ffi::reply::{sp_buffer, sp_buffer_free, sp_reply_balance_new, sp_reply_result_new};
use slotpartner::ffi::status::sp_status::{self, *};
use slotpartner::ffi::status::{ALL_STATUSES, sp_status_name};
use slotpartner::ffi::str::sp_str;
use slotpartner::ffi::version::{SP_VERSION_MAJOR, SP_VERSION_MINOR, SP_VERSION_PATCH, sp_version};

mod common;
use common::{TOKEN, receiver};

const OTHER_TOKEN: &CStr = c"11111111-2222-3333-4444-555555555555";
const PRODUCTION: &CStr = c"18.203.30.17";
const STAGING: &CStr = c"34.254.138.20";
const BAD_UTF8: &CStr = c"\xff\xfe";

const REFUND: &str = concat!(
    r#"{"event":"gameSessionBuyRefund","index":42,"gameSessionIdentifier":"gs-1","playerIdentifier":"p-1","#,
    r#""transactionId":1001,"buyTransactionId":1000,"gameSessionId":77,"partnerGameRequestIdentifier":"req-1","#,
    r#""gameId":7,"isMobile":true,"bonusCode":"B\u00e9","traceId":{"a": [1, "x"]}}"#
);
const BALANCE: &str = r#"{"action":"getPlayerBalance","playerPartnerIdentifier":"pp-3"}"#;
const OTHER: &str = r#"{"event":"gameSessionStart","index":3,"data":[1, 2]}"#;
const BAD_PAYOUT_MESSAGE: &str = "jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5";

fn payout() -> Value {
    json!({
        "event": "jackpotPayout",
        "jackpotIdentifier": "jp-1",
        "playerIdentifier": "p-2",
        "playerPartnerIdentifier": "pp-2",
        "currencyISO4217": "EUR",
        "moneyWon": 150000,
        "coinsWon": 25,
        "isMoney": false,
        "epochReleasedMillis": 1_700_000_000_123_i64,
        "isPrimary": true,
        "transactionId": 2001,
        "buyTransactionId": 2000,
        "partnerGameRequestIdentifier": "req-2",
        "gameSessionId": 88,
        "gameId": 9
    })
}

fn bad_payout() -> Vec<u8> {
    serde_json::to_string(&payout()).unwrap().replace("150000", "1500.5").into_bytes()
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// The text of a view: non-NULL, NUL at `ptr[len]`, no NUL inside, UTF-8.
fn text<'a>(s: sp_str) -> &'a str {
    assert!(!s.ptr.is_null(), "NULL view");
    // SAFETY: the library promises `len` bytes and a NUL terminator at `ptr`.
    let bytes = unsafe { std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len + 1) };
    assert_eq!(bytes[s.len], 0, "not NUL-terminated");
    assert!(!bytes[..s.len].contains(&0), "NUL inside");
    std::str::from_utf8(&bytes[..s.len]).expect("UTF-8")
}

/// An optional view: `{NULL, 0}` when absent.
fn opt_text<'a>(s: sp_str) -> Option<&'a str> {
    if s.ptr.is_null() {
        assert_eq!(s.len, 0);
        None
    } else {
        Some(text(s))
    }
}

fn c_str<'a>(p: *const c_char) -> &'a str {
    // SAFETY: the library returns static NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap()
}

fn last_message() -> String {
    text(sp_last_error_message()).to_owned()
}

fn last_field() -> String {
    text(sp_last_error_field()).to_owned()
}

fn last_response() -> (u16, String) {
    let (mut status, mut body) = (0, sp_str::NONE);
    // SAFETY: both out-params are writable.
    assert_eq!(unsafe { sp_last_error_response(&mut status, &mut body) }, SP_OK);
    (status, text(body).to_owned())
}

/// Asserts a failure with `status` about `field`, its message starting with the field.
fn assert_failed(got: sp_status, status: sp_status, field: &str) {
    assert_eq!(got, status, "{}", last_message());
    assert_eq!(last_field(), field);
    let message = last_message();
    assert!(message.starts_with(&format!("{field}: ")) && message.len() > field.len() + 2, "{message}");
}

fn sentinel_str() -> sp_str {
    sp_str::from_static(c"sentinel")
}

fn assert_untouched(s: sp_str) {
    assert!(ptr::eq(s.ptr, c"sentinel".as_ptr()) && s.len == 8, "out-param written on failure");
}

fn opt_ptr(s: Option<&CStr>) -> *const c_char {
    s.map_or(ptr::null(), CStr::as_ptr)
}

/// `sp_receiver_handle` with a sentinel out-param, which must be written exactly on success.
fn handle(r: *const sp_receiver, token: Option<&CStr>, addr: &CStr, body: &[u8]) -> Result<*mut sp_event, sp_status> {
    let sentinel = ptr::dangling_mut::<sp_event>();
    let mut out = sentinel;
    // SAFETY: valid pointers; `body` is readable for its length.
    let status = unsafe {
        sp_receiver_handle(r, opt_ptr(token), addr.as_ptr(), ptr::null(), body.as_ptr(), body.len(), &mut out)
    };
    if status == SP_OK {
        assert!(!out.is_null() && out != sentinel);
        assert!(last_message().is_empty() && last_field().is_empty());
        Ok(out)
    } else {
        assert_eq!(out, sentinel, "out written on failure");
        assert!(!last_message().is_empty());
        Err(status)
    }
}

fn handle_ok(r: *const sp_receiver, body: &str) -> *mut sp_event {
    handle(r, Some(TOKEN), PRODUCTION, body.as_bytes()).unwrap_or_else(|s| panic!("{s:?}: {}", last_message()))
}

fn event<'a>(ev: *mut sp_event) -> &'a sp_event {
    // SAFETY: a live event from handle_ok.
    unsafe { &*ev }
}

fn extras(ev: &sp_event) -> Vec<(&str, &str)> {
    if ev.extra_fields_len == 0 {
        assert!(ev.extra_fields.is_null());
        return Vec::new();
    }
    // SAFETY: the event owns `extra_fields_len` fields at `extra_fields`.
    let fields = unsafe { std::slice::from_raw_parts(ev.extra_fields, ev.extra_fields_len) };
    fields.iter().map(|f| (text(f.name), text(f.json))).collect()
}

fn field(ev: *mut sp_event, name: &CStr) -> Result<String, sp_status> {
    let mut out = sentinel_str();
    // SAFETY: valid pointers.
    match unsafe { sp_event_field(ev, name.as_ptr(), &mut out) } {
        SP_OK => Ok(text(out).to_owned()),
        status => {
            assert_untouched(out);
            Err(status)
        }
    }
}

fn reply(ev: *mut sp_event, success: bool, message: Option<&CStr>) -> Result<String, sp_status> {
    let mut out = sentinel_str();
    // SAFETY: valid pointers.
    match unsafe { sp_event_reply(ev, success, opt_ptr(message), &mut out) } {
        SP_OK => Ok(text(out).to_owned()),
        status => {
            assert_untouched(out);
            Err(status)
        }
    }
}

fn reply_balance(ev: *mut sp_event, money: i64, currency: Option<&CStr>, coins: i64) -> Result<String, sp_status> {
    let mut out = sentinel_str();
    // SAFETY: valid pointers.
    match unsafe { sp_event_reply_balance(ev, money, opt_ptr(currency), coins, &mut out) } {
        SP_OK => Ok(text(out).to_owned()),
        status => {
            assert_untouched(out);
            Err(status)
        }
    }
}

/// Runs a buffer constructor with a sentinel out-param; the text on success (buffer freed).
fn buffer(make: impl FnOnce(*mut *mut sp_buffer) -> sp_status) -> Result<String, sp_status> {
    let sentinel = ptr::dangling_mut::<sp_buffer>();
    let mut out = sentinel;
    match make(&mut out) {
        SP_OK => {
            // SAFETY: a live buffer handed out on success; freed right after reading.
            let t = text(unsafe { (*out).text }).to_owned();
            unsafe { sp_buffer_free(out) };
            Ok(t)
        }
        status => {
            assert_eq!(out, sentinel, "out written on failure");
            Err(status)
        }
    }
}

fn free_event(ev: *mut sp_event) {
    // SAFETY: a live event, not used afterwards.
    unsafe { sp_event_free(ev) }
}

// ---------------------------------------------------------------------------------------------
// NULL and non-UTF-8 arguments

#[test]
fn null_pointer_arguments_are_refused_naming_them() {
    let r = receiver(|_| {});
    let ev = handle_ok(r, REFUND);
    let bal = handle_ok(r, BALANCE);
    let null = |got: sp_status, name: &str| {
        assert_failed(got, SP_ERR_INVALID_ARGUMENT, name);
        assert_eq!(last_message(), format!("{name}: must not be NULL"));
    };
    let body = REFUND.as_bytes();
    let (mut config, dangling_r) = (ptr::null_mut(), ptr::dangling_mut::<sp_receiver>());
    let (mut out_r, mut out_ev, mut out_s) = (dangling_r, ptr::dangling_mut::<sp_event>(), sentinel_str());
    // SAFETY: every pointer is NULL or valid; NULL is what is being tested.
    unsafe {
        assert_eq!(sp_receiver_config_new(&mut config), SP_OK);
        null(sp_receiver_config_new(ptr::null_mut()), "out");
        let no_config = ptr::null_mut();
        null(sp_receiver_config_add_token(no_config, TOKEN.as_ptr()), "config");
        null(sp_receiver_config_set_sources(no_config, c"any".as_ptr()), "config");
        null(sp_receiver_config_set_trusted_proxies(no_config, c"".as_ptr()), "config");
        null(sp_receiver_config_set_max_body_bytes(no_config, 100), "config");
        null(sp_receiver_config_set_max_depth(no_config, 3), "config");
        null(sp_receiver_config_set_max_identifier_bytes(no_config, 3), "config");
        null(sp_receiver_config_set_index_field(no_config, c"seq".as_ptr()), "config");
        null(sp_receiver_config_set_reject_unknown_events(no_config, true), "config");
        null(sp_receiver_config_set_balance_wrapper(no_config, c"b".as_ptr()), "config");
        null(sp_receiver_config_set_balance_currency(no_config, c"USD".as_ptr()), "config");
        null(sp_receiver_config_set_omit_empty_error_message(no_config, true), "config");
        null(sp_receiver_config_add_token(config, ptr::null()), "token");
        null(sp_receiver_config_set_sources(config, ptr::null()), "sources");
        null(sp_receiver_config_set_trusted_proxies(config, ptr::null()), "trusted_proxies");
        null(sp_receiver_config_set_index_field(config, ptr::null()), "index_field");
        null(sp_receiver_config_set_balance_wrapper(config, ptr::null()), "balance_wrapper");
        null(sp_receiver_config_set_balance_currency(config, ptr::null()), "balance_currency");
        assert_eq!(sp_receiver_config_add_token(config, TOKEN.as_ptr()), SP_OK);
        null(sp_receiver_new(ptr::null(), &mut out_r), "config");
        null(sp_receiver_new(config, ptr::null_mut()), "out");
        assert_eq!(out_r, dangling_r);

        let (t, a) = (TOKEN.as_ptr(), PRODUCTION.as_ptr());
        null(sp_receiver_handle(ptr::null(), t, a, ptr::null(), body.as_ptr(), body.len(), &mut out_ev), "receiver");
        null(
            sp_receiver_handle(ptr::null(), t, a, ptr::null(), body.as_ptr(), body.len(), ptr::null_mut()),
            "receiver",
        );
        null(sp_receiver_handle(r, t, a, ptr::null(), body.as_ptr(), body.len(), ptr::null_mut()), "out");
        null(sp_receiver_handle(r, t, a, ptr::null(), ptr::null(), 5, &mut out_ev), "body");
        null(sp_receiver_parse(ptr::null(), body.as_ptr(), body.len(), &mut out_ev), "receiver");
        null(sp_receiver_parse(r, body.as_ptr(), body.len(), ptr::null_mut()), "out");
        null(sp_receiver_parse(r, ptr::null(), 1, &mut out_ev), "body");
        assert_eq!(out_ev, ptr::dangling_mut());
        // NULL token, address and empty body are not argument errors: they are what they say.
        let missing = sp_receiver_handle(r, ptr::null(), a, ptr::null(), body.as_ptr(), body.len(), &mut out_ev);
        assert_failed(missing, SP_ERR_MISSING_TOKEN, "X-Service-Token");
        let unknown = sp_receiver_handle(r, t, ptr::null(), ptr::null(), body.as_ptr(), body.len(), &mut out_ev);
        assert_failed(unknown, SP_ERR_FORBIDDEN_SOURCE, "remote_addr");
        assert_eq!(sp_receiver_handle(r, t, a, ptr::null(), ptr::null(), 0, &mut out_ev), SP_ERR_INVALID_JSON);
        assert_eq!(sp_receiver_parse(r, ptr::null(), 0, &mut out_ev), SP_ERR_INVALID_JSON);
        assert_eq!(out_ev, ptr::dangling_mut());

        null(sp_event_reply(ptr::null_mut(), true, ptr::null(), &mut out_s), "event");
        null(sp_event_reply(ev, true, ptr::null(), ptr::null_mut()), "out");
        null(sp_event_reply_balance(ptr::null_mut(), 1, ptr::null(), 0, &mut out_s), "event");
        null(sp_event_reply_balance(bal, 1, ptr::null(), 0, ptr::null_mut()), "out");
        null(sp_event_field(ptr::null(), c"gameId".as_ptr(), &mut out_s), "event");
        null(sp_event_field(ev, ptr::null(), &mut out_s), "name");
        null(sp_event_field(ev, c"gameId".as_ptr(), ptr::null_mut()), "out");
        assert_untouched(out_s);
    }
    let (n, b) = (ptr::null(), c"b".as_ptr());
    null(buffer(|out| unsafe { sp_reply_result_new(n, true, n, false, out) }).unwrap_err(), "wrapper");
    null(buffer(|_| unsafe { sp_reply_result_new(b, true, n, false, ptr::null_mut()) }).unwrap_err(), "out");
    null(buffer(|out| unsafe { sp_reply_balance_new(n, 1, c"EUR".as_ptr(), 0, n, out) }).unwrap_err(), "wrapper");
    null(buffer(|out| unsafe { sp_reply_balance_new(b, 1, n, 0, n, out) }).unwrap_err(), "currency");
    null(buffer(|_| unsafe { sp_reply_balance_new(b, 1, c"EUR".as_ptr(), 0, n, ptr::null_mut()) }).unwrap_err(), "out");
    // Optional strings may be NULL.
    assert_eq!(reply(ev, true, None).unwrap(), r#"{"refund":{"success":true,"errorMessage":""}}"#);
    assert!(reply_balance(bal, 1, None, 0).is_ok());
    // SAFETY: the `_free` functions accept NULL; the objects are live and freed once.
    unsafe {
        sp_receiver_config_free(ptr::null_mut());
        sp_receiver_free(ptr::null_mut());
        sp_event_free(ptr::null_mut());
        sp_buffer_free(ptr::null_mut());
        sp_receiver_config_free(config);
        sp_event_free(ev);
        sp_event_free(bal);
        sp_receiver_free(r);
    }
}

/// The action-address client's functions check their pointers the same way (no network here).
#[test]
fn client_functions_refuse_null_arguments() {
    use slotpartner::ffi::client::*;
    use slotpartner::ffi::games::sp_games_free;
    let null = |got: sp_status, name: &str| assert_failed(got, SP_ERR_INVALID_ARGUMENT, name);
    let (url, token) = (c"https://service.example".as_ptr(), TOKEN.as_ptr());
    let (mut config, mut client) = (ptr::null_mut(), ptr::dangling_mut::<sp_client>());
    let mut games = ptr::dangling_mut();
    let mut buf = ptr::dangling_mut::<sp_buffer>();
    // SAFETY: every pointer is NULL or valid; NULL is what is being tested.
    unsafe {
        null(sp_client_config_new(ptr::null(), token, &mut config), "base_url");
        null(sp_client_config_new(url, ptr::null(), &mut config), "token");
        null(sp_client_config_new(url, token, ptr::null_mut()), "out");
        assert!(config.is_null());
        null(sp_client_config_set_connect_timeout_ms(ptr::null_mut(), 1), "config");
        null(sp_client_config_set_timeout_ms(ptr::null_mut(), 1), "config");
        null(sp_client_config_set_retries(ptr::null_mut(), 1, 1), "config");
        null(sp_client_config_set_trust_roots(ptr::null_mut(), 0), "config");
        null(sp_client_config_add_ca_pem(ptr::null_mut(), b"x".as_ptr(), 1), "config");
        null(sp_client_config_add_ca_file(ptr::null_mut(), c"/x".as_ptr()), "config");
        null(sp_client_config_set_proxy(ptr::null_mut(), ptr::null()), "config");
        null(sp_client_config_set_max_response_bytes(ptr::null_mut(), 1), "config");
        null(sp_client_config_set_lenient_games(ptr::null_mut(), true), "config");
        assert_eq!(sp_client_config_new(url, token, &mut config), SP_OK);
        null(sp_client_config_add_ca_pem(config, ptr::null(), 5), "pem");
        null(sp_client_config_add_ca_file(config, ptr::null()), "path");
        null(sp_client_new(ptr::null(), &mut client), "config");
        null(sp_client_new(config, ptr::null_mut()), "out");
        assert_eq!(client, ptr::dangling_mut());
        assert_eq!(sp_client_new(config, &mut client), SP_OK);
        null(sp_client_get_games(ptr::null(), c"en-GB".as_ptr(), -1, &mut games), "client");
        null(sp_client_get_games(client, ptr::null(), -1, &mut games), "locale");
        null(sp_client_get_games(client, c"en-GB".as_ptr(), -1, ptr::null_mut()), "out");
        assert_eq!(games, ptr::dangling_mut());
        null(sp_client_call(ptr::null(), c"getGames".as_ptr(), ptr::null(), 0, &mut buf), "client");
        null(sp_client_call(client, ptr::null(), ptr::null(), 0, &mut buf), "action");
        null(sp_client_call(client, c"getGames".as_ptr(), ptr::null(), 3, &mut buf), "params");
        null(sp_client_call(client, c"getGames".as_ptr(), ptr::null(), 0, ptr::null_mut()), "out");
        assert_eq!(buf, ptr::dangling_mut());
        sp_client_free(ptr::null_mut());
        sp_client_config_free(ptr::null_mut());
        sp_games_free(ptr::null_mut());
        sp_client_free(client);
        sp_client_config_free(config);
    }
}

#[test]
fn last_error_response_with_null_out_params_writes_nothing_and_keeps_the_error() {
    let r = receiver(|_| {});
    assert_eq!(handle(r, Some(OTHER_TOKEN), PRODUCTION, b"{}"), Err(SP_ERR_WRONG_TOKEN));
    let (mut status, mut body) = (7_u16, sentinel_str());
    // SAFETY: NULL or writable out-params.
    unsafe {
        assert_eq!(sp_last_error_response(ptr::null_mut(), &mut body), SP_ERR_INVALID_ARGUMENT);
        assert_eq!(sp_last_error_response(&mut status, ptr::null_mut()), SP_ERR_INVALID_ARGUMENT);
        assert_eq!(sp_last_error_response(ptr::null_mut(), ptr::null_mut()), SP_ERR_INVALID_ARGUMENT);
    }
    assert_untouched(body);
    assert_eq!(status, 7);
    // It reads the last error and so does not replace it.
    assert_eq!(last_field(), "X-Service-Token");
    assert_eq!(last_response().0, 401);
    // SAFETY: a live receiver, freed once.
    unsafe { sp_receiver_free(r) };
}

#[test]
fn non_utf8_strings_are_refused_naming_them() {
    let r = receiver(|c| unsafe {
        assert_eq!(sp_receiver_config_set_trusted_proxies(c, c"10.0.0.0/8".as_ptr()), SP_OK);
    });
    let body = REFUND.as_bytes();
    let mut out = ptr::dangling_mut::<sp_event>();
    let mut config = ptr::null_mut();
    // SAFETY: valid pointers; the strings are NUL-terminated.
    unsafe {
        // A remote address that is not UTF-8 is no address: a refused source (403), not an
        // internal error; under sources `any` it is not looked at.
        let got =
            sp_receiver_handle(r, TOKEN.as_ptr(), BAD_UTF8.as_ptr(), ptr::null(), body.as_ptr(), body.len(), &mut out);
        assert_failed(got, SP_ERR_FORBIDDEN_SOURCE, "remote_addr");
        assert!(last_message().contains("UTF-8"));
        assert_eq!(last_response().0, 403);
        let any = receiver(|c| assert_eq!(sp_receiver_config_set_sources(c, c"any".as_ptr()), SP_OK));
        let got = sp_receiver_handle(
            any,
            TOKEN.as_ptr(),
            BAD_UTF8.as_ptr(),
            ptr::null(),
            body.as_ptr(),
            body.len(),
            &mut out,
        );
        assert_eq!(got, SP_OK);
        sp_event_free(out);
        sp_receiver_free(any);
        out = ptr::dangling_mut();
        let (t, proxy) = (TOKEN.as_ptr(), c"10.0.0.1".as_ptr());
        // X-Forwarded-For is bytes: from a trusted proxy, non-UTF-8 is a refused source (403),
        // never an internal error.
        let got = sp_receiver_handle(r, t, proxy, BAD_UTF8.as_ptr(), body.as_ptr(), body.len(), &mut out);
        assert_failed(got, SP_ERR_FORBIDDEN_SOURCE, "remote_addr");
        // The token is compared as bytes: a non-UTF-8 one is just wrong.
        let got = sp_receiver_handle(
            r,
            BAD_UTF8.as_ptr(),
            PRODUCTION.as_ptr(),
            ptr::null(),
            body.as_ptr(),
            body.len(),
            &mut out,
        );
        assert_failed(got, SP_ERR_WRONG_TOKEN, "X-Service-Token");
        assert_eq!(out, ptr::dangling_mut());

        assert_eq!(sp_receiver_config_new(&mut config), SP_OK);
        assert_failed(sp_receiver_config_add_token(config, BAD_UTF8.as_ptr()), SP_ERR_INVALID_ARGUMENT, "token");
        assert_failed(sp_receiver_config_set_sources(config, BAD_UTF8.as_ptr()), SP_ERR_INVALID_ARGUMENT, "sources");
        assert_failed(
            sp_receiver_config_set_index_field(config, BAD_UTF8.as_ptr()),
            SP_ERR_INVALID_ARGUMENT,
            "index_field",
        );
        sp_receiver_config_free(config);
    }
    let ev = handle_ok(r, REFUND);
    assert_eq!(reply(ev, false, Some(BAD_UTF8)), Err(SP_ERR_INVALID_ARGUMENT));
    assert_eq!(last_field(), "message");
    assert_eq!(field(ev, BAD_UTF8), Err(SP_ERR_INVALID_ARGUMENT));
    assert_eq!(last_field(), "name");
    let got = buffer(|o| unsafe { sp_reply_result_new(c"refund".as_ptr(), false, BAD_UTF8.as_ptr(), false, o) });
    assert_failed(got.unwrap_err(), SP_ERR_INVALID_ARGUMENT, "message");
    free_event(ev);
    // SAFETY: a live receiver, freed once.
    unsafe { sp_receiver_free(r) };
}

// ---------------------------------------------------------------------------------------------
// Events through sp_receiver_handle

#[test]
fn refund_is_read_from_plain_structs() {
    let r = receiver(|_| {});
    let ev = handle_ok(r, REFUND);
    let e = event(ev);
    assert_eq!(
        (e.kind, text(e.name), e.has_index, e.index),
        (sp_event_kind::SP_EVENT_KIND_BUY_REFUND, "gameSessionBuyRefund", true, 42)
    );
    assert!(e.jackpot_payout.is_null() && e.balance_query.is_null() && !e.buy_refund.is_null());
    // SAFETY: non-NULL, owned by the live event.
    let b = unsafe { &*e.buy_refund };
    assert_eq!(text(b.game_session_identifier), "gs-1");
    assert_eq!((opt_text(b.player_identifier), opt_text(b.player_partner_identifier)), (Some("p-1"), None));
    assert_eq!((b.transaction_id, b.buy_transaction_id, b.game_session_id, b.game_id), (1001, 1000, 77, 7));
    assert_eq!(
        (text(b.partner_game_request_identifier), b.is_mobile, opt_text(b.bonus_code)),
        ("req-1", true, Some("Bé"))
    );
    assert_eq!(extras(e), [("index", "42"), ("traceId", r#"{"a": [1, "x"]}"#)]);

    // sp_event_field reads extra fields, exactly as sent; spec fields are read from the struct.
    assert_eq!(field(ev, c"traceId").as_deref(), Ok(r#"{"a": [1, "x"]}"#));
    assert_eq!(field(ev, c"index").as_deref(), Ok("42"));
    assert_eq!(field(ev, c"gameId"), Err(SP_ERR_MISSING_FIELD));
    assert_eq!(last_field(), "gameId");
    assert_eq!(field(ev, c"playerPartnerIdentifier"), Err(SP_ERR_MISSING_FIELD));
    assert_eq!(last_field(), "playerPartnerIdentifier");
    assert!(last_message().starts_with("playerPartnerIdentifier: "));

    assert_eq!(reply(ev, true, None).unwrap(), r#"{"refund":{"success":true,"errorMessage":""}}"#);
    assert_eq!(reply(ev, true, Some(c"")).unwrap(), r#"{"refund":{"success":true,"errorMessage":""}}"#);
    // A second reply replaces the first.
    let failure = reply(ev, false, Some(c"session \"gs-1\" ended\n")).unwrap();
    assert_eq!(failure, r#"{"refund":{"success":false,"errorMessage":"session \"gs-1\" ended\n"}}"#);
    assert_eq!(reply(ev, true, Some(c"x")), Err(SP_ERR_INVALID_ARGUMENT));
    assert_eq!(last_field(), "message");
    assert_eq!(reply(ev, false, None), Err(SP_ERR_INVALID_ARGUMENT));
    assert_eq!(reply_balance(ev, 1, None, 0), Err(SP_ERR_INVALID_ARGUMENT));
    assert_eq!(last_field(), "event");
    // Views stay valid after replies were built.
    assert_eq!((text(b.game_session_identifier), field(ev, c"index").as_deref()), ("gs-1", Ok("42")));
    free_event(ev);
    // SAFETY: a live receiver, freed once.
    unsafe { sp_receiver_free(r) };
}

#[test]
fn payout_is_read_from_plain_structs() {
    let r = receiver(|_| {});
    for is_mobile in [None, Some(false), Some(true)] {
        let mut v = payout();
        if let Some(m) = is_mobile {
            v["isMobile"] = json!(m);
            v["bonusCode"] = json!("BC-1");
        }
        let ev = handle_ok(r, &v.to_string());
        let e = event(ev);
        assert_eq!(
            (e.kind, text(e.name), e.has_index),
            (sp_event_kind::SP_EVENT_KIND_JACKPOT_PAYOUT, "jackpotPayout", false)
        );
        assert!(e.buy_refund.is_null() && e.balance_query.is_null() && !e.jackpot_payout.is_null());
        // SAFETY: non-NULL, owned by the live event.
        let p = unsafe { &*e.jackpot_payout };
        assert_eq!((text(p.jackpot_identifier), opt_text(p.player_identifier)), ("jp-1", Some("p-2")));
        assert_eq!((opt_text(p.player_partner_identifier), text(p.currency_iso4217)), (Some("pp-2"), "EUR"));
        assert_eq!(
            (p.money_won, p.coins_won, p.is_money, p.epoch_released_millis),
            (150000, 25, false, 1_700_000_000_123)
        );
        assert_eq!((p.is_primary, p.transaction_id, p.buy_transaction_id), (true, 2001, 2000));
        assert_eq!((text(p.partner_game_request_identifier), p.game_session_id, p.game_id), ("req-2", 88, 9));
        assert_eq!((p.has_is_mobile, p.is_mobile), (is_mobile.is_some(), is_mobile == Some(true)));
        assert_eq!(opt_text(p.bonus_code), is_mobile.map(|_| "BC-1"));
        assert!(extras(e).is_empty());
        assert_eq!(reply(ev, true, None).unwrap(), r#"{"payout":{"success":true,"errorMessage":""}}"#);
        assert_eq!(
            reply(ev, false, Some(c"jackpot unknown")).unwrap(),
            r#"{"payout":{"success":false,"errorMessage":"jackpot unknown"}}"#
        );
        free_event(ev);
    }
    // SAFETY: a live receiver, freed once.
    unsafe { sp_receiver_free(r) };
}

#[test]
fn balance_query_and_its_replies() {
    let r = receiver(|_| {});
    let ev = handle_ok(r, BALANCE);
    let e = event(ev);
    assert_eq!(
        (e.kind, text(e.name), e.has_index),
        (sp_event_kind::SP_EVENT_KIND_BALANCE_QUERY, "getPlayerBalance", false)
    );
    assert!(e.buy_refund.is_null() && e.jackpot_payout.is_null() && e.extra_fields.is_null());
    // SAFETY: non-NULL, owned by the live event.
    let q = unsafe { &*e.balance_query };
    assert_eq!((opt_text(q.player_identifier), opt_text(q.player_partner_identifier)), (None, Some("pp-3")));
    assert_eq!(
        reply_balance(ev, 12345, None, 0).unwrap(),
        r#"{"playerBalance":{"money":12345,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#
    );
    assert_eq!(
        reply_balance(ev, (1 << 53) - 1, Some(c"USD"), 3).unwrap(),
        r#"{"playerBalance":{"money":9007199254740991,"currencyISO4217":"USD","coins":3,"errorMessage":""}}"#
    );
    for (money, currency, coins, name) in
        [(-1, None, 0, "money"), (1 << 53, None, 0, "money"), (0, None, -1, "coins"), (0, Some(c"eur"), 0, "currency")]
    {
        assert_failed(reply_balance(ev, money, currency, coins).unwrap_err(), SP_ERR_INVALID_ARGUMENT, name);
    }
    assert_eq!(event(ev).reply_http_status, 200);
    // A refused balance query states no balance, and is sent with an error status by default.
    assert_eq!(
        reply(ev, false, Some(c"player blocked")).unwrap(),
        r#"{"playerBalance":{"errorMessage":"player blocked"}}"#
    );
    assert_eq!(event(ev).reply_http_status, 500);
    assert_failed(reply(ev, true, None).unwrap_err(), SP_ERR_INVALID_ARGUMENT, "success");
    free_event(ev);
    // SAFETY: a live receiver, freed once.
    unsafe { sp_receiver_free(r) };
}

#[test]
fn unknown_event_is_passed_through_and_has_no_reply() {
    let r = receiver(|_| {});
    let ev = handle_ok(r, OTHER);
    let e = event(ev);
    assert_eq!(
        (e.kind, text(e.name), e.has_index, e.index),
        (sp_event_kind::SP_EVENT_KIND_OTHER, "gameSessionStart", true, 3)
    );
    assert!(e.buy_refund.is_null() && e.jackpot_payout.is_null() && e.balance_query.is_null());
    assert_eq!(extras(e), [("index", "3"), ("data", "[1, 2]")]);
    assert_eq!(field(ev, c"data").as_deref(), Ok("[1, 2]"));
    assert_eq!(field(ev, c"event"), Err(SP_ERR_MISSING_FIELD), "the name is not an extra field");
    assert_failed(reply(ev, true, None).unwrap_err(), SP_ERR_UNKNOWN_EVENT, "event");
    let (status, body) = last_response();
    assert_eq!(status, 400);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((v["error"]["code"].as_str(), v["error"]["field"].as_str()), (Some("unknown_event"), Some("event")));
    assert!(v["error"]["message"].as_str().unwrap().contains("gameSessionStart"));
    free_event(ev);
    let bare = handle_ok(r, r#"{"action":"getGames"}"#);
    assert_eq!((text(event(bare).name), extras(event(bare)).len(), event(bare).has_index), ("getGames", 0, false));
    free_event(bare);
    // SAFETY: a live receiver, freed once.
    unsafe { sp_receiver_free(r) };
}

/// The event's `strings` block split at its NULs, without the empty tail after the last one.
fn strings_block(ev: &sp_event) -> Vec<&str> {
    // SAFETY: the block is owned by the live event: `strings_len` readable bytes.
    let bytes = unsafe { std::slice::from_raw_parts(ev.strings, ev.strings_len) };
    let mut parts: Vec<&str> = bytes.split(|&b| b == 0).map(|s| std::str::from_utf8(s).unwrap()).collect();
    assert_eq!(parts.pop(), Some(""), "the block ends with a NUL");
    parts
}

#[test]
fn every_string_of_an_event_is_in_one_block_in_the_documented_order() {
    let r = receiver(|_| {});
    let mut v = payout();
    v["index"] = json!(7);
    v["note"] = json!({"a": "é"});
    let ev = handle_ok(r, &v.to_string());
    let e = event(ev);
    // SAFETY: non-NULL, owned by the live event.
    let p = unsafe { &*e.jackpot_payout };
    let block = strings_block(e);
    assert_eq!(block.len(), 6 + 2 * e.extra_fields_len + 1);
    assert_eq!(block[..6], ["jp-1", "p-2", "pp-2", "EUR", "req-2", ""], "bonusCode is absent");
    assert_eq!(block[6..], ["index", "7", "note", r#"{"a":"é"}"#, "jackpotPayout"]);
    // The typed views show the same bytes.
    assert_eq!(p.currency_iso4217.ptr.cast::<u8>(), e.strings.wrapping_add("jp-1p-2pp-2".len() + 3));
    assert!(p.bonus_code.ptr.is_null());
    free_event(ev);
    for (body, typed) in [(BALANCE, ["", "pp-3", "", "", "", ""]), (OTHER, [""; 6])] {
        let ev = handle_ok(r, body);
        let block = strings_block(event(ev));
        assert_eq!(block[..6], typed);
        assert_eq!(block.last().copied(), Some(text(event(ev).name)));
        free_event(ev);
    }
    // SAFETY: a live receiver, freed once.
    unsafe { sp_receiver_free(r) };
}

// ---------------------------------------------------------------------------------------------
// Failures and the last error

#[test]
fn failures_give_status_and_http_answer() {
    let r = receiver(|_| {});
    let large = format!(r#"{{"event":"x","pad":"{}"}}"#, "x".repeat(65536));
    let not_object = b"[1]";
    for (token, addr, body, status, http, code, name) in [
        (Some(OTHER_TOKEN), PRODUCTION, REFUND.as_bytes(), SP_ERR_WRONG_TOKEN, 401, "wrong_token", "X-Service-Token"),
        (None, PRODUCTION, REFUND.as_bytes(), SP_ERR_MISSING_TOKEN, 401, "missing_token", "X-Service-Token"),
        (Some(TOKEN), STAGING, REFUND.as_bytes(), SP_ERR_FORBIDDEN_SOURCE, 403, "forbidden_source", "remote_addr"),
        (Some(OTHER_TOKEN), STAGING, b"\xff", SP_ERR_FORBIDDEN_SOURCE, 403, "forbidden_source", "remote_addr"),
        (Some(OTHER_TOKEN), PRODUCTION, b"\xff", SP_ERR_WRONG_TOKEN, 401, "wrong_token", "X-Service-Token"),
        (Some(TOKEN), PRODUCTION, large.as_bytes(), SP_ERR_BODY_TOO_LARGE, 413, "body_too_large", ""),
        (Some(TOKEN), PRODUCTION, not_object, SP_ERR_NOT_AN_OBJECT, 400, "not_an_object", ""),
    ] {
        assert_eq!(handle(r, token, addr, body), Err(status));
        assert_eq!(last_field(), name);
        let (got_http, answer) = last_response();
        let v: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(
            (got_http, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
            (http, Some(code), Some(name))
        );
        assert_eq!(v["error"]["message"].as_str(), Some(&last_message()[..]));
    }
    // A known event with an invalid field: the event's wrapper, HTTP 200.
    assert_eq!(handle(r, Some(TOKEN), PRODUCTION, &bad_payout()), Err(SP_ERR_WRONG_TYPE));
    assert_eq!((last_field(), last_message()), ("jackpotPayout.moneyWon".to_owned(), BAD_PAYOUT_MESSAGE.to_owned()));
    let expected = format!(r#"{{"payout":{{"success":false,"errorMessage":"{BAD_PAYOUT_MESSAGE}"}}}}"#);
    assert_eq!(last_response(), (200, expected));
    for (change, status, name) in [
        (("\"gameId\":9", "\"gameId\":-9"), SP_ERR_OUT_OF_RANGE, "jackpotPayout.gameId"),
        (("\"EUR\"", "\"eur\""), SP_ERR_INVALID_VALUE, "jackpotPayout.currencyISO4217"),
        (("\"jackpotIdentifier\":\"jp-1\",", ""), SP_ERR_MISSING_FIELD, "jackpotPayout.jackpotIdentifier"),
        (("\"gameId\":9", "\"gameId\":9,\"x\":{\"k\":1,\"k\":2}"), SP_ERR_DUPLICATE_KEY, "jackpotPayout.x"),
        (("\"gameId\":9", "\"gameId\":9,\"x\":\"\\udead\""), SP_ERR_INVALID_JSON, "jackpotPayout.x"),
    ] {
        let body = payout().to_string().replace(change.0, change.1);
        assert_eq!(handle(r, Some(TOKEN), PRODUCTION, body.as_bytes()), Err(status), "{body}");
        assert_eq!(last_field(), name);
        let (http, answer) = last_response();
        let v: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(
            (http, &v["payout"]["success"], v["payout"]["errorMessage"].as_str()),
            (200, &json!(false), Some(&last_message()[..]))
        );
    }
    // SAFETY: a live receiver, freed once.
    unsafe { sp_receiver_free(r) };
}

#[test]
fn last_error_persists_across_accessors_and_is_cleared_by_the_next_success() {
    let r = receiver(|_| {});
    let mut config = ptr::null_mut();
    // SAFETY: a writable out-param.
    assert_eq!(unsafe { sp_receiver_config_new(&mut config) }, SP_OK);
    assert_eq!(handle(r, Some(TOKEN), PRODUCTION, &bad_payout()), Err(SP_ERR_WRONG_TYPE));
    for _ in 0..3 {
        assert_eq!(c_str(sp_status_name(SP_ERR_WRONG_TYPE as i32)), "SP_ERR_WRONG_TYPE");
        assert_eq!(c_str(sp_version()), env!("CARGO_PKG_VERSION"));
        assert_eq!(last_field(), "jackpotPayout.moneyWon");
        assert_eq!(last_message(), BAD_PAYOUT_MESSAGE);
        assert_eq!(last_response().0, 200);
        // SAFETY: `_free` accepts NULL.
        unsafe { sp_event_free(ptr::null_mut()) };
    }
    // The next failure replaces it; the next success clears it.
    // SAFETY: a live configuration.
    assert_failed(unsafe { sp_receiver_config_set_max_depth(config, 0) }, SP_ERR_INVALID_ARGUMENT, "max_depth");
    assert_eq!(last_response().0, 500);
    assert_eq!(unsafe { sp_receiver_config_set_max_depth(config, 10) }, SP_OK);
    assert_eq!((last_message(), last_field()), (String::new(), String::new()));
    let (mut status, mut body) = (7_u16, sentinel_str());
    // SAFETY: writable out-params.
    assert_eq!(unsafe { sp_last_error_response(&mut status, &mut body) }, SP_ERR_INVALID_ARGUMENT);
    assert_eq!(status, 7);
    assert_untouched(body);
    // A successful handle clears a failure too.
    assert_eq!(handle(r, None, PRODUCTION, REFUND.as_bytes()), Err(SP_ERR_MISSING_TOKEN));
    free_event(handle_ok(r, REFUND));
    assert!(last_message().is_empty());
    // Last errors belong to their thread.
    assert_eq!(handle(r, None, PRODUCTION, REFUND.as_bytes()), Err(SP_ERR_MISSING_TOKEN));
    std::thread::spawn(|| assert!(last_message().is_empty() && last_field().is_empty())).join().unwrap();
    assert_eq!(last_field(), "X-Service-Token");
    // SAFETY: live objects, freed once.
    unsafe {
        sp_receiver_config_free(config);
        sp_receiver_free(r);
    }
}

#[test]
fn configuration_reaches_the_receiver() {
    let r = receiver(|c| unsafe {
        assert_eq!(sp_receiver_config_set_sources(c, c"staging, 10.1.2.0/24".as_ptr()), SP_OK);
        assert_eq!(sp_receiver_config_set_max_body_bytes(c, 300), SP_OK);
        assert_eq!(sp_receiver_config_set_index_field(c, c"seq".as_ptr()), SP_OK);
        assert_eq!(sp_receiver_config_set_reject_unknown_events(c, true), SP_OK);
        assert_eq!(sp_receiver_config_set_balance_wrapper(c, c"balance".as_ptr()), SP_OK);
        assert_eq!(sp_receiver_config_set_balance_currency(c, c"GBP".as_ptr()), SP_OK);
        assert_eq!(sp_receiver_config_set_omit_empty_error_message(c, true), SP_OK);
        assert_eq!(sp_receiver_config_add_token(c, OTHER_TOKEN.as_ptr()), SP_OK);
        assert_failed(sp_receiver_config_add_token(c, OTHER_TOKEN.as_ptr()), SP_ERR_INVALID_ARGUMENT, "token");
        assert_failed(sp_receiver_config_set_max_body_bytes(c, 1), SP_ERR_INVALID_ARGUMENT, "max_body_bytes");
        assert_failed(sp_receiver_config_set_max_depth(c, 101), SP_ERR_INVALID_ARGUMENT, "max_depth");
        assert_failed(
            sp_receiver_config_set_max_identifier_bytes(c, 0),
            SP_ERR_INVALID_ARGUMENT,
            "max_identifier_bytes",
        );
        assert_failed(sp_receiver_config_set_index_field(c, c"".as_ptr()), SP_ERR_INVALID_ARGUMENT, "index_field");
        assert_failed(sp_receiver_config_set_sources(c, c"10.0.0.300".as_ptr()), SP_ERR_INVALID_ARGUMENT, "sources");
        assert_failed(
            sp_receiver_config_set_balance_currency(c, c"gbp".as_ptr()),
            SP_ERR_INVALID_ARGUMENT,
            "balance_currency",
        );
        assert_failed(sp_receiver_config_add_token(c, c"secret".as_ptr()), SP_ERR_INVALID_ARGUMENT, "token");
    });
    let body = r#"{"action":"getPlayerBalance","playerIdentifier":"p","seq":12,"index":99}"#;
    for addr in [STAGING, c"10.1.2.3"] {
        let ev = handle(r, Some(OTHER_TOKEN), addr, body.as_bytes()).unwrap();
        assert_eq!((event(ev).has_index, event(ev).index), (true, 12));
        assert_eq!(
            reply_balance(ev, 5, None, 0).unwrap(),
            r#"{"balance":{"money":5,"currencyISO4217":"GBP","coins":0,"errorMessage":""}}"#
        );
        free_event(ev);
    }
    assert_eq!(handle(r, Some(TOKEN), PRODUCTION, body.as_bytes()), Err(SP_ERR_FORBIDDEN_SOURCE));
    assert_eq!(handle(r, Some(TOKEN), STAGING, r#"{"event":"x"}"#.as_bytes()), Err(SP_ERR_UNKNOWN_EVENT));
    assert_eq!(last_response().0, 400);
    let padded = format!(r#"{{"event":"x","p":"{}"}}"#, "y".repeat(300 - 20));
    assert_eq!(padded.len(), 300);
    assert_eq!(handle(r, Some(TOKEN), STAGING, padded.as_bytes()), Err(SP_ERR_UNKNOWN_EVENT));
    assert_eq!(handle(r, Some(TOKEN), STAGING, format!("{padded} ").as_bytes()), Err(SP_ERR_BODY_TOO_LARGE));
    let ev = handle(r, Some(TOKEN), STAGING, REFUND.as_bytes()).unwrap();
    assert!(!event(ev).has_index, "index is read from `seq` only");
    assert_eq!(reply(ev, true, None).unwrap(), r#"{"refund":{"success":true}}"#);
    free_event(ev);
    let mut config = ptr::null_mut();
    let mut out = ptr::dangling_mut::<sp_receiver>();
    // SAFETY: valid pointers; a configuration without a token cannot make a receiver.
    unsafe {
        assert_eq!(sp_receiver_config_new(&mut config), SP_OK);
        assert_failed(sp_receiver_new(config, &mut out), SP_ERR_INVALID_ARGUMENT, "token");
        assert_eq!(out, ptr::dangling_mut());
        sp_receiver_config_free(config);
        sp_receiver_free(r);
    }
}

// ---------------------------------------------------------------------------------------------
// Status names, version, reply buffers

#[test]
fn status_names_for_every_code() {
    // The callback codes 0..=16 are fixed (never renumbered); later codes are only appended.
    let fixed = [
        "SP_OK",
        "SP_ERR_INVALID_ARGUMENT",
        "SP_ERR_PANIC",
        "SP_ERR_BODY_TOO_LARGE",
        "SP_ERR_INVALID_UTF8",
        "SP_ERR_INVALID_JSON",
        "SP_ERR_DUPLICATE_KEY",
        "SP_ERR_TOO_DEEP",
        "SP_ERR_NOT_AN_OBJECT",
        "SP_ERR_MISSING_FIELD",
        "SP_ERR_WRONG_TYPE",
        "SP_ERR_OUT_OF_RANGE",
        "SP_ERR_INVALID_VALUE",
        "SP_ERR_UNKNOWN_EVENT",
        "SP_ERR_MISSING_TOKEN",
        "SP_ERR_WRONG_TOKEN",
        "SP_ERR_FORBIDDEN_SOURCE",
    ];
    assert!(ALL_STATUSES.len() >= fixed.len());
    for (code, status) in ALL_STATUSES.iter().enumerate() {
        let code = i32::try_from(code).unwrap();
        let name = c_str(sp_status_name(code));
        assert_eq!((*status as i32, format!("{status:?}")), (code, name.to_owned()));
        assert!(name.starts_with("SP_ERR_") || code == 0, "{name}");
        assert!(ptr::eq(sp_status_name(code), sp_status_name(code)), "not a static string");
        if let Some(expected) = fixed.get(code as usize) {
            assert_eq!(name, *expected);
        }
    }
    let first_unused = i32::try_from(ALL_STATUSES.len()).unwrap();
    for code in [-1, i32::MIN, first_unused, first_unused + 1, 1000, i32::MAX] {
        assert_eq!(c_str(sp_status_name(code)), "SP_ERR_INVALID_ARGUMENT", "{code}");
    }
}

#[test]
fn version_matches_the_package() {
    let version = c_str(sp_version());
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    assert_eq!(version, format!("{SP_VERSION_MAJOR}.{SP_VERSION_MINOR}.{SP_VERSION_PATCH}"));
}

#[test]
fn reply_buffers() {
    let result = |wrapper: &CStr, success: bool, message: Option<&CStr>, omit: bool| {
        buffer(|o| unsafe { sp_reply_result_new(wrapper.as_ptr(), success, opt_ptr(message), omit, o) })
    };
    assert_eq!(result(c"refund", true, None, false).unwrap(), r#"{"refund":{"success":true,"errorMessage":""}}"#);
    assert_eq!(result(c"refund", true, Some(c""), true).unwrap(), r#"{"refund":{"success":true}}"#);
    assert_eq!(
        result(c"bet", false, Some(c"no \"funds\"\\\n\x01 \xc3\xa9"), true).unwrap(),
        r#"{"bet":{"success":false,"errorMessage":"no \"funds\"\\\n\u0001 é"}}"#
    );
    for (wrapper, success, message, name) in [
        (c"refund", true, Some(c"oops"), "message"),
        (c"refund", false, None, "message"),
        (c"refund", false, Some(c""), "message"),
        (c"", true, None, "wrapper"),
        (c"a\x01", true, None, "wrapper"),
    ] {
        assert_failed(result(wrapper, success, message, false).unwrap_err(), SP_ERR_INVALID_ARGUMENT, name);
        assert_eq!(last_response().0, 500);
    }
    let balance = |wrapper: &CStr, money: i64, currency: &CStr, coins: i64, message: Option<&CStr>| {
        buffer(|o| unsafe {
            sp_reply_balance_new(wrapper.as_ptr(), money, currency.as_ptr(), coins, opt_ptr(message), o)
        })
    };
    assert_eq!(
        balance(c"playerBalance", 100, c"EUR", 3, None).unwrap(),
        r#"{"playerBalance":{"money":100,"currencyISO4217":"EUR","coins":3,"errorMessage":""}}"#
    );
    assert_eq!(
        balance(c"b", 70, c"USD", 0, Some(c"player \"x\" blocked")).unwrap(),
        r#"{"b":{"errorMessage":"player \"x\" blocked"}}"#
    );
    for (wrapper, money, currency, coins, name) in [
        (c"b", -1, c"EUR", 0, "money"),
        (c"b", 1 << 53, c"EUR", 0, "money"),
        (c"b", 0, c"EUR", i64::MIN, "coins"),
        (c"b", 0, c"EURO", 0, "currency"),
        (c"b", 0, c"", 0, "currency"),
        (c"", 0, c"EUR", 0, "wrapper"),
    ] {
        assert_failed(balance(wrapper, money, currency, coins, None).unwrap_err(), SP_ERR_INVALID_ARGUMENT, name);
    }
}

// ---------------------------------------------------------------------------------------------
// Threads and lifetimes

/// A receiver pointer shared with scoped threads, as C hosts share it.
struct Shared(*const sp_receiver);
// SAFETY: the library documents receivers as usable from any number of threads at once.
unsafe impl Sync for Shared {}
impl Shared {
    fn get(&self) -> *const sp_receiver {
        self.0
    }
}

/// An event handed from the thread that made it to another (one thread at a time).
struct Owned(*mut sp_event);
// SAFETY: events belong to one thread at a time; this one is moved, never shared.
unsafe impl Send for Owned {}

#[test]
fn one_receiver_serves_many_threads_and_events_outlive_it() {
    let r = receiver(|c| unsafe {
        assert_eq!(sp_receiver_config_set_sources(c, c"any".as_ptr()), SP_OK);
    });
    let shared = Shared(r);
    let kept: Vec<(i64, Owned)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4_i64)
            .map(|t| {
                let shared = &shared;
                s.spawn(move || {
                    let mut kept = Vec::new();
                    for i in 0..1000_i64 {
                        let id = t * 1000 + i;
                        match i % 4 {
                            0 | 1 => {
                                let mut v = payout();
                                (v["gameId"], v["n"]) = (json!(id), json!(id));
                                let addr = if i % 2 == 0 { c"203.0.113.7" } else { c"::1" };
                                let ev = handle(shared.get(), Some(TOKEN), addr, v.to_string().as_bytes()).unwrap();
                                // SAFETY: a payout event made above.
                                assert_eq!(unsafe { (*event(ev).jackpot_payout).game_id }, id);
                                if i % 100 == 0 {
                                    kept.push((id, Owned(ev)));
                                } else {
                                    assert!(reply(ev, true, None).unwrap().starts_with(r#"{"payout":"#));
                                    free_event(ev);
                                }
                            }
                            2 => {
                                assert_eq!(
                                    handle(shared.get(), Some(TOKEN), STAGING, &bad_payout()),
                                    Err(SP_ERR_WRONG_TYPE)
                                );
                                assert_eq!(
                                    (last_field(), last_response().0),
                                    ("jackpotPayout.moneyWon".to_owned(), 200)
                                );
                            }
                            _ => {
                                assert_eq!(
                                    handle(shared.get(), Some(OTHER_TOKEN), STAGING, b"{}"),
                                    Err(SP_ERR_WRONG_TOKEN)
                                );
                                assert_eq!((last_field(), last_response().0), ("X-Service-Token".to_owned(), 401));
                            }
                        }
                    }
                    kept
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(kept.len(), 40);
    // SAFETY: no thread uses the receiver any more; it is freed once.
    unsafe { sp_receiver_free(r) };
    for (id, Owned(ev)) in kept {
        // SAFETY: the payout event is still owned by this thread.
        assert_eq!(unsafe { (*event(ev).jackpot_payout).game_id }, id);
        assert_eq!(field(ev, c"n"), Ok(id.to_string()));
        assert_eq!(reply(ev, false, Some(c"late")).unwrap(), r#"{"payout":{"success":false,"errorMessage":"late"}}"#);
        free_event(ev);
    }
}

// ---------------------------------------------------------------------------------------------
// A careless host (also run under miri where a nightly toolchain is present)

/// Run under miri by `make test` where a nightly toolchain with miri is present
/// (`cargo +nightly miri test --test ffi_abi careless_host`): no I/O, few iterations.
mod careless_host {
    use super::*;

    #[test]
    fn the_last_error_message_may_be_handed_back_in() {
        let r = receiver(|_| {});
        let ev = handle_ok(r, REFUND);
        assert!(handle(r, Some(TOKEN), PRODUCTION, &bad_payout()).is_err());
        let message = sp_last_error_message();
        let mut out = sentinel_str();
        // SAFETY: the message stays valid until this call returns, which is the point of the test.
        assert_eq!(unsafe { sp_event_reply(ev, false, message.ptr, &mut out) }, SP_OK);
        let reply: Value = serde_json::from_str(text(out)).unwrap();
        assert_eq!(reply["refund"]["errorMessage"], json!(BAD_PAYOUT_MESSAGE));
        assert_eq!(last_message(), "", "a successful call leaves no last error");
        // A failing call may read its own previous error, and replaces it.
        assert!(handle(r, Some(TOKEN), PRODUCTION, &bad_payout()).is_err());
        let message = sp_last_error_message();
        let mut config = ptr::null_mut();
        // SAFETY: valid pointers; the message is valid during the call.
        unsafe {
            assert_eq!(sp_receiver_config_new(&mut config), SP_OK);
            assert!(handle(r, Some(TOKEN), PRODUCTION, &bad_payout()).is_err());
            let message_again = sp_last_error_message();
            assert_eq!(sp_receiver_config_set_sources(config, message_again.ptr), SP_ERR_INVALID_ARGUMENT);
            assert!(last_message().contains("moneyWon"), "{}", last_message());
            sp_receiver_config_free(config);
        }
        let _ = message;
        free_event(ev);
        // SAFETY: a live receiver, freed once.
        unsafe { sp_receiver_free(r) };
    }

    #[test]
    fn fields_the_host_overwrites_are_never_read_back() {
        let r = receiver(|_| {});
        let ev = handle_ok(r, REFUND);
        // SAFETY: the host owns the event and may write into it; 99 is no sp_event_kind value, so it
        // is written as a plain integer, as C, PHP or Python would.
        unsafe {
            (&raw mut (*ev).kind).cast::<i32>().write(99);
            (*ev).name = sp_str::from_static(c"bogus");
            // 2 is no `bool`: written as a byte, as a host does.
            (&raw mut (*ev).has_index).cast::<u8>().write(2);
            (&raw mut (*ev).index_unreadable).cast::<u8>().write(2);
            (&raw mut (*(*ev).buy_refund.cast_mut()).is_mobile).cast::<u8>().write(2);
        }
        assert_eq!(reply(ev, true, None).unwrap(), r#"{"refund":{"success":true,"errorMessage":""}}"#);
        free_event(ev);
        let ev = handle_ok(r, OTHER);
        // SAFETY: as above.
        unsafe { (&raw mut (*ev).kind).cast::<i32>().write(sp_event_kind::SP_EVENT_KIND_BUY_REFUND as i32) };
        assert_eq!(reply(ev, true, None), Err(SP_ERR_UNKNOWN_EVENT));
        assert!(last_message().contains("gameSessionStart"), "{}", last_message());
        free_event(ev);
        // SAFETY: a live receiver, freed once.
        unsafe { sp_receiver_free(r) };
    }

    /// A host may copy a struct the library handed out as bytes (Python's `bytes(struct)`, PHP's
    /// `FFI::string`): every byte of the event's view and of its typed struct, padding included,
    /// is defined (under miri, undefined bytes read here are undefined behaviour).
    #[test]
    fn the_bytes_of_an_event_handed_out_are_all_defined() {
        let r = receiver(|_| {});
        let payout = serde_json::to_string(&payout()).unwrap();
        for body in [REFUND, payout.as_str(), BALANCE, OTHER] {
            let ev = handle_ok(r, body);
            // SAFETY: a live event: its view and the typed struct it points to are readable.
            let bytes = unsafe {
                let e = &*ev;
                let mut bytes = std::slice::from_raw_parts(ev.cast::<u8>(), size_of::<sp_event>()).to_vec();
                let typed = [
                    (e.buy_refund.cast::<u8>(), size_of::<sp_buy_refund>()),
                    (e.jackpot_payout.cast::<u8>(), size_of::<sp_jackpot_payout>()),
                    (e.balance_query.cast::<u8>(), size_of::<sp_balance_query>()),
                ];
                for (at, len) in typed.into_iter().filter(|(at, _)| !at.is_null()) {
                    bytes.extend_from_slice(std::slice::from_raw_parts(at, len));
                }
                bytes
            };
            // Every byte read as a number, as the host's copy would be.
            assert!(bytes.iter().map(|&b| u64::from(b)).sum::<u64>() > 0, "{body}");
            free_event(ev);
        }
        // SAFETY: a live receiver, freed once.
        unsafe { sp_receiver_free(r) };
    }

    /// The games of `sp_client_get_games`, which a host may copy as bytes too (the Python binding
    /// unpacks the array in one call): every byte of every `sp_game`, padding included, is
    /// defined.
    #[test]
    fn the_bytes_of_games_handed_out_are_all_defined() {
        use slotpartner::client::Game;
        use slotpartner::ffi::games::{sp_game, sp_games_free};
        let one = Game {
            game_id: 7,
            name: "Seven".into(),
            supports_tournament: true,
            categories: Some(vec!["\"slots\"".into()]),
            extra: vec![("volatility".into(), "3".into())],
            ..Game::default()
        };
        let games = slotpartner::ffi::games::into_raw(&[one, Game::default()]);
        // SAFETY: live games: `len` entries at `games`, readable as bytes; freed once.
        unsafe {
            let bytes = std::slice::from_raw_parts((*games).games.cast::<u8>(), (*games).len * size_of::<sp_game>());
            // Every byte read as a number, as the host's copy would be.
            assert!(bytes.iter().map(|&b| u64::from(b)).sum::<u64>() > 0);
            sp_games_free(games);
        }
    }

    /// The whole last error written into memory the host never initialised, then copied as
    /// bytes: every byte is defined, its padding included (under miri, reading an undefined byte
    /// as a number is undefined behaviour).
    #[test]
    fn the_bytes_of_the_last_error_written_out_are_all_defined() {
        let r = receiver(|_| {});
        assert!(handle(r, Some(TOKEN), PRODUCTION, &bad_payout()).is_err());
        let mut out = std::mem::MaybeUninit::<sp_error>::uninit();
        // SAFETY: a writable out-parameter; its bytes are read once the call wrote it.
        let bytes = unsafe {
            assert_eq!(sp_last_error(out.as_mut_ptr()), SP_OK);
            std::slice::from_raw_parts(out.as_ptr().cast::<u8>(), size_of::<sp_error>()).to_vec()
        };
        assert!(bytes.iter().map(|&b| u64::from(b)).sum::<u64>() > 0);
        // SAFETY: a live receiver, freed once.
        unsafe { sp_receiver_free(r) };
    }

    /// The typed struct and the extra fields live inside the event's own allocation: pointers the
    /// host took before a reply (the library then changes the event) still read, and the host may
    /// write into the typed struct without the library reading it back.
    #[test]
    fn views_taken_before_a_reply_stay_valid_after_it() {
        let r = receiver(|_| {});
        let ev = handle_ok(r, REFUND);
        // SAFETY: a live event; the pointers are the library's views into it.
        let (refund, fields) = unsafe { ((*ev).buy_refund.cast_mut(), (*ev).extra_fields) };
        assert_eq!(
            reply(ev, false, Some(c"ledger down")).unwrap(),
            r#"{"refund":{"success":false,"errorMessage":"ledger down"}}"#
        );
        assert_eq!(reply(ev, true, None).unwrap(), r#"{"refund":{"success":true,"errorMessage":""}}"#);
        // SAFETY: as above: the views stay valid until sp_event_free; the host may write into them.
        unsafe {
            assert_eq!(((*refund).transaction_id, text((*refund).game_session_identifier)), (1001, "gs-1"));
            assert_eq!((text((*fields).name), text((*fields.add(1)).json)), ("index", r#"{"a": [1, "x"]}"#));
            (*refund).transaction_id = -5;
            (*refund).game_session_identifier = sp_str::from_static(c"overwritten");
        }
        assert_eq!(field(ev, c"traceId").as_deref(), Ok(r#"{"a": [1, "x"]}"#));
        assert_eq!(reply(ev, true, None).unwrap(), r#"{"refund":{"success":true,"errorMessage":""}}"#);
        free_event(ev);
        // SAFETY: a live receiver, freed once.
        unsafe { sp_receiver_free(r) };
    }

    /// A reply stays valid until the next reply is built: a refused attempt (an amount out of
    /// range, the reply's own bytes handed back as the currency) builds none and leaves it alone.
    #[test]
    fn a_refused_reply_leaves_the_last_one_valid() {
        let r = receiver(|_| {});
        let ev = handle_ok(r, BALANCE);
        let mut first = sentinel_str();
        // SAFETY: a live event and a writable out-parameter.
        assert_eq!(unsafe { sp_event_reply_balance(ev, 1234, ptr::null(), 5, &mut first) }, SP_OK);
        let expected = r#"{"playerBalance":{"money":1234,"currencyISO4217":"EUR","coins":5,"errorMessage":""}}"#;
        assert_eq!(text(first), expected);
        assert_eq!(reply_balance(ev, -1, None, 0), Err(SP_ERR_INVALID_ARGUMENT));
        // The reply's own bytes as the currency: not three uppercase letters, refused.
        let mut out = sentinel_str();
        // SAFETY: `first` is NUL-terminated and still valid, as checked after.
        let status = unsafe { sp_event_reply_balance(ev, 1, first.ptr, 1, &mut out) };
        assert_eq!(status, SP_ERR_INVALID_ARGUMENT);
        assert_eq!(text(first), expected, "the last reply is still there, unchanged");
        free_event(ev);
        // SAFETY: a live receiver, freed once.
        unsafe { sp_receiver_free(r) };
    }

    /// An event only read, by any number of threads (`sp_event_field` takes it `const`).
    struct ReadOnlyEvent(*const sp_event);
    // SAFETY: the threads sharing it only read it, which the library documents as allowed.
    unsafe impl Sync for ReadOnlyEvent {}

    #[test]
    fn one_event_is_read_from_two_threads_at_once() {
        let r = receiver(|_| {});
        let ev = handle_ok(r, OTHER);
        let shared = &ReadOnlyEvent(ev);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(move || {
                    for _ in 0..20 {
                        let mut out = sentinel_str();
                        // SAFETY: a live event, only read by both threads.
                        let got = unsafe { sp_event_field(shared.0, c"data".as_ptr(), &mut out) };
                        assert_eq!((got, text(out)), (SP_OK, "[1, 2]"));
                    }
                });
            }
        });
        free_event(ev);
        // SAFETY: a live receiver, freed once.
        unsafe { sp_receiver_free(r) };
    }

    #[test]
    fn a_shared_endpoints_key_and_settings_are_checked_and_copied() {
        use slotpartner::ffi::endpoint::{sp_endpoint, sp_endpoint_free, sp_endpoint_shared_keyed};
        let settings = format!(r#"{{"token":"{}"}}"#, TOKEN.to_str().unwrap());
        let key = "ffi_abi careless host".as_bytes();
        let keyed = |key: *const u8, key_len: usize, settings: *const u8, len: usize, out: *mut *mut sp_endpoint| {
            // SAFETY: the lengths are lies only where the library must refuse them unread.
            unsafe { sp_endpoint_shared_keyed(key.cast(), key_len, settings.cast(), len, out) }
        };
        let (mut out, s) = (ptr::null_mut(), settings.as_ptr());
        assert_failed(keyed(ptr::null(), 0, ptr::null(), 0, &mut out), SP_ERR_INVALID_ARGUMENT, "key");
        assert_failed(keyed(ptr::null(), 0, s, settings.len(), &mut out), SP_ERR_INVALID_ARGUMENT, "key");
        assert_failed(keyed(key.as_ptr(), key.len(), ptr::null(), 0, ptr::null_mut()), SP_ERR_INVALID_ARGUMENT, "out");
        // NULL settings with a length are refused, not taken for a lookup.
        assert_failed(keyed(key.as_ptr(), key.len(), ptr::null(), 5, &mut out), SP_ERR_INVALID_ARGUMENT, "settings");
        for len in [usize::MAX, isize::MAX as usize + 1] {
            assert_failed(keyed(key.as_ptr(), len, ptr::null(), 0, &mut out), SP_ERR_INVALID_ARGUMENT, "key");
            assert_failed(keyed(key.as_ptr(), key.len(), s, len, &mut out), SP_ERR_INVALID_ARGUMENT, "settings");
        }
        assert!(out.is_null(), "written on a refusal");
        let mut found = ptr::NonNull::<sp_endpoint>::dangling().as_ptr();
        assert_eq!(keyed(key.as_ptr(), key.len(), ptr::null(), 0, &mut found), SP_OK);
        assert!(found.is_null(), "the refusals kept nothing under the key");

        // The library's own text handed back as the key and as the settings (not JSON: refused).
        let message = sp_last_error_message();
        let (m, n) = (message.ptr.cast::<u8>(), message.len);
        assert_failed(keyed(m, n, m, n, &mut out), SP_ERR_INVALID_ARGUMENT, "settings");
        // As the key with good settings: kept under a copy, since the success clears the message.
        let message = sp_last_error_message();
        let copy = text(message).as_bytes().to_vec();
        assert_eq!(keyed(message.ptr.cast(), message.len, s, settings.len(), &mut out), SP_OK, "{}", last_message());
        assert_eq!(last_message(), "");
        assert_eq!(keyed(copy.as_ptr(), copy.len(), ptr::null(), 0, &mut found), SP_OK);
        assert!(!found.is_null(), "found by the copy of the key");

        // The out-parameter in the key's own buffer: the key is read before it is written.
        let mut buffer = [ptr::null_mut::<sp_endpoint>(); 4];
        let bytes = std::mem::size_of_val(&buffer);
        let aliased = buffer.as_mut_ptr();
        // SAFETY: `buffer` is `bytes` writable bytes; they get the key's first bytes.
        unsafe { ptr::copy_nonoverlapping(copy.as_ptr(), aliased.cast::<u8>(), bytes.min(copy.len())) };
        assert_eq!(keyed(aliased.cast(), bytes, s, settings.len(), aliased), SP_OK);
        // SAFETY: the library wrote a pointer into the buffer's first element.
        let written = unsafe { aliased.read() };
        assert!(!written.is_null());
        for endpoint in [out, found, written] {
            // SAFETY: each handle is freed once.
            unsafe { sp_endpoint_free(endpoint) };
        }
    }

    #[test]
    fn lengths_no_buffer_can_have_are_refused_before_reading() {
        let r = receiver(|_| {});
        let mut out = ptr::null_mut();
        for len in [usize::MAX, isize::MAX as usize + 1] {
            // SAFETY: the length is a lie the library must refuse before touching the bytes.
            let got = unsafe { sp_receiver_parse(r, REFUND.as_ptr(), len, &mut out) };
            assert_failed(got, SP_ERR_INVALID_ARGUMENT, "body");
            assert!(out.is_null());
        }
        // SAFETY: a live receiver, freed once.
        unsafe { sp_receiver_free(r) };
    }

    #[test]
    fn a_refusal_carries_what_the_body_let_be_read_of_the_event() {
        let r = receiver(|_| {});
        let whole = || {
            let mut out = std::mem::MaybeUninit::<sp_error>::uninit();
            // SAFETY: a writable out-parameter.
            let got = unsafe { sp_last_error(out.as_mut_ptr()) };
            // SAFETY: written on SP_OK.
            (got == SP_OK).then(|| unsafe { out.assume_init() })
        };
        let mut bad = payout();
        bad["moneyWon"] = json!(1500.5);
        bad["index"] = json!(77);
        let bytes = serde_json::to_vec(&bad).unwrap();
        assert_eq!(handle(r, Some(TOKEN), PRODUCTION, &bytes).unwrap_err(), SP_ERR_WRONG_TYPE);
        let e = whole().expect("a last error");
        assert_eq!(
            (e.status, text(e.message), text(e.field)),
            (SP_ERR_WRONG_TYPE, BAD_PAYOUT_MESSAGE, "jackpotPayout.moneyWon")
        );
        assert_eq!((e.http_status, text(e.event_name)), (200, "jackpotPayout"));
        assert_eq!((e.has_index, e.index, e.has_transaction_id, e.transaction_id), (true, 77, true, 2001));
        assert!(text(e.response_body).contains(BAD_PAYOUT_MESSAGE));
        // The index is read leniently here too: only a non-negative integer counts.
        bad["index"] = json!("77");
        bad["transactionId"] = json!(1.5);
        let bytes = serde_json::to_vec(&bad).unwrap();
        assert!(handle(r, Some(TOKEN), PRODUCTION, &bytes).is_err());
        let e = whole().unwrap();
        assert_eq!((text(e.event_name), e.has_index, e.has_transaction_id), ("jackpotPayout", false, false));
        // Nothing to read in a body that is not JSON, and nothing is read of an unauthenticated one.
        assert_eq!(handle(r, Some(TOKEN), PRODUCTION, b"{\"event\":").unwrap_err(), SP_ERR_INVALID_JSON);
        assert!(whole().unwrap().event_name.ptr.is_null());
        let good = serde_json::to_vec(&payout()).unwrap();
        assert_eq!(handle(r, Some(OTHER_TOKEN), PRODUCTION, &bad_payout()).unwrap_err(), SP_ERR_WRONG_TOKEN);
        let e = whole().unwrap();
        assert!(e.event_name.ptr.is_null() && !e.has_index && !e.has_transaction_id);
        assert_eq!(e.http_status, 401);
        // After a success there is no last error to read.
        free_event(handle(r, Some(TOKEN), PRODUCTION, &good).unwrap());
        assert!(whole().is_none());
        // SAFETY: a live receiver, freed once.
        unsafe { sp_receiver_free(r) };
    }

    /// `sp_receiver_authenticate`: the source and token checks of `sp_receiver_handle` alone,
    /// answered as `sp_receiver_handle` answers them (401, 403), without a body; carelessly
    /// called: NULL receiver and headers, bytes that are not UTF-8, the last error's own message
    /// handed back in as the token.
    #[test]
    fn authenticating_alone_answers_as_handling_would() {
        let r = receiver(|c| unsafe {
            assert_eq!(sp_receiver_config_set_sources(c, c"production".as_ptr()), SP_OK);
            assert_eq!(sp_receiver_config_set_trusted_proxies(c, c"10.0.0.0/8".as_ptr()), SP_OK);
        });
        let any = receiver(|c| unsafe { assert_eq!(sp_receiver_config_set_sources(c, c"any".as_ptr()), SP_OK) });
        let (t, null) = (TOKEN.as_ptr(), ptr::null());
        // SAFETY: every pointer is NULL or a live receiver or NUL-terminated string; NULL is what
        // is being tested.
        unsafe {
            assert_eq!(sp_receiver_authenticate(r, t, PRODUCTION.as_ptr(), null), SP_OK);
            assert!(last_message().is_empty(), "a success leaves no last error");
            assert_failed(
                sp_receiver_authenticate(ptr::null(), t, PRODUCTION.as_ptr(), null),
                SP_ERR_INVALID_ARGUMENT,
                "receiver",
            );
            // Each refusal answers what sp_receiver_handle answers for the same request.
            let body = REFUND.as_bytes();
            let cases: [(*const c_char, *const c_char, *const c_char, sp_status, u16); 7] = [
                (null, PRODUCTION.as_ptr(), null, SP_ERR_MISSING_TOKEN, 401),
                (OTHER_TOKEN.as_ptr(), PRODUCTION.as_ptr(), null, SP_ERR_WRONG_TOKEN, 401),
                (BAD_UTF8.as_ptr(), PRODUCTION.as_ptr(), null, SP_ERR_WRONG_TOKEN, 401),
                (t, STAGING.as_ptr(), null, SP_ERR_FORBIDDEN_SOURCE, 403),
                (t, null, null, SP_ERR_FORBIDDEN_SOURCE, 403),
                (t, BAD_UTF8.as_ptr(), null, SP_ERR_FORBIDDEN_SOURCE, 403),
                (t, c"10.0.0.1".as_ptr(), BAD_UTF8.as_ptr(), SP_ERR_FORBIDDEN_SOURCE, 403),
            ];
            for (token, addr, forwarded, status, http) in cases {
                assert_eq!(sp_receiver_authenticate(r, token, addr, forwarded), status, "{}", last_message());
                let (message, field, response) = (last_message(), last_field(), last_response());
                assert_eq!(response.0, http);
                assert!(response.1.starts_with(r#"{"error":{"#), "{}", response.1);
                let mut out = ptr::dangling_mut::<sp_event>();
                let handled = sp_receiver_handle(r, token, addr, forwarded, body.as_ptr(), body.len(), &mut out);
                assert_eq!((handled, out), (status, ptr::dangling_mut()));
                assert_eq!((last_message(), last_field(), last_response()), (message, field, response));
            }
            // From a trusted proxy the client named by X-Forwarded-For is judged; an untrusted
            // peer's header is ignored unread.
            assert_eq!(sp_receiver_authenticate(r, t, c"10.0.0.1".as_ptr(), PRODUCTION.as_ptr()), SP_OK);
            assert_eq!(sp_receiver_authenticate(r, t, PRODUCTION.as_ptr(), BAD_UTF8.as_ptr()), SP_OK);
            // Under sources `any` the address is not looked at, the token still is.
            assert_eq!(sp_receiver_authenticate(any, t, null, null), SP_OK);
            assert_eq!(sp_receiver_authenticate(any, t, BAD_UTF8.as_ptr(), null), SP_OK);
            assert_eq!(sp_receiver_authenticate(any, null, null, null), SP_ERR_MISSING_TOKEN);
            // The last error's message handed back in as the token is read before it is replaced.
            let message = sp_last_error_message().ptr;
            assert_failed(sp_receiver_authenticate(any, message, null, null), SP_ERR_WRONG_TOKEN, "X-Service-Token");
            sp_receiver_free(r);
            sp_receiver_free(any);
        }
    }

    /// The journal's operator functions and new settings, carelessly called, without a journal
    /// to open (nothing here touches storage): NULL objects and notes, the last error's own
    /// message handed back in, settings out of range, kinds that are none.
    #[test]
    fn journal_operator_functions_check_their_arguments_first() {
        use slotpartner::ffi::journal::*;
        let mut config = ptr::null_mut();
        // SAFETY: a writable out-parameter; the URL is only stored until the journal is opened.
        assert_eq!(unsafe { sp_journal_config_new(c"sqlite:/nonexistent/journal.db".as_ptr(), &mut config) }, SP_OK);
        let j = ptr::null::<sp_journal>();
        let mut buffer = ptr::dangling_mut::<sp_buffer>();
        let (mut closed, mut numbering) = (5_u64, 5_i64);
        // SAFETY: every pointer is NULL or valid; NULL is what is being tested.
        unsafe {
            for max_jump in [0, -1, i64::MIN] {
                assert_failed(
                    sp_journal_config_set_max_index_jump(config, max_jump),
                    SP_ERR_INVALID_ARGUMENT,
                    "max_index_jump",
                );
            }
            assert_failed(sp_journal_config_set_not_found_limit(config, 0), SP_ERR_INVALID_ARGUMENT, "not_found_limit");
            assert_eq!(sp_journal_config_set_max_index_jump(config, i64::MAX), SP_OK);
            assert_eq!(sp_journal_config_set_not_found_limit(config, u32::MAX), SP_OK);
            let none = ptr::null_mut();
            assert_failed(sp_journal_config_set_max_index_jump(none, 10), SP_ERR_INVALID_ARGUMENT, "config");
            assert_failed(sp_journal_config_set_not_found_limit(none, 1), SP_ERR_INVALID_ARGUMENT, "config");
            // Each call gets the previous failure's message as its note: read before it is replaced.
            for call in 0..6 {
                let note = sp_last_error_message().ptr;
                let got = match call {
                    0 => sp_journal_resolve(j, 1, 2, note, &mut closed),
                    1 => sp_journal_accept_jump(j, 1, note),
                    2 => sp_journal_jump_is_gap(j, 1, note),
                    3 => sp_journal_resolve_conflict(j, 1, note),
                    4 => sp_journal_renumber(j, 1, note, &mut numbering),
                    _ => sp_journal_report(j, 1, true, usize::MAX, &mut buffer),
                };
                assert_failed(got, SP_ERR_INVALID_ARGUMENT, "journal");
            }
            // The journal is checked first, then the note, then what the core checks.
            assert_failed(
                sp_journal_resolve(j, 1, 2, ptr::null(), ptr::null_mut()),
                SP_ERR_INVALID_ARGUMENT,
                "journal",
            );
            assert_failed(sp_journal_report(j, 0, false, 0, ptr::null_mut()), SP_ERR_INVALID_ARGUMENT, "journal");
            assert_eq!((closed, numbering, buffer), (5, 5, ptr::dangling_mut()), "out-params written on failure");
            // Retention: the setting's range, and every NULL named before any storage is touched.
            const DAY_MS: u64 = 86_400_000;
            for ms in [1, DAY_MS - 1, u64::MAX] {
                assert_failed(sp_journal_config_set_retention_ms(config, ms), SP_ERR_INVALID_ARGUMENT, "retention");
            }
            assert_eq!(sp_journal_config_set_retention_ms(config, DAY_MS), SP_OK);
            assert_eq!(sp_journal_config_set_retention_ms(config, 0), SP_OK);
            assert_failed(sp_journal_config_set_retention_ms(none, DAY_MS), SP_ERR_INVALID_ARGUMENT, "config");
            let mut options = std::mem::MaybeUninit::<sp_prune_options>::uninit();
            assert_failed(sp_prune_options_default(ptr::null_mut(), DAY_MS), SP_ERR_INVALID_ARGUMENT, "out");
            assert_eq!(sp_prune_options_default(options.as_mut_ptr(), DAY_MS), SP_OK);
            let options = options.assume_init();
            let mut report = std::mem::MaybeUninit::<sp_prune_report>::uninit();
            assert_failed(sp_journal_prune(j, &options, report.as_mut_ptr()), SP_ERR_INVALID_ARGUMENT, "journal");
            assert_failed(sp_journal_prune(j, ptr::null(), ptr::null_mut()), SP_ERR_INVALID_ARGUMENT, "journal");
            let mut vitals = std::mem::MaybeUninit::<sp_journal_vital_signs>::uninit();
            assert_failed(sp_journal_vitals(j, vitals.as_mut_ptr()), SP_ERR_INVALID_ARGUMENT, "journal");
            let mut ranges = ptr::dangling_mut::<sp_index_ranges>();
            assert_failed(sp_journal_missing_older_than(j, 0, 1, &mut ranges), SP_ERR_INVALID_ARGUMENT, "journal");
            assert_eq!(ranges, ptr::dangling_mut(), "out-params written on failure");
            assert!(!slotpartner::ffi::event::sp_event_reply_pruned(ptr::null()), "a NULL event holds no claim");
            sp_journal_config_free(config);
            sp_journal_config_free(ptr::null_mut());
            sp_journal_free(ptr::null_mut());
        }
    }

    /// The thread's spare fields vector is handed from one body to the next: a body with more
    /// extra fields than it keeps (its room dropped), one whose keys needed unescaping (owned
    /// names), each body freed before the next is parsed; no event reads another's fields.
    #[test]
    fn extra_fields_of_freed_bodies_never_reach_the_next_event() {
        let r = receiver(|_| {});
        let many: String = (0..40).map(|i| format!(r#","f{i}":{i}"#)).collect();
        let bodies = [
            format!(r#"{{"event":"gameSessionStart","index":1{many}}}"#),
            r#"{"event":"gameSessionStart","index":2,"k\u0065y":"v","a":[1]}"#.to_owned(),
            r#"{"event":"gameSessionStart","index":3,"b":true}"#.to_owned(),
            r#"{"event":"gameSessionStart","index":4}"#.to_owned(),
        ];
        let mut kept = Vec::new();
        for body in &bodies {
            // A buffer of the body's own, freed as soon as it is handled.
            let buffer = body.clone().into_bytes();
            let ev = handle(r, Some(TOKEN), PRODUCTION, &buffer).unwrap();
            drop(buffer);
            kept.push(ev);
        }
        let names = |ev| extras(event(ev)).into_iter().map(|(n, j)| format!("{n}={j}")).collect::<Vec<_>>();
        assert_eq!(names(kept[0]).len(), 41);
        assert_eq!(names(kept[0])[40], "f39=39");
        assert_eq!(names(kept[1]), ["index=2", "key=\"v\"", "a=[1]"]);
        assert_eq!(names(kept[2]), ["index=3", "b=true"]);
        assert_eq!(names(kept[3]), ["index=4"]);
        // Freed on another thread than the one that made them.
        struct Events(Vec<*mut sp_event>);
        // SAFETY: the events are handed to the other thread whole; this one no longer uses them.
        unsafe impl Send for Events {}
        let events = Events(kept);
        std::thread::spawn(move || {
            let events = events;
            events.0.into_iter().for_each(free_event)
        })
        .join()
        .unwrap();
        // SAFETY: a live receiver, freed once.
        unsafe { sp_receiver_free(r) };
    }

    /// The usual reply is written in the event's own room, a longer one apart: each reply reads
    /// whole whichever way the previous one went.
    #[test]
    fn replies_in_and_past_the_room_alternate() {
        let r = receiver(|_| {});
        let ev = handle_ok(r, REFUND);
        let long = std::ffi::CString::new("x".repeat(300)).unwrap();
        for _ in 0..2 {
            assert_eq!(reply(ev, true, None).unwrap(), r#"{"refund":{"success":true,"errorMessage":""}}"#);
            let failure = reply(ev, false, Some(&long)).unwrap();
            assert!(failure.ends_with(&format!(r#""errorMessage":"{}"}}}}"#, "x".repeat(300))), "{failure}");
        }
        free_event(ev);
        let ev = handle_ok(r, BALANCE);
        for money in [0, (1 << 53) - 1] {
            let got = reply_balance(ev, money, None, (1 << 53) - 1).unwrap();
            assert!(got.contains(&format!(r#""money":{money},"#)), "{got}");
            assert!(reply(ev, false, Some(&long)).unwrap().contains(long.to_str().unwrap()));
            assert_eq!(event(ev).reply_http_status, 500);
        }
        free_event(ev);
        // SAFETY: a live receiver, freed once.
        unsafe { sp_receiver_free(r) };
    }

    /// A host may hand a field of the event itself as an out-parameter (it may write into the
    /// event): the library's answer lands there.
    #[test]
    fn an_out_parameter_inside_the_event_itself() {
        let r = receiver(|_| {});
        let ev = handle_ok(r, REFUND);
        // SAFETY: a live event; the host may write into its fields.
        unsafe {
            let name = &raw mut (*ev).name;
            assert_eq!(sp_event_reply(ev, true, ptr::null(), name), SP_OK);
            assert_eq!(text(*name), r#"{"refund":{"success":true,"errorMessage":""}}"#);
            assert_eq!(sp_event_field(ev, c"traceId".as_ptr(), name), SP_OK);
            assert_eq!(text(*name), r#"{"a": [1, "x"]}"#);
        }
        free_event(ev);
        let ev = handle_ok(r, BALANCE);
        // SAFETY: as above.
        unsafe {
            let name = &raw mut (*ev).name;
            assert_eq!(sp_event_reply_balance(ev, 1, ptr::null(), 2, name), SP_OK);
            assert!(text(*name).contains(r#""money":1,"#));
        }
        free_event(ev);
        // SAFETY: a live receiver, freed once.
        unsafe { sp_receiver_free(r) };
    }
}

/// The library writes these structs whole into the caller's memory (`sp_journal_stats`,
/// `sp_journal_vital_signs`, `sp_prune_report`, `sp_recovery_summary`) or reads them whole from it
/// (`sp_prune_options`): a field appended to one would be written or read past the end of what a
/// host compiled against an earlier header allocated. Their layouts are fixed; new figures and
/// options come in structs of their own.
#[test]
fn structs_the_library_writes_or_reads_whole_keep_their_layout() {
    use slotpartner::ffi::journal::{sp_journal_stats, sp_journal_vital_signs, sp_prune_options, sp_prune_report};
    use slotpartner::ffi::recovery::sp_recovery_summary;
    use std::mem::{offset_of, size_of};
    assert_eq!(size_of::<sp_journal_stats>(), 144);
    assert_eq!(offset_of!(sp_journal_stats, numbering), 136);
    assert_eq!(size_of::<sp_journal_vital_signs>(), 80);
    assert_eq!(offset_of!(sp_journal_vital_signs, oldest_gap_ms), 72);
    assert_eq!(size_of::<sp_prune_options>(), 32);
    assert_eq!(offset_of!(sp_prune_options, max_time_ms), 24);
    assert_eq!(size_of::<sp_prune_report>(), 64);
    assert_eq!(offset_of!(sp_prune_report, complete), 56);
    assert_eq!(size_of::<sp_recovery_summary>(), 48);
    assert_eq!(offset_of!(sp_recovery_summary, unrecoverable), 40);
}
