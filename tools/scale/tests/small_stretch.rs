//! `make test`'s scenario of the simulation: a small platform (tests/small-profile.toml, the
//! production profile's shape on 35 tenants) through ten minutes around the 10:00 shift wave
//! and the campaign's first spike, left to drain, run on the domain's own code. A change to
//! the domain that loses a fact, a message or a list fails here.

use chrono::{NaiveDate, NaiveTime};
use qrsync_scale::profile::Profile;
use qrsync_scale::report::{render, MonthScale};
use qrsync_scale::run::{run, Outcome, RunOptions, Stretch};
use qrsync_scale::settings::Settings;
use std::path::Path;
use std::time::Duration;

fn profile() -> Profile {
    Profile::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/small-profile.toml"))
        .expect("the small profile loads")
}

fn stretch(seed: u64, from: (u32, u32), until: (u32, u32), settle_minutes: u64) -> Outcome {
    let time = |(h, m)| NaiveTime::from_hms_opt(h, m, 0).expect("a time");
    let options = RunOptions {
        seed,
        stretch: Stretch {
            date: NaiveDate::from_ymd_opt(2026, 11, 11).expect("a date"),
            from: time(from),
            until: time(until),
            settle: Duration::from_secs(settle_minutes * 60),
        },
        tenants: None,
        add_after: Duration::from_secs(20),
        memory_limit_bytes: 4_000_000_000,
    };
    let settings = Settings::read_project(&[]).expect("the project's template");
    run(&profile(), settings, &options).expect("the stretch runs")
}

/// The report without the lines that measure the machine (wall time, memory).
fn report(outcome: &Outcome) -> String {
    let settings = Settings::read_project(&[]).expect("the project's template");
    let scale = MonthScale::of(&profile(), &settings).with_stretch(outcome, &profile());
    render(outcome, &scale, None, "")
        .lines()
        .filter(|line| !line.starts_with("run:") && !line.starts_with("world:"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_small_platforms_shift_wave_and_spike_drain_with_nothing_lost_and_every_list_recomputed() {
    let outcome = stretch(30, (9, 55), (10, 5), 180);
    let happened = &outcome.happened;
    assert!(happened.scans > 50 && happened.adds > 50, "{happened:?}");
    assert!(happened.breaks > 0, "{happened:?}");
    assert_eq!(
        (happened.callbacks_lost, happened.admin_failures),
        (0, 0),
        "every callback and admin call reached qrsync"
    );
    assert!(
        outcome.settled_ms < outcome.end_ms + 180 * 60_000,
        "the platform drained before the settling time ran out"
    );
    assert_eq!(outcome.waiting_at_end, 0, "every fact reached WeCom");
    let resolved: usize = outcome
        .measure
        .classes
        .iter()
        .map(|c| c.staleness_ms.len())
        .sum();
    assert!(
        resolved > 1_000,
        "the 10:00 wave's facts were measured: {resolved}"
    );
    assert!(outcome.checked > 1_000, "{} codes checked", outcome.checked);
    assert_eq!(
        outcome.differ, 0,
        "every list WeCom holds is the recompute of the true facts"
    );
    for (queue, counters) in &outcome.queues {
        if queue.contains("DeadLetter") {
            assert_eq!(counters.messages_sent, 0, "{queue} received nothing");
        }
    }
    for (function, counters) in &outcome.functions {
        assert_eq!(
            (
                counters.timeouts,
                counters.order_violations,
                counters.unknown_failures
            ),
            (0, 0, 0),
            "{function}"
        );
    }
    assert!(
        outcome.measure.lists_landed > 1_000,
        "{}",
        outcome.measure.lists_landed
    );
}

#[test]
fn the_same_seed_gives_the_same_report_and_another_seed_another() {
    let first = report(&stretch(7, (10, 0), (10, 2), 30));
    let again = report(&stretch(7, (10, 0), (10, 2), 30));
    assert_eq!(first, again);
    let other = report(&stretch(8, (10, 0), (10, 2), 30));
    assert_ne!(first, other);
}
