//! The answer handling of calls to the service on any bytes: `parse_games` (the `getGames`
//! answer) and `FetchSettings::event_text` (the event inside a `getEvent` answer).
//!
//! Both are crate-private in the library and reachable only over HTTPS, so this target compiles
//! the library's own source files (not copies) into a module tree of the same shape
//! (`crate::client::games`, `crate::callback::json`, `crate::error`, ...). Should those files
//! start using another module of the library, add it below.
//!
//! Input: the first byte chooses strict or lenient games and the fetch settings' event key; the
//! rest is the answer (UTF-8, as the client reads it). Properties:
//! - no panic;
//! - accepted games agree with serde_json's own reading of the answer (count, ids, every string
//!   field), their strings hold no NUL (they reach C as C strings), raw elements and extra fields
//!   are JSON; strict acceptance implies the same games under lenient; a refusal names a field
//!   under `getGames`;
//! - the extracted event is exactly the text of the key's value in the answer (the trimmed answer
//!   when the key is empty), and is JSON.
#![no_main]
#![allow(dead_code, unused_imports)]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

#[path = "../../src/error.rs"]
pub mod error;
#[path = "../../src/client/fetch.rs"]
pub mod fetch;
#[path = "../../src/client/games.rs"]
pub mod games;
#[path = "../../src/callback/json.rs"]
pub mod json;
#[path = "../../src/callback/spec.rs"]
pub mod spec;
#[path = "../../src/callback/valid_text.rs"]
pub mod valid_text;
#[path = "../../src/callback/words.rs"]
pub mod words;

/// The paths the files use among themselves (`crate::callback::json`, ...).
mod callback {
    pub use super::{json, spec, valid_text, words};
}
mod client {
    pub use super::{fetch, games};
    // error.rs names it; its file needs rustls, so the library's own type stands in.
    pub use slotpartner::client::TlsProblem;
}

use client::fetch::FetchSettings;
use client::games::{Game, parse_games};

const SPEC_FIELDS: [&str; 13] = [
    "gameId",
    "name",
    "rules",
    "gameType",
    "minPlayers",
    "maxPlayers",
    "supportsTournament",
    "categories",
    "imageSquare",
    "imageBackground",
    "imageLogo",
    "descriptionShort",
    "descriptionLong",
];

fn check_games(answer: &str, lenient: bool) {
    let games = match parse_games(answer, lenient) {
        Ok(games) => games,
        Err(error) => {
            assert_eq!(error.kind, error::ErrorKind::BadResponse);
            assert!(error.field.starts_with("getGames"), "{error}");
            assert!(!error.message.is_empty());
            return;
        }
    };
    if !lenient {
        assert_eq!(parse_games(answer, true).expect("strict accepted, lenient refused"), games);
    }
    // serde_json's own `Value`, as `parse_games` reads the answer: with `raw_value`, an object
    // whose first key is `$serde_json::private::RawValue` is read as the JSON in its string.
    let top: Value = serde_json::from_str(answer).expect("accepted, so JSON");
    let list = top["games"].as_array().expect("an array of games");
    assert_eq!(list.len(), games.len());
    for (game, reference) in games.iter().zip(list) {
        check_game(game, reference.as_object().expect("an object"), lenient);
    }
}

fn check_game(game: &Game, reference: &serde_json::Map<String, Value>, lenient: bool) {
    let strings = [
        ("name", &game.name),
        ("gameType", &game.game_type),
        ("imageSquare", &game.image_square),
        ("imageBackground", &game.image_background),
        ("imageLogo", &game.image_logo),
        ("descriptionShort", &game.description_short),
        ("descriptionLong", &game.description_long),
    ];
    for (name, value) in strings {
        assert!(!value.contains('\0'), "{name} holds NUL");
        match reference.get(name) {
            Some(v) => assert_eq!(v.as_str(), Some(value.as_str()), "{name}"),
            None => assert!(lenient && value.is_empty(), "{name} absent"),
        }
    }
    let integers = [("gameId", game.game_id), ("minPlayers", game.min_players), ("maxPlayers", game.max_players)];
    for (name, value) in integers {
        match reference.get(name) {
            Some(v) => assert_eq!(v.as_i64(), Some(value), "{name}"),
            None => assert!(lenient && value == 0, "{name} absent"),
        }
    }
    match reference.get("supportsTournament") {
        Some(v) => assert_eq!(v.as_bool(), Some(game.supports_tournament)),
        None => assert!(lenient && !game.supports_tournament),
    }
    let raw_elements = |items: &[String]| {
        for item in items {
            serde_json::from_str::<Value>(item).expect("an element is JSON");
        }
    };
    raw_elements(&game.rules);
    match reference.get("rules") {
        Some(Value::Array(items)) => assert_eq!(items.len(), game.rules.len()),
        Some(other) => panic!("rules accepted as {other}"),
        None => assert!(game.rules.is_empty()),
    }
    match (&game.categories, reference.get("categories")) {
        (Some(items), Some(Value::Array(reference))) => {
            raw_elements(items);
            assert_eq!(items.len(), reference.len());
        }
        (None, Some(Value::Null) | None) => {}
        (got, reference) => panic!("categories {got:?} from {reference:?}"),
    }
    let extra: Vec<&String> = reference.keys().filter(|k| !SPEC_FIELDS.contains(&k.as_str())).collect();
    assert_eq!(extra.len(), game.extra.len());
    for (name, raw) in &game.extra {
        assert!(!name.contains('\0'), "an extra field's name holds NUL");
        serde_json::from_str::<serde::de::IgnoredAny>(raw).expect("an extra field is JSON");
        // Compared as text: a float read back may differ in its last bit without `float_roundtrip`.
        assert_eq!(raw, &reference[name.as_str()].to_string(), "{name}");
    }
}

fn check_event_text(answer: &str, key: &str) {
    let settings = FetchSettings { event_key: key.to_owned(), ..FetchSettings::default() };
    let Ok(text) = settings.event_text(answer) else { return };
    if key.is_empty() {
        assert_eq!(text, answer.trim());
        return;
    }
    // A slice of the answer, exactly the value's text.
    let start = (text.as_ptr() as usize).checked_sub(answer.as_ptr() as usize).expect("inside the answer");
    assert!(start + text.len() <= answer.len(), "inside the answer");
    let fields = slotpartner_fuzz::entries(answer.trim()).expect("accepted, so an object");
    let values: Vec<&str> = fields.iter().filter(|(k, _)| k == key).map(|(_, v)| v.get()).collect();
    assert!(values.contains(&text), "{text:?} is not the value of {key:?}");
    serde_json::from_str::<serde::de::IgnoredAny>(text).expect("the event is JSON");
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else { return };
    let Ok(answer) = std::str::from_utf8(rest) else { return };
    check_games(answer, flags & 1 == 1);
    let key = ["event", "", "games", "data"][usize::from(flags >> 1 & 3)];
    check_event_text(answer, key);
});
