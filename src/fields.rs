//! Typed reading of an event's fields, one rule per reader, each error naming `event.field`.

use std::borrow::Cow;

use serde_json::value::RawValue;

use crate::error::{Error, ErrorKind, Result};
use crate::json::{Field, excerpt, quoted};

/// The largest amount accepted: 2^53 - 1, the largest integer every JSON reader keeps exactly.
pub const MAX_AMOUNT: i64 = (1 << 53) - 1;

/// `(playerIdentifier, playerPartnerIdentifier)`, at least one present.
pub type PlayerReference<'a> = (Option<Cow<'a, str>>, Option<Cow<'a, str>>);

/// Reads the fields of one event. `event` names it in errors (`jackpotPayout.moneyWon: ...`).
pub struct FieldReader<'f, 'a> {
    pub event: &'f str,
    pub fields: &'f [Field<'a>],
    pub max_identifier_bytes: usize,
}

impl<'a> FieldReader<'_, 'a> {
    /// The raw value of `name`, or `None` when it is absent or JSON `null`.
    pub fn raw(&self, name: &str) -> Option<&'a RawValue> {
        self.fields.iter().find(|f| f.name == name).map(|f| f.raw).filter(|raw| raw.get() != "null")
    }

    fn error(&self, kind: ErrorKind, name: &str, problem: impl std::fmt::Display) -> Error {
        Error::field(kind, format!("{}.{name}", self.event), problem)
    }

    fn missing(&self, name: &str) -> Error {
        self.error(ErrorKind::MissingField, name, "required field is missing")
    }

    /// A required non-negative integer identifier (at most 2^63 - 1).
    pub fn id(&self, name: &str) -> Result<i64> {
        let raw = self.raw(name).ok_or_else(|| self.missing(name))?;
        self.non_negative(name, raw, i64::MAX)
    }

    /// An optional non-negative integer (at most 2^63 - 1).
    pub fn opt_id(&self, name: &str) -> Result<Option<i64>> {
        self.raw(name).map(|raw| self.non_negative(name, raw, i64::MAX)).transpose()
    }

    /// A required amount: a non-negative integer of at most 2^53 - 1.
    pub fn amount(&self, name: &str) -> Result<i64> {
        let raw = self.raw(name).ok_or_else(|| self.missing(name))?;
        self.non_negative(name, raw, MAX_AMOUNT)
    }

    fn non_negative(&self, name: &str, raw: &RawValue, max: i64) -> Result<i64> {
        let text = raw.get();
        let got = || format!("expected a non-negative integer, got {}", excerpt(text));
        if !text.bytes().all(|b| b.is_ascii_digit() || b == b'-') || text == "-" {
            return Err(self.error(ErrorKind::WrongType, name, got()));
        }
        if text.starts_with('-') {
            return Err(self.error(ErrorKind::OutOfRange, name, got()));
        }
        match text.parse::<i64>() {
            Ok(value) if value <= max => Ok(value),
            _ => Err(self.error(ErrorKind::OutOfRange, name, format!("expected at most {max}, got {}", excerpt(text)))),
        }
    }

    /// A required boolean.
    pub fn boolean(&self, name: &str) -> Result<bool> {
        self.opt_boolean(name)?.ok_or_else(|| self.missing(name))
    }

    /// An optional boolean.
    pub fn opt_boolean(&self, name: &str) -> Result<Option<bool>> {
        match self.raw(name).map(RawValue::get) {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(other) => {
                Err(self.error(ErrorKind::WrongType, name, format!("expected a boolean, got {}", excerpt(other))))
            }
        }
    }

    /// A required identifier: a non-empty string without control characters, bounded in length.
    pub fn identifier(&self, name: &str) -> Result<Cow<'a, str>> {
        self.opt_identifier(name)?.ok_or_else(|| self.missing(name))
    }

    /// An optional identifier (absent or `null` gives `None`).
    pub fn opt_identifier(&self, name: &str) -> Result<Option<Cow<'a, str>>> {
        let Some(raw) = self.raw(name) else { return Ok(None) };
        let value = self.string(name, raw)?;
        if value.is_empty() {
            return Err(self.error(ErrorKind::InvalidValue, name, "must not be empty"));
        }
        if value.len() > self.max_identifier_bytes {
            let problem = format!("{} bytes, more than the limit of {}", value.len(), self.max_identifier_bytes);
            return Err(self.error(ErrorKind::InvalidValue, name, problem));
        }
        if let Some(c) = value.chars().find(|c| c.is_control()) {
            let problem = format!("contains the control character U+{:04X}", u32::from(c));
            return Err(self.error(ErrorKind::InvalidValue, name, problem));
        }
        Ok(Some(value))
    }

    /// A required ISO 4217 currency code: exactly three uppercase ASCII letters.
    pub fn currency(&self, name: &str) -> Result<Cow<'a, str>> {
        let raw = self.raw(name).ok_or_else(|| self.missing(name))?;
        let value = self.string(name, raw)?;
        if !is_currency_code(&value) {
            let problem = format!("expected three uppercase letters (ISO 4217), got {}", excerpt(&quoted(&value)));
            return Err(self.error(ErrorKind::InvalidValue, name, problem));
        }
        Ok(value)
    }

    /// The player reference: at least one of `playerIdentifier` and `playerPartnerIdentifier`.
    pub fn player(&self) -> Result<PlayerReference<'a>> {
        let service = self.opt_identifier("playerIdentifier")?;
        let partner = self.opt_identifier("playerPartnerIdentifier")?;
        if service.is_none() && partner.is_none() {
            let problem =
                "required field is missing (one of playerIdentifier and playerPartnerIdentifier must be present)";
            return Err(self.error(ErrorKind::MissingField, "playerIdentifier", problem));
        }
        Ok((service, partner))
    }

    fn string(&self, name: &str, raw: &'a RawValue) -> Result<Cow<'a, str>> {
        let text = raw.get();
        if !text.starts_with('"') {
            return Err(self.error(ErrorKind::WrongType, name, format!("expected a string, got {}", excerpt(text))));
        }
        decode_string(text).map_err(|e| self.error(ErrorKind::InvalidJson, name, e))
    }
}

/// Decodes a JSON string literal, borrowing it when it has no escapes.
pub fn decode_string(literal: &str) -> std::result::Result<Cow<'_, str>, serde_json::Error> {
    if literal.contains('\\') {
        serde_json::from_str::<String>(literal).map(Cow::Owned)
    } else {
        Ok(Cow::Borrowed(&literal[1..literal.len() - 1]))
    }
}

/// Whether `code` is three uppercase ASCII letters.
pub fn is_currency_code(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase())
}
