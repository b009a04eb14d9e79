//! Who sits on which code in one tenant, and what one staff member's change fans out to: the
//! codes they sit on directly (member or fallback: the staff -> codes index, `SEAT#`) and the
//! codes listing a department they belong to (the department -> codes index, `DSEAT#`, and the
//! department's members, `DEPT#`). That union is what `codes_of_staff` answers in the adapter,
//! and what a staff change sends a refresh reason to.

use crate::population::TenantFigures;
use crate::profile::Profile;
use std::collections::HashMap;

/// A tenant's seats, codes and staff named by dense indexes (a giant's 3M seats as `u32`s).
#[derive(Debug, Clone, Default)]
pub struct TenantSeats {
    code_ids: HashMap<String, u32>,
    staff_ids: HashMap<String, u32>,
    department_ids: HashMap<String, u32>,
    /// Per staff member: the codes they sit on directly.
    direct: Vec<Vec<u32>>,
    /// Per department: the codes listing it, and its members.
    listed_on: Vec<Vec<u32>>,
    members_of: Vec<Vec<u32>>,
}

impl TenantSeats {
    pub fn new() -> Self {
        Self::default()
    }

    /// The seats of a synthetic tenant drawn as the simulation draws one: every code's members
    /// from `TenantFigures::code` (the population lists staff, never departments, on a code).
    pub fn from_figures(profile: &Profile, tenant: &TenantFigures) -> Self {
        let mut seats = Self::new();
        seats.direct = vec![Vec::new(); tenant.staff as usize];
        seats.staff_ids.reserve(tenant.staff as usize);
        for j in 0..tenant.staff {
            seats.staff_ids.insert(format!("staff{j}"), j);
        }
        for i in 0..tenant.codes {
            seats.code_ids.insert(format!("code{i}"), i);
            for member in tenant.code(profile, i).members {
                seats.direct[member as usize].push(i);
            }
        }
        seats
    }

    fn index(ids: &mut HashMap<String, u32>, id: &str) -> u32 {
        let next = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        *ids.entry(id.to_owned()).or_insert(next)
    }

    pub fn add_code(&mut self, code: &str) -> u32 {
        Self::index(&mut self.code_ids, code)
    }

    pub fn add_staff(&mut self, staff: &str) -> u32 {
        let index = Self::index(&mut self.staff_ids, staff);
        if self.direct.len() <= index as usize {
            self.direct.resize(index as usize + 1, Vec::new());
        }
        index
    }

    fn add_department(&mut self, department: &str) -> u32 {
        let index = Self::index(&mut self.department_ids, department);
        if self.listed_on.len() <= index as usize {
            self.listed_on.resize(index as usize + 1, Vec::new());
            self.members_of.resize(index as usize + 1, Vec::new());
        }
        index
    }

    /// `staff` sits on `code` as a member or its fallback (a `SEAT#<staff>#<code>` item).
    pub fn seat(&mut self, staff: &str, code: &str) {
        let code = self.add_code(code);
        let staff = self.add_staff(staff);
        self.direct[staff as usize].push(code);
    }

    /// `code` lists `department` (a `DSEAT#<department>#<code>` item).
    pub fn department_listed(&mut self, department: &str, code: &str) {
        let code = self.add_code(code);
        let department = self.add_department(department);
        self.listed_on[department as usize].push(code);
    }

    /// `staff` is a member of `department` (the `members` set of a `DEPT#<department>` item).
    pub fn department_member(&mut self, department: &str, staff: &str) {
        let staff = self.add_staff(staff);
        let department = self.add_department(department);
        self.members_of[department as usize].push(staff);
    }

    pub fn codes(&self) -> u32 {
        u32::try_from(self.code_ids.len()).unwrap_or(u32::MAX)
    }

    pub fn staff(&self) -> u32 {
        u32::try_from(self.staff_ids.len()).unwrap_or(u32::MAX)
    }

    pub fn departments(&self) -> u32 {
        u32::try_from(self.department_ids.len()).unwrap_or(u32::MAX)
    }

    /// Seats through department listings (a department listed on a code seats all its members).
    pub fn department_listings(&self) -> u64 {
        self.listed_on.iter().map(|codes| codes.len() as u64).sum()
    }

    /// For every staff member, the number of distinct codes one change of theirs reaches:
    /// direct seats and codes listing any of their departments, each counted once.
    pub fn fan_outs(&self) -> Vec<u32> {
        let mut departments_of: Vec<Vec<u32>> = vec![Vec::new(); self.direct.len()];
        for (department, members) in self.members_of.iter().enumerate() {
            for &staff in members {
                departments_of[staff as usize].push(department as u32);
            }
        }
        self.direct
            .iter()
            .zip(&departments_of)
            .map(|(direct, departments)| {
                let mut codes = direct.clone();
                for &department in departments {
                    codes.extend_from_slice(&self.listed_on[department as usize]);
                }
                codes.sort_unstable();
                codes.dedup();
                u32::try_from(codes.len()).unwrap_or(u32::MAX)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_reached_both_directly_and_through_a_department_counts_once() {
        let mut seats = TenantSeats::new();
        seats.seat("ann", "c1");
        seats.seat("ann", "c2");
        seats.department_listed("sales", "c2");
        seats.department_listed("sales", "c3");
        seats.department_member("sales", "ann");
        seats.department_member("sales", "bob");
        let fan_outs = seats.fan_outs();
        assert_eq!(seats.codes(), 3);
        assert_eq!(fan_outs, vec![3, 2]);
    }

    #[test]
    fn a_synthetic_tenant_seats_each_code_on_its_drawn_members() {
        let profile = Profile::load_default().expect("profile.toml is valid");
        let tenant = TenantFigures::synthetic(300, 30, 1, [10, 10].into(), 5);
        let seats = TenantSeats::from_figures(&profile, &tenant);
        let total: u64 = seats.fan_outs().iter().map(|&f| u64::from(f)).sum();
        assert_eq!(total, 300 * 10);
        assert_eq!(seats.staff(), 30);
    }
}
