//! The C ABI: the only place with `unsafe` and `extern "C"`. One file per header section; each
//! function converts its arguments, calls the safe core and converts the result back.
#![allow(non_camel_case_types)]

#[macro_use]
mod panic;
#[macro_use]
mod zero_padded;
pub mod args;
pub mod client;
pub(crate) mod clock;
pub mod endpoint;
pub mod error;
pub mod event;
mod event_tail;
pub(crate) mod fork;
pub mod games;
pub mod journal;
pub mod owned;
pub mod receiver;
pub mod record;
pub mod recovery;
pub mod reply;
mod shared;
mod spare;
pub mod staged;

pub mod status;
pub mod str;
pub mod version;

/// Compiles only for `T: Send + Sync`: the shared objects' docs promise any number of threads.
const fn assert_send_sync<T: Send + Sync>() {}
const _: () = assert_send_sync::<receiver::sp_receiver>();
const _: () = assert_send_sync::<client::sp_client>();
const _: () = assert_send_sync::<journal::sp_journal>();
const _: () = assert_send_sync::<endpoint::sp_endpoint>();
