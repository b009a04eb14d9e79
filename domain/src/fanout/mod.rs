//! One fact, many codes. A fact about a staff member, a department or a tenant's rules may
//! change the list of every code it reaches, which can be a thousand codes or more. Whoever
//! writes such a fact sends one durable `FanOut` (after the fact, rule 2) and answers; the
//! fan-out function expands it into one refresh reason per code, a page at a time, and hands
//! what it could not send before its deadline to a continuation of itself. So a request never
//! waits on a thousand sends, and no partial failure loses the codes not yet told: an
//! unfinished fan-out is redelivered and resumes after the last code it had sent.

mod ports;

pub use ports::CodeIndex;

use crate::membership::CodeId;
use crate::reasons::{FanOut, FanOutQueue, ReasonQueue};
use crate::StoreError;
use std::collections::BTreeSet;

/// Reasons sent per step; between steps the expander checks its deadline.
pub const PAGE: usize = 100;

/// What one expansion did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expanded {
    /// Every code was sent a reason.
    Done { reasons: usize },
    /// Time ran out: `reasons` were sent and the rest continues in the fan-out queued after
    /// `sent_through`.
    Continued {
        reasons: usize,
        sent_through: CodeId,
    },
}

pub struct Expander<I, R, Q> {
    index: I,
    reasons: R,
    continuations: Q,
}

impl<I: CodeIndex, R: ReasonQueue, Q: FanOutQueue> Expander<I, R, Q> {
    pub fn new(index: I, reasons: R, continuations: Q) -> Self {
        Self {
            index,
            reasons,
            continuations,
        }
    }

    /// Queues the fan-out again unexpanded, for a later invocation: no time was left to start
    /// it (and reporting it failed would count a receive against it).
    pub async fn postpone(&self, fan_out: &FanOut) -> Result<(), StoreError> {
        self.continuations.send(fan_out).await
    }

    /// Sends a reason to every code of the fan-out not sent yet, in code order, `PAGE` at a
    /// time. Before each page `out_of_time` is asked; once it says yes, the rest is queued
    /// as a continuation and the expansion ends. A failed send ends it with the error: the
    /// fan-out is redelivered and resends at most the page that failed.
    #[tracing::instrument(skip_all, fields(tenant = %fan_out.tenant, fact_key = %fan_out.fact_key))]
    pub async fn expand(
        &self,
        fan_out: &FanOut,
        out_of_time: impl Fn() -> bool,
    ) -> Result<Expanded, StoreError> {
        let mut codes = BTreeSet::new();
        for source in &fan_out.sources {
            codes.extend(self.index.codes_of(&fan_out.tenant, source).await?);
        }
        let pending: Vec<CodeId> = match &fan_out.sent_through {
            Some(last) => codes.into_iter().filter(|code| code > last).collect(),
            None => codes.into_iter().collect(),
        };
        let fact = fan_out.fact();
        let mut sent = 0;
        for page in pending.chunks(PAGE) {
            if sent > 0 && out_of_time() {
                let last = &pending[sent - 1];
                self.continuations
                    .send(&fan_out.resumed_after(last))
                    .await?;
                tracing::info!(
                    reasons = sent,
                    left = pending.len() - sent,
                    "fan-out continued in a new message"
                );
                return Ok(Expanded::Continued {
                    reasons: sent,
                    sent_through: last.clone(),
                });
            }
            let reasons: Vec<_> = fact.reasons(page).collect();
            self.reasons.send_all(&reasons).await?;
            sent += page.len();
        }
        tracing::info!(reasons = sent, "fan-out sent");
        Ok(Expanded::Done { reasons: sent })
    }
}

#[cfg(test)]
mod tests;
