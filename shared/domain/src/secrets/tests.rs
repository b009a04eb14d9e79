use super::*;
use crate::fakes::FakeKms;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

fn tenant(id: &str) -> TenantId {
    TenantId::parse(id).expect("tenant id")
}

fn envelope(kms: &Arc<FakeKms>, limits: CacheLimits) -> Envelope {
    Envelope::new(kms.clone(), limits)
}

fn every_purpose() -> Arc<FakeKms> {
    Arc::new(FakeKms::holding(&Purpose::ALL))
}

#[tokio::test]
async fn a_sealed_secret_opens_under_its_own_context() {
    let kms = every_purpose();
    let secrets = envelope(&kms, CacheLimits::default());
    let context = SecretContext::tenant(Purpose::CorpSecret, &tenant("acme"));
    let sealed = secrets
        .seal(&context, "s3cr3t-value")
        .await
        .expect("sealed");
    assert!(
        !sealed.windows(12).any(|w| w == b"s3cr3t-value"),
        "the plaintext is not in the sealed form"
    );
    assert_eq!(
        secrets.open(&context, &sealed).await.expect("opened"),
        "s3cr3t-value"
    );
    // A second container (no cache) opens it through the key service.
    let other = envelope(&kms, CacheLimits::default());
    assert_eq!(
        other.open(&context, &sealed).await.expect("opened"),
        "s3cr3t-value"
    );
}

#[tokio::test]
async fn a_secret_sealed_for_one_tenant_does_not_open_for_another() {
    let kms = every_purpose();
    let sealer = envelope(&kms, CacheLimits::default());
    let sealed = sealer
        .seal(
            &SecretContext::tenant(Purpose::CorpSecret, &tenant("acme")),
            "acme-secret",
        )
        .await
        .expect("sealed");
    let other_tenant = SecretContext::tenant(Purpose::CorpSecret, &tenant("globex"));
    // Through the key service (a fresh container) and through the sealer's own cache alike.
    for opener in [envelope(&kms, CacheLimits::default()), sealer] {
        assert!(opener.open(&other_tenant, &sealed).await.is_err());
    }
}

#[tokio::test]
async fn a_secret_sealed_for_one_purpose_does_not_open_as_another() {
    let kms = every_purpose();
    let secrets = envelope(&kms, CacheLimits::default());
    let acme = tenant("acme");
    let sealed = secrets
        .seal(
            &SecretContext::tenant(Purpose::CallbackKeys, &acme),
            "callback-token",
        )
        .await
        .expect("sealed");
    let as_corp_secret = SecretContext::tenant(Purpose::CorpSecret, &acme);
    assert!(secrets.open(&as_corp_secret, &sealed).await.is_err());
}

#[tokio::test]
async fn a_process_without_the_purposes_key_neither_opens_nor_seals_it() {
    let writer = envelope(&every_purpose(), CacheLimits::default());
    let context = SecretContext::tenant(Purpose::CorpSecret, &tenant("acme"));
    let sealed = writer.seal(&context, "acme-secret").await.expect("sealed");
    let tick = envelope(
        &Arc::new(FakeKms::holding(&[Purpose::CallbackKeys])),
        CacheLimits::default(),
    );
    assert!(tick.open(&context, &sealed).await.is_err());
    assert!(tick.seal(&context, "x").await.is_err());
    // Reading a profile for something else, it sees the placeholder, never the secret.
    assert_eq!(
        tick.reveal(&context, &StoredSecret::Sealed(sealed))
            .await
            .expect("revealed"),
        SEALED_PLACEHOLDER
    );
}

#[tokio::test]
async fn a_plaintext_secret_stored_before_sealing_is_still_read() {
    let secrets = envelope(&Arc::new(FakeKms::holding(&[])), CacheLimits::default());
    let context = SecretContext::corp(Purpose::AccessToken, "ww-corp");
    let stored = StoredSecret::Plain("legacy-token".into());
    assert_eq!(
        secrets.reveal(&context, &stored).await.expect("read"),
        "legacy-token"
    );
}

#[tokio::test]
async fn a_tampered_sealed_secret_does_not_open() {
    let secrets = envelope(&every_purpose(), CacheLimits::default());
    let context = SecretContext::corp(Purpose::AccessToken, "ww-corp");
    let mut sealed = secrets.seal(&context, "token").await.expect("sealed");
    let last = sealed.len() - 1;
    sealed[last] ^= 1;
    assert!(secrets.open(&context, &sealed).await.is_err());
    assert!(
        secrets.open(&context, b"token").await.is_err(),
        "plaintext bytes are not a sealed value"
    );
}

#[tokio::test]
async fn a_container_reuses_a_data_key_for_a_bounded_number_of_seals() {
    let kms = every_purpose();
    let limits = CacheLimits {
        entries: 100,
        max_age: Duration::from_secs(600),
        seals_per_key: 3,
    };
    let secrets = envelope(&kms, limits);
    let context = SecretContext::tenant(Purpose::CallbackKeys, &tenant("acme"));
    let mut sealed = Vec::new();
    for i in 0..7 {
        sealed.push(
            secrets
                .seal(&context, &format!("value-{i}"))
                .await
                .expect("sealed"),
        );
    }
    assert_eq!(
        kms.generated.load(Ordering::SeqCst),
        3,
        "7 seals at 3 per key: 3 keys"
    );
    for (i, value) in sealed.iter().enumerate() {
        assert_eq!(
            secrets.open(&context, value).await.expect("opened"),
            format!("value-{i}")
        );
    }
    assert_eq!(
        kms.unwrapped.load(Ordering::SeqCst),
        0,
        "the sealer opens its own keys from its cache"
    );

    let reader = envelope(&kms, limits);
    for value in &sealed {
        reader.open(&context, value).await.expect("opened");
    }
    assert_eq!(
        kms.unwrapped.load(Ordering::SeqCst),
        3,
        "one unwrap per data key, not per value"
    );
}

#[tokio::test]
async fn a_containers_key_cache_holds_at_most_its_bound() {
    let kms = every_purpose();
    let limits = CacheLimits {
        entries: 10,
        max_age: Duration::from_secs(600),
        seals_per_key: 1_000,
    };
    let secrets = envelope(&kms, limits);
    for i in 0..50 {
        let context = SecretContext::tenant(Purpose::CorpSecret, &tenant(&format!("t{i}")));
        secrets.seal(&context, "s").await.expect("sealed");
    }
    let (sealing, opening) = secrets.cached().await;
    assert!(
        sealing <= 10 && opening <= 10,
        "held {sealing} and {opening}"
    );
}

#[tokio::test]
async fn a_data_key_is_dropped_after_its_age() {
    let kms = every_purpose();
    let limits = CacheLimits {
        entries: 10,
        max_age: Duration::from_millis(50),
        seals_per_key: 1_000,
    };
    let secrets = envelope(&kms, limits);
    let context = SecretContext::tenant(Purpose::CorpSecret, &tenant("acme"));
    secrets.seal(&context, "a").await.expect("sealed");
    std::thread::sleep(Duration::from_millis(80));
    secrets.seal(&context, "b").await.expect("sealed");
    assert_eq!(kms.generated.load(Ordering::SeqCst), 2);
}
