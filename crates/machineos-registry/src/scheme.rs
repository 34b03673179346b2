//! Which registries may be spoken to over plain HTTP, and which scheme one actually answers on.
//!
//! Plain HTTP is allowed only for loopback hosts and hosts the user names with
//! `--insecure-registry`, and only when the registry does not speak TLS: a loopback registry
//! with TLS keeps TLS. Everyone else gets HTTPS.

use machineos_image::reference::{is_loopback_registry, split_host_port};
use std::time::Duration;

/// The scheme a registry is reached on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// TLS.
    Https,
    /// Plain HTTP.
    Http,
}

/// Whether `host` (`name[:port]`, `[v6]:port`) may be reached over plain HTTP: a loopback
/// host, or one named in `insecure_hosts` with or without its port.
pub fn may_use_plain_http(host: &str, insecure_hosts: &[String]) -> bool {
    let name = split_host_port(host).map_or(host, |(name, _)| name);
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    insecure_hosts
        .iter()
        .any(|h| h == host || h == name || h == bare)
        || is_loopback_registry(host)
}

/// Which scheme the registry at `host` speaks. One port speaks either TLS or plain HTTP, so
/// a plain `GET /v2/` (no credentials are ever sent) tells them apart in one round trip: a
/// registry answering it with a registry status (200, or 401 asking for credentials) speaks
/// plain HTTP; a TLS port refuses it (Go's servers answer 400) or drops the connection, and
/// is used over HTTPS — as is a host that does not answer at all, so the real operation
/// reports the connection error.
pub async fn probe(host: &str) -> Scheme {
    // The probe never speaks TLS, so the client needs no trust roots.
    let Ok(client) = reqwest::Client::builder()
        .tls_certs_only(Vec::new())
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .build()
    else {
        return Scheme::Https;
    };
    match client.get(format!("http://{host}/v2/")).send().await {
        Ok(r) if is_registry_answer(r.status().as_u16()) => Scheme::Http,
        _ => Scheme::Https,
    }
}

/// Whether a plain-HTTP answer to `GET /v2/` comes from a registry speaking plain HTTP.
fn is_registry_answer(status: u16) -> bool {
    matches!(status, 200 | 401)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_only_for_loopback_and_named_hosts() {
        let insecure = vec!["reg.lab:5000".to_string(), "other.lab".to_string()];
        let table = [
            ("127.0.0.1:5000", true),
            ("127.3.4.5", true),
            ("localhost:5000", true),
            ("[::1]:5000", true),
            ("reg.lab:5000", true),
            ("other.lab:443", true),
            ("reg.lab:5001", false),
            ("quay.io", false),
            ("10.0.0.1:5000", false),
            ("[fe80::1]:5000", false),
        ];
        for (host, want) in table {
            assert_eq!(may_use_plain_http(host, &insecure), want, "{host}");
        }
    }

    #[test]
    fn only_registry_statuses_mean_plain_http() {
        for (status, want) in [
            (200, true),
            (401, true),
            (400, false),
            (404, false),
            (502, false),
        ] {
            assert_eq!(is_registry_answer(status), want, "{status}");
        }
    }
}
