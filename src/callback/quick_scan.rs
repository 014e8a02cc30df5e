//! The usual callback body read in one hand-written pass over its bytes, checking the JSON
//! grammar and the library's own rules (nesting depth, no duplicate keys, no control characters
//! in keys, no lone surrogate escapes) as it goes, with no second look at any value.
//!
//! It only ever accepts: whatever is unusual or wrong (an escaped key, a container or a number
//! other than a plain unsigned integer in a field the spec defines, a repeated key, a rule
//! broken, a grammar error) makes it decline, and the body is then read by `scan::scan`, the
//! serde_json reading that stays the reference and words every refusal. So a body is refused,
//! and its refusal worded, exactly as before; a body this pass accepts gives the same `Scanned`
//! as `scan::scan` (checked on every accepted body in builds with debug assertions: the test
//! suites and the fuzz targets), with every kept value checked as `json::check_value` would.
//!
//! Why by hand: serde_json reads a top-level object into slots and raw values, and the rules
//! above then need a second walk over every kept value; one pass that does both costs about a
//! third of that (docs/benchmarks.md). serde_json still decodes every escaped string.

use std::borrow::Cow;
use std::cell::Cell;

use crate::callback::json::{self, Field, RawJson};
use crate::callback::scan::{Scalar, Scanned};
use crate::callback::spec::Name;
use crate::callback::words;

/// Reads the top-level object of `text` (from `json::object_text`) into `scanned` (which starts
/// empty) and gives true, or gives false (`scanned` then holds a part of the body) when the body
/// needs the full reading. `max_depth` is the configured depth, capped as everywhere.
pub fn scan<'a>(text: &'a str, max_depth: usize, scanned: &mut Scanned<'a>) -> bool {
    scan_object(text, max_depth.min(json::MAX_DEPTH_CEILING), scanned).is_some()
}

fn scan_object<'a>(text: &'a str, max_depth: usize, scanned: &mut Scanned<'a>) -> Option<()> {
    let b = text.as_bytes();
    let mut at = skip_ws(b, expect(b, skip_ws(b, 0), b'{')?);
    if b.get(at) == Some(&b'}') {
        return (skip_ws(b, at + 1) == b.len()).then_some(());
    }
    // Made at the first container met: most bodies have none.
    let mut checker = None;
    // Room for the usual number of fields the spec does not define, so that none is moved.
    if scanned.others.capacity() == 0 {
        scanned.others = Vec::with_capacity(8);
    }
    let mut order = KeyOrder::load();
    let mut previous = KeyOrder::START;
    loop {
        let (name, key, after_key) = match order.predicted_at(b, at, previous) {
            Some(name) => (Some(name), name.as_str(), at + name.as_str().len() + 2),
            None => {
                let (key, after_key) = plain_key(text, at)?;
                (Name::of(key), key, after_key)
            }
        };
        at = skip_ws(b, expect(b, after_key, b':')?);
        match name {
            Some(name) => {
                order.follows(previous, name);
                previous = name as usize;
                let slot = &mut scanned.slots[name as usize];
                if slot.is_some() {
                    return None;
                }
                let (value, end) = slot_value(text, at)?;
                *slot = Some(value);
                scanned.present |= name.bit();
                at = end;
            }
            None => {
                // Repeats are looked for pairwise, so a body with many such fields (unusual)
                // goes to the serde scan, which sorts them.
                let repeated = scanned.others.len() >= MAX_PAIRWISE || scanned.others.iter().any(|f| f.name == key);
                if repeated || json::key_problem(key).is_some() {
                    return None;
                }
                let end = match b.get(at) {
                    Some(b'{' | b'[') => checker.get_or_insert_with(Checker::default).value(text, at, max_depth)?,
                    _ => scalar_end(b, at)?,
                };
                scanned.others.push(Field { name: Cow::Borrowed(key), raw: RawJson::checked(&text[at..end]) });
                at = end;
            }
        }
        at = skip_ws(b, at);
        match b.get(at)? {
            b',' => at = skip_ws(b, at + 1),
            b'}' => {
                order.keep();
                return (skip_ws(b, at + 1) == b.len()).then_some(());
            }
            _ => return None,
        }
    }
}

/// The order in which this thread last met the names the spec defines: for each name (and for
/// the body's start), the name that came next. The next key is first compared with the one
/// predicted, its spelling between quotes, which, when it matches, is what `plain_key` and
/// `Name::of` would have found: the service sends its fields in the same order every time, and
/// a key found so is not looked at twice. Fields the spec does not define are not in the order
/// (after one, the name before it predicts). A guess only ever saves work: a wrong or missing
/// one costs one comparison, and the key is then read as always.
#[derive(Clone, Copy)]
struct KeyOrder {
    next: [u8; Name::COUNT + 1],
    changed: bool,
}

