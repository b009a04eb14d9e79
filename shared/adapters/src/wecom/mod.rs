//! WeCom's server API over HTTP: the client (`client`), its access tokens (`tokens`), how a
//! request reaches WeCom, from this process or through an egress relay (`transport`), its
//! answer read (`answer`, which both use), the scrubbing of secrets from what
//! it keeps (`redaction`), and the domain's ports on it (`ports`).

mod answer;
mod client;
mod ports;
mod redaction;
mod robot;
#[cfg(test)]
mod test_server;
mod tokens;
mod transport;

pub use client::{call_bound, WeComClient, CALL_MARGIN, WECOM_API_BASE_URL};
pub use robot::WeComRobot;
pub use tokens::{SharedToken, TokenStore};
pub use transport::{
    Direct, RelayAnswer, RelayInvocation, Relays, WeComApi, WeComReply, WeComRequest,
    MOST_REPLY_BYTES, MOST_REQUESTS_PER_INVOCATION, MOST_REQUEST_BODY_BYTES, RELAY_LINGER,
    RELAY_MARGIN, RELAY_USER_AGENT,
};
