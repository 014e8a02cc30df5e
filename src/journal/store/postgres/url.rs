//! The journal URL's parameters the journal reads itself, taken out before the rest goes to the
//! client's parser (which refuses what it does not know): libpq's `sslmode` and `sslrootcert`
//! (read in `tls.rs`), `command_timeout` and `statement_cache_size` (asyncpg's names; see
//! `statement_cache.rs`). Every other parameter stays, in its order, as written; libpq's
//! `connect_timeout` among them (the client reads it).

use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};

fn url_error(problem: impl std::fmt::Display) -> Error {
    Error::field(ErrorKind::InvalidArgument, "journal_url", problem)
}

/// The URL's parameters the journal reads itself, and the URL without them.
#[derive(Debug, Default)]
pub(super) struct Own {
    /// The URL without the parameters below, for the client's parser.
    pub rest: String,
    /// libpq's `sslmode` (`tls.rs` reads it).
    pub sslmode: Option<String>,
    /// libpq's `sslrootcert` (`tls.rs` reads it).
    pub sslrootcert: Option<String>,
    /// `command_timeout`, in seconds (asyncpg's name and meaning): how long one round trip
    /// waits for the server's answer.
    pub command_timeout: Option<Duration>,
    /// `statement_cache_size` (asyncpg's name): how many of the journal's statements a
    /// connection keeps prepared by name; 0 (the default) keeps none.
    pub statement_cache_size: usize,
}

/// Takes the parameters of `Own` out of `url` (the client's parser refuses what it does not
/// know). Errors name `journal_url` and the parameter.
pub(super) fn take_ours(url: &str) -> Result<Own> {
    split(url)
}

/// Finds the query as tokio-postgres does (after the first `@`, the first `?`), and
/// takes out the parameters this module handles; the others stay, in their order, as written.
fn split(url: &str) -> Result<Own> {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let after_credentials = after_scheme + url[after_scheme..].find('@').map_or(0, |i| i + 1);
    let Some(question) = url[after_credentials..].find('?').map(|i| after_credentials + i) else {
        return Ok(Own { rest: url.to_owned(), ..Own::default() });
    };
    let mut own = Own::default();
    let mut kept = Vec::new();
    for pair in url[question + 1..].split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        // A key that does not decode is none of ours: the `postgres` parser judges it.
        match percent_decode(key).as_deref() {
            Ok("sslmode") => {
                own.sslmode = Some(percent_decode(value).map_err(|e| url_error(format!("sslmode: {e}")))?);
            }
            Ok("sslrootcert") => {
                own.sslrootcert = Some(percent_decode(value).map_err(|e| url_error(format!("sslrootcert: {e}")))?);
            }
            Ok("command_timeout") => own.command_timeout = Some(seconds("command_timeout", value)?),
            Ok("statement_cache_size") => own.statement_cache_size = statements(value)?,
            Ok(
                key @ ("sslcert"
                | "sslkey"
                | "sslpassword"
                | "sslcertmode"
                | "sslcrl"
                | "sslcrldir"
                | "sslsni"
                | "sslcompression"
                | "sslkeylogfile"
                | "ssl_min_protocol_version"
                | "ssl_max_protocol_version"
                | "requiressl"),
            ) => {
                return Err(url_error(format!(
                    "the URL parameter {key} is not supported: TLS is set with sslmode and sslrootcert alone"
                )));
            }
            _ => kept.push(pair),
        }
    }
    own.rest = url[..question].to_owned();
    if !kept.is_empty() {
        own.rest.push('?');
        own.rest.push_str(&kept.join("&"));
    }
    Ok(own)
}

/// `statement_cache_size`'s `value`: a whole number of statements.
fn statements(value: &str) -> Result<usize> {
    let text = percent_decode(value).map_err(|e| url_error(format!("statement_cache_size: {e}")))?;
    text.parse().map_err(|_| {
        url_error(format!(
            "statement_cache_size={text}: not a number of statements (0, the default, keeps none, as a pooler in transaction mode needs)"
        ))
    })
}

