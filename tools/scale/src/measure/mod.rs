//! What the report measures, from the outside: the facts as they happened (the truth the
//! simulated customers and admins create), when WeCom came to hold a list recomputed from
//! each, and where every scan was routed.
//!
//! - **Staleness** of a fact on a code: from the fact to the first moment WeCom holds a list
//!   recomputed from facts read at or after it: the landing of a push computed from a
//!   snapshot read after the fact (one writer per code: the last read before a landing is
//!   the one it was computed from), or, for a refresh that pushed nothing because WeCom
//!   already held the recompute, the read itself. A fact still waiting when the stretch ends
//!   counts with its age then, and is reported as waiting.
//! - **Mis-routed scans**: WeCom routed a scan to a member of the list it held, and by the
//!   true facts at that instant (the adds that happened, whether or not qrsync has counted
//!   them yet) the recompute would not list that member.

mod tenants;
mod truth;

pub use tenants::{compare, parse_csv, tenants_csv, TenantLine, TenantRow, TenantStaleness};
pub use truth::TrueAdds;

use crate::observe::Seen;
use domain::ids::{CodeId, StaffId, TenantId};
use domain::refresh::Tally;
use std::collections::{BTreeMap, HashMap};

type CodeKey = (TenantId, CodeId);

/// A fact waiting for WeCom, in milliseconds since the stretch began: when it happened, and
/// from when qrsync's store holds it (a snapshot read before cannot reflect it). A fact
/// qrsync learns from a callback (an add that crossed a limit) is held from when the add
/// is counted; until then it waits on its gate, and no read resolves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Waiting {
    at: u32,
    held_from: u32,
    gate: Option<u32>,
}

/// One code's facts waiting for WeCom, and the refresh in progress.
#[derive(Default)]
struct Track {
    waiting: Vec<Waiting>,
    /// When the refresh holding the code read its facts, if one is in progress.
    read_at: Option<u32>,
    landed_since_read: bool,
}

/// A refresh that ended without WeCom taking a list: resolved if WeCom holds the recompute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndedWithoutPush {
    pub tenant: TenantId,
    pub code: CodeId,
    pub read_at_ms: u64,
}

/// Staleness samples of the tenants on one side of their WeCom budget.
#[derive(Debug, Clone, Default)]
pub struct BudgetFigures {
    pub tenants: u64,
    pub staleness_ms: Vec<u32>,
    pub waiting_ms: Vec<u32>,
}

/// Staleness samples and scan routing, by size class.
#[derive(Debug, Clone, Default)]
pub struct ClassFigures {
    /// Milliseconds from each resolved fact to WeCom holding its recompute.
    pub staleness_ms: Vec<u32>,
    /// Ages at the end of the facts still waiting then.
    pub waiting_ms: Vec<u32>,
    pub scans: u64,
    /// Scans to a member the true recompute no longer lists...
    pub misrouted: u64,
    /// ...of which the code had no fact waiting: WeCom held a list pushed after every change
    /// the measure knows of, and still routed there (the issue's "after the push for that
    /// change landed", which the rules make 0).
    pub misrouted_after_push: u64,
    /// Scans of a code the true recompute leaves starved (nobody eligible, no fallback): WeCom
    /// cannot hold an empty list, so the rules leave the last one and raise the code's alert;
    /// whoever it routes to is counted here, neither listed nor misrouted.
    pub on_starved: u64,
    /// What the refresh invocations did for the class's tenants, summed.
    pub refreshes: Tally,
}

/// What the true recompute of a scanned code makes of the member WeCom routed the scan to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routed {
    Listed,
    NotListed,
    /// Nobody is eligible and there is no fallback: no list to be on.
    Starved,
}

