//! `qrsync-ops`: the operator's CLI of a deployed qrsync stack. It finds the stack by name
//! from its CloudFormation outputs and uses the standard AWS settings and credential chain
//! (`AWS_PROFILE`, `AWS_REGION`, `AWS_ENDPOINT_URL` for the local world...). Long work (a
//! replay) runs in the stack; this tool starts it and follows it.

mod admin;
mod dead_letters;
mod ops;
mod plan;
mod replay;
mod seal;
mod status;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "qrsync-ops",
    version,
    about = "Operate a deployed qrsync stack"
)]
struct Cli {
    /// The CloudFormation stack's name.
    #[arg(
        long,
        env = "QRSYNC_STACK",
        default_value = "qrsync-local",
        global = true
    )]
    stack: String,
    /// The REST API's base URL (default: the stack's `ApiUrl` output, or MiniStack's form of
    /// it when `AWS_ENDPOINT_URL` is set).
    #[arg(long, env = "QRSYNC_API_URL", global = true)]
    api_url: Option<String>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Queue depths, the oldest message of each refresh queue, dirty codes, and refreshes
    /// requeued for the WeCom budget or a throttle in the last hour.
    Status,
    /// The dead-letter queues: list, show, redrive, close, and the record of closed ones.
    #[command(subcommand)]
    DeadLetters(dead_letters::Command),
    /// Replays archived callbacks of a tenant's time window through today's code, in the
    /// stack: a dry run unless --apply.
    Replay(replay::Args),
    /// The backstop's drift report of a tenant-day (GET /admin/tenants/{tenant}/drift).
    Drift(DriftArgs),
    /// The capacity planner: a tenant's fan-out, drain times at its WeCom budget, a
    /// campaign's budget, the sweep's coverage and the platform's ceilings (from the table,
    /// --synthetic or --bench; settings from template.yaml).
    Plan(Box<plan::Args>),
    /// One signed request to the admin API (`admin PUT /tenants/acme --body tenant.json`):
    /// prints the status and the answer; fails on any status but 2xx.
    Admin(admin::Args),
    /// Seals the secrets stored before sealing (corp secrets, callback keys, access tokens):
    /// a dry run unless --apply; idempotent, resumable with --after.
    SealSecrets(seal::Args),
}

#[derive(clap::Args)]
struct DriftArgs {
    /// The tenant.
    #[arg(long)]
    tenant: String,
    /// The tenant-day (YYYY-MM-DD); today when left out.
    #[arg(long)]
    day: Option<String>,
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let connect = || ops::Ops::connect(&cli.stack, cli.api_url.as_deref(), cli.json);
    match cli.command {
        Command::Status => status::run(&connect().await?).await,
        Command::DeadLetters(command) => dead_letters::run(&connect().await?, command).await,
        Command::Replay(args) => replay::run(&connect().await?, args).await,
        Command::Drift(args) => drift(&connect().await?, args).await,
        Command::Admin(args) => admin::run(&connect().await?, args).await,
        Command::SealSecrets(args) => seal::run(&connect().await?, args).await,
        // A synthetic or bench plan needs no stack: only --tenant connects.
        Command::Plan(args) => plan::run(*args, &cli.stack, cli.api_url.as_deref(), cli.json).await,
    }
}

async fn drift(ops: &ops::Ops, args: DriftArgs) -> Result<()> {
    domain::ids::TenantId::parse(&args.tenant).map_err(|e| anyhow::anyhow!("--tenant: {e}"))?;
    let mut path = format!("/tenants/{}/drift", args.tenant);
    if let Some(day) = &args.day {
        chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d")
            .map_err(|e| anyhow::anyhow!("--day: {e}"))?;
        path = format!("{path}?day={day}");
    }
    let report = ops
        .admin()?
        .get(&path)
        .await?
        .expect("the drift report", &[200])?;
    if ops.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "drift of {} ({}):",
            args.tenant,
            args.day.as_deref().unwrap_or("today")
        );
        if let Some(fields) = report.as_object() {
            for (name, value) in fields {
                println!("  {name}: {value}");
            }
        }
    }
    Ok(())
}
