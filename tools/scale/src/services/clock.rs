//! The simulated day's wall clock: tokio's paused clock (virtual time) read as milliseconds
//! since the epoch, for the domain's `Clock` (a plain `fn() -> u64`) and for the services
//! whose windows follow the wall clock (WeCom's minutes and hours, DynamoDB's seconds).

use std::cell::Cell;
use tokio::time::{Duration, Instant};

thread_local! {
    /// Where virtual time starts, on this thread: the simulation runs on one current-thread
    /// runtime, so the thread is the simulation.
    static ORIGIN: Cell<Option<(Instant, u64)>> = const { Cell::new(None) };
}

/// Starts the simulated wall clock at `epoch_ms` now (call inside the paused runtime).
pub fn start_at(epoch_ms: u64) {
    ORIGIN.with(|origin| origin.set(Some((Instant::now(), epoch_ms))));
}

/// Where the clock started: without `start_at`, at the epoch when first read.
fn origin() -> (Instant, u64) {
    ORIGIN.with(|cell| {
        cell.get().unwrap_or_else(|| {
            let origin = (Instant::now(), 0);
            cell.set(Some(origin));
            origin
        })
    })
}

/// The simulated time in milliseconds since the epoch: the domain's `Clock`.
pub fn now_ms() -> u64 {
    epoch_ms_at(Instant::now())
}

/// The simulated wall-clock time of a virtual instant.
pub fn epoch_ms_at(at: Instant) -> u64 {
    let (origin, origin_ms) = origin();
    let since = at.saturating_duration_since(origin);
    origin_ms.saturating_add(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

/// Whole seconds since the epoch: the index of a per-second bucket.
pub fn epoch_second_at(at: Instant) -> u64 {
    epoch_ms_at(at) / 1_000
}

/// The time from `at` to the start of the next multiple of `window` on the simulated wall clock.
pub fn until_window_end(at: Instant, window: Duration) -> Duration {
    let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1);
    let now = epoch_ms_at(at);
    Duration::from_millis(window_ms - now % window_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_wall_clock_follows_virtual_time_without_waiting() {
        start_at(1_796_000_000_000);
        let wall = std::time::Instant::now();
        tokio::time::sleep(Duration::from_secs(86_400)).await;
        assert_eq!(now_ms(), 1_796_000_000_000 + 86_400_000);
        assert!(wall.elapsed() < std::time::Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_ends_at_the_next_multiple_of_its_length() {
        start_at(60_000 * 10 + 15_000);
        assert_eq!(
            until_window_end(Instant::now(), Duration::from_secs(60)),
            Duration::from_secs(45)
        );
    }
}
