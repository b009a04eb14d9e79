//! Translates inbox.fifo batches into `FactRecorder::record` calls.
//!
//! Per message: a fact written (or found already written) and its reason sent -> success;
//! a store or queue failure -> reported for redelivery, with the rest of its group (FIFO
//! order); a poison message (unknown tenant, fails verification, unparseable) can never
//! succeed, so it is moved to the dead-letter queue with its class and acknowledged instead
//! of being retried.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use domain::batch::DeadLetters;
use domain::batch::PartialBatch;
use domain::facts::{
    FactLedger, FactOutcome, FactRecorder, FactsError, QuotaNotifier, TenantProfiles,
};
use domain::intake::InboxMessage;
use domain::reasons::ReasonQueue;
use lambda_runtime::{Error, LambdaEvent};

fn attribute<'a>(message: &'a SqsMessage, name: &str) -> &'a str {
    message
        .attributes
        .get(name)
        .map(String::as_str)
        .unwrap_or_default()
}

#[tracing::instrument(skip_all, fields(records = event.payload.records.len()))]
pub(crate) async fn handle<T, L, Q, N, D>(
    recorder: &FactRecorder<T, L, Q, N>,
    dead_letters: &D,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error>
where
    T: TenantProfiles,
    L: FactLedger,
    Q: ReasonQueue,
    N: QuotaNotifier,
    D: DeadLetters,
{
    let mut batch = PartialBatch::default();
    for message in &event.payload.records {
        let id = message.message_id.as_deref().unwrap_or_default();
        let group = attribute(message, "MessageGroupId");
        if batch.group_failed(group) {
            batch.fail(group, id);
            continue;
        }
        let body = message.body.as_deref().unwrap_or_default();
        let outcome = match serde_json::from_str::<InboxMessage>(body) {
            Ok(inbox) => recorder.record(&inbox).await,
            Err(error) => Err(FactsError::Poison(format!("not an inbox message: {error}"))),
        };
        match outcome {
            Ok(FactOutcome::Add {
                fact,
                outcome,
                crossings,
            }) => {
                tracing::info!(message_id = id, tenant = %fact.tenant, code = %fact.code, staff = %fact.staff, ?outcome, crossings = crossings.len(), "add recorded");
            }
            Ok(FactOutcome::StaffChanged { kind, codes }) => {
                tracing::info!(message_id = id, kind, codes, "contact change recorded")
            }
            Ok(FactOutcome::Ignored { kind }) => {
                tracing::info!(message_id = id, kind, "event acknowledged")
            }
            Err(FactsError::Poison(reason)) => {
                batch
                    .park_poison(dead_letters, group, id, body, &reason)
                    .await;
            }
            Err(FactsError::Store(error)) => {
                tracing::warn!(message_id = id, group, error = ?error, "fact not written; redelivered later");
                batch.fail(group, id);
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
    use domain::facts::{
        AddFact, AddLedger, ClaimOutcome, CountOutcome, LimitClaim, QuotaLedger, StaffLedger,
        StaffQuotaReached,
    };
    use domain::membership::{AddCounts, CodeId, DepartmentId, Employment, StaffId, Switches};
    use domain::reasons::RefreshReason;
    use domain::tenants::{TenantId, TenantProfile};
    use domain::wecom::reference_vectors::V1;
    use domain::StoreError;
    use lambda_runtime::Context;
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Fakes {
        counted: Mutex<Vec<AddFact>>,
        reasons: Mutex<Vec<RefreshReason>>,
        parked: Mutex<Vec<(String, String)>>,
    }

    #[async_trait::async_trait]
    impl TenantProfiles for &Fakes {
        async fn profile(&self, tenant: &TenantId) -> Result<Option<TenantProfile>, StoreError> {
            Ok((tenant.as_str() == "demo").then(|| TenantProfile {
                corp_id: V1.corp_id.into(),
                callback_token: V1.token.into(),
                encoding_aes_key: V1.encoding_aes_key.into(),
                corp_secret: "s".into(),
                timezone: Default::default(),
                company_daily_cap: None,
            }))
        }
    }

    #[async_trait::async_trait]
    impl AddLedger for &Fakes {
        async fn count_add(&self, add: &AddFact, now_ms: u64) -> Result<CountOutcome, StoreError> {
            self.counted.lock().expect("lock").push(add.clone());
            Ok(CountOutcome::Counted { at_ms: now_ms })
        }
        async fn record_ignored(&self, _: &TenantId, _: &str) -> Result<(), StoreError> {
            Ok(())
        }
    }

    #[async_trait::async_trait]
    impl ReasonQueue for &Fakes {
        async fn send(&self, reason: &RefreshReason) -> Result<(), StoreError> {
            self.reasons.lock().expect("lock").push(reason.clone());
            Ok(())
        }
    }

    /// The sample batch names a code without limits and no contact changes.
    #[async_trait::async_trait]
    impl QuotaLedger for &Fakes {
        async fn code_switches(
            &self,
            _: &TenantId,
            _: &CodeId,
        ) -> Result<Option<Switches>, StoreError> {
            Ok(Some(Switches::default()))
        }
        async fn counts(
            &self,
            _: &TenantId,
            _: &CodeId,
            _: &StaffId,
            _: &str,
        ) -> Result<AddCounts, StoreError> {
            Ok(AddCounts::default())
        }
        async fn claim_limit(&self, _: &LimitClaim) -> Result<ClaimOutcome, StoreError> {
            Ok(ClaimOutcome::TakenByAnother)
        }
        async fn mark_notified(&self, _: &LimitClaim, _: usize) -> Result<(), StoreError> {
            Ok(())
        }
    }

    #[async_trait::async_trait]
    impl QuotaNotifier for &Fakes {
        async fn publish(&self, _: &StaffQuotaReached) -> Result<(), StoreError> {
            Ok(())
        }
    }

    #[async_trait::async_trait]
    impl StaffLedger for &Fakes {
        async fn set_employment(
            &self,
            _: &TenantId,
            _: &StaffId,
            _: Employment,
            _: u64,
        ) -> Result<bool, StoreError> {
            Ok(true)
        }
        async fn rename_staff(
            &self,
            _: &TenantId,
            _: &StaffId,
            _: &StaffId,
            _: u64,
        ) -> Result<Vec<CodeId>, StoreError> {
            Ok(Vec::new())
        }
        async fn set_staff_departments(
            &self,
            _: &TenantId,
            _: &StaffId,
            _: &BTreeSet<DepartmentId>,
            _: u64,
        ) -> Result<Vec<DepartmentId>, StoreError> {
            Ok(Vec::new())
        }
        async fn set_department_members(
            &self,
            _: &TenantId,
            _: &DepartmentId,
            _: &BTreeSet<StaffId>,
            _: u64,
        ) -> Result<Vec<StaffId>, StoreError> {
            Ok(Vec::new())
        }
        async fn codes_of_staff(
            &self,
            _: &TenantId,
            _: &StaffId,
        ) -> Result<Vec<CodeId>, StoreError> {
            Ok(Vec::new())
        }
        async fn codes_listing_department(
            &self,
            _: &TenantId,
            _: &DepartmentId,
        ) -> Result<Vec<CodeId>, StoreError> {
            Ok(Vec::new())
        }
    }

    #[async_trait::async_trait]
    impl DeadLetters for &Fakes {
        async fn park(
            &self,
            _: &str,
            id: &str,
            _: &str,
            class: &str,
            _: &str,
        ) -> Result<(), StoreError> {
            self.parked
                .lock()
                .expect("lock")
                .push((id.to_owned(), class.to_owned()));
            Ok(())
        }
    }

    fn clock() -> u64 {
        7
    }

    #[tokio::test]
    async fn the_add_is_counted_and_the_poison_message_is_parked_not_retried() {
        let path = format!(
            "{}/../../events/sqs-inbox-add-and-poison.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let event = serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
            .expect("an SQS event");
        let fakes = Fakes::default();
        let recorder = FactRecorder::new(&fakes, &fakes, &fakes, &fakes, clock);

        let response = handle(
            &recorder,
            &&fakes,
            LambdaEvent::new(event, Context::default()),
        )
        .await
        .expect("handled");

        assert!(
            response.batch_item_failures.is_empty(),
            "nothing is left for redelivery"
        );
        let counted = fakes.counted.lock().expect("lock");
        assert_eq!(
            (
                counted.len(),
                counted[0].code.as_str(),
                counted[0].staff.as_str()
            ),
            (1, "code-1", "zhangsan")
        );
        assert_eq!(fakes.reasons.lock().expect("lock").len(), 1);
        assert_eq!(
            *fakes.parked.lock().expect("lock"),
            [(
                "9a1f0c2e-0001-4c7e-9d3b-000000000002".to_owned(),
                "poison".to_owned()
            )]
        );
    }
}