pub struct Measure {
    start_ms: u64,
    class_of: HashMap<TenantId, usize>,
    /// Tenants with more codes than their budget pushes in a minute (`tenant`).
    over_budget: std::collections::HashSet<TenantId>,
    /// Of those, the tenants with more codes than their budget pushes in an hour: a wave of all
    /// their codes meets the hour's window, and what is past it waits for the next hour.
    past_the_hour: std::collections::HashSet<TenantId>,
    /// Staleness of the tenants within their budget, then of those over it.
    pub by_budget: [BudgetFigures; 2],
    /// Each tenant's own staleness (`tenants.csv`, the over-budget bound).
    pub tenants: HashMap<TenantId, TenantStaleness>,
    /// The template's `WeComBudgetPerMinute`, which the over-budget bound is taken at.
    pub budget_per_minute: u32,
    /// The template's `WeComBudgetPerHour`: a tenant with more codes cannot meet the bound.
    pub budget_per_hour: u32,
    /// Which code a contact way belongs to (the platform's config ids name it).
    code_of_config: fn(&str) -> Option<CodeKey>,
    codes: HashMap<CodeKey, Track>,
    ended: Vec<EndedWithoutPush>,
    /// The facts waiting for an add to be counted, by the add's customer: their gate and codes.
    gates: HashMap<String, (u32, Vec<CodeKey>)>,
    next_gate: u32,
    /// Every waiting fact's time, counted: the oldest is the first key.
    waiting: BTreeMap<u32, u32>,
    waiting_count: u64,
    pub classes: Vec<ClassFigures>,
    pub lists_landed: u64,
    pub facts: u64,
}

impl Measure {
    pub fn new(start_ms: u64, classes: usize, code_of_config: fn(&str) -> Option<CodeKey>) -> Self {
        Self {
            start_ms,
            class_of: HashMap::new(),
            over_budget: std::collections::HashSet::new(),
            past_the_hour: std::collections::HashSet::new(),
            by_budget: [BudgetFigures::default(), BudgetFigures::default()],
            tenants: HashMap::new(),
            budget_per_minute: 0,
            budget_per_hour: 0,
            code_of_config,
            codes: HashMap::new(),
            ended: Vec::new(),
            gates: HashMap::new(),
            next_gate: 0,
            waiting: BTreeMap::new(),
            waiting_count: 0,
            classes: vec![ClassFigures::default(); classes],
            lists_landed: 0,
            facts: 0,
        }
    }

    /// The over-budget bound is taken at `per_minute` (`WeComBudgetPerMinute`); a tenant with
    /// more codes than `per_hour` (`WeComBudgetPerHour`) is told apart.
    pub fn with_budget(mut self, per_minute: u32, per_hour: u32) -> Self {
        self.budget_per_minute = per_minute;
        self.budget_per_hour = per_hour;
        self
    }

    /// A tenant of size class `class` with `codes` codes: over budget when all its codes
    /// changing at once would take its WeCom budget more than a minute (the issue's "tenants
    /// within their budget" are the others), and past the hour when more than an hour.
    pub fn tenant(&mut self, tenant: &TenantId, class: usize, codes: u64) {
        self.class_of.insert(tenant.clone(), class);
        let over_budget = codes > u64::from(self.budget_per_minute);
        if over_budget {
            self.over_budget.insert(tenant.clone());
        }
        if codes > u64::from(self.budget_per_hour) {
            self.past_the_hour.insert(tenant.clone());
        }
        self.by_budget[usize::from(over_budget)].tenants += 1;
    }

    /// The tenant's own figures; its id is cloned only the first time (this runs per fact).
    fn tenant_figures(&mut self, tenant: &TenantId) -> &mut TenantStaleness {
        if !self.tenants.contains_key(tenant) {
            self.tenants
                .insert(tenant.clone(), TenantStaleness::default());
        }
        self.tenants.get_mut(tenant).expect("inserted above")
    }

    fn budget_figures(&mut self, tenant: &TenantId) -> &mut BudgetFigures {
        let over = self.over_budget.contains(tenant);
        &mut self.by_budget[usize::from(over)]
    }

    fn offset(&self, at_ms: u64) -> u32 {
        u32::try_from(at_ms.saturating_sub(self.start_ms)).unwrap_or(u32::MAX)
    }

