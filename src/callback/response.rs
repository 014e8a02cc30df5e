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

/// What the caller is told of a failure of the journal's storage: never its URL, host, user,
/// SQL or the server's message (those stay in the error for the host's log).
pub const JOURNAL_UNAVAILABLE: &str = "the partner is temporarily unavailable; deliver again later";

/// What the caller is told of a configuration error of the host's (a receiver setting such as
/// its token or sources, the journal's URL refused at open): HTTP 500 and nothing of the
/// setting, its value, a path or a server. The caller may be anyone who reached the endpoint,
/// and has not been authenticated when the receiver could not be made; the host's log has the
/// error's message, which names the setting and the problem.
pub const MISCONFIGURED: &str = "the partner is misconfigured; its log says how";

/// `{"error":{"code":"<code>","field":"<field>","message":"<message>"}}` with the kind's status.
/// A failure of the journal's storage (`ErrorKind::Journal`) says only that the partner is
/// temporarily unavailable (503): the caller may be anyone who reached the endpoint.
pub fn error_body(error: &Error) -> Response {
    let (field, message) = match error.kind {
        ErrorKind::Journal => ("", JOURNAL_UNAVAILABLE),
        // The host's own configuration refused (a receiver setting, the journal's URL: another
        // program's file, a TLS setting): its mistake, and none of it is the caller's business.
        ErrorKind::InvalidArgument => ("", MISCONFIGURED),
        _ if error.field == "journal_url" => ("", MISCONFIGURED),
        _ => (error.field.as_str(), error.message.as_str()),
    };
    Response {
        http_status: http_status(error.kind),
        body: format!(
            r#"{{"error":{{"code":"{}","field":{},"message":{}}}}}"#,
            error.kind.code(),
            quoted(field),
            quoted(message)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_failure_shows_the_caller_nothing_of_the_storage() {
        let error = Error::new(
            ErrorKind::Journal,
            "postgres://partner@db.internal:5432/partner: error communicating with the server",
        );
        let response = error_body(&error);
        assert_eq!(response.http_status, 503);
        assert!(!response.body.contains("db.internal") && !response.body.contains("postgres"), "{}", response.body);
        assert!(response.body.contains(JOURNAL_UNAVAILABLE), "{}", response.body);
        assert!(error.message.contains("db.internal"), "the host's log keeps it");
        let refused = Error::field(
            ErrorKind::InvalidArgument,
            "journal_url",
            "sqlite:/var/lib/partner/journal.db holds another program's database (tables wallet_credits)",
        );
        let response = error_body(&refused);
        assert_eq!(response.http_status, 500);
        assert!(!response.body.contains("/var/lib") && !response.body.contains("wallet"), "{}", response.body);
        let sources =
            Error::field(ErrorKind::InvalidArgument, "sources", "\"127.0.0.1;::1\" is not an address or range");
        let response = error_body(&sources);
        assert_eq!(response.http_status, 500);
        assert!(!response.body.contains("127.0.0.1") && !response.body.contains("sources"), "{}", response.body);
        assert!(response.body.contains(MISCONFIGURED), "{}", response.body);
        let conflict =
            Error::field(ErrorKind::Conflict, "jackpotPayout.transactionId", "transactionId 5 was delivered before");
        assert!(error_body(&conflict).body.contains("transactionId 5"));
    }
}
