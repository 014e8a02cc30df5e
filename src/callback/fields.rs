//! Typed reading of an event's fields, one rule per reader, each error naming `event.field`.

use std::borrow::Cow;

use crate::callback::json::{excerpt, quoted};
use crate::callback::scan::{Scalar, Slots};
use crate::callback::spec::Name;
use crate::error::{Error, ErrorKind, Result};

/// The largest amount accepted: 2^53 - 1, the largest integer every JSON reader keeps exactly.
pub const MAX_AMOUNT: i64 = (1 << 53) - 1;

/// `(playerIdentifier, playerPartnerIdentifier)`, at least one present.
pub type PlayerReference<'a> = (Option<Cow<'a, str>>, Option<Cow<'a, str>>);

/// Reads the fields of one event. `event` names it in errors (`jackpotPayout.moneyWon: ...`).
pub struct FieldReader<'f, 'a> {
    pub event: &'f str,
    pub slots: &'f Slots<'a>,
    /// The whole body, to quote a refused number exactly as sent.
    pub text: &'a str,
    pub max_identifier_bytes: usize,
}

impl<'a> FieldReader<'_, 'a> {
    /// The value of `name`, or `None` when it is absent or JSON `null` (an optional field given
    /// as `null` counts as absent).
    fn value(&self, name: Name) -> Option<&Scalar<'a>> {
        self.slots[name as usize].as_ref().filter(|v| **v != Scalar::Null)
    }

    #[cold]
    #[inline(never)]
    fn error(&self, kind: ErrorKind, name: &str, problem: impl std::fmt::Display) -> Error {
        Error::field(kind, format!("{}.{name}", self.event), problem)
    }

    #[cold]
    #[inline(never)]
    fn missing(&self, name: Name) -> Error {
        self.error(ErrorKind::MissingField, name.as_str(), "required field is missing")
    }

    /// A required non-negative integer identifier (at most 2^63 - 1).
    pub fn id(&self, name: Name) -> Result<i64> {
        let value = self.value(name).ok_or_else(|| self.missing(name))?;
        self.non_negative(name.as_str(), value, i64::MAX)
    }

    /// A required amount: a non-negative integer of at most 2^53 - 1.
    pub fn amount(&self, name: Name) -> Result<i64> {
        let value = self.value(name).ok_or_else(|| self.missing(name))?;
        self.non_negative(name.as_str(), value, MAX_AMOUNT)
    }

    /// A non-negative integer of at most `max`, from any decoded value of the field `name`.
    pub fn non_negative(&self, name: &str, value: &Scalar<'_>, max: i64) -> Result<i64> {
        match *value {
            Scalar::Unsigned(n) if n <= max as u64 => Ok(n as i64),
            _ => Err(self.not_non_negative(name, value, max)),
        }
    }

    /// Why `value` is not a non-negative integer of at most `max`.
    #[cold]
    #[inline(never)]
    fn not_non_negative(&self, name: &str, value: &Scalar<'_>, max: i64) -> Error {
        let (kind, problem) = match *value {
            Scalar::Unsigned(_) => (ErrorKind::OutOfRange, format!("expected at most {max}")),
            Scalar::Negative(_) => (ErrorKind::OutOfRange, "expected a non-negative integer".to_owned()),
            Scalar::Float(_) => {
                // An integer beyond 64 bits arrives as a float: tell it from 1.5 or 1e3 by its text.
                let text = self.raw_text(name).unwrap_or_default();
                let digits = text.strip_prefix('-').unwrap_or(&text);
                let integer = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
                match (integer, text.starts_with('-')) {
                    (true, false) => (ErrorKind::OutOfRange, format!("expected at most {max}")),
                    (true, true) => (ErrorKind::OutOfRange, "expected a non-negative integer".to_owned()),
                    (false, _) => (ErrorKind::WrongType, "expected a non-negative integer".to_owned()),
                }
            }
            _ => {
                let problem = format!("expected a non-negative integer, got {value}");
                return self.error(ErrorKind::WrongType, name, problem);
            }
        };
        let got = self.raw_text(name).map_or_else(|| value.to_string(), |text| excerpt(&text));
        self.error(kind, name, format!("{problem}, got {got}"))
    }

    /// The raw JSON text of the top-level field `name`, for error messages only (it splits the
    /// body again).
    fn raw_text(&self, name: &str) -> Option<String> {
        let fields = crate::callback::json::split_object(self.text).ok()?;
        fields.into_iter().find(|f| f.name == name).map(|f| f.raw.get().to_owned())
    }

    /// A required boolean.
    pub fn boolean(&self, name: Name) -> Result<bool> {
        self.opt_boolean(name)?.ok_or_else(|| self.missing(name))
    }

    /// An optional boolean.
    pub fn opt_boolean(&self, name: Name) -> Result<Option<bool>> {
        match self.value(name) {
            None => Ok(None),
            Some(Scalar::Bool(b)) => Ok(Some(*b)),
            Some(other) => {
                Err(self.error(ErrorKind::WrongType, name.as_str(), format!("expected a boolean, got {other}")))
            }
        }
    }

    /// A required identifier: a non-empty string without control characters, bounded in length.
    pub fn identifier(&self, name: Name) -> Result<Cow<'a, str>> {
        self.opt_identifier(name)?.ok_or_else(|| self.missing(name))
    }

    /// An optional identifier (absent or `null` gives `None`).
    pub fn opt_identifier(&self, name: Name) -> Result<Option<Cow<'a, str>>> {
        let Some(value) = self.value(name) else { return Ok(None) };
        let value = self.string(name, value)?;
        let control = crate::callback::json::first_control_char(&value);
        if value.is_empty() || value.len() > self.max_identifier_bytes || control.is_some() {
            return Err(self.not_identifier(name, &value, control));
        }
        Ok(Some(value))
    }

    /// Why `value` (with its first control character `control`) is not an identifier.
    #[cold]
    #[inline(never)]
    fn not_identifier(&self, name: Name, value: &str, control: Option<char>) -> Error {
        if value.is_empty() {
            return self.error(ErrorKind::InvalidValue, name.as_str(), "must not be empty");
        }
        if value.len() > self.max_identifier_bytes {
            let problem = format!("{} bytes, more than the limit of {}", value.len(), self.max_identifier_bytes);
            return self.error(ErrorKind::InvalidValue, name.as_str(), problem);
        }
        let problem = format!("contains the control character U+{:04X}", u32::from(control.unwrap_or_default()));
        self.error(ErrorKind::InvalidValue, name.as_str(), problem)
    }

    /// A required ISO 4217 currency code: exactly three uppercase ASCII letters.
    pub fn currency(&self, name: Name) -> Result<Cow<'a, str>> {
        let value = self.value(name).ok_or_else(|| self.missing(name))?;
        let value = self.string(name, value)?;
        if !is_currency_code(&value) {
            let problem = format!("expected three uppercase letters (ISO 4217), got {}", excerpt(&quoted(&value)));
            return Err(self.error(ErrorKind::InvalidValue, name.as_str(), problem));
        }
        Ok(value)
    }

    /// The player reference: at least one of `playerIdentifier` and `playerPartnerIdentifier`.
    pub fn player(&self) -> Result<PlayerReference<'a>> {
        let service = self.opt_identifier(Name::PlayerIdentifier)?;
        let partner = self.opt_identifier(Name::PlayerPartnerIdentifier)?;
        if service.is_none() && partner.is_none() {
            let problem =
                "required field is missing (one of playerIdentifier and playerPartnerIdentifier must be present)";
            return Err(self.error(ErrorKind::MissingField, "playerIdentifier", problem));
        }
        Ok((service, partner))
    }

    fn string(&self, name: Name, value: &Scalar<'a>) -> Result<Cow<'a, str>> {
        match value {
            // A borrowed string (the usual) without the call of a clone.
            Scalar::Str(Cow::Borrowed(s)) => Ok(Cow::Borrowed(s)),
            Scalar::Str(s) => Ok(s.clone()),
            other => Err(self.error(ErrorKind::WrongType, name.as_str(), format!("expected a string, got {other}"))),
        }
    }
}

/// Whether `code` is three uppercase ASCII letters.
pub fn is_currency_code(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase())
}
