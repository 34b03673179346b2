//! TLS and bearer-token authentication of the test API server, so clients run with a real
//! auth configuration: a CA and a server certificate for `127.0.0.1`, `localhost` and
//! `::1` generated at start ([`rcgen`]), served with `tokio-rustls` on the aws-lc-rs
//! provider (the one rustls already uses in this workspace), one random bearer token, and
//! the kubeconfig that carries them (`certificate-authority-data`, `token`).
//!
//! Contract (following kube-apiserver's default authentication chain,
//! `pkg/kubeapiserver/authenticator/config.go`, and its default RBAC roles):
//! * [`authenticate`]: `Authorization: Bearer <the token>` is the one user; a bearer token
//!   that is not it, or any other `Authorization` scheme, fails authentication — 401 with
//!   the `Unauthorized` `Status` kube-apiserver writes (`filters/authentication.go`),
//!   whatever anonymous auth says (`bearertoken.go` turns an unknown token into an error,
//!   which the anonymous fallback does not mask).
//! * No `Authorization` header: with anonymous auth (kube-apiserver's default,
//!   `--anonymous-auth=true`) the request is `system:anonymous`, which the default
//!   `system:public-info-viewer` ClusterRole lets `GET /version`, `/healthz`, `/livez`,
//!   `/readyz` (and their sub-paths) and nothing else: every other request is 403
//!   `Forbidden` worded as RBAC's `forbiddenMessage` (`responsewriters/errors.go`).
//!   Without anonymous auth every such request is 401.
//! * ServiceAccount tokens minted by [`crate::http::Server::service_account_token`] are
//!   that ServiceAccount, authorized by RBAC ([`crate::http::rbac`]); a refusal is the same
//!   403 worded for that user.
//! * Simplifications: the generated token is one identity with every permission
//!   (`system:masters`), no `SelfSubjectReview`, no client certificates or token files; a
//!   test harness, not a security boundary (the admin token is still compared without an
//!   early exit).
//!
//! The certificate work is `rcgen`'s and the TLS is rustls'; what is written here is the
//! glue and the decisions above, which no crate makes.

use std::sync::Arc;

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::{Value, json};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::crypto::aws_lc_rs;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Generating a key or a certificate failed.
    #[error("generating the test server's certificates: {0}")]
    Cert(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("configuring TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

impl From<TlsError> for std::io::Error {
    fn from(e: TlsError) -> std::io::Error {
        std::io::Error::other(e)
    }
}

/// The credentials of a TLS server: its CA, its acceptor and the bearer token.
#[derive(Clone)]
pub struct TlsIdentity {
    /// The CA certificate clients trust, PEM.
    pub ca_pem: String,
    /// The one accepted bearer token.
    pub token: String,
    /// The TLS acceptor with the server certificate.
    pub acceptor: TlsAcceptor,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsIdentity").finish_non_exhaustive()
    }
}

/// A random token: 32 bytes from the TLS provider's secure random source, in hex.
pub fn random_token() -> Result<String, TlsError> {
    let mut b = [0u8; 32];
    aws_lc_rs::default_provider()
        .secure_random
        .fill(&mut b)
        .map_err(|_| rustls::Error::FailedToGetRandomBytes)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Generates a CA, a server certificate it signs for `127.0.0.1`, `localhost` and `::1`,
/// and a bearer token.
pub fn generate() -> Result<TlsIdentity, TlsError> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(DnType::CommonName, "machineos-kubetest CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec![
        "127.0.0.1".to_owned(),
        "localhost".to_owned(),
        "::1".to_owned(),
    ])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &issuer)?;

    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone(), ca_cert.der().clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut config = ServerConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    // HTTP/1.1 only, as the server speaks (kubectl and kube-rs offer h2 and http/1.1).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsIdentity {
        ca_pem: ca_cert.pem(),
        token: random_token()?,
        acceptor: TlsAcceptor::from(Arc::new(config)),
    })
}

/// The outcome of authenticating one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// The bearer token matched.
    User,
    /// No credentials, anonymous auth on: `system:anonymous`.
    Anonymous,
    /// 401.
    Unauthorized,
}