    /// A fact at `at_ms` that the code's list must reflect, in qrsync's store at once (an
    /// admin's write).
    pub fn fact(&mut self, tenant: &TenantId, code: &CodeId, at_ms: u64) {
        let at = self.offset(at_ms);
        self.wait(
            (tenant.clone(), code.clone()),
            Waiting {
                at,
                held_from: at,
                gate: None,
            },
        );
    }

    /// A fact at `at_ms` that qrsync learns when the add of `customer` is counted (a limit the
    /// add crossed): a snapshot read before the count cannot reflect it.
    pub fn fact_once_counted(
        &mut self,
        tenant: &TenantId,
        code: &CodeId,
        at_ms: u64,
        customer: &str,
    ) {
        let at = self.offset(at_ms);
        let key = (tenant.clone(), code.clone());
        let next = self.next_gate;
        let (gate, codes) = self
            .gates
            .entry(customer.to_owned())
            .or_insert_with(|| (next, Vec::new()));
        if *gate == next {
            self.next_gate += 1;
        }
        let gate = *gate;
        codes.push(key.clone());
        self.wait(
            key,
            Waiting {
                at,
                held_from: u32::MAX,
                gate: Some(gate),
            },
        );
    }

    fn wait(&mut self, key: CodeKey, fact: Waiting) {
        let at = fact.at;
        self.codes.entry(key).or_default().waiting.push(fact);
        *self.waiting.entry(at).or_default() += 1;
        self.waiting_count += 1;
        self.facts += 1;
    }

    /// A scan of `code` WeCom routed, and what the true recompute makes of its member.
    /// Misrouted while a fact of the code waits is the staleness window; with none waiting, the
    /// list WeCom holds was pushed after every change known, so it is counted apart. A scan of
    /// a code the true recompute leaves starved is counted apart again (`on_starved`).
    pub fn scan(&mut self, tenant: &TenantId, code: &CodeId, routed: Routed) {
        let misrouted = routed == Routed::NotListed;
        let after_push = misrouted
            && self
                .codes
                .get(&(tenant.clone(), code.clone()))
                .is_none_or(|track| track.waiting.is_empty());
        if let Some(figures) = self.class_figures(tenant) {
            figures.scans += 1;
            figures.misrouted += u64::from(misrouted);
            figures.misrouted_after_push += u64::from(after_push);
            figures.on_starved += u64::from(routed == Routed::Starved);
        }
    }

    /// The tenant's size class.
    pub fn class_of(&self, tenant: &TenantId) -> Option<usize> {
        self.class_of.get(tenant).copied()
    }

    fn class_figures(&mut self, tenant: &TenantId) -> Option<&mut ClassFigures> {
        let class = self.class_of(tenant)?;
        self.classes.get_mut(class)
    }

    /// What a port saw. Refreshes that ended without a push are kept for `take_ended`.
    pub fn seen(&mut self, seen: Seen) {
        match seen {
            Seen::SnapshotRead {
                tenant,
                code,
                at_ms,
            } => {
                let at = self.offset(at_ms);
                let track = self.codes.entry((tenant, code)).or_default();
                track.read_at = Some(at);
                track.landed_since_read = false;
            }
            Seen::ListLanded {
                config_id, at_ms, ..
            } => {
                self.lists_landed += 1;
                let Some(key) = (self.code_of_config)(&config_id) else {
                    return;
                };
                self.tenant_figures(&key.0).lists_landed += 1;
                let at = self.offset(at_ms);
                if let Some(read_at) = self.codes.get(&key).and_then(|t| t.read_at) {
                    self.resolve(&key, read_at, at);
                    if let Some(track) = self.codes.get_mut(&key) {
                        track.landed_since_read = true;
                    }
                }
            }
            Seen::AddCounted { customer, at_ms } => {
                let held_from = self.offset(at_ms);
                let Some((gate, codes)) = self.gates.remove(&customer) else {
                    return;
                };
                for key in codes {
                    if let Some(track) = self.codes.get_mut(&key) {
                        for fact in track.waiting.iter_mut().filter(|f| f.gate == Some(gate)) {
                            fact.held_from = held_from;
                            fact.gate = None;
                        }
                    }
                }
            }
            Seen::Tallied { tenant, tally } => {
                if let Some(figures) = self.class_figures(&tenant) {
                    figures.refreshes.absorb(&tally);
                }
            }
            Seen::LeaseReleased {
                tenant,
                code,
                at_ms: _,
            } => {
                let key = (tenant, code);
                let Some(track) = self.codes.get_mut(&key) else {
                    return;
                };
                let read_at = track.read_at.take();
                if let (Some(read_at), false) = (read_at, track.landed_since_read) {
                    self.ended.push(EndedWithoutPush {
                        tenant: key.0,
                        code: key.1,
                        read_at_ms: self.start_ms + u64::from(read_at),
                    });
                }
            }
        }
    }

