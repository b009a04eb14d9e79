//! The scan simulator: a customer scans a contact way's QR code, WeCom routes them to one
//! member of the code's current list, and the corp's callback URL gets an encrypted
//! `change_external_contact` event.

use crate::app::SharedApp;
use crate::delivery::{self, DeliveryReport, Target};
use crate::rng;
use crate::state::{DeliverySummary, ScanRecord};
use domain::wecom::callback::write_flat_xml;
use rand::Rng;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScanRequest {
    pub corp_id: String,
    pub config_id: String,
    #[serde(default)]
    pub duplicate: bool,
    /// CreateTime of the event, in seconds; the sandbox clock's now when absent.
    #[serde(default)]
    pub create_time: Option<u64>,
    /// `add_external_contact` when absent; `add_half_external_contact` is the other one a
    /// scan can produce (a member with verification still pending).
    #[serde(default)]
    pub change_type: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScanOutcome {
    pub scan: ScanRecord,
    /// The decrypted event, for the caller's convenience.
    pub plaintext: Option<String>,
    /// `None` when the corp has no callback configured.
    pub delivery: Option<DeliveryReport>,
}

#[derive(Debug, Clone)]
pub enum ScanError {
    UnknownCorp(String),
    UnknownConfig(String),
    BadRequest(String),
    /// Nobody on the list could take the customer; the scan is logged as unroutable.
    Unroutable(ScanRecord),
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanError::UnknownCorp(corp) => write!(f, "unknown corp {corp}"),
            ScanError::UnknownConfig(config) => {
                write!(f, "unknown config_id {config} (or it belongs to another corp)")
            }
            ScanError::BadRequest(message) => f.write_str(message),
            ScanError::Unroutable(scan) => write!(
                f,
                "contact way {} has nobody to route to (user list empty or every member left the directory)",
                scan.config_id
            ),
        }
    }
}

/// A visitor opening a customer-acquisition link (`links`): `url` is the link's URL with the
/// `customer_channel` the platform appended.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenLinkRequest {
    pub url: String,
    #[serde(default)]
    pub duplicate: bool,
}

/// The sandbox's bound on `customer_channel`: what it takes is echoed as `State`.
const MAX_CHANNEL_CHARS: usize = 64;

/// Where a customer came in: a contact way's QR code, or a link opened with a channel.
struct Entry {
    corp_id: String,
    /// The contact way's config id, or the link's id.
    source_id: String,
    users: Vec<String>,
    state: String,
}

pub(crate) async fn scan(
    app: &SharedApp,
    request: &ScanRequest,
    campaign_id: Option<u64>,
) -> Result<ScanOutcome, ScanError> {
    let change_type = request
        .change_type
        .clone()
        .unwrap_or_else(|| "add_external_contact".into());
    if !matches!(
        change_type.as_str(),
        "add_external_contact" | "add_half_external_contact"
    ) {
        return Err(ScanError::BadRequest(format!(
            "change_type must be add_external_contact or add_half_external_contact, not {change_type}"
        )));
    }
    let entry = {
        let state = app.lock();
        let way = state
            .contact_ways
            .get(&request.config_id)
            .filter(|w| w.corp_id == request.corp_id)
            .ok_or_else(|| ScanError::UnknownConfig(request.config_id.clone()))?;
        Entry {
            corp_id: request.corp_id.clone(),
            source_id: request.config_id.clone(),
            users: way.user.clone(),
            state: way.state.clone(),
        }
    };
    let arrival = Arrival {
        duplicate: request.duplicate,
        create_time: request.create_time,
        change_type,
        campaign_id,
    };
    arrive(app, entry, arrival).await
}

/// A visitor opens a link: the link's member gets the customer, and the add event's `State` is
/// the URL's `customer_channel` (absent without one, as for a contact way without `state`).
pub(crate) async fn open_link(
    app: &SharedApp,
    request: &OpenLinkRequest,
) -> Result<ScanOutcome, ScanError> {
    let rest = request
        .url
        .strip_prefix(crate::links::LINK_BASE)
        .ok_or_else(|| ScanError::BadRequest("not a link of this sandbox".into()))?;
    let (link_id, query) = rest.split_once('?').unwrap_or((rest, ""));
    let channel = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("customer_channel="))
        .unwrap_or_default();
    if channel.len() > MAX_CHANNEL_CHARS
        || !channel
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(ScanError::BadRequest(format!(
            "customer_channel must be at most {MAX_CHANNEL_CHARS} letters, digits, '-' or '_'"
        )));
    }
    let entry = {
        let state = app.lock();
        let link = state
            .links
            .get(link_id)
            .ok_or_else(|| ScanError::UnknownConfig(link_id.to_owned()))?;
        Entry {
            corp_id: link.corp_id.clone(),
            source_id: link.link_id.clone(),
            users: link.user_list.clone(),
            state: channel.to_owned(),
        }
    };
    let arrival = Arrival {
        duplicate: request.duplicate,
        create_time: None,
        change_type: "add_external_contact".into(),
        campaign_id: None,
    };
    arrive(app, entry, arrival).await
}

