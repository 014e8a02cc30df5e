//! The checked-in header must be exactly what cbindgen generates from the C ABI in src/ffi/.
//! `SLOTPARTNER_BLESS=1 cargo test --test header` rewrites it (what `make header` does).

use std::path::Path;

#[test]
fn checked_in_header_matches_the_source() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_src(root.join("src/ffi/mod.rs"))
        .with_config(config)
        .generate()
        .expect("cbindgen runs");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("UTF-8 header");
    let path = root.join("include/slotpartner.h");
    if std::env::var_os("SLOTPARTNER_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write header");
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(checked_in == generated, "include/slotpartner.h is stale: run `make header` and commit it");
}

#[test]
fn header_version_macros_match_the_package() {
    let header = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("include/slotpartner.h")).unwrap();
    for (name, value) in [
        ("SP_VERSION_MAJOR", env!("CARGO_PKG_VERSION_MAJOR")),
        ("SP_VERSION_MINOR", env!("CARGO_PKG_VERSION_MINOR")),
        ("SP_VERSION_PATCH", env!("CARGO_PKG_VERSION_PATCH")),
    ] {
        assert!(header.contains(&format!("#define {name} {value}\n")), "{name} is not {value} in the header");
    }
}
