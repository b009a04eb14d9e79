//! The default run's fan-out burst (issue 31): one staff member who sits on every code goes
//! offline, so one admin PUT changes every code's list at once. The bench counts the list
//! changes actually needed (codes whose WeCom list differs from what the new facts route to:
//! N), then polls the sandbox until every code's list is right, with a deadline, and reads the
//! accepted pushes from the sandbox's call log: the first one is the fixed start, the last one
//! the list that made every code right. Issue 31's bound is 1.1 x N / B + 5 s at the deployed
//! budget B a minute.

use crate::report::Burst;
use crate::{now_ms, put_staff, say, Bench, Driven};
use anyhow::{Context, Result};
use std::time::{Duration, Instant};

/// How often the sandbox's lists are read while the burst drains.
const POLL: Duration = Duration::from_secs(2);

impl Bench<'_> {
    pub(crate) async fn burst(&mut self, driven: &mut Driven) -> Result<Burst> {
        let member =
            self.plan.burst_member.clone().context(
                "the burst needs its staff member on every code (the default run's tenant)",
            )?;
        let before = self.lists().await?;
        self.online.insert(member.clone(), false);
        let expected = self.plan.expected(&self.online);
        // A code whose members are all offline starves: WeCom keeps its list, nothing to do.
        let changes = expected
            .iter()
            .filter(|(code, list)| list.as_ref().is_some_and(|l| before.get(code) != Some(l)))
            .count();
        say(format!(
            "burst: {member} goes offline; {changes} of {} codes' lists must change",
            expected.len()
        ));
        let fact_ms = now_ms();
        let (admin_ms, retries) = put_staff(self.admin, &self.id.tenant, &member, false).await?;
        let answered_ms = now_ms();
        driven.rounds += 1;
        driven.changes += 1;
        driven.reasons_sent += self.plan.codes_of(&member);
        driven.admin_ms.push(admin_ms);
        driven.admin_retries += retries;

        let timeout = Duration::from_secs(self.args.burst_timeout_secs);
        let started = Instant::now();
        let mut last_progress = Instant::now();
        let mut polls = 0u32;
        let (seen_converged_ms, left) = loop {
            let lists = self.lists().await?;
            polls += 1;
            let left = expected
                .iter()
                .filter(|(code, list)| list.as_ref().is_some_and(|l| lists.get(code) != Some(l)))
                .count();
            if left == 0 {
                break (Some(now_ms()), 0);
            }
            if started.elapsed() > timeout {
                say(format!(
                    "burst: {left} codes still differ after {} s",
                    timeout.as_secs()
                ));
                break (None, left);
            }
            if last_progress.elapsed() >= Duration::from_secs(20) {
                last_progress = Instant::now();
                say(format!(
                    "burst: {:>4.0} s, {left} of {changes} lists still to change",
                    started.elapsed().as_secs_f64()
                ));
            }
            tokio::time::sleep(POLL).await;
        };
        let until = seen_converged_ms.unwrap_or_else(now_ms);
        let accepted: Vec<u64> = self
            .update_calls(fact_ms, until)
            .await?
            .iter()
            .filter(|c| c.errcode() == Some(0))
            .map(|c| c.at_ms)
            .collect();
        let burst = Burst {
            member,
            fact_ms,
            answered_ms,
            changes,
            codes: expected.len(),
            seen_converged_ms,
            left,
            first_push_ms: accepted.iter().min().copied(),
            last_push_ms: accepted.iter().max().copied(),
            pushes: accepted.len(),
            polls,
        };
        if let Some(secs) = burst.convergence_secs() {
            say(format!(
                "burst: every list right {secs:.1} s after the fact (the last push it needed); bound {:.1} s",
                burst.bound_secs(self.budget.per_minute)
            ));
        }
        Ok(burst)
    }
}
