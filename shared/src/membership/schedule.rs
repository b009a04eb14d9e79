//! Weekly work schedules: shifts in the tenant's timezone. Outside every shift a staff member
//! counts as offline for codes with the offline check on.

use chrono::{DateTime, Datelike, Duration, NaiveTime, TimeZone, Timelike, Utc, Weekday};
use chrono_tz::Tz;

const MINUTES_PER_DAY: u32 = 24 * 60;
const MINUTES_PER_WEEK: u32 = 7 * MINUTES_PER_DAY;

/// One shift: starts on `day` at `start` (local time) and ends at `end`, on the same day, or on
/// the next day when `end` is not after `start` (a night shift, 22:00 to 06:00).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shift {
    #[serde(with = "weekday_name")]
    pub day: Weekday,
    #[serde(with = "clock_time")]
    pub start: NaiveTime,
    #[serde(with = "clock_time")]
    pub end: NaiveTime,
}

/// A staff member's weekly shifts. No schedule at all means "always on shift"; an empty
/// schedule means never.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WeeklySchedule {
    pub shifts: Vec<Shift>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSchedule {
    #[error("a shift must not start and end at the same time ({0})")]
    Empty(String),
    #[error("shift times are whole minutes (HH:MM)")]
    NotWholeMinutes,
    #[error("at most {0} shifts per week")]
    TooMany(usize),
}

/// Minute of the week, Monday 00:00 = 0.
fn minute_of_week(day: Weekday, time: NaiveTime) -> u32 {
    day.num_days_from_monday() * MINUTES_PER_DAY + time.hour() * 60 + time.minute()
}

impl Shift {
    /// `[start, end)` in minutes of the week; `end` may pass the week's end (Sunday night).
    fn minutes(&self) -> (u32, u32) {
        let start = minute_of_week(self.day, self.start);
        let length = (self.end.hour() * 60 + self.end.minute() + MINUTES_PER_DAY
            - (self.start.hour() * 60 + self.start.minute()))
            % MINUTES_PER_DAY;
        let length = if length == 0 { MINUTES_PER_DAY } else { length };
        (start, start + length)
    }
}

impl WeeklySchedule {
    pub const MAX_SHIFTS: usize = 64;

    pub fn validate(&self) -> Result<(), InvalidSchedule> {
        if self.shifts.len() > Self::MAX_SHIFTS {
            return Err(InvalidSchedule::TooMany(Self::MAX_SHIFTS));
        }
        for shift in &self.shifts {
            if shift.start == shift.end {
                return Err(InvalidSchedule::Empty(format!(
                    "{} {}",
                    shift.day,
                    shift.start.format("%H:%M")
                )));
            }
            if shift.start.second() != 0 || shift.end.second() != 0 {
                return Err(InvalidSchedule::NotWholeMinutes);
            }
        }
        Ok(())
    }

    /// Whether `minute` (of the week) falls inside a shift, including shifts that wrap from
    /// Sunday night into Monday.
    fn covers(&self, minute: u32) -> bool {
        self.shifts.iter().any(|shift| {
            let (start, end) = shift.minutes();
            (start..end).contains(&minute) || (start..end).contains(&(minute + MINUTES_PER_WEEK))
        })
    }

    /// On shift at `now`, read in the tenant's timezone.
    pub fn on_shift(&self, now: DateTime<Tz>) -> bool {
        self.covers(minute_of_week(now.weekday(), now.time()))
    }

    /// The first instant after `now` at which `on_shift` changes, or `None` when it never
    /// does (no shifts, or shifts covering the whole week). Transitions fall on whole local
    /// minutes; a local minute skipped or repeated by a DST change maps to its first instant.
    pub fn next_transition_after(&self, now: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        let local = now.with_timezone(&tz);
        let here = minute_of_week(local.weekday(), local.time());
        let state = self.covers(here);
        let local_minute_start = local.naive_local().with_second(0)?.with_nanosecond(0)?;
        // Scan minute by minute over at most a week and a day; edges are on whole minutes.
        for ahead in 1..=(MINUTES_PER_WEEK + MINUTES_PER_DAY) {
            if self.covers((here + ahead) % MINUTES_PER_WEEK) != state {
                let naive = local_minute_start + Duration::minutes(i64::from(ahead));
                let instant = match tz.from_local_datetime(&naive) {
                    chrono::LocalResult::Single(t) => t,
                    chrono::LocalResult::Ambiguous(first, _) => first,
                    // In a DST gap the local minute does not exist: the edge happens when the
                    // clock jumps past it.
                    chrono::LocalResult::None => (naive + Duration::hours(1))
                        .and_local_timezone(tz)
                        .earliest()?,
                };
                let instant = instant.with_timezone(&Utc);
                if instant > now {
                    return Some(instant);
                }
            }
        }
        None
    }
}

mod weekday_name {
    use chrono::Weekday;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(day: &Weekday, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&day.to_string().to_lowercase())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Weekday, D::Error> {
        let raw = String::deserialize(d)?;
        raw.parse::<Weekday>().map_err(|_| {
            serde::de::Error::custom(format!("{raw:?} is not a weekday (mon, tue, ... sun)"))
        })
    }
}

mod clock_time {
    use chrono::NaiveTime;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(time: &NaiveTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&time.format("%H:%M").to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<NaiveTime, D::Error> {
        let raw = String::deserialize(d)?;
        NaiveTime::parse_from_str(&raw, "%H:%M")
            .map_err(|_| serde::de::Error::custom(format!("{raw:?} is not a time (HH:MM)")))
    }
}
