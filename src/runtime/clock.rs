//! Wall-clock time as the state files, `/status` and the timeline store it:
//! whole Unix seconds (0 if the clock is before 1970, never a panic).

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix seconds now.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
