//! WeCom: creating and deleting contact ways (the admin API) and replacing their lists (the
//! refresh), in one `FakeWeCom`.

use crate::admin::ContactWays;
use crate::refresh::{AcquisitionLinks, ContactWayPusher};
use crate::sweep::{ContactWayReader, OrphanFinder};
use crate::wecom::acquisition::AcquisitionLink;
use crate::wecom::contact_way::{
    ContactWay, ContactWayKind, CorpCredentials, CreatedContactWay, NewContactWay,
};
use crate::wecom::errors::WeComError;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Default)]
struct WeComState {
    read_failure: Option<WeComError>,
    created: Vec<(CorpCredentials, NewContactWay)>,
    deleted: Vec<String>,
    failure: Option<WeComError>,
    delete_failure: Option<WeComError>,
    /// Every list sent to a contact way, accepted or not, and the ones WeCom accepted.
    calls: Vec<(String, Vec<String>)>,
    accepted: Vec<(String, Vec<String>)>,
    /// Answers for the next list replacements, before anything else.
    scripted: VecDeque<WeComError>,
    /// Every list replacement fails as transient while on.
    pushes_fail: bool,
    /// Contact ways whose list replacements fail with their error.
    failing_ways: HashMap<String, WeComError>,
    /// Users WeCom refuses with 60111 (a list holding any of them is refused).
    refused: HashSet<String>,
    /// Lists changed behind qrsync's back, and how many read-backs were answered.
    changed: HashMap<String, Vec<String>>,
    /// Departments added to contact ways in WeCom's console, and contact ways whose reads
    /// are answered without their user list.
    departments: HashMap<String, Vec<u64>>,
    partial: HashSet<String>,
    /// Corps whose contact ways cannot be listed, and the error their listing fails with.
    listings_fail: HashMap<String, WeComError>,
    reads: usize,
    /// Acquisition links created (link id, user) and deleted, and whether creating fails.
    links: Vec<(String, String)>,
    links_deleted: Vec<String>,
    links_fail: Option<WeComError>,
    link_deletes_fail: Option<WeComError>,
    /// When on, none of the histories above grows with a call (`calls`, `accepted`, `links`,
    /// `links_deleted`): a simulation makes millions of calls. What WeCom holds stays known.
    forgets_history: bool,
    /// Each contact way's last accepted list: what WeCom holds now, with or without history.
    holds: HashMap<String, Vec<String>>,
    links_created: usize,
    /// How long each list replacement takes (on tokio's clock), and the most that were ever
    /// in flight at once.
    push_latency: Option<std::time::Duration>,
    pushes_in_flight: usize,
    most_pushes_in_flight: usize,
}

/// WeCom's contact ways: numbers them `cw-1`, `cw-2`... and remembers what was asked. Deleting
/// one it did not create, or deleted already, is 41044 as in WeCom. Replacing a way's list is
/// recorded, and refused as told (`script`, `fail_pushes`, `fail_pushes_to`, `refuse`).
#[derive(Clone, Default)]
pub struct FakeWeCom {
    state: Arc<Mutex<WeComState>>,
}

