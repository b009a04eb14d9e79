//! WeCom's server API over HTTP: the client (`client`), its access tokens (`tokens`), one
//! request and its answer read (`answer`, which both use), the scrubbing of secrets from what
//! it keeps (`redaction`), and the domain's ports on it (`ports`).

mod answer;
mod client;
mod ports;
mod redaction;
mod robot;
mod tokens;

pub use client::{WeComClient, CALL_MARGIN, WECOM_API_BASE_URL};
pub use robot::WeComRobot;
pub use tokens::{SharedToken, TokenStore};
