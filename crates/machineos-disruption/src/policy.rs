//! Node disruption policies as the MCO keeps them: the `MachineConfiguration` object
//! `cluster` (`operator.openshift.io/v1`) carries the user's `spec.nodeDisruptionPolicy`;
//! the operator merges it over its built-in defaults and publishes the result as
//! `status.nodeDisruptionPolicyStatus.clusterPolicies`, which the daemon acts on.
//!
//! Contract:
//! * [`Action`]: `Reboot`, `Drain`, `Reload` (a service), `Restart` (a service),
//!   `DaemonReload`, `None`, and the status-only `Special` (the MCO's handling of
//!   `/etc/containers/registries.conf`: a CRI-O reload, with a drain unless the change is a
//!   safe one). JSON as the API writes it: `{"type": "Reload", "reload": {"serviceName":
//!   "crio.service"}}`.
//! * [`ClusterPolicies::defaults`]: the MCO's built-in table, in its order (13 file paths,
//!   one unit, the SSH key `None`) — see `docs/disruption.md` for the table.
//! * [`PolicyConfig::validate`]: the API server's rules for the spec: at most 50 files and
//!   50 units, paths and unit names unique, every `actions` list at most 10 long (an empty one is
//!   allowed, as the CRD allows it, and adds no action), `Reboot` and
//!   `None` only alone, `reload`/`restart` present exactly with their type, service and unit
//!   names `<1+ of [a-zA-Z0-9:._\\-]>.<a systemd unit suffix>` of at most 255 characters,
//!   `Special` refused (status only). Errors name the JSON path
//!   (`spec.nodeDisruptionPolicy.files[2].actions`).
//! * [`ClusterPolicies::merge`] (the MCO's `MergeClusterPolicies`): the defaults first; a user
//!   file entry whose `path` equals a default's (plain string equality) replaces it in place,
//!   any other is appended, in the user's order; units the same by `name`; a non-empty user
//!   SSH key action list replaces the default. No sorting, no normalisation.
//!
//! Hand-written: these are a dozen small rules of one operator, no library has them.

use serde::{Deserialize, Serialize};

/// One disruption action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// Reboot the node (alone in its list).
    Reboot,
    /// Drain the node first.
    Drain,
    /// `systemctl reload <service>`.
    Reload(String),
    /// `systemctl restart <service>`.
    Restart(String),
    /// `systemctl daemon-reload`.
    DaemonReload,
    /// Nothing (alone in its list).
    None,
    /// The MCO's registries.conf handling: reload CRI-O, drain unless the change is safe.
    Special,
}

impl Action {
    /// The API's `type` value.
    pub fn type_name(&self) -> &'static str {
        match self {
            Action::Reboot => "Reboot",
            Action::Drain => "Drain",
            Action::Reload(_) => "Reload",
            Action::Restart(_) => "Restart",
            Action::DaemonReload => "DaemonReload",
            Action::None => "None",
            Action::Special => "Special",
        }
    }
}

/// The API's JSON shape of an action.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ActionJson {
    #[serde(rename = "type", default)]
    type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reload: Option<ServiceJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    restart: Option<ServiceJson>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServiceJson {
    #[serde(default)]
    service_name: String,
}

impl Serialize for Action {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let service = |name: &str| {
            Some(ServiceJson {
                service_name: name.to_owned(),
            })
        };
        let mut j = ActionJson {
            type_: self.type_name().to_owned(),
            ..ActionJson::default()
        };
        match self {
            Action::Reload(name) => j.reload = service(name),
            Action::Restart(name) => j.restart = service(name),
            _ => {}
        }
        j.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Action {
    /// The API's shape back (what the status and machineos's node annotation hold); a
    /// `reload`/`restart` without its service, or an unknown type, is an error.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let j = ActionJson::deserialize(d)?;
        let service = |s: Option<ServiceJson>| {
            s.map(|s| s.service_name)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| {
                    serde::de::Error::custom(format!("{} needs its serviceName", j.type_))
                })
        };
        Ok(match j.type_.as_str() {
            "Reboot" => Action::Reboot,
            "Drain" => Action::Drain,
            "Reload" => Action::Reload(service(j.reload.clone())?),
            "Restart" => Action::Restart(service(j.restart.clone())?),
            "DaemonReload" => Action::DaemonReload,
            "None" => Action::None,
            "Special" => Action::Special,
            other => {
                return Err(serde::de::Error::custom(format!(
                    "unknown action type {other:?}"
                )));
            }
        })
    }
}

