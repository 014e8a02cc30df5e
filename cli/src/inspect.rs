//! `inspect FILE`: a body read with the library's validation, every field or the exact error.

use std::io::Read;

use serde::Serialize;
use serde_json::value::RawValue;
use slotpartner::ffi::status::sp_status;
use slotpartner::{Error, Event, EventKind};

use crate::args::InspectArgs;
use crate::config::parser;
use crate::output::{OrderedMap, print_json, quoted};
use crate::{Fail, Outcome, Verdict};

/// The most bytes read (the receiver refuses far less by default; this bounds the reading).
const MAX_INPUT: u64 = 16 * 1024 * 1024;

pub fn run(args: &InspectArgs) -> Outcome {
    let body = read_input(&args.file)?;
    let receiver = parser(&args.index.index_field, args.index.strict_index)?;
    match receiver.parse(&body) {
        Ok(event) => {
            let fields = typed_fields(&event);
            if args.json {
                print_json(&EventJson::of(&event, &fields))?;
            } else {
                print_event(&event, &fields);
            }
            Ok(Verdict::Good)
        }
        Err(error) => {
            let answer = receiver.error_response(&error);
            if args.json {
                print_json(&ErrorJson::of(&error, answer.http_status, &answer.body))?;
            } else {
                crate::outln!("error: {} ({})", status_name(&error), error.kind.code());
                crate::outln!("field: {}", if error.field.is_empty() { "(none)" } else { &error.field });
                crate::outln!("message: {}", crate::one_line(&error.message));
                if let Some(ids) = error.ids.as_deref() {
                    let number = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
                    let name = ids.name.as_deref().map_or_else(|| "-".to_owned(), quoted);
                    crate::outln!(
                        "read: event={name} index={} transactionId={}",
                        number(ids.index),
                        number(ids.transaction_id)
                    );
                }
                crate::outln!("answer: HTTP {} {}", answer.http_status, answer.body);
            }
            Ok(Verdict::Bad)
        }
    }
}

fn read_input(path: &std::path::Path) -> Result<Vec<u8>, Fail> {
    let shown = path.display();
    let mut body = Vec::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin().lock().take(MAX_INPUT + 1).read_to_end(&mut body)
    } else {
        std::fs::File::open(path)
            .map_err(|e| Fail(format!("cannot open {shown}: {e}")))?
            .take(MAX_INPUT + 1)
            .read_to_end(&mut body)
    };
    read.map_err(|e| Fail(format!("cannot read {shown}: {e}")))?;
    if body.len() as u64 > MAX_INPUT {
        return Err(Fail(format!("{shown}: more than {MAX_INPUT} bytes; not a callback body")));
    }
    Ok(body)
}

/// The C status name of an error's kind (`SP_ERR_WRONG_TYPE`), as the C ABI reports it.
fn status_name(error: &Error) -> String {
    sp_status::from(error.kind).name().to_string_lossy().into_owned()
}

/// A typed field's value.
enum Value {
    Str(Option<String>),
    Int(i64),
    Bool(Option<bool>),
}

impl Value {
    fn text(&self) -> String {
        match self {
            Value::Str(Some(s)) => quoted(s),
            Value::Int(i) => i.to_string(),
            Value::Bool(Some(b)) => b.to_string(),
            Value::Str(None) | Value::Bool(None) => "(absent)".to_owned(),
        }
    }

    fn json(&self) -> serde_json::Value {
        match self {
            Value::Str(Some(s)) => serde_json::Value::from(s.as_str()),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::Bool(Some(b)) => serde_json::Value::from(*b),
            Value::Str(None) | Value::Bool(None) => serde_json::Value::Null,
        }
    }
}

fn s(value: &str) -> Value {
    Value::Str(Some(value.to_owned()))
}

fn opt(value: &Option<std::borrow::Cow<'_, str>>) -> Value {
    Value::Str(value.as_deref().map(str::to_owned))
}

