//! Routing of `POST {prefix}/rest/action`: token check, fault prefixes and
//! the actions `getGames`, `getEvent` and `echo`.

use std::io::Write;
use std::thread;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::burst::{EventSet, GET_EVENT_ACTION, GET_EVENT_INDEX};
use crate::catalogue;
use crate::http::{Body, Request, Response};

/// Size of the `/fault/big` response body.
pub const BIG_BODY_LEN: u64 = 32 * 1024 * 1024;
/// Longest accepted `/fault/slow/{ms}` delay.
pub const MAX_SLOW_MS: u64 = 600_000;

/// A fault injected by a path prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    Status(u16),
    Malformed,
    /// A game with a field whose name holds NUL (`"a\u0000b"`), which C strings cannot carry.
    NulKey,
    NotJson,
    Slow(u64),
    Redirect,
    Big,
    Close,
}

/// Maps a request path to its fault, `None` when it is no action address.
pub fn route(path: &str) -> Option<Fault> {
    if path == "/rest/action" {
        return Some(Fault::None);
    }
    let rest = path.strip_prefix("/fault/")?.strip_suffix("/rest/action")?;
    let parts: Vec<&str> = rest.split('/').collect();
    let number = |s: &str| -> Option<u64> {
        if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) { None } else { s.parse().ok() }
    };
    match parts.as_slice() {
        ["status", code] => number(code).filter(|c| (200..=599).contains(c)).map(|c| Fault::Status(c as u16)),
        ["slow", ms] => number(ms).filter(|ms| *ms <= MAX_SLOW_MS).map(Fault::Slow),
        ["malformed"] => Some(Fault::Malformed),
        ["nulkey"] => Some(Fault::NulKey),
        ["notjson"] => Some(Fault::NotJson),
        ["redirect"] => Some(Fault::Redirect),
        ["big"] => Some(Fault::Big),
        ["close"] => Some(Fault::Close),
        _ => None,
    }
}

/// Handles one request on the HTTPS listener (no events: `getEvent` answers
/// notFound for every index).
pub fn handle(req: &Request, token: &str) -> Response {
    handle_with(req, token, None)
}

/// Handles one request on the HTTPS listener; `getEvent` answers from `events`.
pub fn handle_with(req: &Request, token: &str, events: Option<&EventSet>) -> Response {
    let Some(fault) = route(req.path()) else {
        return Response::error(404, "notFound", &format!("no route for {}", req.path()));
    };
    if req.method != "POST" {
        let mut resp =
            Response::error(405, "methodNotAllowed", &format!("{} is not allowed here; use POST", req.method));
        resp.headers.push(("Allow", "POST".to_string()));
        return resp;
    }
    match req.header("x-service-token") {
        None => {
            return Response::error(401, "unauthorized", "missing X-Service-Token header");
        }
        Some(t) if t != token => {
            return Response::error(401, "unauthorized", "invalid X-Service-Token");
        }
        Some(_) => {}
    }
    let action = action_name(&req.body);
    let resp = match fault {
        Fault::None => dispatch_with(&req.body, events),
        Fault::Slow(ms) => {
            thread::sleep(Duration::from_millis(ms));
            dispatch_with(&req.body, events)
        }
        Fault::Status(code) => {
            Response::error(code, "injectedFault", &format!("status {code} injected by /fault/status"))
        }
        Fault::Malformed if action.as_deref() == Some(GET_EVENT_ACTION) => malformed_event(&req.body, events),
        Fault::Malformed => Response::json(200, &json!({"games": [{"gameId": "not-a-number"}]})),
        Fault::NulKey => nul_key_games(&req.body, events),
        Fault::NotJson => Response {
            status: 200,
            content_type: Some("text/html; charset=utf-8"),
            headers: Vec::new(),
            body: Body::Bytes(b"<html>oops</html>".to_vec()),
            action: None,
        },
        Fault::Redirect => {
            let mut resp = Response::error(302, "redirect", "moved to /rest/action");
            resp.headers.push(("Location", "/rest/action".to_string()));
            resp
        }
        Fault::Big => big_response(),
        Fault::Close => {
            Response { status: 0, content_type: None, headers: Vec::new(), body: Body::Hangup, action: None }
        }
    };
    resp.with_action(action)
}

