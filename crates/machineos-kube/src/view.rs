//! Lenient typed views of cached objects.
//!
//! The caches keep objects as JSON (`DynamicObject`), not as strict typed structs, on
//! purpose: one object a user wrote that does not deserialize (an unknown builder type, a
//! field of the wrong type) must become a condition naming its field, never a watch stream
//! that fails forever. A view is a struct whose every field may be absent
//! (`#[serde(default)]`) and whose enums are strings, read with [`view`]: what is missing
//! is the default, and a field of the wrong JSON type is a [`ViewError`] naming the object
//! and the JSON path — alongside the default view, so the caller still observes the object
//! and reports the error where the user will see it.

use kube::ResourceExt;
use kube::api::DynamicObject;
use serde::de::DeserializeOwned;

/// A field of a cached object that its view cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {path}: {message}")]
pub struct ViewError {
    /// The object (`Kind name`).
    pub object: String,
    /// The JSON path of the field (`spec.containerFile[0].content`).
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

/// `obj`'s JSON (its `spec`, `status` and whatever else the view names; metadata is the
/// object's own) read as `T`: the view, and the error when a field has the wrong type (the
/// view is then `T::default()`).
pub fn view<T: DeserializeOwned + Default>(
    kind: &str,
    obj: &DynamicObject,
) -> (T, Option<ViewError>) {
    match serde_path_to_error::deserialize(&obj.data) {
        Ok(v) => (v, None),
        Err(e) => {
            let path = e.path().to_string();
            let error = ViewError {
                object: format!("{kind} {}", obj.name_any()),
                path: path.trim_start_matches('.').to_owned(),
                message: e.into_inner().to_string(),
            };
            (T::default(), Some(error))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default, rename_all = "camelCase")]
    struct Spec {
        push_spec: Option<String>,
        files: Vec<File>,
    }
    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default)]
    struct File {
        content: Option<String>,
    }
    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default)]
    struct V {
        spec: Spec,
    }

    fn obj(data: serde_json::Value) -> DynamicObject {
        let mut o = DynamicObject::new(
            "x",
            &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        );
        o.data = data;
        o
    }

    #[test]
    fn absent_is_default_and_a_wrong_type_names_its_path() {
        let (v, e) = view::<V>("Thing", &obj(json!({})));
        assert_eq!((v, e), (V::default(), None));
        let (v, e) = view::<V>(
            "Thing",
            &obj(json!({"spec": {"pushSpec": "r/x:1", "files": [{}]}})),
        );
        assert_eq!(v.spec.push_spec.as_deref(), Some("r/x:1"));
        assert_eq!(v.spec.files.len(), 1);
        assert!(e.is_none());
        let (v, e) = view::<V>("Thing", &obj(json!({"spec": {"files": [{"content": 3}]}})));
        assert_eq!(v, V::default());
        let e = e.unwrap();
        assert_eq!(e.object, "Thing x");
        assert_eq!(e.path, "spec.files[0].content");
        assert!(e.message.contains("expected"), "{e}");
    }
}