impl FakeWeCom {
    fn state(&self) -> MutexGuard<'_, WeComState> {
        self.state.lock().expect("fake WeCom lock")
    }

    /// Each later list replacement takes `latency` before it is answered.
    pub fn take_for_each_push(&self, latency: std::time::Duration) {
        self.state().push_latency = Some(latency);
    }

    /// The most list replacements that were in flight at once.
    pub fn most_pushes_in_flight(&self) -> usize {
        self.state().most_pushes_in_flight
    }

    /// Every later create fails with `error`.
    pub fn fail_with(&self, error: WeComError) {
        self.state().failure = Some(error);
    }

    /// Later creates succeed again.
    pub fn stop_failing_creates(&self) {
        self.state().failure = None;
    }

    /// Every later read-back fails with `error`; `None` heals it.
    pub fn fail_reads_with(&self, error: Option<WeComError>) {
        self.state().read_failure = error;
    }

    /// Every later delete fails with `error`; `None` heals it.
    pub fn fail_deletes_with(&self, error: Option<WeComError>) {
        self.state().delete_failure = error;
    }

    pub fn created(&self) -> Vec<(CorpCredentials, NewContactWay)> {
        self.state().created.clone()
    }

    pub fn deleted(&self) -> Vec<String> {
        self.state().deleted.clone()
    }

    /// The next list replacement answers `error` (each scripted answer is used once).
    pub fn script(&self, error: WeComError) {
        self.state().scripted.push_back(error);
    }

    /// While on, every list replacement fails as transient.
    pub fn fail_pushes(&self, fail: bool) {
        self.state().pushes_fail = fail;
    }

    /// Every list replacement of contact way `config_id` fails with `error`.
    pub fn fail_pushes_to(&self, config_id: &str, error: WeComError) {
        self.state()
            .failing_ways
            .insert(config_id.to_owned(), error);
    }

    /// WeCom refuses these users on any contact way from now on.
    pub fn refuse(&self, users: &[&str]) {
        let mut state = self.state();
        state.refused.extend(users.iter().map(|u| (*u).to_owned()));
    }

    /// Every list sent, accepted or not, in order.
    pub fn calls(&self) -> Vec<Vec<String>> {
        self.state()
            .calls
            .iter()
            .map(|(_, users)| users.clone())
            .collect()
    }

    /// Every list WeCom accepted, in order.
    pub fn lists(&self) -> Vec<Vec<String>> {
        self.state()
            .accepted
            .iter()
            .map(|(_, users)| users.clone())
            .collect()
    }

    /// Changes a contact way's list behind qrsync's back: read-backs see it until a push.
    pub fn change_behind_our_back(&self, config_id: &str, users: &[&str]) {
        self.state().changed.insert(
            config_id.to_owned(),
            users.iter().map(|u| (*u).to_owned()).collect(),
        );
    }

    /// Read-backs answered (`get_contact_way`).
    /// A department added to the contact way in WeCom's console: it routes to everyone in it.
    pub fn add_department_behind_our_back(&self, config_id: &str, department: u64) {
        self.state()
            .departments
            .entry(config_id.to_owned())
            .or_default()
            .push(department);
    }

    /// Reads of the contact way are answered without its user list (`None`: whole again).
    pub fn answer_partially(&self, config_id: &str, partial: bool) {
        let mut state = self.state();
        if partial {
            state.partial.insert(config_id.to_owned());
        } else {
            state.partial.remove(config_id);
        }
    }

    /// Listing the contact ways of `corp_id` fails with `error` (`None`: lists again).
    pub fn fail_listings_of(&self, corp_id: &str, error: Option<WeComError>) {
        let mut state = self.state();
        match error {
            Some(error) => state.listings_fail.insert(corp_id.to_owned(), error),
            None => state.listings_fail.remove(corp_id),
        };
    }

    pub fn reads(&self) -> usize {
        self.state().reads
    }

    /// Every list WeCom accepted, with its contact way, in order.
    pub fn pushes(&self) -> Vec<(String, Vec<String>)> {
        self.state().accepted.clone()
    }

    /// From now on, keeps no history of calls, lists, links (`calls`, `lists`, `pushes`,
    /// `links`, `links_deleted` stay as they are); what each contact way holds is still kept.
    pub fn forget_history(&self) {
        self.state().forgets_history = true;
    }

    /// WeCom holds `users` on the contact way already, as if pushed before (no call made or
    /// recorded): a world set up in the state its day starts from.
    pub fn hold(&self, config_id: &str, users: Vec<String>) {
        self.state().holds.insert(config_id.to_owned(), users);
    }

    /// What WeCom took last for the contact way (pushed, or `hold`), `None` when it holds
    /// only what it was created with or was changed behind qrsync's back.
    pub fn held(&self, config_id: &str) -> Option<Vec<String>> {
        let state = self.state();
        if state.changed.contains_key(config_id) {
            return None;
        }
        state.holds.get(config_id).cloned()
    }

    /// What WeCom holds for the contact way now, as a read-back would answer (no read counted).
    pub fn holds(&self, config_id: &str) -> Vec<String> {
        Self::list_of(&self.state(), config_id)
    }

    /// The list changed behind our back, else the last accepted, else what it was created
    /// with (`cw-N`), else none.
    fn list_of(state: &WeComState, config_id: &str) -> Vec<String> {
        if let Some(users) = state.changed.get(config_id) {
            return users.clone();
        }
        if let Some(users) = state.holds.get(config_id) {
            return users.clone();
        }
        let created = config_id
            .strip_prefix("cw-")
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| state.created.get(n.checked_sub(1)?));
        created
            .map(|(_, way)| way.users.clone())
            .unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl ContactWays for FakeWeCom {
    async fn create(
        &self,
        corp: &CorpCredentials,
        way: &NewContactWay,
    ) -> Result<CreatedContactWay, WeComError> {
        let mut state = self.state();
        if let Some(error) = state.failure.clone() {
            return Err(error);
        }
        state.created.push((corp.clone(), way.clone()));
        let config_id = format!("cw-{}", state.created.len());
        Ok(CreatedContactWay {
            qr_code: Some(format!("https://wework.example/qr/{config_id}")),
            config_id,
        })
    }

    async fn delete(&self, _corp: &CorpCredentials, config_id: &str) -> Result<(), WeComError> {
        let mut state = self.state();
        if let Some(error) = state.delete_failure.clone() {
            return Err(error);
        }
        let exists = (1..=state.created.len()).any(|i| format!("cw-{i}") == config_id)
            && !state.deleted.iter().any(|d| d == config_id);
        if !exists {
            return Err(WeComError::CodeGone { errcode: 41044 });
        }
        state.deleted.push(config_id.to_owned());
        Ok(())
    }
}

