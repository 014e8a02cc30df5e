//! Games as `getGames` returns them (spec 2.1), parsed from the response body `{"games":[...]}`.

use serde_json::{Map, Value};

use crate::callback::json::excerpt;
use crate::error::{Error, ErrorKind, Result};

/// One game with every field of spec 2.1. Element types of `rules` and `categories` are not
/// shown by the spec: each element is kept as raw JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Game {
    pub game_id: i64,
    pub name: String,
    /// Raw JSON of each element; may be empty.
    pub rules: Vec<String>,
    /// `SlotMachine` for a slot game.
    pub game_type: String,
    pub min_players: i64,
    pub max_players: i64,
    pub supports_tournament: bool,
    /// Raw JSON of each element; `None` when the service sends `null`.
    pub categories: Option<Vec<String>>,
    pub image_square: String,
    pub image_background: String,
    pub image_logo: String,
    /// Plain text in the requested locale.
    pub description_short: String,
    /// HTML in the requested locale.
    pub description_long: String,
    /// Fields the spec does not define: name and raw JSON, in the order the service sent them.
    pub extra: Vec<(String, String)>,
}

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

/// Parses a `getGames` response body. With `lenient`, an absent field takes its empty value
/// (`0`, `""`, `false`, `[]`, `null` categories) instead of failing; a field of the wrong type
/// fails either way. Errors name the field as `getGames.games[2].gameId`.
pub fn parse_games(body: &str, lenient: bool) -> Result<Vec<Game>> {
    let top: Value = serde_json::from_str(body).map_err(|e| {
        Error::field(ErrorKind::BadResponse, "getGames", format!("the response is not JSON ({e}): {}", excerpt(body)))
    })?;
    let games = top.as_object().and_then(|o| o.get("games")).and_then(Value::as_array).ok_or_else(|| {
        Error::field(
            ErrorKind::BadResponse,
            "getGames.games",
            format!("expected an array in an object, got {}", excerpt(body)),
        )
    })?;
    games
        .iter()
        .enumerate()
        .map(|(i, game)| {
            let path = format!("getGames.games[{i}]");
            let object = game.as_object().ok_or_else(|| wrong(&path, "an object", game))?;
            GameReader { path: &path, object, lenient }.read()
        })
        .collect()
}

fn wrong(field: &str, expected: &str, got: &Value) -> Error {
    Error::field(ErrorKind::BadResponse, field, format!("expected {expected}, got {}", excerpt(&got.to_string())))
}

struct GameReader<'r> {
    path: &'r str,
    object: &'r Map<String, Value>,
    lenient: bool,
}

