//! The per-build pull Secret `pull-<build>`: the push Secret's and the base pull Secret's
//! registry credentials merged into one `kubernetes.io/dockerconfigjson` Secret.
//!
//! **Why one merged Secret.** The Containerfile starts `FROM` the native image, which lives
//! in the *push* registry (the MachineOSConfig's `renderedImagePushSpec` repository), while
//! the extensions image (`RUN --mount=type=bind,from=…`) and anything the user's
//! Containerfile pulls need the *base pull* Secret. `buildah bud` takes one `--authfile`, and
//! OpenShift's Docker build strategy one `pullSecret`; so the build reads one Secret holding
//! both. The controller creates it, ephemeral, for each build.
//!
//! **The MCO's precedent.** The MCO also never hands the user's Secrets to the build as they
//! are: it creates per-build copies (`base-<mosb>` of the base pull Secret, `final-<mosb>`
//! of the push Secret; `<name>-canonical` in earlier releases), *canonicalized*: a legacy
//! `.dockercfg` map is rewritten into the `{"auths": …}` shape a `.dockerconfigjson` key
//! holds (`ConvertSecretToDockerconfigJSON`), and its build pod mounts each for its own
//! `--authfile`. machineos makes one canonical copy of both instead.
//!
//! Contract of [`merged_pull_secret`] (and [`merged_auths`], its data):
//!
//! * **Input shapes.** Whatever Secret key the bytes came from, an object with an `auths`
//!   member is the `.dockerconfigjson` shape (`auths` must be an object), and any other
//!   object is the legacy `.dockercfg` shape, a bare map registry → entry (the MCO decides
//!   the same way). Every entry must be an object; it is copied unchanged (`auth`,
//!   `username`/`password`, `identitytoken`, `email`). Other top-level members of the
//!   `.dockerconfigjson` shape (`credHelpers`, `credsStore`, `HttpHeaders`) are dropped:
//!   they name helper programs the build pod does not have.
//! * **Keys are canonicalized** as containers/image (buildah, podman) reads them: a leading
//!   `http://` or `https://` is removed and then only the host is kept, as it is for every
//!   key of the legacy shape; `index.docker.io` and `registry-1.docker.io` are spelled
//!   `docker.io`. A key of the `.dockerconfigjson` shape without a scheme keeps its path
//!   (`quay.io/org/repo` is a per-repository credential). So `https://quay.io/v1/` and
//!   `quay.io` are one registry, and the merged file never holds two spellings of one key
//!   (containers/image would then pick one of them in map order).
//! * **Precedence.** For a key both Secrets name, the push Secret's entry wins (it must
//!   read the native image it pushed). Within one Secret, of two keys that canonicalize
//!   alike, the one already canonical wins, else the first in byte order.
//! * **Output.** Secret `pull-<build>` ([`super::names::pull_secret_name`]), type
//!   `kubernetes.io/dockerconfigjson`, key `.dockerconfigjson` (in `data`, base64) =
//!   `{"auths": {…}}` with the keys sorted; labels, annotations and owner reference as the
//!   ConfigMaps' (the MachineOSBuild, not as controller).
//! * **Errors** ([`SecretError`]) name the Secret, the key and the JSON path, never a value:
//!   `Secret push-creds: .dockerconfigjson: auths: expected an object, found a string`.
//!
//! Simplifications: entries are not checked beyond being objects (an `auth` that is not
//! base64 is the registry client's to refuse); credential helpers are not supported.
//!
//! Hand-written: a few dozen lines of JSON on `serde_json` values. The Docker-credential
//! crates read and write `~/.docker` files (I/O) and merge nothing.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use machineos_diagnostics::{Classify, Retry};
use serde_json::{Map, Value, json};

use super::names::{BuildMeta, object_meta, pull_secret_name};

/// The key of a `kubernetes.io/dockerconfigjson` Secret.
pub const DOCKERCONFIGJSON_KEY: &str = ".dockerconfigjson";
/// The key of a legacy `kubernetes.io/dockercfg` Secret.
pub const DOCKERCFG_KEY: &str = ".dockercfg";
/// The type of the merged Secret.
pub const DOCKERCONFIGJSON_TYPE: &str = "kubernetes.io/dockerconfigjson";

/// One registry Secret's payload, as read from the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistrySecret<'a> {
    /// The Secret's name (for errors).
    pub name: &'a str,
    /// The data key the bytes came from ([`DOCKERCONFIGJSON_KEY`] or [`DOCKERCFG_KEY`]).
    pub key: &'a str,
    /// The decoded value of that key.
    pub data: &'a [u8],
}

impl<'a> RegistrySecret<'a> {
    /// A Secret's `.dockerconfigjson` value.
    pub fn dockerconfigjson(name: &'a str, data: &'a [u8]) -> Self {
        Self {
            name,
            key: DOCKERCONFIGJSON_KEY,
            data,
        }
    }

    /// A Secret's legacy `.dockercfg` value.
    pub fn dockercfg(name: &'a str, data: &'a [u8]) -> Self {
        Self {
            name,
            key: DOCKERCFG_KEY,
            data,
        }
    }
}