thread_local! {
    static KEY_ORDER: Cell<[u8; Name::COUNT + 1]> = const { Cell::new([u8::MAX; Name::COUNT + 1]) };
}

impl KeyOrder {
    /// The body's start, before any name.
    const START: usize = Name::COUNT;

    /// This thread's order (none on a thread whose locals are gone).
    fn load() -> KeyOrder {
        KeyOrder { next: KEY_ORDER.try_with(Cell::get).unwrap_or([u8::MAX; Name::COUNT + 1]), changed: false }
    }

    /// The name that came after `previous` last time, when its quoted spelling stands at `at`.
    fn predicted_at(&self, b: &[u8], at: usize, previous: usize) -> Option<Name> {
        let name = *Name::ALL.get(usize::from(self.next[previous]))?;
        let spelling = name.as_str().as_bytes();
        let quoted = b.get(at..at + spelling.len() + 2)?;
        (quoted[0] == b'"' && &quoted[1..=spelling.len()] == spelling && quoted[spelling.len() + 1] == b'"')
            .then_some(name)
    }

    /// Notes that `name` came after `previous`.
    fn follows(&mut self, previous: usize, name: Name) {
        if self.next[previous] != name as u8 {
            self.next[previous] = name as u8;
            self.changed = true;
        }
    }

    /// Keeps the order met in this body for the next on this thread.
    fn keep(self) {
        if self.changed {
            let _ = KEY_ORDER.try_with(|order| order.set(self.next));
        }
    }
}

/// The most top-level fields the spec does not define that this pass reads in one body.
const MAX_PAIRWISE: usize = 32;

/// The value of a field the spec defines: a string, a plain unsigned integer, a boolean or null,
/// and the index just past it. Anything else declines.
fn slot_value(text: &str, at: usize) -> Option<(Scalar<'_>, usize)> {
    let b = text.as_bytes();
    match *b.get(at)? {
        b'"' => {
            let (close, escaped) = string_end(b, at)?;
            let value =
                if escaped { Cow::Owned(decoded(&text[at..=close])?) } else { Cow::Borrowed(&text[at + 1..close]) };
            Some((Scalar::Str(value), close + 1))
        }
        b'0'..=b'9' => unsigned(b, at),
        b't' => Some((Scalar::Bool(true), literal_end(b, at, b"true")?)),
        b'f' => Some((Scalar::Bool(false), literal_end(b, at, b"false")?)),
        b'n' => Some((Scalar::Null, literal_end(b, at, b"null")?)),
        _ => None,
    }
}

/// A string literal with escapes, decoded by serde_json (out of the usual path's way).
#[cold]
#[inline(never)]
fn decoded(literal: &str) -> Option<String> {
    serde_json::from_str(literal).ok()
}

/// The plain unsigned integer at `at` (digits, no leading zero, within `u64`, no fraction or
/// exponent) and the index just past it.
fn unsigned(b: &[u8], at: usize) -> Option<(Scalar<'static>, usize)> {
    let mut value: u64 = 0;
    let mut end = at;
    while let Some(&digit @ b'0'..=b'9') = b.get(end) {
        value = value.checked_mul(10)?.checked_add(u64::from(digit - b'0'))?;
        end += 1;
    }
    let leading_zero = b[at] == b'0' && end > at + 1;
    match b.get(end) {
        Some(b'.' | b'e' | b'E') => None,
        _ if leading_zero => None,
        _ => Some((Scalar::Unsigned(value), end)),
    }
}

/// A top-level key without escapes at `at` (its opening quote), and the index just past it.
fn plain_key(text: &str, at: usize) -> Option<(&str, usize)> {
    if text.as_bytes().get(at) != Some(&b'"') {
        return None;
    }
    match string_end(text.as_bytes(), at)? {
        (close, false) => Some((&text[at + 1..close], close + 1)),
        (_, true) => None,
    }
}

/// How deep a kept value may nest, and how many keys its open objects may hold at once, for
/// this pass (no allocation: fixed stacks); a deeper or wider value goes to the serde scan.
const MAX_OPEN: usize = 16;
const MAX_KEYS: usize = 32;

/// What an open container is on `Checker::open`: an array, or an object whose keys start at
/// this position of `Checker::keys`.
const ARRAY: u8 = u8::MAX;

