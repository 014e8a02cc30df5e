//! slotpartner: the partner side of the slot-machine game service's partner interface.
//!
//! Three parts, each in its folder: `callback` (callbacks in: authenticate, read, validate and
//! answer the service's events), `client` (actions out: the HTTPS client for the action
//! address, `getGames`), and `journal` (delivery guarantees: every event handled once, lost
//! events found by their index), and `endpoint` (the whole request in one call, on top of the
//! three). The safe core is those and `error`; the C ABI lives in `ffi`,
//! the only module allowed `unsafe`. Data flows one way: bytes in, `parse`, a typed `Event`, the
//! partner's logic, a reply, bytes out.
#![deny(unsafe_code)]

pub mod callback;
pub mod client;
pub mod endpoint;
pub mod error;
#[allow(unsafe_code)]
pub mod ffi;
pub mod journal;

pub use callback::{
    BalanceQuery, BuyRefund, Event, EventKind, JackpotPayout, KnownEvent, ParseOptions, Receiver, ReceiverConfig,
    Request, Response, parse,
};
pub use error::{Error, ErrorKind, EventIds, Result};
pub use journal::{Begin, Claim, Delivery, Journal, JournalOptions};
