//! An endpoint made from one JSON object of settings, so that a host pays one call for the
//! whole configuration (PHP and Python pay for every call into the library).
//!
//! The keys are the receiver's and the journal's settings under the names their C setters use
//! (`sp_receiver_config_set_<key>`, `sp_journal_config_set_<key>`), each optional, with their
//! defaults when absent or `null`:
//!
//! ```json
//! {"token": "6f1c2a3e-...", "sources": "production", "trusted_proxies": "10.0.0.0/8",
//!  "max_body_bytes": 65536, "max_depth": 32, "max_identifier_bytes": 256, "index_field": "index",
//!  "strict_index": false, "reject_unknown_events": false, "balance_wrapper": "playerBalance",
//!  "balance_currency": "EUR", "balance_failure_http_status": 500, "omit_empty_error_message": false,
//!  "journal": "sqlite:/var/lib/partner/journal.db", "claim_at_finish": false, "durable": true,
//!  "lease_ms": 30000, "busy_wait_ms": 2000, "first_index": 0, "max_reply_bytes": 65536,
//!  "lock_timeout_ms": 5000, "command_timeout_ms": 15000, "max_index_jump": 1000000,
//!  "not_found_limit": 3, "retention_ms": 0, "retry_after": 5, "optimistic": false}
//! ```
//!
//! `token` is a string or a list of at most two (the current and, during a rotation, the next).
//! An unknown key or a value of the wrong type is refused naming it: these are the partner's own
//! settings, where a typo must not pass silently.

use std::time::Duration;

use serde::Deserialize;

use crate::callback::receiver::ReceiverConfig;
use crate::endpoint::Endpoint;
use crate::error::{Error, ErrorKind, Result};
use crate::journal::{JournalOptions, Synchronous};

/// One token or several.
#[derive(Deserialize)]
#[serde(untagged)]
enum Tokens {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    token: Option<Tokens>,
    sources: Option<String>,
    trusted_proxies: Option<String>,
    max_body_bytes: Option<usize>,
    max_depth: Option<usize>,
    max_identifier_bytes: Option<usize>,
    index_field: Option<String>,
    strict_index: Option<bool>,
    reject_unknown_events: Option<bool>,
    balance_wrapper: Option<String>,
    balance_currency: Option<String>,
    balance_failure_http_status: Option<u16>,
    omit_empty_error_message: Option<bool>,
    journal: Option<String>,
    lease_ms: Option<u64>,
    busy_wait_ms: Option<u64>,
    durable: Option<bool>,
    claim_at_finish: Option<bool>,
    first_index: Option<i64>,
    max_reply_bytes: Option<usize>,
    lock_timeout_ms: Option<u64>,
    command_timeout_ms: Option<u64>,
    max_index_jump: Option<i64>,
    not_found_limit: Option<u32>,
    retention_ms: Option<u64>,
    retry_after: Option<u32>,
    optimistic: Option<bool>,
}

/// Sets `$value` with `$set` when present (`?` passes the setter's error, which names the field).
macro_rules! apply {
    ($value:expr, $set:expr) => {
        if let Some(value) = $value {
            #[allow(clippy::redundant_closure_call)]
            $set(value)?;
        }
    };
}

