use super::*;
use crate::fakes::{InMemoryCallbackSettings, InMemoryInbox};
use crate::wecom::callback::write_flat_xml;
use crate::wecom::crypto::CallbackCrypto;

const TOKEN: &str = "QDG6eK";
const KEY: &str = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C";
const CORP: &str = "wx5823bf96d3bd56c7";
const NOW: u64 = 1_700_000_000;

fn intake() -> (
    Intake<InMemoryCallbackSettings, InMemoryInbox>,
    InMemoryInbox,
) {
    let tenants = InMemoryCallbackSettings::default();
    tenants.insert(
        TenantId::parse("acme").expect("valid"),
        CallbackSettings {
            corp_id: CORP.into(),
            callback_token: TOKEN.into(),
            encoding_aes_key: KEY.into(),
            previous: None,
        },
    );
    let inbox = InMemoryInbox::default();
    (Intake::new(tenants, inbox.clone(), 300), inbox)
}

fn crypto() -> CallbackCrypto {
    CallbackCrypto::new(TOKEN, KEY, CORP).expect("valid")
}

fn add_event(external: &str) -> String {
    write_flat_xml(&[
        ("ToUserName", CORP),
        ("FromUserName", "sys"),
        ("CreateTime", "1700000000"),
        ("MsgType", "event"),
        ("Event", "change_external_contact"),
        ("ChangeType", "add_external_contact"),
        ("UserID", "zhangsan"),
        ("ExternalUserID", external),
        ("State", "code-1"),
    ])
}

fn post(plaintext: &str, timestamp: u64) -> CallbackRequest {
    let crypto = crypto();
    let encrypt = crypto.encrypt(plaintext);
    let timestamp = timestamp.to_string();
    let signature = crypto.sign(&timestamp, "nonce1", &encrypt);
    let body = Envelope {
        to_user_name: CORP.into(),
        agent_id: None,
        encrypt,
    }
    .to_xml();
    CallbackRequest {
        tenant: "acme".into(),
        query: HashMap::from([
            ("msg_signature".into(), signature),
            ("timestamp".into(), timestamp),
            ("nonce".into(), "nonce1".into()),
        ]),
        body,
    }
}

#[tokio::test]
async fn a_verified_event_is_persisted_with_its_code_as_group() {
    let (intake, inbox) = intake();
    let stored = intake
        .accept_event(&post(&add_event("wm1"), NOW), NOW * 1000)
        .await
        .expect("accepted");
    assert_eq!(stored.group_id(), "acme#code#code-1");
    assert_eq!(inbox.messages().len(), 1);
}

#[tokio::test]
async fn the_same_event_posted_twice_is_stored_once() {
    let (intake, inbox) = intake();
    for _ in 0..2 {
        intake
            .accept_event(&post(&add_event("wm1"), NOW), NOW * 1000)
            .await
            .expect("accepted");
    }
    intake
        .accept_event(&post(&add_event("wm2"), NOW), NOW * 1000)
        .await
        .expect("accepted");
    assert_eq!(inbox.messages().len(), 2);
}

#[tokio::test]
async fn a_tampered_signature_is_refused_and_nothing_is_stored() {
    let (intake, inbox) = intake();
    let mut request = post(&add_event("wm1"), NOW);
    request.query.insert("msg_signature".into(), "0".repeat(40));
    let error = intake.accept_event(&request, NOW * 1000).await.unwrap_err();
    assert!(matches!(
        error,
        IntakeError::Crypto(CryptoError::BadSignature)
    ));
    assert!(error.is_client_error());
    assert!(inbox.messages().is_empty());
}

#[tokio::test]
async fn an_old_timestamp_is_refused() {
    let (intake, inbox) = intake();
    let error = intake
        .accept_event(&post(&add_event("wm1"), NOW - 301), NOW * 1000)
        .await
        .unwrap_err();
    assert!(matches!(error, IntakeError::StaleTimestamp { .. }));
    assert!(inbox.messages().is_empty());
}