/// An action as written, before validation (what the user's spec holds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawAction {
    /// `type`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `reload.serviceName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload: Option<ServiceName>,
    /// `restart.serviceName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<ServiceName>,
}

/// `{serviceName}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceName {
    /// `serviceName`.
    #[serde(default)]
    pub service_name: String,
}

/// A file path's policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FilePolicy {
    /// `path` (a file, or a directory whose files it covers at any depth).
    pub path: String,
    /// `actions`.
    pub actions: Vec<Action>,
}

/// A unit's policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnitPolicy {
    /// `name` (`chronyd.service`).
    pub name: String,
    /// `actions`.
    pub actions: Vec<Action>,
}

/// The merged policies the daemon acts on (`status.nodeDisruptionPolicyStatus.clusterPolicies`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterPolicies {
    /// `files`.
    pub files: Vec<FilePolicy>,
    /// `units`.
    pub units: Vec<UnitPolicy>,
    /// `sshkey.actions`.
    pub sshkey: Vec<Action>,
}

/// `spec.nodeDisruptionPolicy` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyConfig {
    /// `files`.
    #[serde(default)]
    pub files: Vec<RawFile>,
    /// `units`.
    #[serde(default)]
    pub units: Vec<RawUnit>,
    /// `sshkey`.
    #[serde(default)]
    pub sshkey: RawSshKey,
}

/// `files[]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawFile {
    /// `path`.
    #[serde(default)]
    pub path: String,
    /// `actions`.
    #[serde(default)]
    pub actions: Vec<RawAction>,
}

/// `units[]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawUnit {
    /// `name`.
    #[serde(default)]
    pub name: String,
    /// `actions`.
    #[serde(default)]
    pub actions: Vec<RawAction>,
}

/// `sshkey` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawSshKey {
    /// `actions`.
    #[serde(default)]
    pub actions: Vec<RawAction>,
}

/// A spec the API server would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct PolicyError {
    /// The JSON path (`spec.nodeDisruptionPolicy.files[2].actions`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// Most file (and unit) entries of a spec.
pub const MAX_SPEC_ENTRIES: usize = 50;
/// Most actions of one entry.
pub const MAX_ACTIONS: usize = 10;
/// The unit suffixes a unit or service name may end with.
const UNIT_SUFFIXES: [&str; 12] = [
    "service",
    "socket",
    "device",
    "mount",
    "automount",
    "swap",
    "target",
    "path",
    "timer",
    "snapshot",
    "slice",
    "scope",
];

/// Whether `name` is a unit name the API accepts (`NodeDisruptionPolicyServiceName`).
pub fn is_unit_name(name: &str) -> bool {
    let Some((stem, suffix)) = name.rsplit_once('.') else {
        return false;
    };
    // The stem: one or more of [a-zA-Z0-9:._\-] (dots allowed), then the suffix.
    name.len() <= 255
        && UNIT_SUFFIXES.contains(&suffix)
        && !stem.is_empty()
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ":._\\-".contains(c))
}

