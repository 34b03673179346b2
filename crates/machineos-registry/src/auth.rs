//! Registry authentication as the distribution spec and Docker's token protocol define it:
//! a `401` names the scheme in `WWW-Authenticate`; `Basic` takes the credential itself;
//! `Bearer` sends us to a token service (`realm`, `service`) for a token covering the scopes
//! an operation needs (`repository:<name>:pull[,push]`; a cross-repository mount asks for
//! pull on its source in the same token).
//!
//! Written here, not taken from oci-client, because reading the token answer must be capped
//! like every other response (see [`crate::http`]), and a mount's token must carry two
//! repositories' scopes. Tokens are cached per registry, credential and scopes until they
//! expire; credentials are sent only to the registry they are for (redirects elsewhere lose
//! the `Authorization` header).

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// What a registry asked for in `WWW-Authenticate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// HTTP basic authentication with the credential.
    Basic,
    /// A bearer token from the token service at `realm`.
    Bearer {
        /// The token service URL.
        realm: String,
        /// The `service` parameter to send it, if the registry named one.
        service: Option<String>,
    },
}

/// Parses a `WWW-Authenticate` value (`Bearer realm="…",service="…"`, `Basic realm="…"`);
/// `None` for a scheme we cannot answer or a Bearer challenge without a realm.
pub fn parse_challenge(value: &str) -> Option<Challenge> {
    let value = value.trim();
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    let params = parse_params(rest);
    let get = |k: &str| {
        params
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.clone())
    };
    if scheme.eq_ignore_ascii_case("basic") {
        Some(Challenge::Basic)
    } else if scheme.eq_ignore_ascii_case("bearer") {
        Some(Challenge::Bearer {
            realm: get("realm").filter(|r| !r.is_empty())?,
            service: get("service"),
        })
    } else {
        None
    }
}

/// `k=v` and `k="quoted \" value"` pairs separated by commas.
fn parse_params(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c == ',' {
                break;
            }
            key.push(c);
            chars.next();
        }
        if key.is_empty() {
            return out;
        }
        if chars.next() != Some('=') {
            out.push((key.trim().to_string(), String::new()));
            continue;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        if let Some(n) = chars.next() {
                            value.push(n);
                        }
                    }
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        out.push((key.trim().to_string(), value.trim().to_string()));
    }
}

/// The token service's answer.
#[derive(Debug, serde::Deserialize)]
pub struct TokenAnswer {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

impl TokenAnswer {
    /// The token (`token`, else `access_token`) and how long it lives (60 s when unsaid,
    /// as the spec's minimum), or `None` when the answer has no token.
    pub fn token(self) -> Option<(String, Duration)> {
        let token = self
            .token
            .filter(|t| !t.is_empty())
            .or(self.access_token.filter(|t| !t.is_empty()))?;
        Some((
            token,
            Duration::from_secs(self.expires_in.unwrap_or(60).max(1)),
        ))
    }
}

/// What a registry client remembers between requests.
#[derive(Debug, Default)]
pub struct AuthCache {
    /// The challenge each registry answered with.
    challenges: HashMap<String, Challenge>,
    /// Tokens by (registry, credential key, scopes), with their expiry.
    tokens: HashMap<(String, String, String), (String, Instant)>,
}

impl AuthCache {
    /// The challenge `registry` is known to answer with.
    pub fn challenge(&self, registry: &str) -> Option<&Challenge> {
        self.challenges.get(registry)
    }

    /// Remember `registry`'s challenge.
    pub fn set_challenge(&mut self, registry: &str, c: Challenge) {
        self.challenges.insert(registry.to_string(), c);
    }

    /// A live token for the key, if cached.
    pub fn token(&self, key: &(String, String, String)) -> Option<String> {
        self.tokens
            .get(key)
            .filter(|(_, until)| *until > Instant::now())
            .map(|(t, _)| t.clone())
    }

    /// Cache a token for `ttl` (less a margin, so it is not used as it expires).
    pub fn set_token(&mut self, key: (String, String, String), token: String, ttl: Duration) {
        let margin = (ttl / 10).min(Duration::from_secs(10));
        self.tokens
            .insert(key, (token, Instant::now() + ttl.saturating_sub(margin)));
    }

    /// Forget a token the registry refused.
    pub fn drop_token(&mut self, key: &(String, String, String)) {
        self.tokens.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_table() {
        let cases = [
            (
                r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io""#,
                Some(Challenge::Bearer {
                    realm: "https://auth.docker.io/token".into(),
                    service: Some("registry.docker.io".into()),
                }),
            ),
            (
                r#"bearer realm="https://q.io/v2/auth", service="quay.io", scope="repository:a/b:pull""#,
                Some(Challenge::Bearer {
                    realm: "https://q.io/v2/auth".into(),
                    service: Some("quay.io".into()),
                }),
            ),
            (
                "Bearer realm=https://r/token",
                Some(Challenge::Bearer {
                    realm: "https://r/token".into(),
                    service: None,
                }),
            ),
            (r#"Basic realm="Registry Realm""#, Some(Challenge::Basic)),
            ("Basic", Some(Challenge::Basic)),
            (r#"Bearer service="x""#, None),
            ("Negotiate abc", None),
            ("", None),
        ];
        for (value, want) in cases {
            assert_eq!(parse_challenge(value), want, "{value}");
        }
        assert_eq!(
            parse_params(r#"a="x \"q\", y",b=2"#),
            vec![
                ("a".to_string(), r#"x "q", y"#.to_string()),
                ("b".to_string(), "2".to_string())
            ]
        );
    }

    #[test]
    fn token_answers() {
        let parse = |s: &str| serde_json::from_str::<TokenAnswer>(s).unwrap().token();
        assert_eq!(
            parse(r#"{"token":"t","expires_in":300}"#),
            Some(("t".into(), Duration::from_secs(300)))
        );
        assert_eq!(
            parse(r#"{"access_token":"a"}"#),
            Some(("a".into(), Duration::from_secs(60)))
        );
        assert_eq!(
            parse(r#"{"token":"","access_token":"a"}"#).map(|t| t.0),
            Some("a".into())
        );
        assert_eq!(parse(r#"{"expires_in":3}"#), None);
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_expire() {
        let mut c = AuthCache::default();
        let key = ("r".to_string(), "u".to_string(), "s".to_string());
        c.set_token(key.clone(), "t".into(), Duration::from_secs(100));
        assert_eq!(c.token(&key).as_deref(), Some("t"));
        tokio::time::advance(Duration::from_secs(89)).await;
        assert_eq!(c.token(&key).as_deref(), Some("t"));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(c.token(&key), None);
    }
}
