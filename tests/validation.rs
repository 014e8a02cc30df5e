//! Every validation rule of the safe core, through `slotpartner::parse` and `Receiver`.
//!
//! Invalid cases are tables of `Case`s (one table per rule); each table has its own test, and
//! `no_invalid_case_is_ever_answered_with_success` runs all of them through the receiver's answer.

use std::borrow::Cow;

use serde_json::{Value, json};
use slotpartner::{
    BalanceQuery, BuyRefund, Error, ErrorKind, EventKind, JackpotPayout, KnownEvent, ParseOptions, Receiver,
    ReceiverConfig, Request, parse,
};

const R: &str = "gameSessionBuyRefund";
const P: &str = "jackpotPayout";
const B: &str = "getPlayerBalance";
const TOKEN: &str = "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";
const NEXT_TOKEN: &str = "0b7e3c55-1a2b-4c3d-8e9f-000000000001";
const PRODUCTION_ADDR: &str = "18.203.30.17";
const STAGING_ADDR: &str = "34.254.138.20";
const MAX_AMOUNT: i64 = (1 << 53) - 1;

// ---------------------------------------------------------------------------------------------
// Fixtures: one valid body per event, modified per case. Values differ from one another so that
// a field read into the wrong place is noticed.

fn refund() -> Value {
    json!({
        "event": R,
        "gameSessionIdentifier": "gs-1",
        "playerIdentifier": "p-1",
        "playerPartnerIdentifier": "pp-1",
        "transactionId": 1001,
        "buyTransactionId": 1000,
        "gameSessionId": 77,
        "partnerGameRequestIdentifier": "req-1",
        "gameId": 7,
        "isMobile": true,
        "bonusCode": "BONUS10"
    })
}

/// Without the optional `bonusCode` and `isMobile`.
fn payout() -> Value {
    json!({
        "event": P,
        "jackpotIdentifier": "jp-1",
        "playerIdentifier": "p-2",
        "playerPartnerIdentifier": "pp-2",
        "currencyISO4217": "EUR",
        "moneyWon": 150000,
        "coinsWon": 25,
        "isMoney": true,
        "epochReleasedMillis": 1_700_000_000_123_i64,
        "isPrimary": false,
        "transactionId": 2001,
        "buyTransactionId": 2000,
        "partnerGameRequestIdentifier": "req-2",
        "gameSessionId": 88,
        "gameId": 9
    })
}

fn balance() -> Value {
    json!({"action": B, "playerIdentifier": "p-3", "playerPartnerIdentifier": "pp-3"})
}

