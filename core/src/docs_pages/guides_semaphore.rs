#![doc = include_str!("../../../docs/guides/semaphore.md")]
