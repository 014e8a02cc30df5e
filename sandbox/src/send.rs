//! `send`: posts callback events (spec 4.2) to a partner URL and judges the
//! replies.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use ureq::tls::{PemItem, RootCerts, TlsConfig};

use crate::http::JSON_UTF8;

/// Largest reply body read.
pub const MAX_REPLY: u64 = 1 << 20;
const SHOWN_BODY_CHARS: usize = 4096;

/// The kind of callback to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Refund,
    Payout,
    Balance,
    Raw,
}

impl EventKind {
    pub fn parse(s: &str) -> Option<EventKind> {
        match s {
            "refund" => Some(EventKind::Refund),
            "payout" => Some(EventKind::Payout),
            "balance" => Some(EventKind::Balance),
            "raw" => Some(EventKind::Raw),
            _ => None,
        }
    }

    /// The `event` (or, for the balance query, `action`) value.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Refund => "gameSessionBuyRefund",
            EventKind::Payout => "jackpotPayout",
            EventKind::Balance => "getPlayerBalance",
            EventKind::Raw => "raw",
        }
    }

    /// The single top-level key of the expected reply.
    pub fn wrapper(self) -> Option<&'static str> {
        match self {
            EventKind::Refund => Some("refund"),
            EventKind::Payout => Some("payout"),
            EventKind::Balance => Some("playerBalance"),
            EventKind::Raw => None,
        }
    }
}

/// A change to the generated event body, applied in command-line order.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    Set(String, Value),
    Unset(String),
}

/// Parses `FIELD=VALUE`: VALUE as JSON when it is valid JSON, else a string.
pub fn parse_set(arg: &str) -> Result<Edit, String> {
    let (field, value) = arg.split_once('=').ok_or_else(|| format!("--set expects FIELD=VALUE, got '{arg}'"))?;
    if field.is_empty() {
        return Err(format!("--set expects FIELD=VALUE, got '{arg}'"));
    }
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
    Ok(Edit::Set(field.to_string(), value))
}

/// Parses `NAME:VALUE` for `--header`: the spaces and tabs around VALUE are removed, then
/// [`check_header`] applies.
pub fn parse_header(arg: &str) -> Result<(String, String), String> {
    let (name, value) = arg
        .split_once(':')
        .ok_or_else(|| format!("--header expects NAME:VALUE, got '{}': no ':'", arg.escape_debug()))?;
    let value = value.trim_matches([' ', '\t']);
    check_header(name, value)
        .map_err(|why| format!("--header expects NAME:VALUE, got '{}': {why}", arg.escape_debug()))?;
    Ok((name.to_string(), value.to_string()))
}

/// A header's NAME must be an HTTP field name (RFC 9110 token characters); its VALUE visible
/// characters, spaces and tabs (no CR, LF, NUL or other control character, which would split or
/// end the header), not starting or ending with a space or tab.
pub fn check_header(name: &str, value: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    let is_tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if let Some(bad) = name.bytes().find(|&b| !is_tchar(b)) {
        return Err(format!("the name holds '{}', not allowed in a field name", (bad as char).escape_debug()));
    }
    if let Some(bad) = value.chars().find(|&c| c != ' ' && c != '\t' && c.is_control()) {
        return Err(format!("the value holds the control character {bad:?}"));
    }
    if value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']) {
        return Err("the value starts or ends with a space or tab".into());
    }
    Ok(())
}

/// The headers of every request: `Content-Type` and `X-Service-Token` (unless `token` is empty),
/// each left out when `extra` has a header of that name, then `extra` in order.
pub fn request_headers(token: &str, extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut headers = vec![("Content-Type".to_string(), JSON_UTF8.to_string())];
    if !token.is_empty() {
        headers.push(("X-Service-Token".to_string(), token.to_string()));
    }
    headers.retain(|(name, _)| !extra.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)));
    headers.extend(extra.iter().cloned());
    headers
}

/// How `--print-body` shows a body sent: as it is when it is UTF-8 text on one line, else quoted
/// with Rust escapes (`"a\nb"`, invalid UTF-8 as U+FFFD).
pub fn shown_sent_body(body: &[u8]) -> String {
    match std::str::from_utf8(body) {
        Ok(text) if !text.chars().any(char::is_control) => text.to_string(),
        _ => format!("{:?}", String::from_utf8_lossy(body)),
    }
}