/// Authenticates a request by its `Authorization` header.
pub fn authenticate(header: Option<&[u8]>, token: &str, anonymous: bool) -> Auth {
    let Some(h) = header else {
        return if anonymous {
            Auth::Anonymous
        } else {
            Auth::Unauthorized
        };
    };
    // The scheme is case-insensitive (RFC 7235); kube-apiserver's bearertoken
    // authenticator compares it with strings.ToLower.
    let Some((scheme, given)) = std::str::from_utf8(h).ok().and_then(|s| s.split_once(' ')) else {
        return Auth::Unauthorized;
    };
    let given = given.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || given.len() != token.len() {
        return Auth::Unauthorized;
    }
    let diff = given
        .bytes()
        .zip(token.bytes())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    if diff == 0 {
        Auth::User
    } else {
        Auth::Unauthorized
    }
}

/// Whether `system:anonymous` may make this request: the `system:public-info-viewer`
/// ClusterRole's non-resource URLs (`/healthz`, `/livez`, `/readyz`, `/version` and
/// their sub-paths), `get` only.
pub fn anonymous_allowed(method: &str, path: &str) -> bool {
    method == "GET"
        && ["/healthz", "/livez", "/readyz", "/version"]
            .iter()
            .any(|p| path == *p || path.starts_with(&format!("{p}/")))
}

/// The 401 `Status` kube-apiserver writes for failed authentication.
pub fn unauthorized_status() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
}

/// What an authorizer sees of a request: for resource requests the verb, group,
/// resource (with `/subresource`), namespace and name; for others the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes<'a> {
    /// The apiserver verb (`get`, `list`, `watch`, `create`, …; for non-resource
    /// requests the lower-cased method).
    pub verb: &'a str,
    /// The request path.
    pub path: &'a str,
    /// `(group, resource[/subresource], namespace, name)` of a resource request.
    pub resource: Option<(&'a str, String, Option<&'a str>, Option<&'a str>)>,
}

/// The 403 `Status` of `system:anonymous` being refused, worded as RBAC's
/// `forbiddenMessage` wrapped by `errors.NewForbidden`.
pub fn forbidden_status(a: &Attributes<'_>) -> Value {
    forbidden_status_for(a, "system:anonymous")
}

/// The 403 `Status` of user `user` being refused (see [`forbidden_status`]).
pub fn forbidden_status_for(a: &Attributes<'_>, user: &str) -> Value {
    let (message, details) = match &a.resource {
        None => (
            format!(
                "forbidden: User {user:?} cannot {} path {:?}",
                a.verb, a.path
            ),
            json!({}),
        ),
        Some((group, resource, ns, name)) => {
            let plural = resource.split('/').next().unwrap_or(resource);
            let qualified = if group.is_empty() {
                plural.to_string()
            } else {
                format!("{plural}.{group}")
            };
            let scope = match ns {
                Some(ns) => format!("in the namespace {ns:?}"),
                None => "at the cluster scope".to_string(),
            };
            let what = format!(
                "User {user:?} cannot {} resource {resource:?} in API group {group:?} {scope}",
                a.verb
            );
            let message = match name {
                Some(n) => format!("{qualified} {n:?} is forbidden: {what}"),
                None => format!("{qualified} is forbidden: {what}"),
            };
            let mut d = json!({"kind": plural});
            if let Some(m) = d.as_object_mut() {
                if let Some(n) = name {
                    m.insert("name".into(), json!(n));
                }
                if !group.is_empty() {
                    m.insert("group".into(), json!(group));
                }
            }
            (message, d)
        }
    };
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "Forbidden", "details": details, "code": 403})
}

/// A kubeconfig (YAML) for `url`: with TLS, the CA as `certificate-authority-data` and
/// the bearer `token`; without, no credentials. Context `kubetest`, namespace `default`.
pub fn kubeconfig(url: &str, tls: Option<(&str, &str)>) -> String {
    let (ca, user) = match tls {
        Some((ca_pem, token)) => (
            format!(
                "    certificate-authority-data: {}\n",
                base64::engine::general_purpose::STANDARD.encode(ca_pem)
            ),
            format!("    token: {token}\n"),
        ),
        None => (String::new(), "    {}\n".to_string()),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kubetest\n  cluster:\n    server: {url}\n{ca}\
contexts:\n- name: kubetest\n  context:\n    cluster: kubetest\n    user: kubetest\n    namespace: default\n\
current-context: kubetest\nusers:\n- name: kubetest\n  user:\n{user}"
    )
}

