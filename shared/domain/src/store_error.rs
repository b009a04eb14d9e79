//! The one error every port answers when its store or queue fails. Each module declares the
//! ports it needs in its own `ports.rs` (or, for a one-file module, at its top); the
//! `adapters` crate implements them, `fakes` (feature `test-util`) in memory.

/// A storage or queue dependency failed. The cause is kept for the log (its whole chain is
/// in the message: an AccessDenied, a throttle or a timeout reads differently at 3 a.m.);
/// callers only learn that the operation can be retried, and no answer carries the message.
#[derive(Debug, thiserror::Error)]
#[error("{what} unavailable: {}", causes(.source.as_ref()))]
pub struct StoreError {
    pub what: &'static str,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
    /// The write met another write of the same item at the same moment and was not applied
    /// (DynamoDB's transaction conflicts): at once again it is likely to go through.
    conflict: bool,
}

/// An error and its sources, joined by ": ", each distinct text once (SDK errors often
/// repeat their cause's text).
fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut texts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(cause) = next {
        let text = cause.to_string();
        if !texts.iter().any(|t| t.contains(&text)) {
            texts.push(text);
        }
        next = cause.source();
    }
    texts.join(": ")
}

impl StoreError {
    pub fn new(
        what: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            what,
            source: source.into(),
            conflict: false,
        }
    }

    /// A write that met another write of the same item and was not applied.
    pub fn conflict(
        what: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            conflict: true,
            ..Self::new(what, source)
        }
    }

    /// Whether the write met another write of the same item (and wrote nothing): a caller
    /// whose write is idempotent may try again at once instead of failing its message.
    pub fn is_conflict(&self) -> bool {
        self.conflict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("AccessDeniedException")]
    struct Denied(#[source] std::io::Error);

    #[test]
    fn a_store_error_names_what_failed_and_every_cause_once() {
        let cause = Denied(std::io::Error::other(
            "not authorized to perform dynamodb:Query",
        ));
        let error = StoreError::new("table", cause);
        assert_eq!(
            error.to_string(),
            "table unavailable: AccessDeniedException: not authorized to perform dynamodb:Query"
        );
    }
}
