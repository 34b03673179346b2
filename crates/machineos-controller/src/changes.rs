//! The MachineOSImages' `status.changes`: what each image's filesystem differs in from the
//! pool's previous image — as `machineos diff` reports it, bounded — recorded once.
//!
//! * *Which* ([`wanted`], pure): every MachineOSImage without `status.changes`, compared with
//!   the image its pool had when it was recorded (the annotation `machineos.io/previous-image`
//!   the lifecycle writes: its MachineOSConfig's `currentImagePullSpec` then); without it,
//!   the newest other MachineOSImage of its pool created before it (ties by name; creation
//!   times have a second's precision); else with its own `spec.baseImage`; for the controller's architecture when the image has it, else
//!   its first, and with the base when the predecessor lacks that architecture. Not one
//!   being compared, written already by this replica (until the snapshot shows it), nor one
//!   whose last attempt failed less than its backoff ago (30 s doubling to 10 min). What
//!   this replica remembers is by uid, and forgotten for images gone from the snapshot.
//! * *How* (a task per image, at most [`MAX_CONCURRENT`] at once, off the pass):
//!   `machineos_native_builder::diff` with the pool's push Secret and base pull Secret (its
//!   MachineOSConfig's), the controller's registry trust and base index cache, read only
//!   (the cache holds bases; images are compared once) — when the native builder built the
//!   image here, its base's index is cached and the image is indexed over it, reading its
//!   own layer and little more; else (the Job or OpenShift Build backends, a fresh cache)
//!   the first comparison on a base indexes it whole. Then ([`summarize`], pure) the counts,
//!   whether a kernel or initrd changed, what the paths alone need
//!   (`machineos_disruption::image_class`) and the first [`MAX_LISTED_CHANGES`] paths; the
//!   status written with a read-modify-write of `status` (the rollout's fields kept), only
//!   onto the same uid and `spec.image` and only when no `changes` are there yet; a
//!   conflict is read again (3 times); an image gone is done.
//! * A failure (an image the registry no longer has, a refused credential) is logged and
//!   retried after the backoff; nothing else waits on it. The comparisons stop when the
//!   replica stops leading or shuts down ([`ChangesController::cancel_all`]).
//!
//! Off unless [`crate::options::ControllerOptions::image_changes`] (on in `machineos
//! controller`, off in the in-process tests but the one that checks it: a comparison reads
//! the registry).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::DynamicObject;
use machineos_api::v1alpha1::{ImageChanges, ImageFileChange, MAX_LISTED_CHANGES};
use machineos_disruption::{image_class, is_kernel_path};
use machineos_image::{ImageRef, Platform};
use machineos_native_builder::diff::{DiffSpec, ImageDiff};
use serde_json::Value;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::api;
use crate::kinds;
use crate::observe::Snapshot;
use crate::pass::{Cx, Requeue};
use crate::registry_ops::RegistrySettings;

/// Comparisons run at once.
pub const MAX_CONCURRENT: usize = 2;
/// The first wait after a failure; doubled per failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(30);
const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// One comparison to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compare {
    /// The MachineOSImage.
    pub name: String,
    /// Its uid: the status is written only to this incarnation of the name.
    pub uid: String,
    /// Its pool.
    pub pool: String,
    /// The image compared with (the pool's previous, else the base), by digest.
    pub from: String,
    /// The MachineOSImage's image.
    pub to: String,
    /// The architecture compared.
    pub architecture: String,
}

