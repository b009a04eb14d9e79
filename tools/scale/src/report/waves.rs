//! What drives the stretch's usage: the day's activity, which goes on all day, or a wave,
//! which comes only at the profile's shift edges and the tenants' midnights.
//!
//! A stretch around 09:00 holds the day's biggest shift wave: scaling its usage by the day's
//! scans over the stretch's counts that wave some eighty times a day. So each line of usage (a
//! queue's requests, a function's invocations and time, DynamoDB's units) is counted minute
//! by minute (`run::UsageSoFar`), and split:
//!
//! - the minutes before the stretch's first edge are the day's usual minutes: their usage per
//!   unit of its driver (a change the day's activity made the lists owe, an add, or a
//!   millisecond, `Driver`) is the usual rate, and that rate times the stretch's driver is the
//!   line's continuous part;
//! - what the stretch counted beyond that rate, from the first edge to the end of settling, is
//!   the waves': each minute's excess goes to the wave of the latest edge before the minute
//!   ends (a shift edge's or a midnight's).
//!
//! The month then scales each part by its own driver (`report::month`): the continuous part
//! by the day's activity over the stretch's, the waves by the day's edges over the stretch's,
//! weighted by the staff each edge moves.

use crate::profile::Shift;
use crate::run::ZoneStaff;
use chrono::{TimeZone, Timelike, Utc};

const MINUTE_MS: u64 = 60_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wave {
    /// Staff start or end a shift: every code with the offline check they sit on changes.
    ShiftEdge,
    /// A tenant's day ends: the codes the day's limits claimed are redone.
    Midnight,
}

/// A minute where staff of the simulated tenants start or end a shift, or a zone's day ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    pub at_ms: u64,
    pub wave: Wave,
    /// The staff it moves: those starting or ending a shift then, or at a midnight every staff
    /// member of the zones whose day ends.
    pub staff: u64,
}

/// The edges in `[from_ms, until_ms)`, in order (a minute with both kinds gives one of each).
pub fn edges_between(
    shifts: &[Shift],
    zones: &[ZoneStaff],
    from_ms: u64,
    until_ms: u64,
) -> Vec<Edge> {
    let mut edges = Vec::new();
    let mut minute = from_ms.div_ceil(MINUTE_MS) * MINUTE_MS;
    while minute < until_ms {
        let Some(at) = i64::try_from(minute)
            .ok()
            .and_then(|ms| Utc.timestamp_millis_opt(ms).single())
        else {
            break;
        };
        let (mut moved, mut days_ending) = (0, 0);
        for zone in zones {
            let local = at.with_timezone(&zone.zone);
            let of_day = local.hour() * 60 + local.minute();
            for (shift, staff) in shifts.iter().zip(&zone.on_shift) {
                let starts = u32::from(shift.start.minute_of_day) == of_day;
                let ends = u32::from(shift.end.minute_of_day) == of_day;
                moved += staff * (u64::from(starts) + u64::from(ends));
            }
            if of_day == 0 {
                days_ending += zone.staff;
            }
        }
        if moved > 0 {
            edges.push(Edge {
                at_ms: minute,
                wave: Wave::ShiftEdge,
                staff: moved,
            });
        }
        if days_ending > 0 {
            edges.push(Edge {
                at_ms: minute,
                wave: Wave::Midnight,
                staff: days_ending,
            });
        }
        minute += MINUTE_MS;
    }
    edges
}

/// The staff the day's edges of `wave` move in all: each shift's staff twice (at its start and
/// at its end), every staff member once at their zone's midnight.
pub fn day_staff(wave: Wave, zones: &[ZoneStaff]) -> u64 {
    match wave {
        Wave::ShiftEdge => zones
            .iter()
            .map(|zone| 2 * zone.on_shift.iter().sum::<u64>())
            .sum(),
        Wave::Midnight => zones.iter().map(|zone| zone.staff).sum(),
    }
}

