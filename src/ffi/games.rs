//! Games from `sp_client_get_games` as plain C structs: `sp_games` holds a count and an array of
//! `sp_game`, all owned by the `sp_games` and freed at once with `sp_games_free`.

use crate::ffi::event::sp_field;
use crate::ffi::owned;
use std::ops::Range;

use crate::client::games::Game;
use crate::ffi::str::{Arena, sp_str};

/// One game (spec 2.1). Every pointer is owned by the `sp_games` it came in.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_game {
    pub game_id: i64,
    pub name: sp_str,
    /// `rules_len` elements, each the raw JSON of one rule (element type not shown by the spec).
    pub rules: *const sp_str,
    pub rules_len: usize,
    /// `SlotMachine` for a slot game.
    pub game_type: sp_str,
    pub min_players: i64,
    pub max_players: i64,
    pub supports_tournament: bool,
    /// False when the service sent `categories: null`.
    pub has_categories: bool,
    /// `categories_len` elements, each the raw JSON of one category.
    pub categories: *const sp_str,
    pub categories_len: usize,
    pub image_square: sp_str,
    pub image_background: sp_str,
    pub image_logo: sp_str,
    /// Plain text in the requested locale.
    pub description_short: sp_str,
    /// HTML in the requested locale.
    pub description_long: sp_str,
    /// Fields the spec does not define, as raw JSON.
    pub extra_fields: *const sp_field,
    pub extra_fields_len: usize,
}

/// The games of one `getGames` call: `len` entries at `games` (NULL when there are none). Owned
/// by the caller until `sp_games_free`. One thread at a time.
#[repr(C)]
#[derive(Debug)]
pub struct sp_games {
    pub games: *const sp_game,
    pub len: usize,
}

/// The allocation behind an `sp_games` pointer: the public struct first, then what it points to.
#[repr(C)]
struct GamesBox {
    view: sp_games,
    games: Vec<sp_game>,
    lists: Vec<sp_str>,
    fields: Vec<sp_field>,
    arena: Arena,
}

/// Where one game's lists sit in `lists` and `fields`, with its views of text.
struct GameParts {
    text: [sp_str; 7],
    rules: Range<usize>,
    categories: Option<Range<usize>>,
    extra: Range<usize>,
}

/// Every string of a game, for sizing the arena.
fn strings(g: &Game) -> impl Iterator<Item = &str> {
    text_fields(g)
        .into_iter()
        .chain(g.rules.iter().map(String::as_str))
        .chain(g.categories.iter().flatten().map(String::as_str))
        .chain(g.extra.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]))
}

/// The text fields of a game, in the order of `GameParts::text`.
fn text_fields(g: &Game) -> [&str; 7] {
    [
        &g.name,
        &g.game_type,
        &g.image_square,
        &g.image_background,
        &g.image_logo,
        &g.description_short,
        &g.description_long,
    ]
}

/// Builds the C view of `games` and hands out its ownership.
pub fn into_raw(games: &[Game]) -> *mut sp_games {
    let mut arena = Arena::for_strings(games.iter().flat_map(strings));
    let mut lists: Vec<sp_str> = Vec::new();
    let mut fields: Vec<sp_field> = Vec::new();
    let parts: Vec<GameParts> = games
        .iter()
        .map(|g| {
            let text = text_fields(g).map(|s| arena.push(s));
            let mut list = |items: &[String]| {
                let start = lists.len();
                lists.extend(items.iter().map(|item| arena.push(item)));
                start..lists.len()
            };
            let rules = list(&g.rules);
            let categories = g.categories.as_deref().map(list);
            let start = fields.len();
            fields.extend(g.extra.iter().map(|(k, v)| sp_field { name: arena.push(k), json: arena.push(v) }));
            GameParts { text, rules, categories, extra: start..fields.len() }
        })
        .collect();
    // `lists` and `fields` are complete: pointers into them stay valid from here on.
    let mut game_views: Vec<sp_game> = games.iter().zip(&parts).map(|(g, p)| view(g, p, &lists, &fields)).collect();
    zero_padding(&mut game_views);
    let view = sp_games { games: first(&game_views), len: game_views.len() };
    owned::into_raw(GamesBox { view, games: game_views, lists, fields, arena })
}

/// Writes each game again in place, field by field over zeros (`zero_padded!`): their padding,
/// undefined after a typed write, is copied as bytes by a host. The buffer never moves after
/// this (moving the vector does not move it), so the zeros stay.
fn zero_padding(games: &mut [sp_game]) {
    for game in games.iter_mut() {
        let value = *game;
        let at: *mut sp_game = game;
        // SAFETY: `at` is one element of the slice, writable and aligned; only raw pointers
        // into it are written.
        unsafe {
            zero_padded!(
                at,
                value,
                sp_game {
                    game_id,
                    name,
                    rules,
                    rules_len,
                    game_type,
                    min_players,
                    max_players,
                    supports_tournament,
                    has_categories,
                    categories,
                    categories_len,
                    image_square,
                    image_background,
                    image_logo,
                    description_short,
                    description_long,
                    extra_fields,
                    extra_fields_len,
                }
            )
        };
    }
}

/// A pointer to the first element, NULL for none.
fn first<T>(items: &[T]) -> *const T {
    if items.is_empty() { std::ptr::null() } else { items.as_ptr() }
}

fn view(g: &Game, p: &GameParts, lists: &[sp_str], fields: &[sp_field]) -> sp_game {
    let [name, game_type, image_square, image_background, image_logo, description_short, description_long] = p.text;
    let categories = p.categories.clone().unwrap_or(0..0);
    sp_game {
        game_id: g.game_id,
        name,
        rules: first(&lists[p.rules.clone()]),
        rules_len: p.rules.len(),
        game_type,
        min_players: g.min_players,
        max_players: g.max_players,
        supports_tournament: g.supports_tournament,
        has_categories: p.categories.is_some(),
        categories: first(&lists[categories.clone()]),
        categories_len: categories.len(),
        image_square,
        image_background,
        image_logo,
        description_short,
        description_long,
        extra_fields: first(&fields[p.extra.clone()]),
        extra_fields_len: p.extra.len(),
    }
}

/// Frees games and everything they point to. NULL is allowed and does nothing.
///
/// # Safety
/// `games` is NULL or came from `sp_client_get_games` and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_games_free(games: *mut sp_games) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<GamesBox, _>(games) } })
}
