//! `wecom-sandbox --listen 127.0.0.1:PORT`: runs the sandbox and prints the address it
//! listens on as its first line of stdout, so scripts can start it on port 0.

use clap::Parser;
use std::io::Write;
use std::net::SocketAddr;
use tracing_subscriber::EnvFilter;
use wecom_sandbox::{defaults, serve_with_shutdown, SandboxConfig};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "A local WeCom stand-in: contact-way API, faults, rate limits, scans and callbacks"
)]
struct Args {
    /// Address to listen on; port 0 picks a free port. Loopback by default: the sandbox has
    /// no authentication.
    #[arg(long, env = "SANDBOX_LISTEN", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Seed for every random choice (tokens, ids, scan routing, fault rates); random if absent.
    #[arg(long, env = "SANDBOX_SEED")]
    seed: Option<u64>,
    #[arg(long, env = "SANDBOX_TOKEN_LIFETIME_SECS", default_value_t = defaults::TOKEN_LIFETIME_SECS)]
    token_lifetime_secs: u64,
    /// Calls per corp per API per wall-clock minute.
    #[arg(long, env = "SANDBOX_LIMIT_PER_MINUTE", default_value_t = defaults::LIMIT_PER_MINUTE)]
    limit_per_minute: u64,
    /// Calls per corp per API per wall-clock hour.
    #[arg(long, env = "SANDBOX_LIMIT_PER_HOUR", default_value_t = defaults::LIMIT_PER_HOUR)]
    limit_per_hour: u64,
    /// Calls per caller address per API per wall-clock minute, across every corp.
    #[arg(long, env = "SANDBOX_LIMIT_PER_IP_PER_MINUTE", default_value_t = defaults::LIMIT_PER_IP_PER_MINUTE)]
    limit_per_ip_per_minute: u64,
    /// Calls per caller address per API per wall-clock hour, across every corp.
    #[arg(long, env = "SANDBOX_LIMIT_PER_IP_PER_HOUR", default_value_t = defaults::LIMIT_PER_IP_PER_HOUR)]
    limit_per_ip_per_hour: u64,
    /// Pause between callback delivery attempts.
    #[arg(long, env = "SANDBOX_RETRY_PAUSE_MS", default_value_t = defaults::RETRY_PAUSE_MS)]
    retry_pause_ms: u64,
    /// Per-attempt timeout of a callback delivery.
    #[arg(long, env = "SANDBOX_DELIVERY_TIMEOUT_MS", default_value_t = defaults::DELIVERY_TIMEOUT_MS)]
    delivery_timeout_ms: u64,
    /// Attempts per callback copy, the first included.
    #[arg(long, env = "SANDBOX_DELIVERY_ATTEMPTS", default_value_t = defaults::DELIVERY_ATTEMPTS)]
    delivery_attempts: u32,
}

async fn shutdown_signal() {
    if let Err(error) = tokio::signal::ctrl_c().await {
        tracing::error!(%error, "cannot listen for ctrl-c; running until killed");
        std::future::pending::<()>().await;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("wecom_sandbox=info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if !args.listen.ip().is_loopback() {
        tracing::warn!(listen = %args.listen, "listening beyond loopback; the sandbox has no authentication");
    }
    let config = SandboxConfig {
        seed: args.seed,
        token_lifetime_secs: args.token_lifetime_secs,
        limit_per_minute: args.limit_per_minute,
        limit_per_hour: args.limit_per_hour,
        limit_per_ip_per_minute: args.limit_per_ip_per_minute,
        limit_per_ip_per_hour: args.limit_per_ip_per_hour,
        retry_pause_ms: args.retry_pause_ms,
        delivery_timeout_ms: args.delivery_timeout_ms,
        delivery_attempts: args.delivery_attempts,
    };
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let addr = listener.local_addr()?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "wecom-sandbox listening on http://{addr}")?;
    stdout.flush()?;
    drop(stdout);
    serve_with_shutdown(listener, config, shutdown_signal()).await?;
    Ok(())
}
