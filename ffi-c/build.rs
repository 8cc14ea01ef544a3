//! Regenerates ../include/etcdlock.h from src/lib.rs with cbindgen on every build.
//! The header is committed; ffi-c/test.sh fails when it differs from a fresh one.
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    println!("cargo:rerun-if-changed=src");
    // The shared library's SONAME carries the major version, so programs record
    // NEEDED libetcdlock.so.<major> and a future incompatible major can be
    // installed next to this one (libetcdlock.so is the dev symlink).
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libetcdlock.so.{major}");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("ffi-c/cbindgen.toml");
    let out = dir.join("..").join("include").join("etcdlock.h");
    match cbindgen::Builder::new().with_crate(&dir).with_config(config).generate() {
        Ok(b) => {
            b.write_to_file(out);
        }
        Err(e) => panic!("cbindgen failed to generate include/etcdlock.h: {e}"),
    }
}
