//! Server-side apply and `metadata.managedFields` in the store: [`Store::apply`], the
//! field manager of every create, update and patch ([`Store::as_manager`],
//! [`Store::patch_as`]), and the request side of it ([`FieldManager`]: the `fieldManager`
//! and `force` query parameters, the User-Agent). The field sets, merge and conflicts
//! themselves are [`crate::apply`]'s; the bookkeeping on every write is [`crate::managed`]'s.
//!
//! Contract, following kube-apiserver's `handlers/patch.go` (`applyPatcher`),
//! `handlers/rest.go` (`managerOrUserAgent`) and the field manager's `decodeLiveOrNew`:
//! * **apply** ([`Store::apply`]): the applied object must name the resource's group, a
//!   served version and its kind (else 400 `invalid object type: /v1, Kind=X`) and carry
//!   no `metadata.managedFields` (400 `metadata.managedFields must be nil`). A missing
//!   object is created from the applied one (201 through HTTP; its name must be the
//!   URL's) — except through `/status`, which answers 404. An existing one is merged
//!   ([`crate::apply::apply`]) and then written through the ordinary update or status
//!   update, so a `metadata.resourceVersion` in the applied object is a precondition
//!   (409 when stale), `dryRun` stores nothing, validation, generation and the status
//!   rules apply as to any update. Conflicts are a 409 unless `force`.
//! * **scope**: an apply or update through the main endpoint of a kind with a status
//!   subresource owns nothing under `status` (kube-apiserver's reset fields); through
//!   `/status` it owns only `status` (a real server's CRD status strategy resets only
//!   `spec`; this store's status update keeps everything but `status` anyway).
//! * **updates** by a [`FieldManager`] ([`Store::as_manager`]): the manager is the
//!   `fieldManager` parameter, else the User-Agent up to its first `/` (printable
//!   characters, at most 128 bytes), else `unknown`; its entry is `operation: Update`
//!   with the apiVersion written and `subresource: status` through `/status`. The
//!   entries it starts from are the stored ones, or those the request body carries
//!   (`managedFields` sent by a client replace the stored ones; `[]` clears them), never
//!   the body's through `/status`.
//! * writes through the library API without a field manager (tests, the kubelet hook)
//!   track nothing; a body without `managedFields` keeps the stored ones.
//! * **PatchOptions**: an apply without `fieldManager` is kube-apiserver's 422
//!   `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required
//!   for apply patch`; `force` on another patch type its 422 `force: Forbidden: may not
//!   be specified for non-apply patch`. The field manager's length and characters are not
//!   validated.
//! * apply bodies ([`parse_apply_body`]) are YAML or JSON (kube-rs and kubectl send
//!   JSON), parsed with `serde-saphyr`; an empty body is an empty object.

use machineos_crd_validation::{BadValue, ErrorType, FieldError};
use serde_json::{Value, json};

use crate::apply::{self, Managed, Manager, Operation};
use crate::error::ApiError;
use crate::managed::{Tracking, scope, subresource_name};
use crate::patch::PatchType;
use crate::resource::GroupResource;
use crate::store::{Store, Subresource, WriteOptions};

/// The field manager of a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldManager {
    /// The `fieldManager` query parameter.
    pub field_manager: Option<String>,
    /// The `force` query parameter, as sent.
    pub force: Option<String>,
    /// The `User-Agent` header.
    pub user_agent: Option<String>,
}

/// Options of [`Store::apply`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyOptions {
    /// The field manager (required, non-empty).
    pub manager: String,
    /// Take fields other managers own instead of failing with a conflict.
    pub force: bool,
    /// `dryRun=All`.
    pub dry_run: bool,
}

fn patch_options_invalid(field: &str, kind: ErrorType, detail: &str) -> ApiError {
    ApiError::invalid(
        "meta.k8s.io",
        "PatchOptions",
        "",
        vec![FieldError::new(
            kind,
            Some(field.into()),
            BadValue::Omit,
            detail.into(),
        )],
    )
}

