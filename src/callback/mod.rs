//! Callbacks in: the service's events read from their bodies and answered. A `Receiver`
//! authenticates a request (`auth`, `sources`), reads and validates its body in one pass
//! (`json`, `scan`, `fields`, `event`) into a typed `Event`, and builds the reply (`reply`) or
//! the answer to a refusal (`response`). `spec` holds the spec's field names and events.

pub(crate) mod auth;
pub(crate) mod event;
pub(crate) mod fields;
pub(crate) mod json;
pub(crate) mod options;
pub(crate) mod quick_scan;
pub(crate) mod receiver;
pub(crate) mod reply;
pub(crate) mod response;
pub(crate) mod scan;
pub(crate) mod sources;
pub(crate) mod spec;
pub(crate) mod valid_text;
pub(crate) mod words;

pub use event::{BalanceQuery, BuyRefund, Event, EventKind, JackpotPayout, parse};
pub use json::{Field, RawJson};
pub use options::ParseOptions;
pub use receiver::{DEFAULT_BALANCE_FAILURE_HTTP_STATUS, Receiver, ReceiverConfig, Request};
pub use response::Response;
pub use spec::KnownEvent;
