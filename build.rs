//! Gives the shared library a versioned SONAME, as an installed C library has (cargo-c's layout).
//!
//! The SONAME is `libslotpartner.so.<major>`, the major of the package version: 0.1.0 gives
//! `libslotpartner.so.0`, 1.4.2 would give `libslotpartner.so.1`. Programs record the SONAME
//! when they link, so an upgrade within one major keeps them running, and a new major installs
//! next to the old one. The rule that goes with it: while the version is 0.x, a release that
//! breaks the C ABI (a removed or changed function or struct) goes to 1.0, not to 0.2; cargo-c
//! would name 0.x libraries `.so.0.<minor>` instead. `make install` lays out
//! `libslotpartner.so.<version>` with the links `libslotpartner.so.<major>` and
//! `libslotpartner.so`; the Makefile derives the same names from Cargo.toml, and
//! `tests/install/install_test.sh` checks that `readelf -d` agrees.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    // ELF platforms only: macOS names libraries through -install_name, Windows has no SONAME.
    if target_os != "macos" && target_os != "ios" && target_os != "windows" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libslotpartner.so.{major}");
    }
}
