//! docs/rules.md "Lanes": how fresh a code's list must be, decided per event by a pure
//! function of the code's creation and update age, a tenant whitelist and an operator switch.
//! No lane state is stored anywhere: a rule change takes effect on the next event, and a code
//! edited after a quiet spell is fast again at once.
//!
//! The slow lane is a per-code interval, not a queue every quiet code waits in: a code the
//! policy calls quiet is pushed at most once per `slow_interval_ms`, on whichever queue its
//! reason arrived, and a push due sooner is put off through the retry queues (never sleeping).
//! The decision needs the code's age, which comes with the snapshot the refresh reads anyway,
//! so no read is spent on it. The slow queue, with its own small concurrency, is for the
//! operator's `all` switch: shedding a whole platform's load in an incident, decided before
//! anything is read. Both lanes spend the same tenant budget (docs/rules.md rule 6).

use crate::ids::TenantId;
use std::collections::BTreeSet;

/// The lane a refresh runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Fast,
    Slow,
}

/// The operator's switch over the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneSwitch {
    /// By age: codes neither created nor edited for `quiet_after_ms` go slow.
    Auto,
    /// The slow lane is off: every code is fast.
    AllFast,
    /// Every code of a tenant not on the whitelist is slow (to shed load in an incident).
    AllSlow,
}

impl std::str::FromStr for LaneSwitch {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        match raw {
            "auto" => Ok(Self::Auto),
            "off" => Ok(Self::AllFast),
            "all" => Ok(Self::AllSlow),
            other => Err(format!("`{other}` is not a lane switch (auto, off, all)")),
        }
    }
}

/// When a code was created and last edited by the admin: all the policy reads of a code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodeAge {
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LanePolicy {
    pub switch: LaneSwitch,
    /// A code neither created nor edited for this long is quiet: its freshness can wait.
    pub quiet_after_ms: u64,
    /// Tenants always on the fast lane (their tier pays for freshness).
    pub fast_tenants: BTreeSet<TenantId>,
    /// The least time between two slow-lane pushes of one code.
    pub slow_interval_ms: u64,
}

impl LanePolicy {
    /// A policy with the slow lane off.
    pub fn all_fast() -> Self {
        Self {
            switch: LaneSwitch::AllFast,
            quiet_after_ms: u64::MAX,
            fast_tenants: BTreeSet::new(),
            slow_interval_ms: 0,
        }
    }

    /// Whether the operator's `all` switch sends this tenant's reasons to the slow queue
    /// before anything of the code is read (every tenant not on the whitelist).
    pub fn sheds(&self, tenant: &TenantId) -> bool {
        self.switch == LaneSwitch::AllSlow && !self.fast_tenants.contains(tenant)
    }

    /// The lane for one event of `tenant`'s code aged `age` (`None`: not read, or no such
    /// code; the fast lane then finds out what there is to do).
    pub fn lane_for(&self, tenant: &TenantId, age: Option<CodeAge>, now_ms: u64) -> Lane {
        if self.fast_tenants.contains(tenant) {
            return Lane::Fast;
        }
        match self.switch {
            LaneSwitch::AllFast => Lane::Fast,
            LaneSwitch::AllSlow => Lane::Slow,
            LaneSwitch::Auto => match age {
                Some(age) => {
                    let touched = age.created_at_ms.max(age.updated_at_ms);
                    if now_ms.saturating_sub(touched) >= self.quiet_after_ms {
                        Lane::Slow
                    } else {
                        Lane::Fast
                    }
                }
                None => Lane::Fast,
            },
        }
    }

    /// How long a slow-lane push of a code last pushed at `last_pushed_at_ms` must still
    /// wait; `None` when it may push now.
    pub fn slow_wait_ms(&self, last_pushed_at_ms: Option<u64>, now_ms: u64) -> Option<u64> {
        let next = last_pushed_at_ms?.saturating_add(self.slow_interval_ms);
        (next > now_ms).then(|| next - now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3_600_000;

    fn tenant(raw: &str) -> TenantId {
        TenantId::parse(raw).expect("valid")
    }

    fn policy(switch: LaneSwitch) -> LanePolicy {
        LanePolicy {
            switch,
            quiet_after_ms: 72 * HOUR,
            fast_tenants: [tenant("vip")].into_iter().collect(),
            slow_interval_ms: 60_000,
        }
    }

    fn aged(created_hours_ago: u64, updated_hours_ago: u64, now: u64) -> Option<CodeAge> {
        Some(CodeAge {
            created_at_ms: now - created_hours_ago * HOUR,
            updated_at_ms: now - updated_hours_ago * HOUR,
        })
    }

    #[test]
    fn a_code_untouched_for_the_quiet_period_goes_slow_and_an_edit_brings_it_back() {
        let now = 1_000 * HOUR;
        let auto = policy(LaneSwitch::Auto);
        let acme = tenant("acme");
        assert_eq!(auto.lane_for(&acme, aged(100, 80, now), now), Lane::Slow);
        assert_eq!(auto.lane_for(&acme, aged(100, 1, now), now), Lane::Fast);
        assert_eq!(auto.lane_for(&acme, aged(2, 2, now), now), Lane::Fast);
        assert_eq!(auto.lane_for(&acme, aged(72, 72, now), now), Lane::Slow);
    }

    #[test]
    fn a_whitelisted_tenant_is_always_fast_whatever_the_switch_and_age() {
        let now = 1_000 * HOUR;
        for switch in [LaneSwitch::Auto, LaneSwitch::AllSlow, LaneSwitch::AllFast] {
            let p = policy(switch);
            assert_eq!(
                p.lane_for(&tenant("vip"), aged(500, 500, now), now),
                Lane::Fast
            );
            assert!(!p.sheds(&tenant("vip")));
        }
    }

    #[test]
    fn the_operator_switch_overrides_age_for_everyone_else() {
        let now = 1_000 * HOUR;
        let acme = tenant("acme");
        let off = policy(LaneSwitch::AllFast);
        let all = policy(LaneSwitch::AllSlow);
        assert_eq!(off.lane_for(&acme, aged(500, 500, now), now), Lane::Fast);
        assert_eq!(all.lane_for(&acme, aged(0, 0, now), now), Lane::Slow);
        assert!(all.sheds(&acme), "`all` sheds before any read");
        assert!(!off.sheds(&acme) && !policy(LaneSwitch::Auto).sheds(&acme));
    }

    #[test]
    fn a_code_whose_age_is_unknown_stays_on_the_fast_lane() {
        assert_eq!(
            policy(LaneSwitch::Auto).lane_for(&tenant("acme"), None, 5),
            Lane::Fast
        );
    }

    #[test]
    fn the_slow_lane_waits_out_the_interval_since_the_last_push_only() {
        let p = policy(LaneSwitch::Auto);
        assert_eq!(p.slow_wait_ms(None, 10_000), None);
        assert_eq!(p.slow_wait_ms(Some(10_000), 30_000), Some(40_000));
        assert_eq!(p.slow_wait_ms(Some(10_000), 70_000), None);
    }

    #[test]
    fn the_switch_reads_the_templates_values_and_refuses_others() {
        assert_eq!("auto".parse(), Ok(LaneSwitch::Auto));
        assert_eq!("off".parse(), Ok(LaneSwitch::AllFast));
        assert_eq!("all".parse(), Ok(LaneSwitch::AllSlow));
        assert!("slow".parse::<LaneSwitch>().is_err());
    }
}
