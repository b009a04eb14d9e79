//! Seeded randomness. Each concern draws from its own stream so that, for example, issuing one
//! more token does not change which member the next scan lands on: a run is reproducible from
//! its seed as long as each concern sees the same sequence of requests.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const TOKEN_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

pub(crate) struct Rngs {
    /// Access tokens, config ids.
    pub ids: StdRng,
    /// Member picks, external user ids, welcome codes.
    pub scans: StdRng,
    /// `rate` fault selection.
    pub faults: StdRng,
    /// Nonces and the delay before a duplicate copy.
    pub delivery: StdRng,
    /// Which code a campaign scans next and whether it duplicates.
    pub campaigns: StdRng,
}

impl Rngs {
    pub fn new(seed: u64) -> Self {
        // seed_from_u64 runs the seed through PCG32 first, so neighbouring stream numbers give
        // unrelated streams.
        let stream = |n: u64| StdRng::seed_from_u64(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        Self {
            ids: stream(1),
            scans: stream(2),
            faults: stream(3),
            delivery: stream(4),
            campaigns: stream(5),
        }
    }
}

fn from_alphabet(rng: &mut StdRng, alphabet: &[u8], len: usize) -> String {
    (0..len)
        .map(|_| char::from(alphabet[rng.gen_range(0..alphabet.len())]))
        .collect()
}

pub(crate) fn alphanumeric(rng: &mut StdRng, len: usize) -> String {
    from_alphabet(rng, ALNUM, len)
}

pub(crate) fn token(rng: &mut StdRng, len: usize) -> String {
    from_alphabet(rng, TOKEN_CHARS, len)
}

pub(crate) fn hex_id(rng: &mut StdRng, len: usize) -> String {
    from_alphabet(rng, b"0123456789abcdef", len)
}

pub(crate) fn digits(rng: &mut StdRng, len: usize) -> String {
    from_alphabet(rng, b"0123456789", len)
}
