//! List and watch options as kube-apiserver validates and interprets them: which state a
//! list reads ([`ReadAt`], from `resourceVersion` and `resourceVersionMatch`), how a watch
//! starts ([`WatchStart`]), and the `continue` token ([`ContinueToken`]).
//!
//! | `resourceVersion` | `resourceVersionMatch` | list reads |
//! |---|---|---|
//! | unset | unset | the most recent state |
//! | `"0"` | unset or `NotOlderThan` | any state; this store gives the most recent |
//! | `X` | unset or `NotOlderThan` | a state not older than X (the most recent; 504 if X is in the future) |
//! | `X` | `Exact` | the state at X (410 if X is older than the retained history) |
//!
//! `resourceVersionMatch` without `resourceVersion`, `Exact` with `"0"`, and either with
//! `continue` are 422s on `ListOptions`, as on a real server. A continue token is
//! base64url JSON `{"v":"meta.k8s.io/v1","rv":N,"start":"<ns>/<name>\u0000"}` like the etcd3
//! store's: the list's resourceVersion and the key after which to resume; it reads the state
//! at that resourceVersion, and a token whose resourceVersion has been compacted away is a
//! 410 with the etcd3 store's message.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use machineos_crd_validation::{BadValue, ErrorType, FieldError};
use serde_json::{Value, json};

use crate::error::ApiError;

/// The options of a list request (query parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit` (0 or unset: no limit).
    pub limit: Option<u64>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
}

/// The options of a watch request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
}

/// Which state a list reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAt {
    /// The most recent state (also `resourceVersion=0`).
    Latest,
    /// A state not older than this resourceVersion.
    NotOlderThan(u64),
    /// Exactly the state at this resourceVersion.
    Exact(u64),
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// Synthetic `ADDED` events for the current state, then changes (`resourceVersion`
    /// unset or `"0"`).
    CurrentState,
    /// A streaming list: the current state (not older than the resourceVersion, if any) as
    /// `ADDED` events, a bookmark marking their end, then changes.
    InitialEvents(Option<u64>),
    /// The changes after this resourceVersion.
    After(u64),
}

fn invalid(kind: ErrorType, field: &str, value: BadValue, detail: &str) -> FieldError {
    FieldError::new(kind, Some(field.into()), value, detail.into())
}

fn list_options_invalid(errs: Vec<FieldError>) -> ApiError {
    ApiError::invalid("meta.k8s.io", "ListOptions", "", errs)
}

/// Parses a resourceVersion (400 when not a number).
pub fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse::<u64>()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))
}

fn check_match(m: Option<&str>) -> Result<(), ApiError> {
    match m {
        None | Some("" | "Exact" | "NotOlderThan") => Ok(()),
        Some(other) => Err(list_options_invalid(vec![invalid(
            ErrorType::NotSupported,
            "resourceVersionMatch",
            BadValue::Str(other.into()),
            r#"supported values: "Exact", "NotOlderThan", """#,
        )])),
    }
}

