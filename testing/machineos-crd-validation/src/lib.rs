//! Validates Kubernetes custom resources against a CRD version's structural OpenAPI schema
//! and its CEL rules the way kube-apiserver (apiextensions-apiserver) does: what a real
//! cluster would store for a create or update, or the exact `field.ErrorList` it would
//! reject it with.
//!
//! A [`Validator`] holds one CRD version's `openAPIV3Schema`, parsed once, with its
//! patterns and CEL rules compiled, and whether the CRD has a status subresource. Its
//! three operations follow the apiserver's REST strategies:
//!
//! | operation | object handling | schema validation | CEL |
//! |---|---|---|---|
//! | [`Validator::validate_create`] | `status` dropped (status subresource) | whole object | `oldSelf` unbound |
//! | [`Validator::validate_update`] | `status` kept from the old object (status subresource) | whole object, ratcheting | with `oldSelf` |
//! | [`Validator::validate_status_update`] | everything but `status` kept from the old object | the `status` subtree only (paths `status.…`, messages relative to it) | whole object, with `oldSelf` |
//!
//! Each first defaults, prunes unknown fields and drops disallowed `null`s ([`prune`]),
//! then validates the schema ([`structural`]), then the `x-kubernetes-list-type`
//! uniqueness, then — only when none of the errors so far is blocking (`Required`,
//! `Unsupported`, `Too long`, `Too many`, type errors) — the CEL rules ([`cel_eval`]);
//! when blocking errors prevented CEL it appends kube-apiserver's
//! `<nil>: Invalid value: "null": some validation rules were not checked because the object
//! was invalid; correct the existing errors to complete validation`. The result is the
//! object to store, or [`Errors`] whose `Display` is kube-apiserver's aggregate text.
//!
//! Out of scope, being the server's job rather than the schema's: `metadata` (name
//! validation, generateName, resourceVersion, generation, managedFields; `metadata` is
//! passed through unpruned), the `/scale` subresource, conversion between versions.
//! Limitations of the CEL side are listed in [`cel_eval`], of the pattern engine in
//! [`re2`], of formats in [`formats`].

pub mod cel_compile;
pub mod cel_eval;
pub mod error;
pub mod formats;
pub mod prune;
pub mod re2;
pub mod schema;
pub mod structural;

pub use error::{BadValue, ErrorType, Errors, FieldError, SchemaError};
use schema::Schema;
use serde_json::Value;

/// kube-apiserver's entry for skipped CEL rules.
pub const CEL_SKIPPED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// One CRD version's validation: schema, CEL rules and status-subresource semantics.
#[derive(Debug)]
pub struct Validator {
    schema: Schema,
    status_subresource: bool,
}

impl Validator {
    /// A validator for the `openAPIV3Schema` of a CRD version.
    pub fn new(
        open_api_v3_schema: &Value,
        has_status_subresource: bool,
    ) -> Result<Validator, SchemaError> {
        Ok(Validator {
            schema: Schema::parse(open_api_v3_schema)?,
            status_subresource: has_status_subresource,
        })
    }

