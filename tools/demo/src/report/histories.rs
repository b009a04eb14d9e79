//! Every code's push history, which the report's sections read to tell when a list changed.

use crate::measured::{Inputs, Push};
use std::collections::HashMap;

/// Every code's pushes in time order, with the list it was created with.
pub(super) struct Histories<'a> {
    pushes: HashMap<&'a str, Vec<&'a Push>>,
    created: &'a HashMap<String, Vec<String>>,
}

impl<'a> Histories<'a> {
    pub(super) fn new(inputs: &'a Inputs<'_>) -> Self {
        let mut pushes: HashMap<&str, Vec<&Push>> = HashMap::new();
        for (code, push) in &inputs.pushes {
            pushes.entry(code.as_str()).or_default().push(push);
        }
        for list in pushes.values_mut() {
            list.sort_by_key(|p| p.pushed_at_ms);
        }
        Self {
            pushes,
            created: &inputs.created_lists,
        }
    }

    pub(super) fn of(&self, code: &str) -> &[&'a Push] {
        self.pushes.get(code).map(Vec::as_slice).unwrap_or_default()
    }

    /// The list WeCom held for `code` just before `at_ms`.
    pub(super) fn list_before(&self, code: &str, at_ms: u64) -> Option<&Vec<String>> {
        self.of(code)
            .iter()
            .rev()
            .find(|p| p.pushed_at_ms < at_ms)
            .map(|p| &p.users)
            .or_else(|| self.created.get(code))
    }

    /// The first push at or after `at_ms` whose list does (`listed`) or does not name `staff`.
    pub(super) fn first_push(
        &self,
        code: &str,
        at_ms: u64,
        staff: &str,
        listed: bool,
    ) -> Option<&Push> {
        self.of(code)
            .iter()
            .find(|p| p.pushed_at_ms >= at_ms && p.users.iter().any(|u| u == staff) == listed)
            .copied()
    }

    /// For a change at `at_ms` that takes `staff` off `codes`: the codes that listed them then,
    /// and for each the delay until the push removing them (`None`: no such push).
    pub(super) fn removals<'c>(
        &self,
        codes: impl IntoIterator<Item = &'c str>,
        staff: &str,
        at_ms: u64,
    ) -> Vec<Option<u64>> {
        codes
            .into_iter()
            .filter(|code| {
                self.list_before(code, at_ms)
                    .is_some_and(|users| users.iter().any(|u| u == staff))
            })
            .map(|code| {
                self.first_push(code, at_ms, staff, false)
                    .map(|p| p.pushed_at_ms.saturating_sub(at_ms))
            })
            .collect()
    }
}
