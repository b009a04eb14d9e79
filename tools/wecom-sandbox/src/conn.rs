//! A TCP listener whose connections can be cut from inside a request handler, so the `drop`
//! fault closes the socket without any HTTP response, as a network failure would.
//!
//! Each accepted socket is duplicated; the handler gets the twin through `ConnectInfo` and
//! shuts it down. Shutdown acts on the socket, not the descriptor, so the client sees the
//! connection close at once and any response hyper writes afterwards goes nowhere.

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

pub(crate) struct CuttableListener {
    inner: TcpListener,
}

impl CuttableListener {
    pub fn new(inner: TcpListener) -> Self {
        Self { inner }
    }
}

/// The peer of a connection and the means to cut it.
#[derive(Debug, Clone)]
pub struct ConnHandle {
    pub peer: SocketAddr,
    twin: Option<Arc<std::net::TcpStream>>,
}

impl ConnHandle {
    /// Closes the connection in both directions; false if this connection cannot be cut.
    pub fn cut(&self) -> bool {
        self.twin
            .as_ref()
            .is_some_and(|twin| twin.shutdown(Shutdown::Both).is_ok())
    }
}

fn with_twin(stream: TcpStream) -> std::io::Result<(TcpStream, Arc<std::net::TcpStream>)> {
    let std_stream = stream.into_std()?;
    let twin = std_stream.try_clone()?;
    let stream = TcpStream::from_std(std_stream)?;
    // Small JSON answers; waiting to coalesce them only adds latency.
    stream.set_nodelay(true)?;
    Ok((stream, Arc::new(twin)))
}

impl Listener for CuttableListener {
    type Io = TcpStream;
    type Addr = ConnHandle;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, peer)) => match with_twin(stream) {
                    Ok((stream, twin)) => {
                        return (
                            stream,
                            ConnHandle {
                                peer,
                                twin: Some(twin),
                            },
                        )
                    }
                    Err(error) => {
                        tracing::warn!(%error, "could not prepare an accepted connection")
                    }
                },
                // Like axum's own listener: per-connection errors are the peer's problem;
                // anything else (e.g. out of descriptors) deserves a pause before retrying.
                Err(error) if is_connection_error(&error) => {}
                Err(error) => {
                    tracing::error!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(ConnHandle {
            peer: self.inner.local_addr()?,
            twin: None,
        })
    }
}

fn is_connection_error(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        error.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

impl Connected<IncomingStream<'_, CuttableListener>> for ConnHandle {
    fn connect_info(stream: IncomingStream<'_, CuttableListener>) -> Self {
        stream.remote_addr().clone()
    }
}
