//! Secrets at rest (docs/design/safety.md, "Secrets at rest"), where MiniStack evaluates IAM
//! (`AUTH=true`) and KMS (the key named by the request or the ciphertext, the encryption
//! context bound to the ciphertext; not `kms:EncryptionContext:` conditions, which is why
//! each purpose has a key of its own): which function's role can open, and seal, each
//! purpose's secrets; the robot's webhook URL in no function's configuration; a plaintext
//! profile from before sealing still served, then sealed by the migration.

use adapters::dynamodb::keys;
use adapters::wecom::{SharedToken, TokenStore};
use anyhow::{Context, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_kms::primitives::Blob;
use domain::ids::TenantId;
use domain::secrets::Purpose;
use integration_tests::{now_secs, TestTenant, World};
use std::collections::HashMap;

/// What a role may do with a purpose's key: (purpose, open, seal).
type Reach = (Purpose, bool, bool);

/// What each function's role may do with each purpose's key.
const ROLES: [(&str, [Reach; 3]); 10] = {
    use Purpose::{AccessToken as T, CallbackKeys as K, CorpSecret as C};
    const NONE: [Reach; 3] = [(C, false, false), (T, false, false), (K, false, false)];
    const WECOM: [Reach; 3] = [(C, true, false), (T, true, true), (K, false, false)];
    const VERIFIES: [Reach; 3] = [(C, false, false), (T, false, false), (K, true, false)];
    [
        ("CallbackFunctionName", VERIFIES),
        ("RecordFactsFunctionName", VERIFIES),
        ("ReplayFunctionName", VERIFIES),
        ("RefreshCodesFunctionName", WECOM),
        ("SweepFunctionName", WECOM),
        (
            "AdminApiFunctionName",
            [(C, true, true), (T, true, true), (K, true, true)],
        ),
        ("FanOutFunctionName", NONE),
        ("ScheduleTickFunctionName", NONE),
        ("LandingPageFunctionName", NONE),
        ("AlarmRobotFunctionName", NONE),
    ]
};

/// The wrapped data key of a sealed attribute (format 1: `QS1`, its length, the key...).
fn wrapped_key(item: &HashMap<String, AttributeValue>, name: &str) -> Result<Vec<u8>> {
    let sealed = item
        .get(name)
        .and_then(|v| v.as_b().ok())
        .with_context(|| format!("{name} is stored sealed (binary)"))?
        .as_ref()
        .to_vec();
    anyhow::ensure!(sealed.starts_with(b"QS1"), "{name} is in format 1");
    let len = usize::from(u16::from_be_bytes([sealed[3], sealed[4]]));
    Ok(sealed[5..5 + len].to_vec())
}

async fn raw_item(world: &World, pk: String, sk: &str) -> Result<HashMap<String, AttributeValue>> {
    world
        .dynamodb
        .get_item()
        .table_name(world.output("TableName"))
        .key(keys::PK, AttributeValue::S(pk))
        .key(keys::SK, AttributeValue::S(sk.to_owned()))
        .consistent_read(true)
        .send()
        .await?
        .item
        .context("the item is there")
}

fn denied<T, E: std::fmt::Debug>(result: &Result<T, aws_sdk_kms::error::SdkError<E>>) -> bool {
    matches!(result, Err(error) if format!("{error:?}").contains("AccessDenied"))
}

#[tokio::test]
async fn each_role_opens_and_seals_only_the_secrets_its_function_uses() -> Result<()> {
    let world = World::connect().await?;
    let tenant = world.new_tenant().await?;
    let id = TenantId::parse(&tenant.id)?;
    let store = world.sealing_store();
    TokenStore::save(
        &store,
        &tenant.corp_id,
        &SharedToken {
            value: "access-token-under-test".into(),
            secret_digest: "d".into(),
            refresh_at_ms: u64::MAX / 2,
            expires_at_ms: u64::MAX / 2,
        },
    )
    .await?;
    let profile = raw_item(&world, keys::home(&id, keys::PROFILE), keys::PROFILE).await?;
    let token = raw_item(
        &world,
        keys::wecom_token(&tenant.corp_id),
        keys::WECOM_TOKEN_SK,
    )
    .await?;
    let keys_of = world.secret_keys();
    let wrapped = [
        (
            Purpose::CorpSecret,
            wrapped_key(&profile, "corp_secret")?,
            ("tenant", tenant.id.clone()),
        ),
        (
            Purpose::AccessToken,
            wrapped_key(&token, "token")?,
            ("corp_id", tenant.corp_id.clone()),
        ),
        (
            Purpose::CallbackKeys,
            wrapped_key(&profile, "callback_token")?,
            ("tenant", tenant.id.clone()),
        ),
    ];

    let mut wrong = Vec::new();
    for (function, purposes) in ROLES {
        let kms = aws_sdk_kms::Client::new(&world.as_role_of(function).await?);
        for (purpose, may_open, may_seal) in purposes {
            let (_, blob, (owner, value)) = wrapped
                .iter()
                .find(|(p, _, _)| *p == purpose)
                .context("every purpose is sealed")?;
            let opened = kms
                .decrypt()
                .key_id(&keys_of[&purpose])
                .ciphertext_blob(Blob::new(blob.clone()))
                .encryption_context("purpose", purpose.name())
                .encryption_context(*owner, value)
                .send()
                .await;
            let sealed = kms
                .generate_data_key()
                .key_id(&keys_of[&purpose])
                .key_spec(aws_sdk_kms::types::DataKeySpec::Aes256)
                .encryption_context("purpose", purpose.name())
                .encryption_context(*owner, value)
                .send()
                .await;
            for (what, allowed, result_denied, ok) in [
                ("open", may_open, denied(&opened), opened.is_ok()),
                ("seal", may_seal, denied(&sealed), sealed.is_ok()),
            ] {
                println!(
                    "{function}: {what} {purpose}: {}",
                    if ok {
                        "allowed"
                    } else if result_denied {
                        "denied"
                    } else {
                        "failed"
                    }
                );
                if allowed != ok || (!allowed && !result_denied) {
                    wrong.push(format!(
                        "{function} {what} {purpose}: expected {}, got {}",
                        if allowed { "allowed" } else { "denied" },
                        if ok {
                            "allowed".to_owned()
                        } else {
                            format!(
                                "{:?}",
                                if what == "open" {
                                    opened.as_ref().err().map(|e| format!("{e:?}"))
                                } else {
                                    sealed.as_ref().err().map(|e| format!("{e:?}"))
                                }
                            )
                        }
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "roles with the wrong permissions: {wrong:#?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_sealed_secret_opens_only_under_its_own_tenants_context() -> Result<()> {
    let world = World::connect().await?;
    let tenant = world.new_tenant().await?;
    let other = world.new_tenant().await?;
    let id = TenantId::parse(&tenant.id)?;
    let profile = raw_item(&world, keys::home(&id, keys::PROFILE), keys::PROFILE).await?;
    for (name, value) in [
        ("corp_secret", &tenant.corp_secret),
        ("callback_token", &tenant.token),
        ("encoding_aes_key", &tenant.aes_key),
    ] {
        let stored = profile.get(name).context("stored")?;
        let bytes = stored
            .as_b()
            .map(|b| b.as_ref().to_vec())
            .unwrap_or_default();
        assert!(
            !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
            "{name} is not in the item in the clear"
        );
    }
    let kms = aws_sdk_kms::Client::new(&world.aws);
    let key = &world.secret_keys()[&Purpose::CorpSecret];
    let blob = wrapped_key(&profile, "corp_secret")?;
    let decrypt = |owner: String| {
        kms.decrypt()
            .key_id(key)
            .ciphertext_blob(Blob::new(blob.clone()))
            .encryption_context("purpose", "corp-secret")
            .encryption_context("tenant", owner)
            .send()
    };
    assert!(
        decrypt(tenant.id.clone()).await.is_ok(),
        "its own context opens it"
    );
    let refused = decrypt(other.id.clone()).await;
    assert!(
        format!("{refused:?}").contains("InvalidCiphertext"),
        "another tenant's context does not: {refused:?}"
    );
    Ok(())
}

#[tokio::test]
async fn the_robot_webhook_url_is_in_no_functions_configuration() -> Result<()> {
    let world = World::connect().await?;
    let secret_arn = world
        .function_environment("AlarmRobotFunctionName")
        .await?
        .get("ALARM_ROBOT_SECRET_ARN")
        .cloned()
        .filter(|arn| !arn.is_empty())
        .context("the local world configures a robot: its secret's ARN is in the environment")?;
    let url = aws_sdk_secretsmanager::Client::new(&world.aws)
        .get_secret_value()
        .secret_id(&secret_arn)
        .send()
        .await?
        .secret_string
        .context("the secret holds the URL")?;
    assert!(
        url.contains("key="),
        "the secret holds the robot's webhook URL"
    );
    let key = url.rsplit("key=").next().unwrap_or(&url).to_owned();
    let mut holding = Vec::new();
    for (function, _) in ROLES {
        let environment = world.function_environment(function).await?;
        if environment
            .values()
            .any(|v| v.contains(&url) || v.contains(&key))
        {
            holding.push(function);
        }
    }
    assert!(
        holding.is_empty(),
        "functions whose configuration holds the robot's key: {holding:?}"
    );
    // Only the functions that post to the robot may read the secret.
    for (function, may_read) in [
        ("AlarmRobotFunctionName", true),
        ("RefreshCodesFunctionName", true),
        ("CallbackFunctionName", false),
        ("AdminApiFunctionName", false),
    ] {
        let read = aws_sdk_secretsmanager::Client::new(&world.as_role_of(function).await?)
            .get_secret_value()
            .secret_id(&secret_arn)
            .send()
            .await;
        assert_eq!(
            read.is_ok(),
            may_read,
            "{function} reading the robot's secret: {read:?}"
        );
    }
    Ok(())
}

/// A URL verification of `tenant` at the callback route: its status.
async fn verify_url(world: &World, tenant: &TestTenant) -> Result<u16> {
    let crypto = tenant.crypto();
    let echostr = crypto.encrypt("7311951207651374302");
    let timestamp = now_secs().to_string();
    let signature = crypto.sign(&timestamp, "n1", &echostr);
    let (status, _) = world
        .get_callback(
            &tenant.id,
            &[
                ("msg_signature", signature.as_str()),
                ("timestamp", timestamp.as_str()),
                ("nonce", "n1"),
                ("echostr", echostr.as_str()),
            ],
        )
        .await?;
    Ok(status)
}

#[tokio::test]
async fn a_plaintext_profile_keeps_working_and_the_migration_seals_it_once() -> Result<()> {
    let world = World::connect().await?;
    // Served as stored before sealing...
    let legacy = TestTenant::random();
    world.register_plaintext(&legacy).await?;
    assert_eq!(
        verify_url(&world, &legacy).await?,
        200,
        "a plaintext profile still verifies"
    );

    // ...and a second one migrated before the callback ever reads it.
    let tenant = TestTenant::random();
    world.register_plaintext(&tenant).await?;
    let id = TenantId::parse(&tenant.id)?;
    let store = world.sealing_store();
    let dry = store.seal_plaintext_secrets(&id, true).await?;
    assert_eq!(
        (dry.plaintext, dry.already_sealed),
        (3, 0),
        "a dry run counts"
    );
    let profile = raw_item(&world, keys::home(&id, keys::PROFILE), keys::PROFILE).await?;
    assert!(
        profile["corp_secret"].as_s().is_ok(),
        "a dry run writes nothing"
    );

    let applied = store.seal_plaintext_secrets(&id, false).await?;
    assert_eq!(
        (applied.plaintext, applied.raced),
        (3, 0),
        "corp secret and both callback keys sealed"
    );
    let profile = raw_item(&world, keys::home(&id, keys::PROFILE), keys::PROFILE).await?;
    for name in ["corp_secret", "callback_token", "encoding_aes_key"] {
        assert!(profile[name].as_b().is_ok(), "{name} is sealed");
    }
    let again = store.seal_plaintext_secrets(&id, false).await?;
    assert_eq!(
        (again.plaintext, again.already_sealed),
        (0, 3),
        "a rerun has nothing left"
    );

    // The callback function opens the sealed keys under its own role.
    assert_eq!(
        verify_url(&world, &tenant).await?,
        200,
        "a sealed profile verifies"
    );
    let read = domain::admin::AdminStore::stored_profile(&store, &id)
        .await?
        .context("the profile")?;
    assert_eq!(read.profile.corp_secret, tenant.corp_secret);
    Ok(())
}
