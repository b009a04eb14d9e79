//! The sandbox's idea of "now". Tests can freeze or shift it so that token expiry and rate
//! windows are exercised without sleeping or racing a minute boundary.

use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Default, Serialize)]
pub struct Clock {
    /// Added to the system time while not frozen.
    pub offset_ms: i64,
    pub frozen_at_ms: Option<u64>,
}

/// `PUT /_sandbox/clock`: freeze at an instant, unfreeze (`"frozen_at_ms": null`), and/or move
/// the clock forward or back by `advance_ms`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockPatch {
    #[serde(default, deserialize_with = "double_option")]
    pub frozen_at_ms: Option<Option<u64>>,
    #[serde(default)]
    pub advance_ms: Option<i64>,
}

/// Tells an explicit `null` (unfreeze) from an absent key (leave as is).
fn double_option<'de, D>(deserializer: D) -> Result<Option<Option<u64>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Option::<u64>::deserialize(deserializer).map(Some)
}

fn system_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl Clock {
    pub fn now_ms(&self) -> u64 {
        match self.frozen_at_ms {
            Some(at) => at,
            None => system_now_ms().saturating_add_signed(self.offset_ms),
        }
    }

    pub fn now_secs(&self) -> u64 {
        self.now_ms() / 1000
    }

    pub fn apply(&mut self, patch: &ClockPatch) {
        if let Some(frozen) = patch.frozen_at_ms {
            match frozen {
                Some(at) => self.frozen_at_ms = Some(at),
                None => {
                    // Unfreezing continues from the frozen instant rather than jumping back.
                    if let Some(at) = self.frozen_at_ms.take() {
                        self.offset_ms = i64::try_from(at).unwrap_or(i64::MAX)
                            - i64::try_from(system_now_ms()).unwrap_or(i64::MAX);
                    }
                }
            }
        }
        if let Some(advance) = patch.advance_ms {
            match self.frozen_at_ms.as_mut() {
                Some(at) => *at = at.saturating_add_signed(advance),
                None => self.offset_ms = self.offset_ms.saturating_add(advance),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frozen_clock_moves_only_when_advanced() {
        let mut clock = Clock::default();
        clock.apply(&ClockPatch {
            frozen_at_ms: Some(Some(1_000)),
            advance_ms: Some(500),
        });
        assert_eq!(clock.now_ms(), 1_500);
        assert_eq!(clock.now_ms(), 1_500);
    }

    #[test]
    fn unfreezing_continues_from_the_frozen_instant() {
        let mut clock = Clock::default();
        clock.apply(&ClockPatch {
            frozen_at_ms: Some(Some(5_000)),
            advance_ms: None,
        });
        clock.apply(&ClockPatch {
            frozen_at_ms: Some(None),
            advance_ms: None,
        });
        let now = clock.now_ms();
        assert!((5_000..65_000).contains(&now), "{now}");
    }
}
