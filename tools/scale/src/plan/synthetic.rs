//! A synthetic tenant from the command line (`codes=200000,staff=2000,members=15`), drawn with
//! the simulation's own generator (`TenantFigures::synthetic`, seeded): each code's members
//! are distinct staff of its department, staff and codes dealt round-robin to departments.
//! Every figure is bounded, and a refusal names it.

use crate::population::TenantFigures;
use crate::profile::Range;

/// The largest tenant the profile describes holds 200,000 codes and 2,000 staff; the bounds
/// leave room above it while keeping a plan to a few hundred MB of seats.
const MAX_CODES: u32 = 1_000_000;
const MAX_STAFF: u32 = 200_000;
/// profile.toml's own bound on members per code.
const MAX_MEMBERS: u32 = 100;
const MAX_DEPARTMENTS: u32 = 100_000;
/// Seats (codes x members) held at once.
const MAX_SEATS: u64 = 30_000_000;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Synthetic {
    pub codes: u32,
    pub staff: u32,
    pub members: Range,
    pub departments: u32,
    pub seed: u64,
}

fn bounded(key: &str, raw: &str, low: u32, high: u32) -> Result<u32, String> {
    let value: u32 = raw
        .trim()
        .replace('_', "")
        .parse()
        .map_err(|_| format!("--synthetic {key}: `{raw}` is not a whole number"))?;
    if (low..=high).contains(&value) {
        Ok(value)
    } else {
        Err(format!(
            "--synthetic {key}: {value} is outside {low} to {high}"
        ))
    }
}

impl Synthetic {
    /// `codes=N,staff=N,members=N or LOW-HIGH,departments=N,seed=N`; `codes-per-staff=N`
    /// instead of `staff` derives the staff as the simulation does (codes x mean members /
    /// codes per staff). `codes` is required; `staff` (or `codes-per-staff`) too.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let (mut codes, mut staff, mut per_staff, mut departments, mut seed) =
            (None, None, None, 1, 30u64);
        let mut members = Range { low: 15, high: 15 };
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("--synthetic: `{part}` is not key=value"))?;
            match key.trim() {
                "codes" => codes = Some(bounded("codes", value, 1, MAX_CODES)?),
                "staff" => staff = Some(bounded("staff", value, 1, MAX_STAFF)?),
                "codes-per-staff" => {
                    per_staff = Some(bounded("codes-per-staff", value, 1, MAX_CODES)?);
                }
                "members" => {
                    members = match value.split_once('-') {
                        Some((low, high)) => Range {
                            low: bounded("members", low, 1, MAX_MEMBERS)?,
                            high: bounded("members", high, 1, MAX_MEMBERS)?,
                        },
                        None => {
                            let n = bounded("members", value, 1, MAX_MEMBERS)?;
                            Range { low: n, high: n }
                        }
                    };
                    if members.low > members.high {
                        return Err(format!(
                            "--synthetic members: {value} runs from high to low"
                        ));
                    }
                }
                "departments" => {
                    departments = bounded("departments", value, 1, MAX_DEPARTMENTS)?;
                }
                "seed" => {
                    seed = value
                        .trim()
                        .parse()
                        .map_err(|_| format!("--synthetic seed: `{value}` is not a whole number"))?;
                }
                other => {
                    return Err(format!(
                        "--synthetic: unknown key `{other}` (codes, staff, codes-per-staff, members, departments, seed)"
                    ))
                }
            }
        }
        let codes = codes.ok_or("--synthetic: codes=N is required")?;
        let staff = match (staff, per_staff) {
            (Some(_), Some(_)) => {
                return Err("--synthetic: give staff or codes-per-staff, not both".into())
            }
            (Some(staff), None) => staff,
            (None, Some(per_staff)) => {
                let derived =
                    (f64::from(codes) * members.uniform_mean() / f64::from(per_staff)).ceil();
                bounded(
                    "staff (from codes-per-staff)",
                    &format!("{derived:.0}"),
                    1,
                    MAX_STAFF,
                )?
            }
            (None, None) => {
                return Err("--synthetic: staff=N or codes-per-staff=N is required".into())
            }
        };
        if staff < members.high {
            return Err(format!(
                "--synthetic: {staff} staff cannot fill a code of {} distinct members",
                members.high
            ));
        }
        if departments > staff / members.high {
            return Err(format!(
                "--synthetic departments: {departments} departments of {staff} staff leave fewer than {} (a code's members) in each",
                members.high
            ));
        }
        let seats = u64::from(codes) * u64::from(members.high);
        if seats > MAX_SEATS {
            return Err(format!(
                "--synthetic: {codes} codes x {} members is {seats} seats, more than the {MAX_SEATS} a plan holds",
                members.high
            ));
        }
        Ok(Self {
            codes,
            staff,
            members,
            departments,
            seed,
        })
    }

    pub fn tenant(&self) -> TenantFigures {
        TenantFigures::synthetic(
            self.codes,
            self.staff,
            self.departments,
            self.members,
            self.seed,
        )
    }

    pub fn describe(&self) -> String {
        let members = if self.members.low == self.members.high {
            self.members.low.to_string()
        } else {
            format!("{} to {}", self.members.low, self.members.high)
        };
        format!(
            "synthetic tenant (codes={}, staff={}, members={members}, departments={}, seed={}; the simulation's generator)",
            self.codes, self.staff, self.departments, self.seed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_on_the_command_line_reads_its_figures() {
        let read =
            Synthetic::parse("codes=200000,staff=2000,members=10-20,departments=4").expect("valid");
        assert_eq!(read.codes, 200_000);
        assert_eq!(read.staff, 2_000);
        assert_eq!(read.members, Range { low: 10, high: 20 });
        assert_eq!(read.departments, 4);
    }

    #[test]
    fn codes_per_staff_derives_the_staff_as_the_simulation_does() {
        let read = Synthetic::parse("codes=200000,codes-per-staff=1500,members=15").expect("valid");
        assert_eq!(read.staff, 2_000);
    }

    #[test]
    fn inputs_out_of_bounds_are_refused_naming_the_key() {
        for (spec, names) in [
            ("codes=0,staff=10", "codes: 0 is outside 1 to 1000000"),
            ("codes=2000000,staff=10", "codes: 2000000 is outside"),
            ("codes=100,staff=10,members=0", "members: 0 is outside"),
            (
                "codes=100,staff=10,members=20-10",
                "members: 20-10 runs from high to low",
            ),
            (
                "codes=100,staff=5,members=10",
                "5 staff cannot fill a code of 10",
            ),
            (
                "codes=100,staff=100,members=10,departments=20",
                "departments",
            ),
            ("codes=100", "staff=N or codes-per-staff=N is required"),
            ("codes=100,staff=10,colour=blue", "unknown key `colour`"),
            ("codes=many,staff=10", "`many` is not a whole number"),
            (
                "codes=1000000,staff=1000,members=100",
                "more than the 30000000 a plan holds",
            ),
        ] {
            let refused = Synthetic::parse(spec).expect_err(spec);
            assert!(refused.contains(names), "{spec}: {refused}");
        }
    }
}
