//! The built-in game catalogue returned by `getGames` (spec 2.1).

use serde::Serialize;

/// A game record with exactly the 13 fields of spec 2.1.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Game {
    pub game_id: i64,
    pub name: String,
    pub rules: Vec<Rule>,
    pub game_type: String,
    pub min_players: i64,
    pub max_players: i64,
    pub supports_tournament: bool,
    pub categories: Option<Vec<String>>,
    pub image_square: String,
    pub image_background: String,
    pub image_logo: String,
    pub description_short: String,
    pub description_long: String,
}

/// One element of `rules` (the element type is not shown by the spec; the
/// sandbox uses small key/value objects).
#[derive(Debug, Clone, Serialize)]
pub struct Rule {
    pub key: String,
    pub value: String,
}

/// The locales with their own descriptions; others fall back to `en-US`.
pub const LOCALES: [&str; 2] = ["en-US", "de-DE"];

struct Text {
    short: &'static str,
    long: &'static str,
}

struct Entry {
    id: i64,
    name: &'static str,
    slug: &'static str,
    rules: &'static [(&'static str, &'static str)],
    tournament: bool,
    categories: Option<&'static [&'static str]>,
    en: Text,
    de: Text,
}

const ENTRIES: &[Entry] = &[
    Entry {
        id: 1001,
        name: "Pharaoh's Fortune",
        slug: "pharaohs-fortune",
        rules: &[("paylines", "20"), ("reels", "5x3"), ("rtp", "96.10")],
        tournament: true,
        categories: Some(&["egypt", "classic", "featured"]),
        en: Text {
            short: "Five reels, twenty paylines and the \"Eye of Horus\" wild that expands on every win.",
            long: "<p>Descend into the tomb of a forgotten king. The <strong>\"Eye of Horus\"</strong> wild expands to cover the whole reel, and three scarab scatters open the burial chamber with ten free spins.</p><ul><li>20 fixed paylines</li><li>Expanding wilds</li><li>Free spins with a 3&times; multiplier</li></ul>",
        },
        de: Text {
            short: "Fünf Walzen, zwanzig Gewinnlinien und das „Auge des Horus“ als Wild, das sich bei jedem Gewinn ausdehnt.",
            long: "<p>Steigen Sie hinab in das Grab eines vergessenen Königs. Das Wild <strong>„Auge des Horus“</strong> dehnt sich über die ganze Walze aus, und drei Skarabäus-Scatter öffnen die Grabkammer mit zehn Freispielen.</p><ul><li>20 feste Gewinnlinien</li><li>Expandierende Wilds</li><li>Freispiele mit 3-fachem Multiplikator</li></ul>",
        },
    },
    Entry {
        id: 1002,
        name: "Neon Nights 7s",
        slug: "neon-nights-7s",
        rules: &[],
        tournament: false,
        categories: Some(&["classic", "fruit"]),
        en: Text {
            short: "A three-reel retro slot full of neon sevens, bars and cherries.",
            long: "<p>The city never sleeps and neither do the <em>sevens</em>. Line up three red 7s on the middle row for the top prize, or any mix of bars for a steady stream of small wins.</p>",
        },
        de: Text {
            short: "Ein Retro-Slot mit drei Walzen voller Neon-Siebener, Balken und Kirschen.",
            long: "<p>Die Stadt schläft nie – und die <em>Siebener</em> auch nicht. Drei rote 7er in der mittleren Reihe bringen den Hauptgewinn, jede Mischung aus Balken sorgt für einen stetigen Strom kleiner Gewinne.</p>",
        },
    },
    Entry {
        id: 1003,
        name: "Lucky Clover Deluxe",
        slug: "lucky-clover-deluxe",
        rules: &[("paylines", "10"), ("reels", "5x3")],
        tournament: true,
        categories: None,
        en: Text {
            short: "Find the four-leaf clover and let the leprechaun double your win.",
            long: "<p>Somewhere behind the rainbow the leprechaun guards his pot of gold. Each <strong>clover</strong> symbol adds one golden coin to the meter; fill it to trigger the bonus round.</p><p>Max win: 5,000&times; stake.</p>",
        },
        de: Text {
            short: "Finden Sie das vierblättrige Kleeblatt und lassen Sie den Kobold Ihren Gewinn verdoppeln – viel Glück!",
            long: "<p>Irgendwo hinter dem Regenbogen bewacht der Kobold seinen Goldtopf. Jedes <strong>Kleeblatt</strong> legt eine Goldmünze auf die Anzeige; ist sie voll, beginnt die Bonusrunde. Glück gehört dazu.</p><p>Höchstgewinn: das 5.000-fache des Einsatzes.</p>",
        },
    },
    Entry {
        id: 1004,
        name: "Dragon's Hoard Megaways",
        slug: "dragons-hoard-megaways",
        rules: &[("ways", "117649"), ("reels", "6"), ("rtp", "96.50"), ("volatility", "high")],
        tournament: true,
        categories: Some(&["asian", "megaways", "jackpot"]),
        en: Text {
            short: "Up to 117,649 ways to win and cascading reels guarded by a jade dragon.",
            long: "<p>Every spin reshapes the reels: between two and seven symbols per reel give up to <strong>117,649 ways</strong>. Winning symbols shatter and new ones fall into place, raising the multiplier by one each time.</p><ul><li>Cascading reels</li><li>Unlimited win multiplier in free spins</li><li>Linked progressive jackpot</li></ul>",
        },
        de: Text {
            short: "Bis zu 117.649 Gewinnwege und Kaskadenwalzen, bewacht von einem Jadedrachen.",
            long: "<p>Jeder Dreh formt die Walzen neu: zwei bis sieben Symbole pro Walze ergeben bis zu <strong>117.649 Gewinnwege</strong>. Gewinnsymbole zerspringen, neue fallen nach, und der Multiplikator steigt jedes Mal um eins.</p><ul><li>Kaskadenwalzen</li><li>Unbegrenzter Gewinnmultiplikator in den Freispielen</li><li>Verknüpfter progressiver Jackpot</li></ul>",
        },
    },
    Entry {
        id: 1005,
        name: "Arctic Treasures",
        slug: "arctic-treasures",
        rules: &[],
        tournament: false,
        categories: Some(&["adventure"]),
        en: Text {
            short: "Ice-locked chests, sticky wilds and a polar bear with a taste for gold.",
            long: "<p>Wilds freeze in place for the next two spins. Collect three <em>ice chests</em> to pick your prize: extra free spins, a multiplier, or an instant cash award.</p>",
        },
        de: Text {
            short: "Eingefrorene Truhen, haftende Wilds und ein Eisbär mit einer Schwäche für Gold.",
            long: "<p>Wilds frieren für die nächsten zwei Drehungen fest. Sammeln Sie drei <em>Eistruhen</em> und wählen Sie Ihren Preis: zusätzliche Freispiele, einen Multiplikator oder einen sofortigen Geldgewinn.</p>",
        },
    },
    Entry {
        id: 1006,
        name: "Wild West Gold Rush",
        slug: "wild-west-gold-rush",
        rules: &[("paylines", "25"), ("reels", "5x4")],
        tournament: false,
        categories: Some(&["western", "jackpot"]),
        en: Text {
            short: "Stake a claim in the hills: dynamite scatters blow the mine wide open.",
            long: "<p>Three sticks of <strong>dynamite</strong> start the gold rush. In the mine, every nugget carries a cash value &mdash; land a full reel of them and the sheriff says \"That's a jackpot, partner!\"</p>",
        },
        de: Text {
            short: "Stecken Sie Ihren Claim ab: Dynamit-Scatter sprengen die Mine auf.",
            long: "<p>Drei Stangen <strong>Dynamit</strong> starten den Goldrausch. In der Mine trägt jedes Nugget einen Geldwert &ndash; füllen Sie eine ganze Walze damit und der Sheriff ruft: „Das ist ein Jackpot, Partner!“</p>",
        },
    },
    Entry {
        id: 1007,
        name: "Fruit Frenzy Deluxe",
        slug: "fruit-frenzy-deluxe",
        rules: &[("paylines", "5"), ("maxWin", "€250,000")],
        tournament: true,
        categories: Some(&["fruit", "classic", "featured"]),
        en: Text {
            short: "Classic fruit with a twist: win up to €250,000 on a single spin.",
            long: "<p>Melons, plums and lemons on five lines. The <em>golden bell</em> pays in any position, and the gamble feature lets you double every win up to €250,000.</p>",
        },
        de: Text {
            short: "Klassisches Obst mit Pfiff: bis zu 250.000 € Gewinn bei einer einzigen Drehung.",
            long: "<p>Melonen, Pflaumen und Zitronen auf fünf Linien. Die <em>goldene Glocke</em> zahlt in jeder Position, und mit der Risikoleiter verdoppeln Sie jeden Gewinn bis zu 250.000 €.</p>",
        },
    },
];

