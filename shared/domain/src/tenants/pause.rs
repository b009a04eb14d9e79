//! A tenant WeCom will not serve is paused, not churned (docs/rules.md rule 9).
//!
//! When WeCom refuses a tenant's credentials (a secret that no longer works), its caller
//! address (60020) or its app's permission (48002), every call of that tenant fails the same
//! way until someone fixes it in WeCom's console (`FailureClass::pauses_tenant`). Retrying
//! each code through the retry queues, the dead-letter queue and the dirty set would spend the
//! budget, fill the queues and alert once per code. Instead the first refresh to meet such a
//! refusal pauses the tenant (one stored mark, one alert); every refresh of the tenant then
//! ends on reading the mark, with no call and nothing requeued. The sweep probes the tenant
//! within its budget, less often the longer it stays refused; when WeCom accepts the probe, the
//! mark is lifted and every code of the tenant is recomputed from its current facts, so a
//! reason dropped while paused loses nothing (rule 1: the list is a function of the facts).

use super::ports::TenantPauses;
use crate::ids::TenantId;
use crate::wecom::errors::FailureClass;
use crate::StoreError;

/// The first probe waits a minute; each refused probe doubles the wait, up to an hour.
const FIRST_PROBE_MS: u64 = 60_000;
const LONGEST_PROBE_WAIT_MS: u64 = 3_600_000;

/// Why a tenant is paused and when the sweep probes it next. Holds no secret.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TenantPause {
    /// `token`, `untrusted_ip` or `forbidden`.
    pub class: FailureClass,
    /// WeCom's errcode, where the refusal had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errcode: Option<i64>,
    /// The egress address the tenant's calls are charged to (`crate::budget::EgressAddresses`):
    /// the one to register as a trusted IP for 60020.
    pub address: String,
    /// A contact way of the tenant the probe reads back (the one whose push was refused).
    pub probe_config_id: String,
    pub since_ms: u64,
    pub next_probe_ms: u64,
    /// Probes WeCom refused so far.
    #[serde(default)]
    pub probes: u32,
}

impl TenantPause {
    pub fn new(
        class: FailureClass,
        errcode: Option<i64>,
        address: &str,
        probe_config_id: &str,
        now_ms: u64,
    ) -> Self {
        Self {
            class,
            errcode,
            address: address.to_owned(),
            probe_config_id: probe_config_id.to_owned(),
            since_ms: now_ms,
            next_probe_ms: now_ms + FIRST_PROBE_MS,
            probes: 0,
        }
    }

    /// The pause after a probe WeCom refused again at `now_ms`: the next waits twice as long.
    pub fn after_refused_probe(&self, now_ms: u64) -> Self {
        let probes = self.probes.saturating_add(1);
        let wait = FIRST_PROBE_MS
            .saturating_mul(1u64 << probes.min(16))
            .min(LONGEST_PROBE_WAIT_MS);
        Self {
            probes,
            next_probe_ms: now_ms + wait,
            ..self.clone()
        }
    }

    /// The pause with its next probe due at `now_ms` (its credentials were just changed).
    pub fn probe_now(&self, now_ms: u64) -> Self {
        Self {
            next_probe_ms: now_ms,
            ..self.clone()
        }
    }

    pub fn probe_due(&self, now_ms: u64) -> bool {
        self.next_probe_ms <= now_ms
    }

    /// What an operator must fix, in words.
    pub fn reason(&self) -> String {
        match self.class {
            FailureClass::UntrustedIp => format!(
                "WeCom refuses calls from {} (60020): add it to the app's trusted IPs (企业可信IP)",
                self.address
            ),
            FailureClass::Forbidden => "WeCom refuses the app the contact-way API (48002): put it among customer contact's apps allowed to call the API, or grant the contact-way permission".to_owned(),
            _ => format!(
                "WeCom refuses the tenant's credentials (errcode {}): check the corp secret (PUT /tenants/{{tenant}})",
                self.errcode.map_or_else(|| "?".to_owned(), |e| e.to_string())
            ),
        }
    }

    /// The group robot's message for the pause: the tenant, the address and what to fix.
    pub fn markdown(&self, tenant: &TenantId) -> String {
        format!(
            "**qrsync <font color=\"warning\">tenant paused</font>**: {tenant}\n> {}\n> address {} · class {} · the sweep probes it from now on; `qrsync-ops status` shows it\n",
            self.reason(),
            self.address,
            self.class
        )
    }
}

/// Pauses `tenant` for `pause` unless it is paused already; `true` when this call paused it
/// (then, and only then, the caller raises the alert).
pub async fn pause_tenant<S: TenantPauses + ?Sized>(
    store: &S,
    tenant: &TenantId,
    pause: &TenantPause,
) -> Result<bool, StoreError> {
    let paused = store.pause(tenant, pause).await?;
    if paused {
        crate::telemetry::tenant_paused();
        tracing::error!(
            alert = "tenant_paused",
            tenant = %tenant,
            address = %pause.address,
            class = %pause.class,
            errcode = pause.errcode,
            "{}; its refreshes wait without calls until a probe succeeds",
            pause.reason()
        );
    }
    Ok(paused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refused_probe_doubles_the_wait_up_to_an_hour() {
        let pause = TenantPause::new(FailureClass::UntrustedIp, Some(60020), "shared", "cw1", 0);
        assert_eq!(pause.next_probe_ms, 60_000);
        let mut waits = Vec::new();
        let mut now = pause.next_probe_ms;
        let mut current = pause;
        for _ in 0..8 {
            current = current.after_refused_probe(now);
            waits.push((current.next_probe_ms - now) / 60_000);
            now = current.next_probe_ms;
        }
        assert_eq!(waits, [2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(current.probes, 8);
        assert_eq!(current.since_ms, 0, "the pause keeps its start");
    }

    #[test]
    fn the_alert_names_the_tenant_the_address_and_what_to_fix() {
        let tenant = TenantId::parse("acme").expect("a tenant id");
        let pause = TenantPause::new(
            FailureClass::UntrustedIp,
            Some(60020),
            "203.0.113.7",
            "cw1",
            0,
        );
        let text = pause.markdown(&tenant);
        assert!(text.contains("acme"), "{text}");
        assert!(text.contains("203.0.113.7"), "{text}");
        assert!(text.contains("trusted IPs"), "{text}");
        let token = TenantPause::new(FailureClass::Token, Some(40001), "shared", "cw1", 0);
        assert!(token.reason().contains("40001"), "{}", token.reason());
    }
}
