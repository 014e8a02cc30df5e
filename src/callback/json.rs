//! Strict reading of a JSON body: bounded size and depth, valid UTF-8 without BOM, an object at the
//! top, no duplicate keys anywhere, no lone surrogate escapes anywhere.
//!
//! `object_text` checks the body as a whole; `scan` (in `scan.rs`) then reads its fields in one
//! pass, keeping fields it does not know as raw JSON text borrowed from the body, which
//! `check_value` checks here. `split_object` gives every field as raw text, for the rare paths.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::callback::{valid_text, words};
use crate::error::{Error, ErrorKind, Result};

/// Nesting deeper than this is refused whatever the configuration says (the JSON parser's own
/// recursion limit is 128; staying below it keeps every depth failure reported as such).
pub const MAX_DEPTH_CEILING: usize = 100;

/// One top-level field: its decoded name and its value as raw JSON text, both borrowed from the
/// body when the name has no escapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Field<'a> {
    pub name: Cow<'a, str>,
    pub raw: RawJson<'a>,
}

/// A JSON value exactly as the body wrote it, borrowed from the body; only the library makes
/// one, from text a JSON reading accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawJson<'a>(&'a str);

impl<'a> RawJson<'a> {
    /// Text already read as one JSON value (by serde_json or by `quick_scan`).
    pub(crate) fn checked(text: &'a str) -> Self {
        RawJson(text)
    }

    /// The JSON text.
    pub fn get(&self) -> &'a str {
        self.0
    }
}

/// The body as text once its size, byte order mark, UTF-8 and top-level type are checked: it is
/// valid UTF-8 and its first non-space character is `{`.
pub fn object_text(body: &[u8], max_body_bytes: usize) -> Result<&str> {
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
    Ok(text)
}

/// Every field of the top-level object of `text` (from `object_text`), values as raw JSON, in
/// body order. Names are not checked here (`scan` does that, and `rescan` with `key_error`).
pub fn split_object(text: &str) -> Result<Vec<Field<'_>>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let fields = de.deserialize_map(TopLevel).map_err(|e| invalid_json(&e))?;
    de.end().map_err(|e| invalid_json(&e))?;
    Ok(fields)
}

/// Checks a value kept as raw JSON: no duplicate keys, nesting at most `max_depth` counting the
/// top-level object as 1, no lone surrogate escapes, no control characters in object keys.
/// Errors name the value `event.field`.
pub fn check_value(raw: RawJson<'_>, event: &str, field: &str, max_depth: usize) -> Result<()> {
    valid_text::check_raw(raw.get(), 2, max_depth.min(MAX_DEPTH_CEILING))
        .map_err(|(kind, problem)| Error::field(kind, format!("{event}.{field}"), problem))
}

/// Raw JSON text shortened to 40 characters for an error message.
pub fn excerpt(text: &str) -> String {
    excerpt_of(text, 40)
}

/// `text` shortened to `max` characters, `...` marking a cut.
pub fn excerpt_of(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The error for a body the JSON parser refused.
pub fn invalid_json(e: &serde_json::Error) -> Error {
    if e.to_string().starts_with("recursion limit exceeded") {
        return Error::new(ErrorKind::TooDeep, format!("body: nested too deeply ({})", e));
    }
    Error::new(ErrorKind::InvalidJson, format!("body: invalid JSON: {}", e))
}

/// Why an object key is refused, if it is: a control character (it would reach C as a NUL or
/// worse). The JSON is valid, so this is an invalid value, not invalid JSON.
pub fn key_problem(key: &str) -> Option<&'static str> {
    first_control_char(key).map(|_| "an object key contains a control character")
}

/// The first control character (C0, DEL or C1) of `s`. Scans bytes first: the only bytes that
/// can start one are below 0x20, 0x7F, and 0xC2 (the lead byte of U+0080..U+009F). Inlined: most
/// keys and names are short, and a call would cost more than the scan.
#[inline(always)]
pub fn first_control_char(s: &str) -> Option<char> {
    if !may_hold_control(s.as_bytes()) {
        return None;
    }
    s.chars().find(|c| c.is_control())
}

/// Whether `bytes` holds a byte of `CONTROL_LEAD`: a short run byte by byte, a longer one by words.
#[inline(always)]
fn may_hold_control(bytes: &[u8]) -> bool {
    if bytes.len() < 8 { bytes.iter().any(|&b| CONTROL_LEAD[usize::from(b)]) } else { words_hold_control(bytes) }
}

/// Whether `bytes` (at least eight of them) holds a byte of `CONTROL_LEAD`: below 0x20, 0x7F or
/// 0xC2. Eight bytes at a time (`words`), the last word overlapping the one before it.
fn words_hold_control(bytes: &[u8]) -> bool {
    let flagged = |chunk: &[u8]| {
        let word = words::word(chunk);
        words::below(word, 0x20) | words::equal(word, 0x7F) | words::equal(word, 0xC2) != 0
    };
    bytes.chunks_exact(8).any(flagged) || flagged(&bytes[bytes.len() - 8..])
}

