//! The day rollover: after the campaign, the stack's clock (every function's, and WeCom's with
//! it) jumps to just before the tenant's midnight; nothing else happens, and the schedule tick
//! alone must bring back the staff removed for a daily limit or the company cap.
//!
//! The tenant's timezone is chosen so that its midnight comes soon after the campaign: the jump
//! stays well within the tick's one-hour catch-up.

/// What the rollover did, as the demo saw it.
#[derive(Debug, Clone, Default)]
pub struct Rollover {
    /// Why it did not run (the stack lacks a part, or the run was told to leave it out).
    pub skipped: Option<String>,
    /// Left out on purpose (`--no-rollover`): not a failure.
    pub left_out: bool,
    pub midnight_ms: u64,
    /// How far the clock jumped (stack and sandbox), in seconds.
    pub jump_secs: i64,
    /// The stack's time right after the jump.
    pub jumped_to_ms: u64,
    /// Real seconds from the jump until the tick moved the midnight item on.
    pub tick_secs: Option<f64>,
    /// The queues drained after the rollover's refreshes.
    pub drained: bool,
    /// (code, staff) pairs removed for a daily limit or the cap on the day that ended and
    /// eligible otherwise: the rollover must put each back.
    pub expected_back: Vec<(String, String)>,
    /// Of those, the pairs on the code's sandbox list after the rollover.
    pub back: Vec<(String, String)>,
    /// Pushes between the jump and midnight (none should happen: no event).
    pub pushes_before_midnight: usize,
    /// Pushes after midnight serving the rollover's reasons: (code, pushed_at_ms).
    pub pushes: Vec<(String, u64)>,
    /// The refresh counters of the new day: reasons, recomputes, pushes.
    pub new_day: Option<(u64, u64, u64)>,
    /// Codes whose sandbox list differs from the recompute at the new day, with details.
    pub differ: Vec<String>,
    pub codes: usize,
    /// Restoring the clock afterwards failed.
    pub restore_error: Option<String>,
}
