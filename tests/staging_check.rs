//! The check of a staged statement (`Staged::new`) against the databases themselves, on SQLite and
//! on a throw-away PostgreSQL cluster (skipped with a message when PostgreSQL is not installed).
//!
//! A staged statement's failure under claim at finish does not speak of a claim that was never
//! written.

use slotpartner::journal::{Journal, JournalOptions, Staged};

#[path = "e2e/cluster.rs"]
mod cluster;
use cluster::{Cluster, TempDir};

#[path = "e2e/backends.rs"]
mod backends;
use backends::{Backend, Postgres, Sqlite};

#[path = "e2e/refunds.rs"]
mod refunds;
use refunds::{new_claim, plain_refund, reply};

fn at_finish() -> JournalOptions {
    JournalOptions { claim_at_finish: true, ..JournalOptions::default() }
}

/// A journal at `url` with a ledger beside it that has no unique key on the transaction, as the
/// report's had: a second run of the credit is a second row.
fn journal_with_keyless_ledger(b: &dyn Backend, url: &str, options: &JournalOptions) -> Journal {
    let journal = Journal::open(url, options).unwrap_or_else(|e| panic!("open {url}: {e}"));
    let id = if b.name() == "postgres" { "BIGSERIAL PRIMARY KEY" } else { "INTEGER PRIMARY KEY" };
    b.exec(url, &format!("CREATE TABLE credits (id {id}, transaction_id BIGINT NOT NULL, amount BIGINT NOT NULL)"));
    journal
}

/// A staged statement failing under claim at finish: nothing was written for the claim, so the
/// error does not say it is held; with the claim written by `begin`, it does.
fn a_failure_tells_what_stays_of_the_claim(b: &dyn Backend) {
    for (mode, options) in [("begin", JournalOptions::default()), ("at_finish", at_finish())] {
        let url = b.url(&format!("what_stays_{mode}"));
        let journal = journal_with_keyless_ledger(b, &url, &options);
        let claim = new_claim(&journal, &plain_refund(1));
        let missing = Staged::new("INSERT INTO no_such_table (x) VALUES (1)", Vec::new()).unwrap();
        let error = journal.finish_with(&claim, &reply(1), &[missing]).unwrap_err();
        assert_eq!(error.field, "statements[0]", "{mode}: {error}");
        assert!(error.message.contains("nothing was stored"), "{mode}: {error}");
        if mode == "begin" {
            assert!(error.message.contains("the claim is still held"), "{mode}: {error}");
        } else {
            assert!(!error.message.contains("held"), "{mode}: no claim was written: {error}");
            assert!(error.message.contains("the next delivery runs the logic again"), "{mode}: {error}");
        }
    }
}

#[test]
fn sqlite_the_reported_problems() {
    let b = Sqlite(TempDir::new("slotpartner-staging-check"));
    a_failure_tells_what_stays_of_the_claim(&b);
}

#[test]
fn postgres_the_reported_problems() {
    let Some(cluster) = Cluster::start("PostgreSQL staging check") else { return };
    let b = Postgres(cluster);
    a_failure_tells_what_stays_of_the_claim(&b);
}
