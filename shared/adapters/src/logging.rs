//! Every function's log set-up. The level comes from the template's `LogLevel`: on AWS through
//! `LoggingConfig.ApplicationLogLevel` (Lambda passes it on as `AWS_LAMBDA_LOG_LEVEL`, and
//! drops JSON lines below it itself), elsewhere through `QRSYNC_LOG_LEVEL`.
//!
//! Only qrsync's own crates log at that level. Every dependency is capped at `info`, whatever
//! the level: at `trace` the Lambda runtime logs each raw event (a tenant PUT carries three
//! secrets) and the HTTP and SDK layers log requests and answers (access tokens, DynamoDB
//! items with corp secrets). Our own code never logs a body or a secret at any level.

use tracing::level_filters::LevelFilter;
use tracing_subscriber::EnvFilter;

/// The level Lambda's advanced logging controls set from `ApplicationLogLevel`.
pub const LAMBDA_LOG_LEVEL_VAR: &str = "AWS_LAMBDA_LOG_LEVEL";
/// The same level where the runtime does not set the variable above (emulators).
pub const LOG_LEVEL_VAR: &str = "QRSYNC_LOG_LEVEL";

/// The crates whose events are logged at the configured level; any other is capped at `info`.
const OWN_CRATES: &[&str] = &[
    "domain",
    "adapters",
    "wecom_callback",
    "record_facts",
    "refresh_codes",
    "admin_api",
    "schedule_tick",
    "fan_out",
    "sweep",
    "replay",
    "landing_page",
    "alarm_robot",
    "wecom_relay",
];

/// The most any dependency logs.
const DEPENDENCY_CAP: LevelFilter = LevelFilter::INFO;

/// Installs the subscriber for this process: JSON lines when Lambda asks for JSON
/// (`LoggingConfig.LogFormat`), plain lines otherwise.
pub fn init() {
    let level = configured_level(
        std::env::var(LAMBDA_LOG_LEVEL_VAR).ok().as_deref(),
        std::env::var(LOG_LEVEL_VAR).ok().as_deref(),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter(level))
        .with_target(false)
        .without_time();
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let installed = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    if let Err(error) = installed {
        eprintln!("logging was already set up: {error}");
    }
}

/// The configured level in Lambda's spelling (`INFO`, `WARN`...), for lines written beside
/// the subscriber (the metrics' documents).
pub fn lambda_level_name() -> &'static str {
    let level = configured_level(
        std::env::var(LAMBDA_LOG_LEVEL_VAR).ok().as_deref(),
        std::env::var(LOG_LEVEL_VAR).ok().as_deref(),
    );
    level_name(level)
}

/// `OFF` has no Lambda name; the strictest one stands for it.
fn level_name(level: LevelFilter) -> &'static str {
    match level {
        LevelFilter::TRACE => "TRACE",
        LevelFilter::DEBUG => "DEBUG",
        LevelFilter::INFO => "INFO",
        LevelFilter::WARN => "WARN",
        _ => "ERROR",
    }
}

/// Lambda's level wins; an unreadable or missing level is `info`. Only a level is read, never
/// filter directives, so no setting can lift a dependency above its cap.
pub fn configured_level(lambda: Option<&str>, ours: Option<&str>) -> LevelFilter {
    lambda
        .filter(|raw| !raw.trim().is_empty())
        .or(ours)
        .and_then(|raw| raw.trim().parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::INFO)
}

/// Dependencies at `min(level, info)`, qrsync's crates at `level`.
pub fn filter(level: LevelFilter) -> EnvFilter {
    let mut filter = EnvFilter::default().add_directive(level.min(DEPENDENCY_CAP).into());
    for own in OWN_CRATES {
        let directive = format!("{own}={level}")
            .parse()
            .expect("a crate name and a level form a directive");
        filter = filter.add_directive(directive);
    }
    filter
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[test]
    fn every_function_of_the_workspace_logs_at_the_configured_level() {
        let functions = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../functions");
        let mut missing = Vec::new();
        for entry in std::fs::read_dir(&functions).expect("the functions folder") {
            let name = entry.expect("an entry").file_name();
            let target = name.to_string_lossy().replace('-', "_");
            if !OWN_CRATES.contains(&target.as_str()) {
                missing.push(target);
            }
        }
        assert!(missing.is_empty(), "not in OWN_CRATES: {missing:?}");
    }

    #[test]
    fn lambda_s_level_wins_over_ours_and_nonsense_falls_back_to_info() {
        assert_eq!(
            configured_level(Some("TRACE"), Some("warn")),
            LevelFilter::TRACE
        );
        assert_eq!(configured_level(None, Some("debug")), LevelFilter::DEBUG);
        assert_eq!(
            configured_level(Some(""), Some("error")),
            LevelFilter::ERROR
        );
        assert_eq!(
            configured_level(None, Some("lambda_runtime=trace")),
            LevelFilter::INFO
        );
        assert_eq!(configured_level(None, None), LevelFilter::INFO);
    }

    #[test]
    fn lines_beside_the_subscriber_carry_the_configured_level_in_lambda_s_spelling() {
        assert_eq!(level_name(configured_level(Some("warn"), None)), "WARN");
        assert_eq!(level_name(configured_level(None, Some("error"))), "ERROR");
        assert_eq!(level_name(configured_level(None, None)), "INFO");
        assert_eq!(level_name(LevelFilter::OFF), "ERROR");
    }

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn at_trace_our_crates_log_everything_and_dependencies_stop_at_info() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter(LevelFilter::TRACE))
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::trace!(target: "domain::refresh", "own trace line");
            tracing::trace!(target: "lambda_runtime::layers::api_response", body = "corp_secret", "raw JSON event received from Lambda");
            tracing::debug!(target: "aws_smithy_runtime::client", "request body");
            tracing::info!(target: "lambda_runtime", "runtime info line");
        });
        let text = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
        assert!(text.contains("own trace line"), "{text}");
        assert!(text.contains("runtime info line"), "{text}");
        assert!(
            !text.contains("corp_secret") && !text.contains("request body"),
            "{text}"
        );
    }
}