#[tokio::test]
async fn an_envelope_for_another_corp_is_refused() {
    let (intake, inbox) = intake();
    let mut request = post(&add_event("wm1"), NOW);
    request.body = request.body.replace(CORP, "another-corp");
    let error = intake.accept_event(&request, NOW * 1000).await.unwrap_err();
    assert!(matches!(error, IntakeError::WrongReceiverCorp));
    assert!(inbox.messages().is_empty());
}

#[tokio::test]
async fn when_the_inbox_is_down_the_error_is_retryable() {
    let (intake, inbox) = intake();
    inbox.set_unavailable(true);
    let error = intake
        .accept_event(&post(&add_event("wm1"), NOW), NOW * 1000)
        .await
        .unwrap_err();
    assert!(!error.is_client_error());
}

#[tokio::test]
async fn url_verification_returns_the_decrypted_echostr() {
    let (intake, _) = intake();
    let crypto = crypto();
    let echostr = crypto.encrypt("4242");
    let signature = crypto.sign("1700000000", "n", &echostr);
    let request = CallbackRequest {
        tenant: "acme".into(),
        query: HashMap::from([
            ("msg_signature".into(), signature),
            ("timestamp".into(), "1700000000".into()),
            ("nonce".into(), "n".into()),
            // As a raw '+' arrives when the sender did not percent-encode it.
            ("echostr".into(), echostr.replace('+', " ")),
        ]),
        body: String::new(),
    };
    assert_eq!(
        intake
            .verify_url(&request, NOW * 1000)
            .await
            .expect("verified"),
        "4242"
    );
}

#[tokio::test]
async fn an_unknown_tenant_is_a_client_error() {
    let (intake, _) = intake();
    let mut request = post(&add_event("wm1"), NOW);
    request.tenant = "nobody".into();
    let error = intake.accept_event(&request, NOW * 1000).await.unwrap_err();
    assert!(matches!(error, IntakeError::UnknownTenant(_)));
}

#[tokio::test]
async fn an_oversized_body_is_refused_before_the_tenant_is_read_and_nothing_is_stored() {
    let tenants = InMemoryCallbackSettings::default();
    let inbox = InMemoryInbox::default();
    let intake = Intake::new(tenants.clone(), inbox.clone(), 300);
    let mut request = post(&add_event("wm1"), NOW);
    request.body = format!("{}{}", request.body, " ".repeat(MAX_BODY_BYTES));
    let error = intake.accept_event(&request, NOW * 1000).await.unwrap_err();
    assert!(matches!(error, IntakeError::TooLarge { .. }), "{error:?}");
    assert_eq!(crate::http::ErrorAnswer::from(&error).status, 413);
    assert_eq!(tenants.reads(), 0);
    assert!(inbox.messages().is_empty());
}

#[tokio::test]
async fn an_oversized_parameter_is_refused() {
    let (intake, inbox) = intake();
    let mut request = post(&add_event("wm1"), NOW);
    request
        .query
        .insert("nonce".into(), "n".repeat(MAX_PARAMETER_BYTES + 1));
    let error = intake.accept_event(&request, NOW * 1000).await.unwrap_err();
    assert!(matches!(error, IntakeError::OversizedParameter("nonce")));
    assert!(inbox.messages().is_empty());
}

#[tokio::test]
async fn an_unknown_tenant_and_a_bad_signature_get_the_same_answer_word_for_word() {
    let (intake, _) = intake();
    let mut unknown = post(&add_event("wm1"), NOW);
    unknown.tenant = "nobody".into();
    let mut malformed = post(&add_event("wm1"), NOW);
    malformed.tenant = "no#body".into();
    let mut forged = post(&add_event("wm1"), NOW);
    forged.query.insert("msg_signature".into(), "0".repeat(40));
    let mut answers = Vec::new();
    for request in [unknown, malformed, forged] {
        let error = intake.accept_event(&request, NOW * 1000).await.unwrap_err();
        answers.push(crate::http::ErrorAnswer::from(&error));
    }
    assert_eq!(answers[0].status, 401);
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
}

