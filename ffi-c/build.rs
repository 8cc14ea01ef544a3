//! Regenerates ../include/etcdlock.h from src/ (lib.rs and its modules) with cbindgen on every build.
//! The header is committed; ffi-c/test.sh fails when it differs from a fresh one.
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    println!("cargo:rerun-if-changed=src");
    // The shared library's SONAME carries the major version, so programs record
    // NEEDED libetcdlock.so.<major> and a future incompatible major can be
    // installed next to this one (libetcdlock.so is the dev symlink).
    // Only for what scripts/dist.sh ships (ETCDLOCK_SONAME=1): a checkout's
    // target/<profile>/ has no libetcdlock.so.<major> file for programs linked
    // against it there (ffi-c/test.sh, the demo) to find.
    println!("cargo:rerun-if-env-changed=ETCDLOCK_SONAME");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" && std::env::var_os("ETCDLOCK_SONAME").is_some_and(|v| v == "1") {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libetcdlock.so.{major}");
    }
    // macOS: programs record the dylib's install name; @rpath lets them find
    // it wherever it is installed (not the build machine's path).
    if os == "macos" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libetcdlock.dylib");
    }
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config =
        cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("ffi-c/cbindgen.toml");
    let out = dir.join("..").join("include").join("etcdlock.h");
    match cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
    {
        Ok(b) => {
            b.write_to_file(out);
        }
        Err(e) => panic!("cbindgen failed to generate include/etcdlock.h: {e}"),
    }
}