/// The day's edges of `wave` over the stretch's, by the staff they move; `None` when the
/// stretch holds none.
pub fn waves_per_day(wave: Wave, zones: &[ZoneStaff], edges: &[Edge]) -> Option<f64> {
    let in_stretch: u64 = edges
        .iter()
        .filter(|e| e.wave == wave)
        .map(|e| e.staff)
        .sum();
    (in_stretch > 0).then(|| day_staff(wave, zones) as f64 / in_stretch as f64)
}

/// What a line's continuous part follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// The changes the day's activity made the lists owe (`run::ReasonsMade`): the refresh
    /// path's queues and functions, DynamoDB.
    Activity,
    /// The adds: WeCom's callbacks, the inbox and the function that records them.
    Adds,
    /// The clock: scheduled functions, and queue polls that found nothing.
    Clock,
}

/// One instant the run counted at: the run's minute samples, then the end of settling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mark {
    pub at_ms: u64,
    /// Adds so far.
    pub adds: f64,
    /// Changes the day's activity made so far (`ReasonsMade::total`).
    pub reasons: f64,
}

/// Where the day's usual minutes are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// No edge from the stretch's start to the end of its settling: all of it is the day's
    /// activity.
    NoEdge,
    /// The stretch starts at an edge: no usual minute to measure, so all of it is counted as
    /// the day's activity (which overstates the waves).
    Unmeasured,
    /// From the stretch's start to this mark, the first at or before the first edge.
    Until { at_ms: u64 },
}

/// A line's stretch total (in the line's unit), by driver. `continuous` is what the stretch's
/// own activity at the usual rate comes to, the part the day's activity scales.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Split {
    pub continuous: f64,
    pub shift_edges: f64,
    pub midnights: f64,
}

/// The stretch's marks and edges, to split each line of usage by.
#[derive(Debug, Clone)]
pub struct Attribution {
    start_ms: u64,
    end_ms: u64,
    marks: Vec<Mark>,
    edges: Vec<Edge>,
    /// The mark the usual minutes end at.
    usual_until: Option<usize>,
}

impl Attribution {
    /// `marks` in time order, the first at the stretch's start and the last at the end of
    /// settling; `edges` from `edges_between`, over the same span.
    pub fn new(start_ms: u64, end_ms: u64, marks: Vec<Mark>, edges: Vec<Edge>) -> Self {
        let usual_until = edges.first().and_then(|first| {
            marks
                .iter()
                .rposition(|m| m.at_ms <= first.at_ms)
                .filter(|&at| marks[at].at_ms > start_ms)
        });
        Self {
            start_ms,
            end_ms,
            marks,
            edges,
            usual_until,
        }
    }

    pub fn baseline(&self) -> Baseline {
        match (self.edges.is_empty(), self.usual_until) {
            (true, _) => Baseline::NoEdge,
            (false, None) => Baseline::Unmeasured,
            (false, Some(at)) => Baseline::Until {
                at_ms: self.marks[at].at_ms,
            },
        }
    }