/// A time-out parameter's `value`: seconds, whole or decimal (`2`, `0.5`), more than 0 and at
/// most a day. 0, which libpq reads as "wait for ever", is refused: every wait has a bound.
fn seconds(name: &str, value: &str) -> Result<Duration> {
    let text = percent_decode(value).map_err(|e| url_error(format!("{name}: {e}")))?;
    let plain = !text.is_empty() && text.chars().all(|c| c.is_ascii_digit() || c == '.');
    match text.parse::<f64>() {
        Ok(secs) if plain && secs > 0.0 && secs <= 86_400.0 => Ok(Duration::from_secs_f64(secs)),
        _ => Err(url_error(format!(
            "{name}={text:?} is not a time-out: give seconds, more than 0 and at most 86400 (such as {name}=10 or {name}=0.5)"
        ))),
    }
}

/// `%XX` escapes decoded (`+` stays `+`, as libpq and tokio-postgres have it).
fn percent_decode(text: &str) -> std::result::Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(high), Some(low)) => {
                out.push(u8::try_from(high * 16 + low).unwrap_or(b'?'));
                i += 3;
            }
            (byte, ..) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| "is not UTF-8 once %-decoded".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_ok(url: &str) -> (String, Option<String>, Option<String>) {
        let own = split(url).unwrap_or_else(|e| panic!("{url}: {}", e.message));
        (own.rest, own.sslmode, own.sslrootcert)
    }

    #[test]
    fn our_parameters_leave_the_url_and_the_others_stay_in_order() {
        assert_eq!(
            split_ok(
                "postgres://u:p@h:5432/db?options=-c%20x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=a"
            ),
            (
                "postgres://u:p@h:5432/db?options=-c%20x&application_name=a".to_owned(),
                Some("verify-full".to_owned()),
                Some("/etc/ca.pem".to_owned())
            )
        );
        assert_eq!(
            split_ok("postgres://u@h/db?sslmode=require"),
            ("postgres://u@h/db".to_owned(), Some("require".to_owned()), None)
        );
        assert_eq!(split_ok("postgres://u@h/db"), ("postgres://u@h/db".to_owned(), None, None));
    }

    #[test]
    fn a_question_mark_in_the_password_is_not_the_query() {
        let (url, mode, _) = split_ok("postgres://u:p?sslmode=disable@h/db?sslmode=verify-full");
        assert_eq!(url, "postgres://u:p?sslmode=disable@h/db");
        assert_eq!(mode.as_deref(), Some("verify-full"));
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("%2Ftmp%2fca+x.pem%").unwrap(), "/tmp/ca+x.pem%");
        assert_eq!(percent_decode("%C3%A9").unwrap(), "é");
        assert!(percent_decode("%FF").is_err());
    }

    #[test]
    fn the_statement_cache_size_is_taken_out_and_the_rest_kept_in_order() {
        let base = "postgres://partner:s3cret@db.internal/journal";
        let own = take_ours(base).unwrap();
        assert_eq!((own.rest.as_str(), own.statement_cache_size), (base, 0));
        assert_eq!(take_ours(&format!("{base}?statement_cache_size=64")).unwrap().statement_cache_size, 64);
        let own = take_ours(&format!("{base}?application_name=a&statement_cache_size=0&connect_timeout=3")).unwrap();
        assert_eq!(own.rest, format!("{base}?application_name=a&connect_timeout=3"));
        // A `?` in the password is not the query's.
        assert_eq!(take_ours("postgres://p:a?b@db/j").unwrap().rest, "postgres://p:a?b@db/j");
        for value in ["", "many", "-1", "1.5"] {
            let error = take_ours(&format!("postgres://db/j?statement_cache_size={value}")).unwrap_err();
            assert_eq!((error.kind, error.field.as_str()), (ErrorKind::InvalidArgument, "journal_url"), "{value}");
            assert!(error.message.contains(&format!("statement_cache_size={value}:")), "{error}");
        }
    }

    #[test]
    fn command_timeout_is_seconds_more_than_zero() {
        let own = take_ours("postgres://u@h/db?command_timeout=2.5&connect_timeout=3").unwrap();
        assert_eq!(own.rest, "postgres://u@h/db?connect_timeout=3");
        assert_eq!(own.command_timeout, Some(Duration::from_millis(2500)));
        assert_eq!(
            take_ours("postgres://u@h/db?command_timeout=10").unwrap().command_timeout,
            Some(Duration::from_secs(10))
        );
        for bad in ["0", "-1", "", "abc", "1e3", "86401", "inf", "NaN"] {
            let error = take_ours(&format!("postgres://u@h/db?command_timeout={bad}")).unwrap_err();
            assert_eq!(error.field, "journal_url", "{bad}");
            assert!(error.message.contains("command_timeout"), "{bad}: {}", error.message);
        }
    }
}
