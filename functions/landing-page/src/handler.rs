//! Translates API Gateway requests on `GET /l/{tenant}/{code}` into one
//! `domain::landing::LandingPage::visit` and its result into an answer: a 302 to the picked
//! member's acquisition link, or a small page saying why there is none. The route is public,
//! so nothing but the two path ids and what tells a person from a machine (the method, the
//! User-Agent and the purpose headers, each bounded by the domain) is read, and the ids are
//! checked before any work. No query parameter is read: the channel WeCom credits is the code
//! of the path, never one the visitor sends.

use domain::landing::{Landing, LandingError, LandingPage, Machine, Opener, RotationCounter};
use lambda_http::http::Method;
use lambda_http::{Body, Error, Request, RequestExt, Response};

/// The headers browsers mark a prefetch or prerender with; more than this many values of
/// them are not looked at.
const PURPOSE_HEADERS: [&str; 4] = ["sec-purpose", "purpose", "x-purpose", "x-moz"];
const PURPOSE_VALUES: usize = 4;

/// Who opens the page, from the request's method and headers (`domain::landing::Opener`).
fn opener(request: &Request) -> Opener {
    let headers = request.headers();
    let purposes: Vec<&[u8]> = PURPOSE_HEADERS
        .iter()
        .flat_map(|name| headers.get_all(*name))
        .take(PURPOSE_VALUES)
        .map(|value| value.as_bytes())
        .collect();
    Opener::of(&domain::landing::Request {
        head: request.method() == Method::HEAD,
        user_agent: headers.get("user-agent").map(|value| value.as_bytes()),
        purposes: &purposes,
    })
}

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
        // An error status is what makes a browser drop a prefetch (a 2xx or a redirect would
        // be kept and shown in place of the person's own visit): the person's visit, if they
        // open the link, comes after it and is counted.
        Landing::Machine(Machine::Prefetch) => page(
            503,
            "Open the link to continue",
            "This page is not prefetched: open the link to reach the team.",
        ),
        // The same neutral page for every code: it tells a preview nothing, not even whether
        // the code exists, and costs no read.
        Landing::Machine(Machine::Crawler | Machine::Head) => page(
            200,
            "Scan to reach the team",
            "Open this link in WeChat to be put in touch with the team.",
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
    let opener = opener(&request);
    let before = requests_sent();
    let response = match page_of.visit(tenant, code, opener).await {
        Ok(landing) => {
            match &landing {
                Landing::Chat { staff, number, .. } => {
                    tracing::info!(tenant, code, staff = %staff, visit = number, store_requests = requests_sent() - before, "visit sent to a member");
                }
                Landing::Machine(machine) => {
                    tracing::info!(tenant, code, machine = ?machine, "not a person: answered without counting a visit");
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

    fn one_member(rotations: &InMemoryRotations) {
        rotations.record(
            &TenantId::parse("demo").expect("valid"),
            &CodeId::parse("spring-01").expect("valid"),
            vec![RotationSlot {
                staff: StaffId::parse("zhangsan").expect("valid"),
                takes: 1,
                link: Some("https://work.weixin.qq.com/ca/abc".into()),
            }],
        );
    }

    #[tokio::test]
    async fn the_channel_is_the_code_of_the_path_whatever_the_query_says() {
        let (page_of, rotations) = world();
        one_member(&rotations);
        let request = sample("apigw-landing-visit.json").with_query_string_parameters(
            std::collections::HashMap::from([(
                "customer_channel".to_owned(),
                "another-code".to_owned(),
            )]),
        );
        let response = handle(&page_of, || 0, request).await.expect("handled");
        assert_eq!(
            response.headers()["location"],
            "https://work.weixin.qq.com/ca/abc?customer_channel=spring-01"
        );
    }

    #[tokio::test]
    async fn a_preview_a_head_and_a_prefetch_are_answered_without_counting_a_visit() {
        let (page_of, rotations) = world();
        one_member(&rotations);
        let tenant = TenantId::parse("demo").expect("valid");
        let code = CodeId::parse("spring-01").expect("valid");
        let with_header = |name: &'static str, value: &'static str| {
            let mut request = sample("apigw-landing-visit.json");
            request
                .headers_mut()
                .insert(name, lambda_http::http::HeaderValue::from_static(value));
            request
        };
        let preview = with_header("user-agent", "Slackbot-LinkExpanding 1.0");
        let answer = handle(&page_of, || 0, preview).await.expect("handled");
        assert_eq!(answer.status(), 200);
        assert!(answer.headers().get("location").is_none());
        let mut head = sample("apigw-landing-visit.json");
        *head.method_mut() = Method::HEAD;
        assert_eq!(
            handle(&page_of, || 0, head)
                .await
                .expect("handled")
                .status(),
            200
        );
        let prefetch = with_header("sec-purpose", "prefetch;prerender");
        let answer = handle(&page_of, || 0, prefetch).await.expect("handled");
        assert_eq!(
            answer.status(),
            503,
            "a prefetch is refused, so it is not kept"
        );
        assert_eq!(rotations.visits(&tenant, &code), 0);
        let person = sample("apigw-landing-visit.json");
        assert_eq!(
            handle(&page_of, || 0, person)
                .await
                .expect("handled")
                .status(),
            302
        );
        assert_eq!(rotations.visits(&tenant, &code), 1);
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
