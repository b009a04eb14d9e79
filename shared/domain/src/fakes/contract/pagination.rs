//! Reads a page at a time: a tenant's codes as the admin API lists them (`codes_page`) and as
//! the drift sample walks them (`codes_after`).

use super::{code, config, now_ms, staff, Fixture};
use crate::admin::AdminStore;
use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::sweep::DriftLedger;

/// Ids that sort differently by case and punctuation, as the table's byte order does.
fn mixed_ids(count: usize) -> Vec<CodeId> {
    let heads = ["A", "a", "-", "_", "Z", "z9", "0"];
    let mut ids: Vec<CodeId> = (0..count)
        .map(|i| code(&format!("{}{i:02}", heads[i % heads.len()])))
        .collect();
    ids.sort();
    ids
}

async fn store_codes<F: Fixture>(fixture: &F, tenant: &TenantId, codes: &[CodeId]) {
    for (i, id) in codes.iter().enumerate() {
        let stored = fixture
            .store()
            .put_code(
                tenant,
                id,
                &config(vec![staff(&format!("p{i}"))]),
                None,
                now_ms(),
            )
            .await
            .expect("store available");
        assert!(stored.is_some(), "{id} created");
    }
}

/// Every page of `codes_page` of `limit`, each with its `more`.
async fn all_pages<F: Fixture>(
    fixture: &F,
    tenant: &TenantId,
    limit: usize,
) -> Vec<(Vec<CodeId>, bool)> {
    let mut pages = Vec::new();
    let mut after: Option<CodeId> = None;
    loop {
        let (page, more) = fixture
            .store()
            .codes_page(tenant, after.as_ref(), limit)
            .await
            .expect("store available");
        let ids: Vec<CodeId> = page.iter().map(|s| s.code.clone()).collect();
        after = ids.last().cloned();
        pages.push((ids, more));
        if !more || pages.len() > 100 {
            return pages;
        }
    }
}

pub async fn codes_come_back_a_page_at_a_time_in_id_order_with_none_lost_or_repeated<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let codes = mixed_ids(23);
    store_codes(fixture, &tenant, &codes).await;
    let pages = all_pages(fixture, &tenant, 5).await;
    let sizes: Vec<usize> = pages.iter().map(|(page, _)| page.len()).collect();
    let more: Vec<bool> = pages.iter().map(|(_, more)| *more).collect();
    assert_eq!(sizes, [5, 5, 5, 5, 3]);
    assert_eq!(more, [true, true, true, true, false]);
    let read: Vec<CodeId> = pages.into_iter().flat_map(|(page, _)| page).collect();
    assert_eq!(read, codes);
    let (page, _) = fixture
        .store()
        .codes_page(&tenant, None, 1)
        .await
        .expect("store available");
    assert_eq!(page[0].version, 1, "a summary carries the code's version");
    assert_eq!(
        fixture
            .store()
            .codes_of_tenant(&tenant)
            .await
            .expect("store available"),
        codes,
        "every code once, in id order"
    );
}

pub async fn a_last_page_that_is_exactly_full_says_no_more_follow<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let codes = mixed_ids(6);
    store_codes(fixture, &tenant, &codes).await;
    let pages = all_pages(fixture, &tenant, 3).await;
    assert_eq!(
        pages,
        [(codes[..3].to_vec(), true), (codes[3..].to_vec(), false)]
    );
    for limit in [6, 10] {
        let (page, more) = fixture
            .store()
            .codes_page(&tenant, None, limit)
            .await
            .expect("store available");
        assert_eq!((page.len(), more), (6, false), "limit {limit}");
    }
    let (page, more) = fixture
        .store()
        .codes_page(&tenant, codes.last(), 3)
        .await
        .expect("store available");
    assert!(page.is_empty() && !more, "nothing after the last code");
}

pub async fn the_drift_sample_pages_through_a_tenants_codes_after_its_cursor<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let codes = mixed_ids(11);
    store_codes(fixture, &tenant, &codes).await;
    let mut read: Vec<Vec<CodeId>> = Vec::new();
    let mut after: Option<CodeId> = None;
    loop {
        let page = fixture
            .store()
            .codes_after(&tenant, after.as_ref(), 4)
            .await
            .expect("store available");
        if page.is_empty() || read.len() > 10 {
            break;
        }
        after = page.last().cloned();
        read.push(page);
    }
    assert_eq!(
        read.iter().map(Vec::len).collect::<Vec<_>>(),
        [4, 4, 3],
        "pages of at most the limit"
    );
    assert_eq!(read.concat(), codes);
    let middle = fixture
        .store()
        .codes_after(&tenant, Some(&codes[5]), 2)
        .await
        .expect("store available");
    assert_eq!(middle, codes[6..8], "from strictly after the cursor");
}

pub async fn one_tenants_pages_hold_none_of_another_tenants_codes<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let neighbour = super::fresh_tenant();
    let ours = [code("b1"), code("b3"), code("b5")];
    let theirs = [code("b2"), code("b4")];
    store_codes(fixture, &tenant, &ours).await;
    store_codes(fixture, &neighbour, &theirs).await;
    let pages = all_pages(fixture, &tenant, 2).await;
    let read: Vec<CodeId> = pages.into_iter().flat_map(|(page, _)| page).collect();
    assert_eq!(read, ours);
    let sampled = fixture
        .store()
        .codes_after(&neighbour, None, 10)
        .await
        .expect("store available");
    assert_eq!(sampled, theirs);
}
