//! The two databases' lexers, as far as the check at staging needs them: where each token of a
//! statement's text begins and ends, and whether it is a blank the server skips (white space, a
//! comment), a bare word (a keyword or an unquoted identifier), something quoted (a string, a
//! quoted identifier, a dollar-quoted string: never a keyword, whatever it holds), a `;`, a
//! parenthesis or anything else.
//!
//! Each reads the text byte by byte as its server does, after PostgreSQL's `scan.l` (15, the
//! version the tests run against) and SQLite's `sqlite3GetToken` (3.53, the copy bundled with
//! the library); `tests/staging_check.rs` holds both to it:
//!
//! | | PostgreSQL | SQLite |
//! |---|---|---|
//! | blanks | space, `\t`, `\n`, `\r`, `\f`, and `\v` (a blank to later versions, a syntax error to 15: either way no statement starts there) | space, `\t`, `\n`, `\f`, `\r` start a run, which `\v` continues; a byte order mark (U+FEFF) where a token starts |
//! | `--` comment ends at | `\n` or `\r` | `\n` |
//! | `/* */` comments | nest; unterminated is an error | do not nest; unterminated runs to the end |
//! | strings | `'...'` (`''` inside; backslash is a character, `standard_conforming_strings` on, the default), `E'...'` (backslash escapes), `B'`, `X'`, `N'`, `U&'...'` | `'...'` (`''` inside), `X'...'` |
//! | quoted identifiers | `"..."`, `U&"..."` | `"..."`, `` `...` ``, `[...]` |
//! | other quoting | `$$...$$`, `$tag$...$tag$` | TCL variables `$name(...)` up to a blank or `)` |
//! | a word's bytes | letters, `_`, every byte of a non-ASCII character; then digits and `$` too | the same |
//!
//! Characters outside ASCII (U+00A0, U+2028, U+FEFF...) are part of a word to both, never a
//! blank, except SQLite's byte order mark. Differences that cannot change where a token ends
//! are left out (how operators and numbers are split). A NUL is refused before the text gets
//! here, so a NUL read past the end stands for the end.

/// Whose lexer reads the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Postgres,
    Sqlite,
}

impl Dialect {
    pub(super) const ALL: [Dialect; 2] = [Dialect::Postgres, Dialect::Sqlite];

    pub(super) fn name(self) -> &'static str {
        match self {
            Dialect::Postgres => "PostgreSQL",
            Dialect::Sqlite => "SQLite",
        }
    }
}

/// What a token is, as far as the check cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// White space or a comment: skipped by the server.
    Blank,
    /// A keyword or an unquoted identifier.
    Word,
    /// A string, a quoted identifier, a dollar-quoted string, a blob.
    Quoted,
    Semicolon,
    Open,
    Close,
    /// A number, a parameter, an operator, punctuation, or a byte the server refuses.
    Other,
}

/// A token: its kind and its bytes `start..end` of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Token {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

/// A token the server cannot read to its end (the text ends inside it): `what` it is, from byte
/// `start`. The server refuses the whole text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unterminated {
    pub what: &'static str,
    pub start: usize,
}

/// The tokens of `sql` as `dialect` reads them, in order; after an `Unterminated`, none.
pub(super) fn tokens(sql: &str, dialect: Dialect) -> Tokens<'_> {
    Tokens { text: sql.as_bytes(), at: 0, dialect }
}

/// The iterator `tokens` answers, borrowing the text.
pub(super) struct Tokens<'a> {
    text: &'a [u8],
    at: usize,
    dialect: Dialect,
}

impl Iterator for Tokens<'_> {
    type Item = Result<Token, Unterminated>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.text.len() {
            return None;
        }
        let start = self.at;
        let scanned = match self.dialect {
            Dialect::Postgres => postgres(self.text, start),
            Dialect::Sqlite => sqlite(self.text, start),
        };
        match scanned {
            Ok((kind, end)) => {
                self.at = end;
                Some(Ok(Token { kind, start, end }))
            }
            Err(what) => {
                self.at = self.text.len();
                Some(Err(Unterminated { what, start }))
            }
        }
    }
}

