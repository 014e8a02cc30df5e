//! Fetching a lost event again through the action address. The spec says a lost event "can be
//! obtained later through the partner-to-service interface by giving the id of the lost event",
//! but shows neither the operation, nor its parameter, nor the answer's shape: all three are
//! settings, with documented defaults (`getEvent`, `index`, the event under `event`).

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use crate::callback::json::{excerpt, quoted};
use crate::error::{Error, ErrorKind, Result};

/// How a lost event is asked for and found in the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchSettings {
    /// The operation's name, sent as `action`. Default `getEvent` (an assumption).
    pub action: String,
    /// The name of the parameter carrying the lost event's index. Default `index`.
    pub index_param: String,
    /// The key of the answer object holding the event; empty when the answer is the event
    /// itself. Default `event`.
    pub event_key: String,
}

impl Default for FetchSettings {
    fn default() -> Self {
        FetchSettings { action: "getEvent".to_owned(), index_param: "index".to_owned(), event_key: "event".to_owned() }
    }
}

impl FetchSettings {
    /// The request body asking for the event at `index`.
    pub(crate) fn request(&self, index: i64) -> Result<String> {
        if index < 0 {
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "index",
                format!("expected a non-negative index, got {index}"),
            ));
        }
        Ok(format!(r#"{{"action":{},{}:{index}}}"#, quoted(&self.action), quoted(&self.index_param)))
    }

    /// The event's raw JSON text in `answer`, exactly as the service wrote it (so that the
    /// callback validation reads it as it would read a delivered body).
    pub(crate) fn event_text<'a>(&self, answer: &'a str) -> Result<&'a str> {
        let field = format!("{}.{}", self.action, self.event_key);
        if self.event_key.is_empty() {
            return Ok(answer.trim());
        }
        let object: BTreeMap<String, &RawValue> = serde_json::from_str(answer).map_err(|e| {
            let problem = format!("expected a JSON object holding the event ({e}): {}", excerpt(answer));
            Error::field(ErrorKind::BadResponse, &field, problem)
        })?;
        let event = object.get(&self.event_key).ok_or_else(|| {
            Error::field(ErrorKind::BadResponse, &field, format!("the answer holds no event: {}", excerpt(answer)))
        })?;
        Ok(event.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_and_the_event_follow_the_settings() {
        let settings = FetchSettings::default();
        assert_eq!(settings.request(42).unwrap(), r#"{"action":"getEvent","index":42}"#);
        assert_eq!(settings.request(-1).unwrap_err().field, "index");
        let answer = r#"{"event": {"event":"jackpotPayout","index":42} , "other":1}"#;
        assert_eq!(settings.event_text(answer).unwrap(), r#"{"event":"jackpotPayout","index":42}"#);
        assert_eq!(settings.event_text(r#"{"other":1}"#).unwrap_err().field, "getEvent.event");
        assert_eq!(settings.event_text("<html>").unwrap_err().kind, ErrorKind::BadResponse);
        let whole = FetchSettings { event_key: String::new(), ..FetchSettings::default() };
        assert_eq!(whole.event_text(" {\"a\":1} ").unwrap(), "{\"a\":1}");
        let custom =
            FetchSettings { action: "fetchLost".into(), index_param: "eventId".into(), event_key: String::new() };
        assert_eq!(custom.request(7).unwrap(), r#"{"action":"fetchLost","eventId":7}"#);
    }
}
