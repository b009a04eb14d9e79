//! Translates API Gateway requests on `/admin/tenants/...` into `domain::admin` commands and
//! their results into JSON answers. The routes are the rows of `routes::ROUTES`; their bodies,
//! answers and errors are written down in `docs/admin-api.openapi.json` (the tests below hold
//! the three together). All are behind IAM.
//!
//! Errors carry `{code, detail}`: 400 `invalid`, 404 `not_found`, 405 `method_not_allowed`,
//! 409 (`no_eligible_member`, `staff_unusable`, `resigned`, `corp_id_taken`, `previous_callback_keys_held`, `conflict`), 413 `too_large` (a body
//! over `MAX_BODY_BYTES`, refused before it is read), 429 `throttled`, 502 `wecom_error`, 503
//! `unavailable` (cause logged only). Bodies are never logged: the tenant body holds the
//! corp's secrets.

use crate::routes::{self, Matched};
use domain::admin::commands::MAX_BODY_BYTES;
use domain::admin::{
    Admin, AdminError, AdminStore, ContactWays, DeleteCode, GetCode, GetDepartment, GetDrift,
    GetStaff, GetTenant, ListCodes, PutCode, PutDepartment, PutStaff, PutTenant, ResumeRepair,
};
use domain::http::ErrorAnswer;
use domain::reasons::ReasonQueue;
use lambda_http::{Body, Error, Request, RequestExt, Response};
use serde::Serialize;

/// The request's route, wherever the API is mounted. Ids come from API Gateway's (decoded)
/// path parameters, or from the path when there are none.
fn route(request: &Request) -> Option<Matched> {
    let path = match request.raw_http_path() {
        "" => request.uri().path(),
        raw => raw,
    };
    let params = request.path_parameters_ref();
    routes::route(path, |name| params.and_then(|p| p.first(name)))
}

/// The query parameter `name` (its first value); refuses parameters the route does not read.
fn query<'r>(request: &'r Request, route: &Matched) -> Result<Query<'r>, AdminError> {
    let params = request.query_string_parameters_ref();
    if let Some(params) = params {
        if let Some((unknown, _)) = params
            .iter()
            .find(|(name, _)| !route.route.query.contains(name))
        {
            let shown: String = unknown.chars().take(64).collect();
            return Err(AdminError::invalid(shown, "is not a known query parameter"));
        }
    }
    Ok(Query(params))
}

struct Query<'r>(Option<&'r lambda_http::aws_lambda_events::query_map::QueryMap>);

impl Query<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.and_then(|params| params.first(name))
    }
}

/// A GET or DELETE carries nothing in its body; a body sent anyway is refused, not ignored.
fn no_body(request: &Request) -> Result<(), AdminError> {
    if request.body().is_empty() {
        Ok(())
    } else {
        Err(AdminError::invalid("body", "must be empty for this method"))
    }
}

fn body_text(request: &Request) -> Result<&str, AdminError> {
    let bytes = request.body().len();
    if bytes > MAX_BODY_BYTES {
        return Err(AdminError::TooLarge {
            bytes,
            limit: MAX_BODY_BYTES,
        });
    }
    match request.body() {
        Body::Text(text) => Ok(text),
        Body::Binary(bytes) => {
            std::str::from_utf8(bytes).map_err(|_| AdminError::invalid("body", "is not UTF-8"))
        }
        _ => Ok(""),
    }
}

fn json(status: u16, body: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::Text(body))
        .expect("a response with a valid status and header builds")
}

fn answer(status: u16, value: &impl Serialize) -> Result<Response<Body>, AdminError> {
    let body = serde_json::to_string(value).expect("admin answers always serialise");
    Ok(json(status, body))
}

fn not_allowed(route: &Matched) -> Response<Body> {
    let allow = route.route.allow();
    let mut response = json(
        405,
        serde_json::json!({ "code": "method_not_allowed", "detail": format!("use {allow}") })
            .to_string(),
    );
    response.headers_mut().insert(
        "allow",
        allow.parse().expect("method names are a valid header"),
    );
    response
}

