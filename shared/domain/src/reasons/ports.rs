//! Where reasons and fan-outs are sent.

use super::{FanOut, RefreshReason};
use crate::StoreError;

/// Where refresh reasons go (refresh.fifo, grouped by code).
#[async_trait::async_trait]
pub trait ReasonQueue: Send + Sync {
    async fn send(&self, reason: &RefreshReason) -> Result<(), StoreError>;
    /// A fan-out: every reason, or an error (a retry re-sends them all; the dedupe ids make
    /// that harmless).
    async fn send_all(&self, reasons: &[RefreshReason]) -> Result<(), StoreError> {
        for reason in reasons {
            self.send(reason).await?;
        }
        Ok(())
    }
}

/// Where fan-outs wait to be expanded (a queue the fan-out function consumes).
#[async_trait::async_trait]
pub trait FanOutQueue: Send + Sync {
    async fn send(&self, fan_out: &FanOut) -> Result<(), StoreError>;
    /// Sends `fan_out` to be seen `delay_s` seconds from now (at most 900: SQS's longest
    /// per-message delay), e.g. a paced fan-out's next minute.
    async fn send_after(&self, fan_out: &FanOut, delay_s: u32) -> Result<(), StoreError>;
}
