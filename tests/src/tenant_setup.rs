//! A tenant set up the way the platform does it: its corp in WeCom (the sandbox) with the
//! callback URL pointing at the deployed route, and its profile, staff and codes through the
//! admin API.

use crate::{random_id, TestTenant, World};
use adapters::dynamodb::{keys, DynamoStore};
use anyhow::{ensure, Context, Result};
use domain::ids::TenantId;
use domain::ids::{CodeId, StaffId};
use domain::membership::CodeConfig;
use futures::{StreamExt, TryStreamExt};
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub struct LiveTenant<'a> {
    pub world: &'a World,
    pub tenant: TestTenant,
    pub staff: Vec<String>,
}

impl<'a> LiveTenant<'a> {
    /// A fresh tenant with `staff` in its WeCom directory, all online.
    pub async fn create(world: &'a World, staff: usize) -> Result<Self> {
        let tenant = TestTenant::random();
        let staff: Vec<String> = (0..staff)
            .map(|i| format!("s{i}-{}", random_id(4)))
            .collect();
        let users: Vec<&str> = staff.iter().map(String::as_str).collect();
        world
            .sandbox()
            .add_corp(&tenant, Some(&world.callback_url(&tenant.id)), &users)
            .await?;
        world
            .admin()
            .put(
                &format!("/tenants/{}", tenant.id),
                json!({
                    "corp_id": tenant.corp_id,
                    "corp_secret": tenant.corp_secret,
                    "callback_token": tenant.token,
                    "encoding_aes_key": tenant.aes_key,
                }),
            )
            .await?;
        let live = Self {
            world,
            tenant,
            staff,
        };
        for person in &live.staff {
            live.set_online(person, true).await?;
        }
        Ok(live)
    }

    pub async fn set_online(&self, staff: &str, online: bool) -> Result<Value> {
        self.world
            .admin()
            .put(
                &format!("/tenants/{}/staff/{staff}", self.tenant.id),
                json!({ "online": online }),
            )
            .await
    }

    /// Creates (or edits) a native code with the offline check on; answers its config id.
    pub async fn put_code(
        &self,
        code: &str,
        members: &[&str],
        daily_limit: Option<u32>,
    ) -> Result<String> {
        let answer = self
            .world
            .admin()
            .put(
                &format!("/tenants/{}/codes/{code}", self.tenant.id),
                json!({
                    "family": "native",
                    "members": members,
                    "switches": {"offline_check": true, "daily_limit": daily_limit},
                }),
            )
            .await?;
        let config_id = answer["config_id"].as_str().unwrap_or_default().to_owned();
        ensure!(!config_id.is_empty(), "no config id in {answer}");
        Ok(config_id)
    }

    /// Sets the tenant's company-wide daily cap (`None`: off), keeping its other settings.
    pub async fn set_company_daily_cap(&self, cap: Option<u32>) -> Result<Value> {
        self.world
            .admin()
            .put(
                &format!("/tenants/{}", self.tenant.id),
                json!({
                    "corp_id": self.tenant.corp_id,
                    "corp_secret": self.tenant.corp_secret,
                    "callback_token": self.tenant.token,
                    "encoding_aes_key": self.tenant.aes_key,
                    "company_daily_cap": cap,
                }),
            )
            .await
    }

