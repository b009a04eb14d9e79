//! The landing page of sequenced and quota codes on the deployed stack: the public route
//! `GET /l/{tenant}/{code}` counts each visit with one write on the code's rotation record and
//! redirects to the picked member's acquisition link (created in the sandbox by the single
//! writer); the sandbox opens that link as WeCom would, and the add it delivers carries the
//! code as `State`.

use adapters::dynamodb::{keys, DynamoStore};
use anyhow::{ensure, Context, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::ids::{CodeId, TenantId};
use futures::StreamExt;
use integration_tests::{eventually, LiveTenant, World};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CONVERGE: Duration = Duration::from_secs(120);

/// The code's `PUSHED#` record as the single writer left it (users, rotation), and the visits
/// counted on its page's round.
#[derive(Debug, Clone, Default)]
struct Record {
    users: Vec<String>,
    /// (staff, takes, link)
    rotation: Vec<(String, u64, Option<String>)>,
    visits: u64,
    /// Nobody eligible and no fallback: the page refuses every visit.
    starved: bool,
}

async fn record(world: &World, live: &LiveTenant<'_>, code: &str) -> Result<Option<Record>> {
    let key = HashMap::from([
        (
            keys::PK.to_owned(),
            AttributeValue::S(format!("TENANT#{}#CODE#{code}", live.tenant.id)),
        ),
        (
            keys::SK.to_owned(),
            AttributeValue::S(keys::pushed(&domain::ids::CodeId::parse(code)?)),
        ),
    ]);
    let item = world
        .dynamodb
        .get_item()
        .table_name(world.output("TableName"))
        .set_key(Some(key))
        .consistent_read(true)
        .send()
        .await?
        .item;
    let Some(item) = item else { return Ok(None) };
    let users = item
        .get("users")
        .and_then(|v| v.as_l().ok())
        .map(|l| l.iter().filter_map(|u| u.as_s().ok().cloned()).collect())
        .unwrap_or_default();
    let rotation: Vec<Value> = item
        .get("rotation")
        .and_then(|v| v.as_s().ok())
        .map(|raw| serde_json::from_str(raw))
        .transpose()?
        .unwrap_or_default();
    // The visits are counted on the page's round, in the landing page's own tables.
    let page = DynamoStore::new(world.dynamodb.clone(), world.output("TableName").to_owned())
        .with_pages(world.page_tables())
        .page_seen(&TenantId::parse(&live.tenant.id)?, &CodeId::parse(code)?)
        .await?;
    let visits = page.map_or(0, |page| page.visits);
    let starved = item
        .get("starved")
        .and_then(|v| v.as_bool().ok())
        .copied()
        .unwrap_or(false);
    Ok(Some(Record {
        starved,
        users,
        rotation: rotation
            .iter()
            .map(|slot| {
                (
                    slot["staff"].as_str().unwrap_or_default().to_owned(),
                    slot["takes"].as_u64().unwrap_or(0),
                    slot["link"].as_str().map(str::to_owned),
                )
            })
            .collect(),
        visits,
    }))
}

/// Waits until the code's record routes to exactly `members` (in order), each with a link.
async fn rotation_of(
    world: &World,
    live: &LiveTenant<'_>,
    code: &str,
    members: &[&str],
) -> Result<Record> {
    eventually(
        &format!("{code}'s rotation is {members:?}, every member linked"),
        CONVERGE,
        || async {
            let found = record(world, live, code).await?;
            Ok(found.filter(|r| {
                r.rotation.iter().map(|s| s.0.as_str()).collect::<Vec<_>>() == members
                    && r.rotation.iter().all(|s| s.2.is_some())
            }))
        },
    )
    .await
}

/// The staff member each link URL belongs to.
fn staff_by_link(record: &Record) -> HashMap<String, String> {
    record
        .rotation
        .iter()
        .filter_map(|(staff, _, link)| Some((link.clone()?, staff.clone())))
        .collect()
}

fn client() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()?)
}

/// One visit: the status and, for a redirect, where it points.
async fn visit(
    http: &reqwest::Client,
    world: &World,
    live: &LiveTenant<'_>,
    code: &str,
) -> Result<(u16, Option<String>)> {
    let url = format!("{}/l/{}/{code}", world.api_url, live.tenant.id);
    visit_at(http.get(url)).await
}

