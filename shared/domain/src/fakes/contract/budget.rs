//! The shared WeCom budget (docs/rules.md rule 6): both windows checked and charged in one
//! step, a refusal charging nothing and naming the window that is full and when it reopens.

use super::{now_ms, Fixture};
use crate::budget::{
    reopens_in, BudgetLayers, BudgetLimits, EgressAddresses, Spend, WeComBudget, Window,
};
use crate::ids::TenantId;

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 60 * MINUTE_MS;

const LIMITS: BudgetLimits = BudgetLimits {
    per_minute: 3,
    per_hour: 5,
};

/// Ten and a half minutes into the next UTC hour: near now (the table collects budget items
/// two hours after theirs), with room for the minutes the cases step through.
fn next_hour() -> u64 {
    (now_ms() / HOUR_MS + 1) * HOUR_MS + 10 * MINUTE_MS + 30_000
}

async fn spend<B: WeComBudget>(budget: &B, tenant: &TenantId, api: &str, at_ms: u64) -> Spend {
    budget
        .spend(tenant, api, at_ms)
        .await
        .expect("store available")
}

fn refused(window: Window, at_ms: u64) -> Spend {
    Spend::Exhausted {
        window,
        retry_after_ms: reopens_in(window, at_ms),
    }
}

pub async fn spends_beyond_the_minutes_budget_are_refused_until_the_next_minute<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let budget = fixture.budget(BudgetLayers::behind_one_address(LIMITS));
    let at = next_hour();
    for i in 0..3 {
        assert_eq!(spend(&budget, &tenant, "api", at + i).await, Spend::Granted);
    }
    assert_eq!(
        spend(&budget, &tenant, "api", at + 3).await,
        refused(Window::Minute, at + 3)
    );
    assert_eq!(
        spend(&budget, &tenant, "api", at + 29_000).await,
        Spend::Exhausted {
            window: Window::Minute,
            retry_after_ms: 1_000
        },
        "refused until the minute's end"
    );
    assert_eq!(
        spend(&budget, &tenant, "api", at + 30_000).await,
        Spend::Granted,
        "the next minute reopens it"
    );
}

pub async fn spends_beyond_the_hours_budget_are_refused_until_the_next_hour<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let budget = fixture.budget(BudgetLayers::behind_one_address(LIMITS));
    let at = next_hour();
    let granted = [at, at + 1, at + 2, at + MINUTE_MS, at + MINUTE_MS + 1];
    for when in granted {
        assert_eq!(spend(&budget, &tenant, "api", when).await, Spend::Granted);
    }
    let later = at + 5 * MINUTE_MS;
    assert_eq!(
        spend(&budget, &tenant, "api", later).await,
        refused(Window::Hour, later),
        "a fresh minute in a spent hour"
    );
    assert_eq!(
        spend(&budget, &tenant, "api", at + 3).await,
        refused(Window::Hour, at + 3),
        "a full minute in a full hour waits for the hour"
    );
    let next = (at / HOUR_MS + 1) * HOUR_MS;
    assert_eq!(
        spend(&budget, &tenant, "api", next).await,
        Spend::Granted,
        "the next hour reopens it"
    );
}

pub async fn each_tenant_and_each_api_spends_its_own_budget<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let budget = fixture.budget(BudgetLayers::behind_one_address(LIMITS));
    let neighbour = super::fresh_tenant();
    let at = next_hour();
    for i in 0..3 {
        assert_eq!(spend(&budget, &tenant, "api", at + i).await, Spend::Granted);
    }
    assert_eq!(
        spend(&budget, &tenant, "api", at + 3).await,
        refused(Window::Minute, at + 3)
    );
    assert_eq!(
        spend(&budget, &tenant, "other_api", at + 4).await,
        Spend::Granted
    );
    assert_eq!(
        spend(&budget, &neighbour, "api", at + 5).await,
        Spend::Granted
    );
}

pub async fn a_budget_kept_in_shards_never_grants_more_than_its_hour_in_all<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    // Three shards (1,201 a minute is past two shares of 600), holding 3, 2 and 2 of the hour.
    let limits = BudgetLimits {
        per_minute: 1_201,
        per_hour: 7,
    };
    assert_eq!(limits.shards(), 3);
    let budget = fixture.budget(BudgetLayers::behind_one_address(limits));
    let at = next_hour();
    let mut granted = 0;
    for i in 0..20 {
        match spend(&budget, &tenant, "api", at + i).await {
            Spend::Granted => granted += 1,
            refusal => assert_eq!(
                refusal,
                refused(Window::Hour, at + i),
                "only the hour is ever full"
            ),
        }
    }
    assert!(granted <= 7, "{granted} granted of an hour of 7");
    // A refusal needs both shards it tried full: two of 2 at the least.
    assert!(
        granted >= 4,
        "refused before two shards were full: {granted}"
    );
}