/// The MachineOSImages to compare (see the module documentation). `busy(name)`: being
/// compared or waiting out a backoff. Pure.
pub fn wanted(
    images: &[Arc<DynamicObject>],
    arch: &str,
    busy: &dyn Fn(&str) -> bool,
) -> Vec<Compare> {
    let str_at =
        |m: &DynamicObject, p: &str| m.data.pointer(p).and_then(Value::as_str).map(str::to_owned);
    let created = |m: &DynamicObject| m.creation_timestamp().map(|t| t.0);
    let mut out = Vec::new();
    for m in images {
        let name = m.name_any();
        let uid = m.uid().unwrap_or_default();
        if m.data.pointer("/status/changes").is_some() || busy(&uid) {
            continue;
        }
        let (Some(pool), Some(to)) = (
            str_at(m, "/spec/machineConfigPool/name"),
            str_at(m, "/spec/image"),
        ) else {
            continue;
        };
        let previous = images
            .iter()
            .filter(|o| o.name_any() != name)
            .filter(|o| str_at(o, "/spec/machineConfigPool/name").as_deref() == Some(&pool))
            .filter(|o| (created(o), o.name_any()) < (created(m), name.clone()))
            .max_by_key(|o| (created(o), o.name_any()));
        let arches_of = |o: &DynamicObject| -> Vec<String> {
            o.data
                .pointer("/spec/architectures")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|a| a["architecture"].as_str().map(str::to_owned))
                .collect()
        };
        let arches = arches_of(m);
        let architecture = if arches.is_empty() || arches.iter().any(|a| a == arch) {
            arch.to_owned()
        } else {
            arches[0].clone()
        };
        // The predecessor, when it has that architecture too (else the base, which a
        // build for that architecture started from).
        let previous = previous.filter(|p| {
            let theirs = arches_of(p);
            theirs.is_empty() || theirs.contains(&architecture)
        });
        // What the pool had when the image was recorded, when the lifecycle wrote it down
        // (image creation times have a second's precision: two images of one second would
        // not say which came first); else the newest image created before it.
        let recorded = m
            .annotations()
            .get(machineos_vocab::build::PREVIOUS_IMAGE_ANNOTATION)
            .filter(|p| **p != to)
            .cloned();
        let from = match (recorded, previous) {
            (Some(r), _) => Some(r),
            (None, Some(p)) => str_at(p, "/spec/image"),
            (None, None) => str_at(m, "/spec/baseImage"),
        };
        let Some(from) = from else { continue };
        out.push(Compare {
            name,
            uid,
            pool,
            from,
            to,
            architecture,
        });
    }
    out
}

/// `status.changes` of a comparison (see the module documentation). Pure.
pub fn summarize(from: &str, architecture: &str, diff: &ImageDiff) -> ImageChanges {
    let count = |c: &str| diff.files.iter().filter(|f| f.change == c).count() as i64;
    let class = image_class(diff.files.iter().map(|f| f.path.as_str()));
    let files: Vec<ImageFileChange> = diff
        .files
        .iter()
        .take(MAX_LISTED_CHANGES)
        .map(|f| {
            let node = f.after.as_ref().or(f.before.as_ref());
            ImageFileChange {
                path: f.path.clone(),
                change: f.change.to_owned(),
                kind: node.map_or("other", |n| n.kind).to_owned(),
                mode: node.map(|n| n.mode.clone()).unwrap_or_default(),
                uid: node.map_or(0, |n| i64::from(n.uid)),
                gid: node.map_or(0, |n| i64::from(n.gid)),
                size: node
                    .and_then(|n| n.size)
                    .map(|s| i64::try_from(s).unwrap_or(i64::MAX)),
                digest: f.after.as_ref().and_then(|n| n.digest.clone()),
            }
        })
        .collect();
    ImageChanges {
        from: from.to_owned(),
        architecture: architecture.to_owned(),
        added: count("added"),
        removed: count("removed"),
        modified: count("modified"),
        kernel_changed: diff.files.iter().any(|f| is_kernel_path(&f.path)),
        path_class: class.class.name().to_owned(),
        omitted: (diff.files.len() - files.len()) as i64,
        files,
    }
}

/// What this replica knows of the comparisons, by MachineOSImage uid; entries of images no
/// longer in the snapshot are dropped at every pass.
#[derive(Default)]
struct State {
    running: std::collections::HashSet<String>,
    /// Written (or found written, or the image gone): not again until the snapshot shows it.
    done: std::collections::HashSet<String>,
    /// Failures: how many, and when to try again.
    failed: HashMap<String, (u32, Instant)>,
}

/// Settings a comparison needs.
#[derive(Clone)]
struct Settings {
    registry: RegistrySettings,
    cache_dir: Option<std::path::PathBuf>,
    arch: String,
}