fn refuse(error: &AdminError) -> Response<Body> {
    let refusal = ErrorAnswer::from(error);
    if error.is_client_error() {
        tracing::warn!(status = refusal.status, reason = %error, "admin request refused");
    } else {
        tracing::error!(status = refusal.status, error = ?error, "admin request failed");
    }
    json(refusal.status, refusal.body())
}

async fn dispatch<S: AdminStore, Q: ReasonQueue + 'static, W: ContactWays>(
    admin: &Admin<S, Q, W>,
    route: Matched,
    request: &Request,
) -> Result<Response<Body>, AdminError> {
    let method = request.method().as_str();
    if !route.route.answers(method) {
        return Ok(not_allowed(&route));
    }
    let query = query(request, &route)?;
    if method != "PUT" {
        no_body(request)?;
    }
    let tenant = route.tenant();
    match (route.name(), method) {
        ("tenant", "PUT") => {
            let command = PutTenant::parse(tenant, body_text(request)?)?;
            answer(200, &admin.put_tenant(command).await?)
        }
        ("tenant", "GET") => answer(200, &admin.tenant(GetTenant::parse(tenant)?).await?),
        ("staff", "PUT") => {
            let command = PutStaff::parse(tenant, route.id("staff"), body_text(request)?)?;
            answer(200, &admin.put_staff(command).await?)
        }
        ("staff", "GET") => {
            let query = GetStaff::parse(tenant, route.id("staff"))?;
            answer(200, &admin.staff(query).await?)
        }
        ("staff_codes", "GET") => {
            let list = ListCodes::parse(
                tenant,
                Some(route.id("staff")),
                query.get("limit"),
                query.get("cursor"),
            )?;
            answer(200, &admin.staff_codes(list).await?)
        }
        ("codes", "GET") => {
            let list = ListCodes::parse(tenant, None, query.get("limit"), query.get("cursor"))?;
            answer(200, &admin.codes(list).await?)
        }
        // 201 when the PUT created the contact way.
        ("code", "PUT") => {
            let command = PutCode::parse(tenant, route.id("code"), body_text(request)?)?;
            let stored = admin.put_code(command).await?;
            answer(if stored.created { 201 } else { 200 }, &stored)
        }
        ("code", "GET") => {
            let query = GetCode::parse(tenant, route.id("code"))?;
            answer(200, &admin.code_status(query).await?)
        }
        ("code", "DELETE") => {
            let command = DeleteCode::parse(tenant, route.id("code"))?;
            answer(200, &admin.delete_code(command).await?)
        }
        ("department", "PUT") => {
            let department = route.id("department");
            let command = PutDepartment::parse(tenant, department, body_text(request)?)?;
            answer(200, &admin.put_department(command).await?)
        }
        ("department", "GET") => {
            let query = GetDepartment::parse(tenant, route.id("department"))?;
            answer(200, &admin.department(query).await?)
        }
        // The sweep's drift report and guard.
        ("drift", "GET") => {
            let query = GetDrift::parse(tenant, query.get("day"))?;
            answer(200, &admin.drift(query).await?)
        }
        // Resumes a tripped guard's repair.
        ("drift_resume", "POST") => answer(
            200,
            &admin.resume_repair(ResumeRepair::parse(tenant)?).await?,
        ),
        // A row's method without an arm here; a test sends every row's every method.
        _ => Ok(not_allowed(&route)),
    }
}

