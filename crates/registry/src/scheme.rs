//! Which registries may be spoken to over plain HTTP, and which scheme one actually answers on.
//!
//! Plain HTTP is allowed only for loopback hosts and hosts the user names with
//! `--insecure-registry`; for those, HTTPS is tried first (a loopback registry with TLS keeps
//! TLS) and plain HTTP is used only when HTTPS does not answer. Everyone else gets HTTPS.

use std::net::IpAddr;
use std::time::Duration;

/// The scheme a registry is reached on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// TLS.
    Https,
    /// Plain HTTP.
    Http,
}

/// Whether `host` (`name[:port]`, `[v6]:port`) may be reached over plain HTTP.
pub fn may_use_plain_http(host: &str, insecure_hosts: &[String]) -> bool {
    if insecure_hosts
        .iter()
        .any(|h| h == host || h == host_name(host))
    {
        return true;
    }
    let name = host_name(host);
    if name == "localhost" {
        return true;
    }
    name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The host part of `host[:port]`, without brackets around an IPv6 address.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.chars().all(|c| c.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}

/// Asks `GET /v2/` over HTTPS; any HTTP answer (200, 401, …) means HTTPS works. Otherwise
/// plain HTTP is tried, and used if it answers. If neither answers, HTTPS is kept so the real
/// operation reports the connection error.
pub async fn probe(host: &str, ca_pems: &[Vec<u8>]) -> Scheme {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10));
    for pem in ca_pems {
        if let Ok(certs) = reqwest::Certificate::from_pem_bundle(pem) {
            builder = builder.tls_certs_merge(certs);
        }
    }
    let Ok(client) = builder.build() else {
        return Scheme::Https;
    };
    if client
        .get(format!("https://{host}/v2/"))
        .send()
        .await
        .is_ok()
    {
        return Scheme::Https;
    }
    match client.get(format!("http://{host}/v2/")).send().await {
        Ok(_) => Scheme::Http,
        Err(_) => Scheme::Https,
    }
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
}