fn action_from(raw: &RawAction, at: &str) -> Result<Action, PolicyError> {
    let err = |message: String| PolicyError {
        path: at.to_owned(),
        message,
    };
    let service = |s: &Option<ServiceName>, field: &str| -> Result<String, PolicyError> {
        let name = s
            .as_ref()
            .map(|s| s.service_name.clone())
            .ok_or_else(|| err(format!("{field} is required when type is {}", raw.type_)))?;
        if !is_unit_name(&name) {
            return Err(err(format!(
                "{field}.serviceName {name:?} is not a unit name (`<name>.service`, `.socket`, …)"
            )));
        }
        Ok(name)
    };
    let only = |field: &str, present: bool| -> Result<(), PolicyError> {
        if present {
            Err(err(format!(
                "{field} is forbidden when type is {}",
                raw.type_
            )))
        } else {
            Ok(())
        }
    };
    let action = match raw.type_.as_str() {
        "Reload" => Action::Reload(service(&raw.reload, "reload")?),
        "Restart" => Action::Restart(service(&raw.restart, "restart")?),
        other => {
            let action = match other {
                "Reboot" => Action::Reboot,
                "Drain" => Action::Drain,
                "DaemonReload" => Action::DaemonReload,
                "None" => Action::None,
                _ => {
                    return Err(err(format!(
                        "type {other:?}: must be one of Reboot, Drain, Reload, Restart, DaemonReload, None"
                    )));
                }
            };
            only("reload", raw.reload.is_some())?;
            only("restart", raw.restart.is_some())?;
            return Ok(action);
        }
    };
    match action {
        Action::Reload(_) => only("restart", raw.restart.is_some())?,
        _ => only("reload", raw.reload.is_some())?,
    }
    Ok(action)
}

fn actions_from(raw: &[RawAction], at: &str) -> Result<Vec<Action>, PolicyError> {
    if raw.len() > MAX_ACTIONS {
        return Err(PolicyError {
            path: at.to_owned(),
            message: format!("{} actions: at most {MAX_ACTIONS} are allowed", raw.len()),
        });
    }
    let actions: Vec<Action> = raw
        .iter()
        .enumerate()
        .map(|(i, a)| action_from(a, &format!("{at}[{i}]")))
        .collect::<Result<_, _>>()?;
    for alone in [Action::Reboot, Action::None] {
        if actions.len() > 1 && actions.contains(&alone) {
            return Err(PolicyError {
                path: at.to_owned(),
                message: format!(
                    "{} action can only be specified standalone, as it will override any other actions",
                    alone.type_name()
                ),
            });
        }
    }
    Ok(actions)
}

/// A validated spec: its entries as actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidPolicy {
    files: Vec<FilePolicy>,
    units: Vec<UnitPolicy>,
    sshkey: Vec<Action>,
}

impl PolicyConfig {
    /// The spec as the API server would take it, or why not (see the module documentation).
    pub fn validate(&self) -> Result<ValidPolicy, PolicyError> {
        let base = "spec.nodeDisruptionPolicy";
        let too_many = |what: &str, n: usize| PolicyError {
            path: format!("{base}.{what}"),
            message: format!("{n} entries: at most {MAX_SPEC_ENTRIES} are allowed"),
        };
        if self.files.len() > MAX_SPEC_ENTRIES {
            return Err(too_many("files", self.files.len()));
        }
        if self.units.len() > MAX_SPEC_ENTRIES {
            return Err(too_many("units", self.units.len()));
        }
        let mut files: Vec<FilePolicy> = Vec::new();
        for (i, f) in self.files.iter().enumerate() {
            let at = format!("{base}.files[{i}]");
            if f.path.is_empty() {
                return Err(PolicyError {
                    path: format!("{at}.path"),
                    message: "required".into(),
                });
            }
            if files.iter().any(|x| x.path == f.path) {
                return Err(PolicyError {
                    path: format!("{at}.path"),
                    message: format!("duplicate value {:?}", f.path),
                });
            }
            files.push(FilePolicy {
                path: f.path.clone(),
                actions: actions_from(&f.actions, &format!("{at}.actions"))?,
            });
        }
        let mut units: Vec<UnitPolicy> = Vec::new();
        for (i, u) in self.units.iter().enumerate() {
            let at = format!("{base}.units[{i}]");
            if !is_unit_name(&u.name) {
                return Err(PolicyError {
                    path: format!("{at}.name"),
                    message: format!("{:?} is not a unit name", u.name),
                });
            }
            if units.iter().any(|x| x.name == u.name) {
                return Err(PolicyError {
                    path: format!("{at}.name"),
                    message: format!("duplicate value {:?}", u.name),
                });
            }
            units.push(UnitPolicy {
                name: u.name.clone(),
                actions: actions_from(&u.actions, &format!("{at}.actions"))?,
            });
        }
        let sshkey = if self.sshkey.actions.is_empty() {
            Vec::new()
        } else {
            actions_from(&self.sshkey.actions, &format!("{base}.sshkey.actions"))?
        };
        Ok(ValidPolicy {
            files,
            units,
            sshkey,
        })
    }
}

