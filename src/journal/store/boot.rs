//! This boot's identity (`/proc/sys/kernel/random/boot_id`), read once per process: what a
//! SQLite journal's leases are stored with (a lease of another boot is over), and what a
//! recovery lock's holder names (`lock::holder_text`).

use std::sync::OnceLock;

/// Where the kernel tells this boot's identity.
pub(crate) const BOOT_ID_FILE: &str = "/proc/sys/kernel/random/boot_id";

static BOOT_ID: OnceLock<Result<String, String>> = OnceLock::new();

/// This boot's identity, or why it cannot be read (for a message naming `BOOT_ID_FILE`).
pub(crate) fn boot_id() -> Result<&'static str, &'static str> {
    let read = BOOT_ID.get_or_init(|| {
        let text = std::fs::read_to_string(BOOT_ID_FILE).map_err(|e| e.to_string())?;
        let id = text.trim();
        if id.is_empty() { Err("it is empty".to_owned()) } else { Ok(id.to_owned()) }
    });
    read.as_deref().map_err(String::as_str)
}
