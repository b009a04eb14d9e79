//! Translates fan-out queue batches into `domain::fanout::consumer::consume`, where the
//! per-message policy lives (expand, continue, postpone, mark on the last receive, report),
//! with the time left to the invocation's deadline, and its answer into the batch response.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use domain::batch::Received;
use domain::dirty::FanOutMarks;
use domain::fanout::{consumer, CodeIndex, Expander};
use domain::reasons::{FanOutQueue, ReasonQueue};
use lambda_runtime::{Error, LambdaEvent};

/// Time kept back from the deadline: one page of reasons (ten `SendMessageBatch` calls) and
/// the continuation's own send, with room for a slow call.
const RESERVE_MS: u64 = 3_000;

#[tracing::instrument(skip_all, fields(records = event.payload.records.len()))]
pub(crate) async fn handle<I, R, Q, M>(
    expander: &Expander<I, R, Q, M>,
    max_receives: u32,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error>
where
    I: CodeIndex,
    R: ReasonQueue,
    Q: FanOutQueue,
    M: FanOutMarks,
{
    // The deadline and the expansion's marks are on the host's clock: the operator's clock
    // offset does not move Lambda's deadline.
    let left_ms = adapters::clock::consumer_time_left_ms(event.context.deadline, RESERVE_MS);
    let messages: Vec<Received<'_>> = event
        .payload
        .records
        .iter()
        .map(adapters::sqs::received)
        .collect();
    let clock = adapters::clock::host_clock;
    let batch = consumer::consume(expander, max_receives, clock, &messages, left_ms).await;
    let mut response = SqsBatchResponse::default();
    response.set_failures(batch.failures());
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::admin::AdminStore;
    use domain::fakes::{InMemoryQueues, InMemoryStore};
    use domain::ids::TenantId;
    use domain::ids::{CodeId, StaffId};
    use domain::membership::CodeConfig;
    use domain::reasons::Cause;
    use domain::reasons::FanOut;
    use domain::reasons::Source;
    use lambda_runtime::Context;

    fn clock() -> u64 {
        1_788_264_000_000
    }

    /// The fan-out queue's `maxReceiveCount` in these tests.
    const MAX_RECEIVES: u32 = 5;

    fn event(bodies: &[String], deadline: u64) -> LambdaEvent<SqsEvent> {
        received(bodies, 1, deadline)
    }

    /// `bodies`, each on its `receive_count`th receive.
    fn received(bodies: &[String], receive_count: u32, deadline: u64) -> LambdaEvent<SqsEvent> {
        let records = bodies
            .iter()
            .enumerate()
            .map(|(n, body)| {
                serde_json::from_value(serde_json::json!({
                    "messageId": format!("m{n}"),
                    "body": body,
                    "attributes": {"ApproximateReceiveCount": receive_count.to_string()},
                }))
                .expect("an SQS message")
            })
            .collect();
        let mut sqs = SqsEvent::default();
        sqs.records = records;
        let mut context = Context::default();
        context.deadline = deadline;
        LambdaEvent::new(sqs, context)
    }

    /// A tenant with 250 codes, all listing `a`, and the fan-out of `a` going offline.
    async fn world() -> (InMemoryStore, FanOut) {
        let store = InMemoryStore::default();
        let tenant = TenantId::parse("demo").expect("valid");
        let a = StaffId::parse("a").expect("valid");
        for n in 0..250 {
            let config: CodeConfig =
                serde_json::from_value(serde_json::json!({"family": "native", "members": ["a"]}))
                    .expect("a code config");
            let code = CodeId::parse(&format!("c{n:03}")).expect("valid");
            store
                .put_code(&tenant, &code, &config, None, clock())
                .await
                .expect("stored");
        }
        let fan_out = FanOut::new(
            tenant,
            vec![Source::Staff { staff: a }],
            Cause::StaffChanged,
            clock(),
            format!("staff:a:{}", clock()),
        );
        (store, fan_out)
    }

    #[tokio::test]
    async fn a_fan_out_with_time_left_sends_every_code_its_reason() {
        let (store, fan_out) = world().await;
        let reasons = InMemoryQueues::default();
        let continuations = InMemoryQueues::default().expanding_through(store.clone());
        let expander = Expander::new(store.clone(), reasons.clone(), continuations, store);

        let answer = handle(
            &expander,
            MAX_RECEIVES,
            event(&[fan_out.to_json()], adapters::clock::host_clock() + 60_000),
        )
        .await
        .expect("handled");

        assert!(answer.batch_item_failures.is_empty());
        assert_eq!(reasons.reasons().len(), 250);
    }

    #[tokio::test]
    async fn without_time_to_start_a_fan_out_is_queued_again_not_failed() {
        let (store, fan_out) = world().await;
        let reasons = InMemoryQueues::default();
        let later = InMemoryQueues::default();
        let continuations = later.expanding_through(store.clone());
        let expander = Expander::new(store.clone(), reasons.clone(), continuations.clone(), store);

        let answer = handle(
            &expander,
            MAX_RECEIVES,
            event(&[fan_out.to_json()], adapters::clock::host_clock() + 1_000),
        )
        .await
        .expect("handled");

        assert!(answer.batch_item_failures.is_empty());
        assert!(reasons.reasons().is_empty());
        assert_eq!(continuations.fan_outs(), [fan_out]);
        assert_eq!(
            later.reasons().len(),
            250,
            "the queued fan-out reaches every code"
        );
    }

    #[tokio::test]
    async fn the_sample_fan_out_reaches_both_codes_its_staff_member_sits_on() {
        let store = InMemoryStore::default();
        let tenant = TenantId::parse("demo").expect("valid");
        for (code, members) in [
            ("code-1", ["zhangsan", "lisi"]),
            ("code-2", ["lisi", "wangwu"]),
        ] {
            let config: CodeConfig =
                serde_json::from_value(serde_json::json!({"family": "native", "members": members}))
                    .expect("a code config");
            let code = CodeId::parse(code).expect("valid");
            store
                .put_code(&tenant, &code, &config, None, clock())
                .await
                .expect("stored");
        }
        let path = format!(
            "{}/../../events/sqs-fan-out-staff.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let sample: SqsEvent =
            serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
                .expect("an SQS event");
        let reasons = InMemoryQueues::default();
        let expander = Expander::new(
            store.clone(),
            reasons.clone(),
            InMemoryQueues::default().expanding_through(store.clone()),
            store,
        );
        let mut context = Context::default();
        context.deadline = adapters::clock::host_clock() + 60_000;

        let answer = handle(&expander, MAX_RECEIVES, LambdaEvent::new(sample, context))
            .await
            .expect("handled");

        assert!(answer.batch_item_failures.is_empty());
        let codes: Vec<String> = reasons
            .reasons()
            .iter()
            .map(|r| r.code.to_string())
            .collect();
        assert_eq!(codes, ["code-1", "code-2"]);
    }

    #[tokio::test]
    async fn a_message_that_is_not_a_fan_out_is_reported_and_the_others_go_on() {
        let (store, fan_out) = world().await;
        let reasons = InMemoryQueues::default();
        let continuations = InMemoryQueues::default().expanding_through(store.clone());
        let expander = Expander::new(store.clone(), reasons.clone(), continuations, store);

        let answer = handle(
            &expander,
            MAX_RECEIVES,
            event(
                &["{\"not\": 1}".into(), fan_out.to_json()],
                adapters::clock::host_clock() + 60_000,
            ),
        )
        .await
        .expect("handled");

        let failed: Vec<&str> = answer
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(failed, ["m0"]);
        assert_eq!(reasons.reasons().len(), 250);
    }

    #[tokio::test]
    async fn a_fan_out_on_its_last_receive_that_fails_again_stays_marked_for_the_sweep() {
        let (store, fan_out) = world().await;
        let reasons = InMemoryQueues::default();
        reasons.set_unavailable(true);
        let continuations = InMemoryQueues::default();
        let expander = Expander::new(store.clone(), reasons, continuations, store.clone());

        let answer = handle(
            &expander,
            MAX_RECEIVES,
            received(
                &[fan_out.to_json()],
                MAX_RECEIVES,
                adapters::clock::host_clock() + 60_000,
            ),
        )
        .await
        .expect("handled");

        assert_eq!(answer.batch_item_failures.len(), 1, "left to the redrive");
        let mark = store
            .fan_out_mark(&fan_out.tenant, &fan_out.mark_key())
            .expect("marked before it expanded");
        assert_eq!(mark.fan_out, fan_out);
    }

    #[tokio::test]
    async fn a_fan_out_on_its_last_receive_that_completes_clears_its_own_mark() {
        let (store, fan_out) = world().await;
        let reasons = InMemoryQueues::default();
        let continuations = InMemoryQueues::default().expanding_through(store.clone());
        let expander = Expander::new(store.clone(), reasons.clone(), continuations, store.clone());

        let answer = handle(
            &expander,
            MAX_RECEIVES,
            received(
                &[fan_out.to_json()],
                MAX_RECEIVES,
                adapters::clock::host_clock() + 60_000,
            ),
        )
        .await
        .expect("handled");

        assert!(answer.batch_item_failures.is_empty());
        assert_eq!(reasons.reasons().len(), 250);
        assert_eq!(
            store.fan_out_mark(&fan_out.tenant, &fan_out.mark_key()),
            None
        );
    }

    #[tokio::test]
    async fn a_fan_out_before_its_last_receive_is_not_marked() {
        let (store, fan_out) = world().await;
        let reasons = InMemoryQueues::default();
        reasons.set_unavailable(true);
        let expander = Expander::new(
            store.clone(),
            reasons,
            InMemoryQueues::default(),
            store.clone(),
        );

        let answer = handle(
            &expander,
            MAX_RECEIVES,
            received(
                &[fan_out.to_json()],
                MAX_RECEIVES - 1,
                adapters::clock::host_clock() + 60_000,
            ),
        )
        .await
        .expect("handled");

        assert_eq!(answer.batch_item_failures.len(), 1);
        assert_eq!(
            store.fan_out_mark(&fan_out.tenant, &fan_out.mark_key()),
            None
        );
    }
}
