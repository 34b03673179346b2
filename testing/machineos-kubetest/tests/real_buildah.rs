//! Both executors with the real buildah (as root): a base image (machineos-synth's example)
//! in a loopback registry, a build `FROM` it with a `COPY` of a ConfigMap input and a
//! `LABEL` (no `RUN`: the synthetic base has no shell), pushed back to the registry, and
//! skopeo confirming the digest the cluster reported — once as an OpenShift Build
//! ([`BuildExecutor`]) and once as a Job whose pod runs the build script the way
//! machineos' build Job does ([`PodExecutor`]: Secret and ConfigMap volumes, `emptyDir`
//! context, `--digestfile "$TERMINATION_LOG"`).
//!
//! The registry is plain HTTP: buildah learns that from a `registries.conf` given through
//! `CONTAINERS_REGISTRIES_CONF` in the executors' extra environment, since a Job's script
//! takes no extra flags.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use machineos_image::{Platform, layout::Layout};
use machineos_kubetest::buildexec::BuildExecutor;
use machineos_kubetest::hooks;
use machineos_kubetest::http::{Server, new_store};
use machineos_kubetest::podexec::{ExecSettings, PodExecutor};
use machineos_kubetest::{GroupResource, WriteOptions};
use machineos_testkit::{CopyOptions, TestRegistry, skopeo, skopeo_copy};
use serde_json::{Value, json};

const W: WriteOptions = WriteOptions { dry_run: false };
const NS: &str = "default";
/// A generous bound for a build that pulls, commits and pushes.
const EVENTUALLY: Duration = Duration::from_secs(300);

