//! Typed callback events and the parser that produces them from a raw body.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::value::RawValue;

use crate::callback::fields::FieldReader;
use crate::callback::json::{self, Field};
use crate::callback::options::ParseOptions;
use crate::callback::quick_scan;
use crate::callback::scan::{self, ScanError, Slots};
use crate::callback::spec::{KnownEvent, Name};
use crate::error::{Error, ErrorKind, EventIds, Result};

/// `gameSessionBuyRefund`: money for a spin must be refunded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuyRefund<'a> {
    pub game_session_identifier: Cow<'a, str>,
    pub player_identifier: Option<Cow<'a, str>>,
    pub player_partner_identifier: Option<Cow<'a, str>>,
    pub transaction_id: i64,
    pub buy_transaction_id: i64,
    pub game_session_id: i64,
    pub partner_game_request_identifier: Cow<'a, str>,
    pub game_id: i64,
    pub is_mobile: bool,
    pub bonus_code: Option<Cow<'a, str>>,
}

/// `jackpotPayout`: a major (`is_primary`) or minor jackpot is paid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JackpotPayout<'a> {
    pub jackpot_identifier: Cow<'a, str>,
    pub player_identifier: Option<Cow<'a, str>>,
    pub player_partner_identifier: Option<Cow<'a, str>>,
    pub currency_iso4217: Cow<'a, str>,
    /// Minor currency units, 0 ..= 2^53 - 1.
    pub money_won: i64,
    /// 0 ..= 2^53 - 1.
    pub coins_won: i64,
    pub is_money: bool,
    pub epoch_released_millis: i64,
    pub is_primary: bool,
    pub transaction_id: i64,
    pub buy_transaction_id: i64,
    pub partner_game_request_identifier: Cow<'a, str>,
    pub game_session_id: i64,
    pub game_id: i64,
    pub bonus_code: Option<Cow<'a, str>>,
    pub is_mobile: Option<bool>,
}

/// `getPlayerBalance`: the service asks for a player's balance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalanceQuery<'a> {
    pub player_identifier: Option<Cow<'a, str>>,
    pub player_partner_identifier: Option<Cow<'a, str>>,
}

/// The typed content of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind<'a> {
    BuyRefund(BuyRefund<'a>),
    JackpotPayout(JackpotPayout<'a>),
    BalanceQuery(BalanceQuery<'a>),
    /// Any other event or action, passed through untyped: read its fields as raw JSON.
    Other,
}

/// A validated callback event, borrowing from the body it was parsed from.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    /// The `event` value (or the `action` value for the balance query and other actions).
    pub name: Cow<'a, str>,
    /// Whether the name came from the `action` field (the balance query, unknown actions) rather
    /// than `event`: the journal keeps the two in separate key spaces.
    pub is_action: bool,
    pub kind: EventKind<'a>,
    /// The service's consecutive event index, when the body carries one as a non-negative
    /// integer.
    pub index: Option<i64>,
    /// The body carries the index field, but its value is not a non-negative integer (`"42"`,
    /// `-1`, `1.5`, ...): `index` is `None` and the raw value is among `extra`. Only possible
    /// when `ParseOptions::strict_index` is false (the default).
    pub index_unreadable: bool,
    /// Where the index field (`ParseOptions::index_field`) is among `extra`, if the body has it.
    pub index_field: Option<usize>,
    /// The fields the spec does not define for this event (for `Other` events: every field but
    /// the name), in body order, values as raw JSON exactly as sent. The index is one of them.
    pub extra: Vec<Field<'a>>,
}

impl Event<'_> {
    /// The known event this is, if any.
    pub fn known(&self) -> Option<KnownEvent> {
        match self.kind {
            EventKind::BuyRefund(_) => Some(KnownEvent::BuyRefund),
            EventKind::JackpotPayout(_) => Some(KnownEvent::JackpotPayout),
            EventKind::BalanceQuery(_) => Some(KnownEvent::BalanceQuery),
            EventKind::Other => None,
        }
    }

    /// The raw JSON of the extra field `name` (one the spec does not define for this event).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.extra.iter().find(|f| f.name == name).map(|f| f.raw.get())
    }
}

