//! The WeCom sandbox steps the demo takes (campaigns, scans, its clock, directory changes),
//! on top of the shared control client (`stack_client::sandbox`).

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::{json, Value};
use stack_client::sandbox::SandboxControl;
pub use stack_client::sandbox::{Call, ContactWay};
use std::time::Duration;

pub struct Sandbox(SandboxControl);

impl std::ops::Deref for Sandbox {
    type Target = SandboxControl;

    fn deref(&self) -> &SandboxControl {
        &self.0
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Stats {
    pub api_calls: u64,
    pub rate_limited: u64,
    pub scans: u64,
    pub unroutable_scans: u64,
    pub callbacks: u64,
    pub callbacks_delivered: u64,
    pub failures: u64,
    pub attempts: u64,
    pub retried_attempts: u64,
    pub duplicates: u64,
}

impl Stats {
    /// What happened between `before` and `self`.
    pub fn since(&self, before: &Stats) -> Stats {
        Stats {
            api_calls: self.api_calls.saturating_sub(before.api_calls),
            rate_limited: self.rate_limited.saturating_sub(before.rate_limited),
            scans: self.scans.saturating_sub(before.scans),
            unroutable_scans: self
                .unroutable_scans
                .saturating_sub(before.unroutable_scans),
            callbacks: self.callbacks.saturating_sub(before.callbacks),
            callbacks_delivered: self
                .callbacks_delivered
                .saturating_sub(before.callbacks_delivered),
            failures: self.failures.saturating_sub(before.failures),
            attempts: self.attempts.saturating_sub(before.attempts),
            retried_attempts: self
                .retried_attempts
                .saturating_sub(before.retried_attempts),
            duplicates: self.duplicates.saturating_sub(before.duplicates),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Campaign {
    pub total: u64,
    pub started: u64,
    pub done: u64,
    pub failures: u64,
    pub unroutable: u64,
    pub duplicates: u64,
    pub running: bool,
    pub started_at_ms: u64,
    pub finished_at_ms: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Delivery {
    pub delivered: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Scan {
    pub seq: u64,
    pub at_ms: u64,
    pub config_id: String,
    pub state: String,
    pub userid: Option<String>,
    pub external_userid: Option<String>,
    pub delivery: Option<Delivery>,
}

/// The callback the sandbox delivers a corp's events to.
pub struct Callback<'a> {
    pub url: &'a str,
    pub token: &'a str,
    pub encoding_aes_key: &'a str,
}

impl Sandbox {
    pub fn new(base: &str) -> Result<Self> {
        Ok(Self(SandboxControl::new(base, Duration::from_secs(60))?))
    }

    /// The pause between delivery attempts, and the seed of the sandbox's random streams
    /// (which code a campaign scan picks, which member WeCom routes to).
    pub async fn set_delivery(&self, retry_pause_ms: u64, seed: u64) -> Result<()> {
        self.0
            .configure(json!({ "retry_pause_ms": retry_pause_ms, "seed": seed }))
            .await
    }

    pub async fn put_corp(
        &self,
        corp_id: &str,
        corp_secret: &str,
        users: &[String],
        callback: &Callback<'_>,
    ) -> Result<()> {
        let body = json!({
            "corp_secret": corp_secret,
            "users": users,
            "callback": {
                "url": callback.url,
                "token": callback.token,
                "encoding_aes_key": callback.encoding_aes_key,
            },
        });
        self.0.put_corp(corp_id, body).await
    }

    pub async fn stats(&self) -> Result<Stats> {
        self.call(reqwest::Method::GET, "/_sandbox/stats", None)
            .await
    }

    pub async fn start_campaign(
        &self,
        corp_id: &str,
        config_ids: &[String],
        scans: u64,
        per_second: f64,
        duplicate_fraction: f64,
    ) -> Result<u64> {
        let body = json!({
            "corp_id": corp_id,
            "config_ids": config_ids,
            "scans": scans,
            "per_second": per_second,
            "duplicate_fraction": duplicate_fraction,
        });
        let answer: Value = self
            .call(reqwest::Method::POST, "/_sandbox/campaigns", Some(body))
            .await?;
        answer
            .get("campaign_id")
            .and_then(Value::as_u64)
            .with_context(|| format!("campaign answer without an id: {answer}"))
    }

    pub async fn campaign(&self, campaign_id: u64) -> Result<Campaign> {
        self.call(
            reqwest::Method::GET,
            &format!("/_sandbox/campaigns/{campaign_id}"),
            None,
        )
        .await
    }

    pub async fn stop_campaign(&self, campaign_id: u64) -> Result<()> {
        let _: Value = self
            .call(
                reqwest::Method::DELETE,
                &format!("/_sandbox/campaigns/{campaign_id}"),
                None,
            )
            .await?;
        Ok(())
    }

    pub async fn scans(&self, corp_id: &str) -> Result<Vec<Scan>> {
        #[derive(Deserialize)]
        struct Page {
            scans: Vec<Scan>,
        }
        let page: Page = self
            .call(
                reqwest::Method::GET,
                &format!("/_sandbox/scans?corp_id={corp_id}"),
                None,
            )
            .await?;
        Ok(page.scans)
    }

    /// The sandbox's clock now (WeCom's time: callbacks are signed and dated with it).
    pub async fn now_ms(&self) -> Result<u64> {
        let clock: Value = self
            .call(reqwest::Method::GET, "/_sandbox/clock", None)
            .await?;
        clock
            .get("now_ms")
            .and_then(Value::as_u64)
            .with_context(|| format!("sandbox clock without now_ms: {clock}"))
    }

    /// Moves the sandbox's clock by `delta_ms` (negative: back).
    pub async fn advance_clock(&self, delta_ms: i64) -> Result<()> {
        let _: Value = self
            .call(
                reqwest::Method::PUT,
                "/_sandbox/clock",
                Some(json!({ "advance_ms": delta_ms })),
            )
            .await?;
        Ok(())
    }

    /// Delivers any callback event, WeCom-style (encrypted, signed, retried), with these
    /// fields after the envelope's (`ToUserName`, `FromUserName`, `CreateTime` = the sandbox's
    /// now, `MsgType`). True when a copy was answered 200.
    pub async fn deliver_event(&self, corp_id: &str, fields: &[(&str, &str)]) -> Result<bool> {
        let now_secs = (self.now_ms().await? / 1000).to_string();
        let mut all = vec![
            ("ToUserName", corp_id),
            ("FromUserName", "sys"),
            ("CreateTime", now_secs.as_str()),
            ("MsgType", "event"),
        ];
        all.extend_from_slice(fields);
        let report: Value = self
            .call(
                reqwest::Method::POST,
                "/_sandbox/callbacks",
                Some(json!({ "corp_id": corp_id, "fields": all })),
            )
            .await?;
        Ok(report
            .get("deliveries")
            .and_then(Value::as_array)
            .is_some_and(|d| {
                d.iter()
                    .any(|d| d.get("delivered").and_then(Value::as_bool) == Some(true))
            }))
    }

    /// WeCom removes a resigned member from the corp's directory; answers the config ids that
    /// still list them.
    pub async fn remove_user(&self, corp_id: &str, userid: &str) -> Result<Vec<String>> {
        let answer: Value = self
            .call(
                reqwest::Method::DELETE,
                &format!("/_sandbox/corps/{corp_id}/users/{userid}"),
                None,
            )
            .await?;
        Ok(answer
            .get("still_listed_on")
            .and_then(Value::as_array)
            .map(|ids| {
                ids.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }
}
