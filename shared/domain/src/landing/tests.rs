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

fn key(seed: u8) -> OrderKey {
    OrderKey::new([seed; 32])
}

fn picks(
    rotation: &[RotationSlot],
    numbers: std::ops::RangeInclusive<u64>,
    order: &OrderKey,
) -> Vec<String> {
    numbers
        .map(|n| pick(rotation, n, order).expect("a slot").staff.to_string())
        .collect()
}

fn person() -> Opener {
    Opener::Person
}

/// The staff of each round of `rounds` rounds of `rotation`, in visit order.
fn rounds(rotation: &[RotationSlot], rounds: u64, order: &OrderKey) -> Vec<Vec<String>> {
    let round: u64 = rotation.iter().map(|s| u64::from(s.takes)).sum();
    (0..rounds)
        .map(|r| picks(rotation, r * round + 1..=(r + 1) * round, order))
        .collect()
}

fn ids() -> (TenantId, CodeId) {
    (
        TenantId::parse("t1").expect("valid"),
        CodeId::parse("seq-1").expect("valid"),
    )
}

#[test]
fn every_round_gives_each_member_exactly_their_takes() {
    let rotation = [slot("a", 3), slot("b", 1), slot("c", 2), slot("d", 4)];
    let want: BTreeMap<String, u32> = [("a", 3), ("b", 1), ("c", 2), ("d", 4)]
        .into_iter()
        .map(|(s, n)| (s.to_owned(), n))
        .collect();
    for (r, round) in rounds(&rotation, 500, &key(7)).into_iter().enumerate() {
        let mut got: BTreeMap<String, u32> = BTreeMap::new();
        for staff in round {
            *got.entry(staff).or_default() += 1;
        }
        assert_eq!(got, want, "round {r}");
    }
}

proptest::proptest! {
    #[test]
    fn any_rotation_under_any_key_gives_each_slot_its_takes_every_round(
        takes in proptest::collection::vec(1u32..6, 1..12),
        seed in proptest::prelude::any::<[u8; 32]>(),
        round in 0u64..1_000_000,
    ) {
        let rotation: Vec<RotationSlot> = takes
            .iter()
            .enumerate()
            .map(|(i, t)| slot(&format!("s{i}"), *t))
            .collect();
        let length: u64 = takes.iter().map(|t| u64::from(*t)).sum();
        let order = OrderKey::new(seed);
        let mut got = vec![0u32; rotation.len()];
        for n in round * length + 1..=(round + 1) * length {
            let picked = pick(&rotation, n, &order).expect("a slot");
            let at = rotation.iter().position(|s| s.staff == picked.staff).expect("listed");
            got[at] += 1;
        }
        proptest::prop_assert_eq!(got, takes);
    }
}

#[test]
fn a_round_is_not_handed_out_in_the_order_of_its_slots() {
    // With visit n at position (n - 1) mod the round, every round was a, b, c, ... h: a
    // member who watched the redirects knew who came next.
    let rotation: Vec<RotationSlot> = "abcdefgh"
        .chars()
        .map(|c| slot(&c.to_string(), 1))
        .collect();
    let in_slot_order: Vec<String> = rotation.iter().map(|s| s.staff.to_string()).collect();
    let seen = rounds(&rotation, 100, &key(1));
    assert!(
        seen.iter().all(|round| *round != in_slot_order),
        "a round went in slot order"
    );
    let distinct: std::collections::BTreeSet<&Vec<String>> = seen.iter().collect();
    assert!(
        distinct.len() >= 95,
        "only {} orders in 100 rounds",
        distinct.len()
    );
}

#[test]
fn a_visitor_cannot_tell_who_follows_a_member() {
    // Within a round, who comes after each member varies: seeing a visit go to `a` says
    // nothing certain about the next one.
    let rotation = [slot("a", 1), slot("b", 1), slot("c", 1), slot("d", 1)];
    let mut after: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for round in rounds(&rotation, 200, &key(2)) {
        for pair in round.windows(2) {
            after
                .entry(pair[0].clone())
                .or_default()
                .insert(pair[1].clone());
        }
    }
    for (member, next) in &after {
        assert_eq!(next.len(), 3, "after {member} came only {next:?}");
    }
}

#[test]
fn the_first_visitor_of_a_round_reaches_each_member_about_as_often() {
    let rotation = [slot("a", 1), slot("b", 1), slot("c", 1), slot("d", 1)];
    let mut first: BTreeMap<String, u32> = BTreeMap::new();
    for round in rounds(&rotation, 4_000, &key(3)) {
        *first.entry(round[0].clone()).or_default() += 1;
    }
    // 1,000 each expected; 850..1,150 is more than 5 standard deviations (27) either side.
    assert_eq!(first.len(), 4, "{first:?}");
    for (member, times) in &first {
        assert!(
            (850..=1_150).contains(times),
            "{member} first {times} times: {first:?}"
        );
    }
}

#[test]
fn the_order_is_the_keys_and_without_it_the_visits_cannot_be_computed() {
    let rotation: Vec<RotationSlot> = "abcdef".chars().map(|c| slot(&c.to_string(), 2)).collect();
    let one = picks(&rotation, 1..=36, &key(4));
    assert_eq!(one, picks(&rotation, 1..=36, &key(4)), "one key, one order");
    assert_ne!(
        one,
        picks(&rotation, 1..=36, &key(5)),
        "another key, another order"
    );
}

#[test]
fn the_key_never_shows_in_a_log_line() {
    let order = OrderKey::new([0xAB; 32]);
    let shown = format!(
        "{:?}",
        Counted::Visit {
            number: 1,
            rotation: vec![],
            order
        }
    );
    assert!(
        !shown.contains("171") && !shown.to_lowercase().contains("ab, "),
        "{shown}"
    );
    assert!(shown.contains("redacted"), "{shown}");
}

