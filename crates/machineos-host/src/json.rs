//! Reading a host tool's JSON with errors that name the tool and the JSON path
//! ([`HostError::Output`]). Absent and `null` are the same for optional members.

use serde_json::Value;

use crate::HostError;

/// A JSON document from `tool`.
pub(crate) struct Doc<'t> {
    pub(crate) tool: &'t str,
}

impl Doc<'_> {
    pub(crate) fn err(&self, path: &str, message: impl Into<String>) -> HostError {
        HostError::Output {
            tool: self.tool.to_owned(),
            path: path.to_owned(),
            message: message.into(),
        }
    }

    pub(crate) fn parse(&self, text: &str) -> Result<Value, HostError> {
        serde_json::from_str(text).map_err(|e| self.err("$", format!("not JSON: {e}")))
    }

    /// `v[key]` at `path.key`, an object, or `None` when absent or null.
    pub(crate) fn obj<'v>(
        &self,
        v: &'v Value,
        path: &str,
        key: &str,
    ) -> Result<Option<&'v Value>, HostError> {
        match v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(o @ Value::Object(_)) => Ok(Some(o)),
            Some(_) => Err(self.err(&format!("{path}.{key}"), "expected an object")),
        }
    }

    /// `v[key]`, a string, or `None` when absent or null.
    pub(crate) fn opt_str<'v>(
        &self,
        v: &'v Value,
        path: &str,
        key: &str,
    ) -> Result<Option<&'v str>, HostError> {
        match v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.err(&format!("{path}.{key}"), "expected a string")),
        }
    }

    /// `v[key]`, a string.
    pub(crate) fn str<'v>(
        &self,
        v: &'v Value,
        path: &str,
        key: &str,
    ) -> Result<&'v str, HostError> {
        self.opt_str(v, path, key)?
            .ok_or_else(|| self.err(&format!("{path}.{key}"), "missing"))
    }

    /// `v[key]`, a boolean; absent or null is `false`.
    pub(crate) fn bool(&self, v: &Value, path: &str, key: &str) -> Result<bool, HostError> {
        match v.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(self.err(&format!("{path}.{key}"), "expected a boolean")),
        }
    }
}

/// The repository of an image reference: `quay.io/a/b:tag@sha256:…` → `quay.io/a/b`.
pub fn repository(image: &str) -> &str {
    let no_digest = image.split_once('@').map_or(image, |(r, _)| r);
    let slash = no_digest.rfind('/').map_or(0, |i| i + 1);
    match no_digest[slash..].find(':') {
        Some(colon) => &no_digest[..slash + colon],
        None => no_digest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_drops_tag_and_digest() {
        for (i, want) in [
            ("quay.io/a/b:t@sha256:00", "quay.io/a/b"),
            ("quay.io/a/b@sha256:00", "quay.io/a/b"),
            ("localhost:5000/a/b:t", "localhost:5000/a/b"),
            ("localhost:5000/a/b", "localhost:5000/a/b"),
            ("b", "b"),
        ] {
            assert_eq!(repository(i), want);
        }
    }
}