/// `/fault/nulkey`: the normal answer with a field named `"a\u0000b"` added to its first game.
fn nul_key_games(body: &[u8], events: Option<&EventSet>) -> Response {
    let mut resp = dispatch_with(body, events);
    let answer = match &resp.body {
        Body::Bytes(bytes) => serde_json::from_slice::<Value>(bytes).ok(),
        _ => None,
    };
    if let Some(mut answer) = answer
        && let Some(game) = answer.pointer_mut("/games/0").and_then(Value::as_object_mut)
    {
        game.insert("a\u{0}b".to_owned(), json!(1));
        resp.body = Body::Bytes(serde_json::to_vec(&answer).expect("serializable"));
    }
    resp
}

/// The `action` string of a body, for logging.
fn action_name(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    value.get("action")?.as_str().map(str::to_string)
}

fn bad_request(message: &str) -> Response {
    Response::error(400, "badRequest", message)
}

/// Answers an action request body (no events: `getEvent` answers notFound).
pub fn dispatch(body: &[u8]) -> Response {
    dispatch_with(body, None)
}

/// Answers an action request body; `getEvent` answers from `events`.
pub fn dispatch_with(body: &[u8], events: Option<&EventSet>) -> Response {
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return bad_request(&format!("body is not valid JSON: {e}")),
    };
    let Some(object) = value.as_object() else {
        return bad_request("body must be a JSON object");
    };
    let action = match object.get("action") {
        None => return bad_request("missing field 'action'"),
        Some(Value::String(a)) => a.as_str(),
        Some(_) => return bad_request("field 'action' must be a string"),
    };
    match action {
        "getGames" => get_games(object),
        GET_EVENT_ACTION => get_event(object, events),
        "echo" => {
            // The request text itself (already checked to be a JSON object),
            // so key order and number forms come back unchanged.
            let mut out = b"{\"echo\":".to_vec();
            out.extend_from_slice(body.trim_ascii());
            out.push(b'}');
            let mut resp = Response::json(200, &Value::Null);
            resp.body = Body::Bytes(out);
            resp
        }
        other => Response::error(400, "unknownAction", &format!("unknown action '{other}'")),
    }
}

fn get_games(params: &Map<String, Value>) -> Response {
    const LOCALE: &str = "localeISO639_ISO3166";
    let locale = match params.get(LOCALE) {
        None | Some(Value::Null) => return bad_request(&format!("missing field '{LOCALE}'")),
        Some(Value::String(s)) if catalogue::is_valid_locale(s) => s.as_str(),
        Some(other) => {
            return bad_request(&format!(
                "field '{LOCALE}' must be a string like \"en-US\" (ISO 639-1 language, hyphen, ISO 3166-1 country), got {other}"
            ));
        }
    };
    let game_id = match params.get("gameId") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_i64() {
            Some(id) => Some(id),
            None => return bad_request(&format!("field 'gameId' must be an integer, got {v}")),
        },
    };
    #[derive(Serialize)]
    struct Games {
        games: Vec<catalogue::Game>,
    }
    Response::json(200, &Games { games: catalogue::games(locale, game_id) })
}

/// The `index` parameter of `getEvent`.
fn event_index(params: &Map<String, Value>) -> Result<u64, Response> {
    match params.get(GET_EVENT_INDEX) {
        None | Some(Value::Null) => Err(bad_request(&format!("missing field '{GET_EVENT_INDEX}'"))),
        Some(v) => v
            .as_u64()
            .ok_or_else(|| bad_request(&format!("field '{GET_EVENT_INDEX}' must be a non-negative integer, got {v}"))),
    }
}

/// `getEvent`: `{"event":{…}}` with the event body exactly as `send --burst`
/// posts it, or 404 notFound for an index outside `events`.
fn get_event(params: &Map<String, Value>, events: Option<&EventSet>) -> Response {
    let index = match event_index(params) {
        Ok(i) => i,
        Err(resp) => return resp,
    };
    match events.and_then(|set| set.get(index)) {
        Some(event) => {
            let mut resp = Response::json(200, &Value::Null);
            resp.body = Body::Bytes(format!("{{\"event\":{}}}", event.body).into_bytes());
            resp
        }
        None => Response::error(404, "notFound", &format!("no event with index {index}")),
    }
}