impl Endpoint {
    /// An endpoint from a JSON object of settings (see the module documentation). Errors:
    /// `InvalidArgument` with field `settings` for text that is not such an object (the message
    /// names the key), or naming the setting its value breaks.
    pub fn from_settings(json: &[u8]) -> Result<Endpoint> {
        let settings: Settings = serde_json::from_slice(json).map_err(|e| {
            let message = match refused_key(json) {
                Some(key) => format!("{key}: {e}"),
                None => e.to_string(),
            };
            Error::field(ErrorKind::InvalidArgument, "settings", message)
        })?;
        let mut config = ReceiverConfig::default();
        match settings.token {
            Some(Tokens::One(token)) => config.add_token(&token)?,
            Some(Tokens::Many(tokens)) => tokens.iter().try_for_each(|t| config.add_token(t))?,
            None => {}
        }
        apply!(settings.sources, |v: String| config.set_sources(&v));
        apply!(settings.trusted_proxies, |v: String| config.set_trusted_proxies(&v));
        apply!(settings.max_body_bytes, |v| config.set_max_body_bytes(v));
        apply!(settings.max_depth, |v| config.set_max_depth(v));
        apply!(settings.max_identifier_bytes, |v| config.set_max_identifier_bytes(v));
        apply!(settings.index_field, |v: String| config.set_index_field(&v));
        if let Some(v) = settings.strict_index {
            config.set_strict_index(v);
        }
        if let Some(v) = settings.reject_unknown_events {
            config.set_reject_unknown_events(v);
        }
        apply!(settings.balance_wrapper, |v: String| config.set_balance_wrapper(&v));
        apply!(settings.balance_currency, |v: String| config.set_balance_currency(&v));
        apply!(settings.balance_failure_http_status, |v| config.set_balance_failure_http_status(v));
        if let Some(v) = settings.omit_empty_error_message {
            config.set_omit_empty_error_message(v);
        }
        let mut options = JournalOptions::default();
        let ms = Duration::from_millis;
        if let Some(v) = settings.lease_ms {
            options.lease = ms(v);
        }
        if let Some(v) = settings.busy_wait_ms {
            options.busy_wait = ms(v);
        }
        if let Some(v) = settings.durable {
            options.synchronous = if v { Synchronous::Full } else { Synchronous::Normal };
        }
        if let Some(v) = settings.claim_at_finish {
            options.claim_at_finish = v;
        }
        if let Some(v) = settings.first_index {
            options.first_index = Some(v);
        }
        if let Some(v) = settings.max_reply_bytes {
            options.max_reply_bytes = v;
        }
        if let Some(v) = settings.lock_timeout_ms {
            options.lock_timeout = ms(v);
        }
        if let Some(v) = settings.command_timeout_ms {
            options.command_timeout = Some(ms(v));
        }
        if let Some(v) = settings.max_index_jump {
            options.max_index_jump = v;
        }
        if let Some(v) = settings.not_found_limit {
            options.not_found_limit = v;
        }
        if let Some(v) = settings.retention_ms {
            options.retention = (v > 0).then(|| ms(v));
        }
        let journal = settings.journal.as_deref().filter(|url| !url.is_empty()).map(|url| (url, options));
        let mut endpoint = Endpoint::new(config, journal)?;
        apply!(settings.retry_after, |v| endpoint.set_retry_after(v));
        apply!(settings.optimistic, |v| endpoint.set_optimistic(v));
        Ok(endpoint)
    }
}

/// The key whose value `Settings` refuses, for the message of a refused settings text (serde
/// names an unknown key, not the key of a value of the wrong type); `None` when no one key is.
fn refused_key(json: &[u8]) -> Option<String> {
    let serde_json::Value::Object(all) = serde_json::from_slice(json).ok()? else { return None };
    all.into_iter().find_map(|(key, value)| {
        let alone = serde_json::Value::Object(std::iter::once((key.clone(), value)).collect());
        serde_json::from_value::<Settings>(alone).is_err().then_some(key)
    })
}

/// How an environment variable's text becomes a setting's JSON value.
#[derive(Clone, Copy)]
enum Kind {
    Text,
    Switch,
    Number,
    /// Comma-separated tokens.
    Tokens,
}

/// Every setting, with how its environment variable (`SLOTPARTNER_` and the key in capitals) is read.
const KEYS: [(&str, Kind); 27] = [
    ("token", Kind::Tokens),
    ("sources", Kind::Text),
    ("trusted_proxies", Kind::Text),
    ("max_body_bytes", Kind::Number),
    ("max_depth", Kind::Number),
    ("max_identifier_bytes", Kind::Number),
    ("index_field", Kind::Text),
    ("strict_index", Kind::Switch),
    ("reject_unknown_events", Kind::Switch),
    ("balance_wrapper", Kind::Text),
    ("balance_currency", Kind::Text),
    ("balance_failure_http_status", Kind::Number),
    ("omit_empty_error_message", Kind::Switch),
    ("journal", Kind::Text),
    ("lease_ms", Kind::Number),
    ("busy_wait_ms", Kind::Number),
    ("durable", Kind::Switch),
    ("claim_at_finish", Kind::Switch),
    ("first_index", Kind::Number),
    ("max_reply_bytes", Kind::Number),
    ("lock_timeout_ms", Kind::Number),
    ("command_timeout_ms", Kind::Number),
    ("max_index_jump", Kind::Number),
    ("not_found_limit", Kind::Number),
    ("retention_ms", Kind::Number),
    ("retry_after", Kind::Number),
    ("optimistic", Kind::Switch),
];

