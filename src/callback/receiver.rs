//! The callback receiver: configured once, then authenticates, parses and answers each callback.

use std::borrow::Cow;
use std::sync::Arc;

use ipnet::IpNet;

use crate::callback::auth;
use crate::callback::event::{self, Event};
use crate::callback::json::{self, Field, MAX_DEPTH_CEILING};
use crate::callback::options::ParseOptions;
use crate::callback::reply::{self, BalanceReply};
use crate::callback::response::{self, Response};
use crate::callback::sources::{self, SourcePolicy};
use crate::callback::spec::KnownEvent;
use crate::error::{Error, ErrorKind, Result};
use crate::journal::Journal;

/// The HTTP status of a refused balance query's answer by default: an error status, so that no
/// client reads the answer as a wallet. Its body states no balance either.
pub const DEFAULT_BALANCE_FAILURE_HTTP_STATUS: u16 = 500;

/// Everything a receiver needs, set once. Defaults: no token (one must be added), sources
/// `production`, no trusted proxies, `ParseOptions::default()`, balance wrapper `playerBalance`,
/// balance currency `EUR`, refused balance queries answered HTTP 500 without a balance,
/// `errorMessage: ""` sent on success.
#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    tokens: Vec<String>,
    sources: SourcePolicy,
    trusted_proxies: Vec<IpNet>,
    parse: ParseOptions,
    balance_wrapper: String,
    balance_currency: String,
    balance_failure_http_status: u16,
    omit_empty_error_message: bool,
    journal: Option<Arc<Journal>>,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            tokens: Vec::new(),
            sources: SourcePolicy::parse("sources", "production").expect("built-in policy"),
            trusted_proxies: Vec::new(),
            parse: ParseOptions::default(),
            balance_wrapper: "playerBalance".to_owned(),
            balance_currency: "EUR".to_owned(),
            balance_failure_http_status: DEFAULT_BALANCE_FAILURE_HTTP_STATUS,
            omit_empty_error_message: false,
            journal: None,
        }
    }
}

impl ReceiverConfig {
    /// Adds an accepted partner token (a UUID). At most two: the current and, during a
    /// rotation, the next one.
    pub fn add_token(&mut self, token: &str) -> Result<()> {
        auth::validate_token("token", token)?;
        if self.tokens.len() >= auth::MAX_TOKENS {
            let problem = format!("at most {} tokens (the current one and the next one)", auth::MAX_TOKENS);
            return Err(Error::field(ErrorKind::InvalidArgument, "token", problem));
        }
        self.tokens.push(auth::canonical_token(token));
        Ok(())
    }

    /// Sets the allowed sources: `any`, or a comma-separated list of `staging`, `production`,
    /// addresses and CIDR ranges.
    pub fn set_sources(&mut self, spec: &str) -> Result<()> {
        self.sources = SourcePolicy::parse("sources", spec)?;
        Ok(())
    }

    /// Sets the proxies whose `X-Forwarded-For` is believed (comma-separated addresses and CIDR
    /// ranges; empty for none, the default).
    pub fn set_trusted_proxies(&mut self, spec: &str) -> Result<()> {
        self.trusted_proxies = sources::parse_list("trusted_proxies", spec)?;
        Ok(())
    }

    /// Sets the largest body accepted, in bytes (at least 2).
    pub fn set_max_body_bytes(&mut self, bytes: usize) -> Result<()> {
        self.parse.max_body_bytes = at_least("max_body_bytes", bytes, 2)?;
        Ok(())
    }

    /// Sets the deepest nesting accepted (1 to 100; the top-level object is level 1).
    pub fn set_max_depth(&mut self, depth: usize) -> Result<()> {
        if !(1..=MAX_DEPTH_CEILING).contains(&depth) {
            let problem = format!("expected 1 to {MAX_DEPTH_CEILING}, got {depth}");
            return Err(Error::field(ErrorKind::InvalidArgument, "max_depth", problem));
        }
        self.parse.max_depth = depth;
        Ok(())
    }

    /// Sets the longest identifier accepted, in bytes (at least 1).
    pub fn set_max_identifier_bytes(&mut self, bytes: usize) -> Result<()> {
        self.parse.max_identifier_bytes = at_least("max_identifier_bytes", bytes, 1)?;
        Ok(())
    }

