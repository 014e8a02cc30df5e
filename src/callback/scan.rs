//! The one pass over a callback body: fields the known events define are decoded straight into
//! slots (no second parse), every other field is kept as raw JSON text borrowed from the body.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer as _, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::callback::json::{self, Field, KeySeed, RawJson, StrictValue};
use crate::callback::spec::Name;
use crate::error::{Error, ErrorKind, Result};

/// A decoded value of a slotted field. Containers are checked (depth, duplicate keys, escapes)
/// and consumed, but not kept: no known field is an array or an object.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar<'a> {
    Null,
    Bool(bool),
    /// A JSON integer from 0 to 2^64 - 1.
    Unsigned(u64),
    /// A negative JSON integer down to -2^63.
    Negative(i64),
    /// A number with a fraction or exponent, or an integer outside the two ranges above.
    Float(f64),
    Str(Cow<'a, str>),
    Array,
    Object,
}

impl fmt::Display for Scalar<'_> {
    /// The value as an error message shows it after "got".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Null => f.write_str("null"),
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Unsigned(n) => write!(f, "{n}"),
            Scalar::Negative(n) => write!(f, "{n}"),
            Scalar::Float(x) => write!(f, "{x:?}"),
            Scalar::Str(s) => f.write_str(&json::excerpt(&json::quoted(s))),
            Scalar::Array => f.write_str("an array"),
            Scalar::Object => f.write_str("an object"),
        }
    }
}

/// The decoded values of the fields named by `Name`, by slot.
pub type Slots<'a> = [Option<Scalar<'a>>; Name::COUNT];

/// A body after the one pass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scanned<'a> {
    pub slots: Slots<'a>,
    /// The names whose slots are filled, as `Name::bit`s.
    pub present: u32,
    /// Fields `Name` does not name, in body order, values as raw JSON.
    pub others: Vec<Field<'a>>,
}

/// Why the one pass stopped.
#[derive(Debug)]
pub enum ScanError {
    /// A failure of the body as a whole: syntax, a repeated top-level key, a key with a control
    /// character.
    Body(Error),
    /// A failure inside the value of a slotted field, which `rescan` looks at again to tell
    /// the event it belongs to.
    InValue,
}

/// Scans the top-level object of `text` (from `json::object_text`) into `scanned`, which the
/// caller owns so that its slots are filled in place (the slots are large to move). Duplicate names and
/// control characters in names are refused; containers in slots are checked against
/// `max_depth`.
pub fn scan<'a>(text: &'a str, max_depth: usize, scanned: &mut Scanned<'a>) -> std::result::Result<(), ScanError> {
    let failure = Cell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let visitor = TopLevel { max_depth: max_depth.min(json::MAX_DEPTH_CEILING), failure: &failure, scanned };
    de.deserialize_map(visitor).and_then(|()| de.end()).map_err(|e| match failure.take() {
        Some(Some(error)) => ScanError::Body(error),
        Some(None) => ScanError::InValue,
        None => ScanError::Body(json::invalid_json(&e)),
    })?;
    reject_repeated(scanned.others.iter().map(|f| f.name.as_ref())).map_err(ScanError::Body)
}

/// A slotted field whose value is refused: its name, the kind and the problem.
pub type Refusal = (Name, ErrorKind, String);

/// The rare path after `scan` stopped inside a value: every field split as raw text, each
/// slotted one decoded on its own. Gives the slots and the first slotted field whose value is
/// refused, with its kind and problem. A number too large for any type becomes an infinite
/// float, so that the typed readers report it as the number it is.
pub fn rescan<'a>(text: &'a str, max_depth: usize, scanned: &mut Scanned<'a>) -> Result<Option<Refusal>> {
    let fields = json::split_object(text)?;
    reject_repeated(fields.iter().map(|f| f.name.as_ref()))?;
    *scanned = Scanned::default();
    let mut refused = None;
    for field in fields {
        if let Some(error) = json::key_error(&field.name) {
            return Err(error);
        }
        let Some(name) = Name::of(&field.name) else {
            scanned.others.push(field);
            continue;
        };
        let value = match scalar_of(field.raw, max_depth) {
            Ok(value) => value,
            Err(_) if field.raw.get().starts_with(['-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9']) => {
                Scalar::Float(f64::INFINITY)
            }
            Err((kind, problem)) => {
                refused.get_or_insert((name, kind, problem));
                Scalar::Null
            }
        };
        scanned.slots[name as usize] = Some(value);
        scanned.present |= name.bit();
    }
    Ok(refused)
}

