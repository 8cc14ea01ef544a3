//! Mutexes that outlive a panic.
//!
//! A `std::sync::Mutex` is poisoned when a thread panics while holding it.
//! etcdlock's mutexes guard bookkeeping whose every critical section is a
//! handful of plain assignments with no `.await` and no call back into user
//! code, so a panic elsewhere never leaves the data half-written: the data of
//! a poisoned mutex is taken as it is, and one panicking callback (a binding's
//! user code on a runtime thread) does not turn every later lock call into a
//! second panic.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// `lock()` that ignores poisoning (see the module).
pub trait Locked<T: ?Sized> {
    /// The guard of this mutex, poisoned or not.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::Locked;
    use std::sync::Mutex;

    #[test]
    fn a_poisoned_mutex_still_gives_its_data() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let mut g = m2.lock().unwrap();
            *g = 2;
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        assert_eq!(*m.locked(), 2);
    }
}