#[async_trait::async_trait]
impl ContactWayPusher for FakeWeCom {
    async fn replace_users(
        &self,
        _: &CorpCredentials,
        config_id: &str,
        users: &[String],
    ) -> Result<(), WeComError> {
        let latency = {
            let mut state = self.state();
            state.pushes_in_flight += 1;
            state.most_pushes_in_flight = state.most_pushes_in_flight.max(state.pushes_in_flight);
            state.push_latency
        };
        if let Some(latency) = latency {
            tokio::time::sleep(latency).await;
        }
        let mut state = self.state();
        state.pushes_in_flight -= 1;
        if !state.forgets_history {
            state.calls.push((config_id.to_owned(), users.to_vec()));
        }
        if let Some(error) = state.scripted.pop_front() {
            return Err(error);
        }
        if let Some(error) = state.failing_ways.get(config_id) {
            return Err(error.clone());
        }
        if state.pushes_fail {
            return Err(WeComError::Transient {
                detail: "switched off".into(),
            });
        }
        if users.iter().any(|u| state.refused.contains(u)) {
            return Err(WeComError::StaffUnusable {
                errcode: 60111,
                errmsg: "invalid userid".into(),
            });
        }
        state.changed.remove(config_id);
        // The push sends `party: []`: WeCom's list is ours, users only.
        state.departments.remove(config_id);
        state.holds.insert(config_id.to_owned(), users.to_vec());
        if !state.forgets_history {
            state.accepted.push((config_id.to_owned(), users.to_vec()));
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl ContactWayReader for FakeWeCom {
    /// The list changed behind our back, else the last accepted, else what it was created
    /// with (`cw-N`), else none; the state and remark it was created with.
    async fn contact_way(
        &self,
        _: &CorpCredentials,
        config_id: &str,
    ) -> Result<ContactWay, WeComError> {
        let mut state = self.state();
        state.reads += 1;
        if let Some(error) = state.read_failure.clone() {
            return Err(error);
        }
        let created = config_id
            .strip_prefix("cw-")
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| state.created.get(n.checked_sub(1)?))
            .map(|(_, way)| way.clone());
        let (way_state, remark) = created
            .map(|way| (way.state, way.remark.unwrap_or_default()))
            .unwrap_or_default();
        Ok(ContactWay {
            config_id: config_id.to_owned(),
            kind: ContactWayKind::Multi,
            state: way_state,
            remark,
            users: (!state.partial.contains(config_id)).then(|| Self::list_of(&state, config_id)),
            party: state
                .departments
                .get(config_id)
                .cloned()
                .unwrap_or_default(),
        })
    }
}

/// The fake keeps no creation times: every contact way it made is in every window.
#[async_trait::async_trait]
impl OrphanFinder for FakeWeCom {
    async fn created_between(
        &self,
        corp: &CorpCredentials,
        _: u64,
        _: u64,
    ) -> Result<Vec<String>, WeComError> {
        let state = self.state();
        if let Some(error) = state.listings_fail.get(&corp.corp_id) {
            return Err(error.clone());
        }
        Ok((1..=state.created.len())
            .map(|n| format!("cw-{n}"))
            .filter(|id| !state.deleted.contains(id))
            .collect())
    }

    async fn delete(&self, corp: &CorpCredentials, config_id: &str) -> Result<(), WeComError> {
        ContactWays::delete(self, corp, config_id).await
    }
}

impl FakeWeCom {
    /// The acquisition links created, as (link id, user).
    pub fn links(&self) -> Vec<(String, String)> {
        self.state().links.clone()
    }

    /// The acquisition links deleted, by link id.
    pub fn links_deleted(&self) -> Vec<String> {
        self.state().links_deleted.clone()
    }

    /// Every `create_link` fails with `error` while set.
    pub fn fail_links(&self, error: Option<WeComError>) {
        self.state().links_fail = error;
    }

    /// Every `delete_link` fails with `error` while set.
    pub fn fail_link_deletes(&self, error: Option<WeComError>) {
        self.state().link_deletes_fail = error;
    }
}

#[async_trait::async_trait]
impl AcquisitionLinks for FakeWeCom {
    async fn create_link(
        &self,
        _: &CorpCredentials,
        user: &str,
    ) -> Result<AcquisitionLink, WeComError> {
        let mut state = self.state();
        if let Some(error) = state.links_fail.clone() {
            return Err(error);
        }
        state.links_created += 1;
        let link_id = format!("link-{}", state.links_created);
        if !state.forgets_history {
            state.links.push((link_id.clone(), user.to_owned()));
        }
        Ok(AcquisitionLink {
            url: format!("https://work.weixin.qq.com/ca/{link_id}"),
            link_id,
        })
    }

    async fn delete_link(&self, _: &CorpCredentials, link_id: &str) -> Result<(), WeComError> {
        let mut state = self.state();
        if let Some(error) = state.link_deletes_fail.clone() {
            return Err(error);
        }
        if !state.forgets_history {
            state.links_deleted.push(link_id.to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corp() -> CorpCredentials {
        CorpCredentials {
            tenant: crate::ids::TenantId::parse("acme").expect("valid"),
            corp_id: "corp".into(),
            corp_secret: "secret".into(),
        }
    }

    #[tokio::test]
    async fn a_fake_that_forgets_history_still_answers_what_each_contact_way_holds() {
        let wecom = FakeWeCom::default();
        let alice = vec!["alice".to_owned()];
        wecom
            .replace_users(&corp(), "cw-1", &alice)
            .await
            .expect("accepted");
        wecom.forget_history();
        let bob = vec!["bob".to_owned()];
        wecom
            .replace_users(&corp(), "cw-1", &bob)
            .await
            .expect("accepted");
        wecom.create_link(&corp(), "bob").await.expect("created");
        let second = wecom.create_link(&corp(), "carol").await.expect("created");
        assert_eq!(wecom.holds("cw-1"), bob);
        let read = ContactWayReader::contact_way(&wecom, &corp(), "cw-1").await;
        assert_eq!(read.map(|way| way.users), Ok(Some(bob)));
        assert_eq!(
            wecom.pushes(),
            [("cw-1".to_owned(), alice.clone())],
            "kept until forgotten"
        );
        assert!(wecom.links().is_empty());
        assert_eq!(second.link_id, "link-2", "links are still numbered");
        wecom.hold("cw-9", alice.clone());
        let read = ContactWayReader::contact_way(&wecom, &corp(), "cw-9").await;
        assert_eq!(read.map(|way| way.users), Ok(Some(alice)));
    }
}
