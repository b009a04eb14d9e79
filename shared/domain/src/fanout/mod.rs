//! One fact, many codes. A fact about a staff member, a department or a tenant's rules may
//! change the list of every code it reaches, which can be a thousand codes or more. Whoever
//! writes such a fact sends one durable `FanOut` (after the fact, rule 2) and answers; the
//! fan-out function expands it into one refresh reason per code, a page at a time, and hands
//! what it could not send before its deadline to a continuation of itself. So a request never
//! waits on a thousand sends, and no partial failure loses the codes not yet told: an
//! unfinished fan-out is redelivered and resumes after the last code it had sent.
//!
//! A fan-out on its last receive before its queue's own redrive marks itself first
//! (`Expander::mark_given_up`, docs/rules.md rule 11): a timeout or a crash of that receive
//! moves it to the dead-letter queue without any code of ours, and its codes would never hear
//! of the fact. The sweep sends a marked fan-out again; the expansion that completes it
//! (`Expanded::Done`, the last continuation's included) clears the mark if it began after it.
//!
//! A fan-out is paced at its tenant's WeCom budget (`Expander::paced`): one expansion sends at
//! most a minute's budget of reasons and queues the rest to be seen a minute later. A code's
//! recompute spends it when its list changed, as nearly every list does at a shift edge or a
//! tenant-wide change; unpaced, a fan-out that reaches more codes than a minute's budget fills
//! refresh.fifo with reasons the budget refuses, each put off and delivered again once a
//! minute, ahead of every other tenant's. Paced, a fan-out whose codes mostly stay unchanged
//! takes a minute longer per minute's budget of codes than it needed.

pub mod consumer;
mod ports;

pub use ports::CodeIndex;

use crate::dirty::{DirtyWhy, FanOutMarks};
use crate::ids::CodeId;
use crate::reasons::{FanOut, FanOutQueue, ReasonQueue};
use crate::StoreError;
use std::collections::BTreeSet;

/// Reasons sent per step; between steps the expander checks its deadline.
pub const PAGE: usize = 100;

/// How long a paced fan-out's rest waits in the queue: one budget window.
pub const PACE_DELAY_S: u32 = 60;

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
    /// A minute's pace of `reasons` was sent: the rest continues in the fan-out queued after
    /// `sent_through`, visible `PACE_DELAY_S` later.
    Paced {
        reasons: usize,
        sent_through: CodeId,
    },
}

pub struct Expander<I, R, Q, M> {
    index: I,
    reasons: R,
    continuations: Q,
    marks: M,
    /// The most reasons one expansion sends (a minute's budget); unpaced by default.
    pace: usize,
}

impl<I: CodeIndex, R: ReasonQueue, Q: FanOutQueue, M: FanOutMarks> Expander<I, R, Q, M> {
    pub fn new(index: I, reasons: R, continuations: Q, marks: M) -> Self {
        Self {
            index,
            reasons,
            continuations,
            marks,
            pace: usize::MAX,
        }
    }

    /// Sends at most `reasons_per_minute` reasons an expansion, the rest a minute later
    /// (the tenant's WeCom budget a minute: what its recomputes can push in that time).
    pub fn paced(mut self, reasons_per_minute: u32) -> Self {
        self.pace = usize::try_from(reasons_per_minute.max(1)).unwrap_or(usize::MAX);
        self
    }

    /// Records `fan_out` as given up, before an expansion beginning at `began_ms` on its last
    /// receive. The mark is made a millisecond earlier, so that very expansion, if it
    /// completes, clears it: only a fan-out that did not complete stays marked.
    pub async fn mark_given_up(&self, fan_out: &FanOut, began_ms: u64) -> Result<(), StoreError> {
        self.marks
            .mark_fan_out(fan_out, DirtyWhy::LastReceive, began_ms.saturating_sub(1))
            .await?;
        tracing::warn!(tenant = %fan_out.tenant, fact_key = %fan_out.fact_key, "last receive before the fan-out queue's redrive; fan-out marked first");
        Ok(())
    }

    /// Queues the fan-out again unexpanded, for a later invocation: no time was left to start
    /// it (and reporting it failed would count a receive against it).
    pub async fn postpone(&self, fan_out: &FanOut) -> Result<(), StoreError> {
        self.continuations.send(fan_out).await
    }

    /// Sends a reason to every code of the fan-out not sent yet, in code order, `PAGE` at a
    /// time. Before each page `out_of_time` is asked; once it says yes, the rest is queued
    /// as a continuation and the expansion ends. Once the pace is sent, the rest is queued to
    /// be seen `PACE_DELAY_S` later and the expansion ends. A failed send ends it with the
    /// error: the fan-out is redelivered and resends at most the page that failed. Once every
    /// code is sent, the fan-out's mark, if one was made before `began_ms`, is cleared.
    #[tracing::instrument(skip_all, fields(tenant = %fan_out.tenant, fact_key = %fan_out.fact_key))]
    pub async fn expand(
        &self,
        fan_out: &FanOut,
        began_ms: u64,
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
        while sent < pending.len() {
            // Out of time, the rest continues now; past the pace, a minute later.
            let delay_s = if sent > 0 && out_of_time() {
                Some(0)
            } else if sent >= self.pace {
                Some(PACE_DELAY_S)
            } else {
                None
            };
            if let Some(delay_s) = delay_s {
                let last = &pending[sent - 1];
                let rest = fan_out.resumed_after(last);
                if delay_s == 0 {
                    self.continuations.send(&rest).await?;
                } else {
                    self.continuations.send_after(&rest, delay_s).await?;
                }
                tracing::info!(
                    reasons = sent,
                    left = pending.len() - sent,
                    delay_s,
                    "fan-out continued in a new message"
                );
                let (reasons, sent_through) = (sent, last.clone());
                return Ok(if delay_s == 0 {
                    Expanded::Continued {
                        reasons,
                        sent_through,
                    }
                } else {
                    Expanded::Paced {
                        reasons,
                        sent_through,
                    }
                });
            }
            let page = &pending[sent..pending.len().min(sent + PAGE.min(self.pace - sent))];
            let reasons: Vec<_> = fact.reasons(page).collect();
            self.reasons.send_all(&reasons).await?;
            sent += page.len();
        }
        tracing::info!(reasons = sent, "fan-out sent");
        // A mark left behind costs one more expansion when the sweep sends the fan-out again
        // (the single writer finds most lists unchanged); failing the message instead would
        // resend this part's reasons and count a receive against it.
        match self.marks.clear_fan_out(fan_out, began_ms).await {
            Ok(true) => tracing::info!("fan-out's mark cleared"),
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(error = %error, "fan-out's mark not cleared; the sweep sends it again")
            }
        }
        Ok(Expanded::Done { reasons: sent })
    }
}

#[cfg(test)]
mod tests;
