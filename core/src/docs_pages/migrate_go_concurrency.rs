#![doc = include_str!("../../../docs/migrate/go-concurrency.md")]
