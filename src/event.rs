//! Typed callback events and the parser that produces them from a raw body.

use std::borrow::Cow;

use crate::error::{Error, ErrorKind, Result};
use crate::fields::FieldReader;
use crate::json::{self, Field};
use crate::options::ParseOptions;

/// The events this library knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KnownEvent {
    /// `event` = `gameSessionBuyRefund`; replied to with the `refund` wrapper.
    BuyRefund,
    /// `event` = `jackpotPayout`; replied to with the `payout` wrapper.
    JackpotPayout,
    /// `action` = `getPlayerBalance`; replied to with the balance wrapper (`playerBalance`).
    BalanceQuery,
}

impl KnownEvent {
    /// The name the service gives the event.
    pub fn name(self) -> &'static str {
        match self {
            KnownEvent::BuyRefund => "gameSessionBuyRefund",
            KnownEvent::JackpotPayout => "jackpotPayout",
            KnownEvent::BalanceQuery => "getPlayerBalance",
        }
    }

    /// The fields the spec defines for the event; any other field is kept as an extra field.
    pub fn spec_fields(self) -> &'static [&'static str] {
        match self {
            KnownEvent::BuyRefund => &[
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
            ],
            KnownEvent::JackpotPayout => &[
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
            ],
            KnownEvent::BalanceQuery => &["action", "playerIdentifier", "playerPartnerIdentifier"],
        }
    }
}

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
    pub kind: EventKind<'a>,
    /// The service's consecutive event index, when the body carries one.
    pub index: Option<i64>,
    /// Every top-level field in body order, values as raw JSON.
    pub fields: Vec<Field<'a>>,
    /// Positions in `fields` of the fields the spec does not define for this event (for `Other`
    /// events: every field but the name).
    pub extra: Vec<usize>,
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

    /// The raw JSON of the top-level field `name`, known or not.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|f| f.name == name).map(|f| f.raw.get())
    }
}

/// Parses and validates a callback body. On failure the error names the field and, for a known
/// event, carries it in `Error::event` so the reply can use the event's wrapper.
pub fn parse<'a>(body: &'a [u8], options: &ParseOptions) -> Result<Event<'a>> {
    let fields = json::split_object(body, options.max_body_bytes)?;
    let (name_field, name) = event_name(&fields, options)?;
    let known = match (name_field, name.as_ref()) {
        ("event", "gameSessionBuyRefund") => Some(KnownEvent::BuyRefund),
        ("event", "jackpotPayout") => Some(KnownEvent::JackpotPayout),
        ("action", "getPlayerBalance") => Some(KnownEvent::BalanceQuery),
        _ => None,
    };
    let event_label: &str = match known {
        Some(k) => k.name(),
        None => &name,
    };
    let reader =
        FieldReader { event: event_label, fields: &fields, max_identifier_bytes: options.max_identifier_bytes };
    let typed = read_kind(known, &reader).map_err(|e| e.for_event(known))?;
    if known.is_none() && options.reject_unknown_events {
        let problem = format!("unknown event {}", json::quoted(&name));
        return Err(Error::field(ErrorKind::UnknownEvent, name_field, problem));
    }
    let index = reader.opt_id(&options.index_field).map_err(|e| e.for_event(known))?;
    let name_only = [name_field];
    let spec_fields: &[&str] = match known {
        Some(k) => k.spec_fields(),
        None => &name_only,
    };
    let mut extra = Vec::new();
    for (position, field) in fields.iter().enumerate() {
        if !spec_fields.contains(&field.name.as_ref()) {
            let label = format!("{event_label}.{}", field.name);
            json::check_value(field.raw, &label, options.max_depth).map_err(|e| e.for_event(known))?;
            extra.push(position);
        }
    }
    Ok(Event { name: name.clone(), kind: typed, index, fields, extra })
}

/// Which field names the event (`event`, else `action`) and its value.
fn event_name<'a>(fields: &[Field<'a>], options: &ParseOptions) -> Result<(&'static str, Cow<'a, str>)> {
    for name_field in ["event", "action"] {
        let reader = FieldReader { event: "body", fields, max_identifier_bytes: options.max_identifier_bytes };
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
                game_session_identifier: r.identifier("gameSessionIdentifier")?,
                player_identifier,
                player_partner_identifier,
                transaction_id: r.id("transactionId")?,
                buy_transaction_id: r.id("buyTransactionId")?,
                game_session_id: r.id("gameSessionId")?,
                partner_game_request_identifier: r.identifier("partnerGameRequestIdentifier")?,
                game_id: r.id("gameId")?,
                is_mobile: r.boolean("isMobile")?,
                bonus_code: r.opt_identifier("bonusCode")?,
            })
        }
        Some(KnownEvent::JackpotPayout) => {
            let (player_identifier, player_partner_identifier) = r.player()?;
            EventKind::JackpotPayout(JackpotPayout {
                jackpot_identifier: r.identifier("jackpotIdentifier")?,
                player_identifier,
                player_partner_identifier,
                currency_iso4217: r.currency("currencyISO4217")?,
                money_won: r.amount("moneyWon")?,
                coins_won: r.amount("coinsWon")?,
                is_money: r.boolean("isMoney")?,
                epoch_released_millis: r.id("epochReleasedMillis")?,
                is_primary: r.boolean("isPrimary")?,
                transaction_id: r.id("transactionId")?,
                buy_transaction_id: r.id("buyTransactionId")?,
                partner_game_request_identifier: r.identifier("partnerGameRequestIdentifier")?,
                game_session_id: r.id("gameSessionId")?,
                game_id: r.id("gameId")?,
                bonus_code: r.opt_identifier("bonusCode")?,
                is_mobile: r.opt_boolean("isMobile")?,
            })
        }
        Some(KnownEvent::BalanceQuery) => {
            let (player_identifier, player_partner_identifier) = r.player()?;
            EventKind::BalanceQuery(BalanceQuery { player_identifier, player_partner_identifier })
        }
        None => EventKind::Other,
    })
}