/// `/fault/malformed` for `getEvent`: the event (or just its index) with a
/// string `transactionId`, so that a client's validation must refuse it.
fn malformed_event(body: &[u8], events: Option<&EventSet>) -> Response {
    let params: Map<String, Value> = serde_json::from_slice(body).unwrap_or_default();
    let index = event_index(&params).ok();
    let mut event: Map<String, Value> = index
        .and_then(|i| events.and_then(|set| set.get(i)))
        .and_then(|e| serde_json::from_str(&e.body).ok())
        .unwrap_or_default();
    if let Some(i) = index {
        event.entry("index").or_insert(json!(i));
    }
    event.insert("transactionId".into(), json!("not-a-number"));
    Response::json(200, &json!({ "event": event }))
}

/// `{"games":[],"padding":"xxx…"}` of [`BIG_BODY_LEN`] bytes, streamed.
fn big_response() -> Response {
    const PREFIX: &[u8] = b"{\"games\":[],\"padding\":\"";
    const SUFFIX: &[u8] = b"\"}";
    let write = move |out: &mut dyn Write| {
        out.write_all(PREFIX)?;
        let chunk = [b'x'; 64 * 1024];
        let mut left = BIG_BODY_LEN - (PREFIX.len() + SUFFIX.len()) as u64;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            out.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        out.write_all(SUFFIX)
    };
    Response {
        status: 200,
        content_type: Some(crate::http::JSON_UTF8),
        headers: Vec::new(),
        body: Body::Stream { len: BIG_BODY_LEN, write: Box::new(write) },
        action: None,
    }
}

/// Handles every request on the plain HTTP listener (spec 5.2).
pub fn handle_plain(req: &Request) -> Response {
    Response::error(401, "unauthorized", "plain HTTP is not accepted; use HTTPS").with_action(action_name(&req.body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route("/rest/action"), Some(Fault::None));
        assert_eq!(route("/fault/status/503/rest/action"), Some(Fault::Status(503)));
        assert_eq!(route("/fault/status/99/rest/action"), None);
        assert_eq!(route("/fault/status/x/rest/action"), None);
        assert_eq!(route("/fault/slow/250/rest/action"), Some(Fault::Slow(250)));
        assert_eq!(route("/fault/big/rest/action"), Some(Fault::Big));
        assert_eq!(route("/fault/close/rest/action"), Some(Fault::Close));
        assert_eq!(route("/fault/redirect/rest/action"), Some(Fault::Redirect));
        assert_eq!(route("/fault/malformed/rest/action"), Some(Fault::Malformed));
        assert_eq!(route("/fault/nulkey/rest/action"), Some(Fault::NulKey));
        assert_eq!(route("/fault/notjson/rest/action"), Some(Fault::NotJson));
        assert_eq!(route("/rest/action/"), None);
        assert_eq!(route("/fault/rest/action"), None);
        assert_eq!(route("/"), None);
    }

    fn body_json(resp: Response) -> (u16, Value) {
        let Body::Bytes(bytes) = resp.body else { panic!("not a byte body") };
        (resp.status, serde_json::from_slice(&bytes).unwrap())
    }

    #[test]
    fn dispatch_errors() {
        let (s, v) = body_json(dispatch(b"[1]"));
        assert_eq!((s, v["error"]["code"].as_str()), (400, Some("badRequest")));
        let (s, v) = body_json(dispatch(br#"{"action":"spin"}"#));
        assert_eq!(s, 400);
        assert_eq!(v["error"]["code"], "unknownAction");
        assert_eq!(v["error"]["message"], "unknown action 'spin'");
        let (s, v) = body_json(dispatch(br#"{"action":"getGames","gameId":1001}"#));
        assert_eq!(s, 400);
        assert!(v["error"]["message"].as_str().unwrap().contains("localeISO639_ISO3166"));
        let (s, v) = body_json(dispatch(br#"{"action":"getGames","localeISO639_ISO3166":"en-US","gameId":"1001"}"#));
        assert_eq!(s, 400);
        assert!(v["error"]["message"].as_str().unwrap().contains("gameId"));
    }

    #[test]
    fn big_body_is_valid_json_of_the_announced_length() {
        let Body::Stream { len, write } = big_response().body else { panic!("not streamed") };
        let mut out = Vec::new();
        write(&mut out).unwrap();
        assert_eq!(out.len() as u64, len);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["games"], json!([]));
    }
}