/// Checks values kept raw, with fixed stacks reused from one value to the next.
struct Checker<'a> {
    /// The keys of every open object, `key_count` of them, each object's a tail from where it
    /// starts.
    keys: [&'a str; MAX_KEYS],
    key_count: usize,
    /// The open containers, from the outermost.
    open: [u8; MAX_OPEN],
}

impl Default for Checker<'_> {
    fn default() -> Self {
        Checker { keys: [""; MAX_KEYS], key_count: 0, open: [0; MAX_OPEN] }
    }
}

impl<'a> Checker<'a> {
    /// The index just past the value at `at`, a top-level field's value (nesting level 2),
    /// checked against the grammar and the rules; `None` declines.
    fn value(&mut self, text: &'a str, mut at: usize, max_depth: usize) -> Option<usize> {
        const LEVEL: usize = 2;
        let b = text.as_bytes();
        self.key_count = 0;
        let mut depth = 0;
        'value: loop {
            let mut end = match *b.get(at)? {
                open @ (b'{' | b'[') => {
                    if LEVEL + depth > max_depth || depth == MAX_OPEN {
                        return None;
                    }
                    at = skip_ws(b, at + 1);
                    let object = open == b'{';
                    // At most MAX_KEYS, which is below ARRAY.
                    self.open[depth] = if object { self.key_count as u8 } else { ARRAY };
                    match (b.get(at)?, object) {
                        (b'}', true) | (b']', false) => at + 1,
                        (_, true) => {
                            depth += 1;
                            at = self.key(text, at, self.key_count as u8)?;
                            continue 'value;
                        }
                        (_, false) => {
                            depth += 1;
                            continue 'value;
                        }
                    }
                }
                _ => scalar_end(b, at)?,
            };
            // After a value: the next element or key, or the close of its container(s).
            while depth > 0 {
                let first_key = self.open[depth - 1];
                at = skip_ws(b, end);
                match (*b.get(at)?, first_key == ARRAY) {
                    (b',', true) => {
                        at = skip_ws(b, at + 1);
                        continue 'value;
                    }
                    (b',', false) => {
                        at = self.key(text, skip_ws(b, at + 1), first_key)?;
                        continue 'value;
                    }
                    (b']', true) => {}
                    (b'}', false) => self.key_count = usize::from(first_key),
                    _ => return None,
                }
                depth -= 1;
                end = at + 1;
            }
            return Some(end);
        }
    }

    /// Reads a key at `at` of the innermost open object, whose keys start at `first`, and its
    /// colon, declining a key the object holds already; gives where its value starts.
    fn key(&mut self, text: &'a str, at: usize, first: u8) -> Option<usize> {
        let (key, after) = plain_key(text, at)?;
        let object_keys = &self.keys[usize::from(first)..self.key_count];
        if self.key_count == MAX_KEYS || object_keys.contains(&key) || json::key_problem(key).is_some() {
            return None;
        }
        self.keys[self.key_count] = key;
        self.key_count += 1;
        Some(skip_ws(text.as_bytes(), expect(text.as_bytes(), skip_ws(text.as_bytes(), after), b':')?))
    }
}

/// The index past the string, number, `true`, `false` or `null` at `at`.
#[inline(always)]
fn scalar_end(b: &[u8], at: usize) -> Option<usize> {
    match *b.get(at)? {
        b'"' => Some(string_end(b, at)?.0 + 1),
        b'-' | b'0'..=b'9' => number_end(b, at),
        b't' => literal_end(b, at, b"true"),
        b'f' => literal_end(b, at, b"false"),
        b'n' => literal_end(b, at, b"null"),
        _ => None,
    }
}

/// JSON's four whitespace bytes.
fn skip_ws(b: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(at) {
        at += 1;
    }
    at
}

/// The index past `byte`, which must stand at `at`.
fn expect(b: &[u8], at: usize, byte: u8) -> Option<usize> {
    (b.get(at) == Some(&byte)).then_some(at + 1)
}

/// The index past `word` (`true`, `false`, `null`) at `at`.
fn literal_end(b: &[u8], at: usize, word: &[u8]) -> Option<usize> {
    b[at..].starts_with(word).then_some(at + word.len())
}

/// The index past the number at `at`: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
fn number_end(b: &[u8], mut at: usize) -> Option<usize> {
    let digits = |at: usize| at + b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
    if b.get(at) == Some(&b'-') {
        at += 1;
    }
    at = match b.get(at)? {
        b'0' => at + 1,
        b'1'..=b'9' => digits(at + 1),
        _ => return None,
    };
    if b.get(at) == Some(&b'.') {
        let end = digits(at + 1);
        at = if end > at + 1 { end } else { return None };
    }
    if let Some(b'e' | b'E') = b.get(at) {
        at += 1;
        if let Some(b'+' | b'-') = b.get(at) {
            at += 1;
        }
        let end = digits(at);
        at = if end > at { end } else { return None };
    }
    Some(at)
}

