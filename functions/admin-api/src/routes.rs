//! The admin API's routes, one row each. Routing, the `Allow` header of a 405, the refusal of
//! unknown query parameters and the contract test against `docs/admin-api.openapi.json` all
//! read `ROUTES`, so a route is added here (and dispatched in `handler.rs`) or nowhere.

/// One route: the name it is logged and dispatched by, its path as API Gateway and the
/// OpenAPI document name it, the methods it answers (in `Allow` order) and the query
/// parameters it reads (any other is refused).
#[derive(Debug, PartialEq, Eq)]
pub struct Route {
    pub name: &'static str,
    pub path: &'static str,
    pub methods: &'static [&'static str],
    pub query: &'static [&'static str],
}

pub const ROUTES: &[Route] = &[
    Route {
        name: "tenant",
        path: "/admin/tenants/{tenant}",
        methods: &["GET", "PUT"],
        query: &[],
    },
    Route {
        name: "staff",
        path: "/admin/tenants/{tenant}/staff/{staff}",
        methods: &["GET", "PUT"],
        query: &[],
    },
    Route {
        name: "staff_codes",
        path: "/admin/tenants/{tenant}/staff/{staff}/codes",
        methods: &["GET"],
        query: &["limit", "cursor"],
    },
    Route {
        name: "codes",
        path: "/admin/tenants/{tenant}/codes",
        methods: &["GET"],
        query: &["limit", "cursor"],
    },
    Route {
        name: "code",
        path: "/admin/tenants/{tenant}/codes/{code}",
        methods: &["DELETE", "GET", "PUT"],
        query: &[],
    },
    Route {
        name: "department",
        path: "/admin/tenants/{tenant}/departments/{department}",
        methods: &["GET", "PUT"],
        query: &[],
    },
    Route {
        name: "drift",
        path: "/admin/tenants/{tenant}/drift",
        methods: &["GET"],
        query: &["day"],
    },
    Route {
        name: "drift_resume",
        path: "/admin/tenants/{tenant}/drift/resume",
        methods: &["POST"],
        query: &[],
    },
];

impl Route {
    /// The path's segments after `/admin`: literals, and `{name}` for an id.
    fn segments(&self) -> impl Iterator<Item = &'static str> {
        self.path.split('/').filter(|s| !s.is_empty()).skip(1)
    }

    /// The methods as an `Allow` header lists them.
    pub fn allow(&self) -> String {
        self.methods.join(", ")
    }

    pub fn answers(&self, method: &str) -> bool {
        self.methods.contains(&method)
    }
}

/// A request's route, with the ids its path holds.
#[derive(Debug, PartialEq, Eq)]
pub struct Matched {
    pub route: &'static Route,
    pub ids: Vec<(&'static str, String)>,
}

impl Matched {
    pub fn name(&self) -> &'static str {
        self.route.name
    }

    /// The id `name` of the path; every route's template names it.
    pub fn id(&self, name: &str) -> &str {
        self.ids
            .iter()
            .find(|(id, _)| *id == name)
            .map(|(_, value)| value.as_str())
            .unwrap_or_default()
    }

    pub fn tenant(&self) -> &str {
        self.id("tenant")
    }
}

/// The route of `path` by its shape after its first `/admin` segment, wherever the API is
/// mounted. An id is `decoded(name)` when that has it (API Gateway's decoded path parameters),
/// the path's segment otherwise.
pub fn route<'p>(path: &'p str, decoded: impl Fn(&str) -> Option<&'p str>) -> Option<Matched> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let admin = segments.iter().position(|s| *s == "admin")?;
    let segments = &segments[admin + 1..];
    ROUTES.iter().find_map(|route| {
        if route.segments().count() != segments.len() {
            return None;
        }
        let mut ids = Vec::new();
        for (template, segment) in route.segments().zip(segments) {
            match template.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                Some(name) => ids.push((name, decoded(name).unwrap_or(segment).to_owned())),
                None if template == *segment => {}
                None => return None,
            }
        }
        Some(Matched { route, ids })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_path(path: &str) -> Option<(&'static str, Vec<(&'static str, String)>)> {
        route(path, |_| None).map(|m| (m.name(), m.ids))
    }

    #[test]
    fn every_route_is_reached_by_its_own_template_and_no_earlier_row_shadows_it() {
        for row in ROUTES {
            let concrete = row.path.replace(['{', '}'], "");
            let matched = route(&concrete, |_| None).expect("a route");
            assert_eq!(matched.route, row, "{concrete}");
        }
    }

    #[test]
    fn route_names_are_unique_and_methods_are_listed_in_allow_order() {
        let mut names: Vec<_> = ROUTES.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ROUTES.len());
        for row in ROUTES {
            assert!(row.methods.is_sorted(), "{}", row.name);
        }
    }

    #[test]
    fn ids_come_from_the_decoded_path_parameters_when_there_are_some() {
        let matched = route("/admin/tenants/acme/staff/li.si%40x", |name| {
            (name == "staff").then_some("li.si@x")
        })
        .expect("a route");

        assert_eq!(matched.name(), "staff");
        assert_eq!(matched.tenant(), "acme");
        assert_eq!(matched.id("staff"), "li.si@x");
    }

    #[test]
    fn a_path_without_an_admin_segment_or_of_another_shape_is_no_route() {
        assert_eq!(from_path("/tenants/acme"), None);
        assert_eq!(from_path("/admin/tenants/acme/things"), None);
        assert_eq!(from_path("/admin/tenants/acme/drift/pause"), None);
        assert_eq!(from_path("/admin"), None);
    }
}
