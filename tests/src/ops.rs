//! The operator's CLI (`qrsync-ops`, tools/ops) as an operator runs it: the binary the
//! workspace build made, against the deployed stack, with the test's AWS settings.

use anyhow::{anyhow, ensure, Context, Result};
use serde_json::Value;
use std::path::PathBuf;

/// `qrsync-ops` beside this test binary's directory (`target/debug/deps/..`): `make test`'s
/// `cargo build --workspace --all-targets` builds it with everything else.
pub fn ops_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let debug = exe
        .parent()
        .and_then(|deps| deps.parent())
        .ok_or_else(|| anyhow!("no target dir above {}", exe.display()))?;
    let binary = debug.join("qrsync-ops");
    ensure!(
        binary.exists(),
        "{} is not built: run `cargo build --workspace --all-targets` first",
        binary.display()
    );
    Ok(binary)
}

/// Runs `qrsync-ops <args>`; answers its exit status, standard output and standard error.
pub async fn ops_raw(args: &[&str]) -> Result<(bool, String, String)> {
    let binary = ops_binary()?;
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(binary).args(&args).output()
    })
    .await??;
    Ok((
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

/// Runs `qrsync-ops --json <args>`, which must succeed; answers its JSON.
pub async fn ops(args: &[&str]) -> Result<Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (ok, stdout, stderr) = ops_raw(&all).await?;
    ensure!(ok, "qrsync-ops {} failed: {stderr}", args.join(" "));
    serde_json::from_str(&stdout)
        .with_context(|| format!("qrsync-ops {}: {stdout}", args.join(" ")))
}
