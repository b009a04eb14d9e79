//! The landing-page part of the campaign: a tenant of its own with a sequenced code and a quota
//! code, visited through `GET /l/{tenant}/{code}` as customers would, each redirect followed
//! through the sandbox's acquisition link (WeCom delivers the add with the code as `State`).
//!
//! Must-be lines: the sequenced code's visits are exactly the rotation's distribution; a member
//! taken offline during a burst gets no visit that started after the record without them was
//! read; each quota member gets exactly their volume, and the code answers 503 once both
//! volumes are reached.

use crate::world::World;
use anyhow::{ensure, Context, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::ids::{CodeId, TenantId};
use futures::StreamExt;
use rand::distributions::{Alphanumeric, DistString};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Value};
use stack_client::report::Lines;
use stack_client::AdminApi;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CONVERGE: Duration = Duration::from_secs(120);
const SEQUENCED_VISITS: u64 = 400;
const QUOTA_VOLUME: u64 = 3;

struct Landing<'a> {
    world: &'a World,
    admin: &'a AdminApi,
    sandbox_url: &'a str,
    http: reqwest::Client,
    tenant: String,
    staff: Vec<String>,
}

/// The code's record: (staff, takes, link) of each slot, starved; and the visits counted on
/// its page's round.
struct Record {
    slots: Vec<(String, u64, Option<String>)>,
    starved: bool,
    visits: u64,
}

