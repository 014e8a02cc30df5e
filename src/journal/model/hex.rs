//! Bytes as lowercase hex digits, for digests, run names and SQL literals made of digits only.

/// `bytes` as two lowercase hex digits each.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::hex;

    #[test]
    fn two_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff, 0x3c]), "000fa0ff3c");
        assert_eq!(hex(&[]), "");
    }
}
