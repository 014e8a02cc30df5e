//! One pass over JSON text that serde_json already read as a value (so its grammar is known to be
//! valid), checking the rules the library adds to the grammar: nesting depth, no duplicate keys,
//! no control characters in keys, no lone surrogate escapes. Numbers are never computed, so any
//! number the grammar allows passes (`900719E9254741982` too).
//!
//! Each byte is looked at once, whatever the nesting: a value kept raw is checked in about the
//! time the parser took to skip it. It checks the values the library keeps raw (`json::check_value`)
//! and, below their first level, the containers the scan meets in typed fields
//! (`json::StrictValue`); a test holds it to an independent recursive reading.

use std::borrow::Cow;

use crate::callback::json::{key_problem, quoted};
use crate::error::ErrorKind;

/// Why a value is refused: the kind and the problem, for `event.field: problem`.
pub type Refusal = (ErrorKind, String);

/// `check` for a value kept raw, at nesting level `level`: a scalar without escapes is valid as
/// it stands and is not looked at again (the usual case, on the hot path).
pub fn check_raw(text: &str, level: usize, max_depth: usize) -> Result<(), Refusal> {
    if !text.starts_with(['{', '[']) && !text.contains('\\') {
        return Ok(());
    }
    check(text, level, max_depth)
}

/// What an open container is in `check`'s stack: an array, or an object whose keys start at
/// this position of the shared key list.
const ARRAY: usize = usize::MAX;

/// Checks `text`, a JSON value that serde_json read, at nesting level `level` (a top-level
/// field's value is at level 2; a container at a level above `max_depth` is refused).
pub fn check(text: &str, level: usize, max_depth: usize) -> Result<(), Refusal> {
    let bytes = text.as_bytes();
    // One list of keys for all open objects (no allocation per object): an object's keys are
    // the tail of the list from its start, dropped when it closes.
    let mut keys: Vec<Cow<'_, str>> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    let mut key_next = false;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'{' | b'[' => {
                if level + open.len() > max_depth {
                    return Err((ErrorKind::TooDeep, format!("nested deeper than {max_depth} levels")));
                }
                key_next = byte == b'{';
                open.push(if key_next { keys.len() } else { ARRAY });
            }
            b'}' => {
                let first = open.pop().unwrap_or(ARRAY).min(keys.len());
                no_duplicates(&mut keys[first..])?;
                keys.truncate(first);
            }
            b']' => {
                open.pop();
            }
            b',' => key_next = open.last().is_some_and(|&first| first != ARRAY),
            b'"' => {
                let (end, escaped) = string_end(bytes, at + 1);
                if key_next {
                    let key = key_of(&text[at..=end], escaped)?;
                    if let Some(problem) = key_problem(&key) {
                        return Err((ErrorKind::InvalidValue, problem.to_owned()));
                    }
                    keys.push(key);
                    key_next = false;
                } else if escaped {
                    no_lone_surrogate(&bytes[at..=end])?;
                }
                at = end;
            }
            _ => {}
        }
        at += 1;
    }
    Ok(())
}

/// The index of the quote closing the string whose content starts at `from`, and whether the
/// string holds an escape. Read byte by byte (most strings are short); a long stretch without
/// a quote or backslash is searched for instead.
fn string_end(bytes: &[u8], from: usize) -> (usize, bool) {
    const STRETCH: usize = 32;
    let mut at = from;
    let mut escaped = false;
    let mut plain = 0;
    // The text is valid JSON: a closing quote exists, and a backslash is never last.
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => return (at, escaped),
            b'\\' => {
                escaped = true;
                at += 2;
            }
            _ if plain == STRETCH => {
                plain = 0;
                at += memchr::memchr2(b'"', b'\\', &bytes[at..]).unwrap_or(bytes.len() - at);
            }
            _ => {
                plain += 1;
                at += 1;
            }
        }
    }
    (bytes.len() - 1, escaped)
}

/// A key as decoded text: borrowed when it has no escape, else decoded (which refuses a lone
/// surrogate escape as invalid JSON).
fn key_of(literal: &str, escaped: bool) -> Result<Cow<'_, str>, Refusal> {
    if !escaped {
        return Ok(Cow::Borrowed(&literal[1..literal.len() - 1]));
    }
    serde_json::from_str::<String>(literal).map(Cow::Owned).map_err(|e| (ErrorKind::InvalidJson, e.to_string()))
}

