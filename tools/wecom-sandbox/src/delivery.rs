//! Callback delivery as WeCom does it: `POST url?msg_signature=..&timestamp=..&nonce=..` with
//! the encrypted envelope as body, each attempt cut off after a timeout (5 s), success only
//! on HTTP 200, and up to three attempts in all with a pause between them.

use crate::app::SharedApp;
use crate::rng;
use domain::wecom::callback::Envelope;
use domain::wecom::crypto::CallbackCrypto;
use rand::Rng;
use serde::Serialize;
use std::time::{Duration, Instant};

/// A corp's callback endpoint with the crypto to address it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub corp_id: String,
    pub url: String,
    pub crypto: CallbackCrypto,
}

#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub elapsed_ms: u64,
}

/// One copy of a callback and its retry loop.
#[derive(Debug, Clone, Serialize)]
pub struct CopyReport {
    pub attempts: Vec<Attempt>,
    pub delivered: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeliveryReport {
    pub deliveries: Vec<CopyReport>,
    pub duplicated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate_delay_ms: Option<u64>,
    pub url: String,
    pub timestamp: String,
    pub nonce: String,
    pub msg_signature: String,
}

impl DeliveryReport {
    /// True if at least one copy got through.
    pub fn delivered(&self) -> bool {
        self.deliveries.iter().any(|d| d.delivered)
    }

    pub fn attempts(&self) -> usize {
        self.deliveries.iter().map(|d| d.attempts.len()).sum()
    }
}

#[derive(Debug, Clone, Copy)]
struct Policy {
    attempts: u32,
    timeout: Duration,
    pause: Duration,
}

/// The error and its causes on one line; reqwest's own message alone hides the reason.
fn describe(error: reqwest::Error, timeout: Duration) -> String {
    if error.is_timeout() {
        return format!("timed out after {} ms", timeout.as_millis());
    }
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

async fn send_copy(
    client: &reqwest::Client,
    url: &str,
    query: &[(&str, &str); 3],
    body: &str,
    policy: Policy,
) -> CopyReport {
    let mut attempts = Vec::new();
    for attempt in 0..policy.attempts {
        if attempt > 0 {
            tokio::time::sleep(policy.pause).await;
        }
        let started = Instant::now();
        let result = client
            .post(url)
            .query(query)
            .header(reqwest::header::CONTENT_TYPE, "text/xml")
            .body(body.to_owned())
            .timeout(policy.timeout)
            .send()
            .await;
        let outcome = match result {
            // Read the body so the connection can be reused; the timeout covers it too.
            Ok(response) => {
                let status = response.status().as_u16();
                match response.bytes().await {
                    Ok(_) => Attempt {
                        status: Some(status),
                        error: None,
                        elapsed_ms: elapsed_ms(started),
                    },
                    Err(error) => Attempt {
                        status: Some(status),
                        error: Some(describe(error, policy.timeout)),
                        elapsed_ms: elapsed_ms(started),
                    },
                }
            }
            Err(error) => Attempt {
                status: None,
                error: Some(describe(error, policy.timeout)),
                elapsed_ms: elapsed_ms(started),
            },
        };
        let delivered = outcome.status == Some(200) && outcome.error.is_none();
        attempts.push(outcome);
        if delivered {
            return CopyReport {
                attempts,
                delivered: true,
            };
        }
    }
    CopyReport {
        attempts,
        delivered: false,
    }
}

/// Encrypts `plaintext` for the target and delivers it; with `duplicate`, a second identical
/// copy (same body, same query) follows 20–50 ms later with its own retry loop, running
/// concurrently with the first, as WeCom's re-sends sometimes do.
pub(crate) async fn deliver(
    app: &SharedApp,
    target: &Target,
    plaintext: &str,
    duplicate: bool,
) -> DeliveryReport {
    let (timestamp, nonce, delay, policy) = {
        let mut state = app.lock();
        let timestamp = state.clock.now_secs().to_string();
        let nonce = rng::digits(&mut state.rngs.delivery, 10);
        let delay =
            duplicate.then(|| Duration::from_millis(state.rngs.delivery.gen_range(20..=50)));
        let policy = Policy {
            attempts: state.settings.delivery_attempts.max(1),
            timeout: Duration::from_millis(state.settings.delivery_timeout_ms),
            pause: Duration::from_millis(state.settings.retry_pause_ms),
        };
        (timestamp, nonce, delay, policy)
    };
    let encrypt = target.crypto.encrypt(plaintext);
    let msg_signature = target.crypto.sign(&timestamp, &nonce, &encrypt);
    let body = Envelope {
        to_user_name: target.corp_id.clone(),
        agent_id: None,
        encrypt,
    }
    .to_xml();
    let query = [
        ("msg_signature", msg_signature.as_str()),
        ("timestamp", timestamp.as_str()),
        ("nonce", nonce.as_str()),
    ];

    let first = send_copy(&app.http, &target.url, &query, &body, policy);
    let deliveries = match delay {
        Some(delay) => {
            let second = async {
                tokio::time::sleep(delay).await;
                send_copy(&app.http, &target.url, &query, &body, policy).await
            };
            let (first, second) = tokio::join!(first, second);
            vec![first, second]
        }
        None => vec![first.await],
    };

    {
        let mut state = app.lock();
        let stats = &mut state.stats;
        if delay.is_some() {
            stats.duplicates += 1;
        }
        for copy in &deliveries {
            let attempts = copy.attempts.len() as u64;
            stats.callbacks += 1;
            stats.attempts += attempts;
            stats.retried_attempts += attempts.saturating_sub(1);
            if copy.delivered {
                stats.callbacks_delivered += 1;
            } else {
                stats.failures += 1;
            }
        }
    }

    DeliveryReport {
        deliveries,
        duplicated: delay.is_some(),
        duplicate_delay_ms: delay.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        url: target.url.clone(),
        timestamp,
        nonce,
        msg_signature,
    }
}
