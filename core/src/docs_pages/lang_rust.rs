#![doc = include_str!("../../../docs/lang/rust.md")]