    /// Splits a line counted `cumulative[i]` by mark `i` (as many values as marks).
    pub fn split(&self, driver: Driver, cumulative: &[f64]) -> Split {
        let total = cumulative.last().copied().unwrap_or(0.0);
        let Some(usual) = self.usual_until else {
            return Split {
                continuous: total,
                ..Split::default()
            };
        };
        let by_time = self.amount_between(driver, 0, usual) <= 0.0;
        let amount = |from: usize, to: usize| {
            if by_time {
                self.stretch_ms_between(from, to)
            } else {
                self.amount_between(driver, from, to)
            }
        };
        let usual_amount = amount(0, usual);
        let rate = if usual_amount > 0.0 {
            cumulative.get(usual).copied().unwrap_or(0.0) / usual_amount
        } else {
            0.0
        };
        let last = self.marks.len().min(cumulative.len()).saturating_sub(1);
        // The stretch's own share of the driver: what the day's activity scales. The clock's
        // runs on while settling, but the day's length covers those minutes already.
        let stretch_amount = match driver {
            Driver::Clock if !by_time => self.end_ms.saturating_sub(self.start_ms) as f64,
            _ => amount(0, last),
        };
        // A line's usage per unit of activity can only fall after the usual minutes (warm
        // functions, fewer cold starts): never more continuous usage than was counted. The
        // clock's is the usual rate whatever the waves did (busy pollers find no empty queue).
        let continuous = match driver {
            Driver::Clock => rate * stretch_amount,
            _ => (rate * stretch_amount).min(total),
        };
        let (mut excess_shift, mut excess_midnight, mut expected) = (0.0, 0.0, 0.0);
        for i in 0..last {
            let used = cumulative[i + 1] - cumulative[i];
            let usual_here = rate * amount(i, i + 1);
            expected += usual_here;
            if i < usual {
                continue;
            }
            let excess = (used - usual_here).max(0.0);
            match self.wave_before(self.marks[i + 1].at_ms) {
                Some(Wave::Midnight) => excess_midnight += excess,
                _ => excess_shift += excess,
            }
        }
        let waves = (total - expected.max(continuous)).max(0.0);
        let excess = excess_shift + excess_midnight;
        let midnight_share = if excess > 0.0 {
            excess_midnight / excess
        } else {
            // No minute above the usual rate, only the totals: the first edge's wave.
            let first_is_midnight = self.edges.first().map(|e| e.wave) == Some(Wave::Midnight);
            f64::from(u8::from(first_is_midnight))
        };
        Split {
            continuous,
            shift_edges: waves * (1.0 - midnight_share),
            midnights: waves * midnight_share,
        }
    }

    /// The wave of the latest edge before `until_ms`.
    fn wave_before(&self, until_ms: u64) -> Option<Wave> {
        self.edges
            .iter()
            .rev()
            .find(|e| e.at_ms < until_ms)
            .map(|e| e.wave)
    }

    fn amount_between(&self, driver: Driver, from: usize, to: usize) -> f64 {
        let (Some(a), Some(b)) = (self.marks.get(from), self.marks.get(to)) else {
            return 0.0;
        };
        match driver {
            Driver::Activity => b.reasons - a.reasons,
            Driver::Adds => b.adds - a.adds,
            Driver::Clock => b.at_ms.saturating_sub(a.at_ms) as f64,
        }
    }

    /// Milliseconds between the marks inside the stretch proper (settling has no activity).
    fn stretch_ms_between(&self, from: usize, to: usize) -> f64 {
        let (Some(a), Some(b)) = (self.marks.get(from), self.marks.get(to)) else {
            return 0.0;
        };
        let clamp = |ms: u64| ms.clamp(self.start_ms, self.end_ms);
        clamp(b.at_ms).saturating_sub(clamp(a.at_ms)) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;
    use chrono::NaiveDate;
    use chrono_tz::Tz;
    use std::path::Path;

    const START: u64 = 1_000 * MINUTE_MS;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.abs().max(1.0)
    }

    /// A mark a minute over `minutes` minutes and the end of settling `settle` minutes after
    /// them, with `reasons(minute)` made in each minute.
    fn marks(minutes: u64, settle: u64, reasons: impl Fn(u64) -> f64) -> Vec<Mark> {
        let mut made = 0.0;
        let mut marks = Vec::new();
        for minute in 0..=minutes + settle {
            marks.push(Mark {
                at_ms: START + minute * MINUTE_MS,
                adds: made,
                reasons: made,
            });
            if minute < minutes {
                made += reasons(minute);
            }
        }
        marks
    }

    fn cumulative(marks: &[Mark], used: impl Fn(u64) -> f64) -> Vec<f64> {
        let mut so_far = 0.0;
        let mut out = vec![0.0];
        for minute in 1..marks.len() as u64 {
            so_far += used(minute - 1);
            out.push(so_far);
        }
        out
    }

    fn edge(minute: u64, wave: Wave, staff: u64) -> Edge {
        Edge {
            at_ms: START + minute * MINUTE_MS,
            wave,
            staff,
        }
    }

