//! What the journal keeps of a delivery: its key, and its content in a canonical form that
//! detects a conflict (the same key with other typed fields).

use crate::callback::event::{Event, EventKind};
use crate::callback::json::push_quoted;
use crate::callback::spec::KnownEvent;
use crate::error::{Error, ErrorKind};

/// The keys a delivery carrying `transaction_id` is stored under: a refund's and a payout's, the
/// only events keyed by their `transactionId` (see [`Delivery::of`]). `Journal::lookup` finds a
/// transaction's deliveries by them, through the key's own index: schema version 4 keeps no
/// index of `transaction_id` (one b-tree less to write a delivery).
pub(crate) fn transaction_keys(transaction_id: i64) -> [String; 2] {
    [KnownEvent::BuyRefund, KnownEvent::JackpotPayout].map(|event| format!("{}:{transaction_id}", event.name()))
}

/// One delivery of an event, as the journal sees it: built from a validated event with
/// [`Delivery::of`], then given to `Journal::begin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    key: Option<String>,
    name: String,
    index: Option<i64>,
    transaction_id: Option<i64>,
    content: String,
    /// The content as the journal stores it (see [`stored_form`]).
    stored: String,
}

impl Delivery {
    /// The delivery of `event`. Its key lives in one of three key spaces that cannot meet,
    /// whatever the names and numbers:
    ///
    /// - a refund or a payout: its name and `transactionId` (`gameSessionBuyRefund:900002`,
    ///   `jackpotPayout:900002`);
    /// - any other `event` callback carrying an index: `event#<index>#<name>` (`event#17#bonusGranted`);
    /// - any other `action` callback carrying an index: `action#<index>#<name>`.
    ///
    /// A balance query has no key: a balance must be current, so it is never answered from the
    /// journal, but its index is recorded like any other. An unknown event without an index has
    /// no key either.
    #[inline(never)]
    pub fn of(event: &Event<'_>) -> Delivery {
        let name = event.name.as_ref();
        let mut canon = Canon::new(if event.is_action { "action" } else { "event" }, name);
        let transaction_id = match &event.kind {
            EventKind::BuyRefund(e) => {
                canon
                    .str("gameSessionIdentifier", &e.game_session_identifier)
                    .opt_str("playerIdentifier", e.player_identifier.as_deref())
                    .opt_str("playerPartnerIdentifier", e.player_partner_identifier.as_deref())
                    .int("transactionId", e.transaction_id)
                    .int("buyTransactionId", e.buy_transaction_id)
                    .int("gameSessionId", e.game_session_id)
                    .str("partnerGameRequestIdentifier", &e.partner_game_request_identifier)
                    .int("gameId", e.game_id)
                    .bool("isMobile", Some(e.is_mobile))
                    .opt_str("bonusCode", e.bonus_code.as_deref());
                Some(e.transaction_id)
            }
            EventKind::JackpotPayout(e) => {
                canon
                    .str("jackpotIdentifier", &e.jackpot_identifier)
                    .opt_str("playerIdentifier", e.player_identifier.as_deref())
                    .opt_str("playerPartnerIdentifier", e.player_partner_identifier.as_deref())
                    .str("currencyISO4217", &e.currency_iso4217)
                    .int("moneyWon", e.money_won)
                    .int("coinsWon", e.coins_won)
                    .bool("isMoney", Some(e.is_money))
                    .int("epochReleasedMillis", e.epoch_released_millis)
                    .bool("isPrimary", Some(e.is_primary))
                    .int("transactionId", e.transaction_id)
                    .int("buyTransactionId", e.buy_transaction_id)
                    .str("partnerGameRequestIdentifier", &e.partner_game_request_identifier)
                    .int("gameSessionId", e.game_session_id)
                    .int("gameId", e.game_id)
                    .opt_str("bonusCode", e.bonus_code.as_deref())
                    .bool("isMobile", e.is_mobile);
                Some(e.transaction_id)
            }
            EventKind::Other => {
                canon.other_fields(event);
                None
            }
            EventKind::BalanceQuery(_) => None,
        };
        let key = match (&event.kind, transaction_id, event.index) {
            (EventKind::BalanceQuery(_), _, _) => None,
            (_, Some(id), _) => Some(format!("{name}:{id}")),
            (_, None, Some(index)) => {
                let space = if event.is_action { "action" } else { "event" };
                Some(format!("{space}#{index}#{name}"))
            }
            (_, None, None) => None,
        };
        let content = canon.finish();
        // A refund's or payout's stored form from its fields as written (parsing the content
        // again cost a delivery about 20 µs through PHP-FPM); any other content as stored_form
        // makes it. The two are the same bytes (checked in debug builds, so by every test).
        let positional = match &event.kind {
            EventKind::BuyRefund(_) => Some(KnownEvent::BuyRefund.name()),
            EventKind::JackpotPayout(_) => Some(KnownEvent::JackpotPayout.name()),
            _ => None,
        };
        let stored = match positional {
            Some(expected) if !event.is_action && name == expected => canon.positional(name),
            _ => stored_form(&content).into_owned(),
        };
        debug_assert_eq!(stored, stored_form(&content), "the stored form of {content}");
        Delivery { key, name: name.to_owned(), index: event.index, transaction_id, content, stored }
    }

