//! Translates refresh.fifo batches into `Refresher::refresh` calls: one recompute per code
//! however many of its reasons the batch holds (MISSION rule 5, coalescing).
//!
//! A code whose refresh fails has all its messages reported for redelivery (they are the
//! rest of its group); other codes carry on. A message that is not a refresh reason is moved
//! to the dead-letter queue as poison.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent};
use shared::batch::PartialBatch;
use shared::ports::DeadLetters;
use shared::refresh::{CodeFacts, ContactWayPusher, Outcome, RefreshReason, Refresher};

/// The reasons of one code in this batch, in arrival order.
struct CodeWork<'a> {
    group: &'a str,
    reason: RefreshReason,
    message_ids: Vec<&'a str>,
    fact_at_ms: Vec<u64>,
}

#[tracing::instrument(skip_all, fields(records = event.payload.records.len()))]
pub(crate) async fn handle<F: CodeFacts, P: ContactWayPusher, D: DeadLetters>(
    refresher: &Refresher<F, P>,
    dead_letters: &D,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let mut batch = PartialBatch::default();
    let mut work: Vec<CodeWork<'_>> = Vec::new();
    for message in &event.payload.records {
        let id = message.message_id.as_deref().unwrap_or_default();
        let group = message
            .attributes
            .get("MessageGroupId")
            .map(String::as_str)
            .unwrap_or_default();
        let body = message.body.as_deref().unwrap_or_default();
        match serde_json::from_str::<RefreshReason>(body) {
            Ok(reason) => match work
                .iter_mut()
                .find(|w| w.reason.tenant == reason.tenant && w.reason.code == reason.code)
            {
                Some(code) => {
                    code.message_ids.push(id);
                    code.fact_at_ms.push(reason.fact_at_ms);
                }
                None => work.push(CodeWork {
                    group,
                    fact_at_ms: vec![reason.fact_at_ms],
                    reason,
                    message_ids: vec![id],
                }),
            },
            Err(error) => {
                let reason = format!("not a refresh reason: {error}");
                batch
                    .park_poison(dead_letters, group, id, body, &reason)
                    .await;
            }
        }
    }
    for code in work {
        let (tenant, code_id) = (&code.reason.tenant, &code.reason.code);
        match refresher.refresh(tenant, code_id, &code.fact_at_ms).await {
            Ok(outcome) => {
                let outcome = match outcome {
                    Outcome::Pushed(users) => format!("pushed {} users", users.len()),
                    other => format!("{other:?}"),
                };
                tracing::info!(tenant = %tenant, code = %code_id, reasons = code.message_ids.len(), outcome, "code refreshed");
            }
            Err(error) => {
                tracing::warn!(tenant = %tenant, code = %code_id, error = %error, "refresh failed; its reasons are redelivered");
                for id in code.message_ids {
                    batch.fail(code.group, id);
                }
            }
        }
    }
    let mut response = SqsBatchResponse::default();
    response.set_failures(batch.failures());
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_runtime::Context;
    use shared::membership::{CodeConfig, CodeId, Family, StaffFacts, StaffId, Switches};
    use shared::ports::StoreError;
    use shared::refresh::{CodeSnapshot, PushRecord, StoredCode};
    use shared::tenants::{TenantId, TenantProfile};
    use shared::wecom::api::{CorpCredentials, WeComError};
    use std::sync::Mutex;

    #[derive(Default)]
    struct Fakes {
        snapshots_read: Mutex<Vec<String>>,
        pushes: Mutex<Vec<(String, Vec<String>)>>,
        failing_config: Option<&'static str>,
        parked: Mutex<Vec<String>>,
    }

    #[async_trait::async_trait]
    impl CodeFacts for &Fakes {
        async fn snapshot(
            &self,
            _: &TenantId,
            code: &CodeId,
            _: u64,
        ) -> Result<Option<CodeSnapshot>, StoreError> {
            self.snapshots_read
                .lock()
                .expect("lock")
                .push(code.to_string());
            let alice = StaffId::parse("alice").expect("valid");
            Ok(Some(CodeSnapshot {
                profile: TenantProfile {
                    corp_id: "corp".into(),
                    callback_token: "t".into(),
                    encoding_aes_key: "k".into(),
                    corp_secret: "s".into(),
                    timezone: Default::default(),
                    company_daily_cap: None,
                },
                code: StoredCode {
                    config: CodeConfig {
                        family: Family::Native,
                        members: vec![alice.clone()],
                        departments: vec![],
                        fallback: vec![],
                        switches: Switches::default(),
                    },
                    config_id: Some(format!("cfg-{code}")),
                    created_with: vec![],
                },
                staff: [(alice, StaffFacts::ACTIVE_ONLINE)].into_iter().collect(),
                adds: Default::default(),
                departments: Default::default(),
                now_ms: 0,
                last_pushed: None,
            }))
        }
        async fn record_push(
            &self,
            _: &TenantId,
            _: &CodeId,
            _: &PushRecord,
        ) -> Result<(), StoreError> {
            Ok(())
        }
        async fn record_starved(&self, _: &TenantId, _: &CodeId, _: u64) -> Result<(), StoreError> {
            Ok(())
        }
    }

    #[async_trait::async_trait]
    impl ContactWayPusher for &Fakes {
        async fn replace_users(
            &self,
            _: &CorpCredentials,
            config_id: &str,
            users: &[String],
        ) -> Result<(), WeComError> {
            if self.failing_config == Some(config_id) {
                return Err(WeComError::Transient {
                    detail: "down".into(),
                });
            }
            self.pushes
                .lock()
                .expect("lock")
                .push((config_id.to_owned(), users.to_vec()));
            Ok(())
        }
    }

    #[async_trait::async_trait]
    impl DeadLetters for &Fakes {
        async fn park(
            &self,
            _: &str,
            id: &str,
            _: &str,
            _: &str,
            _: &str,
        ) -> Result<(), StoreError> {
            self.parked.lock().expect("lock").push(id.to_owned());
            Ok(())
        }
    }

    fn sample() -> LambdaEvent<SqsEvent> {
        let path = format!(
            "{}/../../events/sqs-refresh-three-reasons-two-codes.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let event = serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
            .expect("an SQS event");
        LambdaEvent::new(event, Context::default())
    }

    fn clock() -> u64 {
        1
    }

    #[tokio::test]
    async fn reasons_for_one_code_in_a_batch_give_one_recompute() {
        let fakes = Fakes::default();
        let refresher = Refresher::new(&fakes, &fakes, clock);
        let response = handle(&refresher, &&fakes, sample())
            .await
            .expect("handled");
        assert!(response.batch_item_failures.is_empty());
        assert_eq!(
            *fakes.snapshots_read.lock().expect("lock"),
            ["code-1", "code-2"]
        );
        assert_eq!(fakes.pushes.lock().expect("lock").len(), 2);
    }

    #[tokio::test]
    async fn a_failing_code_reports_all_its_messages_and_the_other_code_is_pushed() {
        let fakes = Fakes {
            failing_config: Some("cfg-code-1"),
            ..Fakes::default()
        };
        let refresher = Refresher::new(&fakes, &fakes, clock);
        let response = handle(&refresher, &&fakes, sample())
            .await
            .expect("handled");
        let failed: Vec<_> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
            .collect();
        assert_eq!(
            failed,
            [
                "7b2e0d3f-0002-4a1b-8c2d-000000000001",
                "7b2e0d3f-0002-4a1b-8c2d-000000000003"
            ]
        );
        assert_eq!(
            *fakes.pushes.lock().expect("lock"),
            [("cfg-code-2".to_owned(), vec!["alice".to_owned()])]
        );
    }
}
