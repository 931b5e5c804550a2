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

use std::sync::{
    Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError,
};

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
    /// `try_read()`: `None` only when the lock is taken (or wanted) by a
    /// writer now.
    fn try_read_locked(&self) -> Option<RwLockReadGuard<'_, T>>;
    /// `try_write()`: `None` only when the lock is held now.
    fn try_write_locked(&self) -> Option<RwLockWriteGuard<'_, T>>;
}

#[allow(clippy::disallowed_methods)] // the one place that calls read()/write()
impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }
    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
    fn try_read_locked(&self) -> Option<RwLockReadGuard<'_, T>> {
        match self.try_read() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }
    fn try_write_locked(&self) -> Option<RwLockWriteGuard<'_, T>> {
        match self.try_write() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
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

    #[test]
    fn try_locks_give_up_only_while_the_lock_is_taken() {
        let l = std::sync::Arc::new(RwLock::new(1));
        {
            let _r = l.read_locked();
            assert!(l.try_read_locked().is_some(), "readers share");
            assert!(l.try_write_locked().is_none(), "a reader holds it");
        }
        {
            let _w = l.write_locked();
            assert!(l.try_read_locked().is_none(), "a writer holds it");
            assert!(l.try_write_locked().is_none());
        }
        let l2 = l.clone();
        let _ = std::thread::spawn(move || {
            let _w = l2.write_locked();
            panic!("poison it");
        })
        .join();
        assert_eq!(l.try_read_locked().map(|g| *g), Some(1), "poisoned: taken");
        assert!(l.try_write_locked().is_some());
    }
}
