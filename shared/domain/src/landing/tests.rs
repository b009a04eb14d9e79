use super::*;
use crate::fakes::InMemoryRotations;
use std::collections::BTreeMap;

fn slot(staff: &str, takes: u32) -> RotationSlot {
    RotationSlot {
        staff: StaffId::parse(staff).expect("valid"),
        takes,
        link: Some(format!("https://work.weixin.qq.com/ca/{staff}")),
    }
}

fn picks(rotation: &[RotationSlot], numbers: std::ops::RangeInclusive<u64>) -> Vec<String> {
    numbers
        .map(|n| pick(rotation, n).expect("a slot").staff.to_string())
        .collect()
}

fn ids() -> (TenantId, CodeId) {
    (
        TenantId::parse("t1").expect("valid"),
        CodeId::parse("seq-1").expect("valid"),
    )
}

#[test]
fn each_member_takes_their_consecutive_visitors_then_the_round_starts_again() {
    let rotation = [slot("a", 2), slot("b", 1), slot("c", 3)];
    assert_eq!(
        picks(&rotation, 1..=12),
        ["a", "a", "b", "c", "c", "c", "a", "a", "b", "c", "c", "c"]
    );
}

#[test]
fn any_run_of_consecutive_visits_fills_whole_rounds_exactly() {
    let rotation = [slot("a", 3), slot("b", 1), slot("c", 2), slot("d", 4)];
    // 1,000 visits are 100 rounds of 10: each member gets exactly takes x 100.
    let mut got: BTreeMap<String, u32> = BTreeMap::new();
    for staff in picks(&rotation, 1..=1000) {
        *got.entry(staff).or_default() += 1;
    }
    let want: BTreeMap<String, u32> = [("a", 300), ("b", 100), ("c", 200), ("d", 400)]
        .into_iter()
        .map(|(s, n)| (s.to_owned(), n))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn an_empty_round_or_visit_zero_picks_nobody() {
    assert_eq!(pick(&[], 1), None);
    assert_eq!(pick(&[slot("a", 0)], 1), None);
    assert_eq!(pick(&[slot("a", 1)], 0), None);
}

#[test]
fn the_chat_url_carries_the_code_as_the_customer_channel() {
    let code = CodeId::parse("seq-1").expect("valid");
    assert_eq!(
        chat_url("https://work.weixin.qq.com/ca/x", &code),
        "https://work.weixin.qq.com/ca/x?customer_channel=seq-1"
    );
    assert_eq!(
        chat_url("https://work.weixin.qq.com/ca/x?a=1", &code),
        "https://work.weixin.qq.com/ca/x?a=1&customer_channel=seq-1"
    );
}

#[tokio::test]
async fn visits_go_to_the_members_in_rotation_order_with_the_code_as_channel() {
    let rotations = InMemoryRotations::default();
    let (tenant, code) = ids();
    rotations.record(&tenant, &code, vec![slot("a", 1), slot("b", 2)]);
    let page = LandingPage::new(rotations);
    let mut went = Vec::new();
    for _ in 0..6 {
        match page.visit("t1", "seq-1").await.expect("visited") {
            Landing::Chat {
                staff, location, ..
            } => {
                assert!(location.ends_with("?customer_channel=seq-1"), "{location}");
                went.push(staff.to_string());
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(went, ["a", "b", "b", "a", "b", "b"]);
}

#[tokio::test]
async fn a_new_record_starts_a_new_round() {
    let rotations = InMemoryRotations::default();
    let (tenant, code) = ids();
    rotations.record(&tenant, &code, vec![slot("a", 1), slot("b", 1)]);
    let page = LandingPage::new(rotations.clone());
    page.visit("t1", "seq-1").await.expect("visited");
    rotations.record(&tenant, &code, vec![slot("b", 1), slot("c", 1)]);
    let landing = page.visit("t1", "seq-1").await.expect("visited");
    assert!(
        matches!(&landing, Landing::Chat { staff, number: 1, .. } if staff.as_str() == "b"),
        "{landing:?}"
    );
}

#[tokio::test]
async fn unknown_native_starved_and_linkless_codes_each_have_their_answer() {
    let rotations = InMemoryRotations::default();
    let tenant = TenantId::parse("t1").expect("valid");
    let native = CodeId::parse("native").expect("valid");
    let starved = CodeId::parse("starved").expect("valid");
    let linkless = CodeId::parse("linkless").expect("valid");
    rotations.record_native(&tenant, &native);
    rotations.record(&tenant, &starved, vec![slot("a", 1)]);
    rotations.mark_starved(&tenant, &starved);
    let mut no_link = slot("a", 1);
    no_link.link = None;
    rotations.record(&tenant, &linkless, vec![no_link]);
    let page = LandingPage::new(rotations);
    let visit = |code: &'static str| page.visit("t1", code);
    assert_eq!(visit("nope").await.expect("ok"), Landing::UnknownCode);
    assert_eq!(
        visit("native").await.expect("ok"),
        Landing::NotOnLandingPage
    );
    assert_eq!(visit("starved").await.expect("ok"), Landing::Starved);
    assert!(matches!(
        visit("linkless").await.expect("ok"),
        Landing::NoLinkYet { .. }
    ));
}

#[tokio::test]
async fn malformed_ids_are_refused_before_any_write() {
    let rotations = InMemoryRotations::default();
    rotations.set_unavailable(true);
    let page = LandingPage::new(rotations);
    let long_code = "c".repeat(31);
    let long_tenant = "t".repeat(65);
    for (tenant, code) in [
        ("t1", long_code.as_str()),
        ("t1", "a/b"),
        ("t1", ""),
        (long_tenant.as_str(), "seq-1"),
        ("t 1", "seq-1"),
    ] {
        let refused = page.visit(tenant, code).await;
        assert!(
            matches!(
                refused,
                Err(LandingError::Tenant(_) | LandingError::Code(_))
            ),
            "{tenant:?} {code:?}: {refused:?}"
        );
    }
}
