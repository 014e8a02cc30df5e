//! The journal's own statements kept prepared on a connection, by name, when the URL asks for it:
//! `statement_cache_size=N` (asyncpg's setting of that name), at most N a connection, all dropped
//! when one more comes. 0, the default, keeps none: every statement is sent unnamed (see
//! `client`), which a pooler in transaction mode carries, since a named statement outlives its
//! transaction on the server connection that the pooler then hands to other clients. On a direct
//! connection a kept statement is parsed and planned once a connection instead of every time it
//! runs: several times less of the server's time for the journal's statements (README,
//! "Behind a connection pooler"). The partner's staged statements are always sent unnamed.

use std::collections::HashMap;

use tokio_postgres::types::Type;
use tokio_postgres::{Error, Statement};

use crate::error::{Error as JournalError, ErrorKind, Result};

use super::client::{Client, Sql, Typed};

/// The URL parameter.
const PARAMETER: &str = "statement_cache_size";

/// Takes `statement_cache_size` out of `url` (the client's parser refuses what it does not
/// know): the URL without it, and the number of statements a connection keeps (0 when absent).
pub(super) fn from_url(url: &str) -> Result<(String, usize)> {
    // The query as tokio-postgres finds it: after the first `@`, from the first `?`.
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let after_credentials = after_scheme + url[after_scheme..].find('@').map_or(0, |i| i + 1);
    let Some(question) = url[after_credentials..].find('?').map(|i| after_credentials + i) else {
        return Ok((url.to_owned(), 0));
    };
    let mut size = 0;
    let mut kept = Vec::new();
    for pair in url[question + 1..].split('&') {
        match pair.split_once('=') {
            Some((PARAMETER, value)) => {
                size = value.parse().map_err(|_| {
                    JournalError::field(
                        ErrorKind::InvalidArgument,
                        "journal_url",
                        format!(
                            "{PARAMETER}={value}: not a number of statements (0, the default, keeps none, as a \
                             pooler in transaction mode needs)"
                        ),
                    )
                })?;
            }
            _ => kept.push(pair),
        }
    }
    let mut rest = url[..question].to_owned();
    if !kept.is_empty() {
        rest.push('?');
        rest.push_str(&kept.join("&"));
    }
    Ok((rest, size))
}

/// The statements one connection keeps prepared, by their text. Owned by the connection; its
/// statements are closed on the server when dropped.
pub(super) struct StatementCache {
    size: usize,
    kept: HashMap<String, Statement>,
}

impl StatementCache {
    /// A cache of at most `size` statements (0: none is kept).
    pub(super) fn new(size: usize) -> StatementCache {
        StatementCache { size, kept: HashMap::new() }
    }

    /// `sql` as `client` sends it with `params`: by name when this cache keeps statements
    /// (prepared now, in a round trip of its own, the first time, or when kept with other
    /// parameter types), else unnamed. `None` stands for unnamed; `sql` below makes the `Sql`.
    pub(super) fn prepared(
        &mut self,
        client: &mut Client,
        sql: &str,
        params: &Typed<'_>,
    ) -> std::result::Result<Option<Statement>, Error> {
        if self.size == 0 {
            return Ok(None);
        }
        let types: Vec<Type> = params.iter().map(|(_, ty)| ty.clone()).collect();
        if let Some(statement) = self.kept.get(sql).filter(|statement| statement.params() == types.as_slice()) {
            return Ok(Some(statement.clone()));
        }
        let statement = client.prepare(sql, &types)?;
        if self.kept.len() >= self.size {
            self.kept.clear();
        }
        self.kept.insert(sql.to_owned(), statement.clone());
        Ok(Some(statement))
    }
}

/// `text` as it is sent: by `named`, when prepared, else unnamed.
pub(super) fn sql<'a>(text: &'a str, named: Option<&'a Statement>) -> Sql<'a> {
    named.map_or(Sql::Unnamed(text), Sql::Named)
}

#[cfg(test)]
mod tests {
    use super::from_url;
    use crate::error::ErrorKind;

    #[test]
    fn the_size_is_taken_out_of_the_url_and_the_rest_kept_in_order() {
        let base = "postgres://partner:s3cret@db.internal/journal";
        assert_eq!(from_url(base).unwrap(), (base.to_owned(), 0));
        assert_eq!(from_url(&format!("{base}?statement_cache_size=64")).unwrap(), (base.to_owned(), 64));
        assert_eq!(
            from_url(&format!("{base}?application_name=a&statement_cache_size=0&connect_timeout=3")).unwrap(),
            (format!("{base}?application_name=a&connect_timeout=3"), 0)
        );
        // A `?` in the password is not the query's.
        assert_eq!(from_url("postgres://p:a?b@db/j").unwrap(), ("postgres://p:a?b@db/j".to_owned(), 0));
    }

    #[test]
    fn a_size_that_is_no_number_is_refused_naming_the_parameter() {
        for value in ["", "many", "-1", "1.5"] {
            let error = from_url(&format!("postgres://db/j?statement_cache_size={value}")).unwrap_err();
            assert_eq!((error.kind, error.field.as_str()), (ErrorKind::InvalidArgument, "journal_url"), "{value}");
            assert!(error.message.contains(&format!("statement_cache_size={value}:")), "{error}");
        }
    }
}