#[tokio::test]
async fn a_stale_callback_is_refused_alike_for_known_and_unknown_tenants() {
    let (intake, _) = intake();
    let known = post(&add_event("wm1"), NOW - 301);
    let mut unknown = post(&add_event("wm1"), NOW - 301);
    unknown.tenant = "nobody".into();
    for request in [known, unknown] {
        let error = intake.accept_event(&request, NOW * 1000).await.unwrap_err();
        assert!(
            matches!(error, IntakeError::StaleTimestamp { .. }),
            "{error:?}"
        );
    }
}

#[test]
fn a_codes_message_group_names_its_tenant_and_code_and_no_other_group_does() {
    use crate::ids::CodeId;
    let tenant = TenantId::parse("t1").expect("valid");
    let group = MessageGroup::Code {
        tenant: tenant.clone(),
        code: "welcome".into(),
    };
    assert_eq!(
        MessageGroup::code_of(&group.id()),
        Some((tenant.clone(), CodeId::parse("welcome").expect("valid")))
    );
    let staff = MessageGroup::Staff {
        tenant: tenant.clone(),
        user_id: "alice".into(),
    };
    assert_eq!(MessageGroup::code_of(&staff.id()), None);
    assert_eq!(
        MessageGroup::code_of(&MessageGroup::Tenant(tenant).id()),
        None
    );
    let hashed = MessageGroup::Code {
        tenant: TenantId::parse("t1").expect("valid"),
        code: "优惠".into(),
    };
    assert_eq!(
        MessageGroup::code_of(&hashed.id()),
        None,
        "only its hash is there"
    );
}

/// The tenant `acme` after its keys were rotated from (`TOKEN`, `KEY`) at `NOW`, with an
/// overlap of an hour at the route.
fn rotated_intake() -> (
    Intake<InMemoryCallbackSettings, InMemoryInbox>,
    InMemoryInbox,
) {
    let tenants = InMemoryCallbackSettings::default();
    tenants.insert(
        TenantId::parse("acme").expect("valid"),
        CallbackSettings {
            corp_id: CORP.into(),
            callback_token: "newtoken".into(),
            encoding_aes_key: "N".repeat(43),
            previous: Some(crate::tenants::PreviousCallbackKeys {
                callback_token: TOKEN.into(),
                encoding_aes_key: KEY.into(),
                replaced_at_ms: NOW * 1000,
            }),
        },
    );
    let inbox = InMemoryInbox::default();
    let intake = Intake::new(tenants, inbox.clone(), u64::MAX / 2).with_key_overlap(3_600_000);
    (intake, inbox)
}

#[tokio::test]
async fn a_callback_signed_with_the_replaced_keys_is_stored_within_the_overlap() {
    let (intake, inbox) = rotated_intake();
    intake
        .accept_event(&post(&add_event("wm1"), NOW), NOW * 1000 + 3_599_999)
        .await
        .expect("the previous keys verify within the overlap");
    assert_eq!(inbox.messages().len(), 1);
}

#[tokio::test]
async fn a_callback_signed_with_the_replaced_keys_is_refused_after_the_overlap() {
    let (intake, inbox) = rotated_intake();
    let error = intake
        .accept_event(&post(&add_event("wm1"), NOW), NOW * 1000 + 3_600_000)
        .await
        .unwrap_err();
    assert!(error.is_unauthenticated(), "{error:?}");
    assert!(inbox.messages().is_empty());
}

#[tokio::test]
async fn a_url_verification_signed_with_the_replaced_keys_passes_within_the_overlap_only() {
    let (intake, _) = rotated_intake();
    let echostr = crypto().encrypt("4242");
    let request = CallbackRequest {
        tenant: "acme".into(),
        query: HashMap::from([
            (
                "msg_signature".into(),
                crypto().sign("1700000000", "n", &echostr),
            ),
            ("timestamp".into(), "1700000000".into()),
            ("nonce".into(), "n".into()),
            ("echostr".into(), echostr),
        ]),
        body: String::new(),
    };
    assert_eq!(
        intake
            .verify_url(&request, NOW * 1000 + 60_000)
            .await
            .expect("verified"),
        "4242"
    );
    assert!(intake
        .verify_url(&request, NOW * 1000 + 3_600_000)
        .await
        .unwrap_err()
        .is_unauthenticated());
}
