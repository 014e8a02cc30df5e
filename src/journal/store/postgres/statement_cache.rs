//! The journal's own statements kept prepared on a connection, by name, when the URL asks for it:
//! `statement_cache_size=N` (asyncpg's setting of that name), the first N a connection sends; a
//! statement met past them is sent unnamed, as though no cache were asked for, and none is ever
//! dropped for another (a cache smaller than a delivery's statements would otherwise prepare each
//! of them again, a round trip more, at every delivery). 0, the default, keeps none: every statement is sent unnamed (see
//! `client`), which a pooler in transaction mode carries, since a named statement outlives its
//! transaction on the server connection that the pooler then hands to other clients. On a direct
//! connection a kept statement is parsed and planned once a connection instead of every time it
//! runs: several times less of the server's time for the journal's statements (README,
//! "Behind a connection pooler"). The partner's staged statements are kept the same way, up to N
//! of them besides (`StatementCache::staged`): their planning is spared too, and a partner
//! sending a new text with every delivery fills only their own room, never the journal's.

use tokio_postgres::types::Type;
use tokio_postgres::{Error, Statement};

use super::client::{Client, PipelineError, Sql, Typed};

/// A map by statement text, hashed with foldhash: a delivery looks up the 1.5 KB storing
/// statement (`FINISH_UNWRITTEN_KEPT`) and each staged one, where the standard library's SipHash
/// cost about 4,300 instructions a delivery and foldhash 740 (docs/experiments-2026-12.md,
/// 2026-12-03 12:14-12:55 UTC). The texts are the journal's own and the partner's staged
/// statements, not a stranger's input: SipHash's resistance to chosen collisions buys nothing.
type ByText<V> = foldhash::HashMap<String, V>;

/// The statements one connection keeps prepared, by their text. Owned by the connection; its
/// statements are closed on the server when dropped.
pub(super) struct StatementCache {
    size: usize,
    kept: ByText<Statement>,
    /// The partner's staged statements kept, by their text: the types their parameters were
    /// declared as when prepared (mostly left to the server, see `staged`), and the statement.
    staged: ByText<(Vec<Type>, Statement)>,
}

impl StatementCache {
    /// A cache of at most `size` of the journal's statements and `size` staged ones (0: none is
    /// kept).
    pub(super) fn new(size: usize) -> StatementCache {
        StatementCache { size, kept: ByText::default(), staged: ByText::default() }
    }

    /// The partner's staged `statements` (text, declared parameter types) as they are sent: each
    /// by name when kept with the same declared types, or when there is room to keep it (the
    /// new ones prepared now, together, in one round trip, with the deferred batch), else
    /// unnamed (`None`); with each, whether it was kept by an earlier call (so that it may have
    /// gone stale since). A failure names the position in `statements` of the one that failed
    /// to prepare (`PipelineError::At`; a text the server refuses fails here, as it would
    /// unnamed), or the deferred batch's (`Before`).
    pub(super) fn staged(
        &mut self,
        client: &mut Client,
        statements: &[(&str, &[Type])],
    ) -> std::result::Result<Vec<(Option<Statement>, bool)>, PipelineError> {
        // One lookup a statement where all are kept already (every delivery but a connection's
        // first): the texts are hashed once.
        let mut named: Vec<(Option<Statement>, bool)> = Vec::with_capacity(statements.len());
        let mut new: Vec<(usize, &str, &[Type])> = Vec::new();
        // A kept statement is sent by name only with the types it was prepared with.
        let as_declared = |(declared, statement): &(Vec<Type>, Statement), types: &[Type]| {
            (declared.as_slice() == types).then(|| statement.clone())
        };
        for (at, &(sql, types)) in statements.iter().enumerate() {
            match self.staged.get(sql) {
                Some(kept) => {
                    let named_as = as_declared(kept, types);
                    let earlier = named_as.is_some();
                    named.push((named_as, earlier));
                }
                None => {
                    named.push((None, false));
                    let room = self.staged.len() + new.len() < self.size;
                    if room && !new.iter().any(|&(_, queued, _)| queued == sql) {
                        new.push((at, sql, types));
                    }
                }
            }
        }
        if new.is_empty() {
            return Ok(named);
        }
        let texts: Vec<(&str, &[Type])> = new.iter().map(|&(_, sql, types)| (sql, types)).collect();
        let prepared = client.prepare_all(&texts).map_err(|e| match e {
            PipelineError::At(at, e) => PipelineError::At(new[at].0, e),
            other => other,
        })?;
        for ((_, sql, types), statement) in new.into_iter().zip(prepared) {
            self.staged.insert(sql.to_owned(), (types.to_vec(), statement));
        }
        // The statements met again in this delivery, or twice, are found now.
        for (&(sql, types), (named, _)) in statements.iter().zip(&mut named) {
            if named.is_none() {
                *named = self.staged.get(sql).and_then(|kept| as_declared(kept, types));
            }
        }
        Ok(named)
    }

    /// `sql` as `client` sends it with `params`: by name when this cache keeps it (kept already,
    /// found by one lookup; or prepared now, in a round trip of its own, while there is room, or
    /// again when kept with other parameter types), else unnamed. `None` stands for unnamed;
    /// `sql` below makes the `Sql`.
    pub(super) fn prepared(
        &mut self,
        client: &mut Client,
        sql: &str,
        params: &Typed<'_>,
    ) -> std::result::Result<Option<Statement>, Error> {
        let same_types = |statement: &Statement| statement.params().iter().eq(params.iter().map(|(_, ty)| ty));
        match self.kept.get(sql) {
            Some(statement) if same_types(statement) => return Ok(Some(statement.clone())),
            Some(_) => {}
            None if self.kept.len() >= self.size => return Ok(None),
            None => {}
        }
        let types: Vec<Type> = params.iter().map(|(_, ty)| ty.clone()).collect();
        let statement = client.prepare(sql, &types)?;
        self.kept.insert(sql.to_owned(), statement.clone());
        Ok(Some(statement))
    }
}

/// `text` as it is sent: by `named`, when prepared, else unnamed.
pub(super) fn sql<'a>(text: &'a str, named: Option<&'a Statement>) -> Sql<'a> {
    named.map_or(Sql::Unnamed(text), Sql::Named)
}
