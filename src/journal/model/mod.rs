//! What a delivery is, the bottom layer: its key and canonical content (`key`), the claim a
//! worker holds (`claims`), the statements staged on it (`staged`), the gap arithmetic over the
//! seen indexes (`gaps`), times (`time`) and hex digits (`hex`). It names nothing of the journal
//! above it.

pub(super) mod claims;
pub(super) mod gaps;
pub(super) mod hex;
pub(super) mod key;
pub(super) mod staged;
pub(super) mod time;
