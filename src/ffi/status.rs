//! Status codes: `sp_status` and `sp_status_name`.

use std::ffi::c_char;

use crate::error::ErrorKind;

/// The result of every fallible function. `SP_OK` is 0; codes are never renumbered, new ones are
/// only appended. Details of the last failure on the calling thread: `sp_last_error_message()`,
/// `sp_last_error_field()` and `sp_last_error_response()`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum sp_status {
    /// Success.
    SP_OK = 0,
    /// An argument is NULL, not UTF-8, or an unusable value (a bad configuration setting).
    SP_ERR_INVALID_ARGUMENT = 1,
    /// The library panicked; the call had no effect. Please report it.
    SP_ERR_PANIC = 2,
    /// The body is larger than the receiver's limit (HTTP 413).
    SP_ERR_BODY_TOO_LARGE = 3,
    /// The body is not valid UTF-8 or starts with a byte order mark (HTTP 400).
    SP_ERR_INVALID_UTF8 = 4,
    /// The body is not valid JSON, or a string in it holds a lone surrogate escape (HTTP 400).
    SP_ERR_INVALID_JSON = 5,
    /// An object in the body repeats a key (HTTP 400).
    SP_ERR_DUPLICATE_KEY = 6,
    /// The body nests deeper than the receiver's limit (HTTP 400).
    SP_ERR_TOO_DEEP = 7,
    /// The body is JSON but not an object (HTTP 400).
    SP_ERR_NOT_AN_OBJECT = 8,
    /// A required field is absent.
    SP_ERR_MISSING_FIELD = 9,
    /// A field has the wrong JSON type (`1.0` or `"1"` where an integer is expected).
    SP_ERR_WRONG_TYPE = 10,
    /// A number is out of its range (a negative amount, an amount above 2^53-1).
    SP_ERR_OUT_OF_RANGE = 11,
    /// A string breaks its rule (empty, control character, too long, bad currency code).
    SP_ERR_INVALID_VALUE = 12,
    /// An event the receiver does not know (refused, or asked for a reply) (HTTP 400).
    SP_ERR_UNKNOWN_EVENT = 13,
    /// The `X-Service-Token` header is missing (HTTP 401).
    SP_ERR_MISSING_TOKEN = 14,
    /// The `X-Service-Token` header does not match a partner token (HTTP 401).
    SP_ERR_WRONG_TOKEN = 15,
    /// The source address is not allowed (HTTP 403).
    SP_ERR_FORBIDDEN_SOURCE = 16,
    /// The service could not be reached (connection refused, unknown host, proxy failure).
    SP_ERR_CONNECT = 17,
    /// A connect or overall time-out elapsed.
    SP_ERR_TIMEOUT = 18,
    /// The TLS handshake failed (an untrusted certificate, among others).
    SP_ERR_TLS = 19,
    /// The service answered with an HTTP status other than 200 (the message holds the status and
    /// the start of the body).
    SP_ERR_HTTP_STATUS = 20,
    /// The service's answer is not the expected shape (the field names the culprit).
    SP_ERR_BAD_RESPONSE = 21,
    /// The service's answer is larger than the client's limit.
    SP_ERR_RESPONSE_TOO_LARGE = 22,
    /// The delivery journal holds this delivery's key (its `transactionId`) with different
    /// content: the first delivery stays, this one is refused (HTTP 409).
    SP_ERR_CONFLICT = 23,
    /// The delivery journal's storage failed: PostgreSQL unreachable, a read-only or corrupt
    /// SQLite file, an unknown schema version, a full disk (HTTP 503, so the service retries).
    SP_ERR_JOURNAL = 24,
    /// The journal claim is no longer this event's: the claim was abandoned, or its lease expired
    /// and another attempt took it over; nothing was stored (HTTP 503). From then on
    /// `sp_event_finish` fails with it every time, and so does `sp_event_abandon` after a
    /// takeover.
    SP_ERR_CLAIM_LOST = 25,
    /// Another worker holds a live claim on this delivery and did not finish it within the
    /// journal's busy wait (HTTP 503, so the service delivers again later).
    SP_ERR_BUSY = 26,
}

/// Every status, in code order (used by `sp_status_name` and the tests).
pub const ALL_STATUSES: [sp_status; 27] = {
    use sp_status::*;
    [
        SP_OK,
        SP_ERR_INVALID_ARGUMENT,
        SP_ERR_PANIC,
        SP_ERR_BODY_TOO_LARGE,
        SP_ERR_INVALID_UTF8,
        SP_ERR_INVALID_JSON,
        SP_ERR_DUPLICATE_KEY,
        SP_ERR_TOO_DEEP,
        SP_ERR_NOT_AN_OBJECT,
        SP_ERR_MISSING_FIELD,
        SP_ERR_WRONG_TYPE,
        SP_ERR_OUT_OF_RANGE,
        SP_ERR_INVALID_VALUE,
        SP_ERR_UNKNOWN_EVENT,
        SP_ERR_MISSING_TOKEN,
        SP_ERR_WRONG_TOKEN,
        SP_ERR_FORBIDDEN_SOURCE,
        SP_ERR_CONNECT,
        SP_ERR_TIMEOUT,
        SP_ERR_TLS,
        SP_ERR_HTTP_STATUS,
        SP_ERR_BAD_RESPONSE,
        SP_ERR_RESPONSE_TOO_LARGE,
        SP_ERR_CONFLICT,
        SP_ERR_JOURNAL,
        SP_ERR_CLAIM_LOST,
        SP_ERR_BUSY,
    ]
};

