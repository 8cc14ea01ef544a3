//! placeholder: the fault suite
