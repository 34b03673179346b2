//! Test controls of the HTTP server (library API, not HTTP): fault injection, delays and
//! request counting, for tests that assert how a client behaves when the server
//! misbehaves (issue 13, "Test controls"). The server's middleware
//! ([`crate::http`]) asks [`Controls::on_request`] about every authenticated request
//! before routing it; closing every open watch and compacting history are on
//! [`crate::http::Server`] because they touch the watch streams and the store.
//!
//! Contract:
//! * [`request_info`] classifies a request as kube-apiserver's `RequestInfoFactory` does
//!   (`k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`) and names its verb as the
//!   audit log does: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
//!   `deletecollection`; non-resource requests (discovery, `/version`) get the
//!   lower-cased method and are counted under their path.
//! * Counts are per `(verb, resource)`, the resource written `plural[.group][/sub]`
//!   (`configmaps`, `jobs.batch/status`), and include requests answered by an injected
//!   fault, as an audit log would record them.
//! * A fault rule answers the next `n` matching requests (first matching rule wins) with
//!   its status code and a `Status` body as kube-apiserver words it
//!   (`k8s.io/apimachinery/pkg/api/errors`: `InternalError`, `TooManyRequests` with
//!   `Retry-After` and `details.retryAfterSeconds`, `ServiceUnavailable`); a delay rule
//!   holds matching requests before they are handled (for a watch: before it starts).
//! * Everything here is synchronous and pure apart from one mutex held for a few map
//!   operations, never across an `.await`.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

/// A request as the controls see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// The HTTP method, upper case.
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The audit verb.
    pub verb: String,
    /// `plural[.group][/subresource]` of a resource request.
    pub resource: Option<String>,
    /// The API group of a resource request (`""` for core).
    pub group: String,
    /// `plural[/subresource]` of a resource request, without the group (what RBAC
    /// calls the resource).
    pub rbac_resource: Option<String>,
    /// The namespace of a namespaced request.
    pub namespace: Option<String>,
    /// The object name of a request on one object.
    pub name: Option<String>,
}

impl RequestInfo {
    /// The key requests are counted under: the resource, or the path of a
    /// non-resource request.
    pub fn count_key(&self) -> (String, String) {
        (
            self.verb.clone(),
            self.resource.clone().unwrap_or_else(|| self.path.clone()),
        )
    }
}

/// Classifies a request from its method, path and query string.
pub fn request_info(method: &str, path: &str, query: Option<&str>) -> RequestInfo {
    let method = method.to_ascii_uppercase();
    let mut info = RequestInfo {
        verb: method.to_ascii_lowercase(),
        method,
        path: path.to_string(),
        resource: None,
        group: String::new(),
        rbac_resource: None,
        namespace: None,
        name: None,
    };
    let Some(rp) = crate::http::rest::parse_path(path) else {
        return info;
    };
    let watch = crate::http::body::parse_query(query)
        .iter()
        .rev()
        .find(|(k, _)| k == "watch")
        .is_some_and(|(_, v)| v == "true" || v == "1");
    let named = rp.name.is_some();
    info.verb = match (info.method.as_str(), named) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => info.verb.as_str(),
    }
    .to_string();
    let sub = rp
        .subresource
        .as_ref()
        .map(|s| format!("/{s}"))
        .unwrap_or_default();
    // GroupResource's Display is `plural[.group]`.
    info.resource = Some(format!("{}{sub}", rp.gr));
    info.rbac_resource = Some(format!("{}{sub}", rp.gr.resource));
    info.group = rp.gr.group;
    info.namespace = rp.namespace;
    info.name = rp.name;
    info
}

/// Which requests a rule applies to: every given part must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestMatch {
    /// The HTTP method (`GET`, …), if any.
    pub method: Option<String>,
    /// The audit verb (`watch`, `list`, …), if any.
    pub verb: Option<String>,
    /// A prefix of the path (`""`: every path).
    pub path_prefix: String,
}

impl RequestMatch {
    /// Every request whose path starts with `prefix`.
    pub fn path(prefix: impl Into<String>) -> RequestMatch {
        RequestMatch {
            path_prefix: prefix.into(),
            ..RequestMatch::default()
        }
    }

