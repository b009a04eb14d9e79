use super::*;
use crate::services::sqs::QueueSample;
use domain::admin::{PutCode, PutStaff, PutTenant};
use domain::ids::{CodeId, TenantId};
use domain::wecom::callback::{write_flat_xml, CallbackEvent, Envelope};
use domain::wecom::crypto::CallbackCrypto;
use serde_json::json;

/// Monday 2026-11-30 08:40 in Shanghai (00:40Z): no shift edge or midnight near.
const START_MS: u64 = 1_796_000_000_000;
const STAFF: usize = 20;
const CODES: usize = 50;
const MEMBERS: usize = 12;

fn tenant() -> TenantId {
    TenantId::parse("t1").expect("tenant")
}

fn staff_id(n: usize) -> String {
    format!("s{n:02}")
}

fn code_id(n: usize) -> CodeId {
    CodeId::parse(&format!("c{n:02}")).expect("code")
}

const CORP_ID: &str = "wx5823bf96d3bd56c7";
const TOKEN: &str = "QDG6eK";
const AES_KEY: &str = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C";

/// A tenant of 20 staff and 50 codes, each code listing 12 of them with the offline check on,
/// created through the admin API (its contact ways on the simulated WeCom).
async fn tenant_with_codes(world: &World<InMemoryStore>) {
    let admin = world.admin().expect("admin");
    let profile = json!({
        "corp_id": CORP_ID,
        "corp_secret": "secret",
        "callback_token": TOKEN,
        "encoding_aes_key": AES_KEY,
        "timezone": "Asia/Shanghai",
    });
    admin
        .put_tenant(PutTenant::parse("t1", &profile.to_string()).expect("body"))
        .await
        .expect("tenant");
    for n in 0..STAFF {
        let body = json!({ "online": true }).to_string();
        admin
            .put_staff(PutStaff::parse("t1", &staff_id(n), &body).expect("body"))
            .await
            .expect("staff");
    }
    for n in 0..CODES {
        let members: Vec<String> = (0..MEMBERS).map(|k| staff_id((n + k) % STAFF)).collect();
        let body = json!({
            "family": "native",
            "members": members,
            "switches": { "offline_check": true },
        });
        admin
            .put_code(PutCode::parse("t1", code_id(n).as_str(), &body.to_string()).expect("body"))
            .await
            .expect("code");
    }
}

/// Every code's list on WeCom, and the recompute of its stored facts now.
async fn lists_and_recomputes(world: &World<InMemoryStore>) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    for n in 0..CODES {
        let snapshot = world
            .store
            .snapshot(&tenant(), &code_id(n), clock::now_ms())
            .await
            .expect("readable")
            .expect("stored");
        let config_id = snapshot.code.config_id.clone().expect("a contact way");
        let recomputed = snapshot
            .recompute()
            .users()
            .map(|users| users.iter().map(ToString::to_string).collect())
            .unwrap_or_default();
        out.push((world.holds(&config_id), recomputed));
    }
    out
}

/// Whether code `n` lists staff member `s`.
fn code_lists(n: usize, s: usize) -> bool {
    (0..MEMBERS).any(|k| (n + k) % STAFF == s)
}

fn empty(sample: &QueueSample) -> bool {
    sample.visible + sample.in_flight + sample.delayed == 0
}

#[tokio::test(start_paused = true)]
async fn a_staff_member_going_offline_leaves_every_list_through_the_simulated_functions() {
    clock::start_at(START_MS);
    let settings = Settings::read_project(&[]).expect("the project's template");
    let mut world = World::build(settings, InMemoryStore::default(), WorldOptions::default())
        .expect("the world builds");
    world.start().expect("started");
    tenant_with_codes(&world).await;
    tokio::time::sleep(Duration::from_secs(120)).await;
    let refresh = world.settings.refresh.function.clone();
    let before = world.account.counters(&refresh).expect("counters");

    let offline = json!({ "online": false }).to_string();
    world
        .admin()
        .expect("admin")
        .put_staff(PutStaff::parse("t1", &staff_id(3), &offline).expect("body"))
        .await
        .expect("staff goes offline");
    tokio::time::sleep(Duration::from_secs(300)).await;

    let lists = lists_and_recomputes(&world).await;
    for (n, (held, recomputed)) in lists.iter().enumerate() {
        assert_eq!(held, recomputed, "code {n}: WeCom holds the recompute");
        assert!(!held.contains(&staff_id(3)), "code {n}: s03 is offline");
        assert_eq!(held.len(), MEMBERS - usize::from(code_lists(n, 3)));
    }
    let after = world.account.counters(&refresh).expect("counters");
    let of_s03 = u64::try_from((0..CODES).filter(|n| code_lists(*n, 3)).count()).expect("small");
    assert_eq!(of_s03, 28);
    assert!(
        after.invocations > before.invocations,
        "the refresh function ran"
    );
    assert!(
        after.messages_deleted >= before.messages_deleted + of_s03,
        "one reason per code of s03"
    );
    assert_eq!((after.timeouts, after.order_violations), (0, 0));
    let fan_out = world
        .account
        .counters(&world.settings.fan_out.function)
        .expect("counters");
    assert!(
        fan_out.invocations >= 1,
        "the fan-out function expanded the change"
    );
    for (queue, sample) in world.sqs.sample() {
        assert!(empty(&sample), "{queue} is empty: {sample:?}");
    }
    world.stop();
}

