//! The environment this function reads; names match `template.yaml`.

use adapters::env::{parsed, required, EnvError};

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    pub refresh_queue_url: String,
    /// Its own queue, where a fan-out cut short by the deadline continues.
    pub fan_out_queue_url: String,
    /// The fan-out queue's `maxReceiveCount`: on that receive a fan-out is marked given up
    /// before it expands.
    pub max_receives: u32,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            refresh_queue_url: required("REFRESH_QUEUE_URL")?,
            fan_out_queue_url: required("FAN_OUT_QUEUE_URL")?,
            max_receives: max_receives(parsed("FAN_OUT_MAX_RECEIVES")?)?,
        })
    }
}

/// SQS takes a `maxReceiveCount` of 1 to 1000; anything else is a template mistake, and 0
/// would mark every fan-out given up on its first receive.
fn max_receives(count: u32) -> Result<u32, EnvError> {
    if (1..=1000).contains(&count) {
        Ok(count)
    } else {
        Err(EnvError::Malformed(
            "FAN_OUT_MAX_RECEIVES",
            format!("{count} is not an SQS maxReceiveCount (1 to 1000)"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::max_receives;

    #[test]
    fn the_max_receive_count_is_one_sqs_accepts() {
        assert_eq!(max_receives(5).ok(), Some(5));
        assert_eq!(max_receives(1000).ok(), Some(1000));
        assert!(max_receives(0).is_err());
        assert!(max_receives(1001).is_err());
    }
}