impl FieldManager {
    /// The field manager of a request with these query parameters and User-Agent.
    pub fn from_request(query: &[(String, String)], user_agent: Option<&str>) -> FieldManager {
        let param = |k: &str| {
            query
                .iter()
                .rev()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
        };
        FieldManager {
            field_manager: param("fieldManager").filter(|s| !s.is_empty()),
            force: param("force"),
            user_agent: user_agent.map(str::to_string),
        }
    }

    /// A request naming `manager` in `fieldManager`.
    pub fn named(manager: &str) -> FieldManager {
        FieldManager {
            field_manager: Some(manager.to_string()),
            ..FieldManager::default()
        }
    }

    /// The manager of an update: `fieldManager`, else the User-Agent's program name,
    /// else `unknown`.
    pub fn name(&self) -> String {
        if let Some(m) = &self.field_manager {
            return m.clone();
        }
        let mut out = String::new();
        let program = self
            .user_agent
            .as_deref()
            .unwrap_or("")
            .split('/')
            .next()
            .unwrap_or("");
        for c in program.chars().filter(|c| !c.is_control()) {
            if out.len() + c.len_utf8() > 128 {
                break;
            }
            out.push(c);
        }
        if out.is_empty() {
            "unknown".into()
        } else {
            out
        }
    }

    /// `force`, parsed as Go's `strconv.ParseBool`.
    pub fn force(&self) -> Result<bool, ApiError> {
        match self.force.as_deref() {
            None => Ok(false),
            Some("1" | "t" | "T" | "TRUE" | "true" | "True") => Ok(true),
            Some("0" | "f" | "F" | "FALSE" | "false" | "False") => Ok(false),
            Some(v) => Err(ApiError::bad_request(format!(
                "strconv.ParseBool: parsing {v:?}: invalid syntax"
            ))),
        }
    }

    /// kube-apiserver's `ValidatePatchOptions` for a patch of type `kind`.
    pub fn check(&self, kind: PatchType) -> Result<(), ApiError> {
        if kind == PatchType::Apply {
            if self.field_manager.is_none() {
                return Err(patch_options_invalid(
                    "fieldManager",
                    ErrorType::Required,
                    "is required for apply patch",
                ));
            }
        } else if self.force.is_some() {
            return Err(patch_options_invalid(
                "force",
                ErrorType::Forbidden,
                "may not be specified for non-apply patch",
            ));
        }
        self.force().map(|_| ())
    }
}

/// Parses an apply body: YAML or JSON, one object (an empty body is `{}`), or 400
/// `error decoding YAML: …`.
pub fn parse_apply_body(bytes: &[u8]) -> Result<Value, ApiError> {
    let bad = |e: String| ApiError::bad_request(format!("error decoding YAML: {e}"));
    let text = std::str::from_utf8(bytes).map_err(|e| bad(e.to_string()))?;
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    let v: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(_) => serde_saphyr::from_str(text).map_err(|e| bad(e.to_string()))?,
    };
    let go_type = match &v {
        Value::Object(_) => return Ok(v),
        Value::Null => return Ok(json!({})),
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
    };
    Err(bad(format!(
        "json: cannot unmarshal {go_type} into Go value of type map[string]interface {{}}"
    )))
}

impl Store {
    /// Runs `f` (creates, updates, non-apply patches) as writes by `fm`: their
    /// managedFields record it (see the module documentation).
    pub fn as_manager<T>(
        &mut self,
        fm: &FieldManager,
        f: impl FnOnce(&mut Store) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        self.with_tracking(Tracking::Update(fm.name()), f)
    }

    /// Runs `f` with the store's managedFields tracking set to `t`, then restores it.
    fn with_tracking<T>(
        &mut self,
        t: Tracking,
        f: impl FnOnce(&mut Store) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let prev = self.tracking.replace(t);
        let r = f(self);
        self.tracking = prev;
        r
    }