impl GameReader<'_> {
    fn read(&self) -> Result<Game> {
        if let Some(key) = self.object.keys().find(|k| k.contains('\0')) {
            let problem = format!(
                "a field name holds NUL ({}), which C strings cannot carry",
                excerpt(&Value::from(key.as_str()).to_string())
            );
            return Err(Error::field(ErrorKind::BadResponse, self.path, problem));
        }
        Ok(Game {
            game_id: self.integer("gameId")?,
            name: self.string("name")?,
            rules: self.array("rules", false)?.unwrap_or_default(),
            game_type: self.string("gameType")?,
            min_players: self.integer("minPlayers")?,
            max_players: self.integer("maxPlayers")?,
            supports_tournament: self.boolean("supportsTournament")?,
            categories: self.array("categories", true)?,
            image_square: self.string("imageSquare")?,
            image_background: self.string("imageBackground")?,
            image_logo: self.string("imageLogo")?,
            description_short: self.string("descriptionShort")?,
            description_long: self.string("descriptionLong")?,
            extra: self
                .object
                .iter()
                .filter(|(k, _)| !SPEC_FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
        })
    }

    fn field(&self, name: &str) -> String {
        format!("{}.{name}", self.path)
    }

    /// The value of `name`; `None` when absent and lenient.
    fn get(&self, name: &str) -> Result<Option<&Value>> {
        match self.object.get(name) {
            Some(value) => Ok(Some(value)),
            None if self.lenient => Ok(None),
            None => Err(Error::field(ErrorKind::BadResponse, self.field(name), "required field is missing")),
        }
    }

    fn integer(&self, name: &str) -> Result<i64> {
        match self.get(name)? {
            None => Ok(0),
            Some(v) => v.as_i64().filter(|_| v.is_i64()).ok_or_else(|| wrong(&self.field(name), "an integer", v)),
        }
    }

    fn string(&self, name: &str) -> Result<String> {
        match self.get(name)? {
            None => Ok(String::new()),
            Some(Value::String(s)) if !s.contains('\0') => Ok(s.clone()),
            Some(v) => Err(wrong(&self.field(name), "a string without NUL", v)),
        }
    }

    fn boolean(&self, name: &str) -> Result<bool> {
        match self.get(name)? {
            None => Ok(false),
            Some(v) => v.as_bool().ok_or_else(|| wrong(&self.field(name), "a boolean", v)),
        }
    }

    /// An array's elements as raw JSON; `null` is `None` only where `nullable`.
    fn array(&self, name: &str, nullable: bool) -> Result<Option<Vec<String>>> {
        match self.get(name)? {
            None if nullable => Ok(None),
            None => Ok(Some(Vec::new())),
            Some(Value::Null) if nullable => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items.iter().map(Value::to_string).collect())),
            Some(v) => Err(wrong(&self.field(name), if nullable { "an array or null" } else { "an array" }, v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GAME: &str = r#"{"gameId":7,"name":"Neon \"7s\"","rules":[{"key":"paylines","value":"20"}],"gameType":"SlotMachine","minPlayers":0,"maxPlayers":0,"supportsTournament":true,"categories":null,"imageSquare":"https://a/s.png","imageBackground":"https://a/b.png","imageLogo":"https://a/l.png","descriptionShort":"Glück","descriptionLong":"<p>x</p>","volatility":"high"}"#;

    #[test]
    fn every_field_is_read() {
        let games = parse_games(&format!(r#"{{"games":[{GAME}]}}"#), false).unwrap();
        let g = &games[0];
        assert_eq!((g.game_id, g.name.as_str(), g.game_type.as_str()), (7, "Neon \"7s\"", "SlotMachine"));
        assert_eq!(g.rules, vec![r#"{"key":"paylines","value":"20"}"#.to_owned()]);
        assert_eq!(g.categories, None);
        assert!(g.supports_tournament);
        assert_eq!(g.description_short, "Glück");
        assert_eq!(g.extra, vec![("volatility".to_owned(), r#""high""#.to_owned())]);
    }

    #[test]
    fn a_field_name_holding_nul_is_refused_like_a_value() {
        let body = r#"{"games":[{"gameId":1,"a\u0000b":1}]}"#;
        let err = parse_games(body, true).unwrap_err();
        assert_eq!((err.kind, err.field.as_str()), (ErrorKind::BadResponse, "getGames.games[0]"));
        assert!(err.message.contains("NUL"), "{}", err.message);
    }

    #[test]
    fn errors_name_the_field() {
        let err = parse_games(r#"{"games":[{"gameId":"not-a-number"}]}"#, false).unwrap_err();
        assert_eq!((err.kind, err.field.as_str()), (ErrorKind::BadResponse, "getGames.games[0].gameId"));
        assert!(err.message.contains("not-a-number"), "{}", err.message);
        let err = parse_games(r#"{"games":[{"gameId":1}]}"#, false).unwrap_err();
        assert_eq!(err.field, "getGames.games[0].name");
        assert_eq!(parse_games("<html>", false).unwrap_err().field, "getGames");
        assert_eq!(parse_games(r#"{"games":{}}"#, false).unwrap_err().field, "getGames.games");
    }

    #[test]
    fn lenient_fills_absent_fields_but_not_wrong_types() {
        let games = parse_games(r#"{"games":[{"gameId":1}]}"#, true).unwrap();
        assert_eq!(games[0], Game { game_id: 1, ..Game::default() });
        assert!(parse_games(r#"{"games":[{"gameId":1.5}]}"#, true).is_err());
    }
}