/// Parses and validates a callback body. On failure the error names the field and, for a known
/// event, carries it in `Error::event` so the reply can use the event's wrapper, and carries in
/// `Error::ids` what the body still let be read of the event's name, index and `transactionId`.
pub fn parse<'a>(body: &'a [u8], options: &ParseOptions) -> Result<Event<'a>> {
    parse_with(body, options, Vec::new())
}

/// `parse`, with `spare` (an empty vector, its room kept from an earlier event) to hold the
/// event's extra fields, so that a caller parsing one body after another need not allocate it
/// each time.
pub(crate) fn parse_with<'a>(body: &'a [u8], options: &ParseOptions, spare: Vec<Field<'a>>) -> Result<Event<'a>> {
    parse_strict(body, options, spare).map_err(|error| {
        let ids = ids_of_refused(body, options);
        error.with_ids(ids)
    })
}

/// What a refused body lets be read of the event's identity: a second, lenient reading (the
/// error path only), where any part that is absent or of another type is simply not known.
/// Each part is read from its own top-level value, kept raw until then: a number beyond a double
/// elsewhere does not hide it, and nothing inside a string is taken for it (serde_json's `Value`
/// reads an object keyed `$serde_json::private::RawValue` as the JSON in its string).
fn ids_of_refused(body: &[u8], options: &ParseOptions) -> Option<EventIds> {
    if body.len() > options.max_body_bytes {
        return None;
    }
    let object: BTreeMap<String, &RawValue> = serde_json::from_str(std::str::from_utf8(body).ok()?).ok()?;
    let read = |key: &str| object.get(key).map(|raw| raw.get());
    let name = ["event", "action"].iter().find_map(|key| serde_json::from_str::<String>(read(key)?).ok());
    let index = read(&options.index_field).and_then(|raw| serde_json::from_str::<i64>(raw).ok()).filter(|i| *i >= 0);
    let transaction_id = read("transactionId").and_then(|raw| serde_json::from_str::<i64>(raw).ok());
    let ids = EventIds { name, index, transaction_id };
    (ids != EventIds::default()).then_some(ids)
}

