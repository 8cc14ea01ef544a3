#![doc = include_str!("../../../docs/guides/unit-tests.md")]
