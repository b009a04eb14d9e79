//! The AWS SDK's configuration for a process: the standard chain (environment, `AWS_ENDPOINT_URL`,
//! the Lambda role's credentials) with one HTTPS client that every AWS client of the process
//! shares. The client is aws-smithy-http-client's on rustls with ring, chosen in the root
//! `Cargo.toml` for its build time; the SDK's own default would pull aws-lc's C build in.

use aws_config::{BehaviorVersion, SdkConfig};
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
use aws_smithy_http_client::Builder;

/// Loads the SDK configuration from the environment, as `aws_config::load_from_env` would.
pub async fn load_config() -> SdkConfig {
    let https = Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(https)
        .load()
        .await
}
