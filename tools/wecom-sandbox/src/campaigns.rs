//! Campaigns: a background run of many scans at a steady rate, for demos and load tests. Each
//! scan runs as its own task so a slow receiver delays deliveries, not the scan rate.

use crate::app::SharedApp;
use crate::scans::{self, ScanError, ScanRequest};
use crate::state::Campaign;
use rand::Rng;
use serde::Deserialize;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

const MAX_SCANS: u64 = 10_000_000;
const MAX_PER_SECOND: f64 = 10_000.0;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignRequest {
    pub corp_id: String,
    pub config_ids: Vec<String>,
    pub scans: u64,
    pub per_second: f64,
    #[serde(default)]
    pub duplicate_fraction: f64,
}

impl CampaignRequest {
    pub fn validate(&self) -> Result<(), String> {
        if self.config_ids.is_empty() {
            return Err("config_ids must not be empty".into());
        }
        if !(1..=MAX_SCANS).contains(&self.scans) {
            return Err(format!("scans must be within 1..={MAX_SCANS}"));
        }
        if !(self.per_second > 0.0 && self.per_second <= MAX_PER_SECOND) {
            return Err(format!("per_second must be within (0, {MAX_PER_SECOND}]"));
        }
        if !(0.0..=1.0).contains(&self.duplicate_fraction) {
            return Err("duplicate_fraction must be within 0.0..=1.0".into());
        }
        Ok(())
    }
}

/// Registers and starts a campaign; returns its id.
pub(crate) fn start(app: &SharedApp, request: CampaignRequest) -> u64 {
    let mut state = app.lock();
    let campaign_id = state.next_campaign;
    state.next_campaign += 1;
    let started_at_ms = state.now_ms();
    state.campaigns.insert(
        campaign_id,
        Campaign {
            campaign_id,
            corp_id: request.corp_id.clone(),
            config_ids: request.config_ids.clone(),
            per_second: request.per_second,
            duplicate_fraction: request.duplicate_fraction,
            total: request.scans,
            started: 0,
            done: 0,
            failures: 0,
            unroutable: 0,
            duplicates: 0,
            running: true,
            started_at_ms,
            finished_at_ms: None,
            abort: None,
        },
    );
    let task = tokio::spawn(run(app.clone(), campaign_id, request));
    if let Some(campaign) = state.campaigns.get_mut(&campaign_id) {
        campaign.abort = Some(task.abort_handle());
    }
    campaign_id
}

/// Stops a running campaign; scans in flight are abandoned.
pub(crate) fn stop(app: &SharedApp, campaign_id: u64) -> Option<Campaign> {
    let mut state = app.lock();
    let now = state.now_ms();
    let campaign = state.campaigns.get_mut(&campaign_id)?;
    if let Some(abort) = campaign.abort.take() {
        abort.abort();
    }
    if campaign.running {
        campaign.running = false;
        campaign.finished_at_ms = Some(now);
    }
    Some(campaign.clone())
}

async fn run(app: SharedApp, campaign_id: u64, request: CampaignRequest) {
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / request.per_second));
    // Burst keeps the average rate when the runtime falls behind.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut scans_in_flight = JoinSet::new();
    for _ in 0..request.scans {
        ticks.tick().await;
        let scan_request = {
            let mut state = app.lock();
            let rng = &mut state.rngs.campaigns;
            let config_id = request.config_ids[rng.gen_range(0..request.config_ids.len())].clone();
            let duplicate = rng.gen_bool(request.duplicate_fraction);
            if let Some(campaign) = state.campaigns.get_mut(&campaign_id) {
                campaign.started += 1;
                if duplicate {
                    campaign.duplicates += 1;
                }
            }
            ScanRequest {
                corp_id: request.corp_id.clone(),
                config_id,
                duplicate,
                create_time: None,
                change_type: None,
            }
        };
        let app = app.clone();
        scans_in_flight.spawn(async move {
            let outcome = scans::scan(&app, &scan_request, Some(campaign_id)).await;
            let mut state = app.lock();
            if let Some(campaign) = state.campaigns.get_mut(&campaign_id) {
                campaign.done += 1;
                match outcome {
                    Ok(outcome) if outcome.delivery.as_ref().is_none_or(|d| d.delivered()) => {}
                    Ok(_) => campaign.failures += 1,
                    Err(ScanError::Unroutable(_)) => {
                        campaign.failures += 1;
                        campaign.unroutable += 1;
                    }
                    Err(_) => campaign.failures += 1,
                }
            }
        });
        while scans_in_flight.try_join_next().is_some() {}
    }
    while scans_in_flight.join_next().await.is_some() {}
    let mut state = app.lock();
    let now = state.now_ms();
    if let Some(campaign) = state.campaigns.get_mut(&campaign_id) {
        campaign.running = false;
        campaign.finished_at_ms = Some(now);
        campaign.abort = None;
    }
}
