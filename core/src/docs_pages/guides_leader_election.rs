#![doc = include_str!("../../../docs/guides/leader-election.md")]
