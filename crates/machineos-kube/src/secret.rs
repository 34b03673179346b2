//! Registry credentials from a Secret, in the two types Kubernetes defines for them:
//!
//! * `kubernetes.io/dockerconfigjson` — key `.dockerconfigjson`, a `config.json`
//!   (`{"auths": {"<registry>": {"auth": …}}}`), used as it is;
//! * `kubernetes.io/dockercfg` — key `.dockercfg`, the legacy `~/.dockercfg`, which is the
//!   `auths` map alone (`{"<registry>": {"auth": …}}`): converted by wrapping it in
//!   `{"auths": …}`, as the MCO does for the `builder-dockercfg-*` Secrets OpenShift creates
//!   for every namespace's `builder` ServiceAccount (its own sample MachineOSConfig pushes
//!   with one).
//!
//! Anything else is refused with what was wrong, for a condition. Pure: no I/O, no parsing
//! of the credentials themselves beyond the JSON object the conversion needs.

use k8s_openapi::api::core::v1::Secret;

/// The `config.json`-format type and key.
pub const DOCKER_CONFIG_JSON: (&str, &str) =
    ("kubernetes.io/dockerconfigjson", ".dockerconfigjson");
/// The legacy type and key.
pub const DOCKER_CFG: (&str, &str) = ("kubernetes.io/dockercfg", ".dockercfg");

/// The Secret's registry credentials as `config.json` bytes (`{"auths": …}`), converted from
/// the legacy `.dockercfg` when that is its type; `Err` says what is wrong (for a
/// condition: "has type …", "has no .dockercfg key", ".dockercfg: …").
pub fn registry_auth(secret: &Secret) -> Result<Vec<u8>, String> {
    let type_ = secret.type_.as_deref().unwrap_or("");
    let key = if type_ == DOCKER_CONFIG_JSON.0 {
        DOCKER_CONFIG_JSON.1
    } else if type_ == DOCKER_CFG.0 {
        DOCKER_CFG.1
    } else {
        return Err(format!(
            "has type {type_:?}, not {:?} or {:?}",
            DOCKER_CONFIG_JSON.0, DOCKER_CFG.0
        ));
    };
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.clone())
        .ok_or_else(|| format!("has no {key} key"))?;
    if key == DOCKER_CONFIG_JSON.1 {
        return Ok(bytes);
    }
    let auths: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes).map_err(|e| format!("{key}: {e}"))?;
    serde_json::to_vec(&serde_json::json!({ "auths": auths })).map_err(|e| format!("{key}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(type_: &str, key: &str, value: &str) -> Secret {
        Secret {
            type_: Some(type_.into()),
            data: Some([(key.to_owned(), ByteString(value.as_bytes().to_vec()))].into()),
            ..Default::default()
        }
    }

    #[test]
    fn both_types_yield_a_config_json_and_anything_else_says_why_not() {
        let json = r#"{"auths":{"quay.io":{"auth":"dTpw"}}}"#;
        let cfg = r#"{"quay.io":{"auth":"dTpw","email":"a@b"}}"#;
        assert_eq!(
            registry_auth(&secret(DOCKER_CONFIG_JSON.0, DOCKER_CONFIG_JSON.1, json)).unwrap(),
            json.as_bytes()
        );
        let converted = registry_auth(&secret(DOCKER_CFG.0, DOCKER_CFG.1, cfg)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&converted).unwrap();
        assert_eq!(v["auths"]["quay.io"]["auth"], "dTpw");
        assert_eq!(v["auths"]["quay.io"]["email"], "a@b");
        let cases = [
            (
                secret("Opaque", "x", "{}"),
                "has type \"Opaque\", not \"kubernetes.io/dockerconfigjson\" or \"kubernetes.io/dockercfg\"",
            ),
            (
                secret(DOCKER_CFG.0, DOCKER_CONFIG_JSON.1, json),
                "has no .dockercfg key",
            ),
            (
                secret(DOCKER_CONFIG_JSON.0, DOCKER_CFG.1, cfg),
                "has no .dockerconfigjson key",
            ),
        ];
        for (s, want) in cases {
            assert_eq!(registry_auth(&s).unwrap_err(), want);
        }
        assert!(
            registry_auth(&secret(DOCKER_CFG.0, DOCKER_CFG.1, "[1]"))
                .unwrap_err()
                .starts_with(".dockercfg: ")
        );
    }
}
