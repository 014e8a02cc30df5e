//! The shared configuration: the journal, the service client, the receiver's parse options.

use std::time::Duration;

use slotpartner::client::{Client, ClientConfig};
use slotpartner::journal::{ExistingJournal, SCHEMA_VERSION};
use slotpartner::{Journal, JournalOptions, Receiver, ReceiverConfig};

use crate::Fail;
use crate::args::{JournalOpt, ServiceOpts};

/// Any well-formed token, for a receiver that only parses (parsing does not authenticate).
pub const PLACEHOLDER_TOKEN: &str = "00000000-0000-0000-0000-000000000000";

/// Opens the journal of `--journal` (or `SLOTPARTNER_JOURNAL`) with `--max-index-jump` and
/// `--not-found-limit`, creating and migrating nothing (`Journal::open_existing`): an operator's
/// typo must not create an empty journal that reports no gap, on SQLite or PostgreSQL, and a
/// monitoring command must not migrate a journal the running endpoints still use. An absent
/// journal is an error naming the database; so is an older schema version (the new release's
/// endpoints migrate it on their first delivery).
pub fn open_journal(opt: &JournalOpt) -> Result<Journal, Fail> {
    let (url, options) = journal_settings(opt)?;
    match Journal::open_existing(url, &options)? {
        ExistingJournal::Current(journal) => Ok(journal),
        ExistingJournal::Absent { reason } => Err(Fail(format!(
            "journal_url: no journal there ({reason}); nothing was created: check the URL (the endpoint creates the journal on its first delivery)"
        ))),
        ExistingJournal::Older { version } => Err(Fail(format!(
            "journal_url: the journal is of schema version {version}, older than this release's {SCHEMA_VERSION}; it was left as it is: this release's endpoints migrate it on their first delivery (a monitoring or operator command never does)"
        ))),
    }
}

/// The journal's URL (`--journal` or `SLOTPARTNER_JOURNAL`, required) and its options
/// (`--max-index-jump`, `--not-found-limit`).
pub fn journal_settings(opt: &JournalOpt) -> Result<(&str, JournalOptions), Fail> {
    let url = opt
        .journal
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| Fail("no journal: give --journal URL or set SLOTPARTNER_JOURNAL".to_owned()))?;
    let options = JournalOptions {
        max_index_jump: opt.max_index_jump,
        not_found_limit: opt.not_found_limit,
        ..JournalOptions::default()
    };
    Ok((url, options))
}

/// The configured service client; `tune` adds a command's own settings.
pub fn client(
    opts: &ServiceOpts,
    tune: impl FnOnce(&mut ClientConfig) -> Result<(), slotpartner::Error>,
) -> Result<Client, Fail> {
    let base_url = opts
        .base_url
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| Fail("no service: give --base-url URL or set SLOTPARTNER_BASE_URL".to_owned()))?;
    let token = token(opts)?;
    let mut config = ClientConfig::new(base_url, token)?;
    config.set_timeout(seconds("--timeout", opts.timeout)?)?;
    config.set_retries(opts.retries, Duration::from_millis(200))?;
    if let Some(path) = &opts.ca_file {
        config.add_ca_file(&path.to_string_lossy())?;
    }
    tune(&mut config)?;
    Ok(Client::new(config)?)
}

/// The partner token of `--token` (or `SLOTPARTNER_TOKEN`).
pub fn token(opts: &ServiceOpts) -> Result<&str, Fail> {
    opts.token
        .as_deref()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Fail("no partner token: give --token UUID or set SLOTPARTNER_TOKEN".to_owned()))
}

/// A receiver that parses as the partner's endpoint does (its index field and strictness).
pub fn parser(index_field: &str, strict_index: bool) -> Result<Receiver, Fail> {
    let mut config = ReceiverConfig::default();
    config.add_token(PLACEHOLDER_TOKEN)?;
    config.set_index_field(index_field)?;
    config.set_strict_index(strict_index);
    Ok(Receiver::new(config)?)
}

/// A positive number of seconds as a duration.
pub fn seconds(field: &str, value: f64) -> Result<Duration, Fail> {
    if !value.is_finite() || !(0.001..=3600.0).contains(&value) {
        // `1e300` is echoed as such, not as its 301 digits.
        let text = value.to_string();
        let shown = if text.len() > 20 { format!("{value:e}") } else { text };
        return Err(Fail(format!("{field}: expected 0.001 to 3600 seconds, got {shown}")));
    }
    Ok(Duration::from_secs_f64(value))
}
