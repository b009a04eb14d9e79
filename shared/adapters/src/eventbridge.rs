//! `QuotaNotifier` on an EventBridge bus: one `StaffQuotaReached` event per limit crossing.
//! The template routes it to the target the operator configures.

use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use domain::facts::{QuotaNotifier, StaffQuotaReached};
use domain::StoreError;

pub const SOURCE: &str = "qrsync";
pub const DETAIL_TYPE: &str = "StaffQuotaReached";

pub struct EventBridgeNotifier {
    client: aws_sdk_eventbridge::Client,
    bus_name: String,
}

impl EventBridgeNotifier {
    pub fn new(client: aws_sdk_eventbridge::Client, bus_name: String) -> Self {
        Self { client, bus_name }
    }
}

#[async_trait::async_trait]
impl QuotaNotifier for EventBridgeNotifier {
    #[tracing::instrument(skip_all, fields(id = %event.id))]
    async fn publish(&self, event: &StaffQuotaReached) -> Result<(), StoreError> {
        let unavailable = |e: String| StoreError::new("quota event bus", e);
        let detail = serde_json::to_string(event).map_err(|e| unavailable(e.to_string()))?;
        let entry = PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus_name)
            .source(SOURCE)
            .detail_type(DETAIL_TYPE)
            .detail(detail)
            .build();
        let output = self
            .client
            .put_events()
            .entries(entry)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error().to_string()))?;
        // PutEvents answers 200 with per-entry failures; a failed entry was not published.
        if output.failed_entry_count > 0 {
            let why = output
                .entries()
                .iter()
                .filter_map(|e| e.error_message())
                .collect::<Vec<_>>()
                .join("; ");
            return Err(unavailable(format!("event not accepted: {why}")));
        }
        Ok(())
    }
}