    /// Also requires the HTTP method.
    pub fn method(mut self, m: impl Into<String>) -> RequestMatch {
        self.method = Some(m.into().to_ascii_uppercase());
        self
    }

    /// Also requires the audit verb.
    pub fn verb(mut self, v: impl Into<String>) -> RequestMatch {
        self.verb = Some(v.into());
        self
    }

    /// Whether `info` matches.
    pub fn matches(&self, info: &RequestInfo) -> bool {
        self.method.as_ref().is_none_or(|m| *m == info.method)
            && self.verb.as_ref().is_none_or(|v| *v == info.verb)
            && info.path.starts_with(&self.path_prefix)
    }
}

/// An injected error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The HTTP status code.
    pub code: u16,
    /// `Retry-After` seconds, if any.
    pub retry_after: Option<u64>,
}

impl Fault {
    /// 500 `InternalError`.
    pub fn internal_error() -> Fault {
        Fault {
            code: 500,
            retry_after: None,
        }
    }

    /// 429 `TooManyRequests` with `Retry-After: secs`.
    pub fn too_many_requests(secs: u64) -> Fault {
        Fault {
            code: 429,
            retry_after: Some(secs),
        }
    }

    /// 503 `ServiceUnavailable`.
    pub fn service_unavailable() -> Fault {
        Fault {
            code: 503,
            retry_after: None,
        }
    }

    /// The `Status` body, as `k8s.io/apimachinery/pkg/api/errors` builds it for the code
    /// (`NewInternalError`, `NewTooManyRequests`, `NewServiceUnavailable`, else
    /// `NewGenericServerResponse`'s wording).
    pub fn status(&self) -> Value {
        let (reason, message) = match self.code {
            500 => (
                "InternalError",
                "Internal error occurred: injected by the test".to_string(),
            ),
            429 => (
                "TooManyRequests",
                "Too many requests, please try again later.".to_string(),
            ),
            503 => (
                "ServiceUnavailable",
                "the server is currently unable to handle the request".to_string(),
            ),
            c => (
                "",
                format!(
                    "an error on the server (\"injected by the test\") has prevented the request from succeeding (code {c})"
                ),
            ),
        };
        let mut details = serde_json::Map::new();
        if self.code == 500 {
            details.insert(
                "causes".into(),
                json!([{"message": "injected by the test"}]),
            );
        }
        if let Some(s) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(s));
        }
        let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "code": self.code});
        if let Some(m) = s.as_object_mut() {
            if !reason.is_empty() {
                m.insert("reason".into(), json!(reason));
            }
            if !details.is_empty() {
                m.insert("details".into(), Value::Object(details));
            }
        }
        s
    }
}

/// What to do with one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// Hold the request this long first.
    pub delay: Option<Duration>,
    /// Answer with this fault instead of handling it.
    pub fault: Option<Fault>,
}

/// Requests counted per `(verb, resource)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts(pub BTreeMap<(String, String), u64>);

impl RequestCounts {
    /// The count of `verb` on `resource` (`plural[.group][/sub]`, or a path).
    pub fn get(&self, verb: &str, resource: &str) -> u64 {
        self.0
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// The count of `verb` on every resource.
    pub fn verb(&self, verb: &str) -> u64 {
        self.0
            .iter()
            .filter(|((v, _), _)| v == verb)
            .map(|(_, n)| n)
            .sum()
    }

    /// The counts that grew from `before` to `self` (for "what happened since").
    pub fn since(&self, before: &RequestCounts) -> RequestCounts {
        RequestCounts(
            self.0
                .iter()
                .filter_map(|(k, n)| {
                    let d = n.saturating_sub(before.0.get(k).copied().unwrap_or(0));
                    (d > 0).then(|| (k.clone(), d))
                })
                .collect(),
        )
    }
}

#[derive(Debug, Default)]
struct State {
    faults: Vec<(RequestMatch, Fault, u32)>,
    delays: Vec<(RequestMatch, Duration, Option<u32>)>,
    counts: RequestCounts,
}

/// The controls of one server.
#[derive(Debug)]
pub struct Controls {
    state: Mutex<State>,
    closes: tokio::sync::watch::Sender<u64>,
}

impl Default for Controls {
    fn default() -> Controls {
        Controls {
            state: Mutex::default(),
            closes: tokio::sync::watch::channel(0).0,
        }
    }
}

impl Controls {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers the next `n` requests matching `m` with `fault`.
    pub fn fail_next(&self, m: RequestMatch, n: u32, fault: Fault) {
        if n > 0 {
            self.state().faults.push((m, fault, n));
        }
    }

