//! Recipes on `NativeClient` and the objects they return, one module per
//! family: semaphore and read-write lock, multi-lock, election, status. The
//! latch and barrier live in `crate::sync`.

mod election;
mod locks;
mod multi;
mod status;

pub(crate) use election::{leader_tuple, LeaderTuple, NativeLeadership, NativeObserver};
pub(crate) use multi::{multi_lost_for, NativeMultiGuard};
