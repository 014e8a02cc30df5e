//! The `X-Service-Token` check: the presented token is compared in constant time with every
//! configured partner token (the current one and, during a rotation, the next one).

use subtle::ConstantTimeEq;

use crate::error::{Error, ErrorKind, Result};

/// How many partner tokens a receiver accepts at once: the current one and the next one.
pub const MAX_TOKENS: usize = 2;

/// Whether `token` is a UUID in its canonical hyphenated form (8-4-4-4-12 hexadecimal digits),
/// the form the service operator issues partner tokens in.
pub fn is_uuid(token: &str) -> bool {
    let bytes = token.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// Checks that `token` can be configured as a partner token.
pub fn validate_token(field: &str, token: &str) -> Result<()> {
    if is_uuid(token) {
        Ok(())
    } else {
        Err(Error::field(
            ErrorKind::InvalidArgument,
            field,
            "expected a UUID like 6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f",
        ))
    }
}

/// The form a token is kept and compared in: UUIDs are case-insensitive, so `A1B2…` and `a1b2…`
/// are the same token.
pub fn canonical_token(token: &str) -> String {
    token.to_ascii_lowercase()
}

/// The configured partner tokens in the form they are compared in: each token's
/// `canonical_token` bytes as five 64-bit words (the last one padded with zeros), so that a
/// comparison costs five constant-time word comparisons rather than 36 byte ones.
#[derive(Clone)]
pub struct Tokens {
    words: Vec<[u64; 5]>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({} configured)", self.words.len())
    }
}

/// A UUID's length in bytes.
const TOKEN_BYTES: usize = 36;

impl Tokens {
    /// The tokens of `configured` (UUIDs, as `validate_token` accepts them), in any case.
    pub fn new(configured: &[String]) -> Tokens {
        Tokens { words: configured.iter().filter_map(|t| words_of(t.as_bytes())).collect() }
    }

    /// Checks the presented header value against the configured tokens, ignoring the case of
    /// its letters. Every configured token is compared in constant time, whatever the outcome
    /// of the others, so timing tells nothing about which matched or how much of one did; a
    /// value of another length than a UUID cannot match and is refused without comparing.
    pub fn check(&self, presented: Option<&[u8]>) -> Result<()> {
        let Some(presented) = presented.filter(|p| !p.is_empty()) else {
            return Err(Error::field(ErrorKind::MissingToken, "X-Service-Token", "header is missing"));
        };
        let matched = words_of(presented).is_some_and(|presented| {
            let any = self.words.iter().fold(subtle::Choice::from(0), |any, token| any | token.ct_eq(&presented));
            bool::from(any)
        });
        if matched {
            Ok(())
        } else {
            Err(Error::field(ErrorKind::WrongToken, "X-Service-Token", "does not match the partner token"))
        }
    }
}

/// A token of UUID length as lowercase 64-bit words; `None` for another length.
fn words_of(token: &[u8]) -> Option<[u64; 5]> {
    let token: &[u8; TOKEN_BYTES] = token.try_into().ok()?;
    let mut padded = [0u8; 40];
    padded.iter_mut().zip(token).for_each(|(to, from)| *to = from.to_ascii_lowercase());
    Some(std::array::from_fn(|i| u64::from_le_bytes(padded[8 * i..8 * i + 8].try_into().expect("eight bytes"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";
    const B: &str = "0b7e3c55-1a2b-4c3d-8e9f-000000000001";

    #[test]
    fn uuid_shape_is_required() {
        assert!(is_uuid(A));
        assert!(!is_uuid("6f1c2a3e8b7d4c5e9f102a3b4c5d6e7f"));
        assert!(!is_uuid("6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7g"));
        assert!(validate_token("token", "secret").is_err());
    }

    #[test]
    fn either_rotation_token_is_accepted_and_others_refused() {
        let tokens = Tokens::new(&[A.to_owned(), B.to_owned()]);
        assert!(tokens.check(Some(A.as_bytes())).is_ok());
        assert!(tokens.check(Some(B.as_bytes())).is_ok());
        assert_eq!(tokens.check(Some(b"6f1c2a3e")).unwrap_err().kind, ErrorKind::WrongToken);
        assert_eq!(Tokens::new(&[A.to_owned()]).check(Some(B.as_bytes())).unwrap_err().kind, ErrorKind::WrongToken);
        assert_eq!(tokens.check(None).unwrap_err().kind, ErrorKind::MissingToken);
        assert_eq!(tokens.check(Some(b"")).unwrap_err().kind, ErrorKind::MissingToken);
        // One byte off anywhere, the last one too (it shares its word with the padding).
        for at in [0, 8, 31, 32, 35] {
            let mut near = A.as_bytes().to_vec();
            near[at] = if near[at] == b'0' { b'1' } else { b'0' };
            assert_eq!(tokens.check(Some(&near)).unwrap_err().kind, ErrorKind::WrongToken, "byte {at}");
        }
        let mut longer = A.as_bytes().to_vec();
        longer.push(b'0');
        assert_eq!(tokens.check(Some(&longer)).unwrap_err().kind, ErrorKind::WrongToken);
    }

    #[test]
    fn tokens_are_compared_without_regard_to_case() {
        let tokens = Tokens::new(&[canonical_token(&A.to_ascii_uppercase())]);
        assert!(tokens.check(Some(A.as_bytes())).is_ok());
        assert!(tokens.check(Some(A.to_ascii_uppercase().as_bytes())).is_ok());
        assert_eq!(tokens.check(Some(B.to_ascii_uppercase().as_bytes())).unwrap_err().kind, ErrorKind::WrongToken);
    }
}
