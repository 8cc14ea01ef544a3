fn main() {
    // napi-build links a windows-gnu addon against a `libnode.dll` (MSYS2's
    // Node) and fails when none is found. This module resolves Node-API from
    // the host process at load time instead (napi's `dyn-symbols`), so it
    // needs no Node library at build time and loads in the official node.exe.
    let target = std::env::var("TARGET").unwrap_or_default();
    // macOS: the install name the packed file has (etcdlock.<key>.node, as
    // loader.js names it), not the build machine's path.
    if target.ends_with("-apple-darwin") {
        let key = if target.starts_with("aarch64") {
            "darwin-arm64"
        } else {
            "darwin-x64"
        };
        println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/etcdlock.{key}.node");
    }
    if target.ends_with("-windows-gnu") || target.ends_with("-windows-gnullvm") {
        return;
    }
    napi_build::setup();
}
