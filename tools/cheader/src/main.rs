//! Writes `include/etcdlock.h` from the Rust sources in `ffi-c/src` with
//! cbindgen (configured by `ffi-c/cbindgen.toml`):
//!
//! ```sh
//! cargo run -p etcdlock-cheader            # write the header
//! cargo run -p etcdlock-cheader -- --check # exit 1 if the committed one differs
//! ```
//!
//! The header is committed, so that a C program needs no Rust to read it and
//! a build of the library writes nothing outside its target directory (a
//! build script that wrote it would also put cbindgen and its dependencies in
//! every build of the library, for every target). `ffi-c/test.sh` runs the
//! check.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let check = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--check") => true,
        Some(other) => {
            eprintln!("usage: etcdlock-cheader [--check] (not {other:?})");
            return ExitCode::from(2);
        }
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ffi = root.join("ffi-c");
    let out = root.join("include").join("etcdlock.h");
    let config = match cbindgen::Config::from_file(ffi.join("cbindgen.toml")) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ffi-c/cbindgen.toml: {e}");
            return ExitCode::FAILURE;
        }
    };
    let bindings = match cbindgen::Builder::new()
        .with_crate(&ffi)
        .with_config(config)
        .generate()
    {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cbindgen could not read ffi-c/src: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let committed = std::fs::read(&out).unwrap_or_default();
    if check {
        if fresh == committed {
            println!("include/etcdlock.h is what cbindgen writes from ffi-c/src");
            return ExitCode::SUCCESS;
        }
        eprintln!(
            "include/etcdlock.h differs from what cbindgen writes from ffi-c/src: \
             run `cargo run -p etcdlock-cheader` and commit the header"
        );
        return ExitCode::FAILURE;
    }
    if fresh != committed {
        if let Err(e) = std::fs::write(&out, &fresh) {
            eprintln!("{}: {e}", out.display());
            return ExitCode::FAILURE;
        }
    }
    println!("include/etcdlock.h written from ffi-c/src");
    ExitCode::SUCCESS
}