    /// Delays requests matching `m` by `d`: the next `times` of them, or all until
    /// [`Controls::clear`] when `None`.
    pub fn delay(&self, m: RequestMatch, d: Duration, times: Option<u32>) {
        self.state().delays.push((m, d, times));
    }

    /// Removes every fault and delay rule.
    pub fn clear(&self) {
        let mut s = self.state();
        s.faults.clear();
        s.delays.clear();
    }

    /// The requests counted so far.
    pub fn counts(&self) -> RequestCounts {
        self.state().counts.clone()
    }

    /// Forgets the counts.
    pub fn reset_counts(&self) {
        self.state().counts.0.clear();
    }

    /// Counts a request and decides what to do with it.
    pub fn on_request(&self, info: &RequestInfo) -> Decision {
        let mut s = self.state();
        *s.counts.0.entry(info.count_key()).or_default() += 1;
        let mut d = Decision::default();
        if let Some(i) = s.delays.iter().position(|(m, _, _)| m.matches(info)) {
            let (_, delay, times) = &mut s.delays[i];
            d.delay = Some(*delay);
            if let Some(t) = times {
                *t = t.saturating_sub(1);
                if *t == 0 {
                    s.delays.remove(i);
                }
            }
        }
        if let Some(i) = s.faults.iter().position(|(m, _, _)| m.matches(info)) {
            let (_, fault, n) = &mut s.faults[i];
            d.fault = Some(fault.clone());
            *n -= 1;
            if *n == 0 {
                s.faults.remove(i);
            }
        }
        d
    }

    /// Ends every open watch stream (cleanly, as when kube-apiserver closes a watch).
    /// [`crate::http::Server::close_watches`] calls this under the store lock, so no
    /// write made after it returns reaches a closed stream.
    pub fn close_watches(&self) {
        self.closes.send_modify(|n| *n += 1);
    }

    /// A receiver that changes when watches are to close.
    pub fn watch_closes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.closes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_and_resources_as_the_audit_log_names_them() {
        let cases = [
            (
                "GET",
                "/api/v1/namespaces/d/configmaps",
                None,
                "list",
                Some("configmaps"),
            ),
            (
                "GET",
                "/api/v1/namespaces/d/configmaps",
                Some("watch=true"),
                "watch",
                Some("configmaps"),
            ),
            (
                "GET",
                "/api/v1/configmaps",
                Some("watch=1&x=y"),
                "watch",
                Some("configmaps"),
            ),
            (
                "GET",
                "/api/v1/namespaces/d/configmaps/a",
                None,
                "get",
                Some("configmaps"),
            ),
            (
                "POST",
                "/api/v1/namespaces/d/configmaps",
                None,
                "create",
                Some("configmaps"),
            ),
            (
                "PUT",
                "/apis/batch/v1/namespaces/d/jobs/j/status",
                None,
                "update",
                Some("jobs.batch/status"),
            ),
            ("PATCH", "/api/v1/nodes/n", None, "patch", Some("nodes")),
            (
                "DELETE",
                "/api/v1/namespaces/d/pods/p",
                None,
                "delete",
                Some("pods"),
            ),
            (
                "DELETE",
                "/api/v1/namespaces/d/pods",
                None,
                "deletecollection",
                Some("pods"),
            ),
            (
                "GET",
                "/api/v1/namespaces/d",
                None,
                "get",
                Some("namespaces"),
            ),
            ("GET", "/version", None, "get", None),
            ("GET", "/apis", None, "get", None),
            ("POST", "/version", None, "post", None),
        ];
        for (m, p, q, verb, res) in cases {
            let i = request_info(m, p, q);
            assert_eq!(i.verb, verb, "{m} {p} {q:?}");
            assert_eq!(i.resource.as_deref(), res, "{m} {p}");
        }
        let i = request_info("get", "/apis/batch/v1/namespaces/d/jobs/j/status", None);
        assert_eq!(i.group, "batch");
        assert_eq!(i.rbac_resource.as_deref(), Some("jobs/status"));
        assert_eq!(i.namespace.as_deref(), Some("d"));
        assert_eq!(i.name.as_deref(), Some("j"));
        assert_eq!(
            request_info("GET", "/version", None).count_key().1,
            "/version"
        );
    }

