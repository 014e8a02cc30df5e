//! The request of a CGI program (RFC 3875), read from its environment and standard input, and
//! the response written as CGI wants it (a `Status:` line, the headers, a blank line, the body).

use std::io::{Read, Write};

use crate::endpoint::Answer;

/// A callback request as a CGI program receives it: owned copies of the variables and the body.
#[derive(Debug, Default)]
pub struct CgiRequest {
    /// `REQUEST_METHOD`; empty when unset (answered 405).
    pub method: Vec<u8>,
    /// `HTTP_X_SERVICE_TOKEN`.
    pub token: Option<Vec<u8>>,
    /// `REMOTE_ADDR`.
    pub remote_addr: Option<Vec<u8>>,
    /// `HTTP_X_FORWARDED_FOR`.
    pub forwarded_for: Option<Vec<u8>>,
    /// At most `max_body + 1` bytes of standard input, as `CONTENT_LENGTH` says: a larger body is
    /// refused 413 by the receiver without being read whole.
    pub body: Vec<u8>,
}

fn var(name: &str) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStringExt;
    std::env::var_os(name).map(OsStringExt::into_vec)
}

/// `CONTENT_LENGTH` as RFC 3875 has it (digits; surrounding white space and a `+` forgiven, as
/// web servers pass them); `None` when it is something else. Unset or empty is 0.
fn content_length(text: Option<&[u8]>) -> Option<u64> {
    let text = std::str::from_utf8(text.unwrap_or_default()).ok()?.trim_matches(|c: char| c.is_ascii_whitespace());
    if text.is_empty() {
        return Some(0);
    }
    let digits = text.strip_prefix('+').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // More digits than a u64 holds: larger than any body limit all the same.
    Some(digits.parse::<u64>().unwrap_or(u64::MAX))
}

/// Reads the request from the environment and `stdin`: at most `max_body + 1` bytes. A
/// `CONTENT_LENGTH` that is not a number, or a body shorter than it says, is answered 400 naming
/// `CONTENT_LENGTH`, before anything else is looked at.
pub fn read_request(max_body: usize, stdin: &mut impl Read) -> Result<CgiRequest, Answer> {
    let refused = |problem: &str| {
        let body = format!(
            r#"{{"error":{{"code":"bad_request","field":"CONTENT_LENGTH","message":"CONTENT_LENGTH {problem}"}}}}"#
        );
        Answer::error_body(400, body.into_bytes(), format!("refused: CONTENT_LENGTH {problem}"), 0)
    };
    let declared = content_length(var("CONTENT_LENGTH").as_deref()).ok_or_else(|| refused("is not a number"))?;
    let wanted = declared.min((max_body as u64).saturating_add(1));
    // Room for what CONTENT_LENGTH promises up to a usual body: a stranger's promise of more is
    // not allocated before its bytes arrive (a large limit and a CONTENT_LENGTH of 10^30 asked
    // for the whole limit at once, and an allocation refused aborts the process).
    let mut body = Vec::with_capacity(wanted.min(1 << 16) as usize);
    stdin.take(wanted).read_to_end(&mut body).map_err(|_| refused("could not be read"))?;
    if (body.len() as u64) < wanted {
        return Err(refused("says more than the body holds"));
    }
    Ok(CgiRequest {
        method: var("REQUEST_METHOD").unwrap_or_default(),
        token: var("HTTP_X_SERVICE_TOKEN"),
        remote_addr: var("REMOTE_ADDR"),
        forwarded_for: var("HTTP_X_FORWARDED_FOR"),
        body,
    })
}

/// Writes `status`, `headers` and `body` as a CGI response: `Status: 503 Service Unavailable`,
/// each header, a blank line, the body; lines end with CR LF. One write of the whole response.
pub fn write_response(
    out: &mut impl Write,
    status: u16,
    reason: &str,
    headers: &[(&[u8], &[u8])],
    body: &[u8],
) -> std::io::Result<()> {
    let mut bytes = format!("Status: {status} {reason}\r\n").into_bytes();
    for (name, value) in headers {
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(b": ");
        bytes.extend_from_slice(value);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"\r\n");
    bytes.extend_from_slice(body);
    out.write_all(&bytes)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_is_read_as_rfc_3875_and_web_servers_have_it() {
        assert_eq!(content_length(None), Some(0));
        assert_eq!(content_length(Some(b"")), Some(0));
        assert_eq!(content_length(Some(b" +42 ")), Some(42));
        assert_eq!(content_length(Some(b"99999999999999999999999")), Some(u64::MAX));
        for bad in [&b"12x"[..], b"-1", b"1 2", b"0x10", b"\xff", b"+"] {
            assert_eq!(content_length(Some(bad)), None, "{bad:?}");
        }
    }

    #[test]
    fn a_body_limit_as_large_as_usize_reads_the_request_without_overflowing() {
        // max_body_bytes has no ceiling: usize::MAX is accepted, and the limit plus one byte is
        // read. CONTENT_LENGTH is unset here: an empty body.
        let request = read_request(usize::MAX, &mut &b""[..]).expect("an empty body");
        assert!(request.body.is_empty());
    }
}