#[tracing::instrument(skip_all, fields(method = %request.method(), route, tenant))]
pub(crate) async fn handle<S: AdminStore, Q: ReasonQueue + 'static, W: ContactWays>(
    admin: &Admin<S, Q, W>,
    request: Request,
) -> Result<Response<Body>, Error> {
    let Some(route) = route(&request) else {
        tracing::warn!(path = request.raw_http_path(), "no such admin route");
        return Ok(json(
            404,
            ErrorAnswer::from(&AdminError::not_found("route")).body(),
        ));
    };
    let span = tracing::Span::current();
    span.record("route", route.name());
    span.record("tenant", route.tenant());
    let response = dispatch(admin, route, &request)
        .await
        .unwrap_or_else(|error| refuse(&error));
    domain::telemetry::admin_answered(response.status().as_u16());
    tracing::info!(
        status = response.status().as_u16(),
        "admin request answered"
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::fakes::AdminWorld;
    use domain::ids::StaffId;
    use domain::ids::TenantId;
    use domain::membership::StaffFacts;
    use domain::schedules::Subject;
    use domain::wecom::errors::WeComError;
    use lambda_http::http::Method;
    use serde_json::{json, Value};

    fn fixed_clock() -> u64 {
        1_788_264_000_000
    }

    fn world() -> AdminWorld {
        AdminWorld::new(fixed_clock)
    }

    /// The world after the tenant sample was sent, with the code sample's members on duty.
    async fn set_up_world() -> AdminWorld {
        let w = world();
        let response = send(&w, sample("apigw-admin-put-tenant.json")).await;
        assert_eq!(response.status(), 200);
        let tenant = TenantId::parse("demo").expect("valid");
        for name in ["zhangsan", "lisi", "wangwu", "manager"] {
            let staff = StaffId::parse(name).expect("valid");
            w.store
                .insert_staff(&tenant, &staff, StaffFacts::ACTIVE_ONLINE);
        }
        w
    }

    fn sample(name: &str) -> Request {
        let path = format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
        let json = std::fs::read_to_string(&path).expect("sample event exists");
        lambda_http::request::from_str(&json).expect("sample event is an API Gateway request")
    }

    async fn send(w: &AdminWorld, request: Request) -> Response<Body> {
        handle(&w.admin, request).await.expect("handled")
    }

    fn body_json(response: &Response<Body>) -> Value {
        match response.body() {
            Body::Text(text) => serde_json::from_str(text).expect("a JSON answer"),
            other => panic!("expected a text body, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_tenant_sample_is_stored_and_answered_without_its_secrets() {
        let w = world();

        let response = send(&w, sample("apigw-admin-put-tenant.json")).await;

        assert_eq!(response.status(), 200);
        assert_eq!(
            body_json(&response),
            json!({"tenant": "demo", "corp_id": "wx5823bf96d3bd56c7", "timezone": "Asia/Shanghai",
                   "company_daily_cap": 50, "version": 1})
        );
        let tenant = TenantId::parse("demo").expect("valid");
        let stored = w.store.stored_profile(&tenant).expect("stored");
        assert_eq!(stored.corp_secret, "demo-contact-app-secret");
    }

    #[tokio::test]
    async fn the_code_sample_creates_the_contact_way_with_201_then_updates_with_200() {
        let w = set_up_world().await;

        let first = send(&w, sample("apigw-admin-put-code.json")).await;
        let second = send(&w, sample("apigw-admin-put-code.json")).await;

        assert_eq!(first.status(), 201);
        assert_eq!(
            body_json(&first),
            json!({"code": "spring-01", "config_id": "cw-1", "version": 1, "created": true,
                   "qr_code": "https://wework.example/qr/cw-1"})
        );
        assert_eq!(second.status(), 200);
        assert_eq!(
            body_json(&second),
            json!({"code": "spring-01", "config_id": "cw-1", "version": 2, "created": false})
        );
        assert_eq!(w.wecom.created()[0].1.users, ["zhangsan", "lisi", "wangwu"]);
        assert_eq!(w.queue.reasons().len(), 2);
    }

    #[tokio::test]
    async fn the_staff_sample_takes_the_member_offline_and_refreshes_the_code() {
        let w = set_up_world().await;
        send(&w, sample("apigw-admin-put-code.json")).await;

        let response = send(&w, sample("apigw-admin-put-staff.json")).await;

        assert_eq!(response.status(), 200);
        assert_eq!(
            body_json(&response),
            json!({"staff": "zhangsan", "online": false, "employment": "active",
                   "rejected_by_wecom": false, "fan_out": format!("staff:zhangsan:{}", fixed_clock())})
        );
        let last = w.queue.reasons().pop().expect("a reason");
        assert_eq!(last.code.as_str(), "spring-01");
        assert_eq!(last.fact_key, format!("staff:zhangsan:{}", fixed_clock()));
    }

    #[tokio::test]
    async fn the_get_code_sample_reports_the_recompute_and_the_sync_state() {
        let w = set_up_world().await;
        send(&w, sample("apigw-admin-put-code.json")).await;
        send(&w, sample("apigw-admin-put-staff.json")).await;

        let response = send(&w, sample("apigw-admin-get-code.json")).await;

        assert_eq!(response.status(), 200);
        assert_eq!(
            body_json(&response),
            json!({
                "code": "spring-01", "family": "native", "departments": [], "config_id": "cw-1",
                "version": 1, "eligible_now": ["lisi", "wangwu"], "outcome": "members",
                "excluded": [{"staff": "zhangsan", "reason": "offline"}],
                "last_pushed": {"users": ["zhangsan", "lisi", "wangwu"], "pushed_at_ms": null,
                                "starved": false},
                "in_sync": false
            })
        );
    }

    #[tokio::test]
    async fn the_duplicate_member_sample_is_refused_with_400_naming_the_member() {
        let w = set_up_world().await;

        let response = send(&w, sample("apigw-admin-put-code-duplicate-member.json")).await;

        assert_eq!(response.status(), 400);
        assert_eq!(
            body_json(&response),
            json!({"code": "invalid", "detail": "members[2]: repeats zhangsan"})
        );
        assert!(w.wecom.created().is_empty());
    }

    #[tokio::test]
    async fn the_schedule_sample_stores_the_shifts_and_the_tenants_shift_item_is_due_next_minute() {
        let w = set_up_world().await;
        send(&w, sample("apigw-admin-put-code.json")).await;

        let response = send(&w, sample("apigw-admin-put-staff-schedule.json")).await;

        assert_eq!(response.status(), 200);
        let answer = body_json(&response);
        assert_eq!(
            answer["schedule"]["shifts"][2],
            json!({"day": "sat", "start": "22:00", "end": "06:00"})
        );
        assert!(answer["fan_out"].is_string(), "{answer}");
        let tenant = TenantId::parse("demo").expect("valid");
        // The tick finds lisi's next edge (Saturday 22:00) at the next minute.
        let due = w.store.stored_due(&tenant, &Subject::Shifts);
        assert_eq!(
            due,
            Some(domain::schedules::plan::asap(fixed_clock())),
            "{due:?}"
        );
    }

    #[tokio::test]
    async fn a_schedule_with_an_unknown_day_is_refused_with_400_naming_the_shift() {
        let w = set_up_world().await;
        let mut request = sample("apigw-admin-put-staff-schedule.json");
        *request.body_mut() = Body::Text(
            json!({"online": true, "schedule": {"shifts": [{"day": "someday", "start": "09:00", "end": "18:00"}]}})
                .to_string(),
        );

        let response = send(&w, request).await;

        assert_eq!(response.status(), 400);
        assert_eq!(
            body_json(&response),
            json!({"code": "invalid",
                   "detail": "schedule.shifts[0]: \"someday\" is not a weekday (mon, tue, ... sun)"})
        );
    }

    #[tokio::test]
    async fn a_malformed_json_body_is_refused_with_400() {
        let w = set_up_world().await;
        let mut request = sample("apigw-admin-put-staff.json");
        *request.body_mut() = Body::Text("{\"online\": ".into());

        let response = send(&w, request).await;

        assert_eq!(response.status(), 400);
        assert_eq!(body_json(&response)["code"], "invalid");
        assert!(body_json(&response)["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("body: ")));
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_with_413_and_nothing_is_stored() {
        let w = world();
        let mut request = sample("apigw-admin-put-tenant.json");
        *request.body_mut() =
            Body::Text(format!("{{\"pad\": \"{}\"}}", "x".repeat(MAX_BODY_BYTES)));

        let response = send(&w, request).await;

        assert_eq!(response.status(), 413);
        assert_eq!(body_json(&response)["code"], "too_large");
        let tenant = TenantId::parse("demo").expect("valid");
        assert!(w.store.stored_profile(&tenant).is_none());
    }

    #[tokio::test]
    async fn other_methods_are_refused_with_405_and_the_allowed_ones() {
        let w = set_up_world().await;
        let mut request = sample("apigw-admin-get-code.json");
        *request.method_mut() = Method::POST;
        let mut department = sample("apigw-admin-put-department.json");
        *department.method_mut() = Method::DELETE;

        let response = send(&w, request).await;
        let department = send(&w, department).await;

        assert_eq!(response.status(), 405);
        assert_eq!(
            response.headers().get("allow").map(|v| v.as_bytes()),
            Some(&b"DELETE, GET, PUT"[..])
        );
        assert_eq!(body_json(&response)["code"], "method_not_allowed");
        assert_eq!(department.status(), 405);
        assert_eq!(
            department.headers().get("allow").map(|v| v.as_bytes()),
            Some(&b"GET, PUT"[..])
        );
    }

    #[tokio::test]
    async fn every_method_of_every_route_is_dispatched_and_every_other_is_refused_with_405() {
        let w = set_up_world().await;
        for row in crate::routes::ROUTES {
            let path = row.path.replace(['{', '}'], "");
            for method in ["DELETE", "GET", "PATCH", "POST", "PUT"] {
                let mut request = Request::default().with_raw_http_path(path.as_str());
                *request.method_mut() = method.parse().expect("a method");

                let response = send(&w, request).await;

                if row.methods.contains(&method) {
                    assert_ne!(response.status(), 405, "{method} {path}");
                } else {
                    assert_eq!(response.status(), 405, "{method} {path}");
                    assert_eq!(
                        response.headers().get("allow").map(|v| v.as_bytes()),
                        Some(row.allow().as_bytes()),
                        "{method} {path}"
                    );
                }
            }
        }
    }

    #[tokio::test]
    async fn the_delete_code_sample_deletes_the_contact_way_and_the_code() {
        let w = set_up_world().await;
        send(&w, sample("apigw-admin-put-code.json")).await;

        let response = send(&w, sample("apigw-admin-delete-code.json")).await;
        let status = send(&w, sample("apigw-admin-get-code.json")).await;
        let again = send(&w, sample("apigw-admin-delete-code.json")).await;

        assert_eq!(response.status(), 200);
        assert_eq!(
            body_json(&response),
            json!({"code": "spring-01", "config_id": "cw-1"})
        );
        assert_eq!(w.wecom.deleted(), ["cw-1"]);
        assert_eq!(status.status(), 404);
        assert_eq!(again.status(), 404);
        assert_eq!(body_json(&again)["code"], "not_found");
    }

    #[tokio::test]
    async fn when_wecom_fails_the_delete_the_answer_is_502_and_the_code_stays() {
        let w = set_up_world().await;
        send(&w, sample("apigw-admin-put-code.json")).await;
        w.wecom.fail_deletes_with(Some(WeComError::Transient {
            detail: "errcode -1 (system busy)".into(),
        }));

        let response = send(&w, sample("apigw-admin-delete-code.json")).await;

        assert_eq!(response.status(), 502);
        assert_eq!(body_json(&response)["code"], "wecom_error");
        let status = send(&w, sample("apigw-admin-get-code.json")).await;
        assert_eq!(status.status(), 200);
    }

    #[tokio::test]
    async fn the_department_samples_set_members_and_reach_the_code_listing_the_department() {
        let w = set_up_world().await;
        let department = send(&w, sample("apigw-admin-put-department.json")).await;
        let code = send(&w, sample("apigw-admin-put-code-departments.json")).await;
        let before = w.queue.reasons().len();

        let staff = send(&w, sample("apigw-admin-put-staff-departments.json")).await;
        let again = send(&w, sample("apigw-admin-put-department.json")).await;

        assert_eq!(department.status(), 200);
        assert_eq!(
            body_json(&department),
            json!({"department": "2", "members": ["lisi", "zhangsan"],
                   "changed": ["lisi", "zhangsan"],
                   "fan_out": format!("department:2:{}", fixed_clock())})
        );
        assert_eq!(code.status(), 201);
        assert_eq!(w.wecom.created()[0].1.users, ["wangwu", "lisi", "zhangsan"]);
        assert_eq!(staff.status(), 200);
        assert_eq!(
            body_json(&staff),
            json!({"staff": "wangwu", "online": true, "employment": "active",
                   "departments": ["2", "3"], "rejected_by_wecom": false,
                   "fan_out": format!("staff:wangwu:{}", fixed_clock())})
        );
        assert_eq!(body_json(&again)["changed"], json!(["wangwu"]));
        let sent: Vec<String> = w
            .queue
            .reasons()
            .into_iter()
            .skip(before)
            .map(|r| r.code.to_string())
            .collect();
        assert_eq!(sent, ["autumn-02", "autumn-02"]);
    }

    #[tokio::test]
    async fn a_native_code_with_a_round_limit_is_refused_with_400() {
        let w = set_up_world().await;
        let mut request = sample("apigw-admin-put-code-departments.json");
        *request.body_mut() = Body::Text(
            json!({"family": "native", "members": ["zhangsan"], "switches": {"round_limit": 2}})
                .to_string(),
        );

        let response = send(&w, request).await;

        assert_eq!(response.status(), 400);
        assert_eq!(body_json(&response)["code"], "invalid");
        assert!(body_json(&response)["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("switches.round_limit: ")));
    }

    #[tokio::test]
    async fn a_code_without_members_or_departments_is_refused_with_400() {
        let w = set_up_world().await;
        let mut request = sample("apigw-admin-put-code-departments.json");
        *request.body_mut() = Body::Text(
            json!({"family": "sequenced", "members": [], "departments": []}).to_string(),
        );

        let response = send(&w, request).await;

        assert_eq!(response.status(), 400);
        assert!(body_json(&response)["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("members: ")));
    }

    #[tokio::test]
    async fn a_department_for_an_unknown_tenant_is_404() {
        let w = world();

        let response = send(&w, sample("apigw-admin-put-department.json")).await;

        assert_eq!(response.status(), 404);
    }

    #[tokio::test]
    async fn a_staff_change_for_an_unknown_tenant_is_404() {
        let w = world();

        let response = send(&w, sample("apigw-admin-put-staff.json")).await;

        assert_eq!(response.status(), 404);
        assert_eq!(body_json(&response)["code"], "not_found");
    }

    #[tokio::test]
    async fn the_status_of_a_code_never_put_is_404() {
        let w = set_up_world().await;

        let response = send(&w, sample("apigw-admin-get-code.json")).await;

        assert_eq!(response.status(), 404);
    }

    #[tokio::test]
    async fn when_wecom_fails_the_creation_the_answer_is_502_with_the_class_only() {
        let w = set_up_world().await;
        w.wecom.fail_with(WeComError::Rejected {
            errcode: 48002,
            errmsg: "api forbidden".into(),
        });

        let response = send(&w, sample("apigw-admin-put-code.json")).await;

        assert_eq!(response.status(), 502);
        assert_eq!(
            body_json(&response),
            json!({"code": "wecom_error", "detail": "rejected errcode 48002"})
        );
    }

    #[tokio::test]
    async fn when_nobody_is_eligible_the_creation_answers_409() {
        let w = world();
        send(&w, sample("apigw-admin-put-tenant.json")).await;

        let response = send(&w, sample("apigw-admin-put-code.json")).await;

        assert_eq!(response.status(), 409);
        assert_eq!(body_json(&response)["code"], "no_eligible_member");
    }

    #[tokio::test]
    async fn when_the_table_is_down_the_answer_is_an_opaque_503() {
        let w = set_up_world().await;
        w.store.set_unavailable(true);

        let response = send(&w, sample("apigw-admin-put-tenant.json")).await;

        assert_eq!(response.status(), 503);
        assert_eq!(
            body_json(&response),
            json!({"code": "unavailable", "detail": "try again later"})
        );
    }

    #[tokio::test]
    async fn an_unknown_admin_path_is_404() {
        let w = world();
        let mut request = sample("apigw-admin-get-code.json");
        *request.uri_mut() = "https://example.com/admin/tenants/demo/widgets/x"
            .parse()
            .expect("valid uri");
        let request = request.with_raw_http_path("/admin/tenants/demo/widgets/x");

        let response = send(&w, request).await;

        assert_eq!(response.status(), 404);
    }

    #[test]
    fn routes_are_read_from_the_path_when_there_are_no_path_parameters() {
        let read = |path: &str| {
            let request = Request::default().with_raw_http_path(path);
            route(&request).map(|matched| (matched.name(), matched.ids))
        };
        let ids = |pairs: &[(&'static str, &str)]| -> Vec<(&'static str, String)> {
            pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
        };
        assert_eq!(
            read("/live/admin/tenants/acme/staff/li.si@x"),
            Some(("staff", ids(&[("tenant", "acme"), ("staff", "li.si@x")])))
        );
        assert_eq!(
            read("/admin/tenants/acme"),
            Some(("tenant", ids(&[("tenant", "acme")])))
        );
        assert_eq!(
            read("/admin/tenants/acme/departments/42"),
            Some((
                "department",
                ids(&[("tenant", "acme"), ("department", "42")])
            ))
        );
        assert_eq!(
            read("/admin/tenants/acme/codes"),
            Some(("codes", ids(&[("tenant", "acme")])))
        );
        assert_eq!(
            read("/admin/tenants/acme/staff/a/codes"),
            Some(("staff_codes", ids(&[("tenant", "acme"), ("staff", "a")])))
        );
        assert_eq!(read("/admin/tenants/acme/things"), None);
    }
}

/// `docs/admin-api.openapi.json` and the code cannot drift: every route and method of the
/// document is routed here and nothing else is, every error code the API can answer is in the
/// document and nothing else, and `template.yaml` gives API Gateway the same routes.
#[cfg(test)]
mod contract_tests {
    use super::*;
    use crate::routes::{Route, ROUTES};
    use domain::wecom::errors::WeComError;
    use domain::StoreError;
    use serde_json::Value;
    use std::collections::BTreeSet;

    fn read(relative: &str) -> String {
        let path = format!("{}/../../{relative}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn document() -> Value {
        serde_json::from_str(&read("docs/admin-api.openapi.json")).expect("the document is JSON")
    }

    /// (path template, method) of every operation the document describes.
    fn documented_operations() -> BTreeSet<(String, String)> {
        let doc = document();
        let paths = doc["paths"].as_object().expect("paths");
        paths
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .expect("a path item")
                    .keys()
                    .filter(|key| *key != "parameters")
                    .map(|method| (path.clone(), method.to_uppercase()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// A concrete path for a template: `{tenant}` becomes `tenant`, and so on.
    fn concrete(template: &str) -> String {
        template.replace(['{', '}'], "")
    }

    fn handled_operations() -> BTreeSet<(String, String)> {
        ROUTES
            .iter()
            .flat_map(|row| {
                row.methods
                    .iter()
                    .map(|method| (row.path.to_owned(), (*method).to_owned()))
            })
            .collect()
    }

    /// The names of the parameters `location` ("path" or "query") of every documented
    /// operation, the path item's and the operation's own, by (path template, method).
    fn documented_parameters(location: &str) -> BTreeSet<(String, String, String)> {
        let doc = document();
        let resolved = |parameter: &Value| -> Value {
            match parameter["$ref"].as_str() {
                Some(reference) => {
                    let name = reference
                        .strip_prefix("#/components/parameters/")
                        .expect("a parameter reference");
                    doc["components"]["parameters"][name].clone()
                }
                None => parameter.clone(),
            }
        };
        let listed = |item: &Value| -> Vec<Value> {
            item["parameters"]
                .as_array()
                .map(|parameters| parameters.iter().map(resolved).collect())
                .unwrap_or_default()
        };
        let mut found = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            let shared = listed(item);
            for (method, operation) in item.as_object().expect("a path item") {
                if method == "parameters" {
                    continue;
                }
                for parameter in shared.iter().chain(&listed(operation)) {
                    if parameter["in"] == location {
                        let name = parameter["name"].as_str().expect("a parameter name");
                        found.insert((path.clone(), method.to_uppercase(), name.to_owned()));
                    }
                }
            }
        }
        found
    }

    /// (path template, method, parameter) for every method of every row, with `names` the
    /// row's parameters.
    fn handled_parameters(
        names: impl Fn(&Route) -> Vec<&'static str>,
    ) -> BTreeSet<(String, String, String)> {
        let mut found = BTreeSet::new();
        for row in ROUTES {
            for method in row.methods {
                for name in names(row) {
                    found.insert((row.path.to_owned(), (*method).to_owned(), name.to_owned()));
                }
            }
        }
        found
    }

    #[test]
    fn the_document_describes_exactly_the_routes_and_methods_the_handler_answers() {
        let documented = documented_operations();
        for (template, _) in &documented {
            let request = Request::default().with_raw_http_path(concrete(template));
            let matched = super::route(&request);
            assert!(
                matched.is_some_and(|m| m.route.path == template),
                "{template} is no route"
            );
        }
        assert_eq!(documented, handled_operations());
    }

    #[test]
    fn every_route_reads_exactly_the_query_parameters_the_document_names() {
        let read = handled_parameters(|row| row.query.to_vec());
        assert_eq!(read, documented_parameters("query"));
    }

    #[test]
    fn every_route_names_exactly_the_path_parameters_the_document_names() {
        let named = handled_parameters(|row| {
            row.path
                .split('/')
                .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
                .collect()
        });
        assert_eq!(named, documented_parameters("path"));
    }

    #[test]
    fn the_template_gives_api_gateway_exactly_the_documented_routes() {
        let template = read("template.yaml");
        let mut routed = BTreeSet::new();
        let mut path = None;
        for line in template.lines().map(str::trim) {
            if let Some(p) = line.strip_prefix("Path: /admin/") {
                path = Some(format!("/admin/{p}"));
            } else if let (Some(method), Some(p)) = (line.strip_prefix("Method: "), path.take()) {
                routed.insert((p, method.to_uppercase()));
            }
        }
        assert_eq!(routed, documented_operations());
    }

    #[test]
    fn the_document_lists_exactly_the_error_codes_the_api_answers() {
        let errors = [
            AdminError::invalid("f", "r"),
            AdminError::TooLarge { bytes: 1, limit: 0 },
            AdminError::not_found("x"),
            AdminError::NoEligibleMember { code: "c".into() },
            AdminError::Resigned { staff: "s".into() },
            AdminError::CorpIdTaken {
                corp_id: "c".into(),
            },
            AdminError::Conflict { what: "t".into() },
            AdminError::PreviousKeysHeld { kept_until_ms: 1 },
            AdminError::WeCom(WeComError::Throttled { errcode: 45009 }),
            AdminError::WeCom(WeComError::StaffUnusable {
                errcode: 60111,
                errmsg: String::new(),
            }),
            AdminError::Budget {
                api: "a",
                retry_after_ms: 1,
            },
            AdminError::Unavailable(StoreError::new("table", "down")),
        ];
        let mut answered: BTreeSet<String> = errors
            .iter()
            .map(|e| ErrorAnswer::from(e).code.to_owned())
            .collect();
        answered.insert("method_not_allowed".into());
        let documented: BTreeSet<String> = document()["components"]["schemas"]["Error"]
            ["properties"]["code"]["enum"]
            .as_array()
            .expect("an enum")
            .iter()
            .map(|v| v.as_str().expect("a string").to_owned())
            .collect();
        assert_eq!(answered, documented);
    }

    #[test]
    fn the_drift_answer_has_exactly_the_fields_the_document_names() {
        let view = domain::sweep::DriftView {
            day: "2026-12-03".into(),
            read: 10,
            differing: 4,
            repaired: 1,
            still_differing: 3,
            stale_confirmed: 2,
            guard: Some(domain::sweep::GuardTrip {
                tripped_at_ms: 1,
                sampled: 10,
                differing: 4,
                codes: vec![domain::ids::CodeId::parse("c1").expect("valid")],
                recheck_at_ms: 900_001,
                confirmed_at_ms: Some(900_002),
            }),
        };
        let answered = serde_json::to_value(&view).expect("JSON");
        let fields = |value: &Value| -> BTreeSet<String> {
            value
                .as_object()
                .expect("an object")
                .keys()
                .cloned()
                .collect()
        };
        let schemas = &document()["components"]["schemas"];
        let required = |schema: &Value| -> BTreeSet<String> {
            schema["required"]
                .as_array()
                .expect("required")
                .iter()
                .map(|v| v.as_str().expect("a string").to_owned())
                .collect()
        };
        let drift = &schemas["DriftView"];
        assert_eq!(fields(&answered), fields(&drift["properties"]));
        assert_eq!(fields(&answered), required(drift));
        let guard = &schemas["GuardTrip"];
        assert_eq!(fields(&answered["guard"]), fields(&guard["properties"]));
        assert_eq!(fields(&answered["guard"]), required(guard));
    }
}