struct Arrival {
    duplicate: bool,
    create_time: Option<u64>,
    change_type: String,
    campaign_id: Option<u64>,
}

/// Routes the customer to one of `entry`'s users and delivers the add event.
async fn arrive(app: &SharedApp, entry: Entry, arrival: Arrival) -> Result<ScanOutcome, ScanError> {
    let Arrival {
        duplicate,
        create_time,
        change_type,
        campaign_id,
    } = arrival;
    let (record, plaintext, target) = {
        let mut guard = app.lock();
        let state = &mut *guard;
        let corp = state
            .corps
            .get(&entry.corp_id)
            .ok_or_else(|| ScanError::UnknownCorp(entry.corp_id.clone()))?;
        // A member removed from the directory stays on the list (WeCom does not prune it) but
        // can no longer take customers, so routing skips them; the record names them.
        let (eligible, stale): (Vec<&String>, Vec<&String>) =
            entry.users.iter().partition(|u| corp.users.contains(*u));
        let stale: Vec<String> = stale.into_iter().cloned().collect();
        let userid = match eligible.len() {
            0 => None,
            1 => Some(eligible[0].clone()),
            n => Some(eligible[state.rngs.scans.gen_range(0..n)].clone()),
        };
        let at_ms = state.clock.now_ms();
        let create_time = create_time.unwrap_or(at_ms / 1000);
        let contact_state = entry.state.clone();
        let target = corp
            .callback
            .as_ref()
            .and_then(|cb| match cb.crypto(&corp.corp_id) {
                Ok(crypto) => Some(Target {
                    corp_id: corp.corp_id.clone(),
                    url: cb.url.clone(),
                    crypto,
                }),
                Err(error) => {
                    tracing::warn!(corp = %corp.corp_id, %error, "callback settings unusable");
                    None
                }
            });
        let external_userid = userid
            .as_ref()
            .map(|_| format!("wm{}", rng::alphanumeric(&mut state.rngs.scans, 28)));
        let welcome_code = rng::alphanumeric(&mut state.rngs.scans, 43);

        let seq = state.scans.next_seq();
        let record = ScanRecord {
            seq,
            at_ms,
            corp_id: entry.corp_id.clone(),
            config_id: entry.source_id.clone(),
            state: contact_state.clone(),
            userid: userid.clone(),
            external_userid: external_userid.clone(),
            routed: userid.is_some(),
            stale_members: stale,
            duplicate,
            campaign_id,
            delivery: None,
        };
        state.scans.push(record.clone());
        state.stats.scans += 1;
        if !record.stale_members.is_empty() {
            state.stats.scans_with_stale_members += 1;
        }
        let (Some(userid), Some(external_userid)) = (userid, external_userid) else {
            state.stats.unroutable_scans += 1;
            return Err(ScanError::Unroutable(record));
        };
        let create_time = create_time.to_string();
        let mut fields = vec![
            ("ToUserName", entry.corp_id.as_str()),
            ("FromUserName", "sys"),
            ("CreateTime", create_time.as_str()),
            ("MsgType", "event"),
            ("Event", "change_external_contact"),
            ("ChangeType", change_type.as_str()),
            ("UserID", userid.as_str()),
            ("ExternalUserID", external_userid.as_str()),
        ];
        // WeCom sends State only for codes that have one.
        if !contact_state.is_empty() {
            fields.push(("State", contact_state.as_str()));
        }
        fields.push(("WelcomeCode", welcome_code.as_str()));
        (record, write_flat_xml(&fields), target)
    };

    let delivery = match &target {
        Some(target) => Some(delivery::deliver(app, target, &plaintext, duplicate).await),
        None => None,
    };
    let mut record = record;
    if let Some(report) = &delivery {
        let summary = DeliverySummary {
            delivered: report.delivered(),
            attempts: report.attempts(),
        };
        if let Some(logged) = app.lock().scans.get_mut(record.seq) {
            logged.delivery = Some(summary.clone());
        }
        record.delivery = Some(summary);
    }
    Ok(ScanOutcome {
        scan: record,
        plaintext: Some(plaintext),
        delivery,
    })
}