    /// Sets the name of the service's consecutive event index field (default `index`).
    pub fn set_index_field(&mut self, name: &str) -> Result<()> {
        self.parse.index_field = json::checked_name("index_field", name)?.to_owned();
        Ok(())
    }

    /// Refuses an event whose index field is present but not a non-negative integer, instead of
    /// handling it with no index (the default; see `ParseOptions::strict_index`).
    pub fn set_strict_index(&mut self, strict: bool) {
        self.parse.strict_index = strict;
    }

    /// Refuses unknown events with `ErrorKind::UnknownEvent` instead of passing them through.
    pub fn set_reject_unknown_events(&mut self, reject: bool) {
        self.parse.reject_unknown_events = reject;
    }

    /// Sets the wrapper key of the balance reply (default `playerBalance`).
    pub fn set_balance_wrapper(&mut self, wrapper: &str) -> Result<()> {
        self.balance_wrapper = json::checked_name("balance_wrapper", wrapper)?.to_owned();
        Ok(())
    }

    /// Sets the currency of balance replies when the caller names none (default `EUR`).
    pub fn set_balance_currency(&mut self, currency: &str) -> Result<()> {
        if !crate::callback::fields::is_currency_code(currency) {
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "balance_currency",
                "expected three uppercase letters (ISO 4217)",
            ));
        }
        self.balance_currency = currency.to_owned();
        Ok(())
    }

    /// Sets the HTTP status of a refused balance query's answer: 200, or an error status 400 to
    /// 599 (default 500). The body never states a balance either way:
    /// `{"playerBalance":{"errorMessage":"..."}}`.
    pub fn set_balance_failure_http_status(&mut self, status: u16) -> Result<()> {
        if status != 200 && !(400..=599).contains(&status) {
            let problem = format!("expected 200 or an error status from 400 to 599, got {status}");
            return Err(Error::field(ErrorKind::InvalidArgument, "balance_failure_http_status", problem));
        }
        self.balance_failure_http_status = status;
        Ok(())
    }

    /// Journals the receiver's deliveries: a body refused by validation whose index can be read
    /// is recorded as seen and refused (so that it is not reported missing), and the events it
    /// hands out can be claimed with `Receiver::journal`. Default: none.
    pub fn set_journal(&mut self, journal: Arc<Journal>) {
        self.journal = Some(journal);
    }

    /// Takes the journal out of the configuration, leaving none.
    pub fn take_journal(&mut self) -> Option<Arc<Journal>> {
        self.journal.take()
    }

    /// Leaves `errorMessage` out of successful replies instead of sending `""`.
    pub fn set_omit_empty_error_message(&mut self, omit: bool) {
        self.omit_empty_error_message = omit;
    }
}

fn at_least(field: &str, value: usize, min: usize) -> Result<usize> {
    if value < min {
        return Err(Error::field(ErrorKind::InvalidArgument, field, format!("expected at least {min}, got {value}")));
    }
    Ok(value)
}

/// One callback request as the host's web server saw it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Request<'a> {
    /// The `X-Service-Token` header value; `None` when the header is absent.
    pub token: Option<&'a [u8]>,
    /// The peer address of the connection (CGI `REMOTE_ADDR`) as bytes; not looked at under
    /// sources `any`, and no address (a refused source) when it is not UTF-8.
    pub remote_addr: Option<&'a [u8]>,
    /// The `X-Forwarded-For` header value as raw bytes, read only when the peer is a trusted
    /// proxy (an untrusted peer's header is ignored, whatever its bytes).
    pub forwarded_for: Option<&'a [u8]>,
    /// The raw request body.
    pub body: &'a [u8],
}

/// A configured receiver. Immutable: share it across threads freely.
#[derive(Debug, Clone)]
pub struct Receiver {
    config: ReceiverConfig,
    /// The configured tokens in the form they are compared in.
    tokens: auth::Tokens,
    /// The replies that are the same for every event, built once by the same builders.
    built: BuiltReplies,
}

/// The replies a receiver builds once: a refund's and a payout's success reply, and the start of
/// a successful balance reply (`reply::balance_prefix`) with the length of the longest one.
#[derive(Debug, Clone)]
struct BuiltReplies {
    refund_success: String,
    payout_success: String,
    balance_prefix: String,
    balance_max_len: usize,
}