/// One visit by `request`: the status and, for a redirect, where it points.
async fn visit_at(request: reqwest::RequestBuilder) -> Result<(u16, Option<String>)> {
    let answer = request.send().await?;
    let location = answer
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .map(str::to_owned);
    Ok((answer.status().as_u16(), location))
}

/// The staff member a redirect goes to, and its channel.
fn landed(by_link: &HashMap<String, String>, location: &str) -> Result<(String, String)> {
    let (link, channel) = location
        .split_once("?customer_channel=")
        .with_context(|| format!("no customer_channel in {location}"))?;
    let staff = by_link
        .get(link)
        .with_context(|| format!("{link} is not a link of the rotation"))?;
    Ok((staff.clone(), channel.to_owned()))
}

async fn put_rotating_code(
    live: &LiveTenant<'_>,
    code: &str,
    family: &str,
    members: &[&str],
    switches: Value,
) -> Result<()> {
    live.world
        .admin()
        .put(
            &format!("/tenants/{}/codes/{code}", live.tenant.id),
            json!({ "family": family, "members": members, "switches": switches }),
        )
        .await?;
    Ok(())
}

async fn pipeline_on(world: &World) -> Result<()> {
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    world
        .set_consumer_enabled("RefreshCodesFunctionName", true)
        .await
}

#[tokio::test]
async fn a_thousand_concurrent_visits_to_a_sequenced_code_fill_its_rounds_exactly() -> Result<()> {
    let world = World::connect().await?;
    pipeline_on(&world).await?;
    let live = LiveTenant::create(&world, 4).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    put_rotating_code(
        &live,
        "seq",
        "sequenced",
        &members,
        json!({"offline_check": true, "round_limit": 2}),
    )
    .await?;
    let before = rotation_of(&world, &live, "seq", &members).await?;
    let by_link = staff_by_link(&before);
    let http = client()?;
    let started = Instant::now();
    let answers: Vec<Result<(u16, Option<String>)>> = futures::stream::iter(0..1000)
        .map(|_| visit(&http, &world, &live, "seq"))
        .buffer_unordered(32)
        .collect()
        .await;
    let took = started.elapsed();
    let mut per_staff: BTreeMap<String, u64> = BTreeMap::new();
    for answer in answers {
        let (status, location) = answer?;
        ensure!(status == 302, "a visit answered {status}");
        let (staff, channel) = landed(&by_link, &location.unwrap_or_default())?;
        ensure!(channel == "seq", "channel {channel}");
        *per_staff.entry(staff).or_default() += 1;
    }
    let after = record(&world, &live, "seq").await?.unwrap_or_default();
    println!(
        "1000 visits in {:.1} s; per member {per_staff:?}; counter {}",
        took.as_secs_f64(),
        after.visits
    );
    // A round is 4 members x 2 = 8 visits: 1,000 visits are 125 whole rounds, 250 each. Any
    // slot given twice or skipped would make some member's count differ.
    let want: BTreeMap<String, u64> = members.iter().map(|m| ((*m).to_owned(), 250)).collect();
    ensure!(per_staff == want, "distribution {per_staff:?}");
    ensure!(after.visits == 1000, "the counter says {}", after.visits);
    Ok(())
}