fn parse_strict<'a>(body: &'a [u8], options: &ParseOptions, spare: Vec<Field<'a>>) -> Result<Event<'a>> {
    let text = json::object_text(body, options.max_body_bytes)?;
    debug_assert!(spare.is_empty(), "a spare fields vector is empty");
    let mut scanned = scan::Scanned { others: spare, ..scan::Scanned::default() };
    // The quick pass reads the usual body and checks its kept values; anything else, and every
    // refusal, is read by the serde scan, as is every body the quick pass accepts in builds with
    // debug assertions, to hold the two to the same reading.
    let quick = quick_scan::scan(text, options.max_depth, &mut scanned);
    if quick && cfg!(debug_assertions) {
        let mut full = scan::Scanned::default();
        assert!(scan::scan(text, options.max_depth, &mut full).is_ok(), "the serde scan refused {text:?}");
        assert_eq!(scanned, full, "the two scans differ on {text:?}");
    }
    let refused = if quick { None } else { full_scan(text, options.max_depth, &mut scanned)? };
    // Borrowed, not moved: the slots are a few hundred bytes.
    let slots = &scanned.slots;
    let others = std::mem::take(&mut scanned.others);
    if let Some((name @ (Name::Event | Name::Action), kind, problem)) = &refused {
        return Err(Error::field(*kind, format!("body.{}", name.as_str()), problem));
    }
    let (name_field, name) = event_name(text, slots, options)?;
    let known = match (name_field, name.as_ref()) {
        (Name::Event, "gameSessionBuyRefund") => Some(KnownEvent::BuyRefund),
        (Name::Event, "jackpotPayout") => Some(KnownEvent::JackpotPayout),
        (Name::Action, "getPlayerBalance") => Some(KnownEvent::BalanceQuery),
        _ => None,
    };
    let event_label: &str = match known {
        Some(k) => k.name(),
        None => &name,
    };
    if let Some((name, kind, problem)) = refused {
        return Err(Error::field(kind, format!("{event_label}.{}", name.as_str()), problem).for_event(known));
    }
    let reader = FieldReader { event: event_label, slots, text, max_identifier_bytes: options.max_identifier_bytes };
    let typed = read_kind(known, &reader).map_err(|e| e.for_event(known))?;
    if known.is_none() && options.reject_unknown_events {
        let problem = format!("unknown event {}", json::quoted(&name));
        return Err(Error::field(ErrorKind::UnknownEvent, name_field.as_str(), problem));
    }
    let spec_mask = known.map_or(0, KnownEvent::spec_mask) | name_field.bit();
    let (extra, kept_by_scan) = extra_fields(text, scanned.present, others, spec_mask)?;
    // The values the quick pass kept are checked already (in debug builds: check_value agrees).
    let checked = |field: &Field<'_>| json::check_value(field.raw, event_label, &field.name, options.max_depth);
    if !(quick && kept_by_scan) {
        for field in &extra {
            checked(field).map_err(|e| e.for_event(known))?;
        }
    } else if cfg!(debug_assertions) {
        assert!(extra.iter().all(|f| checked(f).is_ok()), "check_value refused a value the quick pass kept: {text:?}");
    }
    let index_field = extra.iter().position(|f| f.name == options.index_field.as_str());
    let (index, index_unreadable) = match index_field.map(|i| &extra[i]) {
        Some(field) => match index_value(field, &reader, options) {
            Ok(index) => (index, false),
            Err(error) if options.strict_index => return Err(error.for_event(known)),
            Err(_) => (None, true),
        },
        None => (None, false),
    };
    Ok(Event { name, is_action: name_field == Name::Action, kind: typed, index, index_unreadable, index_field, extra })
}

/// The serde scan of a body the quick pass declined (`scanned` is refilled from scratch): the
/// slots, the fields kept raw, and the first slotted field whose value is refused. Cold: the
/// usual body never comes here, and its code stays out of the way of the usual path's.
#[cold]
#[inline(never)]
fn full_scan<'a>(text: &'a str, max_depth: usize, scanned: &mut scan::Scanned<'a>) -> Result<Option<scan::Refusal>> {
    *scanned = scan::Scanned::default();
    match scan::scan(text, max_depth, scanned) {
        Ok(()) => Ok(None),
        Err(ScanError::Body(error)) => Err(error),
        Err(ScanError::InValue) => scan::rescan(text, max_depth, scanned),
    }
}

/// The fields outside the event's spec, in body order, and whether they are `others`, the
/// fields the scan kept raw; when a field the scan decoded into a slot (one of `present`) is
/// outside the spec (a field of another event), all of them come from a second split of the
/// body, a rare path.
fn extra_fields<'a>(
    text: &'a str,
    present: u32,
    others: Vec<Field<'a>>,
    spec_mask: u32,
) -> Result<(Vec<Field<'a>>, bool)> {
    if present & !spec_mask == 0 {
        return Ok((others, true));
    }
    let fields = json::split_object(text)?;
    let extra = fields.into_iter().filter(|f| Name::of(&f.name).is_none_or(|name| spec_mask & name.bit() == 0));
    Ok((extra.collect(), false))
}