/// The token of PostgreSQL's lexer starting at byte `i` (within `s`): its kind and end.
fn postgres(s: &[u8], i: usize) -> Result<(Kind, usize), &'static str> {
    let at = |k: usize| byte(s, k);
    Ok(match s[i] {
        b' ' | b'\t' | b'\n' | b'\r' | 0x0c | 0x0b => {
            (Kind::Blank, run(s, i, |c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0c | 0x0b)))
        }
        b'-' if at(i + 1) == b'-' => (Kind::Blank, find(s, i + 2, |c| c == b'\n' || c == b'\r').unwrap_or(s.len())),
        b'/' if at(i + 1) == b'*' => (Kind::Blank, nested_comment_end(s, i + 2).ok_or("/* comment")?),
        b'\'' => (Kind::Quoted, quoted_end(s, i + 1, b'\'').ok_or("string")?),
        b'"' => (Kind::Quoted, quoted_end(s, i + 1, b'"').ok_or("quoted identifier")?),
        b'$' => dollar(s, i)?,
        b';' => (Kind::Semicolon, i + 1),
        b'(' => (Kind::Open, i + 1),
        b')' => (Kind::Close, i + 1),
        b'0'..=b'9' => (Kind::Other, postgres_number_end(s, i)),
        b'.' if at(i + 1).is_ascii_digit() => (Kind::Other, postgres_number_end(s, i)),
        c if is_word_start(c) => {
            let end = run(s, i, |c| is_word_start(c) || c.is_ascii_digit() || c == b'$');
            // A one-letter word before a quote is the quote's prefix (flex takes the longest
            // match: `E'` over `E`).
            match (end - i, c.to_ascii_uppercase(), at(i + 1), at(i + 2)) {
                (1, b'E', b'\'', _) => (Kind::Quoted, escape_string_end(s, i + 2).ok_or("E'' string")?),
                (1, b'B' | b'X' | b'N', b'\'', _) => (Kind::Quoted, quoted_end(s, i + 2, b'\'').ok_or("string")?),
                (1, b'U', b'&', b'\'') => (Kind::Quoted, quoted_end(s, i + 3, b'\'').ok_or("U&'' string")?),
                (1, b'U', b'&', b'"') => (Kind::Quoted, quoted_end(s, i + 3, b'"').ok_or("U&\"\" identifier")?),
                _ => (Kind::Word, end),
            }
        }
        _ => (Kind::Other, i + 1),
    })
}