    /// A validator for version `version` of a `CustomResourceDefinition` (JSON form).
    pub fn from_crd(crd: &Value, version: &str) -> Result<Validator, SchemaError> {
        let versions = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .ok_or_else(|| SchemaError {
                path: "spec.versions".into(),
                message: "missing".into(),
            })?;
        let v = versions
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(version))
            .ok_or_else(|| SchemaError {
                path: "spec.versions".into(),
                message: format!("no version {version:?}"),
            })?;
        let schema = v
            .pointer("/schema/openAPIV3Schema")
            .ok_or_else(|| SchemaError {
                path: format!("spec.versions[{version}].schema.openAPIV3Schema"),
                message: "missing".into(),
            })?;
        let status = v.pointer("/subresources/status").is_some()
            || crd.pointer("/spec/subresources/status").is_some();
        Validator::new(schema, status)
    }

    /// Whether the CRD version has a status subresource.
    pub fn has_status_subresource(&self) -> bool {
        self.status_subresource
    }

    fn normalize(&self, obj: &Value) -> Value {
        let mut obj = obj.clone();
        prune::default(&mut obj, &self.schema);
        prune::prune(&mut obj, &self.schema, true);
        prune::drop_nulls(&mut obj, &self.schema);
        obj
    }

    /// A create: the object as stored, or why it is rejected.
    pub fn validate_create(&self, obj: &Value) -> Result<Value, Errors> {
        let mut obj = self.normalize(obj);
        if self.status_subresource
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        let mut errs = Vec::new();
        let scope = structural::Scope {
            prefix: None,
            ratchet: false,
        };
        structural::validate(&scope, &self.schema, &obj, None, "", &mut errs);
        self.finish(obj, None, errs)
    }

    /// An update through the main resource: the object as stored, or why it is rejected.
    /// `old` is the stored object.
    pub fn validate_update(&self, old: &Value, new: &Value) -> Result<Value, Errors> {
        let mut obj = self.normalize(new);
        if self.status_subresource
            && let Some(m) = obj.as_object_mut()
        {
            match old.get("status") {
                Some(s) => {
                    m.insert("status".into(), s.clone());
                }
                None => {
                    m.remove("status");
                }
            }
        }
        let mut errs = Vec::new();
        let scope = structural::Scope {
            prefix: None,
            ratchet: true,
        };
        structural::validate(&scope, &self.schema, &obj, Some(old), "", &mut errs);
        self.finish(obj, Some(old), errs)
    }

    /// An update through the `/status` subresource: the object as stored (the old one with
    /// the new `status`), or why it is rejected. Without a status subresource this is
    /// [`Validator::validate_update`] (a server answers 404 for `/status` then).
    pub fn validate_status_update(&self, old: &Value, new: &Value) -> Result<Value, Errors> {
        if !self.status_subresource {
            return self.validate_update(old, new);
        }
        let new = self.normalize(new);
        let mut obj = old.clone();
        if let Some(m) = obj.as_object_mut() {
            match new.get("status") {
                Some(s) => {
                    m.insert("status".into(), s.clone());
                }
                None => {
                    m.remove("status");
                }
            }
        }
        let mut errs = Vec::new();
        if let (Some(status_schema), Some(status)) =
            (self.schema.property("status"), obj.get("status"))
        {
            let scope = structural::Scope {
                prefix: Some("status"),
                ratchet: true,
            };
            structural::validate(
                &scope,
                status_schema,
                status,
                old.get("status"),
                "",
                &mut errs,
            );
        }
        self.finish(obj, Some(old), errs)
    }

    /// List-type uniqueness, then CEL unless blocked; the verdict.
    fn finish(
        &self,
        obj: Value,
        old: Option<&Value>,
        mut errs: Vec<FieldError>,
    ) -> Result<Value, Errors> {
        // Ratcheted as the API server does: on update, reported only if the old object
        // has no such error itself.
        let old_has_duplicates = old.is_some_and(|old| {
            let mut old_errs = Vec::new();
            structural::list_sets_and_maps(None, &self.schema, old, &mut old_errs);
            !old_errs.is_empty()
        });
        if !old_has_duplicates {
            structural::list_sets_and_maps(None, &self.schema, &obj, &mut errs);
        }
        if errs.iter().any(|e| e.kind.is_blocking()) {
            if self.has_rules() {
                errs.push(FieldError::new(
                    ErrorType::Invalid,
                    None,
                    BadValue::Str("null".into()),
                    CEL_SKIPPED.into(),
                ));
            }
        } else {
            let ctx = cel_eval::context();
            let walker = cel_eval::Walker {
                ctx: &ctx,
                ratchet: old.is_some(),
            };
            walker.walk(&None, &self.schema, &obj, old, true, &mut errs);
        }
        if errs.is_empty() {
            Ok(obj)
        } else {
            Err(Errors(errs))
        }
    }

    fn has_rules(&self) -> bool {
        fn any(s: &Schema) -> bool {
            !s.rules.is_empty()
                || s.properties.iter().any(|(_, p)| any(p))
                || s.items.as_deref().is_some_and(any)
                || s.additional.as_deref().is_some_and(any)
        }
        any(&self.schema)
    }
}