/// The service's consecutive index: a non-negative integer; `null` counts as absent.
fn index_value(field: &Field<'_>, reader: &FieldReader<'_, '_>, options: &ParseOptions) -> Result<Option<i64>> {
    // The usual index, a plain run of at most 18 digits (below 10^18, within i64), is read
    // here; anything else (a sign, a fraction, more digits, another type) by the JSON reader.
    let raw = field.raw.get();
    if (1..=18).contains(&raw.len()) && (raw == "0" || !raw.starts_with('0')) {
        // Read as it is checked: one pass, where a check and then `str::parse` took two.
        let plain = raw.bytes().try_fold(0i64, |n, b| b.is_ascii_digit().then(|| n * 10 + i64::from(b - b'0')));
        if let Some(index) = plain {
            return Ok(Some(index));
        }
    }
    let value = match scan::scalar_of(field.raw, options.max_depth) {
        Ok(scan::Scalar::Null) => return Ok(None),
        Ok(value) => value,
        // Valid JSON, or check_value would have refused it: a number beyond every type.
        Err(_) => scan::Scalar::Float(f64::INFINITY),
    };
    reader.non_negative(&options.index_field, &value, i64::MAX).map(Some)
}

/// Which field names the event (`event`, else `action`) and its value.
fn event_name<'a>(text: &'a str, slots: &Slots<'a>, options: &ParseOptions) -> Result<(Name, Cow<'a, str>)> {
    let reader = FieldReader { event: "body", slots, text, max_identifier_bytes: options.max_identifier_bytes };
    for name_field in [Name::Event, Name::Action] {
        if let Some(name) = reader.opt_identifier(name_field)? {
            return Ok((name_field, name));
        }
    }
    Err(Error::field(
        ErrorKind::MissingField,
        "event",
        "required field is missing (neither event nor action is present)",
    ))
}

fn read_kind<'a>(known: Option<KnownEvent>, r: &FieldReader<'_, 'a>) -> Result<EventKind<'a>> {
    Ok(match known {
        Some(KnownEvent::BuyRefund) => {
            let (player_identifier, player_partner_identifier) = r.player()?;
            EventKind::BuyRefund(BuyRefund {
                game_session_identifier: r.identifier(Name::GameSessionIdentifier)?,
                player_identifier,
                player_partner_identifier,
                transaction_id: r.id(Name::TransactionId)?,
                buy_transaction_id: r.id(Name::BuyTransactionId)?,
                game_session_id: r.id(Name::GameSessionId)?,
                partner_game_request_identifier: r.identifier(Name::PartnerGameRequestIdentifier)?,
                game_id: r.id(Name::GameId)?,
                is_mobile: r.boolean(Name::IsMobile)?,
                bonus_code: r.opt_identifier(Name::BonusCode)?,
            })
        }
        Some(KnownEvent::JackpotPayout) => {
            let (player_identifier, player_partner_identifier) = r.player()?;
            EventKind::JackpotPayout(JackpotPayout {
                jackpot_identifier: r.identifier(Name::JackpotIdentifier)?,
                player_identifier,
                player_partner_identifier,
                currency_iso4217: r.currency(Name::CurrencyIso4217)?,
                money_won: r.amount(Name::MoneyWon)?,
                coins_won: r.amount(Name::CoinsWon)?,
                is_money: r.boolean(Name::IsMoney)?,
                epoch_released_millis: r.id(Name::EpochReleasedMillis)?,
                is_primary: r.boolean(Name::IsPrimary)?,
                transaction_id: r.id(Name::TransactionId)?,
                buy_transaction_id: r.id(Name::BuyTransactionId)?,
                partner_game_request_identifier: r.identifier(Name::PartnerGameRequestIdentifier)?,
                game_session_id: r.id(Name::GameSessionId)?,
                game_id: r.id(Name::GameId)?,
                bonus_code: r.opt_identifier(Name::BonusCode)?,
                is_mobile: r.opt_boolean(Name::IsMobile)?,
            })
        }
        Some(KnownEvent::BalanceQuery) => {
            let (player_identifier, player_partner_identifier) = r.player()?;
            EventKind::BalanceQuery(BalanceQuery { player_identifier, player_partner_identifier })
        }
        None => EventKind::Other,
    })
}