fn reload(s: &str) -> Action {
    Action::Reload(s.to_owned())
}

fn restart(s: &str) -> Action {
    Action::Restart(s.to_owned())
}

impl ClusterPolicies {
    /// The API's shape of the merged policies, as the MCO writes them to the
    /// `MachineConfiguration`'s `status.nodeDisruptionPolicyStatus.clusterPolicies`:
    /// `{"files": [{"path", "actions"}], "units": [{"name", "actions"}], "sshkey":
    /// {"actions"}}`.
    pub fn status_json(&self) -> serde_json::Value {
        serde_json::json!({
            "files": self.files,
            "units": self.units,
            "sshkey": {"actions": self.sshkey},
        })
    }

    /// The MCO's built-in policies, in its order.
    pub fn defaults() -> ClusterPolicies {
        let crio = "crio.service";
        let file = |path: &str, actions: Vec<Action>| FilePolicy {
            path: path.to_owned(),
            actions,
        };
        ClusterPolicies {
            files: vec![
                file("/var/lib/kubelet/config.json", vec![Action::None]),
                file(
                    "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
                    vec![reload(crio)],
                ),
                file("/etc/containers/policy.json", vec![reload(crio)]),
                file("/etc/containers/registries.conf", vec![Action::Special]),
                file("/etc/containers/registries.d", vec![reload(crio)]),
                file("/etc/crio/policies", vec![reload(crio)]),
                file("/etc/nmstate/openshift", vec![Action::None]),
                file(
                    "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
                    vec![restart("coreos-update-ca-trust.service"), restart(crio)],
                ),
                file(
                    "/etc/kubernetes/credential-providers",
                    vec![restart("kubelet.service")],
                ),
                file(
                    "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
                    vec![Action::DaemonReload, restart("kubelet.service")],
                ),
                file("/etc/iri-registry", vec![restart("iri-registry.service")]),
                file(
                    "/usr/local/bin/load-registry-image.sh",
                    vec![restart("iri-registry.service")],
                ),
                file(
                    "/etc/pki/ca-trust/source/anchors/iri-root-ca.crt",
                    vec![restart("coreos-update-ca-trust.service")],
                ),
            ],
            units: vec![UnitPolicy {
                name: "iri-registry.service".to_owned(),
                actions: vec![Action::DaemonReload, restart("iri-registry.service")],
            }],
            sshkey: vec![Action::None],
        }
    }

    /// The defaults with the user's validated spec merged in (see the module documentation).
    pub fn merge(user: &ValidPolicy) -> ClusterPolicies {
        let mut out = ClusterPolicies::defaults();
        for f in &user.files {
            match out.files.iter_mut().find(|d| d.path == f.path) {
                Some(d) => d.actions = f.actions.clone(),
                None => out.files.push(f.clone()),
            }
        }
        for u in &user.units {
            match out.units.iter_mut().find(|d| d.name == u.name) {
                Some(d) => d.actions = u.actions.clone(),
                None => out.units.push(u.clone()),
            }
        }
        if !user.sshkey.is_empty() {
            out.sshkey = user.sshkey.clone();
        }
        out
    }

    /// The merged policies of a `MachineConfiguration` object (its JSON), as the operator
    /// publishes them: `spec.nodeDisruptionPolicy` validated and merged over the defaults.
    /// No object, or one without the field, is the defaults.
    pub fn of_machine_configuration(
        object: Option<&serde_json::Value>,
    ) -> Result<ClusterPolicies, PolicyError> {
        let Some(spec) = object.and_then(|o| o.pointer("/spec/nodeDisruptionPolicy")) else {
            return Ok(ClusterPolicies::defaults());
        };
        let config: PolicyConfig =
            serde_json::from_value(spec.clone()).map_err(|e| PolicyError {
                path: "spec.nodeDisruptionPolicy".into(),
                message: e.to_string(),
            })?;
        Ok(ClusterPolicies::merge(&config.validate()?))
    }
}
