//! The order in which a round's positions are handed out (issue 33, item 3).
//!
//! Visit n still counts against round (n - 1) / R and position (n - 1) mod R of it (R: the
//! round's length, the sum of the slots' `takes`), so every round hands out each of its R
//! positions exactly once. Which slot a position reaches is a shuffle of the round's
//! positions, drawn from ChaCha20 keyed by the record's secret order key with the round's
//! number as the stream: every round is a permutation of the slots (each member gets exactly
//! their takes), a different one each round, and without the key a visitor who saw the slots
//! of visits 1..k cannot tell which comes next beyond what is left of the round.

use crate::admin::commands::MAX_ROUND_LIMIT;
use crate::membership::{RotationSlot, MAX_USERS_PER_CODE};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// The longest round a code can be configured to have: 100 members taking the highest round
/// limit each. A stored rotation with a longer round was not written by the single writer,
/// and shuffling it could cost any amount of memory, so it picks nobody.
pub const MAX_ROUND: u64 = MAX_USERS_PER_CODE as u64 * MAX_ROUND_LIMIT as u64;

/// The secret that keys a record's order: 32 random bytes kept on the code's rotation record
/// (written with its first visit after a push, so each new record has a new key), read back
/// by the visit's own write. It never leaves the landing function: never in an answer, never
/// in a log (`Debug` prints no byte of it).
#[derive(Clone, PartialEq, Eq)]
pub struct OrderKey([u8; 32]);

impl OrderKey {
    pub const LEN: usize = 32;

    pub fn new(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The key of stored bytes; `None` unless exactly `LEN` of them.
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        <[u8; 32]>::try_from(bytes).ok().map(Self)
    }
}

impl std::fmt::Debug for OrderKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OrderKey([redacted])")
    }
}

/// The member visit `number` (1-based) reaches on `rotation` ordered by `key`, or `None` on an
/// empty round, visit 0, or a round longer than `MAX_ROUND`.
pub fn pick<'r>(
    rotation: &'r [RotationSlot],
    number: u64,
    key: &OrderKey,
) -> Option<&'r RotationSlot> {
    let round: u64 = rotation.iter().map(|slot| u64::from(slot.takes)).sum();
    if round == 0 || round > MAX_ROUND || number == 0 {
        return None;
    }
    let which_round = (number - 1) / round;
    let position = usize::try_from((number - 1) % round).ok()?;
    // One entry per position, naming its slot; at most MAX_ROUND of them (400 KB).
    let mut positions: Vec<u32> = Vec::with_capacity(usize::try_from(round).ok()?);
    for (slot, takes) in rotation.iter().map(|slot| slot.takes).enumerate() {
        let slot = u32::try_from(slot).ok()?;
        positions.extend(std::iter::repeat_n(slot, takes as usize));
    }
    let mut draws = ChaCha20Rng::from_seed(key.0);
    draws.set_stream(which_round);
    positions.shuffle(&mut draws);
    rotation.get(*positions.get(position)? as usize)
}