#[tokio::test]
async fn a_member_taken_offline_mid_burst_gets_no_visit_once_the_record_without_them_landed(
) -> Result<()> {
    let world = World::connect().await?;
    pipeline_on(&world).await?;
    let live = LiveTenant::create(&world, 3).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let leaving = members[1].to_owned();
    put_rotating_code(
        &live,
        "burst",
        "sequenced",
        &members,
        json!({"offline_check": true}),
    )
    .await?;
    let record_before = rotation_of(&world, &live, "burst", &members).await?;
    let by_link = staff_by_link(&record_before);
    let http = client()?;
    // (started, staff) of every visit, filled by 8 visitors while the member goes offline.
    let visits: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let burst = {
        let (visits, stop) = (visits.clone(), stop.clone());
        let http = http.clone();
        let world = &world;
        let live = &live;
        let by_link = &by_link;
        async move {
            futures::stream::iter(0..8)
                .for_each_concurrent(8, |_| {
                    let (visits, stop, http) = (visits.clone(), stop.clone(), http.clone());
                    async move {
                        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                            let started = Instant::now();
                            if let Ok((302, Some(location))) =
                                visit(&http, world, live, "burst").await
                            {
                                if let Ok((staff, _)) = landed(by_link, &location) {
                                    visits.lock().expect("not poisoned").push((started, staff));
                                }
                            }
                        }
                    }
                })
                .await;
        }
    };
    let flip = async {
        // Let the burst run, then take the member offline and watch for the record.
        eventually("the burst reached 60 visits", CONVERGE, || async {
            Ok((visits.lock().expect("not poisoned").len() >= 60).then_some(()))
        })
        .await?;
        live.set_online(&leaving, false).await?;
        let landed_at = eventually("the record without the member", CONVERGE, || async {
            let seen = Instant::now();
            let found = record(&world, &live, "burst").await?;
            // One record, one write: the WeCom list and the rotation change together.
            Ok(found
                .filter(|r| !r.rotation.iter().any(|s| s.0 == leaving))
                .inspect(|r| assert!(!r.users.contains(&leaving), "{r:?}"))
                .map(|_| seen))
        })
        .await?;
        // The record was read after it landed: every visit that starts later is counted on it.
        let after = visits.lock().expect("not poisoned").len();
        eventually("200 visits after the record", CONVERGE, || async {
            Ok((visits.lock().expect("not poisoned").len() >= after + 200).then_some(()))
        })
        .await?;
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        anyhow::Ok(landed_at)
    };
    let (_, landed_at) = tokio::join!(burst, flip);
    let landed_at = landed_at?;
    let visits = visits.lock().expect("not poisoned").clone();
    let before: Vec<&(Instant, String)> = visits.iter().filter(|v| v.0 < landed_at).collect();
    let after: Vec<&(Instant, String)> = visits.iter().filter(|v| v.0 > landed_at).collect();
    let reached_before = before.iter().filter(|v| v.1 == leaving).count();
    let reached_after = after.iter().filter(|v| v.1 == leaving).count();
    println!(
        "{} visits before the record landed ({reached_before} to the leaving member), {} after ({reached_after})",
        before.len(),
        after.len()
    );
    ensure!(
        reached_before > 0,
        "the member had no visit before going offline"
    );
    ensure!(
        reached_after == 0,
        "{reached_after} visits reached the member after the record without them landed"
    );
    Ok(())
}

