//! `qrsync-ops admin`: one signed request to the stack's admin API, for an operator without the
//! platform's backend at hand (the first tenant of a new deployment, a look at a code). The
//! answer is printed as the API gives it; the API never answers a secret, and the request's
//! body (which may hold a corp secret) is never printed.

use crate::ops::Ops;
use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::PathBuf;

/// The admin API's own bound on a request body: a larger file is refused here before anything
/// is sent.
const MOST_BODY_BYTES: u64 = domain::admin::commands::MAX_BODY_BYTES as u64;

#[derive(clap::Args)]
pub struct Args {
    /// GET, PUT, DELETE or POST.
    method: String,
    /// The route under /admin: `/tenants/acme`, `/tenants/acme/codes/c1`.
    path: String,
    /// The JSON body of a PUT or POST: a file, or `-` for standard input.
    #[arg(long)]
    body: Option<PathBuf>,
}

pub async fn run(ops: &Ops, args: Args) -> Result<()> {
    let method = args.method.to_ascii_uppercase();
    let wants_body = match method.as_str() {
        "GET" | "DELETE" => false,
        "PUT" | "POST" => true,
        other => bail!("{other}: the admin API takes GET, PUT, DELETE or POST"),
    };
    if !args.path.starts_with("/tenants/") || args.path.len() > 512 {
        bail!(
            "{}: a route under /admin begins /tenants/ (at most 512 characters)",
            args.path
        );
    }
    let body = match (&args.body, wants_body) {
        (Some(file), true) => Some(read_body(file)?),
        (None, true) => bail!("{method} needs --body <file> (or --body - for standard input)"),
        (Some(_), false) => bail!("{method} takes no --body"),
        (None, false) => None,
    };
    let answer = ops
        .admin()?
        .send(&method, &args.path, body.as_ref())
        .await?;
    if ops.json {
        println!(
            "{}",
            serde_json::json!({"status": answer.status, "body": answer.body})
        );
    } else {
        println!(
            "{} {}",
            answer.status,
            serde_json::to_string_pretty(&answer.body)?
        );
    }
    if !(200..300).contains(&answer.status) {
        bail!("{method} /admin{} answered {}", args.path, answer.status);
    }
    Ok(())
}

fn read_body(file: &PathBuf) -> Result<serde_json::Value> {
    let mut text = String::new();
    let described = file.display().to_string();
    let source: Box<dyn Read> = if described == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(file).with_context(|| format!("--body {described}"))?)
    };
    source
        .take(MOST_BODY_BYTES + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("--body {described}"))?;
    if text.len() as u64 > MOST_BODY_BYTES {
        bail!("--body {described}: more than {MOST_BODY_BYTES} bytes");
    }
    // The error names the position only: the text may hold a secret.
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "--body {described} is not JSON (line {}, column {})",
            e.line(),
            e.column()
        )
    })
}