    /// This delivery as fetched for `index` by recovery: an event whose own index could not be
    /// read (the lenient default) counts as the index it was fetched for, so that the gap closes
    /// instead of failing every run.
    pub fn fetched_at(mut self, index: i64) -> Delivery {
        if self.index.is_none() {
            self.index = Some(index);
            if self.key.is_none() && self.transaction_id.is_none() && !self.content.is_empty() && !self.is_balance() {
                let space = if self.content.starts_with("{\"action\"") { "action" } else { "event" };
                self.key = Some(format!("{space}#{index}#{}", self.name));
            }
        }
        self
    }

    fn is_balance(&self) -> bool {
        self.transaction_id.is_none() && self.content.starts_with("{\"action\":\"getPlayerBalance\"")
    }

    /// The key deliveries of the same event share; `None` when the delivery is never answered
    /// from the journal (a balance query, an unknown event without an index).
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The event's name (`event`, or `action` for the balance query).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The service's consecutive index, when the body carried one.
    pub fn index(&self) -> Option<i64> {
        self.index
    }

    /// The `transactionId` of a refund or a payout.
    pub fn transaction_id(&self) -> Option<i64> {
        self.transaction_id
    }

    /// Whether `Journal::begin` claims this delivery (it has a key and is not a balance query).
    pub fn is_replayable(&self) -> bool {
        self.key.is_some()
    }

    /// The canonical content kept for a delivery: the event's name and its typed fields as
    /// compact JSON in the spec's field order, strings decoded. It leaves out the index, the
    /// fields the spec does not define and the body's formatting. Deliveries of one key are the
    /// same delivery when their [`DECISIVE`] fields agree (see [`decisive_differences`]); the
    /// rest is kept for the operator. Stored in the journal: a change to this form is a schema
    /// change.
    pub fn fingerprint(&self) -> &str {
        &self.content
    }

    /// The fingerprint as the journal stores it (see [`stored_form`]).
    pub(crate) fn stored(&self) -> &str {
        &self.stored
    }
}

/// Builds the canonical content: `{"event":"<name>","field":value,...}` (`"action"` for an
/// action callback), and beside it the values of the typed fields, each after a comma, for the
/// stored form of a refund or payout (see [`Canon::positional`]).
struct Canon {
    object: String,
    values: String,
}

impl Canon {
    fn new(name_field: &str, name: &str) -> Canon {
        let mut object = String::with_capacity(256);
        object.push_str("{\"");
        object.push_str(name_field);
        object.push_str("\":");
        push_quoted(&mut object, name);
        Canon { object, values: String::with_capacity(128) }
    }

    /// Writes the field `name` with the value `write` writes, into the object and the values.
    fn field(&mut self, name: &str, write: impl FnOnce(&mut String)) -> &mut Canon {
        self.object.push_str(",\"");
        self.object.push_str(name);
        self.object.push_str("\":");
        let start = self.object.len();
        write(&mut self.object);
        self.values.push(',');
        self.values.push_str(&self.object[start..]);
        self
    }

    fn str(&mut self, name: &str, value: &str) -> &mut Canon {
        self.field(name, |out| push_quoted(out, value))
    }

    fn opt_str(&mut self, name: &str, value: Option<&str>) -> &mut Canon {
        match value {
            Some(value) => self.str(name, value),
            None => self.field(name, |out| out.push_str("null")),
        }
    }

    fn int(&mut self, name: &str, value: i64) -> &mut Canon {
        self.field(name, |out| out.push_str(itoa::Buffer::new().format(value)))
    }

