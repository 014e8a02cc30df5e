//! The journal's key and fingerprint (`Delivery::of`) of events parsed from any body.
//!
//! Input: the first `SETUP_BYTES` bytes choose how to write the event again (read with
//! `arbitrary`), the rest is the body. For every body the library accepts, properties:
//! - the key is the documented one (`name:transactionId` for a refund or a payout,
//!   `event#<index>#<name>` or `action#<index>#<name>` for another event or action carrying an
//!   index, none for a balance query or an unindexed event) and the fingerprint is JSON holding
//!   the event's name and exactly its typed fields (for an event the library does not know: every
//!   field but the index, each value as serde_json reads it);
//! - the same fields written again (other field order, whitespace, string escapes, absent or
//!   `null` optional fields, another index; for a known event also extra fields dropped or
//!   added) are accepted and give the same fingerprint, and the same key unless the key is the
//!   index that changed;
//! - one typed field changed to another valid value changes the fingerprint (for the deliveries
//!   the journal compares: those with a key; a balance query has none and its fingerprint holds
//!   no field), and the two are different deliveries (`decisive_differences` names a field)
//!   exactly when the field is one of `DECISIVE`.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use slotpartner::journal::{DECISIVE, decisive_differences};
use slotpartner::{Delivery, Event, EventKind, ParseOptions, parse};

const SETUP_BYTES: usize = 32;
const MAX_AMOUNT: i64 = (1 << 53) - 1;