impl Receiver {
    /// Builds a receiver; fails when no token is configured.
    pub fn new(config: ReceiverConfig) -> Result<Receiver> {
        if config.tokens.is_empty() {
            return Err(Error::field(ErrorKind::InvalidArgument, "token", "no partner token is configured"));
        }
        let omit = config.omit_empty_error_message;
        let balance_prefix = reply::balance_prefix(&config.balance_wrapper);
        let built = BuiltReplies {
            refund_success: reply::result("refund", true, "", omit)?,
            payout_success: reply::result("payout", true, "", omit)?,
            balance_max_len: BalanceReply::max_len(&balance_prefix),
            balance_prefix,
        };
        Ok(Receiver { tokens: auth::Tokens::new(&config.tokens), built, config })
    }

    /// The parse options in force.
    pub fn parse_options(&self) -> &ParseOptions {
        &self.config.parse
    }

    /// Checks the source address, then the token, then parses and validates the body. Nothing
    /// of the body is read before both checks pass.
    ///
    /// With a journal, a body refused by validation that named its event (`event` or `action`
    /// read as a string) and whose index could be read is recorded as seen and refused: the
    /// service sent that index, and fetching it again would find it refused again. A body that
    /// did not even name an event (`{"index":1000000000000}`) moves no gap bookkeeping. Should
    /// the journal fail to record a refusal, the refusal is answered all the same: its index then
    /// shows as missing.
    pub fn handle<'a>(&self, request: &Request<'a>) -> Result<Event<'a>> {
        self.handle_with(request, Vec::new())
    }

    /// `handle`, with `spare` (an empty vector) to hold the event's extra fields: see
    /// `event::parse_with`.
    pub(crate) fn handle_with<'a>(&self, request: &Request<'a>, spare: Vec<Field<'a>>) -> Result<Event<'a>> {
        self.authenticate(request)?;
        event::parse_with(request.body, &self.config.parse, spare).inspect_err(|error| self.record_refusal(error))
    }

    /// The journal deliveries are claimed in, when one is configured.
    pub fn journal(&self) -> Option<&Arc<Journal>> {
        self.config.journal.as_ref()
    }

    /// Records a refusal's index in the journal, when there is one and the body named its event
    /// (see `handle`); a failure of the journal is left unrecorded.
    pub(crate) fn record_refusal(&self, error: &Error) {
        let (Some(journal), Some(ids)) = (&self.config.journal, error.ids.as_deref()) else { return };
        // A name with control characters (a NUL) is no name the journal can keep: not named.
        let name = ids.name.as_deref().filter(|name| !name.is_empty() && !name.chars().any(char::is_control));
        if let (Some(index), Some(name)) = (ids.index, name) {
            let _ = journal.record_refused(index, Some(name), ids.transaction_id);
        }
    }

    /// The source and token checks alone. Under sources `any` the address is not looked at (a
    /// missing or unusual `REMOTE_ADDR` does not matter).
    pub fn authenticate(&self, request: &Request<'_>) -> Result<()> {
        if self.config.sources != SourcePolicy::Any {
            self.check_source(request)?;
        }
        self.tokens.check(request.token)
    }

    fn check_source(&self, request: &Request<'_>) -> Result<()> {
        let client = sources::client_address(request.remote_addr, request.forwarded_for, &self.config.trusted_proxies)?;
        if !self.config.sources.allows(client) {
            return Err(Error::field(
                ErrorKind::ForbiddenSource,
                "remote_addr",
                format!("{client} is not an allowed source"),
            ));
        }
        Ok(())
    }

    /// Parses and validates a body without authenticating it (for tools and tests).
    pub fn parse<'a>(&self, body: &'a [u8]) -> Result<Event<'a>> {
        event::parse(body, &self.config.parse)
    }

    /// The wrapper key of a known event's reply.
    pub fn wrapper(&self, event: KnownEvent) -> &str {
        match event {
            KnownEvent::BuyRefund => "refund",
            KnownEvent::JackpotPayout => "payout",
            KnownEvent::BalanceQuery => &self.config.balance_wrapper,
        }
    }

    /// The reply to `event`: its wrapper with `success` and `message` (which must be empty on
    /// success and must explain a failure). For a balance query, a failure reply states no
    /// balance (`{"playerBalance":{"errorMessage":"..."}}`, sent with `reply_http_status`); a
    /// successful one needs `balance_reply`.
    pub fn reply(&self, event: &Event<'_>, success: bool, message: &str) -> Result<String> {
        let Some(known) = event.known() else {
            let problem =
                format!("no reply is defined for the unknown event {}", crate::callback::json::quoted(&event.name));
            return Err(Error::field(ErrorKind::UnknownEvent, "event", problem));
        };
        self.reply_to(known, success, message)
    }

    /// The reply to a known event: as `reply`, for callers that kept only the event's kind.
    pub fn reply_to(&self, known: KnownEvent, success: bool, message: &str) -> Result<String> {
        self.reply_text(known, success, message).map(Cow::into_owned)
    }

    /// `reply_to`, borrowing the reply the receiver built once where it is that one (a refund's
    /// or a payout's success).
    pub(crate) fn reply_text(&self, known: KnownEvent, success: bool, message: &str) -> Result<Cow<'_, str>> {
        match (known, success && message.is_empty()) {
            (KnownEvent::BuyRefund, true) => return Ok(Cow::Borrowed(&self.built.refund_success)),
            (KnownEvent::JackpotPayout, true) => return Ok(Cow::Borrowed(&self.built.payout_success)),
            _ => {}
        }
        let wrapper = self.wrapper(known);
        if known != KnownEvent::BalanceQuery {
            return reply::result(wrapper, success, message, self.config.omit_empty_error_message).map(Cow::Owned);
        }
        if success {
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "success",
                "a successful balance reply needs the balance: use the balance reply",
            ));
        }
        reply::balance_failure(wrapper, message).map(Cow::Owned)
    }

    /// The bytes of the usual reply to `known` and a NUL after it: a refund's or a payout's
    /// success reply, or the longest successful balance reply. An event keeps room for as much.
    pub(crate) fn reply_room(&self, known: KnownEvent) -> usize {
        1 + match known {
            KnownEvent::BuyRefund => self.built.refund_success.len(),
            KnownEvent::JackpotPayout => self.built.payout_success.len(),
            KnownEvent::BalanceQuery => self.built.balance_max_len,
        }
    }

    /// The HTTP status to send a reply with: 200, except for a refused balance query (500 by
    /// default, see `ReceiverConfig::set_balance_failure_http_status`).
    pub fn reply_http_status(&self, known: KnownEvent, success: bool) -> u16 {
        if known == KnownEvent::BalanceQuery && !success { self.config.balance_failure_http_status } else { 200 }
    }

    /// The successful balance reply; `currency` defaults to the configured one.
    pub fn balance_reply(&self, money: i64, currency: Option<&str>, coins: i64) -> Result<String> {
        let currency = currency.unwrap_or(&self.config.balance_currency);
        reply::balance_after(&self.built.balance_prefix, money, currency, coins)
    }

    /// `balance_reply` checked but not yet written, for a caller that writes it into a buffer of
    /// its own.
    pub(crate) fn checked_balance(&self, money: i64, currency: Option<&str>, coins: i64) -> Result<BalanceReply<'_>> {
        let currency = currency.unwrap_or(&self.config.balance_currency);
        BalanceReply::new(&self.built.balance_prefix, money, currency, coins)
    }

    /// What the endpoint answers when `handle` fails: for a known event whose fields are
    /// invalid, the event's failure reply with the field-naming message (HTTP 200 with the
    /// wrapper and `success` false, the spec's way to report a failed handling; a balance query's
    /// failure reply and status as `reply` and `reply_http_status` say); otherwise the status of the failure (401,
    /// 403, 413, 400, ...) with a JSON error body.
    pub fn error_response(&self, error: &Error) -> Response {
        let field_error = matches!(
            error.kind,
            ErrorKind::MissingField
                | ErrorKind::WrongType
                | ErrorKind::OutOfRange
                | ErrorKind::InvalidValue
                | ErrorKind::DuplicateKey
                | ErrorKind::TooDeep
                | ErrorKind::InvalidJson
        );
        if let (true, Some(known)) = (field_error, error.event) {
            if let Ok(body) = self.reply_to(known, false, &error.message) {
                return Response { http_status: self.reply_http_status(known, false), body };
            }
        }
        response::error_body(error)
    }
}
