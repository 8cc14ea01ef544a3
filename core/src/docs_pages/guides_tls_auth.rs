#![doc = include_str!("../../../docs/guides/tls-auth.md")]
