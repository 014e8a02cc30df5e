//! The final HTTP answer of an endpoint: a status, the headers that go with it, a JSON body, and a
//! line for the host's log (never sent).

use crate::callback::json::quoted;
use crate::callback::response::{self, JOURNAL_UNAVAILABLE};
use crate::error::Error;

/// The `Content-Type` of every body an endpoint answers: each one is JSON.
pub const CONTENT_TYPE: &str = "application/json; charset=utf-8";

/// What an endpoint sends back for one request. Every header it needs is here: `Content-Type`
/// (always [`CONTENT_TYPE`]), `Retry-After` (seconds) when `retry_after` is set, `Allow: POST`
/// when `allow_post` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status: 200, or the refusal's (401, 403, 405, 409, 413, 400, 500, 503).
    pub status: u16,
    /// The JSON body, byte for byte what to send (a stored reply is the first reply's bytes).
    pub body: Vec<u8>,
    /// `Retry-After` in seconds: set on every 503, the answers after which the service should
    /// deliver again.
    pub retry_after: Option<u32>,
    /// `Allow: POST`: set on the 405 of a method other than POST.
    pub allow_post: bool,
    /// One line for the host's log when something is worth logging (a refusal, a repeat, a
    /// failure with its cause, the journal's URL and server message included); empty otherwise.
    /// Never sent to the caller.
    pub log: String,
}

impl Answer {
    /// A reply the partner's logic built (or the journal stored), sent as it is.
    pub fn reply(status: u16, body: Vec<u8>, log: String) -> Answer {
        Answer { status, body, retry_after: None, allow_post: false, log }
    }

    /// What a refusal or a failure deserves, as `callback::response::error_body` says (a
    /// journal's failure names nothing of the journal), with `Retry-After` on a 503. The log
    /// line is `what: ` and the error's whole message.
    pub fn error(error: &Error, what: &str, retry_after: u32) -> Answer {
        let response = response::error_body(error);
        Answer::error_body(response.http_status, response.body.into_bytes(), format!("{what}: {error}"), retry_after)
    }

    /// An error answer whose body is already built (`Receiver::error_response`).
    pub fn error_body(status: u16, body: Vec<u8>, log: String, retry_after: u32) -> Answer {
        let retry_after = (status == 503).then_some(retry_after);
        Answer { status, body, retry_after, allow_post: false, log }
    }

    /// 405 with `Allow: POST` for any method other than POST.
    pub fn method_not_allowed(method: &[u8]) -> Answer {
        let body = br#"{"error":{"code":"method_not_allowed","field":"","message":"only POST is accepted"}}"#;
        let shown = String::from_utf8_lossy(&method[..method.len().min(32)]).into_owned();
        let log = format!("refused: method {}: only POST is accepted", quoted(&shown));
        Answer { status: 405, body: body.to_vec(), retry_after: None, allow_post: true, log }
    }

    /// 503 with `Retry-After` after a failure of the partner's logic or of the journal past the
    /// claim: the claim was released (or its lease ends it), the service delivers again. The
    /// body names nothing of the partner: the caller may be anyone who reached the endpoint.
    pub fn unavailable(log: String, retry_after: u32) -> Answer {
        let body =
            format!(r#"{{"error":{{"code":"unavailable","field":"","message":{}}}}}"#, quoted(JOURNAL_UNAVAILABLE));
        Answer { status: 503, body: body.into_bytes(), retry_after: Some(retry_after), allow_post: false, log }
    }
}

/// The reason phrase of a status an endpoint answers (`Service Unavailable` for 503), for a CGI
/// `Status:` line or an HTTP/1.1 status line; `Unknown` for another.
pub fn reason_phrase(status: u16) -> &'static std::ffi::CStr {
    match status {
        200 => c"OK",
        400 => c"Bad Request",
        401 => c"Unauthorized",
        403 => c"Forbidden",
        405 => c"Method Not Allowed",
        409 => c"Conflict",
        413 => c"Content Too Large",
        500 => c"Internal Server Error",
        502 => c"Bad Gateway",
        503 => c"Service Unavailable",
        504 => c"Gateway Timeout",
        _ => c"Unknown",
    }
}