    /// The refreshes that ended without a push since the last call.
    pub fn take_ended(&mut self) -> Vec<EndedWithoutPush> {
        std::mem::take(&mut self.ended)
    }

    /// WeCom already held the recompute of the facts read at `read_at_ms`.
    pub fn held_at_read(&mut self, ended: &EndedWithoutPush) {
        let at = self.offset(ended.read_at_ms);
        self.resolve(&(ended.tenant.clone(), ended.code.clone()), at, at);
    }

    fn resolve(&mut self, key: &CodeKey, read_at: u32, held_at: u32) {
        let Some(track) = self.codes.get_mut(key) else {
            return;
        };
        let mut resolved = Vec::new();
        track.waiting.retain(|fact| {
            let covered = fact.held_from <= read_at;
            if covered {
                resolved.push(held_at.saturating_sub(fact.at));
            }
            !covered
        });
        self.waiting_count -= resolved.len() as u64;
        for staleness in &resolved {
            let fact = held_at.saturating_sub(*staleness);
            if let Some(count) = self.waiting.get_mut(&fact) {
                *count -= 1;
                if *count == 0 {
                    self.waiting.remove(&fact);
                }
            }
        }
        let tenant = self.tenant_figures(&key.0);
        for staleness in &resolved {
            tenant.add(*staleness);
        }
        self.budget_figures(&key.0)
            .staleness_ms
            .extend_from_slice(&resolved);
        if let Some(figures) = self.class_figures(&key.0) {
            figures.staleness_ms.extend(resolved);
        }
    }

    /// Facts waiting now, and the age of the oldest at `now_ms`.
    pub fn waiting_now(&self, now_ms: u64) -> (u64, u64) {
        let count = self.waiting_count;
        let oldest = self.waiting.keys().next().map_or(0, |first| {
            now_ms.saturating_sub(self.start_ms + u64::from(*first))
        });
        (count, oldest)
    }

    /// Ends the stretch at `end_ms`: every fact still waiting counts with its age then.
    pub fn close(&mut self, end_ms: u64) -> u64 {
        let end = self.offset(end_ms);
        let mut waiting = 0;
        let keys: Vec<CodeKey> = self.codes.keys().cloned().collect();
        for key in keys {
            let Some(track) = self.codes.get_mut(&key) else {
                continue;
            };
            let ages: Vec<u32> = track
                .waiting
                .drain(..)
                .map(|f| end.saturating_sub(f.at))
                .collect();
            waiting += ages.len() as u64;
            let tenant = self.tenant_figures(&key.0);
            for age in &ages {
                tenant.add_waiting(*age);
            }
            self.budget_figures(&key.0)
                .waiting_ms
                .extend_from_slice(&ages);
            if let Some(figures) = self.class_figures(&key.0) {
                figures.waiting_ms.extend(ages);
            }
        }
        waiting
    }

