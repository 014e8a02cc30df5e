//! JSONTestSuite (`test_parsing`) through both entry points, in this process: the safe core
//! (`slotpartner::parse`) and the C ABI (`sp_receiver_parse`). Nothing may crash, `n_` files must be
//! refused, `y_` files may be refused only for the library's own rules (an object without an
//! `event` field, duplicate keys), never as invalid JSON or UTF-8. The corpus is read in place.

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::Path;
use std::ptr;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use slotpartner::ffi::error::{sp_last_error_message, sp_last_error_response};
use slotpartner::ffi::event::{sp_event, sp_event_free};
use slotpartner::ffi::receiver::{
    sp_receiver, sp_receiver_config_add_token, sp_receiver_config_free, sp_receiver_config_new,
    sp_receiver_config_set_max_body_bytes, sp_receiver_free, sp_receiver_new, sp_receiver_parse,
};
use slotpartner::ffi::status::sp_status;
use slotpartner::ffi::str::sp_str;
use slotpartner::{ErrorKind, ParseOptions, parse};

/// How a `y_` file's top level looks, read independently of the library.
#[derive(Debug, PartialEq)]
enum Shape {
    Object { duplicate_keys: bool },
    NotAnObject,
}

/// Reads a valid JSON text's shape; `None` when serde_json itself refuses it.
fn shape(bytes: &[u8]) -> Option<Shape> {
    let duplicates = Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    DupSeed(&duplicates).deserialize(&mut de).ok()?;
    de.end().ok()?;
    let object = serde_json::from_slice::<Value>(bytes).ok()?.is_object();
    Some(if object { Shape::Object { duplicate_keys: duplicates.get() } } else { Shape::NotAnObject })
}

/// Walks a value and records whether any object in it repeats a key.
#[derive(Clone, Copy)]
struct DupSeed<'a>(&'a Cell<bool>);

impl<'de> DeserializeSeed<'de> for DupSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DupSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key) {
                self.0.set(true);
            }
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// A C-ABI receiver with default settings and, when given, a larger body limit.
fn c_receiver(max_body_bytes: Option<usize>) -> *mut sp_receiver {
    let (mut config, mut receiver) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers throughout; the configuration is freed once the receiver exists.
    unsafe {
        assert_eq!(sp_receiver_config_new(&mut config), sp_status::SP_OK);
        let token = c"6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";
        assert_eq!(sp_receiver_config_add_token(config, token.as_ptr()), sp_status::SP_OK);
        if let Some(bytes) = max_body_bytes {
            assert_eq!(sp_receiver_config_set_max_body_bytes(config, bytes), sp_status::SP_OK);
        }
        assert_eq!(sp_receiver_new(config, &mut receiver), sp_status::SP_OK);
        sp_receiver_config_free(config);
    }
    receiver
}

/// `sp_receiver_parse` on `bytes`. On failure checks that the out-param kept its sentinel, that
/// the last error has a message, and that the answer is JSON that does not claim success.
fn c_parse(receiver: *const sp_receiver, bytes: &[u8], problems: &mut Vec<String>, name: &str) -> sp_status {
    let sentinel = ptr::dangling_mut::<sp_event>();
    let mut out = sentinel;
    // SAFETY: a live receiver; `bytes` is readable for its length; `out` is writable.
    let status = unsafe { sp_receiver_parse(receiver, bytes.as_ptr(), bytes.len(), &mut out) };
    if status == sp_status::SP_OK {
        if out.is_null() || out == sentinel {
            problems.push(format!("{name}: SP_OK without an event"));
        } else {
            // SAFETY: a live event handed out just now, freed once.
            unsafe { sp_event_free(out) };
        }
        return status;
    }
    if out != sentinel {
        problems.push(format!("{name}: out-param written on failure {status:?}"));
    }
    if sp_last_error_message().len == 0 {
        problems.push(format!("{name}: {status:?} with an empty sp_last_error_message"));
    }
    let (mut http, mut body) = (0_u16, sp_str::NONE);
    // SAFETY: writable out-params.
    if unsafe { sp_last_error_response(&mut http, &mut body) } != sp_status::SP_OK || body.ptr.is_null() {
        problems.push(format!("{name}: {status:?} without an error response"));
        return status;
    }
    // SAFETY: the library's view: `len` bytes at `ptr`, valid until the next status call.
    let answer = unsafe { std::slice::from_raw_parts(body.ptr.cast::<u8>(), body.len) };
    if serde_json::from_slice::<Value>(answer).is_err() || answer.windows(14).any(|w| w == br#""success":true"#) {
        problems.push(format!("{name}: answer {}", String::from_utf8_lossy(answer)));
    }
    status
}