fn reject_repeated<'n>(names: impl Iterator<Item = &'n str>) -> Result<()> {
    let mut names: Vec<&str> = names.collect();
    names.sort_unstable();
    match names.windows(2).find(|pair| pair[0] == pair[1]) {
        Some(pair) => Err(Error::field(ErrorKind::DuplicateKey, pair[0], "the key appears more than once")),
        None => Ok(()),
    }
}

/// Decodes one raw value the way the scan decodes slotted ones: containers are checked against
/// `max_depth` (the value being at level 2). Gives the kind and problem of a refusal.
pub fn scalar_of(raw: RawJson<'_>, max_depth: usize) -> std::result::Result<Scalar<'_>, (ErrorKind, String)> {
    let failure = Cell::new(None);
    let seed = ScalarSeed { strict: StrictValue::new(2, max_depth.min(json::MAX_DEPTH_CEILING), &failure) };
    seed.deserialize(&mut serde_json::Deserializer::from_str(raw.get()))
        .map_err(|e| failure.take().unwrap_or_else(|| (ErrorKind::InvalidJson, e.to_string())))
}

/// What stopped the scan: `Some(error)` for the body as a whole, `None` for a slotted value.
type Failure = Cell<Option<Option<Error>>>;

/// Fills `scanned` in place (it is large: moving it costs more than filling it).
struct TopLevel<'f, 'de> {
    max_depth: usize,
    failure: &'f Failure,
    scanned: &'f mut Scanned<'de>,
}

impl<'de> Visitor<'de> for TopLevel<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
        let scanned = self.scanned;
        while let Some(name) = map.next_key_seed(KeySeed)? {
            match Name::of(&name) {
                Some(name) => {
                    let slot = name as usize;
                    let value_failure = Cell::new(None);
                    let seed = ScalarSeed { strict: StrictValue::new(2, self.max_depth, &value_failure) };
                    let value = map.next_value_seed(seed).inspect_err(|_| self.failure.set(Some(None)))?;
                    if scanned.slots[slot].is_some() {
                        let error =
                            Error::field(ErrorKind::DuplicateKey, name.as_str(), "the key appears more than once");
                        self.failure.set(Some(Some(error)));
                        return Err(de::Error::custom("duplicate key"));
                    }
                    scanned.slots[slot] = Some(value);
                    scanned.present |= name.bit();
                }
                None => {
                    if let Some(error) = json::key_error(&name) {
                        self.failure.set(Some(Some(error)));
                        return Err(de::Error::custom("key"));
                    }
                    let raw: &'de RawValue = map.next_value()?;
                    scanned.others.push(Field { name, raw: RawJson::checked(raw.get()) });
                }
            }
        }
        Ok(())
    }
}

/// Decodes one slotted value.
struct ScalarSeed<'s> {
    strict: StrictValue<'s>,
}

impl<'de> DeserializeSeed<'de> for ScalarSeed<'_> {
    type Value = Scalar<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ScalarSeed<'_> {
    type Value = Scalar<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(Scalar::Null)
    }
    fn visit_bool<E>(self, v: bool) -> std::result::Result<Self::Value, E> {
        Ok(Scalar::Bool(v))
    }
    fn visit_u64<E>(self, v: u64) -> std::result::Result<Self::Value, E> {
        Ok(Scalar::Unsigned(v))
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<Self::Value, E> {
        Ok(if v >= 0 { Scalar::Unsigned(v as u64) } else { Scalar::Negative(v) })
    }
    fn visit_f64<E>(self, v: f64) -> std::result::Result<Self::Value, E> {
        Ok(Scalar::Float(v))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Self::Value, A::Error> {
        self.strict.visit_seq(seq).map(|()| Scalar::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<Self::Value, A::Error> {
        self.strict.visit_map(map).map(|()| Scalar::Object)
    }
}
