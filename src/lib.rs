//! slotpartner: the partner side of the slot-machine game service's partner interface.
//!
//! The safe core lives in this crate's modules; the C ABI lives in `ffi`. Data flows one way:
//! bytes in, `event::parse`, a typed `Event`, the partner's logic, `reply`, bytes out.

pub mod auth;
pub mod client;
pub mod error;
pub mod event;
pub mod ffi;
pub mod fields;
pub mod games;
pub mod journal;
pub mod json;
pub mod locale;
pub mod options;
pub mod receiver;
pub mod reply;
pub mod response;
pub mod scan;
pub mod sources;

pub use error::{Error, ErrorKind, Result};
pub use event::{BalanceQuery, BuyRefund, Event, EventKind, JackpotPayout, KnownEvent, parse};
pub use journal::{Begin, Claim, Delivery, Journal, JournalOptions};
pub use options::ParseOptions;
pub use receiver::{Receiver, ReceiverConfig, Request};
pub use response::Response;