    fn bool(&mut self, name: &str, value: Option<bool>) -> &mut Canon {
        let text = match value {
            Some(true) => "true",
            Some(false) => "false",
            None => "null",
        };
        self.field(name, |out| out.push_str(text))
    }

    /// The fields of an event the library does not know, but its index: in name order, each
    /// value in a canonical form (compact, object keys sorted, numbers as serde_json reads them),
    /// so that two deliveries of one event compare equal whatever their formatting, and two
    /// events that share a name and an index (a restarted numbering) do not.
    fn other_fields(&mut self, event: &Event<'_>) -> &mut Canon {
        let mut fields: Vec<(&str, String)> = event
            .extra
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != event.index_field)
            .map(|(_, f)| {
                // A value serde_json cannot hold (a number beyond a double) is kept as its text,
                // in a string, so that the fingerprint stays JSON.
                let canonical = match serde_json::from_str::<serde_json::Value>(f.raw.get()) {
                    Ok(value) => value.to_string(),
                    Err(_) => serde_json::Value::String(format!("(unreadable) {}", f.raw.get())).to_string(),
                };
                (f.name.as_ref(), canonical)
            })
            .collect();
        fields.sort_unstable();
        for (name, value) in fields {
            self.object.push(',');
            push_quoted(&mut self.object, name);
            self.object.push(':');
            self.object.push_str(&value);
        }
        self
    }

    fn finish(&mut self) -> String {
        self.object.push('}');
        std::mem::take(&mut self.object)
    }

    /// The stored form of the refund or payout called `name` whose typed fields were written,
    /// in [`POSITIONAL`]'s order: `[<name>,<value>,...]`, the bytes [`stored_form`] makes of
    /// the content, without reading the content back.
    fn positional(&self, name: &str) -> String {
        let mut out = String::with_capacity(self.values.len() + name.len() + 4);
        out.push('[');
        push_quoted(&mut out, name);
        out.push_str(&self.values);
        out.push(']');
        out
    }
}

/// The fields that decide whether two deliveries of one key are the same delivery: what moves
/// the money and names the player, the transaction and the game session (the spec's tables for
/// `gameSessionBuyRefund` and `jackpotPayout`). Left out, so that a resend may differ in them:
/// `gameId`, `isMobile`, `bonusCode` and `epochReleasedMillis` (none changes who is paid what),
/// the index and fields the spec does not define. An optional field absent and `null` are the
/// same; the spec gives no optional decisive field a default.
pub const DECISIVE: &[(&str, &[&str])] = &[
    (
        "gameSessionBuyRefund",
        &[
            "gameSessionIdentifier",
            "playerIdentifier",
            "playerPartnerIdentifier",
            "transactionId",
            "buyTransactionId",
            "gameSessionId",
            "partnerGameRequestIdentifier",
        ],
    ),
    (
        "jackpotPayout",
        &[
            "jackpotIdentifier",
            "playerIdentifier",
            "playerPartnerIdentifier",
            "currencyISO4217",
            "moneyWon",
            "coinsWon",
            "isMoney",
            "isPrimary",
            "transactionId",
            "buyTransactionId",
            "partnerGameRequestIdentifier",
            "gameSessionId",
        ],
    ),
];

type ContentMap = serde_json::Map<String, serde_json::Value>;

/// The field the migration from schema version 1 adds to the stored content of an event the
/// library does not know (version 1 kept only its name).
pub(crate) const LEGACY_MARK: &str = "(journal v1)";