    /// WeCom (the sandbox) delivers a callback with these event fields to the tenant's
    /// callback URL, signed and encrypted as WeCom does. `CreateTime` is now unless given.
    pub async fn deliver_event(&self, fields: &[(&str, &str)]) -> Result<Value> {
        let mut all: Vec<(String, String)> = vec![
            ("ToUserName".into(), self.tenant.corp_id.clone()),
            ("FromUserName".into(), "sys".into()),
            ("MsgType".into(), "event".into()),
        ];
        if !fields.iter().any(|(name, _)| *name == "CreateTime") {
            all.push(("CreateTime".into(), crate::now_secs().to_string()));
        }
        all.extend(
            fields
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let report = self
            .world
            .sandbox()
            .post(
                "/_sandbox/callbacks",
                json!({"corp_id": self.tenant.corp_id, "fields": all}),
            )
            .await?;
        ensure!(
            report.to_string().contains("\"delivered\":true"),
            "callback not delivered: {report}"
        );
        Ok(report)
    }

    /// A customer adds `staff` through `code`: WeCom's add_external_contact callback.
    pub async fn deliver_add(&self, staff: &str, code: &str, external_user: &str) -> Result<Value> {
        self.deliver_event(&[
            ("Event", "change_external_contact"),
            ("ChangeType", "add_external_contact"),
            ("UserID", staff),
            ("ExternalUserID", external_user),
            ("State", code),
        ])
        .await
    }

    /// A WeCom contact change (`change_contact`) with these fields.
    pub async fn deliver_contact_change(&self, fields: &[(&str, &str)]) -> Result<Value> {
        let mut all = vec![("Event", "change_contact")];
        all.extend_from_slice(fields);
        self.deliver_event(&all).await
    }

    /// The user list WeCom (the sandbox) holds for a contact way now.
    pub async fn wecom_list(&self, config_id: &str) -> Result<Vec<String>> {
        let way = self
            .world
            .sandbox()
            .get(&format!("/_sandbox/contact-ways/{config_id}"))
            .await?;
        let users = way["user"]
            .as_array()
            .or_else(|| way["contact_way"]["user"].as_array())
            .cloned()
            .unwrap_or_default();
        Ok(users
            .iter()
            .filter_map(|u| u.as_str().map(str::to_owned))
            .collect())
    }

    /// Adds counted in total for `staff` through `code`.
    pub async fn adds_counted(&self, code: &str, staff: &str) -> Result<u64> {
        let store = DynamoStore::new(
            self.world.dynamodb.clone(),
            self.world.output("TableName").to_owned(),
        );
        let counter = keys::adds_total(&CodeId::parse(code)?, &StaffId::parse(staff)?);
        let items = store
            .query_prefix(&TenantId::parse(&self.tenant.id)?, &counter.sk)
            .await?;
        Ok(items
            .iter()
            .filter(|item| item.get(keys::SK).and_then(|v| v.as_s().ok()) == Some(&counter.sk))
            .filter_map(|item| {
                item.get(&counter.attribute)
                    .and_then(|v| v.as_n().ok())
                    .and_then(|n| n.parse::<u64>().ok())
            })
            .sum())
    }

    /// `count` native codes named `{prefix}-0000`... listing `members`, created as the admin
    /// API would (a contact way in WeCom, the code and its seats in the table), many at a
    /// time: faster than the admin API for the hundreds a test may need.
    pub async fn seed_native_codes(
        &self,
        prefix: &str,
        count: usize,
        members: &[&str],
    ) -> Result<()> {
        let world = self.world;
        let store = DynamoStore::new(world.dynamodb.clone(), world.output("TableName").to_owned());
        let tenant = TenantId::parse(&self.tenant.id)?;
        let token = world.sandbox().token(&self.tenant).await?;
        let config: CodeConfig = serde_json::from_value(json!({
            "family": "native", "members": members, "switches": {"offline_check": true}
        }))?;
        let users: Vec<String> = members.iter().map(|m| (*m).to_owned()).collect();
        futures::stream::iter(0..count)
            .map(|n| {
                let (store, tenant, token, config, users) =
                    (&store, &tenant, &token, &config, &users);
                async move {
                    let code = CodeId::parse(&format!("{prefix}-{n:04}"))?;
                    let created = world
                        .sandbox()
                        .call(
                            "add_contact_way",
                            token,
                            json!({"type": 2, "scene": 2, "state": code.as_str(), "user": users}),
                        )
                        .await?;
                    let config_id = created["config_id"].as_str().context("created")?;
                    store
                        .put_code(tenant, &code, config, crate::now_ms())
                        .await?;
                    store.set_config_id(tenant, &code, config_id, users).await?;
                    anyhow::Ok(())
                }
            })
            .buffer_unordered(16)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    /// The tenant's contact ways by state (the code id) and their lists, as WeCom (the
    /// sandbox) holds them.
    pub async fn wecom_lists(&self) -> Result<BTreeMap<String, Vec<String>>> {
        let ways = self
            .world
            .sandbox()
            .get(&format!(
                "/_sandbox/contact-ways?corp_id={}",
                self.tenant.corp_id
            ))
            .await?;
        Ok(ways["contact_ways"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|way| {
                let users = way["user"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect();
                (way["state"].as_str().unwrap_or_default().to_owned(), users)
            })
            .collect())
    }
}
