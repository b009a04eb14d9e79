//! Translates API Gateway requests on `GET /l/{tenant}/{code}` into one
//! `domain::landing::LandingPage::visit` and its result into an answer: a 302 to the picked
//! member's acquisition link, or a small page saying why there is none. The route is public,
//! so nothing but the two path ids is read, and both are checked before any work.

use domain::landing::{Landing, LandingError, LandingPage, RotationCounter};
use lambda_http::{Body, Error, Request, RequestExt, Response};

fn page(status: u16, title: &str, text: &str) -> Response<Body> {
    let mut answer = Response::builder()
        .status(status)
        .header("content-type", "text/html; charset=utf-8")
        .header("cache-control", "no-store");
    if status == 503 {
        answer = answer.header("retry-after", "30");
    }
    let body = format!(
        "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>{title}</title>\
         <h1>{title}</h1><p>{text}</p></html>"
    );
    answer
        .body(Body::Text(body))
        .expect("a response with a valid status and headers builds")
}

/// A 302 to `location`; a stored link that is no header value (a control character, say:
/// links are WeCom's, checked when kept, but an item may have been written otherwise) is a
/// page saying the link cannot be opened, never a crash of the function.
fn redirect(location: &str) -> Response<Body> {
    let redirect = Response::builder()
        .status(302)
        .header("location", location)
        // Every scan must be counted: a cached redirect would send the next visitor to the
        // same member without a visit.
        .header("cache-control", "no-store")
        .body(Body::Empty);
    redirect.unwrap_or_else(|_| {
        tracing::error!("the member's stored acquisition link is not a header value; not sent");
        page(
            502,
            "Link unavailable",
            "This code's link cannot be opened right now. Please try again later.",
        )
    })
}

fn answer(landing: &Landing) -> Response<Body> {
    match landing {
        Landing::Chat { location, .. } => redirect(location),
        Landing::UnknownCode => page(
            404,
            "Code not found",
            "This code does not exist or has been deleted.",
        ),
        Landing::NotOnLandingPage => page(
            404,
            "Scan this code in WeChat",
            "This code is not served by this page: scan it in WeChat to reach the team.",
        ),
        Landing::Starved => page(
            503,
            "Nobody is available",
            "Nobody can take new customers on this code right now. Please try again later.",
        ),
        Landing::NoLinkYet { .. } => page(
            503,
            "Almost ready",
            "This code is being set up. Please try again in a moment.",
        ),
    }
}

/// One visit: `requests_sent` reads the store client's request counter, so the log line says
/// how many DynamoDB requests the visit cost (the bench's "requests per visit").
#[tracing::instrument(skip_all)]
pub(crate) async fn handle<C: RotationCounter>(
    page_of: &LandingPage<C>,
    requests_sent: impl Fn() -> u64,
    request: Request,
) -> Result<Response<Body>, Error> {
    let params = request.path_parameters();
    let tenant = params.first("tenant").unwrap_or_default();
    let code = params.first("code").unwrap_or_default();
    let before = requests_sent();
    let response = match page_of.visit(tenant, code).await {
        Ok(landing) => {
            match &landing {
                Landing::Chat { staff, number, .. } => {
                    tracing::info!(tenant, code, staff = %staff, visit = number, store_requests = requests_sent() - before, "visit sent to a member");
                }
                Landing::NoLinkYet { staff } => {
                    tracing::warn!(tenant, code, staff = %staff, store_requests = requests_sent() - before, "picked member has no acquisition link yet");
                }
                other => {
                    tracing::info!(tenant, code, landing = ?other, store_requests = requests_sent() - before, "visit not sent to a member");
                }
            }
            answer(&landing)
        }
        Err(LandingError::Tenant(_) | LandingError::Code(_)) => {
            // Not echoed: the ids are whatever an attacker typed.
            tracing::warn!("visit refused: malformed tenant or code id");
            page(400, "Not a code", "This address is not a code of ours.")
        }
        Err(LandingError::Store(error)) => {
            tracing::error!(error = %error, "visit not counted");
            page(
                503,
                "Try again",
                "The page is busy right now. Please try again in a moment.",
            )
        }
    };
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_link_that_is_no_header_value_is_a_page_not_a_crash() {
        let answer = redirect("https://work.weixin.qq.com/ca/x\r\nSet-Cookie: stolen=1");
        assert_eq!(answer.status(), 502);
        assert!(answer.headers().get("location").is_none());
        assert_eq!(redirect("https://work.weixin.qq.com/ca/x").status(), 302);
    }
    use domain::fakes::InMemoryRotations;
    use domain::ids::TenantId;
    use domain::ids::{CodeId, StaffId};
    use domain::membership::RotationSlot;

    fn sample(name: &str) -> Request {
        let path = format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
        let json = std::fs::read_to_string(&path).expect("sample event exists");
        lambda_http::request::from_str(&json).expect("sample event is an API Gateway request")
    }

    fn world() -> (LandingPage<InMemoryRotations>, InMemoryRotations) {
        let rotations = InMemoryRotations::default();
        (LandingPage::new(rotations.clone()), rotations)
    }

    #[tokio::test]
    async fn the_sample_of_a_code_with_no_rotation_record_gets_a_404_page() {
        let (page_of, _) = world();
        let response = handle(&page_of, || 0, sample("apigw-landing-visit.json"))
            .await
            .expect("handled");
        assert_eq!(response.status(), 404);
    }

    #[tokio::test]
    async fn a_rotating_code_redirects_to_the_members_link_with_the_code_as_channel() {
        let (page_of, rotations) = world();
        let tenant = TenantId::parse("demo").expect("valid");
        let code = CodeId::parse("spring-01").expect("valid");
        rotations.record(
            &tenant,
            &code,
            vec![RotationSlot {
                staff: StaffId::parse("zhangsan").expect("valid"),
                takes: 1,
                link: Some("https://work.weixin.qq.com/ca/abc".into()),
            }],
        );
        let response = handle(&page_of, || 0, sample("apigw-landing-visit.json"))
            .await
            .expect("handled");
        assert_eq!(response.status(), 302);
        assert_eq!(
            response.headers()["location"],
            "https://work.weixin.qq.com/ca/abc?customer_channel=spring-01"
        );
        assert_eq!(response.headers()["cache-control"], "no-store");
    }

    #[tokio::test]
    async fn a_starved_code_and_a_down_table_answer_503_and_a_malformed_id_400() {
        let (page_of, rotations) = world();
        let tenant = TenantId::parse("demo").expect("valid");
        let code = CodeId::parse("spring-01").expect("valid");
        rotations.record(&tenant, &code, vec![]);
        rotations.mark_starved(&tenant, &code);
        let visit = || sample("apigw-landing-visit.json");
        let starved = handle(&page_of, || 0, visit()).await.expect("handled");
        assert_eq!(starved.status(), 503);
        rotations.set_unavailable(true);
        let down = handle(&page_of, || 0, visit()).await.expect("handled");
        assert_eq!(down.status(), 503);
        let mut probe = visit();
        let mut params = std::collections::HashMap::new();
        params.insert("tenant".to_owned(), "demo".to_owned());
        params.insert("code".to_owned(), "../../etc/passwd".to_owned());
        probe = probe.with_path_parameters(params);
        let refused = handle(&page_of, || 0, probe).await.expect("handled");
        assert_eq!(refused.status(), 400);
    }
}
