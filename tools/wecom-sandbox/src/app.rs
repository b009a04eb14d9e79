//! The shared handle every request and background task works through.

use crate::config::SandboxConfig;
use crate::state::State;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

pub(crate) struct App {
    state: Mutex<State>,
    /// Delivers callbacks; built once so connections to a receiver are reused.
    pub http: reqwest::Client,
    /// What `POST /_sandbox/reset` goes back to, with the seed resolved at start.
    pub startup: SandboxConfig,
    pub startup_seed: u64,
}

pub(crate) type SharedApp = Arc<App>;

impl App {
    pub fn new(startup: SandboxConfig) -> Result<SharedApp, reqwest::Error> {
        let startup_seed = startup.seed.unwrap_or_else(rand::random);
        let http = reqwest::Client::builder()
            // Receivers are local; a proxy from the environment would only get in the way.
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5))
            .build()?;
        Ok(Arc::new(Self {
            state: Mutex::new(State::new(&startup, startup_seed)),
            http,
            startup,
            startup_seed,
        }))
    }

    /// Never held across an `.await`. A panic while it is held leaves at worst one request half
    /// applied; refusing every later request would be worse for a test tool, so poisoning is
    /// ignored.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Campaign tasks hold the app alive; they must not outlive the server that owns them.
    pub fn stop_campaigns(&self) {
        for campaign in self.lock().campaigns.values_mut() {
            if let Some(abort) = campaign.abort.take() {
                abort.abort();
            }
            campaign.running = false;
        }
    }
}