/// The decisive fields whose values differ between two canonical contents of one key, as
/// `name: first X, now Y` (all of them, in the order of [`DECISIVE`]); empty when the two are
/// the same delivery. Contents of events without typed fields compare whole; an unreadable
/// stored content differs.
pub fn decisive_differences(first: &str, now: &str) -> Vec<String> {
    if first == now {
        return Vec::new();
    }
    let (Ok(a), Ok(b)) = (serde_json::from_str::<ContentMap>(first), serde_json::from_str::<ContentMap>(now)) else {
        return vec!["the stored content is unreadable".to_owned()];
    };
    let name = |m: &ContentMap| m.get("event").and_then(|v| v.as_str()).map(str::to_owned);
    let fields = match (name(&a), name(&b)) {
        (Some(x), Some(y)) if x == y => DECISIVE.iter().find(|(event, _)| *event == x).map(|(_, fields)| *fields),
        _ => None,
    };
    if is_compact(&a) {
        return if a.get(DIGEST).and_then(|d| d.as_str())
            == Some(decisive_digest(now, &b, a.contains_key(LEGACY_MARK)).as_str())
        {
            Vec::new()
        } else {
            vec!["the decisive content differs from the digest kept when the delivery's reply was pruned (the fields cannot be named)".to_owned()]
        };
    }
    let null = serde_json::Value::Null;
    let differ = |field: &str| {
        let (x, y) = (a.get(field).unwrap_or(&null), b.get(field).unwrap_or(&null));
        (x != y).then(|| format!("{field}: first {}, now {}", shortened(x), shortened(y)))
    };
    // A content stored by schema version 1, which kept only an unknown event's name (marked so
    // by the migration): the name decides.
    let name_of = |m: &ContentMap| m.get("event").or_else(|| m.get("action")).cloned();
    match fields {
        Some(fields) => fields.iter().filter_map(|field| differ(field)).collect(),
        None if a.contains_key(LEGACY_MARK) && name_of(&a) == name_of(&b) => Vec::new(),
        None => {
            let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
            names.sort();
            names.dedup();
            let differing: Vec<String> = names.into_iter().filter_map(|field| differ(field)).collect();
            if differing.is_empty() { vec!["the stored content is in another form".to_owned()] } else { differing }
        }
    }
}