/// The three fixtures with their event label.
fn fixtures() -> [(&'static str, Value); 3] {
    [(R, refund()), (P, payout()), (B, balance())]
}

fn set(mut v: Value, key: &str, value: Value) -> Value {
    v[key] = value;
    v
}

fn unset(mut v: Value, key: &str) -> Value {
    v.as_object_mut().unwrap().remove(key);
    v
}

fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// `v` with the raw member text `member` (`"key":value`) appended.
fn append(v: &Value, member: &str) -> Vec<u8> {
    let mut text = serde_json::to_string(v).unwrap();
    text.pop();
    if !text.ends_with('{') {
        text.push(',');
    }
    text.push_str(member);
    text.push('}');
    text.into_bytes()
}

/// `v` with `key` set to the raw JSON text `raw` (for texts serde_json would not write, like `1e3`).
fn raw_body(v: &Value, key: &str, raw: &str) -> Vec<u8> {
    append(&unset(v.clone(), key), &format!("{}:{raw}", json!(key)))
}

/// `v` padded with an unknown string field so that the body is exactly `len` bytes.
fn padded(v: &Value, len: usize) -> Vec<u8> {
    let empty = raw_body(v, "pad", r#""""#).len();
    let out = raw_body(v, "pad", &format!("\"{}\"", "x".repeat(len - empty)));
    assert_eq!(out.len(), len);
    out
}

fn ok(body: &[u8]) -> slotpartner::Event<'_> {
    parse(body, &ParseOptions::default()).unwrap_or_else(|e| panic!("refused {}: {e}", String::from_utf8_lossy(body)))
}

fn options(change: impl FnOnce(&mut ParseOptions)) -> ParseOptions {
    let mut o = ParseOptions::default();
    change(&mut o);
    o
}

/// One invalid body and the error it must give: `kind`, `field`, and a message that starts with
/// the field (or `body` when there is none) and contains `problem`.
struct Case {
    label: String,
    options: ParseOptions,
    body: Vec<u8>,
    kind: ErrorKind,
    field: String,
    problem: String,
}

fn case(label: impl Into<String>, body: Vec<u8>, kind: ErrorKind, field: impl Into<String>, problem: &str) -> Case {
    let (label, field) = (label.into(), field.into());
    Case { label, options: ParseOptions::default(), body, kind, field, problem: problem.to_owned() }
}

/// The error `c` gives, or what is wrong with it.
fn check(c: &Case) -> Result<Error, String> {
    let err = match parse(&c.body, &c.options) {
        Ok(event) => return Err(format!("{}: accepted as {:?}", c.label, event.kind)),
        Err(err) => err,
    };
    let subject = if c.field.is_empty() { "body" } else { &c.field };
    if (err.kind, err.field.as_str()) != (c.kind, c.field.as_str()) {
        return Err(format!(
            "{}: expected {:?} {:?}, got {:?} {:?}: {}",
            c.label, c.kind, c.field, err.kind, err.field, err.message
        ));
    }
    if !err.message.starts_with(&format!("{subject}: ")) || !err.message.contains(&c.problem) {
        return Err(format!("{}: message {:?} should name {subject:?} and {:?}", c.label, err.message, c.problem));
    }
    Ok(err)
}

/// Checks every case, reporting all that fail.
fn check_all(cases: &[Case]) {
    assert!(!cases.is_empty());
    let failures: Vec<String> = cases.iter().filter_map(|c| check(c).err()).collect();
    assert!(failures.is_empty(), "{} of {} cases fail:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

fn config() -> ReceiverConfig {
    let mut config = ReceiverConfig::default();
    config.add_token(TOKEN).unwrap();
    config
}

fn receiver_for(o: &ParseOptions) -> Receiver {
    let mut c = config();
    c.set_max_body_bytes(o.max_body_bytes).unwrap();
    c.set_max_depth(o.max_depth).unwrap();
    c.set_max_identifier_bytes(o.max_identifier_bytes).unwrap();
    c.set_index_field(&o.index_field).unwrap();
    c.set_reject_unknown_events(o.reject_unknown_events);
    c.set_strict_index(o.strict_index);
    Receiver::new(c).unwrap()
}

fn request<'a>(token: Option<&'a str>, addr: &'a str, body: &'a [u8]) -> Request<'a> {
    Request { token: token.map(str::as_bytes), remote_addr: Some(addr.as_bytes()), forwarded_for: None, body }
}

// ---------------------------------------------------------------------------------------------
// Valid bodies

#[test]
fn valid_refund_gives_every_field() {
    let bytes = body(&refund());
    let event = ok(&bytes);
    assert_eq!((event.name.as_ref(), event.known(), event.index), (R, Some(KnownEvent::BuyRefund), None));
    let expected = BuyRefund {
        game_session_identifier: "gs-1".into(),
        player_identifier: Some("p-1".into()),
        player_partner_identifier: Some("pp-1".into()),
        transaction_id: 1001,
        buy_transaction_id: 1000,
        game_session_id: 77,
        partner_game_request_identifier: "req-1".into(),
        game_id: 7,
        is_mobile: true,
        bonus_code: Some("BONUS10".into()),
    };
    assert_eq!(event.kind, EventKind::BuyRefund(expected.clone()));
    assert!(event.extra.is_empty() && event.field("gameId").is_none(), "spec fields are typed, not extra");
    for without in [unset(refund(), "bonusCode"), set(refund(), "bonusCode", Value::Null)] {
        let bytes = body(&without);
        assert_eq!(ok(&bytes).kind, EventKind::BuyRefund(BuyRefund { bonus_code: None, ..expected.clone() }));
    }
}

#[test]
fn valid_payout_gives_every_field_with_and_without_optional_ones() {
    let mut expected = JackpotPayout {
        jackpot_identifier: "jp-1".into(),
        player_identifier: Some("p-2".into()),
        player_partner_identifier: Some("pp-2".into()),
        currency_iso4217: "EUR".into(),
        money_won: 150000,
        coins_won: 25,
        is_money: true,
        epoch_released_millis: 1_700_000_000_123,
        is_primary: false,
        transaction_id: 2001,
        buy_transaction_id: 2000,
        partner_game_request_identifier: "req-2".into(),
        game_session_id: 88,
        game_id: 9,
        bonus_code: None,
        is_mobile: None,
    };
    let bytes = body(&payout());
    let event = ok(&bytes);
    assert_eq!((event.name.as_ref(), event.known()), (P, Some(KnownEvent::JackpotPayout)));
    assert_eq!(event.kind, EventKind::JackpotPayout(expected.clone()));

    for is_mobile in [false, true] {
        let bytes = body(&set(set(payout(), "bonusCode", json!("B-7")), "isMobile", json!(is_mobile)));
        (expected.bonus_code, expected.is_mobile) = (Some("B-7".into()), Some(is_mobile));
        assert_eq!(ok(&bytes).kind, EventKind::JackpotPayout(expected.clone()));
    }
}

#[test]
fn balance_query_is_named_by_action() {
    let bytes = body(&balance());
    let event = ok(&bytes);
    assert_eq!((event.name.as_ref(), event.known()), (B, Some(KnownEvent::BalanceQuery)));
    let expected =
        BalanceQuery { player_identifier: Some("p-3".into()), player_partner_identifier: Some("pp-3".into()) };
    assert_eq!(event.kind, EventKind::BalanceQuery(expected));
    // `event` names only slot-machine events: the same body with `event` is an unknown event.
    let bytes = body(&set(unset(balance(), "action"), "event", json!(B)));
    assert_eq!(ok(&bytes).kind, EventKind::Other);
}

#[test]
fn escaped_strings_are_decoded() {
    let bytes = raw_body(&refund(), "gameSessionIdentifier", r#""g\u00e9-\ud83d\ude00\/""#);
    let EventKind::BuyRefund(r) = ok(&bytes).kind else { panic!("not a refund") };
    assert_eq!(r.game_session_identifier, "gé-😀/");
}

#[test]
fn unknown_event_passes_through_with_its_fields_as_extras() {
    let bytes = br#"{"index":41,"event":"gameSessionStart","foo":{"a":[1,2]},"bar":"x"}"#;
    let event = ok(bytes);
    assert_eq!(
        (event.name.as_ref(), &event.kind, event.known(), event.index),
        ("gameSessionStart", &EventKind::Other, None, Some(41))
    );
    let extras: Vec<&str> = event.extra.iter().map(|f| f.name.as_ref()).collect();
    assert_eq!(extras, ["index", "foo", "bar"]);
    assert_eq!((event.field("foo"), event.field("bar")), (Some(r#"{"a":[1,2]}"#), Some(r#""x""#)));

    let action = ok(br#"{"action":"getGames","gameId":3}"#);
    assert_eq!(
        (action.name.as_ref(), &action.kind, action.field("gameId")),
        ("getGames", &EventKind::Other, Some("3"))
    );

    let strict = options(|o| o.reject_unknown_events = true);
    for (raw, field) in [(&bytes[..], "event"), (br#"{"action":"getGames","gameId":3}"#, "action")] {
        let err = parse(raw, &strict).unwrap_err();
        assert_eq!((err.kind, err.field.as_str()), (ErrorKind::UnknownEvent, field));
        assert!(err.message.contains("unknown event") && !err.message.contains('\n'), "{}", err.message);
    }
    let err = parse(br#"{"action":"getGames","gameId":3}"#, &strict).unwrap_err();
    assert!(err.message.contains("getGames"), "{}", err.message);
    // Known events still pass with the strict option.
    assert!(parse(&body(&refund()), &strict).is_ok());
}

#[test]
fn unknown_fields_are_kept_exactly_as_sent_in_body_order() {
    let text = concat!(
        r#"{"traceId" : "a\u00e9\n\"b\"" ,"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-1","#,
        r#""playerIdentifier":"p-1","meta":{ "k" : [1, 2.50, -0e3, null] },"transactionId":1001,"#,
        r#""buyTransactionId":1000,"gameSessionId":77,"partnerGameRequestIdentifier":"req-1","gameId":7,"#,
        r#""isMobile":false,"index":  12 ,"seq":5}"#
    );
    let event = ok(text.as_bytes());
    assert_eq!(event.field("traceId"), Some(r#""a\u00e9\n\"b\"""#));
    assert_eq!(event.field("meta"), Some(r#"{ "k" : [1, 2.50, -0e3, null] }"#));
    // Spec fields are read from the typed event, not as extra fields.
    assert_eq!((event.field("gameId"), event.field("event"), event.field("absent")), (None, None, None));
    let extras: Vec<(&str, &str)> = event.extra.iter().map(|f| (f.name.as_ref(), f.raw.get())).collect();
    assert_eq!(
        extras,
        [
            ("traceId", r#""a\u00e9\n\"b\"""#),
            ("meta", r#"{ "k" : [1, 2.50, -0e3, null] }"#),
            ("index", "12"),
            ("seq", "5")
        ]
    );
    assert_eq!(event.index, Some(12));

    // A configured index field name is read instead of `index`.
    let event = parse(text.as_bytes(), &options(|o| o.index_field = "seq".into())).unwrap();
    assert_eq!(event.index, Some(5));
    let event = parse(text.as_bytes(), &options(|o| o.index_field = "sequenceNo".into())).unwrap();
    assert_eq!(event.index, None);
}

/// A field another event defines is an extra field here: kept raw, in body order, not typed.
#[test]
fn fields_of_other_events_are_extras_in_body_order() {
    let refund_text = append(&refund(), r#""moneyWon":-5,"note":[1],"currencyISO4217":"eur","action":"x""#);
    let balance_text = append(&balance(), r#""isMobile":"yes","gameId":1.5"#);
    let other_text = br#"{"gameId":-1,"event":"gameSessionStart","isMobile":"yes","jackpotIdentifier":""}"#;
    for (text, expected) in [
        (
            &refund_text[..],
            &[("moneyWon", "-5"), ("note", "[1]"), ("currencyISO4217", r#""eur""#), ("action", r#""x""#)][..],
        ),
        (&balance_text, &[("isMobile", r#""yes""#), ("gameId", "1.5")]),
        (other_text, &[("gameId", "-1"), ("isMobile", r#""yes""#), ("jackpotIdentifier", r#""""#)]),
    ] {
        let event = ok(text);
        let extras: Vec<(&str, &str)> = event.extra.iter().map(|f| (f.name.as_ref(), f.raw.get())).collect();
        assert_eq!(extras, expected, "{}", String::from_utf8_lossy(text));
    }
    // Still checked like any extra field.
    let err = parse(&append(&refund(), r#""moneyWon":[{"a":1,"a":2}]"#), &ParseOptions::default()).unwrap_err();
    assert_eq!((err.kind, err.field.as_str()), (ErrorKind::DuplicateKey, "gameSessionBuyRefund.moneyWon"));
}

#[test]
fn index_limits() {
    for (raw, expected) in [("0", Some(0)), ("9223372036854775807", Some(i64::MAX)), ("null", None)] {
        assert_eq!(ok(&raw_body(&refund(), "index", raw)).index, expected, "index {raw}");
    }
}

fn index_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (event, v) in fixtures() {
        for (raw, kind) in
            [("-1", ErrorKind::OutOfRange), ("1.5", ErrorKind::WrongType), (r#""3""#, ErrorKind::WrongType)]
        {
            let problem = format!("expected a non-negative integer, got {raw}");
            let field = format!("{event}.index");
            cases.push(case(format!("{event} index {raw}"), raw_body(&v, "index", raw), kind, field, &problem));
        }
    }
    let v = json!({"event": "other", "idx": 1});
    let mut custom = case("custom index", raw_body(&v, "seq", "-4"), ErrorKind::OutOfRange, "other.seq", "got -4");
    custom.options.index_field = "seq".into();
    cases.push(custom);
    cases.push(case(
        "index too big",
        raw_body(&v, "index", "9223372036854775808"),
        ErrorKind::OutOfRange,
        "other.index",
        "at most",
    ));
    // Refused only in strict mode: by default a guessed field never refuses the event.
    for c in &mut cases {
        c.options.strict_index = true;
    }
    cases
}

#[test]
fn invalid_index_is_refused_naming_the_field_in_strict_mode() {
    check_all(&index_cases());
}

#[test]
fn an_unreadable_index_leaves_the_event_without_one_by_default() {
    let cases = index_cases();
    assert!(cases.len() >= 10);
    for c in cases {
        let options = ParseOptions { strict_index: false, ..c.options.clone() };
        let event = parse(&c.body, &options).unwrap_or_else(|e| panic!("{}: refused: {}", c.label, e.message));
        assert_eq!((event.index, event.index_unreadable), (None, true), "{}", c.label);
        // The raw value stays readable.
        let raw = event.field(&options.index_field).unwrap_or_else(|| panic!("{}: raw value lost", c.label));
        assert!(
            c.label.ends_with(raw) || c.label == "index too big" || c.label == "custom index",
            "{}: {raw}",
            c.label
        );
        let r = receiver_for(&options);
        assert!(r.handle(&request(Some(TOKEN), PRODUCTION_ADDR, &c.body)).is_ok(), "{}", c.label);
    }
    // A readable index, a null one and an absent one are not unreadable.
    for (raw, index) in [("42", Some(42)), ("null", None)] {
        let bytes = raw_body(&payout(), "index", raw);
        let event = parse(&bytes, &ParseOptions::default()).unwrap();
        assert_eq!((event.index, event.index_unreadable), (index, false), "{raw}");
    }
    let bytes = body(&payout());
    let event = parse(&bytes, &ParseOptions::default()).unwrap();
    assert_eq!((event.index, event.index_unreadable), (None, false));
}

// ---------------------------------------------------------------------------------------------
// The body: size, encoding, JSON syntax, duplicates, depth

fn body_cases() -> Vec<Case> {
    use ErrorKind::*;
    let limit = ParseOptions::default().max_body_bytes;
    let mut bom = b"\xEF\xBB\xBF".to_vec();
    bom.extend(body(&refund()));
    let mut cases = vec![
        case("one byte over", padded(&refund(), limit + 1), BodyTooLarge, "", &format!("limit of {limit}")),
        case("BOM", bom, InvalidUtf8, "", "byte order mark"),
    ];
    for (label, bad) in [("0xFF", &b"\xFF"[..]), ("overlong", b"\xC0\xAF"), ("UTF-8 surrogate", b"\xED\xA0\x80")] {
        let mut text = raw_body(&refund(), "note", r#""ab@""#);
        let at = text.iter().position(|&b| b == b'@').unwrap();
        text.splice(at..=at, bad.iter().copied());
        cases.push(case(
            format!("{label} in an unknown field"),
            text,
            InvalidUtf8,
            "",
            &format!("invalid UTF-8 at byte {at}"),
        ));
    }
    for raw in ["[1]", r#""{}""#, "5", "null", "true", " [{}]"] {
        cases.push(case(format!("top level {raw}"), raw.into(), NotAnObject, "", "not a JSON object"));
    }
    let mut trailing = body(&refund());
    trailing.extend(b" x");
    let mut two = body(&refund());
    two.extend(b"{}");
    for (label, text) in [
        ("empty", Vec::new()),
        ("missing value", br#"{"event":}"#.to_vec()),
        ("unclosed", br#"{"event":"jackpotPayout""#.to_vec()),
        ("single quotes", b"{'event':'x'}".to_vec()),
        ("trailing garbage", trailing),
        ("two objects", two),
        ("raw control character", raw_body(&refund(), "note", "\"a\u{1}b\"")),
    ] {
        cases.push(case(label, text, InvalidJson, "", "invalid JSON"));
    }
    // Lone surrogate escapes: in a known field, an unknown field, deep in an unknown field, a key.
    for (label, key, raw, field) in [
        ("known field", "gameSessionIdentifier", r#""a\ud800""#, format!("{R}.gameSessionIdentifier")),
        ("unknown field", "note", r#""\udc00b""#, format!("{R}.note")),
        ("deep unknown field", "meta", r#"{"a":[1,{"b":["x\ud83d"]}]}"#, format!("{R}.meta")),
        ("nested key", "meta", r#"{"\ud800":1}"#, format!("{R}.meta")),
    ] {
        cases.push(case(
            format!("lone surrogate in {label}"),
            raw_body(&refund(), key, raw),
            InvalidJson,
            field,
            "escape",
        ));
    }
    cases.push(case(
        "lone surrogate in a top-level key",
        append(&refund(), r#""\ud800":1"#),
        InvalidJson,
        "",
        "escape",
    ));
    cases.push(case(
        "lone surrogate in the event name",
        raw_body(&refund(), "event", r#""x\udfff""#),
        InvalidJson,
        "body.event",
        "escape",
    ));
    // Duplicate keys, at the top level (also written differently) and inside unknown values.
    for (member, field) in
        [(r#""gameId":8"#, "gameId"), (r#""game\u0049d":7"#, "gameId"), (r#""event":"jackpotPayout""#, "event")]
    {
        cases.push(case(
            format!("duplicate {member}"),
            append(&refund(), member),
            DuplicateKey,
            field,
            "more than once",
        ));
    }
    for raw in [r#"{"a":1,"b":2,"a":1}"#, r#"[{"x":{"k":1,"\u006b":2}}]"#] {
        cases.push(case(
            format!("nested duplicate {raw}"),
            raw_body(&refund(), "meta", raw),
            DuplicateKey,
            format!("{R}.meta"),
            "duplicate key",
        ));
    }
    // Depth: the top-level object is level 1, so `meta` holding n arrays reaches level n + 1.
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let max = ParseOptions::default().max_depth;
    cases.push(case(
        "depth max + 1",
        raw_body(&refund(), "meta", &nested(max)),
        TooDeep,
        format!("{R}.meta"),
        "nested deeper than 32",
    ));
    cases.push(case(
        "depth 30000",
        raw_body(&refund(), "meta", &nested(30000)),
        TooDeep,
        format!("{R}.meta"),
        "nested deeper",
    ));
    let mut small = case(
        "depth 4 of 3",
        raw_body(&payout(), "meta", r#"{"a":[{}]}"#),
        TooDeep,
        format!("{P}.meta"),
        "deeper than 3",
    );
    small.options.max_depth = 3;
    cases.push(small);
    cases.push(case(
        "depth in an unknown event",
        raw_body(&json!({"event":"x"}), "m", &nested(max)),
        TooDeep,
        "x.m",
        "deeper",
    ));
    cases
}

#[test]
fn body_rules() {
    check_all(&body_cases());
}

#[test]
fn body_limits_are_inclusive() {
    let limit = ParseOptions::default().max_body_bytes;
    assert_eq!(limit, 64 * 1024);
    assert!(ok(&padded(&refund(), limit)).known().is_some());
    let custom = options(|o| o.max_body_bytes = 400);
    assert!(parse(&padded(&refund(), 400), &custom).is_ok());
    assert_eq!(parse(&padded(&refund(), 401), &custom).unwrap_err().kind, ErrorKind::BodyTooLarge);

    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let max = ParseOptions::default().max_depth;
    assert!(ok(&raw_body(&refund(), "meta", &nested(max - 1))).field("meta").is_some());
    let three = options(|o| o.max_depth = 3);
    assert!(parse(&raw_body(&refund(), "meta", r#"{"a":[1]}"#), &three).is_ok());
    let one = options(|o| o.max_depth = 1);
    assert_eq!(parse(&raw_body(&refund(), "meta", "[]"), &one).unwrap_err().kind, ErrorKind::TooDeep);
    assert!(parse(&raw_body(&refund(), "meta", r#""[]""#), &one).is_ok());

    // Whitespace around the object and valid surrogate pairs are fine.
    let mut spaced = b" \n\t".to_vec();
    spaced.extend(body(&refund()));
    spaced.extend(b"\r\n ");
    assert!(ok(&spaced).known().is_some());
    let pair = raw_body(&refund(), "note", r#""\ud83d\ude00 \uD834\uDD1E""#);
    assert_eq!(ok(&pair).field("note"), Some(r#""\ud83d\ude00 \uD834\uDD1E""#));
}

// ---------------------------------------------------------------------------------------------
// Fields: presence, integers, identifiers, currency, booleans

const REFUND_REQUIRED: [&str; 7] = [
    "gameSessionIdentifier",
    "transactionId",
    "buyTransactionId",
    "gameSessionId",
    "partnerGameRequestIdentifier",
    "gameId",
    "isMobile",
];
const PAYOUT_REQUIRED: [&str; 12] = [
    "jackpotIdentifier",
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
];
const REFUND_INTEGERS: [&str; 4] = ["transactionId", "buyTransactionId", "gameSessionId", "gameId"];
const PAYOUT_INTEGERS: [&str; 7] =
    ["moneyWon", "coinsWon", "epochReleasedMillis", "transactionId", "buyTransactionId", "gameSessionId", "gameId"];

fn missing_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (event, v, required) in [(R, refund(), &REFUND_REQUIRED[..]), (P, payout(), &PAYOUT_REQUIRED[..])] {
        for name in required {
            let field = format!("{event}.{name}");
            cases.push(case(
                format!("{field} missing"),
                body(&unset(v.clone(), name)),
                ErrorKind::MissingField,
                field.clone(),
                "required field is missing",
            ));
            // `null` is taken as absent.
            cases.push(case(
                format!("{field} null"),
                body(&set(v.clone(), name, Value::Null)),
                ErrorKind::MissingField,
                field,
                "required field is missing",
            ));
        }
    }
    for (event, v) in fixtures() {
        let neither = unset(unset(v.clone(), "playerIdentifier"), "playerPartnerIdentifier");
        let field = format!("{event}.playerIdentifier");
        cases.push(case(
            format!("{event} no player"),
            body(&neither),
            ErrorKind::MissingField,
            &field,
            "playerPartnerIdentifier",
        ));
        let nulls = set(set(v, "playerIdentifier", Value::Null), "playerPartnerIdentifier", Value::Null);
        cases.push(case(format!("{event} null players"), body(&nulls), ErrorKind::MissingField, field, "one of"));
    }
    let anonymous = unset(refund(), "event");
    cases.push(case("no event", body(&anonymous), ErrorKind::MissingField, "event", "neither event nor action"));
    cases.push(case("empty object", b"{}".to_vec(), ErrorKind::MissingField, "event", "missing"));
    for (raw, kind) in
        [("5", ErrorKind::WrongType), (r#""""#, ErrorKind::InvalidValue), (r#"["x"]"#, ErrorKind::WrongType)]
    {
        cases.push(case(format!("event {raw}"), raw_body(&refund(), "event", raw), kind, "body.event", ""));
    }
    cases
}

#[test]
fn required_fields_must_be_present() {
    check_all(&missing_cases());
}

#[test]
fn one_player_reference_is_enough() {
    for (event, v) in fixtures() {
        for (drop, keep) in
            [("playerIdentifier", "playerPartnerIdentifier"), ("playerPartnerIdentifier", "playerIdentifier")]
        {
            let bytes = body(&unset(v.clone(), drop));
            let parsed = ok(&bytes);
            let (service, partner) = match &parsed.kind {
                EventKind::BuyRefund(r) => (&r.player_identifier, &r.player_partner_identifier),
                EventKind::JackpotPayout(p) => (&p.player_identifier, &p.player_partner_identifier),
                EventKind::BalanceQuery(q) => (&q.player_identifier, &q.player_partner_identifier),
                EventKind::Other => panic!("{event} not recognised"),
            };
            let (kept, dropped) = if keep == "playerIdentifier" { (service, partner) } else { (partner, service) };
            assert_eq!((kept.as_deref().is_some(), dropped), (true, &None), "{event} without {drop}");
            assert_eq!(kept.as_deref(), v[keep].as_str());
        }
    }
}

fn integer_cases() -> Vec<Case> {
    use ErrorKind::*;
    let mut cases = Vec::new();
    for (event, v, fields) in [(R, refund(), &REFUND_INTEGERS[..]), (P, payout(), &PAYOUT_INTEGERS[..])] {
        for name in fields {
            let field = format!("{event}.{name}");
            // `shown`: whether the message repeats the value exactly as sent.
            for (raw, kind, shown) in [
                ("1.0", WrongType, true),
                ("1e3", WrongType, false),
                ("1E3", WrongType, false),
                ("1e20", WrongType, false),
                ("-1e20", WrongType, false),
                ("1e400", WrongType, false),
                (r#""1""#, WrongType, true),
                ("true", WrongType, true),
                ("[1]", WrongType, false),
                ("{}", WrongType, false),
                ("-1", OutOfRange, true),
                ("-9223372036854775808", OutOfRange, true),
            ] {
                let mut problem = "expected a non-negative integer, got ".to_owned();
                if shown {
                    problem.push_str(raw);
                }
                cases.push(case(format!("{field} = {raw}"), raw_body(&v, name, raw), kind, field.clone(), &problem));
            }
            let max = if matches!(*name, "moneyWon" | "coinsWon") { MAX_AMOUNT } else { i64::MAX };
            let over = (i128::from(max) + 1).to_string();
            let problem = format!("expected at most {max}, got {over}");
            cases.push(case(
                format!("{field} = {over}"),
                raw_body(&v, name, &over),
                OutOfRange,
                field.clone(),
                &problem,
            ));
            let huge = "9".repeat(60);
            cases.push(case(format!("{field} huge"), raw_body(&v, name, &huge), OutOfRange, field, "expected at most"));
        }
    }
    cases
}

#[test]
fn integers_must_be_non_negative_json_integers_in_range() {
    check_all(&integer_cases());
    let err = parse(&raw_body(&payout(), "moneyWon", "1500.5"), &ParseOptions::default()).unwrap_err();
    assert_eq!(err.message, "jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5");
    assert_eq!(err.event, Some(KnownEvent::JackpotPayout));
}

#[test]
fn integer_limits_are_inclusive() {
    let v = set(set(payout(), "moneyWon", json!(MAX_AMOUNT)), "coinsWon", json!(MAX_AMOUNT));
    let v = set(set(v, "transactionId", json!(i64::MAX)), "epochReleasedMillis", json!(i64::MAX));
    let v = set(set(v, "gameId", json!(0)), "gameSessionId", json!(i64::MAX - 1));
    let bytes = body(&v);
    let EventKind::JackpotPayout(p) = ok(&bytes).kind else { panic!("not a payout") };
    assert_eq!((p.money_won, p.coins_won, p.transaction_id), (MAX_AMOUNT, MAX_AMOUNT, i64::MAX));
    assert_eq!((p.epoch_released_millis, p.game_id, p.game_session_id), (i64::MAX, 0, i64::MAX - 1));
    let bytes = body(&set(refund(), "buyTransactionId", json!(i64::MAX)));
    let EventKind::BuyRefund(r) = ok(&bytes).kind else { panic!("not a refund") };
    assert_eq!(r.buy_transaction_id, i64::MAX);
}

fn identifier_fields() -> Vec<(&'static str, Value, &'static str)> {
    let mut out = Vec::new();
    for name in [
        "gameSessionIdentifier",
        "playerIdentifier",
        "playerPartnerIdentifier",
        "partnerGameRequestIdentifier",
        "bonusCode",
    ] {
        out.push((R, refund(), name));
    }
    for name in [
        "jackpotIdentifier",
        "playerIdentifier",
        "playerPartnerIdentifier",
        "partnerGameRequestIdentifier",
        "bonusCode",
    ] {
        out.push((P, payout(), name));
    }
    out.push((B, balance(), "playerIdentifier"));
    out.push((B, balance(), "playerPartnerIdentifier"));
    out
}

/// The typed value of the identifier field `name`.
fn identifier<'k>(kind: &'k EventKind<'_>, name: &str) -> Option<&'k str> {
    match (kind, name) {
        (EventKind::BuyRefund(r), "gameSessionIdentifier") => Some(&r.game_session_identifier),
        (EventKind::BuyRefund(r), "playerIdentifier") => r.player_identifier.as_deref(),
        (EventKind::BuyRefund(r), "playerPartnerIdentifier") => r.player_partner_identifier.as_deref(),
        (EventKind::BuyRefund(r), "partnerGameRequestIdentifier") => Some(&r.partner_game_request_identifier),
        (EventKind::BuyRefund(r), "bonusCode") => r.bonus_code.as_deref(),
        (EventKind::JackpotPayout(p), "jackpotIdentifier") => Some(&p.jackpot_identifier),
        (EventKind::JackpotPayout(p), "playerIdentifier") => p.player_identifier.as_deref(),
        (EventKind::JackpotPayout(p), "playerPartnerIdentifier") => p.player_partner_identifier.as_deref(),
        (EventKind::JackpotPayout(p), "partnerGameRequestIdentifier") => Some(&p.partner_game_request_identifier),
        (EventKind::JackpotPayout(p), "bonusCode") => p.bonus_code.as_deref(),
        (EventKind::BalanceQuery(q), "playerIdentifier") => q.player_identifier.as_deref(),
        (EventKind::BalanceQuery(q), "playerPartnerIdentifier") => q.player_partner_identifier.as_deref(),
        _ => panic!("{name} is not an identifier of {kind:?}"),
    }
}

fn identifier_cases() -> Vec<Case> {
    use ErrorKind::*;
    let limit = ParseOptions::default().max_identifier_bytes;
    let mut cases = Vec::new();
    for (event, v, name) in identifier_fields() {
        let field = format!("{event}.{name}");
        for (raw, kind, problem) in [
            (r#""""#.to_owned(), InvalidValue, "must not be empty".to_owned()),
            (r#""a\u0000b""#.into(), InvalidValue, "control character U+0000".into()),
            (r#""\u001f""#.into(), InvalidValue, "control character U+001F".into()),
            ("\"a\u{7f}\"".into(), InvalidValue, "control character U+007F".into()),
            ("\"x\u{85}y\"".into(), InvalidValue, "control character U+0085".into()),
            (r#""tab\there""#.into(), InvalidValue, "control character U+0009".into()),
            (
                format!("\"{}\"", "a".repeat(limit + 1)),
                InvalidValue,
                format!("{} bytes, more than the limit of {limit}", limit + 1),
            ),
            (format!("\"{}a\"", "é".repeat(limit / 2)), InvalidValue, format!("{} bytes", limit + 1)),
            ("42".into(), WrongType, "expected a string, got 42".into()),
            ("true".into(), WrongType, "expected a string".into()),
            (r#"{"id":"x"}"#.into(), WrongType, "expected a string".into()),
        ] {
            cases.push(case(format!("{field} = {raw:.20}"), raw_body(&v, name, &raw), kind, field.clone(), &problem));
        }
        // A custom limit (above the longest event name, which the limit bounds too).
        let over = json!("x".repeat(25)).to_string();
        let mut short = case(format!("{field} over 24"), raw_body(&v, name, &over), InvalidValue, field, "25 bytes");
        short.options.max_identifier_bytes = 24;
        cases.push(short);
    }
    cases
}

#[test]
fn identifiers_are_non_empty_bounded_and_free_of_control_characters() {
    check_all(&identifier_cases());
}

#[test]
fn identifiers_exactly_at_the_limit_are_accepted() {
    let limit = ParseOptions::default().max_identifier_bytes;
    for (event, v, name) in identifier_fields() {
        for value in ["a".repeat(limit), "é".repeat(limit / 2), "ü 😀 – ok".to_owned()] {
            let bytes = body(&set(v.clone(), name, json!(value)));
            let parsed = parse(&bytes, &ParseOptions::default()).unwrap_or_else(|e| panic!("{event}.{name}: {e}"));
            assert_eq!(identifier(&parsed.kind, name), Some(&value[..]), "{event}.{name}");
        }
        let custom = options(|o| o.max_identifier_bytes = 24);
        assert!(parse(&body(&set(v, name, json!("x".repeat(24)))), &custom).is_ok(), "{event}.{name}");
    }
}

fn currency_cases() -> Vec<Case> {
    let field = format!("{P}.currencyISO4217");
    let mut cases: Vec<Case> = ["eur", "EU", "EURO", "E1R", "", " EUR", "ÉUR"]
        .into_iter()
        .map(|code| {
            let raw = json!(code).to_string();
            case(
                format!("currency {raw}"),
                raw_body(&payout(), "currencyISO4217", &raw),
                ErrorKind::InvalidValue,
                &field,
                "three uppercase letters",
            )
        })
        .collect();
    cases.push(case(
        "currency 978",
        raw_body(&payout(), "currencyISO4217", "978"),
        ErrorKind::WrongType,
        &field,
        "expected a string",
    ));
    cases.push(case(
        "currency escaped NUL",
        raw_body(&payout(), "currencyISO4217", r#""E\u0000R""#),
        ErrorKind::InvalidValue,
        field,
        r#""E\u0000R""#,
    ));
    cases
}

#[test]
fn currency_is_three_uppercase_letters() {
    check_all(&currency_cases());
    for code in ["EUR", "USD", "XAU"] {
        let bytes = body(&set(payout(), "currencyISO4217", json!(code)));
        let EventKind::JackpotPayout(p) = ok(&bytes).kind else { panic!("not a payout") };
        assert_eq!(p.currency_iso4217, Cow::Borrowed(code));
    }
}

fn boolean_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (event, v, name) in
        [(R, refund(), "isMobile"), (P, payout(), "isMoney"), (P, payout(), "isPrimary"), (P, payout(), "isMobile")]
    {
        let field = format!("{event}.{name}");
        for raw in ["0", "1", r#""true""#, r#""false""#, "[true]"] {
            // Containers are described ("an array"), scalars repeated as sent.
            let shown = if raw.starts_with('[') { "" } else { raw };
            let problem = format!("expected a boolean, got {shown}");
            cases.push(case(
                format!("{field} = {raw}"),
                raw_body(&v, name, raw),
                ErrorKind::WrongType,
                field.clone(),
                &problem,
            ));
        }
    }
    cases
}

#[test]
fn booleans_must_be_json_booleans() {
    check_all(&boolean_cases());
    // The optional payout isMobile given as null is absent.
    let bytes = body(&set(payout(), "isMobile", Value::Null));
    let EventKind::JackpotPayout(p) = ok(&bytes).kind else { panic!("not a payout") };
    assert_eq!(p.is_mobile, None);
}

/// Object keys reach C as NUL-terminated names, so a control character in a key is refused; but
/// the JSON is valid, so the refusal must not call it invalid JSON (`ErrorKind::InvalidJson` is
/// documented as syntax, lone surrogates, trailing data).
#[test]
fn control_character_in_a_key_is_refused_but_not_as_invalid_json() {
    for text in [append(&refund(), r#""a\u0000b":1"#), raw_body(&refund(), "meta", r#"{"k\u001f":1}"#)] {
        let err = parse(&text, &ParseOptions::default()).unwrap_err();
        assert!(err.message.contains("control character"), "{}", err.message);
        assert_ne!(err.kind, ErrorKind::InvalidJson, "{}: {}", String::from_utf8_lossy(&text), err.message);
    }
}

fn all_invalid_cases() -> Vec<Case> {
    [
        index_cases(),
        body_cases(),
        missing_cases(),
        integer_cases(),
        identifier_cases(),
        currency_cases(),
        boolean_cases(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

// ---------------------------------------------------------------------------------------------
// The receiver: source, token, order, and the answer to each failure

#[test]
fn sources_are_checked() {
    let bytes = body(&refund());
    for (sources, allowed, refused) in [
        (
            "production",
            &[
                "18.203.30.17",
                "18.202.194.158",
                "18.203.7.167",
                "34.248.216.129",
                "18.203.175.80",
                "::ffff:18.203.7.167",
            ][..],
            &[STAGING_ADDR, "127.0.0.1"][..],
        ),
        ("staging", &[STAGING_ADDR, "34.254.59.104"], &[PRODUCTION_ADDR, "34.254.59.105"]),
        ("any", &["203.0.113.9", "::1", PRODUCTION_ADDR, "not-an-address", ""], &[]),
        ("::ffff:10.0.0.0/104", &["10.0.0.1", "::ffff:10.200.3.4"], &["11.0.0.1", "::ffff:11.0.0.1", "::1"]),
        (
            "10.1.2.0/24, 2001:db8::/32",
            &["10.1.2.0", "10.1.2.255", "2001:db8::5"],
            &["10.1.3.1", STAGING_ADDR, "2001:db9::1"],
        ),
    ] {
        let mut c = config();
        c.set_sources(sources).unwrap();
        let r = Receiver::new(c).unwrap();
        for addr in allowed {
            assert!(r.handle(&request(Some(TOKEN), addr, &bytes)).is_ok(), "{sources}: {addr} refused");
        }
        for addr in refused {
            let err = r.handle(&request(Some(TOKEN), addr, &bytes)).unwrap_err();
            assert_eq!(
                (err.kind, err.field.as_str()),
                (ErrorKind::ForbiddenSource, "remote_addr"),
                "{sources}: {addr}"
            );
        }
        let no_addr = Request { token: Some(TOKEN.as_bytes()), remote_addr: None, forwarded_for: None, body: &bytes };
        if sources == "any" {
            // Under `any` the address does not matter, not even a missing one.
            assert!(r.handle(&no_addr).is_ok(), "{sources}: no address");
        } else {
            assert_eq!(r.handle(&no_addr).unwrap_err().kind, ErrorKind::ForbiddenSource, "{sources}: no address");
        }
    }
    let mut c = config();
    let err = c.set_sources("staging, 10.0.0.300").unwrap_err();
    assert_eq!((err.kind, err.field.as_str()), (ErrorKind::InvalidArgument, "sources"));
}

#[test]
fn tokens_are_checked_and_either_rotation_token_works() {
    let bytes = body(&refund());
    let mut c = config();
    c.add_token(NEXT_TOKEN).unwrap();
    assert_eq!(c.add_token("11111111-2222-3333-4444-555555555555").unwrap_err().field, "token");
    let r = Receiver::new(c).unwrap();
    for token in [TOKEN, NEXT_TOKEN] {
        assert!(r.handle(&request(Some(token), PRODUCTION_ADDR, &bytes)).is_ok(), "{token}");
    }
    for (token, kind) in [
        (None, ErrorKind::MissingToken),
        (Some(""), ErrorKind::MissingToken),
        (Some("11111111-2222-3333-4444-555555555555"), ErrorKind::WrongToken),
        (Some(&TOKEN[..35]), ErrorKind::WrongToken),
        (Some(&format!("{TOKEN} ")[..]), ErrorKind::WrongToken),
        (Some(&NEXT_TOKEN.replace('0', "O")[..]), ErrorKind::WrongToken),
    ] {
        let err = r.handle(&request(token, PRODUCTION_ADDR, &bytes)).unwrap_err();
        assert_eq!((err.kind, err.field.as_str()), (kind, "X-Service-Token"), "{token:?}");
        assert_eq!(r.error_response(&err).http_status, 401);
    }
    // UUIDs are case-insensitive: a token sent or configured in upper case is the same token.
    assert!(r.handle(&request(Some(&TOKEN.to_uppercase()), PRODUCTION_ADDR, &bytes)).is_ok());
    let mut upper = ReceiverConfig::default();
    upper.add_token(&TOKEN.to_uppercase()).unwrap();
    let upper = Receiver::new(upper).unwrap();
    assert!(upper.handle(&request(Some(TOKEN), PRODUCTION_ADDR, &bytes)).is_ok());
    // Only one token configured: the other one is wrong.
    let single = Receiver::new(config()).unwrap();
    assert_eq!(
        single.handle(&request(Some(NEXT_TOKEN), PRODUCTION_ADDR, &bytes)).unwrap_err().kind,
        ErrorKind::WrongToken
    );
    // A token must be a UUID, and a receiver needs one.
    let mut c = ReceiverConfig::default();
    assert_eq!(c.add_token("secret").unwrap_err().kind, ErrorKind::InvalidArgument);
    let err = Receiver::new(c).unwrap_err();
    assert_eq!((err.kind, err.field.as_str()), (ErrorKind::InvalidArgument, "token"));
}

#[test]
fn source_is_checked_before_token_and_body_is_read_last() {
    let r = Receiver::new(config()).unwrap();
    let garbage = b"\xFF not json";
    for (token, addr, body, kind) in [
        (Some("11111111-2222-3333-4444-555555555555"), STAGING_ADDR, &garbage[..], ErrorKind::ForbiddenSource),
        (None, STAGING_ADDR, garbage, ErrorKind::ForbiddenSource),
        (Some("11111111-2222-3333-4444-555555555555"), PRODUCTION_ADDR, garbage, ErrorKind::WrongToken),
        (None, PRODUCTION_ADDR, garbage, ErrorKind::MissingToken),
        (Some(TOKEN), PRODUCTION_ADDR, garbage, ErrorKind::InvalidUtf8),
    ] {
        assert_eq!(r.handle(&request(token, addr, body)).unwrap_err().kind, kind, "{token:?} {addr}");
    }
    let large = padded(&refund(), 70_000);
    assert_eq!(
        r.handle(&request(Some("11111111-2222-3333-4444-555555555555"), PRODUCTION_ADDR, &large)).unwrap_err().kind,
        ErrorKind::WrongToken
    );
}

#[test]
fn forwarded_for_is_believed_only_from_trusted_proxies() {
    let bytes = body(&refund());
    let mut c = config();
    c.set_sources("staging").unwrap();
    c.set_trusted_proxies("10.0.0.0/8").unwrap();
    let r = Receiver::new(c).unwrap();
    let via = |remote: &'static str, forwarded: Option<&'static str>| {
        let req = Request {
            token: Some(TOKEN.as_bytes()),
            remote_addr: Some(remote.as_bytes()),
            forwarded_for: forwarded.map(str::as_bytes),
            body: &bytes,
        };
        r.handle(&req).map(|_| ()).map_err(|e| e.kind)
    };
    assert_eq!(via("10.0.0.5", Some(STAGING_ADDR)), Ok(()));
    assert_eq!(via("10.0.0.5", Some("1.2.3.4, 34.254.59.104, 10.9.9.9")), Ok(()));
    assert_eq!(via("10.0.0.5", Some("34.254.59.104, 1.2.3.4")), Err(ErrorKind::ForbiddenSource));
    assert_eq!(via("10.0.0.5", None), Err(ErrorKind::ForbiddenSource));
    assert_eq!(via("10.0.0.5", Some("garbage")), Err(ErrorKind::ForbiddenSource));
    assert_eq!(via("198.51.100.1", Some(STAGING_ADDR)), Err(ErrorKind::ForbiddenSource));
    assert_eq!(via(STAGING_ADDR, Some("198.51.100.1")), Ok(()));
    // Not UTF-8: ignored unread from an untrusted peer, refused as a source from a trusted proxy.
    let raw = |remote: &'static str, forwarded: &'static [u8]| {
        let req = Request {
            token: Some(TOKEN.as_bytes()),
            remote_addr: Some(remote.as_bytes()),
            forwarded_for: Some(forwarded),
            body: &bytes,
        };
        r.handle(&req).map(|_| ()).map_err(|e| (e.kind, r.error_response(&e).http_status))
    };
    assert_eq!(raw(STAGING_ADDR, b"\xff\xfe 1.2.3.4"), Ok(()));
    assert_eq!(raw("10.0.0.5", b"\xff\xfe"), Err((ErrorKind::ForbiddenSource, 403)));
    assert_eq!(config().set_trusted_proxies("10.0.0.0/33").unwrap_err().field, "trusted_proxies");
}

fn error_json(r: &Receiver, err: &Error) -> (u16, Value) {
    let response = r.error_response(err);
    (response.http_status, serde_json::from_str(&response.body).expect("the answer is JSON"))
}

#[test]
fn error_response_status_and_body() {
    let r = Receiver::new(config()).unwrap();
    let bytes = body(&refund());
    let large = padded(&refund(), 65537);
    for (req, status, code) in [
        (request(None, PRODUCTION_ADDR, &bytes), 401, "missing_token"),
        (request(Some(NEXT_TOKEN), PRODUCTION_ADDR, &bytes), 401, "wrong_token"),
        (request(Some(TOKEN), STAGING_ADDR, &bytes), 403, "forbidden_source"),
        (request(Some(TOKEN), PRODUCTION_ADDR, &large), 413, "body_too_large"),
        (request(Some(TOKEN), PRODUCTION_ADDR, b"[]"), 400, "not_an_object"),
        (request(Some(TOKEN), PRODUCTION_ADDR, b"{"), 400, "invalid_json"),
    ] {
        let err = r.handle(&req).unwrap_err();
        let (got, v) = error_json(&r, &err);
        assert_eq!((got, v["error"]["code"].as_str()), (status, Some(code)), "{}", err.message);
        assert_eq!(
            (v["error"]["field"].as_str(), v["error"]["message"].as_str()),
            (Some(&err.field[..]), Some(&err.message[..]))
        );
        assert_eq!(v.as_object().unwrap().len(), 1);
    }
    // A known event with an invalid field: HTTP 200 with the event's wrapper.
    let bad = raw_body(&payout(), "moneyWon", "1500.5");
    let err = r.handle(&request(Some(TOKEN), PRODUCTION_ADDR, &bad)).unwrap_err();
    let response = r.error_response(&err);
    assert_eq!(response.http_status, 200);
    assert_eq!(
        response.body,
        r#"{"payout":{"success":false,"errorMessage":"jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5"}}"#
    );
    let bad = body(&set(refund(), "gameId", json!("7")));
    let (status, v) = error_json(&r, &r.handle(&request(Some(TOKEN), PRODUCTION_ADDR, &bad)).unwrap_err());
    assert_eq!((status, &v["refund"]["success"]), (200, &json!(false)));
    assert_eq!(
        v["refund"]["errorMessage"],
        json!("gameSessionBuyRefund.gameId: expected a non-negative integer, got \"7\"")
    );
    let bad = body(&set(balance(), "playerIdentifier", json!("")));
    let (status, v) = error_json(&r, &r.handle(&request(Some(TOKEN), PRODUCTION_ADDR, &bad)).unwrap_err());
    // A refused balance query states no balance, with an error status by default.
    assert_eq!(status, 500);
    assert_eq!(v, json!({"playerBalance": {"errorMessage": "getPlayerBalance.playerIdentifier: must not be empty"}}));
    let mut c = config();
    c.set_balance_failure_http_status(200).unwrap();
    assert_eq!(c.set_balance_failure_http_status(302).unwrap_err().field, "balance_failure_http_status");
    let r200 = Receiver::new(c).unwrap();
    let (status, v) = error_json(&r200, &r200.handle(&request(Some(TOKEN), PRODUCTION_ADDR, &bad)).unwrap_err());
    assert_eq!(status, 200);
    assert!(v["playerBalance"].get("money").is_none() && v["playerBalance"].get("coins").is_none(), "{v}");
}

#[test]
fn no_invalid_case_is_ever_answered_with_success() {
    let cases = all_invalid_cases();
    assert!(cases.len() > 350, "{} cases", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let r = receiver_for(&c.options);
        let Err(err) = r.handle(&request(Some(TOKEN), PRODUCTION_ADDR, &c.body)) else {
            failures.push(format!("{}: accepted", c.label));
            continue;
        };
        if parse(&c.body, &c.options).as_ref().err() != Some(&err) {
            failures.push(format!("{}: the receiver and parse disagree", c.label));
        }
        let response = r.error_response(&err);
        let v: Value = serde_json::from_str(&response.body).expect("the answer is JSON");
        if response.body.contains(r#""success":true"#) {
            failures.push(format!("{}: answered {}", c.label, response.body));
        }
        // A known event's wrapper exactly when the error names a field of a known event.
        let wrapper = [(R, "refund"), (P, "payout"), (B, "playerBalance")]
            .into_iter()
            .find(|(event, _)| err.field.starts_with(&format!("{event}.")))
            .map(|(_, wrapper)| wrapper);
        let answer = match wrapper {
            Some(w) if w == "playerBalance" => {
                let inner = &v[w];
                (response.http_status, &inner["errorMessage"], inner.get("money")) == (500, &json!(err.message), None)
            }
            Some(w) => {
                let inner = &v[w];
                (response.http_status, &inner["errorMessage"], &inner["success"])
                    == (200, &json!(err.message), &json!(false))
            }
            None => {
                let status = if err.kind == ErrorKind::BodyTooLarge { 413 } else { 400 };
                (response.http_status, &v["error"]["code"], &v["error"]["message"])
                    == (status, &json!(err.kind.code()), &json!(err.message))
            }
        };
        if !answer {
            failures.push(format!("{}: {} answered {} {}", c.label, err.message, response.http_status, response.body));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases fail:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Replies

#[test]
fn refund_and_payout_replies_are_exact() {
    let r = Receiver::new(config()).unwrap();
    let (refund_body, payout_body) = (body(&refund()), body(&payout()));
    let (refund, payout) = (ok(&refund_body), ok(&payout_body));
    assert_eq!(r.reply(&refund, true, "").unwrap(), r#"{"refund":{"success":true,"errorMessage":""}}"#);
    assert_eq!(r.reply(&payout, true, "").unwrap(), r#"{"payout":{"success":true,"errorMessage":""}}"#);
    assert_eq!(
        r.reply(&refund, false, "session ended").unwrap(),
        r#"{"refund":{"success":false,"errorMessage":"session ended"}}"#
    );
    assert_eq!(
        r.reply(&payout, false, "jackpot unknown").unwrap(),
        r#"{"payout":{"success":false,"errorMessage":"jackpot unknown"}}"#
    );
    for (success, message) in [(true, "not empty"), (false, "")] {
        let err = r.reply(&refund, success, message).unwrap_err();
        assert_eq!((err.kind, err.field.as_str()), (ErrorKind::InvalidArgument, "message"));
    }
    let mut c = config();
    c.set_omit_empty_error_message(true);
    let omit = Receiver::new(c).unwrap();
    assert_eq!(omit.reply(&payout, true, "").unwrap(), r#"{"payout":{"success":true}}"#);
    assert_eq!(omit.reply(&payout, false, "x").unwrap(), r#"{"payout":{"success":false,"errorMessage":"x"}}"#);
    // No reply exists for an unknown event.
    let other = ok(br#"{"event":"gameSessionStart"}"#);
    let err = r.reply(&other, true, "").unwrap_err();
    assert_eq!((err.kind, err.field.as_str()), (ErrorKind::UnknownEvent, "event"));
    assert!(err.message.contains("gameSessionStart"));
}

#[test]
fn reply_messages_are_escaped_and_read_back() {
    let r = Receiver::new(config()).unwrap();
    let refund_body = body(&refund());
    let refund = ok(&refund_body);
    let message = "say \"hi\" \\ back\nline\r\t\u{1}\u{1f}\u{7f} é € 😀 </script>";
    let expected = concat!(
        r#"{"refund":{"success":false,"errorMessage":"#,
        r#""say \"hi\" \\ back\nline\r\t\u0001\u001f"#,
        "\u{7f} é € 😀 </script>\"}}"
    );
    let reply = r.reply(&refund, false, message).unwrap();
    assert_eq!(reply, expected);
    let v: Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(v["refund"]["errorMessage"], json!(message));
    for message in ["\u{0}", "\u{2028}\u{2029}", "\\u0000", "'\"'", &"é".repeat(1000)] {
        let reply = r.reply(&refund, false, message).unwrap();
        let v: Value = serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{message:?}: {e}: {reply}"));
        assert_eq!(v["refund"]["errorMessage"].as_str(), Some(message));
    }
}

#[test]
fn balance_replies_are_exact() {
    let r = Receiver::new(config()).unwrap();
    let bytes = body(&balance());
    let query = ok(&bytes);
    assert_eq!(
        r.balance_reply(12345, None, 0).unwrap(),
        r#"{"playerBalance":{"money":12345,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#
    );
    assert_eq!(
        r.balance_reply(MAX_AMOUNT, Some("USD"), 7).unwrap(),
        r#"{"playerBalance":{"money":9007199254740991,"currencyISO4217":"USD","coins":7,"errorMessage":""}}"#
    );
    assert_eq!(
        r.reply(&query, false, "unknown \"player\"").unwrap(),
        r#"{"playerBalance":{"errorMessage":"unknown \"player\""}}"#
    );
    assert_eq!(r.reply(&query, true, "").unwrap_err().field, "success");
    assert_eq!(r.reply(&query, false, "").unwrap_err().field, "message");
    for (money, currency, coins, field) in [
        (-1, None, 0, "money"),
        (MAX_AMOUNT + 1, None, 0, "money"),
        (0, None, -5, "coins"),
        (0, Some("eur"), 0, "currency"),
    ] {
        let err = r.balance_reply(money, currency, coins).unwrap_err();
        assert_eq!((err.kind, err.field.as_str()), (ErrorKind::InvalidArgument, field));
    }
    let mut c = config();
    c.set_balance_wrapper("balance").unwrap();
    c.set_balance_currency("GBP").unwrap();
    assert_eq!(c.set_balance_currency("gbp").unwrap_err().field, "balance_currency");
    assert_eq!(c.set_balance_wrapper("").unwrap_err().field, "balance_wrapper");
    let custom = Receiver::new(c).unwrap();
    assert_eq!(
        custom.balance_reply(5, None, 1).unwrap(),
        r#"{"balance":{"money":5,"currencyISO4217":"GBP","coins":1,"errorMessage":""}}"#
    );
}
