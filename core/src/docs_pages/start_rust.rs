#![doc = include_str!("../../../docs/start/rust.md")]