/// `name` when it can serve as a key or name the library writes or matches (a reply wrapper, an
/// action, a field name): non-empty, without control characters; else an `InvalidArgument` error
/// naming `field`.
pub fn checked_name<'a>(field: &str, name: &'a str) -> Result<&'a str> {
    if name.is_empty() || first_control_char(name).is_some() {
        return Err(Error::field(
            ErrorKind::InvalidArgument,
            field,
            "must be a non-empty name without control characters",
        ));
    }
    Ok(name)
}

/// The bytes that can start a control character in UTF-8, for `first_control_char`.
static CONTROL_LEAD: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[0x7F] = true;
    table[0xC2] = true;
    table
};

/// The refusal of a top-level key with a control character, naming the key JSON-escaped.
pub fn key_error(key: &str) -> Option<Error> {
    let problem = key_problem(key)?;
    let escaped = quoted(key);
    Some(Error::field(ErrorKind::InvalidValue, &escaped[1..escaped.len() - 1], problem))
}

/// Visits the top-level object, keeping each value as raw JSON.
struct TopLevel;

impl<'de> Visitor<'de> for TopLevel {
    type Value = Vec<Field<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
        let mut fields = Vec::with_capacity(32);
        while let Some(name) = map.next_key_seed(KeySeed)? {
            let raw: &'de RawValue = map.next_value()?;
            fields.push(Field { name, raw: RawJson::checked(raw.get()) });
        }
        Ok(fields)
    }
}

/// An object key, borrowed from the text when it has no escapes.
pub struct KeySeed;

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
pub struct StrictValue<'s> {
    depth: usize,
    max_depth: usize,
    failure: &'s Cell<Option<(ErrorKind, String)>>,
}

impl<'s> StrictValue<'s> {
    /// A walker for a value at nesting level `depth` (a top-level field's value is at level 2).
    pub fn new(depth: usize, max_depth: usize, failure: &'s Cell<Option<(ErrorKind, String)>>) -> Self {
        StrictValue { depth, max_depth, failure }
    }

    fn fail<E: de::Error>(&self, kind: ErrorKind, problem: String) -> E {
        let error = E::custom(&problem);
        self.failure.set(Some((kind, problem)));
        error
    }

    /// Checks a value inside a container, taken raw: JSON's grammar allows any number, and the
    /// raw reading checks a number's syntax without computing it, so a number beyond a double
    /// (`900719E9254741982`) is valid here as it is in a top-level field the spec does not
    /// define. The rest of the value is checked by `valid_text`, as a kept value is.
    fn check_raw<E: de::Error>(self, raw: &RawValue) -> std::result::Result<(), E> {
        valid_text::check_raw(raw.get(), self.depth, self.max_depth).map_err(|(kind, problem)| self.fail(kind, problem))
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
        while let Some(raw) = seq.next_element::<&RawValue>()? {
            inner.check_raw(raw)?;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        let inner = self.enter()?;
        let mut keys = Vec::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            if let Some(problem) = key_problem(&key) {
                return Err(self.fail(ErrorKind::InvalidValue, problem.to_owned()));
            }
            keys.push(key);
            inner.check_raw(map.next_value::<&RawValue>()?)?;
        }
        valid_text::no_duplicates(&mut keys).map_err(|(kind, problem)| self.fail(kind, problem))
    }
}

/// `s` as a JSON string literal, for messages.
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_quoted(&mut out, s);
    out
}

/// Appends `s` as a JSON string literal. Text that needs no escape is copied as it is; other
/// text is escaped by serde_json.
pub fn push_quoted(out: &mut String, s: &str) {
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.push_str(&serde_json::to_string(s).unwrap_or_default());
    } else {
        out.push('"');
        out.push_str(s);
        out.push('"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_check_flags_exactly_the_control_lead_bytes() {
        // Every byte value at every position of strings of 1 to 24 bytes, alone among printable
        // ones and next to another flagged byte: the word check agrees with the table.
        for len in 1..=24 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = b;
                    assert_eq!(may_hold_control(&bytes), CONTROL_LEAD[usize::from(b)], "{b:#x} at {at} of {len}");
                    bytes[len - 1 - at] = 0xC2;
                    assert!(may_hold_control(&bytes));
                    bytes[len - 1 - at] = 0xFF;
                    bytes[at] = b;
                    let expected = bytes.iter().any(|&c| CONTROL_LEAD[usize::from(c)]);
                    assert_eq!(may_hold_control(&bytes), expected, "{b:#x} at {at} of {len} beside 0xFF");
                }
            }
        }
    }

    #[test]
    fn the_first_control_character_is_found_past_the_first_word() {
        assert_eq!(first_control_char("abcdefghij\u{85}k"), Some('\u{85}'));
        assert_eq!(first_control_char("abcdefgh\u{7f}"), Some('\u{7f}'));
        assert_eq!(first_control_char("abcdefgh\u{a0}é\u{c2b}"), None);
        assert_eq!(first_control_char("player-1001\u{0}"), Some('\u{0}'));
    }
}