/// An address no other case (nor an earlier run on the same table) has spent from.
fn fresh_address() -> EgressAddresses {
    let [a, b, c] = rand::random::<[u8; 3]>();
    EgressAddresses::parse(&format!("10.{a}.{b}.{c}")).expect("an address")
}

pub async fn tenants_behind_one_address_share_its_window_and_a_refusal_there_costs_the_tenant_nothing<
    F: Fixture,
>(
    fixture: &F,
    tenant: TenantId,
) {
    let budget = fixture.budget(BudgetLayers {
        tenant: LIMITS,
        address: BudgetLimits {
            per_minute: 4,
            per_hour: 100,
        },
        egress: fresh_address(),
    });
    let neighbour = super::fresh_tenant();
    let at = next_hour();
    for i in 0..3 {
        assert_eq!(spend(&budget, &tenant, "api", at + i).await, Spend::Granted);
    }
    assert_eq!(
        spend(&budget, &neighbour, "api", at + 3).await,
        Spend::Granted,
        "the fourth call of the address's minute"
    );
    assert_eq!(
        spend(&budget, &neighbour, "api", at + 4).await,
        refused(Window::Minute, at + 4),
        "the address's minute is full though the neighbour's own is not"
    );
    assert_eq!(
        spend(&budget, &neighbour, "other_api", at + 5).await,
        Spend::Granted,
        "each API has its own window at the address too"
    );
    // The next minute: the address has 4 again; now the neighbour's own 3 refuse first.
    let next = at + MINUTE_MS;
    for i in 0..3 {
        assert_eq!(
            spend(&budget, &neighbour, "api", next + i).await,
            Spend::Granted
        );
    }
    assert_eq!(
        spend(&budget, &neighbour, "api", next + 3).await,
        refused(Window::Minute, next + 3),
        "the neighbour's own minute (3) is full, with one address unit left"
    );
    assert_eq!(
        spend(&budget, &tenant, "api", next + 4).await,
        Spend::Granted,
        "the address's fourth unit of this minute"
    );
}

pub async fn a_tenant_past_its_fair_share_of_a_busy_address_leaves_the_last_fifth_to_tenants_within_theirs<
    F: Fixture,
>(
    fixture: &F,
    tenant: TenantId,
) {
    // An address of 10 a minute: 8 open to every tenant, the last 2 only to tenants within
    // their fair share. Each tenant may make 10 a minute itself.
    let own = BudgetLimits {
        per_minute: 10,
        per_hour: 1_000,
    };
    let budget = fixture.budget(BudgetLayers {
        tenant: own,
        address: BudgetLimits {
            per_minute: 10,
            per_hour: 1_000,
        },
        egress: fresh_address(),
    });
    let neighbour = super::fresh_tenant();
    let at = next_hour();
    assert_eq!(spend(&budget, &tenant, "api", at).await, Spend::Granted);
    assert_eq!(
        spend(&budget, &neighbour, "api", at + 1).await,
        Spend::Granted
    );
    // The next minute: two tenants asked in the one before, so a fair share is 5.
    let next = at + MINUTE_MS;
    for i in 0..8 {
        assert_eq!(
            spend(&budget, &tenant, "api", next + i).await,
            Spend::Granted,
            "call {} of the tenant: 5 within its share, then the open part",
            i + 1
        );
    }
    assert_eq!(
        spend(&budget, &tenant, "api", next + 8).await,
        refused(Window::Minute, next + 8),
        "the tenant is past its share of 5 and the open 8 are spent"
    );
    for i in 9..11 {
        assert_eq!(
            spend(&budget, &neighbour, "api", next + i).await,
            Spend::Granted,
            "the neighbour, within its share, takes the last fifth"
        );
    }
    assert_eq!(
        spend(&budget, &neighbour, "api", next + 11).await,
        refused(Window::Minute, next + 11),
        "the address's whole minute is spent"
    );
}