/// What WeCom posts when `staff` adds a customer through `code`, as the callback function
/// stores it once verified: sealed with the tenant's key, signed with its token.
fn add_callback(code: &CodeId, staff: &str, customer: &str) -> InboxMessage {
    let now_secs = (clock::now_ms() / 1000).to_string();
    let plaintext = write_flat_xml(&[
        ("ToUserName", CORP_ID),
        ("FromUserName", "sys"),
        ("CreateTime", &now_secs),
        ("MsgType", "event"),
        ("Event", "change_external_contact"),
        ("ChangeType", "add_external_contact"),
        ("UserID", staff),
        ("ExternalUserID", customer),
        ("State", code.as_str()),
    ]);
    let crypto = CallbackCrypto::new(TOKEN, AES_KEY, CORP_ID).expect("the tenant's key");
    let encrypt = crypto.encrypt_with_random(&[7; 16], &plaintext);
    let signature = crypto.sign(&now_secs, "nonce", &encrypt);
    let envelope = Envelope {
        to_user_name: CORP_ID.to_owned(),
        agent_id: None,
        encrypt,
    };
    let event = CallbackEvent::parse(&plaintext).expect("an event");
    InboxMessage::new(
        tenant(),
        &event,
        envelope.to_xml(),
        &signature,
        &now_secs,
        "nonce",
        clock::now_ms(),
    )
}

/// The callback's way to the list: WeCom's post persisted by the callback function, recorded
/// by record-facts (the add counted, the daily limit claimed, `StaffQuotaReached` published to
/// the bus's queue), and the code refreshed without the member who reached the limit.
#[tokio::test(start_paused = true)]
async fn an_add_over_the_daily_limit_goes_from_the_callback_through_record_facts_to_the_list() {
    clock::start_at(START_MS);
    let settings = Settings::read_project(&[]).expect("the project's template");
    let mut world = World::build(settings, InMemoryStore::default(), WorldOptions::default())
        .expect("the world builds");
    world.start().expect("started");
    tenant_with_codes(&world).await;
    let limited = json!({ "switches": { "daily_limit": 1 } }).to_string();
    world
        .admin()
        .expect("admin")
        .put_code(PutCode::parse("t1", code_id(0).as_str(), &limited).expect("body"))
        .await
        .expect("code edited");
    tokio::time::sleep(Duration::from_secs(120)).await;
    let refresh = world.settings.refresh.function.clone();
    let before = world.account.counters(&refresh).expect("counters");
    let config_id = world
        .store
        .stored_code(&tenant(), &code_id(0))
        .and_then(|code| code.code.config_id)
        .expect("a contact way");
    assert!(world.holds(&config_id).contains(&staff_id(0)));

    let answer = world
        .deliver_callback(&add_callback(&code_id(0), &staff_id(0), "customer-1"))
        .await;
    assert_eq!(answer, CallbackAnswer::Persisted);
    tokio::time::sleep(Duration::from_secs(120)).await;

    let callback = &world.settings.callback.function;
    assert_eq!(
        world.account.counters(callback).map(|c| c.invocations),
        Ok(1)
    );
    let record_facts = &world.settings.record_facts.function;
    assert_eq!(
        world
            .account
            .counters(record_facts)
            .map(|c| c.messages_deleted),
        Ok(1)
    );
    let counted = world.store.counted();
    assert_eq!(counted.len(), 1);
    assert_eq!(
        (counted[0].code.as_str(), counted[0].staff.as_str()),
        ("c00", "s00")
    );
    assert_eq!(
        world.store.limit_claims().len(),
        1,
        "the daily limit claimed"
    );
    assert_eq!(world.quota_events.put_events(), 1, "one StaffQuotaReached");
    let after = world.account.counters(&refresh).expect("counters");
    assert!(
        after.messages_deleted > before.messages_deleted,
        "the add's reasons were refreshed"
    );
    let held = world.holds(&config_id);
    assert!(
        !held.contains(&staff_id(0)),
        "s00 reached the limit: {held:?}"
    );
    assert_eq!(held.len(), MEMBERS - 1);
    let (held, recomputed) = lists_and_recomputes(&world).await.swap_remove(0);
    assert_eq!(held, recomputed);
    for (queue, sample) in world.sqs.sample() {
        let expected = usize::from(queue == "QuotaNotificationsQueue");
        assert_eq!(sample.visible, expected, "{queue}: {sample:?}");
        assert_eq!(sample.in_flight + sample.delayed, 0, "{queue}: {sample:?}");
    }
    world.stop();
}

/// The offline scenario on a fresh paused runtime: every list WeCom came to hold, with when.
fn lists_landed_in_one_run(seed: u64) -> Vec<crate::observe::Seen> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    runtime.block_on(async {
        clock::start_at(START_MS);
        let landed = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&landed);
        let options = WorldOptions {
            seed,
            trace: Arc::new(Trace::keeping(move |seen| {
                sink.lock().expect("lock").push(seen);
            })),
            ..WorldOptions::default()
        };
        let settings = Settings::read_project(&[]).expect("the project's template");
        let mut world =
            World::build(settings, InMemoryStore::default(), options).expect("the world builds");
        world.start().expect("started");
        tenant_with_codes(&world).await;
        let offline = json!({ "online": false }).to_string();
        world
            .admin()
            .expect("admin")
            .put_staff(PutStaff::parse("t1", &staff_id(3), &offline).expect("body"))
            .await
            .expect("staff goes offline");
        tokio::time::sleep(Duration::from_secs(300)).await;
        world.stop();
        let landed = landed.lock().expect("lock").clone();
        landed
    })
}

#[test]
fn the_same_seed_lands_the_same_lists_at_the_same_moments() {
    let first = lists_landed_in_one_run(7);
    assert!(first.len() >= 28, "the offline member's codes were pushed");
    assert_eq!(first, lists_landed_in_one_run(7));
}
