//! The library version: `SP_VERSION_*` macros in the header and `sp_version()` at run time.

use std::ffi::c_char;

/// Major version of the header; a test checks it against Cargo.toml.
pub const SP_VERSION_MAJOR: u32 = 0;
/// Minor version of the header.
pub const SP_VERSION_MINOR: u32 = 1;
/// Patch version of the header.
pub const SP_VERSION_PATCH: u32 = 0;

const VERSION: &std::ffi::CStr =
    match std::ffi::CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("version string"),
    };

/// The version of the linked library, such as `"0.1.0"`: a static string, never freed. Compare
/// it with the `SP_VERSION_*` macros to detect a header and library mismatch.
#[unsafe(no_mangle)]
pub extern "C" fn sp_version() -> *const c_char {
    VERSION.as_ptr()
}