    /// Whether `tenant` has more codes than its budget pushes in a minute.
    pub fn is_over_budget(&self, tenant: &TenantId) -> bool {
        self.over_budget.contains(tenant)
    }

    /// Whether the tenant has more codes than its budget pushes in an hour.
    pub fn is_past_the_hour(&self, tenant: &TenantId) -> bool {
        self.past_the_hour.contains(tenant)
    }

    /// Every code that saw a fact or a refresh (the end-of-stretch check reads these).
    pub fn touched(&self) -> impl Iterator<Item = &CodeKey> {
        self.codes.keys()
    }
}

/// The member WeCom routes a native code's scan to: uniformly among the list it holds.
pub fn routed_member(held: &[StaffId], draw: f64) -> Option<&StaffId> {
    if held.is_empty() {
        return None;
    }
    let at = ((draw * held.len() as f64) as usize).min(held.len() - 1);
    held.get(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> (TenantId, CodeId) {
        (
            TenantId::parse("t1").expect("valid"),
            CodeId::parse("c1").expect("valid"),
        )
    }

    fn measure() -> Measure {
        let (tenant, _) = ids();
        let mut measure = Measure::new(1_000_000, 1, |config| (config == "cw1").then(ids))
            .with_budget(9_000, 135_000);
        measure.tenant(&tenant, 0, 1);
        measure
    }

    /// The refresh of `cw1`'s code reads its facts at `read_at_ms`; its push lands at `landed_at_ms`.
    fn read_then_landed(measure: &mut Measure, read_at_ms: u64, landed_at_ms: u64) {
        let (tenant, code) = ids();
        measure.seen(Seen::SnapshotRead {
            tenant,
            code,
            at_ms: read_at_ms,
        });
        measure.seen(Seen::ListLanded {
            config_id: "cw1".into(),
            users: vec![],
            at_ms: landed_at_ms,
        });
    }

    #[test]
    fn a_fact_is_fresh_when_a_push_computed_from_a_later_read_lands() {
        let (tenant, code) = ids();
        let mut measure = measure();
        measure.fact(&tenant, &code, 1_000_500);
        read_then_landed(&mut measure, 1_002_000, 1_003_000);
        assert_eq!(measure.classes[0].staleness_ms, vec![2_500]);
        assert_eq!(measure.by_budget[0].staleness_ms, vec![2_500]);
        assert!(measure.by_budget[1].staleness_ms.is_empty());
    }

    #[test]
    fn a_fact_after_the_read_waits_for_the_next_refresh_and_counts_its_age_at_the_end() {
        let (tenant, code) = ids();
        let mut measure = measure();
        measure.seen(Seen::SnapshotRead {
            tenant: tenant.clone(),
            code: code.clone(),
            at_ms: 1_002_000,
        });
        measure.fact(&tenant, &code, 1_002_500);
        measure.seen(Seen::ListLanded {
            config_id: "cw1".into(),
            users: vec![],
            at_ms: 1_003_000,
        });
        assert!(measure.classes[0].staleness_ms.is_empty());
        assert_eq!(measure.close(1_010_000), 1);
        assert_eq!(measure.classes[0].waiting_ms, vec![7_500]);
        // The tenant's own figures: the landed list, and the fact still waiting at its age.
        let own = &measure.tenants[&tenant];
        assert_eq!((own.lists_landed, own.facts, own.waiting), (1, 1, 1));
        assert_eq!(own.max_ms, 7_500);
    }

    #[test]
    fn a_refresh_that_pushed_nothing_is_handed_back_and_resolves_at_its_read_when_wecom_held_the_list(
    ) {
        let (tenant, code) = ids();
        let mut measure = measure();
        measure.fact(&tenant, &code, 1_000_100);
        measure.seen(Seen::SnapshotRead {
            tenant: tenant.clone(),
            code: code.clone(),
            at_ms: 1_000_400,
        });
        measure.seen(Seen::LeaseReleased {
            tenant: tenant.clone(),
            code: code.clone(),
            at_ms: 1_000_600,
        });
        let ended = measure.take_ended();
        assert_eq!(ended.len(), 1);
        measure.held_at_read(&ended[0]);
        assert_eq!(measure.classes[0].staleness_ms, vec![300]);
        assert!(measure.take_ended().is_empty());
    }

    #[test]
    fn a_crossing_is_not_reflected_by_a_read_before_its_add_was_counted() {
        let (tenant, code) = ids();
        let mut measure = measure();
        measure.fact_once_counted(&tenant, &code, 1_000_500, "wm1");
        // A refresh for another reason reads the code before the add is counted, and pushes.
        read_then_landed(&mut measure, 1_000_600, 1_000_700);
        assert!(measure.classes[0].staleness_ms.is_empty(), "still waiting");
        measure.scan(&tenant, &code, Routed::NotListed);
        assert_eq!(
            measure.classes[0].misrouted_after_push, 0,
            "no push for it yet"
        );
        measure.seen(Seen::AddCounted {
            customer: "wm1".into(),
            at_ms: 1_000_800,
        });
        read_then_landed(&mut measure, 1_000_750, 1_000_900);
        assert!(
            measure.classes[0].staleness_ms.is_empty(),
            "read before the count"
        );
        read_then_landed(&mut measure, 1_001_000, 1_001_500);
        assert_eq!(measure.classes[0].staleness_ms, vec![1_000]);
        // Another customer's count opens no gate of this one.
        measure.fact_once_counted(&tenant, &code, 1_002_000, "wm2");
        measure.seen(Seen::AddCounted {
            customer: "wm3".into(),
            at_ms: 1_002_100,
        });
        read_then_landed(&mut measure, 1_002_200, 1_002_300);
        assert_eq!(measure.classes[0].staleness_ms.len(), 1);
    }

    #[test]
    fn scans_count_by_class_and_a_scan_to_an_unlisted_member_is_misrouted() {
        let (tenant, code) = ids();
        let mut measure = measure();
        measure.scan(&tenant, &code, Routed::Listed);
        measure.scan(&tenant, &code, Routed::NotListed);
        assert_eq!(
            (measure.classes[0].scans, measure.classes[0].misrouted),
            (2, 1)
        );
    }

    #[test]
    fn a_scan_of_a_starved_code_is_counted_apart_and_never_as_misrouted() {
        let (tenant, code) = ids();
        let mut measure = measure();
        measure.scan(&tenant, &code, Routed::Starved);
        measure.scan(&tenant, &code, Routed::NotListed);
        let figures = &measure.classes[0];
        assert_eq!(
            (
                figures.scans,
                figures.on_starved,
                figures.misrouted,
                figures.misrouted_after_push
            ),
            (2, 1, 1, 1)
        );
    }

    #[test]
    fn a_misrouted_scan_with_no_fact_of_its_code_waiting_is_counted_as_after_the_push() {
        let (tenant, code) = ids();
        let mut measure = measure();
        measure.fact(&tenant, &code, 1_000_500);
        measure.scan(&tenant, &code, Routed::NotListed);
        assert_eq!(measure.classes[0].misrouted_after_push, 0, "a fact waits");
        read_then_landed(&mut measure, 1_002_000, 1_003_000);
        measure.scan(&tenant, &code, Routed::NotListed);
        assert_eq!(
            (
                measure.classes[0].misrouted,
                measure.classes[0].misrouted_after_push
            ),
            (2, 1)
        );
    }

    #[test]
    fn wecom_routes_among_the_list_it_holds_and_nowhere_when_it_is_empty() {
        let held: Vec<StaffId> = ["a", "b"]
            .iter()
            .map(|s| StaffId::parse(s).expect("valid"))
            .collect();
        assert_eq!(routed_member(&held, 0.99).map(StaffId::as_str), Some("b"));
        assert_eq!(routed_member(&held, 0.0).map(StaffId::as_str), Some("a"));
        assert!(routed_member(&[], 0.5).is_none());
    }
}