/// Whether `locale` is well formed: `xx-YY` (ISO 639-1 lowercase, hyphen,
/// ISO 3166-1 alpha-2 uppercase).
pub fn is_valid_locale(locale: &str) -> bool {
    let b = locale.as_bytes();
    b.len() == 5
        && b[0].is_ascii_lowercase()
        && b[1].is_ascii_lowercase()
        && b[2] == b'-'
        && b[3].is_ascii_uppercase()
        && b[4].is_ascii_uppercase()
}

/// All games (or the one with `game_id`) with descriptions in `locale`
/// (`de-DE`, else `en-US`).
pub fn games(locale: &str, game_id: Option<i64>) -> Vec<Game> {
    ENTRIES
        .iter()
        .filter(|e| game_id.is_none_or(|id| id == e.id))
        .map(|e| {
            let text = if locale == "de-DE" { &e.de } else { &e.en };
            let image = |file: &str| format!("https://cdn.sandbox.invalid/games/{}/{file}", e.slug);
            Game {
                game_id: e.id,
                name: e.name.to_string(),
                rules: e.rules.iter().map(|(k, v)| Rule { key: k.to_string(), value: v.to_string() }).collect(),
                game_type: "SlotMachine".to_string(),
                min_players: 0,
                max_players: 0,
                supports_tournament: e.tournament,
                categories: e.categories.map(|c| c.iter().map(|s| s.to_string()).collect()),
                image_square: image("square.png"),
                image_background: image("background.jpg"),
                image_logo: image("logo.png"),
                description_short: text.short.to_string(),
                description_long: text.long.to_string(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locale_format() {
        assert!(is_valid_locale("en-US"));
        assert!(is_valid_locale("de-DE"));
        for bad in ["en", "en_US", "EN-us", "en-USA", "e1-US", "", "en-U", "en-us"] {
            assert!(!is_valid_locale(bad), "{bad}");
        }
    }

    #[test]
    fn catalogue_shape() {
        let games = games("en-US", None);
        assert!(games.len() >= 6);
        let value = serde_json::to_value(&games).unwrap();
        for g in value.as_array().unwrap() {
            assert_eq!(g.as_object().unwrap().len(), 13, "{g}");
        }
        assert!(games.iter().any(|g| g.categories.is_none()));
        assert!(games.iter().any(|g| g.rules.is_empty()));
        assert!(games.iter().any(|g| !g.rules.is_empty()));
        assert!(games.iter().any(|g| g.description_short.contains('"')));
        let de = super::games("de-DE", None);
        assert!(de.iter().any(|g| g.description_long.contains("Glück")));
        assert!(de.iter().any(|g| g.description_short.contains('€')));
        let mut ids: Vec<i64> = games.iter().map(|g| g.game_id).collect();
        ids.dedup();
        assert_eq!(ids.len(), games.len());
    }
}
