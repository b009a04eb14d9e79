//! Weekly work schedules: shifts in the tenant's timezone. Outside every shift a staff member
//! counts as offline for codes with the offline check on.

use chrono::{DateTime, Datelike, Duration, NaiveTime, Timelike, Utc, Weekday};
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
    /// does (no shifts, or shifts covering the whole week).
    ///
    /// `on_shift` reads the local wall clock, so this follows the clock through DST changes:
    /// a shift that starts inside a skipped hour starts when the clock jumps past its start,
    /// and an edge inside a repeated hour happens twice (with the jump back in between as a
    /// transition of its own). Edges fall on whole local minutes, which are whole UTC minutes
    /// in every zone whose offset is whole minutes (all of today's).
    pub fn next_transition_after(&self, now: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        if self.shifts.is_empty() {
            return None;
        }
        let on_shift_at = |instant: DateTime<Utc>| self.on_shift(instant.with_timezone(&tz));
        let state = on_shift_at(now);
        let minute_start = now.with_second(0)?.with_nanosecond(0)?;
        // A week and a day of minutes: every edge of a weekly schedule comes round within a
        // week, plus room for the clock to be set back.
        (1..=i64::from(MINUTES_PER_WEEK + MINUTES_PER_DAY))
            .map(|ahead| minute_start + Duration::minutes(ahead))
            .find(|instant| on_shift_at(*instant) != state)
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{NaiveDate, TimeZone};
    use chrono_tz::America::New_York;
    use chrono_tz::Asia::Shanghai;

    fn hm(raw: &str) -> NaiveTime {
        NaiveTime::parse_from_str(raw, "%H:%M").expect("HH:MM")
    }

    fn shift(day: Weekday, start: &str, end: &str) -> Shift {
        Shift {
            day,
            start: hm(start),
            end: hm(end),
        }
    }

    fn schedule(shifts: &[(Weekday, &str, &str)]) -> WeeklySchedule {
        WeeklySchedule {
            shifts: shifts.iter().map(|(d, s, e)| shift(*d, s, e)).collect(),
        }
    }

    /// A local wall-clock time in `tz` (must exist and be unambiguous).
    fn local(tz: Tz, y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Tz> {
        tz.with_ymd_and_hms(y, m, d, h, min, 0)
            .single()
            .expect("one instant")
    }

    fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, h, min, 0)
            .single()
            .expect("utc")
    }

    // 2024-05-06 is a Monday.
    fn shanghai(d: u32, h: u32, min: u32) -> DateTime<Tz> {
        local(Shanghai, 2024, 5, d, h, min)
    }

    #[test]
    fn a_day_shift_covers_its_start_but_not_its_end() {
        let s = schedule(&[(Weekday::Mon, "09:00", "18:00")]);
        assert!(!s.on_shift(shanghai(6, 8, 59)));
        assert!(s.on_shift(shanghai(6, 9, 0)));
        assert!(s.on_shift(shanghai(6, 17, 59)));
        assert!(!s.on_shift(shanghai(6, 18, 0)));
        // Same time on another day is off.
        assert!(!s.on_shift(shanghai(7, 10, 0)));
        assert!(!s.on_shift(shanghai(12, 10, 0)));
        // And on again a week later.
        assert!(s.on_shift(shanghai(13, 10, 0)));
    }

    #[test]
    fn seconds_inside_the_last_minute_of_a_shift_are_still_on_shift() {
        let s = schedule(&[(Weekday::Mon, "09:00", "18:00")]);
        let almost = Shanghai
            .with_ymd_and_hms(2024, 5, 6, 17, 59, 59)
            .single()
            .expect("instant");
        assert!(s.on_shift(almost));
    }

    #[test]
    fn a_night_shift_crossing_midnight_covers_the_evening_and_the_next_morning() {
        let s = schedule(&[(Weekday::Tue, "22:00", "06:00")]);
        assert!(!s.on_shift(shanghai(7, 21, 59)));
        assert!(s.on_shift(shanghai(7, 22, 0)));
        assert!(s.on_shift(shanghai(7, 23, 59)));
        assert!(s.on_shift(shanghai(8, 0, 0)));
        assert!(s.on_shift(shanghai(8, 5, 59)));
        assert!(!s.on_shift(shanghai(8, 6, 0)));
        // Tuesday morning is not part of Tuesday's night shift.
        assert!(!s.on_shift(shanghai(7, 3, 0)));
        assert!(!s.on_shift(shanghai(8, 22, 30)));
    }

    #[test]
    fn a_sunday_night_shift_wraps_into_monday_morning() {
        let s = schedule(&[(Weekday::Sun, "22:00", "06:00")]);
        // 2024-05-12 is a Sunday, 2024-05-13 the Monday after, 2024-05-06 the Monday before.
        assert!(s.on_shift(shanghai(12, 23, 0)));
        assert!(s.on_shift(shanghai(13, 0, 0)));
        assert!(s.on_shift(shanghai(13, 5, 59)));
        assert!(!s.on_shift(shanghai(13, 6, 0)));
        assert!(s.on_shift(shanghai(6, 3, 0)), "the wrap works any week");
        assert!(!s.on_shift(shanghai(12, 3, 0)), "Sunday morning is off");
    }

    #[test]
    fn a_shift_ending_at_midnight_ends_at_the_start_of_the_next_day() {
        let s = schedule(&[(Weekday::Sun, "18:00", "00:00")]);
        assert!(s.on_shift(shanghai(12, 23, 59)));
        assert!(!s.on_shift(shanghai(13, 0, 0)));
    }

    #[test]
    fn no_schedule_is_always_on_shift_and_an_empty_schedule_is_never() {
        use crate::membership::StaffFacts;
        let now = shanghai(8, 3, 17);
        let unscheduled = StaffFacts::ACTIVE_ONLINE;
        assert!(unscheduled.available(now));
        let empty = StaffFacts {
            schedule: Some(WeeklySchedule::default()),
            ..StaffFacts::ACTIVE_ONLINE
        };
        assert!(!WeeklySchedule::default().on_shift(now));
        assert!(!empty.available(now));
        let offline = StaffFacts {
            online: false,
            ..StaffFacts::ACTIVE_ONLINE
        };
        assert!(
            !offline.available(now),
            "a schedule never overrides the flag"
        );
    }

    #[test]
    fn the_next_transition_off_shift_is_the_next_start() {
        let s = schedule(&[(Weekday::Mon, "09:00", "18:00")]);
        // Monday 08:00 in Shanghai is 00:00 UTC; 09:00 there is 01:00 UTC.
        let now = shanghai(6, 8, 0).with_timezone(&Utc);
        assert_eq!(now, utc(2024, 5, 6, 0, 0));
        assert_eq!(
            s.next_transition_after(now, Shanghai),
            Some(utc(2024, 5, 6, 1, 0))
        );
    }

    #[test]
    fn the_next_transition_on_shift_is_the_end_of_the_shift() {
        let s = schedule(&[(Weekday::Mon, "09:00", "18:00")]);
        for start in [shanghai(6, 9, 0), shanghai(6, 12, 30)] {
            assert_eq!(
                s.next_transition_after(start.with_timezone(&Utc), Shanghai),
                Some(utc(2024, 5, 6, 10, 0)),
                "from {start}"
            );
        }
    }

    #[test]
    fn the_next_transition_is_strictly_after_now_even_between_whole_minutes() {
        let s = schedule(&[(Weekday::Mon, "09:00", "18:00")]);
        let just_before = utc(2024, 5, 6, 0, 59) + Duration::seconds(59);
        assert_eq!(
            s.next_transition_after(just_before, Shanghai),
            Some(utc(2024, 5, 6, 1, 0))
        );
        // Exactly at the end: the shift just ended; next is next Monday's start.
        assert_eq!(
            s.next_transition_after(utc(2024, 5, 6, 10, 0), Shanghai),
            Some(utc(2024, 5, 13, 1, 0))
        );
    }

    #[test]
    fn after_the_last_shift_of_the_week_the_next_transition_is_next_weeks_first() {
        let s = schedule(&[
            (Weekday::Mon, "09:00", "18:00"),
            (Weekday::Wed, "09:00", "18:00"),
        ]);
        let thursday = shanghai(9, 12, 0).with_timezone(&Utc);
        assert_eq!(
            s.next_transition_after(thursday, Shanghai),
            Some(utc(2024, 5, 13, 1, 0))
        );
    }

    #[test]
    fn a_night_shift_ends_the_next_morning_across_the_week_boundary() {
        let s = schedule(&[(Weekday::Sun, "22:00", "06:00")]);
        let sunday_night = shanghai(12, 23, 0).with_timezone(&Utc);
        // Monday 06:00 in Shanghai is Sunday 22:00 UTC.
        assert_eq!(
            s.next_transition_after(sunday_night, Shanghai),
            Some(utc(2024, 5, 12, 22, 0))
        );
    }

    #[test]
    fn there_is_no_transition_without_shifts_or_with_the_whole_week_covered() {
        let now = utc(2024, 5, 8, 3, 17);
        assert_eq!(
            WeeklySchedule::default().next_transition_after(now, Shanghai),
            None
        );
        let mut whole = Vec::new();
        for day in [
            Weekday::Mon,
            Weekday::Tue,
            Weekday::Wed,
            Weekday::Thu,
            Weekday::Fri,
            Weekday::Sat,
            Weekday::Sun,
        ] {
            whole.push((day, "00:00", "12:00"));
            whole.push((day, "12:00", "00:00"));
        }
        let whole = schedule(&whole);
        assert!(whole.validate().is_ok());
        assert!(whole.on_shift(now.with_timezone(&Shanghai)));
        assert_eq!(whole.next_transition_after(now, Shanghai), None);
        assert_eq!(whole.next_transition_after(now, New_York), None);
    }

    #[test]
    fn a_shift_after_spring_forward_starts_at_its_local_time_in_the_new_offset() {
        // New York moved from EST (-5) to EDT (-4) on Sunday 2024-03-10 at 02:00.
        let s = schedule(&[(Weekday::Mon, "09:00", "17:00")]);
        let friday_evening = local(New_York, 2024, 3, 8, 18, 0).with_timezone(&Utc);
        assert_eq!(
            s.next_transition_after(friday_evening, New_York),
            Some(utc(2024, 3, 11, 13, 0)),
            "Monday 09:00 EDT is 13:00 UTC, not 14:00"
        );
    }

    #[test]
    fn a_shift_after_fall_back_starts_at_its_local_time_in_the_new_offset() {
        // New York moved from EDT (-4) back to EST (-5) on Sunday 2024-11-03 at 02:00.
        let s = schedule(&[(Weekday::Mon, "09:00", "17:00")]);
        let friday_evening = local(New_York, 2024, 11, 1, 18, 0).with_timezone(&Utc);
        assert_eq!(
            s.next_transition_after(friday_evening, New_York),
            Some(utc(2024, 11, 4, 14, 0))
        );
    }

    #[test]
    fn a_shift_starting_in_the_skipped_hour_starts_when_the_clock_jumps() {
        // 02:00-03:00 does not exist on 2024-03-10 in New York: at 07:00 UTC the clock
        // jumps from 01:59:59 EST to 03:00 EDT, which is inside the 02:30-05:00 shift.
        let s = schedule(&[(Weekday::Sun, "02:30", "05:00")]);
        let saturday_night = local(New_York, 2024, 3, 9, 23, 0).with_timezone(&Utc);
        let jump = utc(2024, 3, 10, 7, 0);
        assert!(!s.on_shift((jump - Duration::seconds(1)).with_timezone(&New_York)));
        assert!(s.on_shift(jump.with_timezone(&New_York)));
        assert_eq!(
            s.next_transition_after(saturday_night, New_York),
            Some(jump)
        );
    }

    #[test]
    fn a_shift_ending_in_the_repeated_hour_ends_twice() {
        // 01:00-02:00 happens twice on 2024-11-03 in New York: first in EDT (05:00-06:00 UTC),
        // then in EST (06:00-07:00 UTC). A shift ending at 01:30 ends at 05:30 UTC, starts
        // again when the clock goes back at 06:00 UTC, and ends again at 06:30 UTC.
        let s = schedule(&[(Weekday::Sun, "00:00", "01:30")]);
        let start = local(New_York, 2024, 11, 3, 0, 30).with_timezone(&Utc);
        let first_end = s.next_transition_after(start, New_York);
        assert_eq!(first_end, Some(utc(2024, 11, 3, 5, 30)));
        let back_on = s.next_transition_after(utc(2024, 11, 3, 5, 30), New_York);
        assert_eq!(back_on, Some(utc(2024, 11, 3, 6, 0)));
        let second_end = s.next_transition_after(utc(2024, 11, 3, 6, 15), New_York);
        assert_eq!(second_end, Some(utc(2024, 11, 3, 6, 30)));
    }

    #[test]
    fn on_shift_changes_at_every_reported_transition_and_nowhere_before_it() {
        let s = schedule(&[
            (Weekday::Mon, "09:00", "12:00"),
            (Weekday::Mon, "13:00", "18:00"),
            (Weekday::Fri, "22:00", "06:00"),
            (Weekday::Sun, "01:15", "02:45"),
        ]);
        for tz in [Shanghai, New_York] {
            // Walk two weeks around both of New York's 2024 changes.
            for first in [
                NaiveDate::from_ymd_opt(2024, 3, 4),
                NaiveDate::from_ymd_opt(2024, 10, 28),
            ] {
                let first = first.expect("date");
                let mut now = Utc.from_utc_datetime(&first.and_hms_opt(0, 0, 0).expect("midnight"));
                let end = now + Duration::days(14);
                let mut transitions = 0;
                while now < end {
                    let state = s.on_shift(now.with_timezone(&tz));
                    let next = s.next_transition_after(now, tz).expect("shifts change");
                    assert!(next > now);
                    assert_ne!(s.on_shift(next.with_timezone(&tz)), state, "at {next}");
                    let mut probe = now + Duration::minutes(7);
                    while probe < next {
                        assert_eq!(s.on_shift(probe.with_timezone(&tz)), state, "at {probe}");
                        probe += Duration::minutes(7);
                    }
                    transitions += 1;
                    now = next;
                }
                assert!(transitions >= 12, "{transitions} in {tz}");
            }
        }
    }

    #[test]
    fn schedules_read_and_write_lowercase_days_and_hh_mm_times() {
        let raw = r#"{"shifts":[{"day":"mon","start":"09:00","end":"18:00"}]}"#;
        let parsed: WeeklySchedule = serde_json::from_str(raw).expect("parses");
        assert_eq!(parsed, schedule(&[(Weekday::Mon, "09:00", "18:00")]));
        assert_eq!(serde_json::to_string(&parsed).expect("writes"), raw);
        let night: WeeklySchedule =
            serde_json::from_str(r#"{"shifts":[{"day":"sun","start":"22:00","end":"06:00"}]}"#)
                .expect("parses");
        assert_eq!(night, schedule(&[(Weekday::Sun, "22:00", "06:00")]));
        let empty: WeeklySchedule = serde_json::from_str(r#"{"shifts":[]}"#).expect("parses");
        assert_eq!(empty, WeeklySchedule::default());
    }

    #[test]
    fn a_bad_day_is_rejected_with_the_day_named() {
        for bad in ["funday", "", "8"] {
            let raw = format!(r#"{{"shifts":[{{"day":"{bad}","start":"09:00","end":"18:00"}}]}}"#);
            let err = serde_json::from_str::<WeeklySchedule>(&raw)
                .expect_err(bad)
                .to_string();
            assert!(
                err.contains(&format!("{bad:?} is not a weekday (mon, tue, ... sun)")),
                "{err}"
            );
        }
    }

    #[test]
    fn a_bad_time_is_rejected_with_the_time_named() {
        for bad in ["25:00", "09:60", "9am", "", "09:00:00", "noon"] {
            let raw = format!(r#"{{"shifts":[{{"day":"mon","start":"{bad}","end":"18:00"}}]}}"#);
            let err = serde_json::from_str::<WeeklySchedule>(&raw)
                .expect_err(bad)
                .to_string();
            assert!(
                err.contains(&format!("{bad:?} is not a time (HH:MM)")),
                "{err}"
            );
        }
    }

    #[test]
    fn validate_accepts_ordinary_and_night_shifts() {
        assert_eq!(WeeklySchedule::default().validate(), Ok(()));
        let s = schedule(&[
            (Weekday::Mon, "09:00", "18:00"),
            (Weekday::Sun, "22:00", "06:00"),
            (Weekday::Tue, "00:00", "23:59"),
        ]);
        assert_eq!(s.validate(), Ok(()));
    }

    #[test]
    fn validate_rejects_a_shift_that_starts_when_it_ends() {
        let s = schedule(&[
            (Weekday::Mon, "09:00", "18:00"),
            (Weekday::Tue, "09:00", "09:00"),
        ]);
        let err = s.validate().expect_err("empty shift");
        assert_eq!(err, InvalidSchedule::Empty("Tue 09:00".into()));
        assert_eq!(
            err.to_string(),
            "a shift must not start and end at the same time (Tue 09:00)"
        );
    }

    #[test]
    fn validate_rejects_times_with_seconds() {
        let mut s = schedule(&[(Weekday::Mon, "09:00", "18:00")]);
        s.shifts[0].end = NaiveTime::from_hms_opt(18, 0, 30).expect("time");
        assert_eq!(s.validate(), Err(InvalidSchedule::NotWholeMinutes));
    }

    #[test]
    fn validate_allows_sixty_four_shifts_and_no_more() {
        let mut s = WeeklySchedule {
            shifts: vec![shift(Weekday::Wed, "09:00", "10:00"); WeeklySchedule::MAX_SHIFTS],
        };
        assert_eq!(s.validate(), Ok(()));
        s.shifts.push(shift(Weekday::Thu, "09:00", "10:00"));
        assert_eq!(s.validate(), Err(InvalidSchedule::TooMany(64)));
        assert_eq!(
            s.validate().expect_err("too many").to_string(),
            "at most 64 shifts per week"
        );
    }
}