    #[test]
    fn a_stretch_whose_usage_is_all_in_the_edge_minute_scales_by_the_days_edges_not_by_scans() {
        let marks = marks(30, 5, |_| 10.0);
        let edges = vec![edge(10, Wave::ShiftEdge, 600)];
        let attribution = Attribution::new(START, START + 30 * MINUTE_MS, marks.clone(), edges);
        let used = cumulative(&marks, |minute| if minute == 10 { 5_000.0 } else { 0.0 });
        let split = attribution.split(Driver::Activity, &used);
        assert_eq!(
            split,
            Split {
                continuous: 0.0,
                shift_edges: 5_000.0,
                midnights: 0.0
            }
        );
        let zones = [ZoneStaff {
            zone: Tz::Asia__Shanghai,
            staff: 1_000,
            on_shift: vec![600, 100, 100],
        }];
        let edges = [edge(10, Wave::ShiftEdge, 600)];
        // 1,600 staff moved in a day (each shift's start and end), 600 of them in the stretch.
        assert_eq!(
            waves_per_day(Wave::ShiftEdge, &zones, &edges),
            Some(1_600.0 / 600.0)
        );
        assert_eq!(waves_per_day(Wave::Midnight, &zones, &edges), None);
    }

    #[test]
    fn a_stretch_with_no_edge_counts_all_its_usage_as_the_days_activity() {
        let marks = marks(30, 5, |_| 10.0);
        let attribution = Attribution::new(START, START + 30 * MINUTE_MS, marks.clone(), vec![]);
        assert_eq!(attribution.baseline(), Baseline::NoEdge);
        let used = cumulative(&marks, |minute| if minute == 10 { 5_000.0 } else { 7.0 });
        let total = used.last().copied().unwrap_or_default();
        for driver in [Driver::Activity, Driver::Adds, Driver::Clock] {
            assert_eq!(
                attribution.split(driver, &used),
                Split {
                    continuous: total,
                    ..Split::default()
                }
            );
        }
    }

    #[test]
    fn the_usual_rate_before_the_first_edge_is_taken_out_of_the_waves() {
        // Two units per reason all along, and 5,000 more from the edge on.
        let marks = marks(30, 5, |minute| if minute < 20 { 10.0 } else { 30.0 });
        let edges = vec![edge(10, Wave::ShiftEdge, 600)];
        let attribution = Attribution::new(START, START + 30 * MINUTE_MS, marks.clone(), edges);
        assert_eq!(
            attribution.baseline(),
            Baseline::Until {
                at_ms: START + 10 * MINUTE_MS
            }
        );
        let used = cumulative(&marks, |minute| {
            let usual = match minute {
                0..20 => 20.0,
                20..30 => 60.0,
                _ => 0.0,
            };
            let wave = if (10..15).contains(&minute) {
                1_000.0
            } else {
                0.0
            };
            usual + wave
        });
        let split = attribution.split(Driver::Activity, &used);
        assert!(
            close(split.continuous, 20.0 * 20.0 + 60.0 * 10.0),
            "{split:?}"
        );
        assert!(close(split.shift_edges, 5_000.0), "{split:?}");
        assert!(close(split.midnights, 0.0), "{split:?}");
    }

    #[test]
    fn work_done_while_settling_is_the_waves_and_idle_polls_follow_the_clock() {
        let marks = marks(30, 5, |_| 10.0);
        let edges = vec![edge(10, Wave::ShiftEdge, 600)];
        let attribution = Attribution::new(START, START + 30 * MINUTE_MS, marks.clone(), edges);
        // The backlog drained while settling: 300 a minute for five minutes.
        let refreshes = cumulative(&marks, |minute| if minute >= 30 { 300.0 } else { 10.0 });
        let split = attribution.split(Driver::Activity, &refreshes);
        assert!(close(split.continuous, 300.0), "{split:?}");
        assert!(close(split.shift_edges, 1_500.0), "{split:?}");
        // Empty receives: three a minute, fewer while the wave kept the pollers busy. The
        // stretch's 30 minutes at the usual rate are the continuous part; settling's minutes
        // are the clock's too, not a wave's.
        let polls = cumulative(&marks, |minute| if minute < 10 { 3.0 } else { 1.0 });
        let split = attribution.split(Driver::Clock, &polls);
        assert!(close(split.continuous, 90.0), "{split:?}");
        assert!(close(split.shift_edges, 0.0), "{split:?}");
    }

