#![doc = include_str!("../../../docs/guides/fencing.md")]