/// The index of the quote closing the string that opens at `at`, and whether it holds an
/// escape. Declines a raw control character, an unknown escape and a lone surrogate escape.
fn string_end(b: &[u8], at: usize) -> Option<(usize, bool)> {
    let mut at = at + 1;
    let mut escaped = false;
    loop {
        at = next_special(b, at);
        match *b.get(at)? {
            b'"' => return Some((at, escaped)),
            b'\\' => {
                escaped = true;
                at = escape_end(b, at)?;
            }
            _ => return None,
        }
    }
}

/// The index of the first quote, backslash or control character (below 0x20) from `at`, or
/// the end of `b`. Eight bytes at a time (`words`: the lowest flag is the first match).
fn next_special(b: &[u8], mut at: usize) -> usize {
    while let Some(chunk) = b.get(at..at + 8) {
        let word = words::word(chunk);
        let flags = words::below(word, 0x20) | words::equal(word, b'"') | words::equal(word, b'\\');
        if flags != 0 {
            return at + (flags.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    // `at` is at most the length: it moves past a quote or a whole escape, both within `b`.
    at + b[at..].iter().position(|&c| c < 0x20 || c == b'"' || c == b'\\').unwrap_or(b.len() - at)
}

/// The index past the escape at `at` (its backslash); a leading surrogate `\uD800`-`\uDBFF`
/// must be followed by a trailing one `\uDC00`-`\uDFFF`, which it takes in.
fn escape_end(b: &[u8], at: usize) -> Option<usize> {
    match *b.get(at + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(at + 2),
        b'u' => match hex4(b, at + 2)? {
            0xD800..=0xDBFF if b.get(at + 6) == Some(&b'\\') && b.get(at + 7) == Some(&b'u') => {
                (0xDC00..=0xDFFF).contains(&hex4(b, at + 8)?).then_some(at + 12)
            }
            0xD800..=0xDFFF => None,
            _ => Some(at + 6),
        },
        _ => None,
    }
}

/// The four hex digits at `at` as a number.
fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let digits = b.get(at..at + 4)?;
    digits.iter().try_fold(0, |n, &d| Some(n << 4 | char::from(d).to_digit(16)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callback::scan;

    /// The quick pass and the serde reading on `text`: the quick pass accepted it and both read
    /// it alike, or it declined.
    fn agrees(text: &str, max_depth: usize) -> bool {
        let mut quick = Scanned::default();
        let accepted = scan(text, max_depth, &mut quick);
        if accepted {
            let mut full = Scanned::default();
            scan::scan(text, max_depth, &mut full).expect("the serde reading accepts what the quick pass accepts");
            assert_eq!(quick, full, "{text}");
            for field in &quick.others {
                json::check_value(field.raw, "e", &field.name, max_depth).expect("kept values pass check_value");
            }
        }
        accepted
    }

    #[test]
    fn reads_the_usual_bodies() {
        for name in ["refund.json", "payout.json", "balance.json", "other_event.json", "payout_minimal.json"] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
            let text = std::fs::read_to_string(path).unwrap();
            assert!(agrees(&text, 32), "{name} is read by the quick pass");
        }
        assert!(agrees(r#" { } "#, 32));
        assert!(agrees(r#"{"a":[1,-2.5e+3,"x\ud83d\ude00",{"b":null,"c":[true,false,{}]}],"event":"x"}"#, 32));
        assert!(agrees(r#"{"event":"e\u00e9\n","gameId":18446744073709551615,"isMobile":null}"#, 32));
    }

    #[test]
    fn declines_what_it_does_not_read_or_what_is_wrong() {
        let declined = [
            r#"{"a":1,}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":[1 2]}"#,
            r#"{"a":{"b":1,}}"#,
            r#"{"a":{"b" 1}}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":1e}"#,
            r#"{"a":-}"#,
            r#"{"a":tru}"#,
            r#"{"a":"\x"}"#,
            "{\"a\":\"tab\there\"}",
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\udc00"}"#,
            r#"{"a":"\ud800\u0041"}"#,
            r#"{"a":{"k":1,"k":2}}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"event":"x","event":"y"}"#,
            r#"{"a\u0062":1}"#,
            "{\"k\u{7f}\":1}",
            r#"{"a":{"k\u0001":1}}"#,
            r#"{"gameId":-1}"#,
            r#"{"gameId":1.5}"#,
            r#"{"gameId":18446744073709551616}"#,
            r#"{"gameId":[1]}"#,
            r#"{"a":1} x"#,
            r#"{"a":1"#,
            r#"{"a":[[[[1]]]]}"#,
        ];
        for text in declined {
            assert!(!agrees(text, 4), "declined: {text}");
        }
        assert!(agrees(r#"{"a":[[[1]]]}"#, 4), "depth 4 is within 4");
        // Nesting and open keys beyond the fixed stacks: the serde scan reads them.
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(MAX_OPEN), "]".repeat(MAX_OPEN));
        assert!(agrees(&deep, 32) && !agrees(&deep.replacen('[', "[[", 1).replacen(']', "]]", 1), 32));
        let wide = |n: usize| {
            format!(
                "{{\"a\":{{{}}}}}",
                (0..n).map(|i| format!("\"k{i}\":[{{\"x\":1,\"y\":{{}}}}]")).collect::<Vec<_>>().join(",")
            )
        };
        // At its deepest the last key's object holds two more keys open: n + 2 in all.
        assert!(agrees(&wide(MAX_KEYS - 2), 32) && !agrees(&wide(MAX_KEYS - 1), 32));
        assert!(agrees(r#"{"a":{"k":{"k":1},"j":[{"k":2,"j":3}],"l":{}},"b":{"k":1}}"#, 32));
        // Many fields the spec does not define: the serde scan reads them.
        let many = |n: usize| format!("{{{}}}", (0..n).map(|i| format!("\"f{i}\":{i}")).collect::<Vec<_>>().join(","));
        assert!(agrees(&many(MAX_PAIRWISE), 32));
        assert!(!agrees(&many(MAX_PAIRWISE + 1), 32));
    }

    /// What the quick pass reads of `text` on a thread that has learned no key order.
    fn read_without_order(text: &str) -> Option<Scanned<'static>> {
        let text = text.to_owned();
        std::thread::spawn(move || {
            let mut scanned = Scanned::default();
            let text: &'static str = Box::leak(text.into_boxed_str());
            scan(text, 32, &mut scanned).then_some(scanned)
        })
        .join()
        .unwrap()
    }

    #[test]
    fn a_learned_key_order_never_changes_what_is_read() {
        let fixture = |name: &str| {
            std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name))
                .unwrap()
        };
        let (refund, payout) = (fixture("refund.json"), fixture("payout.json"));
        let mut bodies = vec![
            // The predicted spelling as the start of a longer key, of a key with an escape, of
            // the end of the body; the predicted key twice; keys in another order.
            r#"{"event":"gameSessionBuyRefund","gameSessionIdentifierX":"a","gameSessionIdentifier":"b"}"#.to_owned(),
            r#"{"event":"gameSessionBuyRefund","gameSession\u0049dentifier":"a"}"#.to_owned(),
            r#"{"event":"gameSessionBuyRefund","gameSession"#.to_owned(),
            r#"{"event":"gameSessionBuyRefund","gameSessionIdentifier""#.to_owned(),
            r#"{"event":"gameSessionBuyRefund","gameSessionIdentifier":"a","gameSessionIdentifier":"b"}"#.to_owned(),
            r#"{"event":"x","event":"y"}"#.to_owned(),
            r#"{"gameId":12,"event":"gameSessionBuyRefund","isMobile":true,"index":3}"#.to_owned(),
            r#"{"event" : "gameSessionBuyRefund" ,"index":1, "gameSessionIdentifier" :"g"}"#.to_owned(),
            r#"{"event":"gameSessionBuyRefund","gameSessionIdentifier":"a\"","playerIdentifier":"p"}"#.to_owned(),
            payout.clone(),
        ];
        // Each key of the refund left out in turn, and each pair of neighbours swapped.
        let keys: Vec<&str> = refund.lines().filter(|l| l.trim_start().starts_with('"')).collect();
        for i in 0..keys.len() {
            let mut without = keys.clone();
            without.remove(i);
            let mut swapped = keys.clone();
            swapped.swap(i, (i + 1) % keys.len());
            for lines in [without, swapped] {
                let fields: Vec<&str> = lines.iter().map(|l| l.trim().trim_end_matches(',')).collect();
                bodies.push(format!("{{{}}}", fields.join(",")));
            }
        }
        for body in &bodies {
            // This thread learns the refund's order (and the payout's, and each body's own).
            for trained_by in [&refund, &payout, &refund] {
                assert!(scan(trained_by, 32, &mut Scanned::default()));
                let mut learned = Scanned::default();
                let read = scan(body, 32, &mut learned).then_some(learned);
                assert_eq!(read, read_without_order(body), "{body}");
            }
        }
    }
}