impl Endpoint {
    /// An endpoint from the environment: each setting of `from_settings` from the variable
    /// `SLOTPARTNER_<KEY>` (`SLOTPARTNER_TOKEN`, `SLOTPARTNER_SOURCES`, `SLOTPARTNER_JOURNAL`,
    /// `SLOTPARTNER_CLAIM_AT_FINISH`, ...), as libpq reads `PGHOST`: unset or empty leaves the
    /// default; a switch is `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`; `SLOTPARTNER_TOKEN`
    /// may hold two tokens separated by a comma. Errors: `InvalidArgument` naming the variable
    /// whose text cannot be read, or the setting whose value is refused; with no token, field
    /// `token` and a message asking whether `SLOTPARTNER_TOKEN` is set.
    pub fn from_environment() -> Result<Endpoint> {
        let mut settings = serde_json::Map::new();
        for (key, kind) in KEYS {
            let name = format!("SLOTPARTNER_{}", key.to_ascii_uppercase());
            let Some(raw) = std::env::var_os(&name) else { continue };
            let refused = |problem: &str| Error::field(ErrorKind::InvalidArgument, &name, problem.to_owned());
            let text = raw.to_str().ok_or_else(|| refused("is not UTF-8"))?.trim();
            if text.is_empty() {
                continue;
            }
            let value = match kind {
                Kind::Text => serde_json::Value::from(text),
                Kind::Tokens => text.split(',').map(str::trim).collect::<Vec<_>>().into(),
                Kind::Switch => match text.to_ascii_lowercase().as_str() {
                    "1" | "true" | "yes" | "on" => true.into(),
                    "0" | "false" | "no" | "off" => false.into(),
                    _ => return Err(refused(&format!("expected 1 or 0 (true or false), got {text:?}"))),
                },
                Kind::Number => {
                    text.parse::<i64>().map_err(|_| refused(&format!("expected an integer, got {text:?}")))?.into()
                }
            };
            settings.insert(key.to_owned(), value);
        }
        let json = serde_json::Value::Object(settings).to_string();
        Endpoint::from_settings(json.as_bytes()).map_err(|mut error| {
            if error.field == "token" && std::env::var("SLOTPARTNER_TOKEN").map_or(true, |t| t.trim().is_empty()) {
                error.message.push_str(" (is SLOTPARTNER_TOKEN set?)");
            }
            error
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";

    fn refusal(json: &str) -> Error {
        Endpoint::from_settings(json.as_bytes()).expect_err(json)
    }

    #[test]
    fn settings_are_read_strictly_and_each_refusal_names_its_key() {
        let ok = format!(r#"{{"token":"{TOKEN}","sources":"any","journal":null,"retry_after":30}}"#);
        assert!(Endpoint::from_settings(ok.as_bytes()).is_ok());
        let typo = refusal(&format!(r#"{{"token":"{TOKEN}","sourcse":"any"}}"#));
        assert_eq!(typo.field, "settings");
        assert!(typo.message.contains("sourcse"), "{typo}");
        let wrong_type = refusal(&format!(r#"{{"token":"{TOKEN}","max_body_bytes":"64k"}}"#));
        assert!(wrong_type.message.contains("invalid type"), "{wrong_type}");
        assert_eq!(refusal("{}").field, "token");
        assert_eq!(refusal(&format!(r#"{{"token":"{TOKEN}","sources":"nowhere"}}"#)).field, "sources");
        assert_eq!(refusal(&format!(r#"{{"token":"{TOKEN}","retry_after":0}}"#)).field, "retry_after");
        let jump = refusal(&format!(r#"{{"token":"{TOKEN}","journal":"sqlite:/tmp/x.db","max_index_jump":0}}"#));
        assert_eq!(jump.field, "max_index_jump");
        assert_eq!(refusal("[1]").field, "settings");
    }

    #[test]
    fn every_setting_has_its_environment_variable() {
        let all: Vec<String> = KEYS.iter().map(|(key, _)| format!(r#""{key}":null"#)).collect();
        let every = format!("{{{}}}", all.join(","));
        let error = Endpoint::from_settings(every.as_bytes()).expect_err("no token");
        assert_eq!(error.field, "token", "every key is a setting: {error}");
        let unknown = r#"{"token":null,"no_such_key":null}"#;
        assert_eq!(Endpoint::from_settings(unknown.as_bytes()).expect_err("unknown").field, "settings");
    }
}
