//! The one poison policy for the crate's std locks, written once.
//!
//! Policy: a lock poisoned by a panic in another task is taken anyway, with
//! the data as the panicking task left it. Every lock here guards state that
//! is consistent after each single update (a counter, a map insert, a
//! swapped value), nothing is mutated across a call that could panic half
//! way, and a task's panic already fails its service through its `Tasks`
//! (which stops `serve`). Refusing the lock would only turn one failure into
//! a cascade of panics in the tasks still draining.
//!
//! These are std locks, not tokio ones: none is held across an `.await`
//! (mini-redis `src/db.rs` explains the choice).

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// `lock()` under the policy above.
pub trait LockExt<T: ?Sized> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

#[allow(clippy::disallowed_methods)] // the one place that calls lock()
impl<T: ?Sized> LockExt<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `read()` / `write()` under the policy above.
pub trait RwLockExt<T: ?Sized> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
}

#[allow(clippy::disallowed_methods)] // the one place that calls read()/write()
impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }
    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_taken_with_its_data() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let mut g = m2.locked();
            *g = 2;
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        assert_eq!(*m.locked(), 2);
    }
}
