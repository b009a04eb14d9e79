//! Reading a function's environment. Each function's `config.rs` names the variables it
//! reads (the same names as `template.yaml`); a missing or malformed one fails the cold
//! start rather than each request.

use std::str::FromStr;

#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("environment variable {0} is not set")]
    Missing(&'static str),
    #[error("environment variable {0} is malformed: {1}")]
    Malformed(&'static str, String),
}

pub fn required(name: &'static str) -> Result<String, EnvError> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(EnvError::Missing(name))
}

/// A required variable parsed as `T` (a number of seconds, say).
pub fn parsed<T: FromStr>(name: &'static str) -> Result<T, EnvError>
where
    T::Err: std::fmt::Display,
{
    required(name)?
        .parse()
        .map_err(|e: T::Err| EnvError::Malformed(name, e.to_string()))
}

/// A queue's `maxReceiveCount` as the template passes it to its consumer, which marks its
/// work given up on that receive. SQS takes 1 to 1000; anything else is a template mistake,
/// and 0 would mark everything given up on its first receive.
pub fn max_receive_count(name: &'static str) -> Result<u32, EnvError> {
    bounded_receive_count(name, parsed(name)?)
}

fn bounded_receive_count(name: &'static str, count: u32) -> Result<u32, EnvError> {
    if (1..=1000).contains(&count) {
        Ok(count)
    } else {
        Err(EnvError::Malformed(
            name,
            format!("{count} is not an SQS maxReceiveCount (1 to 1000)"),
        ))
    }
}

/// How long a tenant's replaced callback keys still verify (`domain::tenants::KeyRotation`),
/// from `CALLBACK_KEY_OVERLAP_HOURS` (`CallbackKeyOverlapHours`), `INBOX_RETENTION_SECONDS`
/// (the inbox's and its dead-letter queue's retention) and `CALLBACK_ARCHIVE_DAYS`.
pub fn key_rotation() -> Result<domain::tenants::KeyRotation, EnvError> {
    Ok(domain::tenants::KeyRotation::new(
        parsed("CALLBACK_KEY_OVERLAP_HOURS")?,
        parsed("INBOX_RETENTION_SECONDS")?,
        parsed("CALLBACK_ARCHIVE_DAYS")?,
    ))
}

/// Both layers of the WeCom budget (`domain::budget::BudgetLayers`): `tenant`'s limits, and
/// the per-address limits and the addresses calls leave from, from
/// `WECOM_BUDGET_PER_ADDRESS_PER_MINUTE`, `WECOM_BUDGET_PER_ADDRESS_PER_HOUR` and
/// `EGRESS_ADDRESSES` (comma-separated; empty or unset for the one shared address).
pub fn budget_layers(
    tenant: domain::budget::BudgetLimits,
) -> Result<domain::budget::BudgetLayers, EnvError> {
    const ADDRESSES: &str = "EGRESS_ADDRESSES";
    let egress =
        domain::budget::EgressAddresses::parse(&std::env::var(ADDRESSES).unwrap_or_default())
            .map_err(|e| EnvError::Malformed(ADDRESSES, e))?;
    Ok(domain::budget::BudgetLayers {
        tenant,
        address: domain::budget::BudgetLimits {
            per_minute: parsed("WECOM_BUDGET_PER_ADDRESS_PER_MINUTE")?,
            per_hour: parsed("WECOM_BUDGET_PER_ADDRESS_PER_HOUR")?,
        },
        egress,
    })
}

/// The egress relays the functions calling WeCom send through (`EGRESS_RELAYS`,
/// comma-separated, one per address of `EGRESS_ADDRESSES` in the same order); `direct`, empty
/// or unset: none, and every call leaves from the calling process (docs/design/egress.md).
pub fn egress_relays() -> Vec<String> {
    let listed = std::env::var("EGRESS_RELAYS").unwrap_or_default();
    if listed.trim() == "direct" {
        return Vec::new();
    }
    listed
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The landing page's two tables (`ROTATION_TABLE_NAME`, `VISIT_TABLE_NAME`), for the
/// functions that write pages (the single writer), delete them (the admin API) or read them
/// and count visits (the landing page).
pub fn page_tables() -> Result<crate::dynamodb::PageTables, EnvError> {
    Ok(crate::dynamodb::PageTables {
        rotations: required("ROTATION_TABLE_NAME")?,
        visits: required("VISIT_TABLE_NAME")?,
    })
}

#[cfg(test)]
mod tests {
    use super::bounded_receive_count;

    #[test]
    fn a_max_receive_count_is_one_sqs_accepts() {
        assert_eq!(bounded_receive_count("N", 5).ok(), Some(5));
        assert_eq!(bounded_receive_count("N", 1000).ok(), Some(1000));
        assert!(bounded_receive_count("N", 0).is_err());
        assert!(bounded_receive_count("N", 1001).is_err());
    }
}
