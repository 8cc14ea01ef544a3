//! macOS: a Python extension module leaves the interpreter's C API unresolved
//! until it is loaded into python (what maturin and setuptools-rust pass, and
//! `pyo3_build_config::add_extension_module_link_args` prints), so that
//! scripts/cross.sh can build the module with plain cargo beside the other
//! libraries of a target; and its install name is the file's name in the
//! wheel, not the build machine's path.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "macos") {
        println!("cargo:rustc-cdylib-link-arg=-undefined");
        println!("cargo:rustc-cdylib-link-arg=dynamic_lookup");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/_etcdlock.abi3.so");
    }
}