/// The token of SQLite's lexer starting at byte `i` (within `s`): its kind and end.
fn sqlite(s: &[u8], i: usize) -> Result<(Kind, usize), &'static str> {
    let at = |k: usize| byte(s, k);
    Ok(match s[i] {
        b' ' | b'\t' | b'\n' | 0x0c | b'\r' => {
            (Kind::Blank, run(s, i, |c| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')))
        }
        0xef if at(i + 1) == 0xbb && at(i + 2) == 0xbf => (Kind::Blank, i + 3),
        b'-' if at(i + 1) == b'-' => (Kind::Blank, find(s, i + 2, |c| c == b'\n').unwrap_or(s.len())),
        // `/*` at the very end is a slash and a star.
        b'/' if at(i + 1) == b'*' && i + 2 < s.len() => {
            let close = (i + 2..s.len() - 1).find(|&k| s[k] == b'*' && s[k + 1] == b'/');
            (Kind::Blank, close.map_or(s.len(), |k| k + 2))
        }
        b'\'' => (Kind::Quoted, quoted_end(s, i + 1, b'\'').ok_or("string")?),
        q @ (b'"' | b'`') => (Kind::Quoted, quoted_end(s, i + 1, q).ok_or("quoted identifier")?),
        b'[' => (Kind::Quoted, find(s, i + 1, |c| c == b']').ok_or("[quoted identifier]")? + 1),
        b'x' | b'X' if at(i + 1) == b'\'' => (Kind::Quoted, find(s, i + 2, |c| c == b'\'').ok_or("blob")? + 1),
        b'0'..=b'9' => (Kind::Other, sqlite_number_end(s, i)),
        b'.' if at(i + 1).is_ascii_digit() => (Kind::Other, sqlite_number_end(s, i)),
        b'?' => (Kind::Other, run(s, i + 1, |c| c.is_ascii_digit())),
        b'$' | b'@' | b':' | b'#' => (Kind::Other, sqlite_variable_end(s, i)),
        b';' => (Kind::Semicolon, i + 1),
        b'(' => (Kind::Open, i + 1),
        b')' => (Kind::Close, i + 1),
        c if is_word_start(c) => (Kind::Word, run(s, i, is_sqlite_id_char)),
        _ => (Kind::Other, i + 1),
    })
}

/// The byte at `k`, or 0 past the end (the text holds no NUL).
fn byte(s: &[u8], k: usize) -> u8 {
    s.get(k).copied().unwrap_or(0)
}

/// Past the run of bytes from `i` that `keep` accepts (at least one: the caller saw the first).
fn run(s: &[u8], i: usize, keep: impl Fn(u8) -> bool) -> usize {
    find(s, i + 1, |c| !keep(c)).unwrap_or(s.len())
}

/// The first position from `i` whose byte `stop` accepts.
fn find(s: &[u8], i: usize, stop: impl Fn(u8) -> bool) -> Option<usize> {
    s.get(i..)?.iter().position(|&c| stop(c)).map(|k| i + k)
}

/// Letters, `_`, and the bytes of characters outside ASCII: a word's first byte, to both.
fn is_word_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c >= 0x80
}

/// SQLite's `IdChar`: a word's later bytes.
fn is_sqlite_id_char(c: u8) -> bool {
    is_word_start(c) || c.is_ascii_digit() || c == b'$'
}

/// Past the closing `quote` of a quoted token whose content starts at `i`, a doubled quote
/// standing for one; `None` when the text ends first.
fn quoted_end(s: &[u8], mut i: usize, quote: u8) -> Option<usize> {
    loop {
        i = find(s, i, |c| c == quote)?;
        if byte(s, i + 1) != quote {
            return Some(i + 1);
        }
        i += 2;
    }
}

/// Past the closing quote of PostgreSQL's `E'...'` whose content starts at `i`: a backslash
/// escapes the byte after it, `''` stands for a quote.
fn escape_string_end(s: &[u8], mut i: usize) -> Option<usize> {
    loop {
        i = find(s, i, |c| c == b'\'' || c == b'\\')?;
        match (s[i], byte(s, i + 1)) {
            (b'\\', _) | (b'\'', b'\'') => i += 2,
            _ => return Some(i + 1),
        }
    }
}

