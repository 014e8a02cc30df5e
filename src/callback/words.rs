//! Bytes looked for eight at a time: the flags of the bytes of a word that are below a bound or
//! equal to a value, for the scans that look for a few byte values (`quick_scan`'s strings,
//! `json`'s control characters). A byte's flag is its high bit. The lowest flag of a word is
//! exact; the borrow of the subtraction can also flag a byte above one that is flagged, never a
//! word without one. So a word is flagged exactly when one of its bytes matches, and the lowest
//! flag is the first match.

const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);

/// The eight bytes of `chunk` as one word, byte 0 lowest.
#[inline(always)]
pub fn word(chunk: &[u8]) -> u64 {
    u64::from_le_bytes(chunk.try_into().expect("eight bytes"))
}

/// The flags of the bytes of `word` below `bound` (at most 0x80).
#[inline(always)]
pub fn below(word: u64, bound: u8) -> u64 {
    word.wrapping_sub(ONES * u64::from(bound)) & !word & HIGH
}

/// The flags of the bytes of `word` equal to `byte`.
#[inline(always)]
pub fn equal(word: u64, byte: u8) -> u64 {
    below(word ^ (ONES * u64::from(byte)), 1)
}