impl ListOptions {
    /// Which state to read, validated as kube-apiserver validates `ListOptions`.
    pub fn read_at(&self) -> Result<ReadAt, ApiError> {
        let rv = self.resource_version.as_deref().filter(|s| !s.is_empty());
        let m = self
            .resource_version_match
            .as_deref()
            .filter(|s| !s.is_empty());
        check_match(m)?;
        let mut errs = Vec::new();
        if m.is_some() && rv.is_none() {
            errs.push(invalid(
                ErrorType::Forbidden,
                "resourceVersionMatch",
                BadValue::Omit,
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if self
            .continue_token
            .as_deref()
            .is_some_and(|c| !c.is_empty())
        {
            if m.is_some() {
                errs.push(invalid(
                    ErrorType::Forbidden,
                    "resourceVersionMatch",
                    BadValue::Omit,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if rv.is_some_and(|r| r != "0") {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
        }
        if m == Some("Exact") && rv == Some("0") {
            errs.push(invalid(
                ErrorType::Forbidden,
                "resourceVersionMatch",
                BadValue::Omit,
                r#"resourceVersionMatch "exact" is forbidden for resourceVersion "0""#,
            ));
        }
        if !errs.is_empty() {
            return Err(list_options_invalid(errs));
        }
        Ok(match (rv, m) {
            (None, _) | (Some("0"), _) => ReadAt::Latest,
            (Some(r), Some("Exact")) => ReadAt::Exact(parse_rv(r)?),
            (Some(r), _) => ReadAt::NotOlderThan(parse_rv(r)?),
        })
    }
}

impl WatchOptions {
    /// Where the watch starts, validated as kube-apiserver validates watch `ListOptions`.
    pub fn start(&self) -> Result<WatchStart, ApiError> {
        let rv = self.resource_version.as_deref().filter(|s| !s.is_empty());
        let m = self
            .resource_version_match
            .as_deref()
            .filter(|s| !s.is_empty());
        check_match(m)?;
        let mut errs = Vec::new();
        if self.send_initial_events.is_some() {
            if m != Some("NotOlderThan") {
                errs.push(invalid(
                    ErrorType::Forbidden,
                    "resourceVersionMatch",
                    BadValue::Omit,
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if !self.allow_watch_bookmarks {
                errs.push(invalid(
                    ErrorType::Forbidden,
                    "allowWatchBookmarks",
                    BadValue::Omit,
                    "sendInitialEvents requires setting allowWatchBookmarks to true",
                ));
            }
        } else if m.is_some() {
            errs.push(invalid(
                ErrorType::Forbidden,
                "resourceVersionMatch",
                BadValue::Omit,
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if !errs.is_empty() {
            return Err(list_options_invalid(errs));
        }
        Ok(match (self.send_initial_events, rv) {
            (Some(true), None | Some("0")) => WatchStart::InitialEvents(None),
            (Some(true), Some(r)) => WatchStart::InitialEvents(Some(parse_rv(r)?)),
            (_, None | Some("0")) => WatchStart::CurrentState,
            (_, Some(r)) => WatchStart::After(parse_rv(r)?),
        })
    }
}

/// A decoded continue token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinueToken {
    /// The resourceVersion of the list it continues.
    pub rv: u64,
    /// The last key returned (`ns/name`, or `name` for cluster scope).
    pub start: String,
}

/// The etcd3 store's message for a continue token older than the retained history.
pub const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

impl ContinueToken {
    /// The token's text.
    pub fn encode(&self) -> String {
        let j =
            json!({"v": "meta.k8s.io/v1", "rv": self.rv, "start": format!("{}\u{0}", self.start)});
        URL_SAFE_NO_PAD.encode(j.to_string())
    }

    /// Decodes a token (400 when it is not one).
    pub fn decode(s: &str) -> Result<ContinueToken, ApiError> {
        let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
        let bytes = URL_SAFE_NO_PAD
            .decode(s.trim_end_matches('='))
            .map_err(|e| bad(&e.to_string()))?;
        let j: Value = serde_json::from_slice(&bytes).map_err(|e| bad(&e.to_string()))?;
        if j.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
            return Err(bad(
                "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ));
        }
        let rv = j
            .get("rv")
            .and_then(Value::as_u64)
            .filter(|rv| *rv > 0)
            .ok_or_else(|| {
                bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
            })?;
        let start = j
            .get("start")
            .and_then(Value::as_str)
            .map(|s| s.trim_end_matches('\u{0}').to_string())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad("encoded start key is empty"))?;
        Ok(ContinueToken { rv, start })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lo(rv: Option<&str>, m: Option<&str>, cont: Option<&str>) -> ListOptions {
        ListOptions {
            resource_version: rv.map(String::from),
            resource_version_match: m.map(String::from),
            continue_token: cont.map(String::from),
            ..ListOptions::default()
        }
    }

    #[test]
    fn list_resource_version_semantics() {
        let ok: Vec<(Option<&str>, Option<&str>, ReadAt)> = vec![
            (None, None, ReadAt::Latest),
            (Some("0"), None, ReadAt::Latest),
            (Some("0"), Some("NotOlderThan"), ReadAt::Latest),
            (Some("5"), None, ReadAt::NotOlderThan(5)),
            (Some("5"), Some("NotOlderThan"), ReadAt::NotOlderThan(5)),
            (Some("5"), Some("Exact"), ReadAt::Exact(5)),
        ];
        for (rv, m, want) in ok {
            assert_eq!(lo(rv, m, None).read_at().unwrap(), want, "{rv:?} {m:?}");
        }
        let errs: Vec<(ListOptions, u16, &str)> = vec![
            (
                lo(None, Some("Exact"), None),
                422,
                r#"ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"#,
            ),
            (
                lo(Some("0"), Some("Exact"), None),
                422,
                r#"resourceVersionMatch "exact" is forbidden for resourceVersion "0""#,
            ),
            (
                lo(Some("1"), Some("Sometimes"), None),
                422,
                r#"resourceVersionMatch: Unsupported value: "Sometimes""#,
            ),
            (
                lo(Some("5"), None, Some("tok")),
                400,
                "specifying resource version is not allowed when using continue",
            ),
            (
                lo(Some("x"), None, None),
                400,
                "invalid resource version: x",
            ),
        ];
        for (o, code, msg) in errs {
            let e = o.read_at().unwrap_err();
            assert_eq!(e.code(), code, "{o:?}");
            assert!(e.to_string().contains(msg), "{e}");
        }
    }

    #[test]
    fn watch_start_semantics() {
        let w = |rv: Option<&str>, m: Option<&str>, sie: Option<bool>, bm: bool| WatchOptions {
            resource_version: rv.map(String::from),
            resource_version_match: m.map(String::from),
            send_initial_events: sie,
            allow_watch_bookmarks: bm,
            ..WatchOptions::default()
        };
        assert_eq!(
            w(None, None, None, false).start().unwrap(),
            WatchStart::CurrentState
        );
        assert_eq!(
            w(Some("0"), None, None, true).start().unwrap(),
            WatchStart::CurrentState
        );
        assert_eq!(
            w(Some("7"), None, None, false).start().unwrap(),
            WatchStart::After(7)
        );
        assert_eq!(
            w(None, Some("NotOlderThan"), Some(true), true)
                .start()
                .unwrap(),
            WatchStart::InitialEvents(None)
        );
        assert_eq!(
            w(Some("3"), Some("NotOlderThan"), Some(true), true)
                .start()
                .unwrap(),
            WatchStart::InitialEvents(Some(3))
        );
        let e = w(None, None, Some(true), false).start().unwrap_err();
        assert_eq!(e.code(), 422);
        assert!(e.to_string().contains("allowWatchBookmarks"), "{e}");
        assert!(
            w(Some("1"), Some("Exact"), None, false).start().is_err(),
            "resourceVersionMatch needs sendInitialEvents"
        );
    }

    #[test]
    fn continue_tokens_round_trip() {
        let t = ContinueToken {
            rv: 12,
            start: "ns/name".into(),
        };
        assert_eq!(ContinueToken::decode(&t.encode()).unwrap(), t);
        for bad in [
            "!!!",
            "e30",
            &URL_SAFE_NO_PAD.encode(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#),
        ] {
            let e = ContinueToken::decode(bad).unwrap_err();
            assert_eq!(e.code(), 400);
            assert!(e.to_string().starts_with("continue key is not valid"));
        }
    }
}
