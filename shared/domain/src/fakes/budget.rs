//! The tenants' shared WeCom budget.

use crate::budget::{reopens_in, Spend, WeComBudget, Window};
use crate::tenants::TenantId;
use crate::StoreError;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Default)]
struct Left {
    /// Calls left (unlimited when `None`).
    calls: Option<u32>,
    /// When spent, how long until calls may be made again (the minute's end when `None`).
    retry_after_ms: Option<u64>,
}

/// A budget of calls, unlimited until told otherwise. Clones share it.
#[derive(Clone, Default)]
pub struct FakeBudget {
    left: Arc<Mutex<Left>>,
}

impl FakeBudget {
    fn left(&self) -> MutexGuard<'_, Left> {
        self.left.lock().expect("fake budget lock")
    }

    /// A budget with nothing left, that opens again in `retry_after_ms`.
    pub fn spent_for(retry_after_ms: u64) -> Self {
        let budget = Self::default();
        *budget.left() = Left {
            calls: Some(0),
            retry_after_ms: Some(retry_after_ms),
        };
        budget
    }

    /// `calls` calls left (unlimited when `None`); once spent, the minute's budget is.
    pub fn set_left(&self, calls: Option<u32>) {
        self.left().calls = calls;
    }
}

#[async_trait::async_trait]
impl WeComBudget for FakeBudget {
    async fn spend(&self, _: &TenantId, _: &str, now_ms: u64) -> Result<Spend, StoreError> {
        let mut left = self.left();
        let retry_after_ms = left.retry_after_ms;
        match left.calls.as_mut() {
            Some(0) => Ok(Spend::Exhausted {
                window: Window::Minute,
                retry_after_ms: retry_after_ms
                    .unwrap_or_else(|| reopens_in(Window::Minute, now_ms)),
            }),
            Some(n) => {
                *n -= 1;
                Ok(Spend::Granted)
            }
            None => Ok(Spend::Granted),
        }
    }
}
