//! The library's link names: its SONAME (Linux) and install name (macOS).
//! include/etcdlock.h is written by tools/cheader (`cargo run -p
//! etcdlock-cheader`), not here: a build writes nothing outside its target
//! directory, and ffi-c/test.sh checks the committed header.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
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
}
