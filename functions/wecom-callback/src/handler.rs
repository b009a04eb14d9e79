//! Translates API Gateway requests on `/wecom/{tenant}/callback` into `domain::intake` calls
//! and their results into WeCom's expected answers: the bare echostr for GET, an empty 200
//! for POST once the inbox accepted the event, 4xx for input that will never verify, 5xx
//! when persisting failed so WeCom retries.

use domain::http::ErrorAnswer;
use domain::intake::Inbox;
use domain::intake::{CallbackRequest, Intake, IntakeError, MAX_BODY_BYTES};
use domain::telemetry;
use domain::tenants::CallbackSettingsSource;
use lambda_http::{Body, Error, Request, RequestExt, Response};
use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

fn to_callback_request(request: &Request) -> CallbackRequest {
    let tenant = request
        .path_parameters_ref()
        .and_then(|p| p.first("tenant"))
        .unwrap_or_default()
        .to_owned();
    let query: HashMap<String, String> = request
        .query_string_parameters_ref()
        .map(|q| {
            q.iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let body = match request.body() {
        Body::Empty => String::new(),
        Body::Text(text) => text.clone(),
        // Bytes that are not UTF-8 cannot form a valid envelope; the XML check refuses them.
        Body::Binary(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        _ => String::new(),
    };
    CallbackRequest {
        tenant,
        query,
        body,
    }
}

fn answer(status: u16, body: String) -> Response<Body> {
    let content_type = if body.starts_with('{') {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Body::Text(body))
        .expect("a response with a valid status and header builds")
}

fn refuse(error: &IntakeError, tenant: &str, began_ms: u64) -> Response<Body> {
    let refusal = ErrorAnswer::from(error);
    telemetry::callback_refused(refusal.code, now_ms().saturating_sub(began_ms));
    if error.is_client_error() {
        tracing::warn!(tenant, status = refusal.status, reason = %error, "callback refused");
    } else {
        tracing::error!(tenant, error = ?error, "callback not persisted; WeCom will retry");
    }
    answer(refusal.status, refusal.body())
}

#[tracing::instrument(skip_all, fields(method = %request.method()))]
pub(crate) async fn handle<D: CallbackSettingsSource, I: Inbox>(
    intake: &Intake<D, I>,
    request: Request,
) -> Result<Response<Body>, Error> {
    // Before anything is copied or parsed: a body far over any WeCom envelope is refused.
    let began_ms = now_ms();
    let bytes = request.body().len();
    if bytes > MAX_BODY_BYTES {
        return Ok(refuse(&IntakeError::TooLarge { bytes }, "", began_ms));
    }
    let callback = to_callback_request(&request);
    let response = match request.method().as_str() {
        "GET" => match intake.verify_url(&callback, now_ms()).await {
            Ok(echo) => answer(200, echo),
            Err(error) => refuse(&error, &callback.tenant, began_ms),
        },
        "POST" => match intake.accept_event(&callback, now_ms()).await {
            Ok(message) => {
                telemetry::callback_accepted(now_ms().saturating_sub(began_ms));
                tracing::info!(tenant = %message.tenant, group = %message.group_id(), event_key = %message.event_key, "callback persisted");
                answer(200, String::new())
            }
            Err(error) => refuse(&error, &callback.tenant, began_ms),
        },
        _ => answer(
            405,
            "{\"code\":\"method_not_allowed\",\"detail\":\"use GET or POST\"}".into(),
        ),
    };
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::fakes::{InMemoryCallbackSettings, InMemoryInbox};
    use domain::ids::TenantId;
    use domain::tenants::CallbackSettings;

    fn intake() -> (
        Intake<InMemoryCallbackSettings, InMemoryInbox>,
        InMemoryInbox,
    ) {
        let tenants = InMemoryCallbackSettings::default();
        tenants.insert(
            TenantId::parse("demo").expect("valid"),
            CallbackSettings {
                corp_id: "wx5823bf96d3bd56c7".into(),
                callback_token: "QDG6eK".into(),
                encoding_aes_key: "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C".into(),
                previous: None,
            },
        );
        let inbox = InMemoryInbox::default();
        (Intake::new(tenants, inbox.clone(), u64::MAX / 2), inbox)
    }

    fn sample(name: &str) -> Request {
        let path = format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
        let json = std::fs::read_to_string(&path).expect("sample event exists");
        lambda_http::request::from_str(&json).expect("sample event is an API Gateway request")
    }

    #[tokio::test]
    async fn the_url_verification_sample_answers_the_bare_echostr() {
        let (intake, _) = intake();
        let response = handle(&intake, sample("apigw-callback-verify-url.json"))
            .await
            .expect("handled");
        assert_eq!(response.status(), 200);
        assert_eq!(response.body(), &Body::Text("1616140317555161061".into()));
    }

    #[tokio::test]
    async fn the_event_sample_is_persisted_and_answered_with_an_empty_200() {
        let (intake, inbox) = intake();
        let response = handle(&intake, sample("apigw-callback-add-contact.json"))
            .await
            .expect("handled");
        assert_eq!(response.status(), 200);
        assert_eq!(inbox.messages().len(), 1);
    }

    #[tokio::test]
    async fn when_the_inbox_is_down_the_answer_is_503_so_wecom_retries() {
        let (intake, inbox) = intake();
        inbox.set_unavailable(true);
        let response = handle(&intake, sample("apigw-callback-add-contact.json"))
            .await
            .expect("handled");
        assert_eq!(response.status(), 503);
        assert_eq!(
            response.body(),
            &Body::Text("{\"code\":\"unavailable\",\"detail\":\"try again later\"}".into())
        );
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_with_413_and_nothing_persisted() {
        let (intake, inbox) = intake();
        let mut request = sample("apigw-callback-add-contact.json");
        *request.body_mut() = Body::Text("<xml>".repeat(MAX_BODY_BYTES / 4));
        let response = handle(&intake, request).await.expect("handled");
        assert_eq!(response.status(), 413);
        assert!(inbox.messages().is_empty());
    }

    #[tokio::test]
    async fn a_bad_signature_sample_is_refused_with_401() {
        let (intake, inbox) = intake();
        let response = handle(&intake, sample("apigw-callback-bad-signature.json"))
            .await
            .expect("handled");
        assert_eq!(response.status(), 401);
        assert!(inbox.messages().is_empty());
    }
}