#[test]
fn jsontestsuite_parsing_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora/jsontestsuite/test_parsing");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("JSONTestSuite corpus not found at {}; skipping", dir.display());
        return;
    };
    let mut files: Vec<_> =
        entries.map(|e| e.unwrap().path()).filter(|p| p.extension() == Some("json".as_ref())).collect();
    files.sort();
    assert!(files.len() > 300, "only {} corpus files in {}", files.len(), dir.display());

    let options = ParseOptions::default();
    let big_options = ParseOptions { max_body_bytes: 1 << 20, ..ParseOptions::default() };
    let (receiver, big_receiver) = (c_receiver(None), c_receiver(Some(big_options.max_body_bytes)));
    let mut problems = Vec::new();
    // prefix -> outcome ("accepted" or the error kind) -> files
    let mut counts = BTreeMap::<String, BTreeMap<String, usize>>::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(path).unwrap();
        let rust = parse(&bytes, &options).map(|_| ()).map_err(|e| e.kind);
        let c = c_parse(receiver, &bytes, &mut problems, &name);
        if rust.map_or_else(sp_status::from, |()| sp_status::SP_OK) != c {
            problems.push(format!("{name}: core gives {rust:?}, C ABI gives {c:?}"));
        }
        // Files over the default limit also go through the parser itself.
        let big = (bytes.len() > options.max_body_bytes).then(|| {
            c_parse(big_receiver, &bytes, &mut problems, &name);
            parse(&bytes, &big_options).map(|_| ()).map_err(|e| e.kind)
        });
        let prefix = &name[..1];
        match prefix {
            "n" if rust.is_ok() || big.is_some_and(|b| b.is_ok()) => {
                problems.push(format!("{name}: invalid JSON accepted"));
            }
            "y" => match shape(&bytes) {
                None => println!("{name}: serde_json refuses it too; shape unknown"),
                Some(Shape::NotAnObject) if rust != Err(ErrorKind::NotAnObject) => {
                    problems.push(format!("{name}: top level is not an object, got {rust:?}"));
                }
                Some(Shape::Object { duplicate_keys: true }) if rust != Err(ErrorKind::DuplicateKey) => {
                    problems.push(format!("{name}: duplicate keys, got {rust:?}"));
                }
                Some(Shape::Object { duplicate_keys: false })
                    if matches!(rust, Err(ErrorKind::InvalidJson | ErrorKind::InvalidUtf8)) =>
                {
                    problems.push(format!("{name}: valid JSON object refused as {rust:?}"));
                }
                Some(_) => {}
            },
            _ => {}
        }
        let outcome = rust.map_or_else(|kind| format!("{kind:?}"), |()| "accepted".to_owned());
        *counts.entry(format!("{prefix}_")).or_default().entry(outcome).or_default() += 1;
    }
    // SAFETY: live receivers, freed once.
    unsafe {
        sp_receiver_free(receiver);
        sp_receiver_free(big_receiver);
    }
    println!("JSONTestSuite: {} files, {} problems", files.len(), problems.len());
    for (prefix, outcomes) in &counts {
        let total: usize = outcomes.values().sum();
        let detail: Vec<String> = outcomes.iter().map(|(outcome, n)| format!("{outcome} {n}")).collect();
        println!("  {prefix}*: {total} files: {}", detail.join(", "));
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}
