//! Fault injection. Rules are checked in order on every WeCom API call; each rule counts the
//! calls it matches, so `calls: [1, 3]` means "the first and third call this rule matches",
//! whatever other rules do.

use crate::wecom::Api;
use rand::rngs::StdRng;
use rand::Rng;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Waits, then handles the call normally.
    Latency,
    /// Answers HTTP 200 with the given errcode instead of handling the call.
    Errcode,
    /// Answers a non-200 HTTP status with a non-JSON body, as a gateway in front of WeCom would.
    HttpStatus,
    /// Closes the connection without sending any response.
    Drop,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// Shown in the call log; defaults to the kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Only calls to this API (`gettoken`, `add_contact_way`, ...); all APIs when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// Only calls from this corp; all corps when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corp_id: Option<String>,
    pub kind: FaultKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errcode: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errmsg: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Fires on each matching call with this probability (seeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Fires on these matching calls, counted from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<Vec<u64>>,
    /// Fires on the first N matching calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<u64>,
    /// Stops firing after this many more fires; unlimited when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining: Option<u64>,
    /// Read-only counters, reset whenever the rule list is replaced. Accepted on input so the
    /// output of `GET /_sandbox/config` can be sent back as is.
    #[serde(default)]
    pub matched: u64,
    #[serde(default)]
    pub fired: u64,
}

impl FaultRule {
    pub fn validate(&self) -> Result<(), String> {
        if let Some(api) = &self.api {
            if Api::from_name(api).is_none() {
                return Err(format!("unknown api {api:?}"));
            }
        }
        match self.kind {
            FaultKind::Latency if self.latency_ms.is_none() => {
                return Err("kind latency needs latency_ms".into())
            }
            FaultKind::Errcode if self.errcode.is_none() => {
                return Err("kind errcode needs errcode".into())
            }
            FaultKind::HttpStatus => match self.status {
                Some(status) if (100..=599).contains(&status) && status != 200 => {}
                _ => {
                    return Err(
                        "kind http_status needs a status in 100..=599 other than 200".into(),
                    )
                }
            },
            _ => {}
        }
        let selectors = [
            self.rate.is_some(),
            self.calls.is_some(),
            self.first.is_some(),
        ];
        if selectors.iter().filter(|set| **set).count() > 1 {
            return Err("use at most one of rate, calls and first".into());
        }
        if let Some(rate) = self.rate {
            if !(0.0..=1.0).contains(&rate) {
                return Err("rate must be within 0.0..=1.0".into());
            }
        }
        if self.calls.iter().flatten().any(|n| *n == 0) {
            return Err("calls are counted from 1".into());
        }
        Ok(())
    }

    fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| match self.kind {
            FaultKind::Latency => format!("latency {}ms", self.latency_ms.unwrap_or(0)),
            FaultKind::Errcode => format!("errcode {}", self.errcode.unwrap_or(0)),
            FaultKind::HttpStatus => format!("http_status {}", self.status.unwrap_or(0)),
            FaultKind::Drop => "drop".into(),
        })
    }

    fn matches(&self, api: Api, corp_id: Option<&str>) -> bool {
        self.api.as_deref().is_none_or(|name| name == api.name())
            && self
                .corp_id
                .as_deref()
                .is_none_or(|corp| Some(corp) == corp_id)
    }

    fn selects(&self, rng: &mut StdRng) -> bool {
        if let Some(rate) = self.rate {
            rng.gen::<f64>() < rate
        } else if let Some(calls) = &self.calls {
            calls.contains(&self.matched)
        } else if let Some(first) = self.first {
            self.matched <= first
        } else {
            true
        }
    }
}

/// What a call must suffer before (or instead of) being handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Errcode {
        errcode: i64,
        errmsg: Option<String>,
    },
    HttpStatus(u16),
    Drop,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub latency_ms: u64,
    pub outcome: Option<Outcome>,
    /// Labels of the rules that fired, for the call log.
    pub labels: Vec<String>,
}

impl Plan {
    pub fn label(&self) -> Option<String> {
        (!self.labels.is_empty()).then(|| self.labels.join(", "))
    }
}

