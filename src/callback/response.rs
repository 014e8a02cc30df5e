//! The HTTP answer a partner endpoint gives when a callback is refused.

use crate::callback::json::quoted;
use crate::error::{Error, ErrorKind};

/// An HTTP status and a JSON body, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub http_status: u16,
    pub body: String,
}

/// The HTTP status for an error kind when the failure cannot be answered inside an event wrapper.
pub fn http_status(kind: ErrorKind) -> u16 {
    match kind {
        ErrorKind::MissingToken | ErrorKind::WrongToken => 401,
        ErrorKind::ForbiddenSource => 403,
        ErrorKind::BodyTooLarge => 413,
        ErrorKind::InvalidArgument => 500,
        // Failures of calls out to the service: a gateway's answer, should a host relay one.
        ErrorKind::Connect
        | ErrorKind::Tls
        | ErrorKind::HttpStatus
        | ErrorKind::BadResponse
        | ErrorKind::ResponseTooLarge => 502,
        ErrorKind::Timeout => 504,
        // The same key with other content: refused for good, the first delivery stays.
        ErrorKind::Conflict => 409,
        // The journal's storage failed, or another worker took the claim over: nothing was
        // stored, so the service should deliver again later.
        ErrorKind::Journal | ErrorKind::ClaimLost | ErrorKind::Busy => 503,
        ErrorKind::InvalidUtf8
        | ErrorKind::InvalidJson
        | ErrorKind::DuplicateKey
        | ErrorKind::TooDeep
        | ErrorKind::NotAnObject
        | ErrorKind::MissingField
        | ErrorKind::WrongType
        | ErrorKind::OutOfRange
        | ErrorKind::InvalidValue
        | ErrorKind::UnknownEvent => 400,
    }
}

/// `{"error":{"code":"<code>","field":"<field>","message":"<message>"}}` with the kind's status.
pub fn error_body(error: &Error) -> Response {
    Response {
        http_status: http_status(error.kind),
        body: format!(
            r#"{{"error":{{"code":"{}","field":{},"message":{}}}}}"#,
            error.kind.code(),
            quoted(&error.field),
            quoted(&error.message)
        ),
    }
}