/// The typed fields of a known event, with the spec's names, in the spec's order.
fn typed_fields(event: &Event<'_>) -> Vec<(&'static str, Value)> {
    match &event.kind {
        EventKind::BuyRefund(r) => vec![
            ("gameSessionIdentifier", s(&r.game_session_identifier)),
            ("playerIdentifier", opt(&r.player_identifier)),
            ("playerPartnerIdentifier", opt(&r.player_partner_identifier)),
            ("transactionId", Value::Int(r.transaction_id)),
            ("buyTransactionId", Value::Int(r.buy_transaction_id)),
            ("gameSessionId", Value::Int(r.game_session_id)),
            ("partnerGameRequestIdentifier", s(&r.partner_game_request_identifier)),
            ("gameId", Value::Int(r.game_id)),
            ("isMobile", Value::Bool(Some(r.is_mobile))),
            ("bonusCode", opt(&r.bonus_code)),
        ],
        EventKind::JackpotPayout(p) => vec![
            ("jackpotIdentifier", s(&p.jackpot_identifier)),
            ("playerIdentifier", opt(&p.player_identifier)),
            ("playerPartnerIdentifier", opt(&p.player_partner_identifier)),
            ("currencyISO4217", s(&p.currency_iso4217)),
            ("moneyWon", Value::Int(p.money_won)),
            ("coinsWon", Value::Int(p.coins_won)),
            ("isMoney", Value::Bool(Some(p.is_money))),
            ("epochReleasedMillis", Value::Int(p.epoch_released_millis)),
            ("isPrimary", Value::Bool(Some(p.is_primary))),
            ("transactionId", Value::Int(p.transaction_id)),
            ("buyTransactionId", Value::Int(p.buy_transaction_id)),
            ("partnerGameRequestIdentifier", s(&p.partner_game_request_identifier)),
            ("gameSessionId", Value::Int(p.game_session_id)),
            ("gameId", Value::Int(p.game_id)),
            ("bonusCode", opt(&p.bonus_code)),
            ("isMobile", Value::Bool(p.is_mobile)),
        ],
        EventKind::BalanceQuery(b) => vec![
            ("playerIdentifier", opt(&b.player_identifier)),
            ("playerPartnerIdentifier", opt(&b.player_partner_identifier)),
        ],
        EventKind::Other => Vec::new(),
    }
}

/// `buy_refund`, `jackpot_payout`, `balance_query` or `other`.
fn kind_name(event: &Event<'_>) -> &'static str {
    match event.kind {
        EventKind::BuyRefund(_) => "buy_refund",
        EventKind::JackpotPayout(_) => "jackpot_payout",
        EventKind::BalanceQuery(_) => "balance_query",
        EventKind::Other => "other",
    }
}

fn print_event(event: &Event<'_>, fields: &[(&'static str, Value)]) {
    crate::outln!("event: {} ({})", event.name, kind_name(event));
    match event.index {
        Some(index) => crate::outln!("index: {index}"),
        None if event.index_unreadable => crate::outln!("index: (unreadable: not a non-negative integer; see extra)"),
        None => crate::outln!("index: (absent)"),
    }
    for (name, value) in fields {
        crate::outln!("  {name}: {}", value.text());
    }
    for field in &event.extra {
        crate::outln!("extra: {} = {}", field.name, field.raw.get());
    }
}

#[derive(Serialize)]
struct EventJson<'a> {
    valid: bool,
    event: &'a str,
    kind: &'static str,
    index: Option<i64>,
    index_unreadable: bool,
    /// The typed fields, in the spec's order.
    fields: OrderedMap<&'static str, serde_json::Value>,
    /// Fields the spec does not define for the event, values as raw JSON exactly as sent.
    extra: Vec<ExtraJson<'a>>,
}

#[derive(Serialize)]
struct ExtraJson<'a> {
    name: &'a str,
    value: Box<RawValue>,
}

impl<'a> EventJson<'a> {
    fn of(event: &'a Event<'a>, fields: &[(&'static str, Value)]) -> Self {
        EventJson {
            valid: true,
            event: &event.name,
            kind: kind_name(event),
            index: event.index,
            index_unreadable: event.index_unreadable,
            fields: OrderedMap(fields.iter().map(|(name, value)| (*name, value.json())).collect()),
            extra: event.extra.iter().map(|f| ExtraJson { name: &f.name, value: raw_value(f.raw.get()) }).collect(),
        }
    }
}

#[derive(Serialize)]
struct ErrorJson<'a> {
    valid: bool,
    status: String,
    code: &'static str,
    field: &'a str,
    message: &'a str,
    /// What the body let be read of the event's identity, as a journal would record it.
    event: Option<&'a str>,
    index: Option<i64>,
    transaction_id: Option<i64>,
    answer: AnswerJson<'a>,
}

#[derive(Serialize)]
struct AnswerJson<'a> {
    http_status: u16,
    body: &'a str,
}

impl<'a> ErrorJson<'a> {
    fn of(error: &'a Error, http_status: u16, body: &'a str) -> Self {
        let ids = error.ids.as_deref();
        ErrorJson {
            valid: false,
            status: status_name(error),
            code: error.kind.code(),
            field: &error.field,
            message: &error.message,
            event: ids.and_then(|i| i.name.as_deref()),
            index: ids.and_then(|i| i.index),
            transaction_id: ids.and_then(|i| i.transaction_id),
            answer: AnswerJson { http_status, body },
        }
    }
}

/// A kept value as serde_json's raw value, for printing it as it is.
fn raw_value(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_owned()).expect("the library keeps valid JSON")
}