#[test]
fn an_empty_or_oversized_round_or_visit_zero_picks_nobody() {
    let order = key(0);
    assert_eq!(pick(&[], 1, &order), None);
    assert_eq!(pick(&[slot("a", 0)], 1, &order), None);
    assert_eq!(pick(&[slot("a", 1)], 0, &order), None);
    let longest = u32::try_from(MAX_ROUND).expect("fits");
    assert!(pick(&[slot("a", longest)], 1, &order).is_some());
    assert_eq!(pick(&[slot("a", longest), slot("b", 1)], 1, &order), None);
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
async fn visits_fill_each_round_with_the_code_as_channel() {
    let rotations = InMemoryRotations::default();
    let (tenant, code) = ids();
    rotations.record(&tenant, &code, vec![slot("a", 1), slot("b", 2)]);
    let page = LandingPage::new(rotations);
    let mut went = Vec::new();
    for _ in 0..6 {
        match page.visit("t1", "seq-1", person()).await.expect("visited") {
            Landing::Chat {
                staff, location, ..
            } => {
                assert!(location.ends_with("?customer_channel=seq-1"), "{location}");
                went.push(staff.to_string());
            }
            other => panic!("{other:?}"),
        }
    }
    for round in went.chunks(3) {
        let mut round = round.to_vec();
        round.sort();
        assert_eq!(round, ["a", "b", "b"], "{went:?}");
    }
}

#[tokio::test]
async fn a_crawler_a_head_or_a_prefetch_counts_no_visit() {
    let rotations = InMemoryRotations::default();
    let (tenant, code) = ids();
    rotations.record(&tenant, &code, vec![slot("a", 1), slot("b", 1)]);
    let page = LandingPage::new(rotations.clone());
    let preview = b"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)";
    let machines = [
        Request {
            head: true,
            ..Request::default()
        },
        Request {
            purposes: &[b"prefetch;prerender"],
            ..Request::default()
        },
        Request {
            purposes: &[b"prefetch"],
            ..Request::default()
        },
        Request {
            user_agent: Some(preview),
            ..Request::default()
        },
    ];
    for request in &machines {
        let landing = page
            .visit("t1", "seq-1", Opener::of(request))
            .await
            .expect("answered");
        assert!(
            matches!(landing, Landing::Machine(_)),
            "{request:?}: {landing:?}"
        );
    }
    assert_eq!(
        rotations.visits(&tenant, &code),
        0,
        "no machine took a slot"
    );
    // Nor does a machine need the table: it is answered with the store down.
    rotations.set_unavailable(true);
    let down = page
        .visit("t1", "seq-1", Opener::Machine(Machine::Crawler))
        .await;
    assert!(
        matches!(down, Ok(Landing::Machine(Machine::Crawler))),
        "{down:?}"
    );
    rotations.set_unavailable(false);
    let first = page.visit("t1", "seq-1", person()).await.expect("visited");
    assert!(
        matches!(first, Landing::Chat { number: 1, .. }),
        "{first:?}"
    );
}

#[test]
fn machines_are_told_from_people_by_their_request() {
    let agent = |ua: &'static str| Request {
        user_agent: Some(ua.as_bytes()),
        ..Request::default()
    };
    let people = [
        // WeChat's and WeCom's own browsers: the people the page exists for.
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0.47(0x18002f2c) NetType/WIFI Language/zh_CN",
        "Mozilla/5.0 (Linux; Android 13; CUBOT X30 Build/TP1A) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36 wxwork/4.1.16",
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
    ];
    for ua in people {
        assert_eq!(Opener::of(&agent(ua)), Opener::Person, "{ua}");
    }
    assert_eq!(
        Opener::of(&Request::default()),
        Opener::Person,
        "no User-Agent"
    );
    let crawlers = [
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
        "TelegramBot (like TwitterBot)",
        "WhatsApp/2.23.20.0",
        "Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)",
        "Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5",
        "facebookexternalhit/1.1",
    ];
    for ua in crawlers {
        assert_eq!(
            Opener::of(&agent(ua)),
            Opener::Machine(Machine::Crawler),
            "{ua}"
        );
    }
    // Only the first USER_AGENT_READ bytes are looked at.
    let long = format!("{}Googlebot/2.1", "x".repeat(USER_AGENT_READ));
    assert_eq!(Opener::of(&agent(long.leak())), Opener::Person);
    for purpose in [&b"prefetch"[..], b"Prefetch;Prerender", b"preview"] {
        let purposes = [purpose];
        let request = Request {
            purposes: &purposes,
            ..Request::default()
        };
        assert_eq!(Opener::of(&request), Opener::Machine(Machine::Prefetch));
    }
}

#[tokio::test]
async fn a_new_record_starts_a_new_round() {
    let rotations = InMemoryRotations::default();
    let (tenant, code) = ids();
    rotations.record(&tenant, &code, vec![slot("a", 1), slot("b", 1)]);
    let page = LandingPage::new(rotations.clone());
    page.visit("t1", "seq-1", person()).await.expect("visited");
    rotations.record(&tenant, &code, vec![slot("c", 1)]);
    let landing = page.visit("t1", "seq-1", person()).await.expect("visited");
    assert!(
        matches!(&landing, Landing::Chat { staff, number: 1, .. } if staff.as_str() == "c"),
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
    let visit = |code: &'static str| page.visit("t1", code, person());
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
        let refused = page
            .visit(tenant, code, Opener::Machine(Machine::Head))
            .await;
        assert!(
            matches!(
                refused,
                Err(LandingError::Tenant(_) | LandingError::Code(_))
            ),
            "{tenant:?} {code:?}: {refused:?}"
        );
    }
}