impl Landing<'_> {
    async fn record(&self, code: &str) -> Result<Option<Record>> {
        let key = HashMap::from([
            (
                "pk".to_owned(),
                AttributeValue::S(format!("TENANT#{}#CODE#{code}", self.tenant)),
            ),
            ("sk".to_owned(), AttributeValue::S(format!("PUSHED#{code}"))),
        ]);
        let item = self
            .world
            .dynamodb
            .get_item()
            .table_name(&self.world.table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await?
            .item;
        let Some(item) = item else { return Ok(None) };
        let slots: Vec<Value> = match item.get("rotation").and_then(|v| v.as_s().ok()) {
            Some(raw) => serde_json::from_str(raw)?,
            None => Vec::new(),
        };
        Ok(Some(Record {
            slots: slots
                .iter()
                .map(|s| {
                    (
                        s["staff"].as_str().unwrap_or_default().to_owned(),
                        s["takes"].as_u64().unwrap_or(0),
                        s["link"].as_str().map(str::to_owned),
                    )
                })
                .collect(),
            starved: item.get("starved").and_then(|v| v.as_bool().ok()) == Some(&true),
            visits: self
                .world
                .store
                .page_seen(&TenantId::parse(&self.tenant)?, &CodeId::parse(code)?)
                .await?
                .map_or(0, |page| page.visits),
        }))
    }

    /// Polls the record until `done` holds, within `CONVERGE`.
    async fn until(
        &self,
        code: &str,
        what: &str,
        done: impl Fn(&Record) -> bool,
    ) -> Result<Record> {
        let deadline = Instant::now() + CONVERGE;
        loop {
            if let Some(record) = self.record(code).await?.filter(|r| done(r)) {
                return Ok(record);
            }
            ensure!(Instant::now() < deadline, "{what}: not within {CONVERGE:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn visit(&self, code: &str) -> Result<(u16, Option<String>)> {
        let answer = self
            .http
            .get(format!("{}/l/{}/{code}", self.world.api_url, self.tenant))
            .send()
            .await?;
        let location = answer
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .map(str::to_owned);
        Ok((answer.status().as_u16(), location))
    }

    async fn put(&self, path: &str, body: Value) -> Result<Value> {
        self.admin
            .put(&format!("/tenants/{}{path}", self.tenant), &body)
            .await?
            .expect(path, &[200, 201])
    }
}

fn by_link(record: &Record) -> HashMap<String, String> {
    record
        .slots
        .iter()
        .filter_map(|(staff, _, link)| Some((link.clone()?, staff.clone())))
        .collect()
}

fn member_of(links: &HashMap<String, String>, location: &str) -> Option<String> {
    links
        .get(location.split_once("?customer_channel=")?.0)
        .cloned()
}

/// Seeds the landing tenant, runs its three parts, and answers their report section.
pub async fn run(world: &World, admin: &AdminApi, sandbox_url: &str, seed: u64) -> Result<Lines> {
    let mut rng = StdRng::seed_from_u64(seed ^ crate::clock::real_now_ms());
    let mut word = |n: usize| Alphanumeric.sample_string(&mut rng, n);
    let tenant = format!("lp-{}", word(10).to_lowercase());
    let corp_id = format!("ww{}", word(16).to_lowercase());
    let (secret, token, aes_key) = (word(32), word(16), word(43));
    let staff: Vec<String> = (0..4).map(|i| format!("lp{i}")).collect();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()?;
    let corp = json!({
        "corp_secret": secret, "users": staff,
        "callback": {"url": format!("{}/wecom/{tenant}/callback", world.api_url), "token": token, "encoding_aes_key": aes_key},
    });
    http.put(format!("{sandbox_url}/_sandbox/corps/{corp_id}"))
        .json(&corp)
        .send()
        .await?
        .error_for_status()?;
    let landing = Landing {
        world,
        admin,
        sandbox_url,
        http,
        tenant,
        staff,
    };
    landing
        .put("", json!({"corp_id": corp_id, "corp_secret": secret, "callback_token": token, "encoding_aes_key": aes_key}))
        .await?;
    for member in &landing.staff {
        landing
            .put(&format!("/staff/{member}"), json!({"online": true}))
            .await?;
    }
    let mut out = Lines::new(58, 22);
    out.head("Landing page (a tenant of its own: a sequenced code of 4, round_limit 2; a quota code of 2, daily limit 3)");
    sequenced(&landing, &mut out).await?;
    quota(&landing, &mut out).await?;
    Ok(out)
}

async fn sequenced(landing: &Landing<'_>, out: &mut Lines) -> Result<()> {
    let members: Vec<&str> = landing.staff.iter().map(String::as_str).collect();
    landing
        .put(
            "/codes/lp-seq",
            json!({"family": "sequenced", "members": members, "switches": {"offline_check": true, "round_limit": 2}}),
        )
        .await?;
    let linked =
        |r: &Record| r.slots.len() == members.len() && r.slots.iter().all(|s| s.2.is_some());
    let record = landing
        .until("lp-seq", "the rotation with every link", linked)
        .await?;
    let links = by_link(&record);
    // A burst of concurrent visits: the distribution is the rotation's.
    let answers: Vec<Result<(u16, Option<String>)>> = futures::stream::iter(0..SEQUENCED_VISITS)
        .map(|_| landing.visit("lp-seq"))
        .buffer_unordered(16)
        .collect()
        .await;
    let mut per_member: BTreeMap<String, u64> = BTreeMap::new();
    for answer in answers {
        if let (302, Some(location)) = answer? {
            if let Some(member) = member_of(&links, &location) {
                *per_member.entry(member).or_default() += 1;
            }
        }
    }
    let counted = landing.record("lp-seq").await?.map_or(0, |r| r.visits);
    let share = SEQUENCED_VISITS / members.len() as u64;
    let exact = per_member.len() == members.len() && per_member.values().all(|n| *n == share);
    out.line("sequenced: visits per member", format!("{per_member:?}"));
    out.must(
        &format!("sequenced: {SEQUENCED_VISITS} concurrent visits = {share} each"),
        format!("{exact}, counter {counted}"),
        exact && counted == SEQUENCED_VISITS,
    );

    // A member goes offline during a burst: no visit that starts after the record without
    // them was read reaches them.
    let leaving = landing.staff[1].clone();
    let visits: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let burst = futures::stream::iter(0..8).for_each_concurrent(8, |_| {
        let (visits, stop, links) = (visits.clone(), stop.clone(), &links);
        async move {
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                if let Ok((302, Some(location))) = landing.visit("lp-seq").await {
                    if let Some(member) = member_of(links, &location) {
                        visits.lock().expect("not poisoned").push((started, member));
                    }
                }
            }
        }
    });
    let flip = async {
        let count = || visits.lock().expect("not poisoned").len();
        while count() < 40 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        landing
            .put(&format!("/staff/{leaving}"), json!({"online": false}))
            .await?;
        let gone = |r: &Record| !r.slots.iter().any(|s| s.0 == leaving);
        landing
            .until("lp-seq", "the record without the offline member", gone)
            .await?;
        let landed_at = Instant::now();
        let after = count();
        while count() < after + 100 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        stop.store(true, Ordering::SeqCst);
        anyhow::Ok(landed_at)
    };
    let (_, landed_at) = tokio::join!(burst, flip);
    let landed_at = landed_at.context("the offline flip")?;
    let visits = visits.lock().expect("not poisoned").clone();
    let to_leaving = |after: bool| {
        visits
            .iter()
            .filter(|(at, member)| (*at > landed_at) == after && *member == leaving)
            .count()
    };
    let later = visits.iter().filter(|(at, _)| *at > landed_at).count();
    out.line(
        "sequenced: visits to the offline member before the record",
        to_leaving(false),
    );
    out.must(
        "sequenced: ... after the record without them",
        format!("{} of {later} after", to_leaving(true)),
        to_leaving(true) == 0 && later > 0,
    );
    Ok(())
}

async fn quota(landing: &Landing<'_>, out: &mut Lines) -> Result<()> {
    let members: Vec<&str> = landing.staff[2..].iter().map(String::as_str).collect();
    landing
        .put(
            "/codes/lp-quota",
            json!({"family": "quota", "members": members, "switches": {"offline_check": true, "daily_limit": QUOTA_VOLUME}}),
        )
        .await?;
    let linked =
        |r: &Record| r.slots.len() == members.len() && r.slots.iter().all(|s| s.2.is_some());
    let record = landing
        .until("lp-quota", "the rotation with every link", linked)
        .await?;
    let links = by_link(&record);
    let mut per_member: BTreeMap<String, u64> = BTreeMap::new();
    let mut last = 0;
    for _ in 0..(QUOTA_VOLUME * members.len() as u64 + 2) {
        let (status, location) = landing.visit("lp-quota").await?;
        last = status;
        let Some(location) = location.filter(|_| status == 302) else {
            break;
        };
        let member = member_of(&links, &location).context("a redirect to a rotation link")?;
        let reached = per_member.entry(member.clone()).or_default();
        *reached += 1;
        let reached = *reached;
        // The customer follows the redirect: WeCom adds them to the member.
        landing
            .http
            .post(format!("{}/_sandbox/open-link", landing.sandbox_url))
            .json(&json!({"url": location}))
            .send()
            .await?
            .error_for_status()?;
        if reached == QUOTA_VOLUME {
            let gone = |r: &Record| r.starved || !r.slots.iter().any(|s| s.0 == member);
            landing
                .until("lp-quota", "the record without the full member", gone)
                .await?;
        }
    }
    let exact =
        per_member.len() == members.len() && per_member.values().all(|n| *n == QUOTA_VOLUME);
    out.line("quota: visits per member", format!("{per_member:?}"));
    out.must(
        &format!("quota: each member exactly their volume ({QUOTA_VOLUME})"),
        exact,
        exact,
    );
    out.must(
        "quota: both volumes reached, the page answers",
        last,
        last == 503,
    );
    Ok(())
}
