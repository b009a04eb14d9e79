//! The admin API as the platform backend calls it, through `stack_client::AdminApi`
//! (SigV4-signed for `execute-api`; the routes use `AWS_IAM` authorisation).

use crate::World;
use anyhow::Result;
use serde_json::Value;
use stack_client::{AdminApi, Answer};

pub struct Admin<'a>(pub(crate) &'a World);

impl Admin<'_> {
    fn api(&self) -> Result<AdminApi> {
        AdminApi::new(&self.0.api_url, &self.0.aws)
    }

    pub async fn put(&self, path: &str, body: Value) -> Result<Value> {
        self.api()?
            .put(path, &body)
            .await?
            .expect(&format!("PUT /admin{path}"), &[200, 201])
    }

    pub async fn get(&self, path: &str) -> Result<Value> {
        self.api()?
            .get(path)
            .await?
            .expect(&format!("GET /admin{path}"), &[200])
    }

    pub async fn delete(&self, path: &str) -> Result<Value> {
        self.api()?
            .delete(path)
            .await?
            .expect(&format!("DELETE /admin{path}"), &[200])
    }

    /// The status and body of any request, for tests of refusals (404, 400...).
    pub async fn answer(&self, method: &str, path: &str, body: Option<Value>) -> Result<Answer> {
        self.api()?.send(method, path, body.as_ref()).await
    }
}

impl World {
    pub fn admin(&self) -> Admin<'_> {
        Admin(self)
    }
}
