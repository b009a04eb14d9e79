//! A local stand-in for WeCom: the contact-way ("联系我") API with WeCom's errcodes, tokens
//! and frequency limits; injected faults; and scans that deliver encrypted callbacks the way
//! WeCom does (timeouts, retries, duplicates). `/_sandbox/*` steers and observes it.
//!
//! Start it in-process with [`Sandbox::start`], or run the `wecom-sandbox` binary.

mod api;
mod app;
mod campaigns;
mod clock;
mod config;
mod conn;
mod contact_ways;
mod control;
mod delivery;
mod faults;
mod journal;
mod limits;
mod links;
mod rng;
mod robot;
mod scans;
mod state;
mod tokens;
mod wecom;

pub use config::{defaults, SandboxConfig};
pub use faults::{FaultKind, FaultRule};

use app::App;
use axum::Router;
use conn::{ConnHandle, CuttableListener};
use std::future::Future;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

fn router(app: app::SharedApp) -> Router {
    Router::new()
        .merge(api::routes())
        .merge(control::routes())
        .merge(robot::routes())
        .with_state(app)
}

fn io_error(error: impl std::error::Error + Send + Sync + 'static) -> std::io::Error {
    std::io::Error::other(error)
}

async fn run(
    listener: TcpListener,
    app: app::SharedApp,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let service = router(app.clone()).into_make_service_with_connect_info::<ConnHandle>();
    let served = axum::serve(CuttableListener::new(listener), service)
        .with_graceful_shutdown(shutdown)
        .await;
    app.stop_campaigns();
    served
}

/// Serves on `listener` until `shutdown` resolves.
pub async fn serve_with_shutdown(
    listener: TcpListener,
    config: SandboxConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    run(listener, App::new(config).map_err(io_error)?, shutdown).await
}

/// Serves on `listener` until the task is dropped or the process ends.
pub async fn serve(listener: TcpListener, config: SandboxConfig) -> std::io::Result<()> {
    serve_with_shutdown(listener, config, std::future::pending()).await
}

/// A sandbox running on a background task; stopped when dropped.
pub struct Sandbox {
    addr: SocketAddr,
    app: app::SharedApp,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Sandbox {
    /// Binds 127.0.0.1 on a free port.
    pub async fn start(config: SandboxConfig) -> std::io::Result<Self> {
        Self::start_on(TcpListener::bind(("127.0.0.1", 0)).await?, config)
    }

    /// Must be called within a Tokio runtime.
    pub fn start_on(listener: TcpListener, config: SandboxConfig) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let app = App::new(config).map_err(io_error)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(run(listener, app.clone(), async {
            // A dropped sender means the same as an explicit stop.
            let _ = stopped.await;
        }));
        Ok(Self {
            addr,
            app,
            stop: Some(stop),
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, lets requests in flight finish, and waits.
    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.map_err(io_error)?
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.app.stop_campaigns();
        self.task.abort();
    }
}