    /// A PATCH request: server-side apply for [`PatchType::Apply`], else
    /// [`Store::patch`] as a write by `fm`. Returns the HTTP code (201 when an apply
    /// created the object) and the object.
    #[allow(clippy::too_many_arguments)]
    pub fn patch_as(
        &mut self,
        fm: &FieldManager,
        gr: &GroupResource,
        ns: Option<&str>,
        name: &str,
        kind: PatchType,
        patch: &Value,
        sub: Subresource,
        opts: WriteOptions,
    ) -> Result<(u16, Value), ApiError> {
        fm.check(kind)?;
        if kind == PatchType::Apply {
            let ao = ApplyOptions {
                manager: fm.field_manager.clone().unwrap_or_default(),
                force: fm.force()?,
                dry_run: opts.dry_run,
            };
            let (o, created) = self.apply(gr, ns, name, patch, sub, &ao)?;
            return Ok((if created { 201 } else { 200 }, o));
        }
        let o = self.as_manager(fm, |s| s.patch(gr, ns, name, kind, patch, sub, opts))?;
        Ok((200, o))
    }

    /// Server-side apply of `config` to `gr`/`ns`/`name` (see the module documentation):
    /// the stored (or, with `dry_run`, would-be) object, and whether it was created.
    pub fn apply(
        &mut self,
        gr: &GroupResource,
        ns: Option<&str>,
        name: &str,
        config: &Value,
        sub: Subresource,
        opts: &ApplyOptions,
    ) -> Result<(Value, bool), ApiError> {
        let info = self.info(gr)?;
        if sub == Subresource::Status && !info.status_subresource {
            return Err(ApiError::UnknownResource { gr: gr.clone() });
        }
        if opts.manager.is_empty() {
            return Err(patch_options_invalid(
                "fieldManager",
                ErrorType::Required,
                "is required for apply patch",
            ));
        }
        let key = self.key(&info, ns, name)?;
        let s = |p: &str| config.pointer(p).and_then(Value::as_str).unwrap_or("");
        let (api_version, kind) = (s("/apiVersion"), s("/kind"));
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        if group != info.group || !info.versions.iter().any(|v| v == version) || kind != info.kind {
            return Err(ApiError::bad_request(format!(
                "invalid object type: {group}/{version}, Kind={kind}"
            )));
        }
        if config
            .pointer("/metadata/managedFields")
            .is_some_and(|v| !v.is_null())
        {
            return Err(ApiError::bad_request("metadata.managedFields must be nil"));
        }
        let schema = self.merge_schema(&info, version);
        let who = Manager {
            name: opts.manager.clone(),
            operation: Operation::Apply,
            api_version: api_version.to_string(),
            subresource: subresource_name(sub),
        };
        let now = self.now();
        let wo = WriteOptions {
            dry_run: opts.dry_run,
        };
        let live = self.objects.get(&key).cloned();
        let mut managed = match &live {
            Some(live) => {
                Managed::decode(live.pointer("/metadata/managedFields")).unwrap_or_default()
            }
            // Created by the apply: through the main endpoint only, named as on the URL.
            None if sub == Subresource::Status => {
                return Err(ApiError::NotFound {
                    gr: gr.clone(),
                    name: name.to_string(),
                });
            }
            None => {
                let named = s("/metadata/name");
                if named != name {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({named}) does not match the name on the URL ({name})"
                    )));
                }
                Managed::default()
            }
        };
        let merged = apply::apply(
            &schema,
            live.as_ref().unwrap_or(&json!({})),
            config,
            &mut managed,
            &who,
            opts.force,
            scope(&info, sub),
            &now,
        )?;
        let created = live.is_none();
        let o = self.with_tracking(Tracking::Applied(managed), |st| match sub {
            _ if created => st.create(gr, ns, &merged, wo),
            Subresource::Main => st.update(gr, ns, name, &merged, wo),
            Subresource::Status => st.update_status(gr, ns, name, &merged, wo),
        })?;
        Ok((o, created))
    }
}