/// Everything `send` needs.
#[derive(Debug, Clone)]
pub struct SendOptions {
    pub url: String,
    /// `X-Service-Token` value; empty leaves the header out.
    pub token: String,
    pub ca_file: Option<PathBuf>,
    pub index: u64,
    pub count: u64,
    pub edits: Vec<Edit>,
    pub body_file: Option<PathBuf>,
    pub expect_success: Option<bool>,
    pub expect_http: Option<u16>,
    pub kind: EventKind,
    /// `--header NAME:VALUE`, in order: sent with every request (one named `Content-Type` or
    /// `X-Service-Token` replaces that header).
    pub headers: Vec<(String, String)>,
    /// `--print-body`: print each body before its reply line.
    pub print_body: bool,
}

impl SendOptions {
    /// Defaults for `kind` to `url`.
    pub fn new(url: &str, kind: EventKind) -> SendOptions {
        SendOptions {
            url: url.to_string(),
            token: crate::DEFAULT_TOKEN.to_string(),
            ca_file: None,
            index: 1,
            count: 1,
            edits: Vec::new(),
            body_file: None,
            expect_success: None,
            expect_http: None,
            kind,
            headers: Vec::new(),
            print_body: false,
        }
    }

    /// Checks option combinations and the URL (usage errors).
    pub fn validate(&self) -> Result<(), String> {
        check_url(&self.url)?;
        for (name, value) in &self.headers {
            check_header(name, value).map_err(|why| format!("header '{}': {why}", name.escape_debug()))?;
        }
        if self.count == 0 || self.count > 10_000 {
            return Err("--count must be between 1 and 10000".into());
        }
        if self.index.checked_add(self.count).is_none() {
            return Err("--index too large".into());
        }
        if self.kind == EventKind::Raw {
            if self.body_file.is_none() {
                return Err("raw needs --body-file FILE".into());
            }
            if !self.edits.is_empty() {
                return Err("--set/--unset do not apply to raw (its body is sent as it is)".into());
            }
            if self.expect_success.is_some() {
                return Err("--expect-success does not apply to raw; use --expect-http".into());
            }
        } else {
            if self.body_file.is_some() {
                return Err("--body-file applies to raw only".into());
            }
            if self.expect_http.is_some() {
                return Err("--expect-http applies to raw only".into());
            }
        }
        Ok(())
    }
}