#[tokio::test]
async fn a_quota_member_stops_at_their_volume_and_adds_through_the_page_count_on_code_and_member(
) -> Result<()> {
    let world = World::connect().await?;
    pipeline_on(&world).await?;
    let live = LiveTenant::create(&world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    put_rotating_code(
        &live,
        "quota",
        "quota",
        &members,
        json!({"offline_check": true, "daily_limit": 3}),
    )
    .await?;
    let first = rotation_of(&world, &live, "quota", &members).await?;
    let by_link = staff_by_link(&first);
    let http = client()?;
    let mut per_staff: BTreeMap<String, u64> = BTreeMap::new();
    let mut full: BTreeSet<String> = BTreeSet::new();
    let mut last_status = 0;
    for n in 0..10 {
        let (status, location) = visit(&http, &world, &live, "quota").await?;
        last_status = status;
        if status != 302 {
            break;
        }
        let location = location.unwrap_or_default();
        let (staff, _) = landed(&by_link, &location)?;
        ensure!(
            !full.contains(&staff),
            "visit {n} reached {staff} past their volume"
        );
        let count = per_staff.entry(staff.clone()).or_default();
        *count += 1;
        let count = *count;
        // The visitor follows the redirect: WeCom adds them to the member, with the channel.
        let opened = world
            .sandbox()
            .post("/_sandbox/open-link", json!({ "url": location }))
            .await?;
        ensure!(
            opened["scan"]["userid"] == json!(staff) && opened["scan"]["state"] == json!("quota"),
            "opened {opened}"
        );
        eventually(
            "the add counted on the code and member",
            CONVERGE,
            || async { Ok((live.adds_counted("quota", &staff).await? == count).then_some(())) },
        )
        .await?;
        if count == 3 {
            full.insert(staff.clone());
            // The last member to fill up leaves the code starved: the starved mark is the
            // record that takes them out of the page.
            eventually("the record without the full member", CONVERGE, || async {
                let found = record(&world, &live, "quota").await?;
                Ok(found
                    .filter(|r| r.starved || !r.rotation.iter().any(|s| s.0 == staff))
                    .map(|_| ()))
            })
            .await?;
        }
    }
    println!("visits per member {per_staff:?}; then {last_status}");
    let want: BTreeMap<String, u64> = members.iter().map(|m| ((*m).to_owned(), 3)).collect();
    ensure!(per_staff == want, "visits per member {per_staff:?}");
    for member in &members {
        ensure!(
            live.adds_counted("quota", member).await? == 3,
            "{member}'s adds"
        );
    }
    // Both at their volume and no fallback: the code is starved, and says so.
    ensure!(
        last_status == 503,
        "after both volumes the page answered {last_status}"
    );
    Ok(())
}

#[tokio::test]
async fn unknown_native_and_malformed_codes_get_their_pages() -> Result<()> {
    let world = World::connect().await?;
    pipeline_on(&world).await?;
    let live = LiveTenant::create(&world, 1).await?;
    let member = live.staff[0].clone();
    let config_id = live.put_code("native", &[&member], None).await?;
    let http = client()?;
    let (unknown, _) = visit(&http, &world, &live, "nope").await?;
    let (native, _) = visit(&http, &world, &live, "native").await?;
    let long = "c".repeat(31);
    let (malformed, _) = visit(&http, &world, &live, &long).await?;
    println!("unknown {unknown}, native {native} ({config_id}), 31-character code {malformed}");
    ensure!(unknown == 404 && native == 404 && malformed == 400);
    Ok(())
}

/// The host and path of the public domain's landing URL for `code` (the stack's
/// `LandingUrlTemplate` output), as a visit to MiniStack's address with that `Host` reaches it.
fn printed_url(world: &World, live: &LiveTenant<'_>, code: &str) -> Result<(String, String)> {
    let printed = world
        .output("LandingUrlTemplate")
        .replace("{tenant}", &live.tenant.id)
        .replace("{code}", code);
    let rest = printed
        .strip_prefix("https://")
        .with_context(|| format!("{printed} is not https"))?;
    let (host, path) = rest
        .split_once('/')
        .with_context(|| format!("{printed} has no path"))?;
    ensure!(
        !host.contains("execute-api"),
        "the printed URL {printed} is on the generated host, not the stack's public domain"
    );
    Ok((host.to_owned(), format!("/{path}")))
}

#[tokio::test]
async fn the_printed_url_on_the_stacks_own_domain_opens_the_same_page_as_the_generated_host(
) -> Result<()> {
    let world = World::connect().await?;
    pipeline_on(&world).await?;
    let live = LiveTenant::create(&world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    put_rotating_code(&live, "printed", "sequenced", &members, json!({})).await?;
    let by_link = staff_by_link(&rotation_of(&world, &live, "printed", &members).await?);
    let (host, path) = printed_url(&world, &live, "printed")?;
    let endpoint = std::env::var("AWS_ENDPOINT_URL").context("AWS_ENDPOINT_URL")?;
    let http = client()?;
    let mut landed_on = BTreeSet::new();
    for _ in 0..members.len() {
        let (status, location) = visit_at(
            http.get(format!("{}{path}", endpoint.trim_end_matches('/')))
                .header(reqwest::header::HOST, &host),
        )
        .await?;
        ensure!(status == 302, "{host}{path} answered {status}");
        landed_on.insert(landed(&by_link, &location.unwrap_or_default())?.0);
    }
    let (generated, _) = visit(&http, &world, &live, "printed").await?;
    println!(
        "{host}{path}: one round reached {landed_on:?}; the generated host answered {generated}"
    );
    // Both visits of the round went through the domain to the page, which took one slot each.
    let want: BTreeSet<String> = members.iter().map(|m| (*m).to_owned()).collect();
    ensure!(landed_on == want, "one round reached {landed_on:?}");
    ensure!(generated == 302);
    let after = record(&world, &live, "printed").await?.unwrap_or_default();
    ensure!(after.visits == 3, "the counter says {}", after.visits);
    Ok(())
}