/// Past PostgreSQL's `/* */` comment whose content starts at `i`, nested comments counted;
/// `None` when the text ends first.
fn nested_comment_end(s: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 1;
    while i + 1 < s.len() {
        match (s[i], s[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// PostgreSQL's token at a `$` (byte `i`): a parameter `$1`, a dollar-quoted string
/// `$tag$...$tag$` (its tag letters, `_`, non-ASCII, then digits too; it ends at the first
/// occurrence of its delimiter), or a lone `$`.
fn dollar(s: &[u8], i: usize) -> Result<(Kind, usize), &'static str> {
    if byte(s, i + 1).is_ascii_digit() {
        return Ok((Kind::Other, run(s, i + 1, |c| c.is_ascii_digit())));
    }
    let tag_end =
        if is_word_start(byte(s, i + 1)) { run(s, i + 1, |c| is_word_start(c) || c.is_ascii_digit()) } else { i + 1 };
    if byte(s, tag_end) != b'$' {
        return Ok((Kind::Other, i + 1));
    }
    let delimiter = &s[i..=tag_end];
    let body = tag_end + 1;
    let close = s[body..].windows(delimiter.len()).position(|w| w == delimiter).ok_or("dollar-quoted string")?;
    Ok((Kind::Quoted, body + close + delimiter.len()))
}

/// Past PostgreSQL's number at `i`: digits, a fraction, an exponent. A letter right after it
/// starts a token of its own (before 15; 15 refuses it as trailing junk).
fn postgres_number_end(s: &[u8], i: usize) -> usize {
    let digits = |k: usize| find(s, k, |c| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut end = digits(i);
    if byte(s, end) == b'.' {
        end = digits(end + 1);
    }
    if matches!(byte(s, end), b'e' | b'E') {
        let sign = usize::from(matches!(byte(s, end + 1), b'+' | b'-'));
        if byte(s, end + 1 + sign).is_ascii_digit() {
            end = digits(end + 1 + sign);
        }
    }
    end
}

/// Past SQLite's number at `i`: hexadecimal or decimal with `_` separators, a fraction, an
/// exponent, and then any identifier bytes (an illegal token to SQLite).
fn sqlite_number_end(s: &[u8], i: usize) -> usize {
    let over = |k: usize, keep: fn(u8) -> bool| find(s, k, |c| !keep(c) && c != b'_').unwrap_or(s.len());
    let mut end = if s[i] == b'0' && matches!(byte(s, i + 1), b'x' | b'X') && byte(s, i + 2).is_ascii_hexdigit() {
        over(i + 3, |c| c.is_ascii_hexdigit())
    } else {
        let mut end = over(i, |c| c.is_ascii_digit());
        if byte(s, end) == b'.' {
            end = over(end + 1, |c| c.is_ascii_digit());
        }
        let sign = usize::from(matches!(byte(s, end + 1), b'+' | b'-'));
        if matches!(byte(s, end), b'e' | b'E') && byte(s, end + 1 + sign).is_ascii_digit() {
            end = over(end + 2, |c| c.is_ascii_digit());
        }
        end
    };
    while is_sqlite_id_char(byte(s, end)) {
        end += 1;
    }
    end
}

/// Past SQLite's variable at `i` (`$`, `@`, `:` or `#`, then identifier bytes, `::` and a TCL
/// suffix `(...)` that runs to a blank or `)`).
fn sqlite_variable_end(s: &[u8], i: usize) -> usize {
    let (mut k, mut named) = (i + 1, false);
    loop {
        match byte(s, k) {
            c if is_sqlite_id_char(c) => {
                named = true;
                k += 1;
            }
            b'(' if named => {
                k = find(s, k + 1, |c| c.is_ascii_whitespace() || c == 0x0b || c == b')').unwrap_or(s.len());
                if byte(s, k) == b')' {
                    k += 1;
                }
                return k;
            }
            b':' if byte(s, k + 1) == b':' => k += 2,
            _ => return k,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kinds and texts of `sql`'s tokens read by `dialect`, blanks left out.
    fn read(sql: &str, dialect: Dialect) -> Vec<(Kind, &str)> {
        tokens(sql, dialect)
            .map(|t| t.map(|t| (t.kind, &sql[t.start..t.end])))
            .filter(|t| !matches!(t, Ok((Kind::Blank, _))))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|u| panic!("{sql:?} ({dialect:?}): unterminated {} at {}", u.what, u.start))
    }

    #[test]
    fn line_comments_end_where_each_server_ends_them() {
        assert_eq!(read("-- x\rCOMMIT", Dialect::Postgres), [(Kind::Word, "COMMIT")]);
        assert!(read("-- x\rCOMMIT", Dialect::Sqlite).is_empty());
        assert_eq!(read("-- x\nCOMMIT", Dialect::Sqlite), [(Kind::Word, "COMMIT")]);
    }

    #[test]
    fn blanks_are_each_servers_own() {
        assert_eq!(read("\u{feff}COMMIT", Dialect::Sqlite), [(Kind::Word, "COMMIT")]);
        assert_eq!(read("\u{feff}COMMIT", Dialect::Postgres), [(Kind::Word, "\u{feff}COMMIT")]);
        assert_eq!(read("INSERT\u{feff}x", Dialect::Sqlite), [(Kind::Word, "INSERT\u{feff}x")]);
        assert_eq!(read("\u{a0}COMMIT", Dialect::Sqlite), [(Kind::Word, "\u{a0}COMMIT")]);
        assert_eq!(read("\u{2028}COMMIT", Dialect::Postgres), [(Kind::Word, "\u{2028}COMMIT")]);
        // SQLite: a vertical tab continues a run of blanks but does not start one.
        assert_eq!(read(" \u{b}COMMIT", Dialect::Sqlite), [(Kind::Word, "COMMIT")]);
        assert_eq!(read("\u{b}COMMIT", Dialect::Sqlite), [(Kind::Other, "\u{b}"), (Kind::Word, "COMMIT")]);
        assert_eq!(read("\u{b}COMMIT", Dialect::Postgres), [(Kind::Word, "COMMIT")]);
    }

    #[test]
    fn block_comments_nest_on_postgresql_only() {
        let sql = "/* a /* b */ COMMIT */ SELECT 1";
        assert_eq!(read(sql, Dialect::Postgres), [(Kind::Word, "SELECT"), (Kind::Other, "1")]);
        assert_eq!(read(sql, Dialect::Sqlite)[0], (Kind::Word, "COMMIT"));
        let open = tokens("/* a /* b */ COMMIT", Dialect::Postgres).last().unwrap();
        assert_eq!(open, Err(Unterminated { what: "/* comment", start: 0 }));
        assert!(read("SELECT 1 /* to the end", Dialect::Sqlite).len() == 2);
        assert_eq!(read("/**/x", Dialect::Sqlite), [(Kind::Word, "x")]);
        assert_eq!(read("/*/ x */y", Dialect::Postgres), [(Kind::Word, "y")]);
        assert_eq!(read("SELECT 2 /*", Dialect::Sqlite).last(), Some(&(Kind::Other, "*")));
    }

    #[test]
    fn quoting_is_each_servers_own() {
        let sql = r"E'\';COMMIT;--'";
        assert_eq!(read(sql, Dialect::Postgres), [(Kind::Quoted, sql)]);
        let lite = read(sql, Dialect::Sqlite);
        assert_eq!(&lite[..3], [(Kind::Word, "E"), (Kind::Quoted, r"'\'"), (Kind::Semicolon, ";")]);
        assert_eq!(read("$t$;$$;$t$;", Dialect::Postgres), [(Kind::Quoted, "$t$;$$;$t$"), (Kind::Semicolon, ";")]);
        assert_eq!(read("$1;", Dialect::Postgres), [(Kind::Other, "$1"), (Kind::Semicolon, ";")]);
        assert_eq!(read("a$$b", Dialect::Postgres), [(Kind::Word, "a$$b")]);
        assert_eq!(read("$a(x;y) ;", Dialect::Sqlite), [(Kind::Other, "$a(x;y)"), (Kind::Semicolon, ";")]);
        assert_eq!(read("[a;b]", Dialect::Sqlite), [(Kind::Quoted, "[a;b]")]);
        assert_eq!(read("`a;b`", Dialect::Sqlite), [(Kind::Quoted, "`a;b`")]);
        assert_eq!(read("U&\"a;\"\"b\"", Dialect::Postgres), [(Kind::Quoted, "U&\"a;\"\"b\"")]);
        assert_eq!(read("x'00';", Dialect::Sqlite), [(Kind::Quoted, "x'00'"), (Kind::Semicolon, ";")]);
        assert_eq!(read("ue'x'", Dialect::Postgres), [(Kind::Word, "ue"), (Kind::Quoted, "'x'")]);
        assert_eq!(read("1e'\\''", Dialect::Postgres), [(Kind::Other, "1"), (Kind::Quoted, "e'\\''")]);
        for (sql, what) in [("'a", "string"), ("E'\\'", "E'' string"), ("$x$ a $y$", "dollar-quoted string")] {
            let last = tokens(sql, Dialect::Postgres).last().unwrap();
            assert_eq!(last, Err(Unterminated { what, start: 0 }), "{sql}");
        }
        assert_eq!(tokens("[a", Dialect::Sqlite).last().unwrap().unwrap_err().what, "[quoted identifier]");
    }
}
