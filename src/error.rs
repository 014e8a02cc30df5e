//! The one error type of the core: what went wrong, which field, and a message for people.

use std::fmt;

use crate::callback::spec::KnownEvent;
use crate::client::TlsProblem;

/// What kind of failure happened. The C ABI maps each kind to one stable `sp_status` code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// An argument given by the caller (not the service) is unusable: a bad configuration value.
    InvalidArgument,
    /// The callback body is larger than the configured limit.
    BodyTooLarge,
    /// The callback body is not valid UTF-8, or starts with a byte order mark.
    InvalidUtf8,
    /// The callback body is not valid JSON (syntax, lone surrogate escape, trailing data).
    InvalidJson,
    /// An object in the body names the same key twice.
    DuplicateKey,
    /// The body nests arrays and objects deeper than the configured limit.
    TooDeep,
    /// The body is valid JSON but its top level is not an object.
    NotAnObject,
    /// A required field is absent.
    MissingField,
    /// A field has the wrong JSON type (a string where an integer is expected, `1.0` for an integer).
    WrongType,
    /// A number is outside its allowed range (negative amount, above 2^53-1, ...).
    OutOfRange,
    /// A string field breaks its rule (empty, control character, too long, bad currency code).
    InvalidValue,
    /// The `X-Service-Token` header is absent.
    MissingToken,
    /// The `X-Service-Token` header does not match a configured partner token.
    WrongToken,
    /// The request's source address is not allowed.
    ForbiddenSource,
    /// The event is not one of the known events, and the receiver refuses unknown events (or a
    /// reply was asked for an event that has no known reply wrapper).
    UnknownEvent,
    /// The service could not be reached (connection refused, unknown host, proxy failure).
    Connect,
    /// A connect or overall time-out elapsed.
    Timeout,
    /// The TLS handshake failed (an untrusted or invalid certificate, among others).
    Tls,
    /// The service answered with an HTTP status other than 200.
    HttpStatus,
    /// The service's answer is not the expected shape (not JSON, a field missing or mistyped).
    BadResponse,
    /// The service's answer is larger than the configured limit.
    ResponseTooLarge,
    /// The delivery journal already holds this delivery's key with different content (the same
    /// `transactionId`, other amounts or identifiers): the first delivery stays, this one is refused.
    Conflict,
    /// The delivery journal's storage failed: PostgreSQL unreachable, a read-only or corrupt SQLite
    /// file, a journal of an unknown schema version, a full disk. Transient as far as the service is
    /// concerned: answer so that it delivers again later (HTTP 503).
    Journal,
    /// A journal claim is no longer held by its worker: its lease expired and another delivery took
    /// it over (or it was finished or abandoned already). Nothing was stored.
    ClaimLost,
    /// Another worker holds a live claim on this delivery and did not finish it within the
    /// journal's busy wait: answer so that the service delivers again later (HTTP 503).
    Busy,
}

/// A failure with the field it concerns (when there is one) and a message naming the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    /// The offending field as `event.field` (for example `jackpotPayout.moneyWon`), or a
    /// configuration key; empty when the failure concerns no single field.
    pub field: String,
    /// A complete sentence for logs and replies, starting with the field when there is one.
    pub message: String,
    /// The known event whose body failed validation, so that the reply can use its wrapper
    /// (`refund`, `payout`, ...); `None` when the event was not recognised.
    pub event: Option<KnownEvent>,
    /// What a refused body still let be read of the event's identity (its name, index and
    /// `transactionId`), so that hosts can log a refusal and a journal can record its index as
    /// seen; `None` for failures that are not about a callback body, or when the body let nothing
    /// be read (not JSON, say). Never read from a request that failed authentication.
    pub ids: Option<Box<EventIds>>,
    /// What a failed call to the service was about beyond its kind, for a caller that words its
    /// own advice (the message already holds the library's); `None` for other failures.
    pub cause: Option<Box<Cause>>,
}

/// What a client failure was about, beyond its [`ErrorKind`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The service answered with this HTTP status (kind `HttpStatus`): 401 when it refused the
    /// partner token.
    HttpStatus(u16),
    /// The TLS handshake failed for a cause that has a remedy (kind `Tls`): the problem, and the
    /// transport's own words (`io: invalid peer certificate: UnknownIssuer`), which the message
    /// follows with the library's advice ([`TlsProblem::hint`]).
    Tls { problem: TlsProblem, detail: String },
}

/// The identity of an event as far as a body let it be read, each part independently.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventIds {
    /// The `event` value, or `action` for the balance query and other actions.
    pub name: Option<String>,
    /// The service's consecutive index, when it is a non-negative integer.
    pub index: Option<i64>,
    /// `transactionId`, when it is an integer.
    pub transaction_id: Option<i64>,
}

impl Error {
    /// An error that concerns no single field. Cold, like every error constructor: kept out of
    /// the hot paths' code, so that a callback's instructions stay together.
    #[cold]
    #[inline(never)]
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, field: String::new(), message: message.into(), event: None, ids: None, cause: None }
    }

    /// An error about `field`; the message becomes `field: problem`.
    #[cold]
    #[inline(never)]
    pub fn field(kind: ErrorKind, field: impl Into<String>, problem: impl fmt::Display) -> Self {
        let field = field.into();
        let message = format!("{field}: {problem}");
        Error { kind, field, message, event: None, ids: None, cause: None }
    }

    /// The same error, attributed to the known event `event`.
    pub fn for_event(self, event: Option<KnownEvent>) -> Self {
        Error { event, ..self }
    }

    /// The same error, carrying what the refused body let be read of the event's identity.
    pub fn with_ids(self, ids: Option<EventIds>) -> Self {
        Error { ids: ids.map(Box::new), ..self }
    }

    /// The same error, with what it was about beyond its kind.
    pub fn with_cause(self, cause: Cause) -> Self {
        Error { cause: Some(Box::new(cause)), ..self }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

impl ErrorKind {
    /// A stable lower-case code for JSON error bodies (`{"error":{"code":...}}`).
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::BodyTooLarge => "body_too_large",
            ErrorKind::InvalidUtf8 => "invalid_utf8",
            ErrorKind::InvalidJson => "invalid_json",
            ErrorKind::DuplicateKey => "duplicate_key",
            ErrorKind::TooDeep => "too_deep",
            ErrorKind::NotAnObject => "not_an_object",
            ErrorKind::MissingField => "missing_field",
            ErrorKind::WrongType => "wrong_type",
            ErrorKind::OutOfRange => "out_of_range",
            ErrorKind::InvalidValue => "invalid_value",
            ErrorKind::MissingToken => "missing_token",
            ErrorKind::WrongToken => "wrong_token",
            ErrorKind::ForbiddenSource => "forbidden_source",
            ErrorKind::UnknownEvent => "unknown_event",
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Tls => "tls",
            ErrorKind::HttpStatus => "http_status",
            ErrorKind::BadResponse => "bad_response",
            ErrorKind::ResponseTooLarge => "response_too_large",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Journal => "journal",
            ErrorKind::ClaimLost => "claim_lost",
            ErrorKind::Busy => "busy",
        }
    }
}