    #[test]
    fn usage_after_a_midnight_goes_to_the_midnights_and_after_a_shift_edge_to_the_shift_waves() {
        let marks = marks(30, 0, |_| 10.0);
        let edges = vec![
            edge(10, Wave::Midnight, 1_000),
            edge(20, Wave::ShiftEdge, 100),
        ];
        let attribution = Attribution::new(START, START + 30 * MINUTE_MS, marks.clone(), edges);
        let used = cumulative(&marks, |minute| match minute {
            10 => 1_010.0,
            20 => 3_010.0,
            _ => 10.0,
        });
        let split = attribution.split(Driver::Activity, &used);
        assert!(close(split.continuous, 300.0), "{split:?}");
        assert!(close(split.midnights, 1_000.0), "{split:?}");
        assert!(close(split.shift_edges, 3_000.0), "{split:?}");
    }

    #[test]
    fn a_stretch_starting_at_its_edge_has_no_usual_minute_and_counts_all_as_the_days_activity() {
        let marks = marks(30, 5, |_| 10.0);
        let edges = vec![edge(0, Wave::ShiftEdge, 600)];
        let attribution = Attribution::new(START, START + 30 * MINUTE_MS, marks.clone(), edges);
        assert_eq!(attribution.baseline(), Baseline::Unmeasured);
        let used = cumulative(&marks, |_| 100.0);
        assert!(close(
            attribution.split(Driver::Activity, &used).continuous,
            3_500.0
        ));
    }

    #[test]
    fn the_edge_weights_come_from_the_profiles_shifts() {
        let profile = Profile::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("profile.toml"))
            .expect("the shipped profile loads");
        let on_shift: Vec<u64> = profile
            .shift
            .iter()
            .map(|s| (s.share * 1_000.0).round() as u64)
            .collect();
        let zones = [ZoneStaff {
            zone: Tz::Asia__Shanghai,
            staff: 1_000,
            on_shift: on_shift.clone(),
        }];
        let day = NaiveDate::from_ymd_opt(2026, 11, 11)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .and_then(|t| Tz::Asia__Shanghai.from_local_datetime(&t).single())
            .map(|t| t.timestamp_millis() as u64)
            .expect("Shanghai's midnight");
        let edges = edges_between(&profile.shift, &zones, day, day + 1_440 * MINUTE_MS);
        let found: Vec<(u64, Wave, u64)> = edges
            .iter()
            .map(|e| ((e.at_ms - day) / MINUTE_MS, e.wave, e.staff))
            .collect();
        // Each shift's staff move at its start and at its end; a minute where one shift ends
        // and another starts (18:00 in the shipped profile) moves both.
        let mut moved = std::collections::BTreeMap::new();
        for (shift, staff) in profile.shift.iter().zip(&on_shift) {
            for minute in [shift.start.minute_of_day, shift.end.minute_of_day] {
                *moved.entry(u64::from(minute)).or_insert(0) += staff;
            }
        }
        let mut expected = vec![(0, Wave::Midnight, 1_000)];
        expected.extend(moved.iter().map(|(m, s)| (*m, Wave::ShiftEdge, *s)));
        assert_eq!(found, expected);
        let in_day: u64 = moved.values().sum();
        assert_eq!(in_day, day_staff(Wave::ShiftEdge, &zones));
        // A stretch holding only the first shift's start scales its wave by the day's edges
        // over that minute's.
        let first = u64::from(profile.shift[0].start.minute_of_day) * MINUTE_MS;
        let only_first = edges_between(&profile.shift, &zones, day + first, day + first + 1);
        assert_eq!(
            waves_per_day(Wave::ShiftEdge, &zones, &only_first),
            Some(in_day as f64 / moved[&(first / MINUTE_MS)] as f64)
        );
    }
}
