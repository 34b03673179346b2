//! The agents' pull credentials, copied: the registry credentials of every Secret a
//! MachineImage names as `pullSecret` go into one Secret, [`vocab::NODE_PULL_SECRETS`], one
//! key per Secret name (a `config.json`; a legacy `dockercfg` converted). The agents may read
//! that Secret and their default pull Secret only (their Role's `resourceNames`), so a node —
//! whose credentials any workload on it with host access can take — never holds the push
//! Secret or any other Secret of the namespace, only what the images it may run need.
//!
//! [`wanted`] is pure: the snapshot in, the copy's data out. [`sync`] writes it when the cache
//! shows something else (created the first time, replaced with the resourceVersion it was
//! read at after that). A MachineImage naming a Secret that does not exist (yet) or holds no
//! registry credentials gets no key; its nodes' agents then report the missing key and retry.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use machineos_kube::mco::ImageView;
use machineos_rollout::vocab;

use crate::api::ExecError;
use crate::observe::{Snapshot, view_of};

/// The copy's data: Secret name → `config.json` bytes.
pub fn wanted(s: &Snapshot) -> BTreeMap<String, ByteString> {
    let named: std::collections::BTreeSet<String> = s
        .machine_images
        .iter()
        .filter_map(|m| {
            let v: ImageView = view_of("MachineImage", m);
            v.spec.pull_secret.get().map(str::to_owned)
        })
        .collect();
    s.secrets
        .iter()
        .filter_map(|sec| {
            let name = sec.name_any();
            if !named.contains(&name) {
                return None;
            }
            let bytes = machineos_kube::secret::registry_auth(sec).ok()?;
            Some((name, ByteString(bytes)))
        })
        .collect()
}

/// Write the copy if the cache shows other data. `Ok(true)` when written.
pub async fn sync(client: &kube::Client, s: &Snapshot) -> Result<bool, ExecError> {
    let data = wanted(s);
    let current = s
        .secrets
        .iter()
        .find(|x| x.name_any() == vocab::NODE_PULL_SECRETS);
    let what = || format!("Secret {}/{}", s.namespace, vocab::NODE_PULL_SECRETS);
    let api: Api<Secret> = Api::namespaced(client.clone(), &s.namespace);
    match current {
        Some(cur) if cur.data.clone().unwrap_or_default() == data => Ok(false),
        Some(cur) => {
            let mut next = Secret::clone(cur);
            next.metadata.managed_fields = None;
            next.data = Some(data);
            next.string_data = None;
            api.replace(vocab::NODE_PULL_SECRETS, &PostParams::default(), &next)
                .await
                .map(|_| true)
                .map_err(|e| machineos_kube::api_err("replacing", what())(e).into())
        }
        None if data.is_empty() => Ok(false),
        None => {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(vocab::NODE_PULL_SECRETS.to_owned()),
                    namespace: Some(s.namespace.clone()),
                    labels: Some(
                        [(
                            "app.kubernetes.io/managed-by".to_owned(),
                            "machineos-controller".to_owned(),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                },
                type_: Some("Opaque".to_owned()),
                data: Some(data),
                ..Default::default()
            };
            match api.create(&PostParams::default(), &secret).await {
                Ok(_) => Ok(true),
                Err(e) if machineos_kube::error::code(&e) == Some(409) => Ok(false),
                Err(e) => Err(machineos_kube::api_err("creating", what())(e).into()),
            }
        }
    }
}