pub async fn a_tenant_alone_behind_an_address_may_use_all_of_its_minute<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let budget = fixture.budget(BudgetLayers {
        tenant: BudgetLimits {
            per_minute: 20,
            per_hour: 1_000,
        },
        address: BudgetLimits {
            per_minute: 10,
            per_hour: 1_000,
        },
        egress: fresh_address(),
    });
    let at = next_hour();
    assert_eq!(spend(&budget, &tenant, "api", at).await, Spend::Granted);
    let next = at + MINUTE_MS;
    for i in 0..10 {
        assert_eq!(
            spend(&budget, &tenant, "api", next + i).await,
            Spend::Granted,
            "call {} of the only tenant that asked: its share is the whole minute",
            i + 1
        );
    }
    assert_eq!(
        spend(&budget, &tenant, "api", next + 10).await,
        refused(Window::Minute, next + 10),
        "the address's minute, not the tenant's 20"
    );
}

pub async fn a_unit_the_address_refused_is_given_back_to_the_tenants_hour<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    // The tenant may make 2 calls an hour; the address 1 a minute. A spend the address refuses
    // must not use up one of the tenant's 2.
    let budget = fixture.budget(BudgetLayers {
        tenant: BudgetLimits {
            per_minute: 2,
            per_hour: 2,
        },
        address: BudgetLimits {
            per_minute: 1,
            per_hour: 100,
        },
        egress: fresh_address(),
    });
    let at = next_hour();
    assert_eq!(spend(&budget, &tenant, "api", at).await, Spend::Granted);
    for i in 1..4 {
        assert_eq!(
            spend(&budget, &tenant, "api", at + i).await,
            refused(Window::Minute, at + i),
            "the address's minute is spent"
        );
    }
    assert_eq!(
        spend(&budget, &tenant, "api", at + MINUTE_MS).await,
        Spend::Granted,
        "the tenant's second unit of the hour was never taken by the refusals"
    );
    assert_eq!(
        spend(&budget, &tenant, "api", at + 2 * MINUTE_MS).await,
        refused(Window::Hour, at + 2 * MINUTE_MS),
        "and then the tenant's hour is spent"
    );
}

pub async fn an_addresses_spent_hour_refuses_every_tenant_behind_it_until_the_hour<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let budget = fixture.budget(BudgetLayers {
        tenant: LIMITS,
        address: BudgetLimits {
            per_minute: 10,
            per_hour: 4,
        },
        egress: fresh_address(),
    });
    let neighbour = super::fresh_tenant();
    let at = next_hour();
    for (i, who) in [&tenant, &neighbour, &tenant, &neighbour]
        .into_iter()
        .enumerate()
    {
        let when = at + i as u64 * MINUTE_MS;
        assert_eq!(spend(&budget, who, "api", when).await, Spend::Granted);
    }
    let later = at + 10 * MINUTE_MS;
    for who in [&tenant, &neighbour] {
        assert_eq!(
            spend(&budget, who, "api", later).await,
            refused(Window::Hour, later),
            "the address's hour is spent for everyone behind it"
        );
    }
}

pub async fn a_45009_holds_the_tenants_minute_and_one_in_the_next_minute_its_hour<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let budget = fixture.budget(BudgetLayers::behind_one_address(BudgetLimits {
        per_minute: 1_500,
        per_hour: 100,
    }));
    let at = next_hour();
    for i in 0..4 {
        assert_eq!(spend(&budget, &tenant, "api", at + i).await, Spend::Granted);
    }
    let held = budget.hold(&tenant, "api", at + 10).await.expect("store");
    assert_eq!(held, refused(Window::Minute, at + 10));
    for i in 11..15 {
        assert_eq!(
            spend(&budget, &tenant, "api", at + i).await,
            refused(Window::Minute, at + i),
            "every shard's minute is held"
        );
    }
    // The next minute lets 4 calls through again before WeCom's 45009: a minute window
    // smaller than our budget, held as a minute.
    let next = at + MINUTE_MS;
    for i in 0..4 {
        assert_eq!(
            spend(&budget, &tenant, "api", next + i).await,
            Spend::Granted
        );
    }
    let held = budget.hold(&tenant, "api", next + 10).await.expect("store");
    assert_eq!(held, refused(Window::Minute, next + 10));
    // The minute after lets 1 through: the new minute did not restore WeCom's capacity.
    let third = next + MINUTE_MS;
    assert_eq!(spend(&budget, &tenant, "api", third).await, Spend::Granted);
    let held = budget.hold(&tenant, "api", third + 1).await.expect("store");
    assert_eq!(
        held,
        refused(Window::Hour, third + 1),
        "a 45009 right after a held minute, with far fewer calls through, is the hour's"
    );
    let later = third + 5 * MINUTE_MS;
    assert_eq!(
        spend(&budget, &tenant, "api", later).await,
        refused(Window::Hour, later),
        "the hour stays held in later minutes"
    );
    assert_eq!(
        spend(&budget, &tenant, "api_other", later).await,
        Spend::Granted,
        "another API is not held"
    );
}
