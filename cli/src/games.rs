//! `games LOCALE [GAME_ID]`: the service's games as a table, or every field as JSON; exit 1
//! when the service lists none.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};
use serde::Serialize;
use serde_json::value::RawValue;
use slotpartner::client::Game;

use crate::args::GamesArgs;
use crate::config::client;
use crate::output::{OrderedMap, print_json};
use crate::{Fail, Outcome, Verdict};

pub fn run(args: &GamesArgs) -> Outcome {
    let client = client(&args.service, |config| {
        config.set_lenient_games(args.lenient);
        Ok(())
    })?;
    let games = client.get_games(&args.locale, args.game_id)?;
    if args.json {
        let shown = games.iter().map(GameJson::of).collect::<Result<Vec<_>, Fail>>()?;
        print_json(&shown)?;
    } else if games.is_empty() {
        let game = args.game_id.map_or(String::new(), |id| format!(" {id}"));
        eprintln!("slotpartner: the service lists no game{game} in {}", args.locale);
    } else {
        crate::outln!("{}", table(&games));
    }
    // Nothing found is bad news, as for `journal show`.
    Ok(Verdict::bad_if(games.is_empty()))
}

fn table(games: &[Game]) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header(["id", "name", "type", "rules", "categories"]);
    if let Some((width, _)) = terminal_size() {
        table.set_content_arrangement(ContentArrangement::Dynamic).set_width(width);
    }
    for game in games {
        let categories = match &game.categories {
            None => "null".to_owned(),
            Some(items) if items.is_empty() => "-".to_owned(),
            Some(items) => items.iter().map(|c| category_text(c)).collect::<Vec<_>>().join(", "),
        };
        table.add_row([
            game.game_id.to_string(),
            game.name.clone(),
            game.game_type.clone(),
            game.rules.len().to_string(),
            categories,
        ]);
    }
    table
}

/// A category as text: a JSON string unquoted, anything else as its JSON.
fn category_text(raw: &str) -> String {
    match serde_json::from_str::<String>(raw) {
        Ok(text) => text,
        Err(_) => raw.to_owned(),
    }
}

/// The width of stdout when it is a terminal.
fn terminal_size() -> Option<(u16, u16)> {
    let term = console::Term::stdout();
    if !term.is_term() {
        return None;
    }
    term.size_checked().map(|(_rows, cols)| (cols, 0))
}

/// Every field of a game, with the spec's names; rules, categories and extra fields as raw JSON.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GameJson<'a> {
    game_id: i64,
    name: &'a str,
    rules: Vec<Box<RawValue>>,
    game_type: &'a str,
    min_players: i64,
    max_players: i64,
    supports_tournament: bool,
    categories: Option<Vec<Box<RawValue>>>,
    image_square: &'a str,
    image_background: &'a str,
    image_logo: &'a str,
    description_short: &'a str,
    description_long: &'a str,
    /// Fields spec 2.1 does not define, in the order the service sent them.
    extra: OrderedMap<&'a str, Box<RawValue>>,
}

fn raw(text: &str) -> Result<Box<RawValue>, Fail> {
    RawValue::from_string(text.to_owned()).map_err(|e| Fail(format!("getGames: a value is not JSON ({e})")))
}

impl<'a> GameJson<'a> {
    fn of(game: &'a Game) -> Result<Self, Fail> {
        Ok(GameJson {
            game_id: game.game_id,
            name: &game.name,
            rules: game.rules.iter().map(|r| raw(r)).collect::<Result<_, _>>()?,
            game_type: &game.game_type,
            min_players: game.min_players,
            max_players: game.max_players,
            supports_tournament: game.supports_tournament,
            categories: game
                .categories
                .as_ref()
                .map(|items| items.iter().map(|c| raw(c)).collect::<Result<_, _>>())
                .transpose()?,
            image_square: &game.image_square,
            image_background: &game.image_background,
            image_logo: &game.image_logo,
            description_short: &game.description_short,
            description_long: &game.description_long,
            extra: OrderedMap(game.extra.iter().map(|(k, v)| Ok((k.as_str(), raw(v)?))).collect::<Result<_, Fail>>()?),
        })
    }
}
