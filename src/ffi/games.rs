//! Games from `sp_client_get_games` as plain C structs: `sp_games` holds a count and an array of
//! `sp_game`, all owned by the `sp_games` and freed at once with `sp_games_free`.

use crate::ffi::event::sp_field;
use crate::ffi::owned;
use crate::ffi::str::{Arena, Span, sp_str};
use crate::games::Game;

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

/// Where one game's strings sit in the arena, and its lists in `lists` and `fields`.
struct GameSpans {
    text: [Span; 7],
    rules: std::ops::Range<usize>,
    categories: Option<std::ops::Range<usize>>,
    extra: std::ops::Range<usize>,
}

/// Builds the C view of `games` and hands out its ownership.
pub fn into_raw(games: &[Game]) -> *mut sp_games {
    let mut arena = Arena::default();
    let mut list_spans = Vec::new();
    let mut field_spans = Vec::new();
    let mut push_list = |arena: &mut Arena, items: &[String]| {
        let start = list_spans.len();
        list_spans.extend(items.iter().map(|item| arena.push(item)));
        start..list_spans.len()
    };
    let spans: Vec<GameSpans> = games
        .iter()
        .map(|g| GameSpans {
            text: [
                &g.name,
                &g.game_type,
                &g.image_square,
                &g.image_background,
                &g.image_logo,
                &g.description_short,
                &g.description_long,
            ]
            .map(|s| arena.push(s)),
            rules: push_list(&mut arena, &g.rules),
            categories: g.categories.as_deref().map(|c| push_list(&mut arena, c)),
            extra: {
                let start = field_spans.len();
                field_spans.extend(g.extra.iter().map(|(k, v)| (arena.push(k), arena.push(v))));
                start..field_spans.len()
            },
        })
        .collect();
    let lists: Vec<sp_str> = list_spans.iter().map(|&s| arena.view(s)).collect();
    let fields: Vec<sp_field> =
        field_spans.iter().map(|&(name, json)| sp_field { name: arena.view(name), json: arena.view(json) }).collect();
    let slice_ptr =
        |v: &[sp_str], r: &std::ops::Range<usize>| if r.is_empty() { std::ptr::null() } else { v[r.clone()].as_ptr() };
    let game_views = games
        .iter()
        .zip(&spans)
        .map(|(g, s)| {
            let [name, game_type, image_square, image_background, image_logo, description_short, description_long] =
                s.text.map(|span| arena.view(span));
            let categories = s.categories.clone().unwrap_or(0..0);
            sp_game {
                game_id: g.game_id,
                name,
                rules: slice_ptr(&lists, &s.rules),
                rules_len: s.rules.len(),
                game_type,
                min_players: g.min_players,
                max_players: g.max_players,
                supports_tournament: g.supports_tournament,
                has_categories: s.categories.is_some(),
                categories: slice_ptr(&lists, &categories),
                categories_len: categories.len(),
                image_square,
                image_background,
                image_logo,
                description_short,
                description_long,
                extra_fields: if s.extra.is_empty() { std::ptr::null() } else { fields[s.extra.clone()].as_ptr() },
                extra_fields_len: s.extra.len(),
            }
        })
        .collect::<Vec<_>>();
    let view = sp_games {
        games: if game_views.is_empty() { std::ptr::null() } else { game_views.as_ptr() },
        len: game_views.len(),
    };
    owned::into_raw(GamesBox { view, games: game_views, lists, fields, arena })
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
