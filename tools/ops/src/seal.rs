//! `qrsync-ops seal-secrets`: the one-off migration that seals the secrets stored before
//! sealing (docs/deploy-aws.md, "Secrets at rest"). Idempotent (a sealed attribute is left as
//! it is), resumable (`--after` the last tenant printed), and a dry run unless `--apply`.

use crate::ops::{bar, Ops};
use adapters::dynamodb::{DynamoStore, SealedCount};
use adapters::secrets::{key_variable, KmsDataKeys};
use anyhow::{anyhow, Result};
use domain::ids::TenantId;
use domain::secrets::{CacheLimits, Envelope, Purpose};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    /// Seal them; without it, only count the plaintext secrets.
    #[arg(long)]
    apply: bool,
    /// Start after this tenant (the last one a previous run printed).
    #[arg(long)]
    after: Option<String>,
    /// Tenants read per page.
    #[arg(long, default_value_t = 100)]
    page: usize,
}

/// The stack's keys, from its outputs (`CorpSecretKeyArn`...).
fn keys(ops: &Ops) -> Result<BTreeMap<Purpose, String>> {
    Purpose::ALL
        .into_iter()
        .map(|purpose| {
            let output = adapters::secrets::key_output(purpose);
            let arn = ops.output(output).map_err(|e| {
                anyhow!(
                    "{e} (the stack predates sealing? {} unset)",
                    key_variable(purpose)
                )
            })?;
            Ok((purpose, arn.to_owned()))
        })
        .collect()
}

pub async fn run(ops: &Ops, args: Args) -> Result<()> {
    let envelope = Envelope::new(
        Arc::new(KmsDataKeys::new(
            aws_sdk_kms::Client::new(&ops.aws),
            keys(ops)?,
        )),
        CacheLimits::default(),
    );
    let store = DynamoStore::new(ops.dynamodb.clone(), ops.table()?.to_owned())
        .with_secrets(Arc::new(envelope));
    let mut after = args.after;
    let mut total = SealedCount::default();
    let mut tenants_seen = 0usize;
    let progress = bar(0, ops.json);
    progress.set_message(if args.apply {
        "sealing"
    } else {
        "counting (dry run)"
    });
    loop {
        let page = store
            .tenants_after(after.as_deref(), args.page.max(1))
            .await?;
        if page.is_empty() {
            break;
        }
        progress.inc_length(page.len() as u64);
        for id in &page {
            let tenant = TenantId::parse(id).map_err(|e| anyhow!("tenant {id}: {e}"))?;
            let count = store
                .seal_plaintext_secrets(&tenant, !args.apply)
                .await
                .map_err(|e| {
                    anyhow!(
                        "{e} (resume with --after {})",
                        after.as_deref().unwrap_or("")
                    )
                })?;
            total += count;
            tenants_seen += 1;
            after = Some(id.clone());
            progress.inc(1);
        }
        progress.println(format!(
            "done through tenant {}",
            after.as_deref().unwrap_or("")
        ));
    }
    progress.finish_and_clear();
    let verb = if args.apply {
        "sealed"
    } else {
        "to seal (dry run: --apply seals them)"
    };
    if ops.json {
        println!(
            "{}",
            serde_json::json!({
                "tenants": tenants_seen,
                "plaintext": total.plaintext,
                "already_sealed": total.already_sealed,
                "raced": total.raced,
                "applied": args.apply,
                "last_tenant": after,
            })
        );
    } else {
        println!(
            "{tenants_seen} tenants: {} plaintext secrets {verb}, {} already sealed, {} rewritten meanwhile",
            total.plaintext, total.already_sealed, total.raced
        );
    }
    Ok(())
}