/// Refuses a key that appears twice among `keys` (one object's): compared pairwise when they
/// are few, sorted otherwise.
pub fn no_duplicates(keys: &mut [Cow<'_, str>]) -> Result<(), Refusal> {
    let duplicate = if keys.len() <= 8 {
        (1..keys.len()).find(|&i| keys[..i].contains(&keys[i]))
    } else {
        keys.sort_unstable();
        (1..keys.len()).find(|&i| keys[i] == keys[i - 1])
    };
    match duplicate {
        Some(i) => Err((ErrorKind::DuplicateKey, format!("duplicate key {}", quoted(&keys[i])))),
        None => Ok(()),
    }
}

/// Refuses a `\uD800`-`\uDBFF` escape not followed by a `\uDC00`-`\uDFFF` one, and a
/// `\uDC00`-`\uDFFF` escape not preceded by the first kind, in a string literal of valid JSON.
fn no_lone_surrogate(bytes: &[u8]) -> Result<(), Refusal> {
    let mut at = 0;
    while let Some(offset) = memchr::memchr(b'\\', &bytes[at..]) {
        at += offset;
        if bytes[at + 1] != b'u' {
            at += 2;
            continue;
        }
        let unit = hex4(bytes, at + 2);
        at += 6;
        match unit {
            0xD800..=0xDBFF => {
                let trail = if bytes[at..].starts_with(b"\\u") { hex4(bytes, at + 2) } else { 0 };
                if !(0xDC00..=0xDFFF).contains(&trail) {
                    return Err((ErrorKind::InvalidJson, "lone leading surrogate in hex escape".to_owned()));
                }
                at += 6;
            }
            0xDC00..=0xDFFF => {
                return Err((ErrorKind::InvalidJson, "lone trailing surrogate in hex escape".to_owned()));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The four hex digits at `at` (valid JSON guarantees them) as a number.
fn hex4(bytes: &[u8], at: usize) -> u32 {
    bytes[at..at + 4].iter().fold(0, |n, &b| n << 4 | char::from(b).to_digit(16).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use serde::de::{Deserializer as _, MapAccess, SeqAccess, Visitor};
    use serde_json::value::RawValue;

    use super::*;

    /// An independent reading of the same rules for the tests: a recursive serde walk that
    /// decodes every key and string (so numbers beyond a double are out of its reach: the cases
    /// avoid them). Gives the kind of the first refusal.
    struct Reference {
        level: usize,
        max_depth: usize,
    }

    impl<'de> Visitor<'de> for Reference {
        type Value = Result<(), ErrorKind>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Ok(()))
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Ok(()))
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Ok(()))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Ok(()))
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Ok(()))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Ok(()))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut first = if self.level > self.max_depth { Err(ErrorKind::TooDeep) } else { Ok(()) };
            while let Some(raw) = seq.next_element::<&RawValue>()? {
                first = first.and_then(|()| reference(raw.get(), self.level + 1, self.max_depth));
            }
            Ok(first)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut first = if self.level > self.max_depth { Err(ErrorKind::TooDeep) } else { Ok(()) };
            let mut keys = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                if key.chars().any(char::is_control) {
                    first = first.and(Err(ErrorKind::InvalidValue));
                }
                let raw = map.next_value::<&RawValue>()?;
                first = first.and_then(|()| reference(raw.get(), self.level + 1, self.max_depth));
                keys.push(key);
            }
            keys.sort();
            let duplicate = keys.windows(2).any(|p| p[0] == p[1]);
            Ok(first.and(if duplicate { Err(ErrorKind::DuplicateKey) } else { Ok(()) }))
        }
    }

    fn reference(text: &str, level: usize, max_depth: usize) -> Result<(), ErrorKind> {
        let mut de = serde_json::Deserializer::from_str(text);
        de.deserialize_any(Reference { level, max_depth }).unwrap_or(Err(ErrorKind::InvalidJson))
    }

    #[test]
    fn agrees_with_a_recursive_reading() {
        let cases = [
            r#"{"a":1,"b":[1,2,{"c":"d"}]}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":{"x":1},"b":{"x":1,"y":{"x":2,"x":3}}}"#,
            r#"{"\u0061":1,"a":2}"#,
            r#"{"k\u0001":1}"#,
            "{\"k\u{85}\":1}",
            r#"["\ud83d\ude00","\ud800x"]"#,
            r#"["\udc00"]"#,
            r#"["\\ud800"]"#,
            r#"["\ud800\u0041"]"#,
            r#"{"a":"}","b":"{\"","c":[",]"]}"#,
            r#"[[[[1]]]]"#,
            r#"[[[1]],[[2]]]"#,
            r#"{"a" : [ 1 , 2 ] , "b" : { } , "c" : "x"}"#,
            r#"[{"a":1},{"a":1}]"#,
            r#""plain \" \\ string""#,
            "123",
        ];
        for text in cases {
            for max_depth in [2, 3, 4, 5, 32] {
                let ours = check(text, 2, max_depth).map_err(|(kind, _)| kind);
                assert_eq!(ours, reference(text, 2, max_depth), "{text} at max depth {max_depth}");
            }
        }
    }

    #[test]
    fn names_the_problem() {
        assert_eq!(check(r#"{"a":1,"a":2}"#, 2, 32).unwrap_err().1, r#"duplicate key "a""#);
        assert_eq!(check("[[1]]", 2, 2).unwrap_err().1, "nested deeper than 2 levels");
        assert!(check(r#"["x\ud800"]"#, 2, 32).unwrap_err().1.contains("surrogate"));
        // A number beyond a double is valid here, as in the grammar.
        assert_eq!(check(r#"{"n":[900719E9254741982]}"#, 2, 32), Ok(()));
    }
}
