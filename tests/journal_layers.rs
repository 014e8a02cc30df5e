//! The journal's layers point down (see the opening comment of `src/journal/mod.rs`): `model/`
//! names nothing of the journal outside itself, `store/` names `model/` and, from the journal's
//! `mod.rs`, only the contract declared there for the backends (`CONTRACT`), never `Journal`
//! nor `operator/`. The top (`mod.rs` and `operator/`) may name everything below it.
//!
//! The files are read as text: every `super::` path that climbs out of its layer's folder and
//! every `crate::journal::` path must name the same or a lower layer.

use std::path::{Path, PathBuf};

/// The layers below the top, lowest first.
const LAYERS: [&str; 2] = ["model", "store"];

/// The folder of the top layer beside `src/journal/mod.rs`.
const TOP: &str = "operator";

/// What `store/` names from `src/journal/mod.rs`: the `Store` trait and the types its methods
/// speak (imported once, in `src/journal/store/mod.rs`).
const CONTRACT: [&str; 12] = [
    "Access",
    "AdminWork",
    "Begin",
    "Found",
    "JournalOptions",
    "Prepare",
    "Record",
    "Step",
    "Store",
    "Synchronous",
    "count",
    "now_ms",
];

/// The arrows up in `source`, the file at `below` (a path under the folder of `layer`, e.g.
/// `postgres/staged.rs`; `mod.rs` for the folder's own), each as `line: text: why`.
fn arrows_up(layer: &str, below: &Path, source: &str) -> Vec<String> {
    let rank = LAYERS.iter().position(|l| *l == layer).expect("a layer below the top");
    let file_depth = below.components().count() - usize::from(below == Path::new("mod.rs"));
    let mut arrows = Vec::new();
    // Inline modules (`mod tests {`), as rustfmt writes them: open at `INDENT mod NAME {`, closed at
    // `INDENT}`.
    let mut open: Vec<String> = Vec::new();
    let mut statement = String::new();
    let mut first_line = 0;
    for (n, line) in source.lines().enumerate() {
        let trimmed = line.trim_start();
        if open.last().is_some_and(|indent| line == format!("{indent}}}")) {
            open.pop();
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let code = line.split(" //").next().unwrap_or(line);
        let head = trimmed.trim_start_matches("pub ").trim_start_matches("pub(crate) ");
        if head.starts_with("mod ") && code.trim_end().ends_with('{') {
            open.push(line[..line.len() - trimmed.len()].to_owned());
            continue;
        }
        if statement.is_empty() {
            first_line = n + 1;
        }
        statement.push_str(code);
        statement.push(' ');
        let is_use = head.starts_with("use ") || statement.trim_start().starts_with("use ");
        if is_use && !code.trim_end().ends_with(';') {
            continue;
        }
        let depth = file_depth + open.len();
        let paths = if is_use { use_paths(&statement) } else { inline_paths(&statement) };
        for path in paths {
            if let Some(why) = arrow_up(rank, depth, &path) {
                arrows.push(format!("{first_line}: {}: {why}", path.join("::")));
            }
        }
        statement.clear();
    }
    arrows
}

/// Why `path`, written `depth` modules below the layer's folder of rank `rank`, names a higher
/// layer; `None` when it does not.
fn arrow_up(rank: usize, depth: usize, path: &[String]) -> Option<String> {
    let named = match path.first().map(String::as_str) {
        Some("crate") if path.get(1).map(String::as_str) == Some("journal") => path.get(2),
        Some("super") => {
            let supers = path.iter().take_while(|s| *s == "super").count();
            if supers <= depth {
                return None;
            }
            if supers > depth + 1 {
                return Some("climbs out of the journal".to_owned());
            }
            path.get(supers)
        }
        _ => return None,
    };
    let Some(named) = named else { return Some("names the journal itself".to_owned()) };
    if let Some(lower) = LAYERS.iter().position(|l| l == named) {
        return (lower > rank).then(|| format!("names {named}/, above {}/", LAYERS[rank]));
    }
    if named == TOP {
        return Some(format!("names {TOP}/, the top, above {}/", LAYERS[rank]));
    }
    if LAYERS[rank] == "store" && CONTRACT.contains(&named.as_str()) {
        return None;
    }
    Some(format!("names `{named}` of the journal's mod.rs, the top, from {}/", LAYERS[rank]))
}

/// The paths a `use` statement imports: `use a::{b, c::{d, e}};` gives `a::b`, `a::c::d`, `a::c::e`.
fn use_paths(statement: &str) -> Vec<Vec<String>> {
    let tree = statement.trim().trim_start_matches("pub(crate) ").trim_start_matches("pub ");
    let tree = tree.trim_start_matches("use ").trim_end().trim_end_matches(';');
    let mut paths = Vec::new();
    expand(&[], tree, &mut paths);
    paths
}

fn expand(prefix: &[String], tree: &str, paths: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    let (head, group) = match tree.find('{') {
        Some(at) => (&tree[..at], Some(&tree[at + 1..tree.rfind('}').unwrap_or(tree.len())])),
        None => (tree, None),
    };
    let mut path = prefix.to_vec();
    for segment in head.split("::").map(|s| s.split(" as ").next().unwrap_or(s).trim()) {
        if !segment.is_empty() {
            path.push(segment.to_owned());
        }
    }
    let Some(group) = group else {
        paths.push(path);
        return;
    };
    let mut nesting = 0;
    let mut start = 0;
    for (i, c) in group.char_indices() {
        match c {
            '{' => nesting += 1,
            '}' => nesting -= 1,
            ',' if nesting == 0 => {
                expand(&path, &group[start..i], paths);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !group[start..].trim().is_empty() {
        expand(&path, &group[start..], paths);
    }
}

/// The `super::...` and `crate::journal::...` paths written in a line of code.
fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut paths = Vec::new();
    for (at, _) in code.match_indices("super::").chain(code.match_indices("crate::journal")) {
        if code[..at].ends_with(|c: char| ident(c) || c == ':') {
            continue; // inside a longer path, counted from its start
        }
        let end = code[at..].find(|c: char| !(ident(c) || c == ':')).map_or(code.len(), |e| at + e);
        paths.push(code[at..end].split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect());
    }
    paths
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_layer_of_the_journal_names_one_above_it() {
    let journal = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/journal");
    let mut arrows = Vec::new();
    for layer in LAYERS {
        let folder = journal.join(layer);
        let mut files = Vec::new();
        rust_files(&folder, &mut files);
        assert!(files.len() > 1, "{}: no files", folder.display());
        for file in files {
            let source = std::fs::read_to_string(&file).unwrap();
            let below = file.strip_prefix(&folder).unwrap();
            for arrow in arrows_up(layer, below, &source) {
                arrows.push(format!("src/journal/{layer}/{}:{arrow}", below.display()));
            }
        }
    }
    assert!(arrows.is_empty(), "arrows up, against the layers of src/journal/mod.rs:\n{}", arrows.join("\n"));
}

#[test]
fn every_file_of_the_journal_is_in_a_layer() {
    let journal = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/journal");
    let mut strays = Vec::new();
    for entry in std::fs::read_dir(&journal).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name != "mod.rs" && !LAYERS.contains(&name.as_str()) && name != TOP {
            strays.push(name);
        }
    }
    assert!(strays.is_empty(), "src/journal/: {strays:?} beside mod.rs: put each in model/, store/ or operator/");
}

/// The check itself finds what it is for (so that it cannot pass by reading nothing).
#[test]
fn the_check_finds_an_arrow_up_and_lets_arrows_down_pass() {
    let up = |layer: &str, below: &str, source: &str| arrows_up(layer, Path::new(below), source);
    // Up.
    assert_eq!(up("store", "sqlite.rs", "use super::super::operator::prune;\n").len(), 1);
    assert_eq!(up("store", "mod.rs", "use super::{Journal, JournalOptions};\n").len(), 1);
    assert_eq!(up("store", "admin.rs", "    let j = crate::journal::export::page(x);\n").len(), 1);
    assert_eq!(up("model", "mod.rs", "use super::store::sql;\n").len(), 1);
    assert_eq!(up("model", "key.rs", "    let now = crate::journal::now_ms();\n").len(), 1);
    assert_eq!(up("model", "key.rs", "use super::super::{\n    JournalOptions,\n    store::pool,\n};\n").len(), 2);
    assert_eq!(up("model", "key.rs", "#[cfg(test)]\nmod tests {\n    use super::super::super::Journal;\n}\n").len(), 1);
    // Down, or within the layer.
    assert!(up("store", "mod.rs", "use super::model::{claims, key};\nuse super::{Store, count};\n").is_empty());
    assert!(up("store", "postgres/staged.rs", "use super::super::hex::hex;\n").is_empty());
    assert!(up("store", "sqlite.rs", "impl super::Store for Sqlite {\n").is_empty());
    assert!(up("model", "key.rs", "#[cfg(test)]\nmod tests {\n    use super::super::hex;\n}\n").is_empty());
    assert!(up("model", "key.rs", "// use super::super::Journal;\n").is_empty());
}