/// Writes `contents` to `path` atomically with `machineos_image::atomic` (temporary file in
/// the same directory, synced, renamed over `path`), on a blocking thread, mode 0600: a
/// reader never sees a partial kubeconfig, and no other user reads its token.
pub async fn write_atomically(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    let (path, contents) = (path.to_path_buf(), contents.as_bytes().to_vec());
    tokio::task::spawn_blocking(move || machineos_image::atomic::write(&path, &contents, 0o600))
        .await
        .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authentication_table() {
        let t = "abc123";
        let cases: &[(Option<&str>, bool, Auth)] = &[
            (Some("Bearer abc123"), true, Auth::User),
            (Some("bearer abc123"), false, Auth::User),
            (Some("Bearer abc124"), true, Auth::Unauthorized),
            (Some("Bearer abc12"), true, Auth::Unauthorized),
            (Some("Basic YWRtaW46YWRtaW4="), true, Auth::Unauthorized),
            (Some("Bearer"), true, Auth::Unauthorized),
            (None, true, Auth::Anonymous),
            (None, false, Auth::Unauthorized),
        ];
        for (h, anon, want) in cases {
            assert_eq!(
                authenticate(h.map(str::as_bytes), t, *anon),
                *want,
                "{h:?} {anon}"
            );
        }
    }

    #[test]
    fn anonymous_may_read_public_info_only() {
        for (m, p, want) in [
            ("GET", "/version", true),
            ("GET", "/healthz", true),
            ("GET", "/readyz/ping", true),
            ("GET", "/livez", true),
            ("POST", "/version", false),
            ("GET", "/versions", false),
            ("GET", "/api", false),
            ("GET", "/api/v1/namespaces", false),
        ] {
            assert_eq!(anonymous_allowed(m, p), want, "{m} {p}");
        }
    }

    #[test]
    fn forbidden_messages_as_rbac_words_them() {
        let s = forbidden_status(&Attributes {
            verb: "get",
            path: "/api",
            resource: None,
        });
        assert_eq!(
            s["message"],
            "forbidden: User \"system:anonymous\" cannot get path \"/api\""
        );
        assert_eq!(s["code"], 403);
        let s = forbidden_status(&Attributes {
            verb: "list",
            path: "/api/v1/namespaces/default/configmaps",
            resource: Some(("", "configmaps".into(), Some("default"), None)),
        });
        assert_eq!(
            s["message"],
            "configmaps is forbidden: User \"system:anonymous\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
        );
        let s = forbidden_status(&Attributes {
            verb: "get",
            path: "/apis/batch/v1/jobs/x",
            resource: Some(("batch", "jobs/status".into(), None, Some("x"))),
        });
        assert_eq!(
            s["message"],
            "jobs.batch \"x\" is forbidden: User \"system:anonymous\" cannot get resource \"jobs/status\" in API group \"batch\" at the cluster scope"
        );
        assert_eq!(
            s["details"],
            json!({"kind": "jobs", "name": "x", "group": "batch"})
        );
    }

    #[test]
    fn kubeconfig_carries_ca_and_token() {
        let k = kubeconfig("https://127.0.0.1:1", Some(("PEM", "tok")));
        assert!(k.contains("certificate-authority-data: UEVN\n"), "{k}");
        assert!(k.contains("    token: tok\n"), "{k}");
        let k = kubeconfig("http://127.0.0.1:1", None);
        assert!(
            !k.contains("token") && k.ends_with("  user:\n    {}\n"),
            "{k}"
        );
    }

    #[test]
    fn identities_differ() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_ne!(a.token, b.token);
        assert_eq!(a.token.len(), 64);
        assert!(a.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    }
}
