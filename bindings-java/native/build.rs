//! macOS: the JNI library's install name is @rpath/libetcdlock_jni.dylib,
//! not the build machine's path (the JVM loads it by path either way; a
//! build path in a shipped binary is noise).
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "macos") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libetcdlock_jni.dylib");
    }
}