impl From<ErrorKind> for sp_status {
    fn from(kind: ErrorKind) -> Self {
        use sp_status::*;
        match kind {
            ErrorKind::InvalidArgument => SP_ERR_INVALID_ARGUMENT,
            ErrorKind::BodyTooLarge => SP_ERR_BODY_TOO_LARGE,
            ErrorKind::InvalidUtf8 => SP_ERR_INVALID_UTF8,
            ErrorKind::InvalidJson => SP_ERR_INVALID_JSON,
            ErrorKind::DuplicateKey => SP_ERR_DUPLICATE_KEY,
            ErrorKind::TooDeep => SP_ERR_TOO_DEEP,
            ErrorKind::NotAnObject => SP_ERR_NOT_AN_OBJECT,
            ErrorKind::MissingField => SP_ERR_MISSING_FIELD,
            ErrorKind::WrongType => SP_ERR_WRONG_TYPE,
            ErrorKind::OutOfRange => SP_ERR_OUT_OF_RANGE,
            ErrorKind::InvalidValue => SP_ERR_INVALID_VALUE,
            ErrorKind::UnknownEvent => SP_ERR_UNKNOWN_EVENT,
            ErrorKind::MissingToken => SP_ERR_MISSING_TOKEN,
            ErrorKind::WrongToken => SP_ERR_WRONG_TOKEN,
            ErrorKind::ForbiddenSource => SP_ERR_FORBIDDEN_SOURCE,
            ErrorKind::Connect => SP_ERR_CONNECT,
            ErrorKind::Timeout => SP_ERR_TIMEOUT,
            ErrorKind::Tls => SP_ERR_TLS,
            ErrorKind::HttpStatus => SP_ERR_HTTP_STATUS,
            ErrorKind::BadResponse => SP_ERR_BAD_RESPONSE,
            ErrorKind::ResponseTooLarge => SP_ERR_RESPONSE_TOO_LARGE,
            ErrorKind::Conflict => SP_ERR_CONFLICT,
            ErrorKind::Journal => SP_ERR_JOURNAL,
            ErrorKind::ClaimLost => SP_ERR_CLAIM_LOST,
            ErrorKind::Busy => SP_ERR_BUSY,
        }
    }
}

impl sp_status {
    /// The status's name as a NUL-terminated static string.
    pub fn name(self) -> &'static std::ffi::CStr {
        use sp_status::*;
        match self {
            SP_OK => c"SP_OK",
            SP_ERR_INVALID_ARGUMENT => c"SP_ERR_INVALID_ARGUMENT",
            SP_ERR_PANIC => c"SP_ERR_PANIC",
            SP_ERR_BODY_TOO_LARGE => c"SP_ERR_BODY_TOO_LARGE",
            SP_ERR_INVALID_UTF8 => c"SP_ERR_INVALID_UTF8",
            SP_ERR_INVALID_JSON => c"SP_ERR_INVALID_JSON",
            SP_ERR_DUPLICATE_KEY => c"SP_ERR_DUPLICATE_KEY",
            SP_ERR_TOO_DEEP => c"SP_ERR_TOO_DEEP",
            SP_ERR_NOT_AN_OBJECT => c"SP_ERR_NOT_AN_OBJECT",
            SP_ERR_MISSING_FIELD => c"SP_ERR_MISSING_FIELD",
            SP_ERR_WRONG_TYPE => c"SP_ERR_WRONG_TYPE",
            SP_ERR_OUT_OF_RANGE => c"SP_ERR_OUT_OF_RANGE",
            SP_ERR_INVALID_VALUE => c"SP_ERR_INVALID_VALUE",
            SP_ERR_UNKNOWN_EVENT => c"SP_ERR_UNKNOWN_EVENT",
            SP_ERR_MISSING_TOKEN => c"SP_ERR_MISSING_TOKEN",
            SP_ERR_WRONG_TOKEN => c"SP_ERR_WRONG_TOKEN",
            SP_ERR_FORBIDDEN_SOURCE => c"SP_ERR_FORBIDDEN_SOURCE",
            SP_ERR_CONNECT => c"SP_ERR_CONNECT",
            SP_ERR_TIMEOUT => c"SP_ERR_TIMEOUT",
            SP_ERR_TLS => c"SP_ERR_TLS",
            SP_ERR_HTTP_STATUS => c"SP_ERR_HTTP_STATUS",
            SP_ERR_BAD_RESPONSE => c"SP_ERR_BAD_RESPONSE",
            SP_ERR_RESPONSE_TOO_LARGE => c"SP_ERR_RESPONSE_TOO_LARGE",
            SP_ERR_CONFLICT => c"SP_ERR_CONFLICT",
            SP_ERR_JOURNAL => c"SP_ERR_JOURNAL",
            SP_ERR_CLAIM_LOST => c"SP_ERR_CLAIM_LOST",
            SP_ERR_BUSY => c"SP_ERR_BUSY",
        }
    }
}

/// The name of a status code, such as `"SP_ERR_WRONG_TYPE"`: a static NUL-terminated string,
/// never freed. A code that is not a status gives the name of `SP_ERR_INVALID_ARGUMENT`.
/// Takes `int` rather than `sp_status` so that any value a host passes is safe.
#[unsafe(no_mangle)]
pub extern "C" fn sp_status_name(code: i32) -> *const c_char {
    value_boundary!(c"SP_ERR_PANIC".as_ptr(), {
        let status = usize::try_from(code).ok().and_then(|i| ALL_STATUSES.get(i)).copied();
        status.unwrap_or(sp_status::SP_ERR_INVALID_ARGUMENT).name().as_ptr()
    })
}
