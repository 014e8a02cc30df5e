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

/// Checks the presented header value against the configured tokens (kept in `canonical_token`
/// form), ignoring the case of its letters. Every configured token is compared, whatever the
/// outcome of the others, so timing tells nothing about which matched.
pub fn check(configured: &[String], presented: Option<&[u8]>) -> Result<()> {
    let Some(presented) = presented.filter(|p| !p.is_empty()) else {
        return Err(Error::field(ErrorKind::MissingToken, "X-Service-Token", "header is missing"));
    };
    // A token of another length cannot match: it is compared as it is.
    let mut lowered = [0u8; 36];
    let presented = if presented.len() == lowered.len() {
        lowered.iter_mut().zip(presented).for_each(|(to, from)| *to = from.to_ascii_lowercase());
        &lowered[..]
    } else {
        presented
    };
    let matched = configured.iter().fold(subtle::Choice::from(0), |any, token| any | token.as_bytes().ct_eq(presented));
    if bool::from(matched) {
        Ok(())
    } else {
        Err(Error::field(ErrorKind::WrongToken, "X-Service-Token", "does not match the partner token"))
    }
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
        let tokens = [A.to_owned(), B.to_owned()];
        assert!(check(&tokens, Some(A.as_bytes())).is_ok());
        assert!(check(&tokens, Some(B.as_bytes())).is_ok());
        assert_eq!(check(&tokens, Some(b"6f1c2a3e")).unwrap_err().kind, ErrorKind::WrongToken);
        assert_eq!(check(&tokens[..1], Some(B.as_bytes())).unwrap_err().kind, ErrorKind::WrongToken);
        assert_eq!(check(&tokens, None).unwrap_err().kind, ErrorKind::MissingToken);
        assert_eq!(check(&tokens, Some(b"")).unwrap_err().kind, ErrorKind::MissingToken);
    }

    #[test]
    fn tokens_are_compared_without_regard_to_case() {
        let tokens = [canonical_token(&A.to_ascii_uppercase())];
        assert!(check(&tokens, Some(A.as_bytes())).is_ok());
        assert!(check(&tokens, Some(A.to_ascii_uppercase().as_bytes())).is_ok());
        assert_eq!(check(&tokens, Some(B.to_ascii_uppercase().as_bytes())).unwrap_err().kind, ErrorKind::WrongToken);
    }
}