/// Latency rules add up; of the rules that end a call, the first that fires wins, and later
/// ones are not spent (their `remaining` is untouched).
pub(crate) fn plan(
    rules: &mut [FaultRule],
    api: Api,
    corp_id: Option<&str>,
    rng: &mut StdRng,
) -> Plan {
    let mut plan = Plan::default();
    for rule in rules.iter_mut() {
        if !rule.matches(api, corp_id) {
            continue;
        }
        rule.matched += 1;
        if !rule.selects(rng) || rule.remaining == Some(0) {
            continue;
        }
        let outcome = match rule.kind {
            FaultKind::Latency => None,
            FaultKind::Errcode => Some(Outcome::Errcode {
                errcode: rule.errcode.unwrap_or(-1),
                errmsg: rule.errmsg.clone(),
            }),
            FaultKind::HttpStatus => Some(Outcome::HttpStatus(rule.status.unwrap_or(502))),
            FaultKind::Drop => Some(Outcome::Drop),
        };
        match outcome {
            None => plan.latency_ms = plan.latency_ms.saturating_add(rule.latency_ms.unwrap_or(0)),
            Some(_) if plan.outcome.is_some() => continue,
            Some(outcome) => plan.outcome = Some(outcome),
        }
        rule.fired += 1;
        if let Some(remaining) = rule.remaining.as_mut() {
            *remaining -= 1;
        }
        plan.labels.push(rule.label());
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rule(json: serde_json::Value) -> FaultRule {
        serde_json::from_value(json).expect("test rule parses")
    }

    #[test]
    fn calls_selects_by_the_rules_own_match_count() {
        let mut rules = vec![rule(serde_json::json!({
            "api": "get_contact_way", "kind": "errcode", "errcode": -1, "calls": [1, 3]
        }))];
        let mut rng = StdRng::seed_from_u64(1);
        let fired: Vec<bool> = (0..4)
            .map(|_| {
                plan(&mut rules, Api::AddContactWay, None, &mut rng);
                plan(&mut rules, Api::GetContactWay, None, &mut rng)
                    .outcome
                    .is_some()
            })
            .collect();
        assert_eq!(fired, [true, false, true, false]);
    }

    #[test]
    fn remaining_caps_how_often_a_rule_fires() {
        let mut rules = vec![rule(serde_json::json!({"kind": "drop", "remaining": 2}))];
        let mut rng = StdRng::seed_from_u64(1);
        let fired = (0..5)
            .filter(|_| {
                plan(&mut rules, Api::GetToken, None, &mut rng)
                    .outcome
                    .is_some()
            })
            .count();
        assert_eq!(fired, 2);
    }

    #[test]
    fn latency_adds_up_and_the_first_ending_rule_wins() {
        let mut rules = vec![
            rule(serde_json::json!({"kind": "latency", "latency_ms": 5})),
            rule(serde_json::json!({"kind": "http_status", "status": 502})),
            rule(serde_json::json!({"kind": "latency", "latency_ms": 7})),
            rule(serde_json::json!({"kind": "drop", "remaining": 1})),
        ];
        let mut rng = StdRng::seed_from_u64(1);
        let planned = plan(&mut rules, Api::GetToken, Some("corp"), &mut rng);
        assert_eq!(planned.latency_ms, 12);
        assert_eq!(planned.outcome, Some(Outcome::HttpStatus(502)));
        assert_eq!(rules[3].remaining, Some(1));
    }

    #[test]
    fn a_corp_filter_ignores_calls_of_unknown_corps() {
        let mut rules = vec![rule(serde_json::json!({"kind": "drop", "corp_id": "ww1"}))];
        let mut rng = StdRng::seed_from_u64(1);
        assert!(plan(&mut rules, Api::GetToken, None, &mut rng)
            .outcome
            .is_none());
        assert!(plan(&mut rules, Api::GetToken, Some("ww2"), &mut rng)
            .outcome
            .is_none());
        assert!(plan(&mut rules, Api::GetToken, Some("ww1"), &mut rng)
            .outcome
            .is_some());
    }

    #[test]
    fn validation_refuses_two_selectors_and_missing_parameters() {
        assert!(
            rule(serde_json::json!({"kind": "drop", "rate": 0.5, "first": 1}))
                .validate()
                .is_err()
        );
        assert!(rule(serde_json::json!({"kind": "latency"}))
            .validate()
            .is_err());
        assert!(
            rule(serde_json::json!({"kind": "http_status", "status": 200}))
                .validate()
                .is_err()
        );
        assert!(rule(serde_json::json!({"kind": "drop", "api": "nope"}))
            .validate()
            .is_err());
    }
}
