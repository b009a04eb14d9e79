//! The `wecom-sandbox` binary as a script starts it.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Kills the child even when an assertion fails first.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_binary_prints_its_address_and_takes_settings_from_flags_and_environment() {
    let mut child = Running(
        Command::new(env!("CARGO_BIN_EXE_wecom-sandbox"))
            .args(["--listen", "127.0.0.1:0", "--seed", "99"])
            .env("SANDBOX_LIMIT_PER_MINUTE", "5")
            .env("RUST_LOG", "off")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line
    })
    .await
    .unwrap();
    let url = line
        .trim()
        .strip_prefix("wecom-sandbox listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let health = http
        .get(format!("{url}/_sandbox/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let config: serde_json::Value = http
        .get(format!("{url}/_sandbox/config"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(config["seed"], 99);
    assert_eq!(config["limit_per_minute"], 5);
    assert_eq!(config["token_lifetime_secs"], 7200);
}