/// Accepts `https://` URLs, and `http://` only to loopback hosts.
pub fn check_url(url: &str) -> Result<(), String> {
    let (scheme, rest) =
        url.split_once("://").ok_or_else(|| format!("URL must start with https:// or http://, got '{url}'"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err("user info in the URL is not supported".into());
    }
    let host = match authority.strip_prefix('[') {
        Some(r) => r.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    if host.is_empty() {
        return Err(format!("URL has no host: '{url}'"));
    }
    match scheme.to_ascii_lowercase().as_str() {
        "https" => Ok(()),
        "http" if is_loopback_host(host) => Ok(()),
        "http" => Err(format!(
            "plain http:// is allowed only to loopback hosts (127.0.0.0/8, ::1, localhost), not '{host}'; use https://"
        )),
        other => Err(format!("unsupported URL scheme '{other}'")),
    }
}

fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The event body of `kind` with `index`; `seq` (0-based position in a
/// burst) keeps transaction ids distinct.
pub fn build_event(kind: EventKind, index: u64, seq: u64) -> Map<String, Value> {
    let player = "svc-player-48213";
    let partner_player = "partner-user-1042";
    let value = match kind {
        EventKind::Refund => json!({
            "event": "gameSessionBuyRefund",
            "index": index,
            "gameSessionIdentifier": "a3f5c2d1-7b4e-4f9a-8c6d-2e1b0f9a8c7d",
            "playerIdentifier": player,
            "playerPartnerIdentifier": partner_player,
            "transactionId": 730_045_001u64 + 2 * seq,
            "buyTransactionId": 730_045_000u64 + 2 * seq,
            "gameSessionId": 5_512_034,
            "partnerGameRequestIdentifier": "pgr-20240611-000731",
            "gameId": 1001,
            "isMobile": false,
        }),
        EventKind::Payout => {
            let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
            json!({
                "event": "jackpotPayout",
                "index": index,
                "jackpotIdentifier": "jp-dragons-hoard-major",
                "playerIdentifier": player,
                "playerPartnerIdentifier": partner_player,
                "currencyISO4217": "EUR",
                "moneyWon": 150_000,
                "coinsWon": 0,
                "isMoney": true,
                "epochReleasedMillis": now_ms,
                "isPrimary": true,
                "transactionId": 730_046_001u64 + 2 * seq,
                "buyTransactionId": 730_046_000u64 + 2 * seq,
                "partnerGameRequestIdentifier": "pgr-20240611-000731",
                "gameSessionId": 5_512_034,
                "gameId": 1004,
                "isMobile": true,
            })
        }
        EventKind::Balance => json!({
            "action": "getPlayerBalance",
            "index": index,
            "playerIdentifier": player,
            "playerPartnerIdentifier": partner_player,
        }),
        EventKind::Raw => json!({}),
    };
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Applies `--set`/`--unset` edits.
pub fn apply_edits(body: &mut Map<String, Value>, edits: &[Edit]) {
    for edit in edits {
        match edit {
            Edit::Set(k, v) => {
                body.insert(k.clone(), v.clone());
            }
            Edit::Unset(k) => {
                body.remove(k);
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Bool,
    Str,
    Int,
    Currency,
}

impl Kind {
    fn accepts(self, v: &Value) -> bool {
        match self {
            Kind::Bool => v.is_boolean(),
            Kind::Str => v.is_string(),
            Kind::Int => v.is_i64() || v.is_u64(),
            Kind::Currency => v.as_str().is_some_and(|s| s.len() == 3 && s.bytes().all(|b| b.is_ascii_uppercase())),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Bool => "a boolean",
            Kind::Str => "a string",
            Kind::Int => "an integer",
            Kind::Currency => "3 uppercase letters (ISO 4217)",
        }
    }
}

/// Judges a reply: `Ok` when it is what the spec (or, for `raw`, the
/// options) expect, else the reason.
pub fn verdict(
    kind: EventKind,
    status: u16,
    body: &[u8],
    expect_success: Option<bool>,
    expect_http: Option<u16>,
) -> Result<(), String> {
    let Some(wrapper) = kind.wrapper() else {
        match expect_http {
            Some(code) if status != code => {
                return Err(format!("HTTP {status}, expected {code}"));
            }
            Some(_) => {}
            None if (200..300).contains(&status) => {}
            // A refusal is no success, whatever its body says: `--expect-http` when it is the point.
            None if status == 409 => {
                return Err("HTTP 409: the endpoint refused it as a conflict (its key was delivered before with other content; give --expect-http 409 when that is the point)".to_owned());
            }
            None if (400..500).contains(&status) => {
                return Err(format!(
                    "HTTP {status}: the endpoint refused it (give --expect-http {status} when that is the point)"
                ));
            }
            None => return Err(format!("HTTP {status} is no 2xx answer")),
        }
        return serde_json::from_slice::<Value>(body).map(|_| ()).map_err(|e| format!("body is not JSON ({e})"));
    };
    if status != 200 {
        return Err(format!("HTTP {status}, expected 200"));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("body is not JSON ({e})"))?;
    let top = value.as_object().ok_or("body is not a JSON object")?;
    if top.len() != 1 || !top.contains_key(wrapper) {
        let keys: Vec<&str> = top.keys().map(String::as_str).collect();
        return Err(format!("expected exactly the key '{wrapper}', got [{}]", keys.join(",")));
    }
    let inner = top[wrapper].as_object().ok_or_else(|| format!("'{wrapper}' is not an object"))?;
    let fields: &[(&str, Kind)] = match kind {
        EventKind::Balance => &[
            ("money", Kind::Int),
            ("currencyISO4217", Kind::Currency),
            ("coins", Kind::Int),
            ("errorMessage", Kind::Str),
        ],
        _ => &[("success", Kind::Bool), ("errorMessage", Kind::Str)],
    };
    for (name, field_kind) in fields {
        match inner.get(*name) {
            None => return Err(format!("missing '{wrapper}.{name}'")),
            Some(v) if !field_kind.accepts(v) => {
                return Err(format!("'{wrapper}.{name}' must be {}, got {v}", field_kind.describe()));
            }
            Some(_) => {}
        }
    }
    if let Some(extra) = inner.keys().find(|k| !fields.iter().any(|(n, _)| n == k)) {
        return Err(format!("unexpected key '{wrapper}.{extra}'"));
    }
    if let Some(expected) = expect_success {
        let actual = match kind {
            EventKind::Balance => inner["errorMessage"].as_str() == Some(""),
            _ => inner["success"] == Value::Bool(true),
        };
        if actual != expected {
            return Err(match kind {
                EventKind::Balance => format!(
                    "expected success={expected} (empty errorMessage means success), got errorMessage {}",
                    inner["errorMessage"]
                ),
                _ => format!("expected success={expected}, got success={actual}"),
            });
        }
    }
    Ok(())
}

/// Removes insignificant whitespace from JSON text, keeping key order.
pub fn compact_json_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

/// How a reply body is shown on the result line.
pub(crate) fn show_body(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let shown =
        if serde_json::from_slice::<Value>(body).is_ok() { compact_json_text(&text) } else { format!("{text:?}") };
    if shown.chars().count() > SHOWN_BODY_CHARS {
        let cut: String = shown.chars().take(SHOWN_BODY_CHARS).collect();
        format!("{cut}...({} bytes)", body.len())
    } else {
        shown
    }
}

fn agent(ca_file: Option<&PathBuf>) -> Result<ureq::Agent, String> {
    agent_with(ca_file, 0)
}

/// The client agent; `connections` > 0 lets it keep that many idle
/// connections to the partner (one per `--burst` worker), 0 keeps ureq's default.
pub(crate) fn agent_with(ca_file: Option<&PathBuf>, connections: usize) -> Result<ureq::Agent, String> {
    let roots = match ca_file {
        None => RootCerts::WebPki,
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| format!("cannot read --ca-file {}: {e}", path.display()))?;
            let mut certs = Vec::new();
            for item in ureq::tls::parse_pem(&pem) {
                match item {
                    Ok(PemItem::Certificate(c)) => certs.push(c),
                    Ok(_) => {}
                    Err(e) => return Err(format!("bad PEM in {}: {e}", path.display())),
                }
            }
            if certs.is_empty() {
                return Err(format!("no certificate in {}", path.display()));
            }
            RootCerts::new_with_certs(&certs)
        }
    };
    let mut config = ureq::Agent::config_builder()
        .tls_config(TlsConfig::builder().root_certs(roots).build())
        .http_status_as_error(false)
        .max_redirects(0)
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(30)))
        .user_agent("slotpartner-sandbox-send");
    if connections > 0 {
        config = config.max_idle_connections_per_host(connections).max_idle_connections(connections.max(10));
    }
    Ok(config.build().new_agent())
}

/// Sends the events and writes one result line each to `out`. `Ok(true)`
/// when every verdict is ok; `Err` for usage errors (nothing sent).
pub fn run(opts: &SendOptions, out: &mut dyn Write) -> Result<bool, String> {
    opts.validate()?;
    let agent = agent(opts.ca_file.as_ref())?;
    let raw_body = match &opts.body_file {
        Some(path) => {
            Some(std::fs::read(path).map_err(|e| format!("cannot read --body-file {}: {e}", path.display()))?)
        }
        None => None,
    };
    let headers = request_headers(&opts.token, &opts.headers);
    let mut all_ok = true;
    for seq in 0..opts.count {
        let index = opts.index + seq;
        let (body, shown_index, name) = match &raw_body {
            Some(bytes) => {
                let parsed: Option<Value> = serde_json::from_slice(bytes).ok();
                let field = |k: &str| parsed.as_ref().and_then(|v| v.get(k)).cloned();
                let shown_index =
                    field("index").filter(|v| v.is_u64() || v.is_i64()).map_or("-".to_string(), |v| v.to_string());
                let name = field("event")
                    .or_else(|| field("action"))
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| "raw".to_string());
                (bytes.clone(), shown_index, name)
            }
            None => {
                let mut event = build_event(opts.kind, index, seq);
                apply_edits(&mut event, &opts.edits);
                let bytes = Value::Object(event).to_string().into_bytes();
                (bytes, index.to_string(), opts.kind.name().to_string())
            }
        };
        let mut request = agent.post(&opts.url);
        for (header, value) in &headers {
            request = request.header(header.as_str(), value.as_str());
        }
        if opts.print_body {
            let line =
                format!("sent index={shown_index} event={name} bytes={} body={}", body.len(), shown_sent_body(&body));
            writeln!(out, "{line}").map_err(|e| format!("cannot write output: {e}"))?;
        }
        let line = match request.send(&body[..]) {
            Err(e) => {
                all_ok = false;
                format!("index={shown_index} event={name} http=- body=- verdict=UNEXPECTED: request failed: {e}")
            }
            Ok(mut resp) => {
                let status = resp.status().as_u16();
                let read = resp.body_mut().with_config().limit(MAX_REPLY).read_to_vec();
                let (reply, judged) = match read {
                    Ok(reply) => {
                        let judged = verdict(opts.kind, status, &reply, opts.expect_success, opts.expect_http);
                        (show_body(&reply), judged)
                    }
                    Err(e) => ("-".to_string(), Err(format!("reading the reply failed: {e}"))),
                };
                let verdict_text = match judged {
                    Ok(()) => "ok".to_string(),
                    Err(reason) => {
                        all_ok = false;
                        format!("UNEXPECTED: {reason}")
                    }
                };
                format!("index={shown_index} event={name} http={status} body={reply} verdict={verdict_text}")
            }
        };
        writeln!(out, "{line}").map_err(|e| format!("cannot write output: {e}"))?;
        let _ = out.flush();
    }
    Ok(all_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(kind: EventKind, status: u16, body: &str, expect: Option<bool>) -> Result<(), String> {
        verdict(kind, status, body.as_bytes(), expect, None)
    }

    #[test]
    fn refund_and_payout_replies() {
        let good = r#"{"refund":{"success":true,"errorMessage":""}}"#;
        assert_eq!(v(EventKind::Refund, 200, good, None), Ok(()));
        assert_eq!(v(EventKind::Refund, 200, good, Some(true)), Ok(()));
        assert!(v(EventKind::Refund, 200, good, Some(false)).is_err());
        let failed = r#"{ "payout" : { "success": false, "errorMessage": "unknown jackpot" } }"#;
        assert_eq!(v(EventKind::Payout, 200, failed, Some(false)), Ok(()));
        // Wrong wrapper, status, types, missing and extra keys.
        assert!(v(EventKind::Payout, 200, good, None).unwrap_err().contains("payout"));
        assert!(v(EventKind::Refund, 500, good, None).unwrap_err().contains("HTTP 500"));
        let e = v(EventKind::Refund, 200, r#"{"refund":{"success":"true","errorMessage":""}}"#, None);
        assert!(e.unwrap_err().contains("refund.success"));
        let e = v(EventKind::Refund, 200, r#"{"refund":{"success":true}}"#, None);
        assert!(e.unwrap_err().contains("missing 'refund.errorMessage'"));
        let e = v(EventKind::Refund, 200, r#"{"refund":{"success":true,"errorMessage":"","code":1}}"#, None);
        assert!(e.unwrap_err().contains("unexpected key 'refund.code'"));
        let e = v(EventKind::Refund, 200, r#"{"refund":{"success":true,"errorMessage":""},"x":1}"#, None);
        assert!(e.is_err());
        assert!(v(EventKind::Refund, 200, "<html/>", None).unwrap_err().contains("not JSON"));
        assert!(v(EventKind::Refund, 200, "[]", None).is_err());
        assert!(v(EventKind::Refund, 200, r#"{"refund":null}"#, None).is_err());
    }

    #[test]
    fn balance_replies() {
        let good = r#"{"playerBalance":{"money":12050,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#;
        assert_eq!(v(EventKind::Balance, 200, good, Some(true)), Ok(()));
        assert!(v(EventKind::Balance, 200, good, Some(false)).is_err());
        let failed =
            r#"{"playerBalance":{"money":0,"currencyISO4217":"EUR","coins":0,"errorMessage":"unknown player"}}"#;
        assert_eq!(v(EventKind::Balance, 200, failed, Some(false)), Ok(()));
        let float = r#"{"playerBalance":{"money":120.5,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}"#;
        assert!(v(EventKind::Balance, 200, float, None).unwrap_err().contains("playerBalance.money"));
        let cur = r#"{"playerBalance":{"money":1,"currencyISO4217":"eur","coins":0,"errorMessage":""}}"#;
        assert!(v(EventKind::Balance, 200, cur, None).unwrap_err().contains("currencyISO4217"));
    }

    #[test]
    fn raw_replies() {
        assert_eq!(verdict(EventKind::Raw, 200, b"{}", None, None), Ok(()));
        assert!(verdict(EventKind::Raw, 401, br#"{"e":1}"#, None, None).is_err());
        let conflict = verdict(EventKind::Raw, 409, br#"{"success":false}"#, None, None).unwrap_err();
        assert!(conflict.contains("HTTP 409") && conflict.contains("--expect-http 409"), "{conflict}");
        assert_eq!(verdict(EventKind::Raw, 409, b"{}", None, Some(409)), Ok(()));
        assert!(verdict(EventKind::Raw, 500, b"{}", None, None).is_err());
        assert!(verdict(EventKind::Raw, 400, b"nope", None, None).is_err());
        assert_eq!(verdict(EventKind::Raw, 400, b"{}", None, Some(400)), Ok(()));
        assert!(verdict(EventKind::Raw, 200, b"{}", None, Some(400)).is_err());
    }

    #[test]
    fn events_and_edits() {
        let refund = build_event(EventKind::Refund, 7, 0);
        for key in [
            "event",
            "index",
            "gameSessionIdentifier",
            "playerIdentifier",
            "playerPartnerIdentifier",
            "transactionId",
            "buyTransactionId",
            "gameSessionId",
            "partnerGameRequestIdentifier",
            "gameId",
            "isMobile",
        ] {
            assert!(refund.contains_key(key), "{key}");
        }
        assert_eq!(refund["index"], 7);
        let next = build_event(EventKind::Refund, 8, 1);
        assert_ne!(refund["transactionId"], next["transactionId"]);
        let payout = build_event(EventKind::Payout, 1, 0);
        assert_eq!(payout["moneyWon"], 150_000);
        assert_eq!(payout["currencyISO4217"], "EUR");
        assert!(payout.contains_key("jackpotIdentifier"));

        let mut body = build_event(EventKind::Balance, 1, 0);
        let edits = vec![
            parse_set("playerIdentifier=null").unwrap(),
            parse_set("note=hello world").unwrap(),
            parse_set("n=42").unwrap(),
            Edit::Unset("playerPartnerIdentifier".into()),
        ];
        apply_edits(&mut body, &edits);
        assert_eq!(body["playerIdentifier"], Value::Null);
        assert_eq!(body["note"], "hello world");
        assert_eq!(body["n"], 42);
        assert!(!body.contains_key("playerPartnerIdentifier"));
        assert!(parse_set("novalue").is_err());
    }

    #[test]
    fn urls() {
        assert!(check_url("https://partner.example/cb").is_ok());
        assert!(check_url("http://127.0.0.1:8080/cb").is_ok());
        assert!(check_url("http://127.5.0.1/cb").is_ok());
        assert!(check_url("http://localhost:9/cb").is_ok());
        assert!(check_url("http://[::1]:9/cb").is_ok());
        assert!(check_url("http://10.0.0.1/cb").is_err());
        assert!(check_url("http://partner.example/cb").is_err());
        assert!(check_url("http://user@127.0.0.1/cb").is_err());
        assert!(check_url("ftp://127.0.0.1/cb").is_err());
        assert!(check_url("127.0.0.1/cb").is_err());
    }

    #[test]
    fn compacting_keeps_strings() {
        assert_eq!(
            compact_json_text("{ \"a b\" : [1, 2],\n \"c\": \"x \\\" y\" }"),
            "{\"a b\":[1,2],\"c\":\"x \\\" y\"}"
        );
    }
}
