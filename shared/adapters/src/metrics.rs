//! Every function's metrics: the recorder behind `domain::telemetry`, writing CloudWatch
//! Embedded Metric Format documents (metrics_cloudwatch_embedded) once per invocation.
//!
//! The documents go to stdout directly, not through the tracing subscriber, so `LogLevel`
//! cannot filter them in the process. On AWS, with `LogFormat: JSON`, Lambda itself filters
//! application lines by their `level` key and takes a line without one as INFO, which
//! `ApplicationLogLevel` WARN or ERROR would drop, and the metrics with it. So every document
//! carries `"level"`: the configured level itself, the least severe one Lambda keeps.

use domain::telemetry::{self, dimension, NAMESPACE, TENANTS_PROPERTY};
use metrics_cloudwatch_embedded::{Builder, Collector};
use std::future::Future;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// The property Lambda's log-level filter reads.
pub const LEVEL_PROPERTY: &str = "level";

/// The installed recorder of this process.
pub struct Metrics {
    collector: &'static Collector,
    cold: AtomicBool,
}

/// Installs the recorder: namespace `qrsync`, dimension `Function` = the deployed function's
/// name (`AWS_LAMBDA_FUNCTION_NAME`, else `fallback`), and the log level as a property.
pub fn init(fallback: &str) -> Result<Metrics, metrics_cloudwatch_embedded::Error> {
    let function =
        std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| fallback.to_owned());
    let collector = Builder::new()
        .cloudwatch_namespace(NAMESPACE)
        .with_dimension(dimension::FUNCTION, function)
        .init()?;
    collector.set_property(LEVEL_PROPERTY, crate::logging::lambda_level_name());
    telemetry::describe();
    Ok(Metrics {
        collector,
        cold: AtomicBool::new(true),
    })
}

impl Metrics {
    /// Runs one invocation, counting a cold start on the first, then writes its documents
    /// (also when the invocation failed).
    pub async fn measured<F: Future>(&self, invocation: F) -> F::Output {
        if self.cold.swap(false, Ordering::Relaxed) {
            telemetry::cold_start();
        }
        let output = invocation.await;
        self.flush();
        output
    }

    /// Writes the documents of what was recorded since the last flush, in one write.
    pub fn flush(&self) {
        let tenants = telemetry::take_tenants();
        if tenants.is_empty() {
            self.collector.remove_property(TENANTS_PROPERTY);
        } else {
            self.collector.set_property(TENANTS_PROPERTY, tenants);
        }
        let mut documents = Vec::new();
        if let Err(error) = self.collector.flush(&mut documents) {
            tracing::error!(error = %error, "metrics not written");
            return;
        }
        let mut stdout = std::io::stdout().lock();
        if let Err(error) = stdout.write_all(&documents).and_then(|()| stdout.flush()) {
            tracing::error!(error = %error, "metrics not written");
        }
    }
}
