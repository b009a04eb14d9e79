//! The per-code lease (docs/rules.md "Lanes"; rule 3's single writer across lanes): the fast lane,
//! the slow lane and a reason back from a retry queue each hold it around lease -> recompute
//! -> push -> record, so no two of them write one code at the same moment.
//!
//! A lease expires on its own (shorter than the function's timeout, so a crashed writer
//! frees the code before its messages come back), a WeCom call starts only while enough of
//! the lease is left to cover it, and every record write is fenced on the lease: a writer
//! whose lease was taken over has its record refused, so it cannot overwrite a newer one.

/// A lease held on one code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Unique per acquisition: the fence every record write is conditioned on.
    pub holder: String,
    pub expires_at_ms: u64,
}

impl Lease {
    /// A fresh random holder id (128 bits).
    pub fn new_holder() -> String {
        format!("{:032x}", rand::random::<u128>())
    }

    /// Whether a call that may take `call_ms` ends before the lease does.
    pub fn covers(&self, now_ms: u64, call_ms: u64) -> bool {
        now_ms.saturating_add(call_ms) < self.expires_at_ms
    }
}

/// The answer to an attempt to take a code's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    LeasedRefresh(Lease),
    /// Another writer holds it for `retry_after_ms` more.
    Busy {
        retry_after_ms: u64,
    },
    /// Free, but taken since the count the attempt expected: what was read before it may be
    /// out of date (another writer may have pushed). Nothing was taken.
    TakenSince,
}

/// What a fenced record write does with the lease once it has written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterRecord {
    /// The writer goes on (another push may follow): it keeps the lease.
    Keep,
    /// The writer is done: the same write gives the lease back.
    Release,
}

/// What became of a fenced record write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum FencedWrite {
    Written,
    /// The lease was taken over: the record was refused and nothing written.
    LeaseLost,
}

/// How long leases last and how much of one a WeCom call needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimes {
    pub duration_ms: u64,
    /// The longest one WeCom call may take (its timeout plus a margin).
    pub call_ms: u64,
}