fn b64(s: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// The test needs buildah and root; without them it fails saying so.
fn require_buildah() {
    machineos_testkit::require_tool("buildah").expect("this test runs buildah");
    assert!(
        running_as_root(),
        "this test runs buildah with the vfs driver and chroot isolation, which needs root"
    );
}

/// A synthetic base image in an OCI layout under `dir`.
fn base_layout(dir: &Path) -> PathBuf {
    let path = dir.join("base-layout");
    let layout = Layout::create(&path).unwrap();
    let spec = machineos_synth::SynthSpec::example()
        .with_platform("linux/amd64".parse::<Platform>().unwrap());
    let desc = machineos_synth::write_image(&layout, &spec).unwrap();
    layout.set_tag("base", &desc).unwrap();
    path
}

struct Cluster {
    server: Server,
    registry: TestRegistry,
    /// `host/base/os:1`.
    base: String,
    /// Holds `registries.conf`, the base layout and the executors' work directory.
    _tmp: tempfile::TempDir,
    settings: ExecSettings,
}

impl Cluster {
    /// A registry holding the base image, the API server with the push Secret and the
    /// input ConfigMaps, and executor settings pointing buildah at the registry.
    async fn start() -> Cluster {
        require_buildah();
        let tmp = tempfile::tempdir().unwrap();
        let (registry, base) = {
            let dir = tmp.path().to_owned();
            tokio::task::spawn_blocking(move || {
                let registry = TestRegistry::start_plain().expect("registry");
                let layout = base_layout(&dir);
                let base = format!("{}/base/os:1", registry.host());
                skopeo_copy(
                    &format!("oci:{}:base", layout.display()),
                    &format!("docker://{base}"),
                    &CopyOptions::new().dest_registry(&registry),
                )
                .expect("push the base image");
                (registry, base)
            })
            .await
            .unwrap()
        };
        let conf = tmp.path().join("registries.conf");
        std::fs::write(
            &conf,
            format!(
                "[[registry]]\nlocation = \"{}\"\ninsecure = true\n",
                registry.host()
            ),
        )
        .unwrap();
        let settings = ExecSettings::new(tmp.path().join("work"))
            .env("CONTAINERS_REGISTRIES_CONF", conf.to_str().unwrap());
        let server = Server::start(new_store(), 0).await.unwrap();
        let c = Cluster {
            server,
            registry,
            base,
            _tmp: tmp,
            settings,
        };
        let auth = json!({"auths": {c.registry.host(): {"auth": b64(b"anonymous:none")}}});
        c.create(
            "secrets",
            json!({"metadata": {"name": "push"}, "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": b64(auth.to_string().as_bytes())}}),
        );
        c.create(
            "configmaps",
            json!({"metadata": {"name": "extra"}, "data": {"hello.txt": "hello\n"}}),
        );
        c.create(
            "configmaps",
            json!({"metadata": {"name": "containerfile"},
                "data": {"Containerfile": c.containerfile()}}),
        );
        c
    }

    fn create(&self, plural: &str, obj: Value) {
        let group = match plural {
            "jobs" => "batch",
            "builds" => "build.openshift.io",
            _ => "",
        };
        self.server
            .store()
            .lock()
            .unwrap()
            .create(&GroupResource::new(group, plural), Some(NS), &obj, W)
            .unwrap();
        self.server.notify();
    }

    fn containerfile(&self) -> String {
        format!(
            "FROM {}\nCOPY extra/hello.txt /etc/hello.txt\nLABEL a=b\n",
            self.base
        )
    }

    /// skopeo's digest and `a` label of `image`.
    async fn inspect(&self, image: &str) -> (String, String) {
        let image = format!("docker://{image}");
        let out = tokio::task::spawn_blocking(move || {
            skopeo(&["inspect", "--tls-verify=false", &image]).unwrap()
        })
        .await
        .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        (
            v["Digest"].as_str().unwrap_or("").to_string(),
            v["Labels"]["a"].as_str().unwrap_or("").to_string(),
        )
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_buildah_build_pushes_to_a_loopback_registry() {
    let c = Cluster::start().await;
    let executor = BuildExecutor::spawn(c.server.shared().clone(), c.settings.clone());
    let out = format!("{}/out/os:build", c.registry.host());
    c.create(
        "builds",
        json!({
            "apiVersion": "build.openshift.io/v1", "kind": "Build",
            "metadata": {"name": "real"},
            "spec": {
                "source": {"type": "Dockerfile", "dockerfile": c.containerfile(),
                    "configMaps": [{"configMap": {"name": "extra"}, "destinationDir": "extra"}]},
                "strategy": {"type": "Docker", "dockerStrategy": {"pullSecret": {"name": "push"}}},
                "output": {"to": {"kind": "DockerImage", "name": out},
                    "pushSecret": {"name": "push"}},
            },
        }),
    );
    let log = || executor.log(NS, "real").unwrap_or_default();
    let b = hooks::wait_for(c.server.shared(), EVENTUALLY, |st| {
        st.get(
            &GroupResource::new("build.openshift.io", "builds"),
            Some(NS),
            "real",
        )
        .ok()
        .filter(|b| {
            matches!(
                b["status"]["phase"].as_str(),
                Some("Complete" | "Failed" | "Error")
            )
        })
    })
    .await
    .unwrap_or_else(|| panic!("the build did not finish; log:\n{}", log()));
    assert_eq!(b["status"]["phase"], "Complete", "{b:#}\nlog:\n{}", log());
    let digest = b["status"]["output"]["to"]["imageDigest"].as_str().unwrap();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    assert_eq!(c.inspect(&out).await, (digest.to_string(), "b".to_string()));
}

/// The build Job's script (as machineos-buildrequest renders it, shortened).
const BUILD_SCRIPT: &str = r#"set -euo pipefail
mkdir -p "$CONTEXT_DIR/extra"
cp "$CONTAINERFILE_DIR/Containerfile" "$CONTEXT_DIR/Containerfile"
cp "$EXTRA_DIR/hello.txt" "$CONTEXT_DIR/extra/hello.txt"
buildah bud --storage-driver vfs --authfile "$PULL_AUTHFILE" --tag "$TAG" \
	--file "$CONTEXT_DIR/Containerfile" "$CONTEXT_DIR"
buildah push --storage-driver vfs --authfile "$PUSH_AUTHFILE" \
	--digestfile "$TERMINATION_LOG" "$TAG"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_real_buildah_job_pushes_and_reports_the_digest_as_its_termination_message() {
    let c = Cluster::start().await;
    let executor = PodExecutor::spawn(c.server.shared().clone(), c.settings.clone());
    let tag = format!("{}/out/os:job", c.registry.host());
    let secret_volume = |name: &str| {
        json!({"name": name, "secret": {"secretName": "push",
            "items": [{"key": ".dockerconfigjson", "path": "config.json"}]}})
    };
    c.create(
        "jobs",
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "build"},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "build", "image": "quay.io/buildah/stable:v1.39",
                    "command": ["/bin/bash", "-c", BUILD_SCRIPT, "build.sh"],
                    "env": [
                        {"name": "BUILDAH_ISOLATION", "value": "chroot"},
                        {"name": "STORAGE_DRIVER", "value": "vfs"},
                        {"name": "HOME", "value": "/home/build"},
                        {"name": "TAG", "value": tag},
                        {"name": "CONTAINERFILE_DIR", "value": "/tmp/containerfile"},
                        {"name": "EXTRA_DIR", "value": "/tmp/extra"},
                        {"name": "CONTEXT_DIR", "value": "/home/build/context"},
                        {"name": "PULL_AUTHFILE", "value": "/tmp/base-image-pull-creds/config.json"},
                        {"name": "PUSH_AUTHFILE", "value": "/tmp/final-image-push-creds/config.json"},
                        {"name": "TERMINATION_LOG", "value": "/dev/termination-log"},
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "volumeMounts": [
                        {"name": "containerfile", "mountPath": "/tmp/containerfile", "readOnly": true},
                        {"name": "extra", "mountPath": "/tmp/extra", "readOnly": true},
                        {"name": "pull-secret", "mountPath": "/tmp/base-image-pull-creds", "readOnly": true},
                        {"name": "push-secret", "mountPath": "/tmp/final-image-push-creds", "readOnly": true},
                        {"name": "context", "mountPath": "/home/build/context"},
                    ],
                }],
                "volumes": [
                    {"name": "containerfile", "configMap": {"name": "containerfile",
                        "items": [{"key": "Containerfile", "path": "Containerfile"}]}},
                    {"name": "extra", "projected": {"sources": [{"configMap": {"name": "extra"}}]}},
                    secret_volume("pull-secret"),
                    secret_volume("push-secret"),
                    {"name": "context", "emptyDir": {}},
                ],
            }}},
        }),
    );
    let job = hooks::wait_for(c.server.shared(), EVENTUALLY, |st| {
        st.get(&GroupResource::new("batch", "jobs"), Some(NS), "build")
            .ok()
            .filter(hooks::job_finished)
    })
    .await
    .unwrap_or_else(|| panic!("the Job did not finish: {:?}", executor.runs()));
    let pod = {
        let st = c.server.store();
        let st = st.lock().unwrap();
        st.objects()
            .find(|(k, v)| {
                k.gr.resource == "pods" && v["metadata"]["labels"]["job-name"] == "build"
            })
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    let pod_name = pod["metadata"]["name"].as_str().unwrap();
    let log = executor.log(NS, pod_name).unwrap_or_default();
    assert_eq!(job["status"]["succeeded"], 1, "{job:#}\nlog:\n{log}");
    let message = pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.starts_with("sha256:") && message.len() == 71,
        "{message:?}"
    );
    assert_eq!(
        c.inspect(&tag).await,
        (message.to_string(), "b".to_string())
    );
}
