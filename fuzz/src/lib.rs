//! What the fuzz targets share: a reference reading of JSON that does not go through the
//! library (serde_json's grammar, with a duplicate-key walk of its own), and the C-side helpers
//! (C strings from fuzz bytes, `sp_str` views checked as a C host reads them, the last error).

use std::collections::HashSet;
use std::ffi::CString;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer as _, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;
use slotpartner::ffi::error::{sp_last_error_field, sp_last_error_message, sp_last_error_response};
use slotpartner::ffi::status::sp_status;
use slotpartner::ffi::str::sp_str;

/// A JSON text as an independent reader sees it.
#[derive(Debug)]
pub struct Reading<'a> {
    /// The top-level object's fields, raw, in text order (duplicates kept); empty when the top
    /// level is not an object.
    pub fields: Vec<(String, &'a RawValue)>,
    /// The first key any object repeats, if one does.
    pub duplicate: Option<String>,
    /// The whole text as a `serde_json::Value`, or why `Value` refuses it (a number beyond a
    /// double, which the grammar allows, is the one reason the grammar and `Value` differ).
    pub value: Result<Value, String>,
}

/// Reads `bytes` as strict JSON: serde_json's grammar (`RawValue`, which checks syntax, UTF-8
/// and trailing data without computing numbers), every string decoded (a lone surrogate escape
/// is refused), and every object walked for repeated keys. `Err` when the grammar refuses it.
pub fn read_json(bytes: &[u8]) -> Result<Reading<'_>, String> {
    let top: &RawValue = serde_json::from_slice(bytes).map_err(|e| format!("grammar: {e}"))?;
    let mut duplicate = None;
    walk(top, &mut duplicate)?;
    let fields = if top.get().starts_with('{') { entries(top.get())? } else { Vec::new() };
    let value = plain_value(top.get());
    Ok(Reading { fields, duplicate, value })
}

fn walk(raw: &RawValue, duplicate: &mut Option<String>) -> Result<(), String> {
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'{') => {
            let fields = entries(text)?;
            let mut seen = HashSet::new();
            for (key, value) in &fields {
                if !seen.insert(key.as_str()) && duplicate.is_none() {
                    *duplicate = Some(key.clone());
                }
                walk(value, duplicate)?;
            }
        }
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| format!("array: {e}"))?;
            for item in items {
                walk(item, duplicate)?;
            }
        }
        Some(b'"') => {
            serde_json::from_str::<String>(text).map_err(|e| format!("string: {e}"))?;
        }
        _ => {}
    }
    Ok(())
}

/// An object's fields, raw, duplicates kept, keys decoded.
pub fn entries(text: &str) -> Result<Vec<(String, &RawValue)>, String> {
    struct Entries;
    impl<'de> Visitor<'de> for Entries {
        type Value = Vec<(String, &'de RawValue)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                out.push((key, map.next_value()?));
            }
            Ok(out)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(de::Error::custom("not an object"))
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let out = de.deserialize_map(Entries).map_err(|e| format!("object: {e}"))?;
    de.end().map_err(|e| format!("object: {e}"))?;
    Ok(out)
}

/// `text` as a `serde_json::Value`, read without serde_json's own `Value` reader: with the
/// `raw_value` feature (which the library uses) that reader takes an object whose first key is
/// `$serde_json::private::RawValue` as the JSON text in its string value, not as the object it
/// is. This one reads every object as an object.
pub fn plain_value(text: &str) -> Result<Value, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Plain.deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(value)
}

/// `plain_value` on bytes (UTF-8 first).
pub fn plain_value_of(bytes: &[u8]) -> Result<Value, String> {
    plain_value(std::str::from_utf8(bytes).map_err(|e| e.to_string())?)
}

#[derive(Clone, Copy)]
struct Plain;

impl<'de> DeserializeSeed<'de> for Plain {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Plain {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Plain)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Plain)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// Whether `value` holds `"success": true` anywhere.
pub fn claims_success(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(k, v)| (k == "success" && v == &Value::Bool(true)) || claims_success(v)),
        Value::Array(items) => items.iter().any(claims_success),
        _ => false,
    }
}

/// `bytes` as a C string, cut at the first NUL (a C host cannot pass more).
pub fn c_string(bytes: &[u8]) -> CString {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    CString::new(&bytes[..end]).expect("no NUL before end")
}

/// The bytes an `sp_str` views, checked as a C host relies on them: non-NULL, NUL-terminated,
/// no NUL inside, UTF-8.
///
/// # Safety
/// `view` comes from the library and is still valid.
pub unsafe fn view_bytes<'a>(what: &str, view: sp_str) -> &'a [u8] {
    assert!(!view.ptr.is_null(), "{what}: NULL view");
    // SAFETY: the library promises `len` bytes and a NUL after them.
    let with_nul = unsafe { std::slice::from_raw_parts(view.ptr.cast::<u8>(), view.len + 1) };
    let (text, nul) = with_nul.split_at(view.len);
    assert_eq!(nul, [0], "{what}: not NUL-terminated");
    assert!(!text.contains(&0), "{what}: NUL inside {:?}", String::from_utf8_lossy(text));
    assert!(std::str::from_utf8(text).is_ok(), "{what}: not UTF-8");
    text
}

/// An optional `sp_str`: `None` for `{NULL, 0}`.
///
/// # Safety
/// As for `view_bytes`.
pub unsafe fn opt_view<'a>(what: &str, view: sp_str) -> Option<&'a str> {
    if view.ptr.is_null() {
        assert_eq!(view.len, 0, "{what}: NULL with a length");
        return None;
    }
    // SAFETY: forwarded.
    Some(std::str::from_utf8(unsafe { view_bytes(what, view) }).expect("checked"))
}

/// The thread's last error after a failed call, checked to be clear: a message, an HTTP answer
/// whose body is JSON that claims no success. Gives (message, field, http status, body).
pub fn last_error(status: sp_status) -> (String, String, u16, Value) {
    assert_ne!(status, sp_status::SP_OK);
    assert_ne!(status, sp_status::SP_ERR_PANIC, "the library panicked");
    // SAFETY: views of the last error, read before any other call.
    let (message, field) = unsafe {
        (
            String::from_utf8(view_bytes("message", sp_last_error_message()).to_vec()).unwrap(),
            String::from_utf8(view_bytes("field", sp_last_error_field()).to_vec()).unwrap(),
        )
    };
    assert!(!message.is_empty(), "{status:?} with an empty message");
    let (mut http, mut body) = (0u16, sp_str::NONE);
    // SAFETY: writable out-params.
    let got = unsafe { sp_last_error_response(&mut http, &mut body) };
    assert_eq!(got, sp_status::SP_OK, "{status:?} without an answer");
    assert!(http == 200 || (400..=599).contains(&http), "{status:?}: HTTP {http}");
    // SAFETY: valid until the next status call.
    let body = unsafe { view_bytes("response body", body) };
    let value = plain_value_of(body)
        .unwrap_or_else(|e| panic!("{status:?}: answer is not JSON ({e}): {}", String::from_utf8_lossy(body)));
    assert!(!claims_success(&value), "{status:?}: a refusal claims success: {value}");
    assert!(!body.windows(14).any(|w| w == br#""success":true"#), "{status:?}: {value}");
    (message, field, http, value)
}