/// The fields of the events whose content the journal stores by position, in the order
/// `Delivery::of` writes them (a test holds the two together).
const POSITIONAL: &[(&str, &[&str])] = &[
    (
        "gameSessionBuyRefund",
        &[
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
    ),
    (
        "jackpotPayout",
        &[
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
    ),
];

/// The content of a refund or payout as the journal stores it: a JSON array of the event's name
/// and its values in the order of [`POSITIONAL`] (`["gameSessionBuyRefund","gs-1",...]`), which
/// leaves out the field names, about 200 bytes of every row; any other content as it is. A pure
/// function of the content, so that equal contents are stored equal. See [`from_stored`].
pub(crate) fn stored_form(content: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    let Ok(map) = serde_json::from_str::<ContentMap>(content) else { return Cow::Borrowed(content) };
    let Some(name) = map.get("event").and_then(|v| v.as_str()) else { return Cow::Borrowed(content) };
    let Some((_, fields)) = POSITIONAL.iter().find(|(event, _)| *event == name) else { return Cow::Borrowed(content) };
    if map.len() != fields.len() + 1 || !fields.iter().all(|field| map.contains_key(*field)) {
        return Cow::Borrowed(content);
    }
    let mut out = String::with_capacity(content.len() / 2);
    out.push('[');
    push_quoted(&mut out, name);
    for field in *fields {
        out.push(',');
        out.push_str(&map[*field].to_string());
    }
    out.push(']');
    Cow::Owned(out)
}

/// A stored content as the canonical content's JSON object again (the fields in name order):
/// the inverse of [`stored_form`]. A content stored as an object (any other event, a compact
/// record, a journal of an earlier version) is returned as it is, and so is one that cannot be
/// read (a comparison then reports it unreadable).
pub(crate) fn from_stored(stored: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    if !stored.starts_with('[') {
        return Cow::Borrowed(stored);
    }
    let Ok(values) = serde_json::from_str::<Vec<serde_json::Value>>(stored) else { return Cow::Borrowed(stored) };
    let Some(name) = values.first().and_then(|v| v.as_str()) else { return Cow::Borrowed(stored) };
    let Some((_, fields)) = POSITIONAL.iter().find(|(event, _)| *event == name) else { return Cow::Borrowed(stored) };
    if values.len() != fields.len() + 1 {
        return Cow::Borrowed(stored);
    }
    let mut map = ContentMap::new();
    map.insert("event".to_owned(), name.into());
    for (field, value) in fields.iter().zip(&values[1..]) {
        map.insert((*field).to_owned(), value.clone());
    }
    Cow::Owned(serde_json::Value::Object(map).to_string())
}

/// The field of a compact record's content holding the digest of its decisive content.
const DIGEST: &str = "digest";

/// The content `Journal::prune` keeps of a finished delivery in place of `content`:
/// `{"digest":"<128 bits of the SHA-256 of the decisive content, hex>","outcome":"success"}` (`outcome` as
/// `export::reply_outcome` reads the pruned reply), with `"(journal v1)":true` for a content
/// marked by the migration from version 1 (its digest covers its name only). A content compact
/// already keeps its digest and takes the new outcome.
pub(crate) fn compact(content: &str, outcome: &str) -> String {
    let map = serde_json::from_str::<ContentMap>(content).unwrap_or_default();
    let legacy = map.contains_key(LEGACY_MARK);
    let digest = match map.get(DIGEST).and_then(|d| d.as_str()) {
        Some(digest) if is_compact(&map) => digest.to_owned(),
        // An unreadable content has an empty map: its digest is the text's own.
        _ if map.is_empty() => hex_sha256(content.as_bytes()),
        _ => decisive_digest(content, &map, legacy),
    };
    let mut out = serde_json::Map::new();
    out.insert(DIGEST.to_owned(), digest.into());
    out.insert("outcome".to_owned(), outcome.into());
    if legacy {
        out.insert(LEGACY_MARK.to_owned(), true.into());
    }
    serde_json::Value::Object(out).to_string()
}

/// Whether a stored content is a compact record's (see [`compact`]).
fn is_compact(map: &ContentMap) -> bool {
    map.contains_key(DIGEST) && !map.contains_key("event") && !map.contains_key("action")
}

/// The digest (see `hex_sha256`) of what decides whether two deliveries of a key are one: the
/// name and the [`DECISIVE`] fields (absent as `null`) of a refund or payout `event`, the name
/// alone for a content of version 1 (`legacy`), the whole content of any other callback. The
/// name's field is the canonical `content`'s first (`event`, or `action` for an action
/// callback), never another field of that name.
fn decisive_digest(content: &str, map: &ContentMap, legacy: bool) -> String {
    let name_field = if content.starts_with("{\"action\":") { "action" } else { "event" };
    let name = map.get(name_field).cloned().unwrap_or(serde_json::Value::Null);
    let fields = match name.as_str() {
        Some(n) if name_field == "event" => DECISIVE.iter().find(|(event, _)| *event == n).map(|(_, f)| *f),
        _ => None,
    };
    let mut projection = ContentMap::new();
    projection.insert(name_field.to_owned(), name);
    match fields {
        Some(fields) => {
            for field in fields {
                projection.insert((*field).to_owned(), map.get(*field).cloned().unwrap_or(serde_json::Value::Null));
            }
        }
        None if legacy => {}
        None => projection = map.clone(),
    }
    let mut text = String::new();
    // The projection's order is fixed (built in `DECISIVE`'s order, or the canonical content's).
    for (name, value) in &projection {
        push_quoted(&mut text, name);
        text.push(':');
        text.push_str(&value.to_string());
        text.push(',');
    }
    hex_sha256(text.as_bytes())
}

/// The first 128 bits of the SHA-256 of `bytes`, in hex: a compact record's digest (a chance
/// collision among a journal's records is out of reach, and a chosen one would need the service
/// to send it).
fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    super::hex::hex(&sha2::Sha256::digest(bytes)[..16])
}

/// The error for a delivery whose key the journal holds with other decisive content:
/// names the key (its `transactionId`, or its index) and the fields that differ.
pub(crate) fn conflict_error(delivery: &Delivery, differing: &[String]) -> Error {
    let (field, what) = match (delivery.transaction_id, delivery.index) {
        (Some(id), _) => (format!("{}.transactionId", delivery.name), format!("transactionId {id}")),
        (None, Some(index)) => (format!("{}.index", delivery.name), format!("index {index}")),
        (None, None) => (delivery.name.clone(), "this key".to_owned()),
    };
    let differences = match differing.len() {
        0..=3 => differing.join("; "),
        n => format!("{} and {} more fields", differing[..3].join("; "), n - 3),
    };
    let problem = format!(
        "{what} was delivered before with different content ({differences}); the first delivery stays and this one is refused"
    );
    Error::field(ErrorKind::Conflict, field, problem)
}

fn shortened(value: &serde_json::Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(40) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callback::options::ParseOptions;

    fn delivery(body: &str) -> Delivery {
        Delivery::of(&crate::callback::event::parse(body.as_bytes(), &ParseOptions::default()).expect("valid body"))
    }

    const REFUND: &str = r#"{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-1","playerIdentifier":"p-1","transactionId":900002,"buyTransactionId":800001,"gameSessionId":5,"partnerGameRequestIdentifier":"r-1","gameId":7,"isMobile":false,"index":41}"#;

    #[test]
    fn refund_key_is_name_and_transaction_id() {
        let d = delivery(REFUND);
        assert_eq!(d.key(), Some("gameSessionBuyRefund:900002"));
        assert!(transaction_keys(900002).iter().any(|key| Some(key.as_str()) == d.key()));
        assert_eq!((d.index(), d.transaction_id(), d.name()), (Some(41), Some(900002), "gameSessionBuyRefund"));
        assert!(d.is_replayable());
        assert_eq!(
            d.fingerprint(),
            r#"{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-1","playerIdentifier":"p-1","playerPartnerIdentifier":null,"transactionId":900002,"buyTransactionId":800001,"gameSessionId":5,"partnerGameRequestIdentifier":"r-1","gameId":7,"isMobile":false,"bonusCode":null}"#
        );
    }

    /// The stored form of a refund and a payout leaves out the field names and reads back as
    /// the same content; other contents are stored as they are.
    #[test]
    fn refunds_and_payouts_are_stored_by_position() {
        let bodies = [
            r#"{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs \"1\" \u00e9","playerIdentifier":"p","transactionId":7,"buyTransactionId":8,"gameSessionId":5,"partnerGameRequestIdentifier":"r","gameId":3,"isMobile":true,"bonusCode":"B","index":4}"#,
            r#"{"event":"jackpotPayout","jackpotIdentifier":"j","playerPartnerIdentifier":"pp","currencyISO4217":"EUR","moneyWon":100,"coinsWon":0,"isMoney":true,"epochReleasedMillis":1,"isPrimary":false,"transactionId":9,"buyTransactionId":4,"partnerGameRequestIdentifier":"r","gameSessionId":3,"gameId":2,"index":5}"#,
        ];
        for body in bodies {
            let delivery = delivery(body);
            let id = delivery.transaction_id().expect("keyed by its transactionId");
            assert!(transaction_keys(id).iter().any(|key| Some(key.as_str()) == delivery.key()), "{body}");
            let stored = delivery.stored();
            assert!(stored.starts_with("[\"") && stored.len() < delivery.fingerprint().len() / 2 + 40, "{stored}");
            let back: ContentMap = serde_json::from_str(&from_stored(stored)).unwrap();
            let canonical: ContentMap = serde_json::from_str(delivery.fingerprint()).unwrap();
            assert_eq!(back, canonical);
            assert!(decisive_differences(&from_stored(stored), delivery.fingerprint()).is_empty());
        }
        let other = r#"{"event":"bonusGranted","amount":5}"#;
        assert_eq!(stored_form(other), other);
        assert_eq!(from_stored(other), other);
        assert_eq!(from_stored("[1,2"), "[1,2", "unreadable stays as it is");
        assert_eq!(from_stored(r#"["jackpotPayout",1]"#), r#"["jackpotPayout",1]"#, "a short array stays");
    }

    /// `Delivery::of` writes a refund's and a payout's stored form from the fields themselves:
    /// the bytes `stored_form` makes of the content (an action of the same name is stored as
    /// its content, as `stored_form` leaves it), whatever the strings hold.
    #[test]
    fn the_stored_form_written_from_the_fields_is_the_contents() {
        let texts = ["gs-1", r#"gs \"1\" \\ \u00e9 \/"#, r#"\u2028\ud83d\ude00 é"#, r#"\u0041\u005c"#];
        let mut bodies = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            let refund = format!(
                r#"{{"event":"gameSessionBuyRefund","gameSessionIdentifier":"{text}","playerPartnerIdentifier":"{text}","transactionId":{},"buyTransactionId":0,"gameSessionId":9223372036854775807,"partnerGameRequestIdentifier":"r{text}","gameId":3,"isMobile":{},"bonusCode":"{text}","index":4}}"#,
                i + 1,
                i % 2 == 0
            );
            let payout = format!(
                r#"{{"event":"jackpotPayout","jackpotIdentifier":"{text}","playerIdentifier":"{text}","currencyISO4217":"EUR","moneyWon":9007199254740991,"coinsWon":0,"isMoney":true,"epochReleasedMillis":1,"isPrimary":false,"transactionId":{},"buyTransactionId":4,"partnerGameRequestIdentifier":"{text}","gameSessionId":3,"gameId":2{}}}"#,
                i + 1,
                if i % 2 == 0 { r#","isMobile":false"# } else { "" }
            );
            bodies.push(refund.replace(r#""event":"#, r#""action":"#));
            bodies.push(refund);
            bodies.push(payout);
        }
        for body in &bodies {
            let event = crate::callback::event::parse(body.as_bytes(), &ParseOptions::default()).expect(body);
            let delivery = Delivery::of(&event);
            assert_eq!(delivery.stored(), stored_form(delivery.fingerprint()), "{body}");
            assert_eq!(delivery.stored().starts_with('['), !event.is_action, "{body}");
        }
    }

    #[test]
    fn fingerprint_ignores_formatting_order_index_and_extra_fields() {
        let reformatted = r#"{ "index" : 99, "gameId":7, "isMobile":false, "gameSessionId":5,
            "transactionId":900002,"buyTransactionId":800001, "playerIdentifier":"p\u002d1",
            "gameSessionIdentifier":"gs-1","partnerGameRequestIdentifier":"r-1",
            "event":"gameSessionBuyRefund", "addedLater": {"x": 1} }"#;
        assert_eq!(delivery(REFUND).fingerprint(), delivery(reformatted).fingerprint());
        assert_eq!(delivery(REFUND).key(), delivery(reformatted).key());
    }

    #[test]
    fn a_typed_field_changes_the_fingerprint_and_the_conflict_names_it() {
        let changed = REFUND.replace(r#""gameSessionId":5"#, r#""gameSessionId":8"#);
        let (first, now) = (delivery(REFUND), delivery(&changed));
        assert_ne!(first.fingerprint(), now.fingerprint());
        let error = conflict_error(&now, &decisive_differences(first.fingerprint(), now.fingerprint()));
        assert_eq!(error.kind, ErrorKind::Conflict);
        assert_eq!(error.field, "gameSessionBuyRefund.transactionId");
        assert!(error.message.contains("transactionId 900002"), "{error}");
        assert!(error.message.contains("gameSessionId: first 5, now 8"), "{error}");
    }

    #[test]
    fn payout_key_and_balance_query_without_key() {
        let payout = delivery(
            r#"{"event":"jackpotPayout","jackpotIdentifier":"j","playerIdentifier":"p","currencyISO4217":"EUR","moneyWon":100,"coinsWon":0,"isMoney":true,"epochReleasedMillis":1,"isPrimary":true,"transactionId":5,"buyTransactionId":4,"partnerGameRequestIdentifier":"r","gameSessionId":3,"gameId":2}"#,
        );
        assert_eq!(payout.key(), Some("jackpotPayout:5"));
        assert_eq!(payout.index(), None);
        let balance = delivery(r#"{"action":"getPlayerBalance","playerIdentifier":"p","index":12}"#);
        assert_eq!((balance.key(), balance.index(), balance.is_replayable()), (None, Some(12), false));
    }

    #[test]
    fn other_events_are_keyed_by_index() {
        let other = delivery(r#"{"event":"bonusGranted","index":17,"amount":5,"to":{"b":1, "a":2}}"#);
        assert_eq!(other.key(), Some("event#17#bonusGranted"));
        assert_eq!(other.fingerprint(), r#"{"event":"bonusGranted","amount":5,"to":{"a":2,"b":1}}"#);
        let reformatted = delivery(r#"{ "to" : {"a":2,"b":1}, "amount":5, "index":17, "event":"bonusGranted" }"#);
        assert_eq!(other.fingerprint(), reformatted.fingerprint());
        let another = delivery(r#"{"event":"bonusGranted","index":17,"amount":5000,"to":{"b":1,"a":2}}"#);
        assert_eq!(decisive_differences(other.fingerprint(), another.fingerprint()), ["amount: first 5, now 5000"]);
        let huge = delivery(r#"{"event":"bonusGranted","index":17,"amount":1e400}"#);
        assert_eq!(huge.fingerprint(), r#"{"event":"bonusGranted","amount":"(unreadable) 1e400"}"#);
        // A content stored by schema version 1 (the name alone, marked by the migration) matches
        // any of that name; a fieldless event of today does not match one with fields.
        assert!(
            decisive_differences(r#"{"event":"bonusGranted","(journal v1)":true}"#, other.fingerprint()).is_empty()
        );
        assert!(!decisive_differences(r#"{"event":"bonusGranted"}"#, other.fingerprint()).is_empty());
        let unindexed = delivery(r#"{"event":"bonusGranted","amount":5}"#);
        assert_eq!((unindexed.key(), unindexed.is_replayable()), (None, false));
    }
}