/// Why a registry Secret's payload cannot be merged. Never contains a credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Secret {secret}: {key}: {}{problem}", path_prefix(path))]
pub struct SecretError {
    /// The Secret.
    pub secret: String,
    /// Its data key.
    pub key: String,
    /// The JSON path of the offending value (`auths`, `auths["quay.io"]`, `["quay.io"]`);
    /// empty for the whole value.
    pub path: String,
    /// What is wrong.
    pub problem: String,
}

fn path_prefix(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    }
}

impl Classify for SecretError {
    /// `InvalidPullSecret`.
    fn reason(&self) -> &'static str {
        "InvalidPullSecret"
    }

    /// Permanent: the Secret must change.
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// The key containers/image reads `key` as (see the module documentation); `legacy` for
/// a key of the `.dockercfg` shape.
pub fn canonical_auth_key(key: &str, legacy: bool) -> String {
    let stripped = key
        .strip_prefix("http://")
        .or_else(|| key.strip_prefix("https://"));
    let key = match stripped {
        Some(rest) => rest.split('/').next().unwrap_or(rest),
        None if legacy => key.split('/').next().unwrap_or(key),
        None => key,
    };
    match key {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_owned(),
        other => other.to_owned(),
    }
}

/// The canonical `auths` of one Secret payload.
fn canonical_auths(secret: &RegistrySecret<'_>) -> Result<Map<String, Value>, SecretError> {
    let error = |path: String, problem: String| SecretError {
        secret: secret.name.to_owned(),
        key: secret.key.to_owned(),
        path,
        problem,
    };
    let root: Value = serde_json::from_slice(secret.data)
        .map_err(|e| error(String::new(), format!("not valid JSON: {e}")))?;
    let Value::Object(root) = root else {
        return Err(error(
            String::new(),
            format!("expected an object, found {}", kind(&root)),
        ));
    };
    let (entries, prefix, legacy) = match root.get("auths") {
        Some(Value::Object(auths)) => (auths.clone(), "auths", false),
        Some(other) => {
            return Err(error(
                "auths".into(),
                format!("expected an object, found {}", kind(other)),
            ));
        }
        None => (root, "", true),
    };
    let mut keys: Vec<(&String, &Value)> = entries.iter().collect();
    keys.sort_by(|a, b| a.0.cmp(b.0));
    let mut out: Map<String, Value> = Map::new();
    for (key, value) in keys {
        if !value.is_object() {
            return Err(error(
                format!("{prefix}[{key:?}]"),
                format!("expected an object, found {}", kind(value)),
            ));
        }
        let canonical = canonical_auth_key(key, legacy);
        // Byte order first; a key already canonical replaces an earlier spelling.
        if !out.contains_key(&canonical) || *key == canonical {
            out.insert(canonical, value.clone());
        }
    }
    Ok(out)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The merged `{"auths": …}` document: `push`'s entries, and `pull`'s for the keys `push`
/// does not name, keys canonical and sorted (see the module documentation).
pub fn merged_auths(
    push: &RegistrySecret<'_>,
    pull: Option<&RegistrySecret<'_>>,
) -> Result<Value, SecretError> {
    let mut merged = match pull {
        Some(pull) => canonical_auths(pull)?,
        None => Map::new(),
    };
    for (key, value) in canonical_auths(push)? {
        merged.insert(key, value);
    }
    let mut entries: Vec<(String, Value)> = merged.into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(json!({ "auths": Map::from_iter(entries) }))
}

/// The Secret `pull-<build>` in `namespace`: the push and base pull Secrets' credentials
/// merged (see the module documentation). Without a base pull Secret, the push Secret's
/// credentials alone, canonicalized.
pub fn merged_pull_secret(
    meta: &BuildMeta,
    namespace: &str,
    push: RegistrySecret<'_>,
    pull: Option<RegistrySecret<'_>>,
) -> Result<Value, SecretError> {
    let auths = merged_auths(&push, pull.as_ref())?;
    let name = pull_secret_name(&meta.build);
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": object_meta(meta, &name, namespace, false),
        "type": DOCKERCONFIGJSON_TYPE,
        "data": { DOCKERCONFIGJSON_KEY: STANDARD.encode(auths.to_string()) },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_keys_follow_containers_image() {
        for (key, legacy, want) in [
            ("quay.io", false, "quay.io"),
            ("quay.io/org/repo", false, "quay.io/org/repo"),
            ("quay.io/org/repo", true, "quay.io"),
            ("https://quay.io/v1/", false, "quay.io"),
            (
                "http://registry.local:5000/v2/",
                false,
                "registry.local:5000",
            ),
            ("https://index.docker.io/v1/", true, "docker.io"),
            ("registry-1.docker.io", false, "docker.io"),
            ("docker.io/library", false, "docker.io/library"),
        ] {
            assert_eq!(canonical_auth_key(key, legacy), want, "{key} {legacy}");
        }
    }
}
