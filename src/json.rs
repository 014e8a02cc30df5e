//! Strict reading of a JSON body: bounded size and depth, valid UTF-8 without BOM, an object at the
//! top, no duplicate keys anywhere, no lone surrogate escapes anywhere.
//!
//! The top-level object is split into its fields without copying: each field keeps its name and
//! its value as raw JSON text borrowed from the body. Typed readers (`fields.rs`) then read the
//! known fields from that raw text; values kept untyped are checked here by `check_value`.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::error::{Error, ErrorKind, Result};

/// Nesting deeper than this is refused whatever the configuration says (the JSON parser's own
/// recursion limit is 128; staying below it keeps every depth failure reported as such).
pub const MAX_DEPTH_CEILING: usize = 100;

/// One top-level field: its decoded name and its value as raw JSON text, both borrowed from the
/// body when the name has no escapes.
#[derive(Debug, Clone)]
pub struct Field<'a> {
    pub name: Cow<'a, str>,
    pub raw: &'a RawValue,
}

/// Splits `body` into the fields of its top-level object, enforcing every rule of this module on
/// the top level. Nested values are checked by `check_value`, which the caller runs on the values
/// it keeps untyped (typed readers refuse containers anyway).
pub fn split_object(body: &[u8], max_body_bytes: usize) -> Result<Vec<Field<'_>>> {
    if body.len() > max_body_bytes {
        return Err(Error::new(
            ErrorKind::BodyTooLarge,
            format!("body: more than the limit of {max_body_bytes} bytes"),
        ));
    }
    if body.starts_with(b"\xEF\xBB\xBF") {
        return Err(Error::new(ErrorKind::InvalidUtf8, "body: starts with a byte order mark"));
    }
    let text = std::str::from_utf8(body)
        .map_err(|e| Error::new(ErrorKind::InvalidUtf8, format!("body: invalid UTF-8 at byte {}", e.valid_up_to())))?;
    if text.trim_start_matches([' ', '\t', '\n', '\r']).as_bytes().first() != Some(&b'{') {
        return Err(match serde_json::from_str::<IgnoredAny>(text) {
            Ok(_) => Error::new(ErrorKind::NotAnObject, "body: the top level is not a JSON object"),
            Err(e) => invalid_json(&e),
        });
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let fields = de.deserialize_map(TopLevel).map_err(|e| invalid_json(&e))?;
    de.end().map_err(|e| invalid_json(&e))?;
    reject_duplicate_names(&fields)?;
    Ok(fields)
}

/// Checks a value kept as raw JSON: no duplicate keys, nesting at most `max_depth` counting the
/// top-level object as 1, no lone surrogate escapes, no control characters in object keys.
/// `field` names the value in errors.
pub fn check_value(raw: &RawValue, field: &str, max_depth: usize) -> Result<()> {
    let text = raw.get();
    // Scalars without escapes are valid as they stand: skip the second parse on the hot path.
    if !text.starts_with(['{', '[']) && !text.contains('\\') {
        return Ok(());
    }
    let failure = Cell::new(None);
    let seed = StrictValue { depth: 2, max_depth: max_depth.min(MAX_DEPTH_CEILING), failure: &failure };
    let mut de = serde_json::Deserializer::from_str(text);
    match seed.deserialize(&mut de) {
        Ok(()) => Ok(()),
        Err(e) => Err(match failure.take() {
            Some((kind, problem)) => Error::field(kind, field, problem),
            None => Error::field(ErrorKind::InvalidJson, field, json_problem(&e)),
        }),
    }
}

/// Raw JSON text shortened for an error message.
pub fn excerpt(text: &str) -> String {
    const MAX: usize = 40;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

fn invalid_json(e: &serde_json::Error) -> Error {
    if e.to_string().starts_with("recursion limit exceeded") {
        return Error::new(ErrorKind::TooDeep, format!("body: nested too deeply ({})", json_problem(e)));
    }
    Error::new(ErrorKind::InvalidJson, format!("body: invalid JSON: {}", json_problem(e)))
}

fn json_problem(e: &serde_json::Error) -> String {
    e.to_string()
}

fn reject_duplicate_names(fields: &[Field<'_>]) -> Result<()> {
    let mut names: Vec<&str> = fields.iter().map(|f| f.name.as_ref()).collect();
    names.sort_unstable();
    match names.windows(2).find(|pair| pair[0] == pair[1]) {
        Some(pair) => Err(Error::field(ErrorKind::DuplicateKey, pair[0], "the key appears more than once")),
        None => Ok(()),
    }
}

fn key_problem(key: &str) -> Option<&'static str> {
    key.chars().any(char::is_control).then_some("an object key contains a control character")
}

/// Visits the top-level object, keeping each value as raw JSON.
struct TopLevel;

impl<'de> Visitor<'de> for TopLevel {
    type Value = Vec<Field<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
        let mut fields = Vec::with_capacity(16);
        while let Some(name) = map.next_key_seed(KeySeed)? {
            if let Some(problem) = key_problem(&name) {
                return Err(de::Error::custom(problem));
            }
            let raw: &'de RawValue = map.next_value()?;
            fields.push(Field { name, raw });
        }
        Ok(fields)
    }
}

/// An object key, borrowed from the text when it has no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> std::result::Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

/// Walks any value, recording the first rule it breaks in `failure`.
#[derive(Clone, Copy)]
struct StrictValue<'s> {
    depth: usize,
    max_depth: usize,
    failure: &'s Cell<Option<(ErrorKind, String)>>,
}

impl StrictValue<'_> {
    fn fail<E: de::Error>(&self, kind: ErrorKind, problem: String) -> E {
        let error = E::custom(&problem);
        self.failure.set(Some((kind, problem)));
        error
    }

    fn enter<E: de::Error>(&self) -> std::result::Result<Self, E> {
        if self.depth > self.max_depth {
            return Err(self.fail(ErrorKind::TooDeep, format!("nested deeper than {} levels", self.max_depth)));
        }
        Ok(StrictValue { depth: self.depth + 1, ..*self })
    }
}

impl<'de> DeserializeSeed<'de> for StrictValue<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        let inner = self.enter()?;
        while seq.next_element_seed(inner)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        let inner = self.enter()?;
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            if let Some(problem) = key_problem(&key) {
                return Err(self.fail(ErrorKind::InvalidJson, problem.to_owned()));
            }
            if !seen.insert(key.clone()) {
                return Err(self.fail(ErrorKind::DuplicateKey, format!("duplicate key {}", quoted(&key))));
            }
            map.next_value_seed(inner)?;
        }
        Ok(())
    }
}

/// `s` as a JSON string literal, for messages.
pub fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}
