//! `mallopt(M_ARENA_MAX, n)`: cap the number of glibc malloc arenas.
//!
//! Why: glibc gives a thread that allocates its own arena (up to 8 per
//! core), and each keeps its free memory resident: a DNS-only `serve` with
//! its two UDP worker threads carried two arenas of ~200 kB each after a
//! load run (bench/RESULTS-memory.md, run 4), a quarter of what separated
//! it from 1.5× Knot's RSS. One arena is what the single-threaded peers
//! have; glibc's per-thread cache (tcache) still serves most small
//! allocations without the arena lock.
//!
//! Why a crate of its own: the main crate forbids `unsafe`; `mallopt` has
//! no safe wrapper in rustix or std. This is the one `unsafe` call. Setting
//! `MALLOC_ARENA_MAX` in the environment (read by glibc at start) would do
//! the same, but only for processes started with it.

/// Cap glibc's malloc arenas at `n` unless the environment already chose
/// (`MALLOC_ARENA_MAX`, or `arena_max` in `GLIBC_TUNABLES`). Call it first
/// in `main`, before any thread starts. Returns whether the cap was set; a
/// no-op (false) on other C libraries.
pub fn limit(n: i32) -> bool {
    let chosen = std::env::var_os("MALLOC_ARENA_MAX").is_some()
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
    !chosen && set(n)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set(n: i32) -> bool {
    // SAFETY: mallopt only sets a malloc parameter; M_ARENA_MAX with a
    // positive value is documented (mallopt(3)) and takes no pointers.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, n) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set(_n: i32) -> bool {
    false
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cap_is_accepted() {
        // The test harness has started threads, so this only checks that
        // glibc accepts the parameter (it applies to arenas created later).
        if std::env::var_os("MALLOC_ARENA_MAX").is_none()
            && !std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"))
        {
            assert_eq!(super::limit(1), cfg!(target_env = "gnu"));
        }
    }
}
