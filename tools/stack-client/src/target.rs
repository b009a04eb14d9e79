//! Which local world a tool works on: the command-line flags `make demo` and `make bench`
//! share (each with the environment variable the Makefile sets).

/// The deployed stack and the WeCom sandbox a tool drives.
#[derive(Debug, Clone, clap::Args)]
pub struct Target {
    /// CloudFormation stack to find everything in.
    #[arg(long, env = "QRSYNC_STACK", default_value = "qrsync-local")]
    pub stack: String,
    /// The WeCom sandbox's base URL.
    #[arg(
        long,
        env = "QRSYNC_SANDBOX_URL",
        default_value = "http://127.0.0.1:4580"
    )]
    pub sandbox_url: String,
    /// API base URL; derived from the stack's outputs and AWS_ENDPOINT_URL when absent.
    #[arg(long, env = "QRSYNC_API_URL")]
    pub api_url: Option<String>,
}