#[derive(Arbitrary, Debug)]
struct Setup {
    /// Seeds the field order.
    order: u64,
    /// Which characters of strings to write as `\u` escapes (bit i for the i-th character).
    escapes: u32,
    spaces: u8,
    /// Write absent optional fields as `null`.
    nulls: bool,
    keep_extras: bool,
    added: u8,
    index: NewIndex,
    /// Which typed field to change.
    change: u8,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum NewIndex {
    Same,
    Absent,
    Number(u32),
    Unreadable,
}

/// One typed field's value as written in a body.
#[derive(Debug, Clone, PartialEq)]
enum Typed {
    Int(i64, i64),
    Str(Option<String>, bool),
    Bool(Option<bool>, bool),
}

/// The typed fields of an event, in the spec's order, with the name field first.
fn typed_fields(event: &Event<'_>, name_field: &str) -> Vec<(&'static str, Typed)> {
    let s = |v: &str| Typed::Str(Some(v.to_owned()), false);
    let o = |v: Option<&str>| Typed::Str(v.map(str::to_owned), true);
    let id = |v: i64| Typed::Int(v, i64::MAX);
    let name_field: &'static str = if name_field == "event" { "event" } else { "action" };
    let mut fields = vec![(name_field, s(&event.name))];
    match &event.kind {
        EventKind::BuyRefund(e) => fields.extend([
            ("gameSessionIdentifier", s(&e.game_session_identifier)),
            ("playerIdentifier", o(e.player_identifier.as_deref())),
            ("playerPartnerIdentifier", o(e.player_partner_identifier.as_deref())),
            ("transactionId", id(e.transaction_id)),
            ("buyTransactionId", id(e.buy_transaction_id)),
            ("gameSessionId", id(e.game_session_id)),
            ("partnerGameRequestIdentifier", s(&e.partner_game_request_identifier)),
            ("gameId", id(e.game_id)),
            ("isMobile", Typed::Bool(Some(e.is_mobile), false)),
            ("bonusCode", o(e.bonus_code.as_deref())),
        ]),
        EventKind::JackpotPayout(e) => fields.extend([
            ("jackpotIdentifier", s(&e.jackpot_identifier)),
            ("playerIdentifier", o(e.player_identifier.as_deref())),
            ("playerPartnerIdentifier", o(e.player_partner_identifier.as_deref())),
            ("currencyISO4217", s(&e.currency_iso4217)),
            ("moneyWon", Typed::Int(e.money_won, MAX_AMOUNT)),
            ("coinsWon", Typed::Int(e.coins_won, MAX_AMOUNT)),
            ("isMoney", Typed::Bool(Some(e.is_money), false)),
            ("epochReleasedMillis", id(e.epoch_released_millis)),
            ("isPrimary", Typed::Bool(Some(e.is_primary), false)),
            ("transactionId", id(e.transaction_id)),
            ("buyTransactionId", id(e.buy_transaction_id)),
            ("partnerGameRequestIdentifier", s(&e.partner_game_request_identifier)),
            ("gameSessionId", id(e.game_session_id)),
            ("gameId", id(e.game_id)),
            ("bonusCode", o(e.bonus_code.as_deref())),
            ("isMobile", Typed::Bool(e.is_mobile, true)),
        ]),
        EventKind::BalanceQuery(e) => fields.extend([
            ("playerIdentifier", o(e.player_identifier.as_deref())),
            ("playerPartnerIdentifier", o(e.player_partner_identifier.as_deref())),
        ]),
        EventKind::Other => {}
    }
    fields
}

/// `s` as a JSON string, the characters `escapes` picks written as `\u` escapes.
fn string(s: &str, escapes: u32) -> String {
    let mut out = String::from('"');
    for (i, c) in s.chars().enumerate() {
        let escape = escapes >> (i % 32) & 1 == 1;
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' if escape => out.push_str("\\/"),
            c if escape || (c as u32) < 0x20 => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A body holding `fields` (text already JSON) in an order and spacing the setup picks.
fn body(mut fields: Vec<(String, String)>, setup: &Setup) -> String {
    let mut state = setup.order | 1;
    for i in (1..fields.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        fields.swap(i, (state % (i as u64 + 1)) as usize);
    }
    let space = [" ", "", "\n\t", "\r\n  "][usize::from(setup.spaces & 3)];
    let parts: Vec<String> =
        fields.iter().map(|(k, v)| format!("{space}{}{space}:{space}{v}", string(k, setup.escapes))).collect();
    format!("{{{}{space}}}", parts.join(","))
}

/// The typed fields, extra fields and index written as a body.
fn write(typed: &[(&'static str, Typed)], extras: &[(String, String)], setup: &Setup) -> String {
    let mut fields = Vec::new();
    for (name, value) in typed {
        let text = match value {
            Typed::Int(v, _) => v.to_string(),
            Typed::Str(Some(s), _) => string(s, setup.escapes.rotate_left(7)),
            Typed::Bool(Some(b), _) => b.to_string(),
            Typed::Str(None, _) | Typed::Bool(None, _) if setup.nulls => "null".to_owned(),
            Typed::Str(None, _) | Typed::Bool(None, _) => continue,
        };
        fields.push(((*name).to_owned(), text));
    }
    fields.extend(extras.iter().cloned());
    body(fields, setup)
}

/// Changes the typed field `which` (never the name field of a known event) to another valid
/// value; the field's name.
fn change(typed: &mut [(&'static str, Typed)], which: u8, known: bool) -> Option<&'static str> {
    let first = usize::from(known);
    if typed.len() <= first {
        return None;
    }
    let i = first + usize::from(which) % (typed.len() - first);
    let (name, value) = &mut typed[i];
    *value = match value.clone() {
        Typed::Int(v, max) => Typed::Int(if v < max { v + 1 } else { v - 1 }, max),
        Typed::Str(_, _) if *name == "currencyISO4217" => {
            let Typed::Str(Some(c), _) = value.clone() else { unreachable!() };
            Typed::Str(Some(if c == "EUR" { "USD" } else { "EUR" }.to_owned()), false)
        }
        Typed::Str(Some(mut s), optional) => {
            if s.len() < 250 {
                s.push('x');
            } else {
                s.pop();
                if s.is_empty() {
                    s.push('y');
                }
            }
            Typed::Str(Some(s), optional)
        }
        Typed::Str(None, optional) => Typed::Str(Some("z".to_owned()), optional),
        Typed::Bool(Some(b), optional) => Typed::Bool(Some(!b), optional),
        Typed::Bool(None, optional) => Typed::Bool(Some(true), optional),
    };
    Some(*name)
}

/// The key the documentation gives.
fn expected_key(event: &Event<'_>) -> Option<String> {
    match &event.kind {
        EventKind::BuyRefund(e) => Some(format!("{}:{}", event.name, e.transaction_id)),
        EventKind::JackpotPayout(e) => Some(format!("{}:{}", event.name, e.transaction_id)),
        EventKind::BalanceQuery(_) => None,
        EventKind::Other => {
            let space = if event.is_action { "action" } else { "event" };
            event.index.map(|i| format!("{space}#{i}#{}", event.name))
        }
    }
}

fn check_delivery(event: &Event<'_>, delivery: &Delivery, typed: &[(&'static str, Typed)]) {
    assert_eq!(delivery.key(), expected_key(event).as_deref());
    assert_eq!(delivery.is_replayable(), delivery.key().is_some());
    assert_eq!(delivery.name(), event.name);
    assert_eq!(delivery.index(), event.index);
    let fingerprint: serde_json::Map<String, Value> =
        serde_json::from_str(delivery.fingerprint()).expect("the fingerprint is a JSON object");
    let name_field = if event.is_action { "action" } else { "event" };
    assert_eq!(fingerprint.get(name_field).and_then(Value::as_str), Some(event.name.as_ref()));
    if matches!(event.kind, EventKind::BalanceQuery(_)) {
        assert_eq!(fingerprint.len(), 1, "{}", delivery.fingerprint());
        return;
    }
    if matches!(event.kind, EventKind::Other) {
        // Every field but the index, by name (values are compared below through deliveries of
        // the same fields: a float read back from the fingerprint may round otherwise).
        let extras = other_fields(event);
        assert_eq!(fingerprint.len(), 1 + extras.len(), "{}", delivery.fingerprint());
        for name in extras.keys() {
            assert!(fingerprint.contains_key(name), "{name} in {}", delivery.fingerprint());
        }
        return;
    }
    assert_eq!(fingerprint.len(), typed.len(), "{}", delivery.fingerprint());
    for (name, value) in &typed[1..] {
        let got = &fingerprint[*name];
        let expected = match value {
            Typed::Int(v, _) => Value::from(*v),
            Typed::Str(s, _) => s.clone().map_or(Value::Null, Value::from),
            Typed::Bool(b, _) => b.map_or(Value::Null, Value::from),
        };
        assert_eq!(got, &expected, "{name} in {}", delivery.fingerprint());
    }
}

/// The fields of an event the library does not know, but its index, as serde_json reads them (a
/// value it cannot hold, a number beyond a double, as the string `(unreadable) <text>`).
fn other_fields(event: &Event<'_>) -> serde_json::Map<String, Value> {
    event
        .extra
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != event.index_field)
        .map(|(_, f)| {
            let value = serde_json::from_str::<Value>(f.raw.get())
                .unwrap_or_else(|_| Value::String(format!("(unreadable) {}", f.raw.get())));
            (f.name.to_string(), value)
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let (head, raw) = data.split_at(data.len().min(SETUP_BYTES));
    let Ok(setup) = Setup::arbitrary(&mut Unstructured::new(head)) else { return };
    let options = ParseOptions::default();
    let Ok(event) = parse(raw, &options) else { return };
    let first = Delivery::of(&event);

    // Which field names the event: `event` unless the body names it by `action` alone.
    let named_by_event = match &event.kind {
        EventKind::BuyRefund(_) | EventKind::JackpotPayout(_) => true,
        EventKind::BalanceQuery(_) => false,
        // Read without computing numbers: the body may hold one beyond a double.
        EventKind::Other => std::str::from_utf8(raw)
            .ok()
            .and_then(|text| slotpartner_fuzz::entries(text).ok())
            .is_some_and(|fields| fields.iter().any(|(k, v)| k == "event" && v.get().starts_with('"'))),
    };
    let mut typed = typed_fields(&event, if named_by_event { "event" } else { "action" });
    check_delivery(&event, &first, &typed);

    // The same typed fields, written otherwise.
    let mut extras: Vec<(String, String)> = Vec::new();
    if setup.keep_extras {
        extras.extend(
            event
                .extra
                .iter()
                .filter(|f| f.name != options.index_field.as_str())
                .map(|f| (f.name.to_string(), f.raw.get().to_owned())),
        );
    }
    extras.retain(|(k, _)| !k.starts_with("fuzzAdded"));
    for i in 0..setup.added % 4 {
        let value = ["1", "\"a\"", "[1,{\"b\":null}]", "{\"x\":{\"y\":[]}}"][usize::from(i)];
        extras.push((format!("fuzzAdded{i}"), value.to_owned()));
    }
    let index = match setup.index {
        NewIndex::Same => {
            event.extra.iter().find(|f| f.name == options.index_field.as_str()).map(|f| f.raw.get().to_owned())
        }
        NewIndex::Absent => None,
        NewIndex::Number(n) => Some(n.to_string()),
        NewIndex::Unreadable => Some("\"42\"".to_owned()),
    };
    extras.extend(index.map(|raw| (options.index_field.clone(), raw)));
    let again = write(&typed, &extras, &setup);
    let reparsed = parse(again.as_bytes(), &options)
        .unwrap_or_else(|e| panic!("the same typed fields written again are refused ({e}): {again}"));
    let second = Delivery::of(&reparsed);
    check_delivery(&reparsed, &second, &typed);
    let known = !matches!(event.kind, EventKind::Other);
    if known || other_fields(&reparsed) == other_fields(&event) {
        assert_eq!(second.fingerprint(), first.fingerprint(), "{again}");
    } else {
        assert!(!decisive_differences(first.fingerprint(), second.fingerprint()).is_empty(), "{again}");
    }
    assert_eq!(second.transaction_id(), first.transaction_id());
    if !matches!(event.kind, EventKind::Other) || reparsed.index == event.index {
        assert_eq!(second.key(), first.key(), "{again}");
    }

    // One typed field changed: another fingerprint, for every delivery with a key; another
    // delivery exactly when the field decides the money or the player.
    let changed_field = change(&mut typed, setup.change, known);
    let changed = write(&typed, &extras, &setup);
    let Ok(changed_event) = parse(changed.as_bytes(), &options) else {
        // Only an `Other` event renamed into a known one can be refused.
        assert!(!known, "a valid change refused: {changed}");
        return;
    };
    let third = Delivery::of(&changed_event);
    if matches!(changed_event.kind, EventKind::BalanceQuery(_)) || !third.is_replayable() {
        return;
    }
    assert_ne!(third.fingerprint(), first.fingerprint(), "{changed}");
    if let (true, Some(field)) = (known, changed_field) {
        let decisive = DECISIVE.iter().any(|(name, fields)| *name == event.name && fields.contains(&field));
        let differing = decisive_differences(first.fingerprint(), third.fingerprint());
        assert_eq!(!differing.is_empty(), decisive, "{field} changed: {differing:?} in {changed}");
    }
});