    #[test]
    fn rule_matching() {
        let watch = request_info("GET", "/api/v1/namespaces/d/configmaps", Some("watch=true"));
        let list = request_info("GET", "/api/v1/namespaces/d/configmaps", None);
        let post = request_info("POST", "/api/v1/namespaces/d/configmaps", None);
        let cases = [
            (RequestMatch::default(), [true, true, true]),
            (
                RequestMatch::path("/api/v1/namespaces/d/"),
                [true, true, true],
            ),
            (RequestMatch::path("/apis/"), [false, false, false]),
            (RequestMatch::path("").method("get"), [true, true, false]),
            (RequestMatch::path("").verb("watch"), [true, false, false]),
            (
                RequestMatch::path("/api").method("POST").verb("create"),
                [false, false, true],
            ),
        ];
        for (m, want) in cases {
            let got = [m.matches(&watch), m.matches(&list), m.matches(&post)];
            assert_eq!(got, want, "{m:?}");
        }
    }

    #[test]
    fn faults_answer_n_requests_then_stop_and_counts_keep_every_request() {
        let c = Controls::default();
        let list = request_info("GET", "/api/v1/namespaces/d/configmaps", None);
        let get = request_info("GET", "/api/v1/namespaces/d/configmaps/x", None);
        c.fail_next(
            RequestMatch::path("/api/v1").verb("list"),
            2,
            Fault::too_many_requests(3),
        );
        c.fail_next(RequestMatch::path("/api/v1"), 1, Fault::internal_error());
        let d = [
            c.on_request(&list),
            c.on_request(&get),
            c.on_request(&list),
            c.on_request(&list),
            c.on_request(&get),
        ];
        let codes: Vec<Option<u16>> = d.iter().map(|d| d.fault.as_ref().map(|f| f.code)).collect();
        assert_eq!(codes, [Some(429), Some(500), Some(429), None, None]);
        let counts = c.counts();
        assert_eq!(counts.get("list", "configmaps"), 3);
        assert_eq!(counts.get("get", "configmaps"), 2);
        assert_eq!(counts.verb("watch"), 0);
        let before = counts.clone();
        c.on_request(&get);
        assert_eq!(
            c.counts().since(&before).0.into_iter().collect::<Vec<_>>(),
            [(("get".to_string(), "configmaps".to_string()), 1)]
        );
        c.reset_counts();
        assert_eq!(c.counts(), RequestCounts::default());
    }

    #[test]
    fn delays_apply_their_times_or_until_cleared() {
        let c = Controls::default();
        let r = request_info("GET", "/api/v1/pods", None);
        c.delay(
            RequestMatch::path("/api"),
            Duration::from_millis(5),
            Some(1),
        );
        assert_eq!(c.on_request(&r).delay, Some(Duration::from_millis(5)));
        assert_eq!(c.on_request(&r).delay, None);
        c.delay(RequestMatch::path("/api"), Duration::from_millis(7), None);
        assert_eq!(c.on_request(&r).delay, Some(Duration::from_millis(7)));
        assert_eq!(c.on_request(&r).delay, Some(Duration::from_millis(7)));
        c.clear();
        assert_eq!(c.on_request(&r), Decision::default());
    }

    #[test]
    fn fault_status_bodies() {
        let s = Fault::too_many_requests(2).status();
        assert_eq!(s["reason"], "TooManyRequests");
        assert_eq!(s["details"]["retryAfterSeconds"], 2);
        assert_eq!(s["code"], 429);
        let s = Fault::internal_error().status();
        assert_eq!(s["reason"], "InternalError");
        assert_eq!(s["details"]["causes"][0]["message"], "injected by the test");
        let s = Fault::service_unavailable().status();
        assert_eq!(s["reason"], "ServiceUnavailable");
        assert!(s.get("details").is_none());
        let s = Fault {
            code: 502,
            retry_after: None,
        }
        .status();
        assert!(s.get("reason").is_none());
        assert_eq!(s["code"], 502);
    }
}
