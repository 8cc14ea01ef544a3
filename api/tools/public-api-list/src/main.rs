//! Prints the public API in a rustdoc JSON file, one item a line, as
//! `cargo public-api --rustdoc-json FILE --omit blanket-impls` (`-s`) does.
//! Usage: public-api-list FILE.json
use std::io::Write;

fn main() {
    let path = std::env::args_os()
        .nth(1)
        .expect("usage: public-api-list FILE.json");
    let api = public_api::Builder::from_rustdoc_json(path)
        .omit_blanket_impls(true)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("public-api-list: {e}");
            std::process::exit(1)
        });
    let mut out = std::io::stdout().lock();
    for item in api.items() {
        writeln!(out, "{item}").expect("stdout");
    }
}