/// The `status.changes` sub-controller (see the module documentation).
#[derive(Clone)]
pub struct ChangesController {
    state: Arc<Mutex<State>>,
    permits: Arc<Semaphore>,
    settings: Settings,
    wake: Arc<Notify>,
    /// Cancelled when this replica stops leading or shuts down: the comparisons stop at
    /// their next await, nothing more is written (a new token serves what follows).
    stop: Arc<Mutex<CancellationToken>>,
}

impl ChangesController {
    /// A controller comparing with `registry`'s trust, the index cache in `cache_dir`, for
    /// architecture `arch` first; `wake` is notified when a comparison ends.
    pub fn new(
        registry: RegistrySettings,
        cache_dir: Option<std::path::PathBuf>,
        arch: &str,
        wake: Arc<Notify>,
    ) -> Self {
        ChangesController {
            state: Arc::new(Mutex::new(State::default())),
            permits: Arc::new(Semaphore::new(MAX_CONCURRENT)),
            settings: Settings {
                registry,
                cache_dir,
                arch: arch.to_owned(),
            },
            wake,
            stop: Arc::new(Mutex::new(CancellationToken::new())),
        }
    }

    /// Stop every comparison (this replica stepped down, or shuts down); what is running is
    /// forgotten, so a replica that leads again starts from the snapshot.
    pub fn cancel_all(&self) {
        let mut stop = self
            .stop
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        stop.cancel();
        *stop = CancellationToken::new();
        self.state().running.clear();
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Start the comparisons `s` wants; when to look again for those waiting out a backoff.
    pub fn pass(&self, cx: &Cx<'_>, s: &Snapshot) -> Requeue {
        let now = Instant::now();
        let mut requeue = Requeue::default();
        let todo = {
            let mut st = self.state();
            // Forget images that are gone, and those whose changes the snapshot shows.
            let present: std::collections::HashSet<String> = s
                .images
                .iter()
                .filter(|m| m.data.pointer("/status/changes").is_none())
                .filter_map(|m| m.uid())
                .collect();
            st.done.retain(|u| present.contains(u));
            st.failed.retain(|u, _| present.contains(u));
            for (_, until) in st.failed.values() {
                if *until > now {
                    requeue.after(until.saturating_duration_since(now));
                }
            }
            let busy = |uid: &str| {
                st.running.contains(uid)
                    || st.done.contains(uid)
                    || st.failed.get(uid).is_some_and(|(_, until)| *until > now)
            };
            wanted(&s.images, &self.settings.arch, &busy)
        };
        let stop = self
            .stop
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        for c in todo {
            let credentials = credentials(s, &c.pool);
            self.state().running.insert(c.uid.clone());
            let this = self.clone();
            let client = cx.client.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let uid = c.uid.clone();
                let work = async {
                    let _permit = this
                        .permits
                        .clone()
                        .acquire_owned()
                        .await
                        .map_err(|_| "the comparison slots are closed".to_owned())?;
                    this.compare(&client, &c, credentials).await
                };
                let outcome = tokio::select! {
                    () = stop.cancelled() => return,
                    outcome = work => outcome,
                };
                {
                    let mut st = this.state();
                    st.running.remove(&uid);
                    match outcome {
                        Ok(()) => {
                            st.failed.remove(&uid);
                            st.done.insert(uid);
                        }
                        Err(error) => {
                            let n = st.failed.get(&uid).map_or(0, |(n, _)| *n) + 1;
                            let wait = FIRST_BACKOFF
                                .saturating_mul(1 << (n - 1).min(10))
                                .min(MAX_BACKOFF);
                            tracing::warn!(image = %c.name, %error, ?wait, "comparing the image with its predecessor failed");
                            st.failed.insert(uid, (n, Instant::now() + wait));
                        }
                    }
                }
                this.wake.notify_one();
            });
        }
        requeue
    }

    async fn compare(
        &self,
        client: &kube::Client,
        c: &Compare,
        credentials: Vec<(String, Vec<u8>)>,
    ) -> Result<(), String> {
        let parse = |r: &str| ImageRef::parse(r).map_err(|e| format!("{r}: {e}"));
        let spec = DiffSpec {
            from: parse(&c.from)?,
            to: parse(&c.to)?,
            platform: Platform::new("linux", &c.architecture, None),
            // The cache holds bases; each image is compared once.
            cache_images: false,
        };
        let registry = self
            .settings
            .registry
            .client(&credentials)
            .map_err(|e| e.message)?;
        let cache = self
            .settings
            .cache_dir
            .clone()
            .map(machineos_baseindex::Cache::new);
        let progress: Arc<dyn machineos_native_builder::Progress> =
            Arc::new(machineos_native_builder::Quiet);
        let mut warnings = Vec::new();
        let diff = machineos_native_builder::diff::diff(
            &spec,
            Some(&registry),
            cache.as_ref(),
            &progress,
            &mut warnings,
        )
        .await
        .map_err(|e| e.to_string())?;
        for w in warnings {
            tracing::warn!(image = %c.name, warning = %w, "comparing the image");
        }
        let changes = serde_json::to_value(summarize(&c.from, &c.architecture, &diff))
            .map_err(|e| e.to_string())?;
        tracing::info!(image = %c.name, from = %c.from, files = diff.files.len(), "image changes recorded");
        let api = kinds::all(client, &kinds::image());
        // Only onto the incarnation compared, only once; a conflict with another writer of
        // the status (the rollout) is read again, a few times.
        let mut attempts = 0;
        loop {
            let changes = changes.clone();
            let (uid, to) = (c.uid.clone(), c.to.clone());
            let written = api::edit_status(
                &api,
                &c.name,
                format!("MachineOSImage {}", c.name),
                move |obj, status| {
                    let same = obj.uid().as_deref() == Some(uid.as_str())
                        && obj.data.pointer("/spec/image").and_then(Value::as_str)
                            == Some(to.as_str());
                    if !same || status.get("changes").is_some() {
                        return false;
                    }
                    status["changes"] = changes;
                    true
                },
            )
            .await;
            match written {
                Ok(_) => return Ok(()),
                // Gone (or replaced): nothing to record.
                Err(e) if api_code(&e) == Some(404) => return Ok(()),
                Err(e) if api_code(&e) == Some(409) && attempts < 3 => attempts += 1,
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// The HTTP status of an API error.
fn api_code(e: &api::ExecError) -> Option<u16> {
    match e {
        api::ExecError::Api(k) => k.code(),
        _ => None,
    }
}

/// The pool's MachineOSConfig's push Secret and base pull Secret, as the snapshot has them.
fn credentials(s: &Snapshot, pool: &str) -> Vec<(String, Vec<u8>)> {
    let Some(mosc) = s.machine_os_configs.iter().find(|m| {
        m.data
            .pointer("/spec/machineConfigPool/name")
            .and_then(Value::as_str)
            == Some(pool)
    }) else {
        return Vec::new();
    };
    [
        "/spec/renderedImagePushSecret/name",
        "/spec/baseImagePullSecret/name",
    ]
    .into_iter()
    .filter_map(|p| mosc.data.pointer(p).and_then(Value::as_str))
    .filter_map(|n| s.dockerconfigjson(n))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use machineos_native_builder::diff::{DiffSide, FileChange, NodeInfo};
    use serde_json::json;

    fn image(
        name: &str,
        pool: &str,
        created: &str,
        arches: &[&str],
        changes: bool,
    ) -> Arc<DynamicObject> {
        let mut v = json!({
            "apiVersion": "machineconfiguration.openshift.io/v1alpha1",
            "kind": "MachineOSImage",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "creationTimestamp": created},
            "spec": {
                "machineConfigPool": {"name": pool},
                "image": format!("reg/os@sha256:{}", name.repeat(64).chars().take(64).collect::<String>()),
                "baseImage": "reg/base@sha256:b",
                "architectures": arches.iter().map(|a| json!({"architecture": a})).collect::<Vec<_>>(),
            },
        });
        if changes {
            v["status"] = json!({"changes": {}});
        }
        Arc::new(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn each_image_is_compared_with_its_pools_previous_one_else_its_base() {
        let t = |h: u32| format!("2026-01-01T{h:02}:00:00Z");
        let images = vec![
            image("c", "worker", &t(3), &["amd64"], false),
            image("a", "worker", &t(1), &["amd64"], false),
            image("b", "worker", &t(2), &["arm64", "amd64"], true),
            image("d", "infra", &t(4), &["arm64"], false),
            image("e", "worker", &t(3), &[], false),
        ];
        let spec_image = |n: &str| {
            images.iter().find(|m| m.name_any() == n).unwrap().data["spec"]["image"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        let got: Vec<(String, String, String)> = wanted(&images, "amd64", &|u| u == "uid-busy")
            .into_iter()
            .map(|c| (c.name, c.from, c.architecture))
            .collect();
        assert_eq!(
            got,
            [
                // c: after b (created earlier), which already has its changes.
                ("c".to_owned(), spec_image("b"), "amd64".to_owned()),
                // a: the pool's first: its base.
                (
                    "a".to_owned(),
                    "reg/base@sha256:b".to_owned(),
                    "amd64".to_owned()
                ),
                // d: another pool, first there; arm64 only.
                (
                    "d".to_owned(),
                    "reg/base@sha256:b".to_owned(),
                    "arm64".to_owned()
                ),
                // e: the same time as c, after it by name.
                ("e".to_owned(), spec_image("c"), "amd64".to_owned()),
            ]
        );
        // Busy (running, written, backing off: by uid) or recorded: not wanted.
        assert!(wanted(&images, "amd64", &|u| u.starts_with("uid-")).is_empty());
        // The image the pool had when it was recorded wins over creation order.
        let mut c = (*image("c", "worker", &t(1), &["amd64"], false)).clone();
        c.metadata.annotations = Some(
            [(
                machineos_vocab::build::PREVIOUS_IMAGE_ANNOTATION.to_owned(),
                "reg/os@sha256:recorded".to_owned(),
            )]
            .into(),
        );
        let got = wanted(&[Arc::new(c)], "amd64", &|_| false);
        assert_eq!(got[0].from, "reg/os@sha256:recorded");
        // A predecessor without the architecture compared: the base instead.
        let images = vec![
            image("a", "worker", &t(1), &["amd64"], true),
            image("b", "worker", &t(2), &["arm64"], false),
        ];
        let got = wanted(&images, "amd64", &|_| false);
        assert_eq!(
            (got[0].from.as_str(), got[0].architecture.as_str()),
            ("reg/base@sha256:b", "arm64")
        );
    }

    #[test]
    fn the_summary_lists_the_first_paths_and_counts_the_rest() {
        let node = |digest: Option<&str>| NodeInfo {
            kind: "file",
            mode: "0644".into(),
            uid: 0,
            gid: 0,
            size: Some(3),
            target: None,
            digest: digest.map(str::to_owned),
        };
        let mut files: Vec<FileChange> = (0..MAX_LISTED_CHANGES + 5)
            .map(|i| FileChange {
                path: format!("/etc/f{i:04}"),
                change: "added",
                before: None,
                after: Some(node(Some("sha256:x"))),
            })
            .collect();
        files.push(FileChange {
            path: "/usr/lib/modules/6.1/vmlinuz".into(),
            change: "modified",
            before: Some(node(None)),
            after: Some(node(Some("sha256:k"))),
        });
        let side = DiffSide {
            image: String::new(),
            digest: String::new(),
            platform: "linux/amd64".into(),
            layers: Vec::new(),
            labels: std::collections::BTreeMap::new(),
            machine_config: None,
        };
        let diff = ImageDiff {
            from: side.clone(),
            to: side,
            files,
            layer_reads: 1,
        };
        let s = summarize("reg/os@sha256:prev", "amd64", &diff);
        assert_eq!((s.added, s.removed, s.modified), (105, 0, 1));
        assert!(s.kernel_changed);
        assert_eq!(s.path_class, "Reboot");
        assert_eq!(s.files.len(), MAX_LISTED_CHANGES);
        assert_eq!(s.omitted, 6);
        assert_eq!(s.files[0].path, "/etc/f0000");
        assert_eq!(s.files[0].digest.as_deref(), Some("sha256:x"));
        assert_eq!(s.from, "reg/os@sha256:prev");
    }
}
