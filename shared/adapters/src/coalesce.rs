//! Requests made at about the same moment, sent as one: each caller awaits its own answer,
//! and a worker gathers what arrives within a short linger (or until a batch is full) into one
//! call of `send`. The egress relays use it (`wecom::transport`): the pushes of one refresh
//! invocation go out together, so a relay invocation carries several WeCom calls, and a busy
//! refresh holds about one relay's concurrency per address instead of one per call in flight.
//!
//! Written here rather than taken from a crate: `batched` makes a free function of a macro
//! (one per program, not one per relay with its own client), and the others found (`batchy`,
//! `scuffle-batching`) are early releases with dependencies of their own. This is a channel,
//! a linger and a spawn.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

type Waiting<Req, Rep> = (Req, oneshot::Sender<Rep>);

/// A handle to a running coalescer; clones share its worker.
pub struct Coalescer<Req, Rep> {
    requests: mpsc::UnboundedSender<Waiting<Req, Rep>>,
}

impl<Req, Rep> std::fmt::Debug for Coalescer<Req, Rep> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalescer").finish_non_exhaustive()
    }
}

impl<Req, Rep> Clone for Coalescer<Req, Rep> {
    fn clone(&self) -> Self {
        Self {
            requests: self.requests.clone(),
        }
    }
}

impl<Req, Rep> Coalescer<Req, Rep>
where
    Req: Send + 'static,
    Rep: Send + 'static,
{
    /// Starts the worker on the current Tokio runtime: after a request arrives it waits up to
    /// `linger` for more, at most `most` in all, then calls `send` with them and hands each
    /// caller the reply at its request's position. Batches are sent concurrently: a slow one
    /// holds only its own callers.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime, as `tokio::spawn` does.
    pub fn start<F, Fut>(linger: Duration, most: usize, send: F) -> Self
    where
        F: Fn(Vec<Req>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<Rep>> + Send + 'static,
    {
        let (requests, mut arriving) = mpsc::unbounded_channel::<Waiting<Req, Rep>>();
        let send = Arc::new(send);
        let most = most.max(1);
        tokio::spawn(async move {
            while let Some(first) = arriving.recv().await {
                let mut batch = vec![first];
                let deadline = tokio::time::Instant::now() + linger;
                while batch.len() < most {
                    tokio::select! {
                        next = arriving.recv() => match next {
                            Some(waiting) => batch.push(waiting),
                            None => break,
                        },
                        () = tokio::time::sleep_until(deadline) => break,
                    }
                }
                let (requests, callers): (Vec<Req>, Vec<oneshot::Sender<Rep>>) =
                    batch.into_iter().unzip();
                let send = Arc::clone(&send);
                tokio::spawn(async move {
                    let replies = send(requests).await;
                    // A caller whose reply is missing sees its sender dropped.
                    for (caller, reply) in callers.into_iter().zip(replies) {
                        let _ = caller.send(reply);
                    }
                });
            }
        });
        Self { requests }
    }

    /// Sends `request` with whatever else arrives within the linger; `None` when no reply
    /// came for it (the batch's send answered fewer replies, or the worker is gone).
    pub async fn call(&self, request: Req) -> Option<Rep> {
        let (reply, answer) = oneshot::channel();
        self.requests.send((request, reply)).ok()?;
        answer.await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The batches `send` was called with, in order.
    type Batches = Arc<Mutex<Vec<Vec<u32>>>>;

    fn recording(linger: Duration, most: usize) -> (Coalescer<u32, u32>, Batches) {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&batches);
        let coalescer = Coalescer::start(linger, most, move |requests: Vec<u32>| {
            seen.lock().expect("lock").push(requests.clone());
            async move { requests.into_iter().map(|n| n * 10).collect() }
        });
        (coalescer, batches)
    }

    #[tokio::test(start_paused = true)]
    async fn requests_within_the_linger_go_out_together_and_each_caller_gets_its_own_reply() {
        let (coalescer, batches) = recording(Duration::from_millis(5), 16);
        let calls = (1..=4).map(|n| {
            let coalescer = coalescer.clone();
            async move { coalescer.call(n).await }
        });
        let replies = futures::future::join_all(calls).await;
        assert_eq!(replies, [Some(10), Some(20), Some(30), Some(40)]);
        assert_eq!(*batches.lock().expect("lock"), [vec![1, 2, 3, 4]]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_goes_at_once_and_a_later_request_starts_the_next() {
        let (coalescer, batches) = recording(Duration::from_millis(5), 3);
        let calls = (1..=5).map(|n| {
            let coalescer = coalescer.clone();
            async move { coalescer.call(n).await }
        });
        futures::future::join_all(calls).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(coalescer.call(6).await, Some(60));
        assert_eq!(
            *batches.lock().expect("lock"),
            [vec![1, 2, 3], vec![4, 5], vec![6]]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_the_batch_answers_no_reply_for_gets_none() {
        let coalescer = Coalescer::start(
            Duration::from_millis(5),
            16,
            |requests: Vec<u32>| async move { requests.into_iter().take(1).collect::<Vec<u32>>() },
        );
        let (first, second) = tokio::join!(coalescer.call(1), coalescer.call(2));
        assert_eq!((first, second), (Some(1), None));
    }
}
