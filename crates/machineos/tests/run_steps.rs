//! `machineos build` with RUN steps, end to end: a loopback registry, machineos-synth's stub
//! base (a real shell and stub rpm-ostree/rpm/dnf/ostree that record what they are asked)
//! and its extensions image pushed there, the local buildah running the rendered
//! Containerfile on the native image. Needs root, buildah, skopeo, umoci, docker-registry
//! and busybox-static; fails (never passes silently) without them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use machineos_image::{Layout, Platform};
use machineos_render::{Extension, KernelType};
use machineos_synth::{SynthSpec, write_extensions_image, write_image};
use machineos_testkit::{
    CopyOptions, RegistryOptions, TestRegistry, TreeEntry, skopeo_copy, skopeo_inspect_raw,
    snapshot, umoci_unpack,
};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A registry with the stub base (`stub/base:1`) and the extensions image (`stub/ext:1`,
/// every package of every extension and kernel), and a directory of MachineConfigs: the
/// examples plus, with `extensions`, one asking for usbguard and the realtime kernel.
struct Setup {
    tmp: tempfile::TempDir,
    registry: TestRegistry,
    mcs: PathBuf,
}

impl Setup {
    fn new(extensions: bool) -> Setup {
        Setup::with_registry(extensions, RegistryOptions::new())
    }

    fn with_registry(extensions: bool, options: RegistryOptions) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let registry = TestRegistry::start(options).unwrap();
        let layout_dir = tmp.path().join("images");
        let layout = Layout::create(&layout_dir).unwrap();
        let spec = SynthSpec::example()
            .with_platform(Platform::host())
            .with_stub_tools()
            .expect("the stub base (busybox-static and bash installed)");
        layout
            .set_tag("base", &write_image(&layout, &spec).unwrap())
            .unwrap();
        let mut packages: Vec<&str> = Extension::ALL
            .iter()
            .flat_map(|e| e.packages().iter().copied())
            .collect();
        packages.extend(KernelType::Realtime.packages());
        packages.extend(KernelType::SixtyFourKPages.packages());
        let ext = write_extensions_image(&layout, &Platform::host(), &packages).unwrap();
        layout.set_tag("ext", &ext).unwrap();
        let to_registry = CopyOptions::new().dest_registry(&registry);
        for (tag, name) in [("base", "stub/base:1"), ("ext", "stub/ext:1")] {
            skopeo_copy(
                &format!("oci:{}:{tag}", layout_dir.display()),
                &registry.reference(name),
                &to_registry,
            )
            .unwrap();
        }
        let mcs = tmp.path().join("mcs");
        std::fs::create_dir(&mcs).unwrap();
        for e in std::fs::read_dir(repo().join("examples/machineconfigs")).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), mcs.join(e.file_name())).unwrap();
        }
        if extensions {
            std::fs::write(
                mcs.join("extensions.yaml"),
                "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\n\
                 metadata:\n  labels:\n    machineconfiguration.openshift.io/role: worker\n  \
                 name: 99-worker-extensions\n\
                 spec:\n  extensions:\n  - usbguard\n  kernelType: realtime\n",
            )
            .unwrap();
        }
        Setup { tmp, registry, mcs }
    }

    /// `machineos build` from the stub base to `os/worker:v1` with a JSON summary, the
    /// extensions image by tag, `extra` arguments, and `path` as `PATH` when given.
    fn build(&self, extra: &[&str], path: Option<&Path>) -> Output {
        self.build_with(extra, path, &[])
    }

    /// [`Setup::build`] with environment variables set.
    fn build_with(&self, extra: &[&str], path: Option<&Path>, env: &[(&str, &Path)]) -> Output {
        self.build_to(&self.output(), extra, path, env)
    }

    /// [`Setup::build_with`] to `output`.
    fn build_to(
        &self,
        output: &str,
        extra: &[&str],
        path: Option<&Path>,
        env: &[(&str, &Path)],
    ) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_machineos"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.current_dir(repo()).args([
            "build",
            "--base",
            &self.registry.reference("stub/base:1"),
            "--extensions-image",
            &self.registry.reference("stub/ext:1"),
            "--output",
            output,
            "--no-cache",
            "-o",
            "json",
        ]);
        cmd.args(extra).arg(&self.mcs);
        if let Some(p) = path {
            cmd.env("PATH", p);
        }
        cmd.output().expect("the binary runs")
    }

    fn output(&self) -> String {
        self.registry.reference("os/worker:v1")
    }

    /// Whether `reference` (a tag) exists in the registry.
    fn exists(&self, reference: &str) -> bool {
        skopeo_inspect_raw(reference, None, None, false).is_ok()
    }

    /// `reference` unpacked with umoci, snapshotted.
    fn tree(&self, reference: &str, tag: &str) -> (PathBuf, BTreeMap<String, TreeEntry>) {
        let layout = self.tmp.path().join("pulled");
        skopeo_copy(
            reference,
            &format!("oci:{}:{tag}", layout.display()),
            &CopyOptions::new().src_registry(&self.registry),
        )
        .unwrap();
        let dest = self.tmp.path().join(format!("unpacked-{tag}"));
        umoci_unpack(&layout, tag, &dest).unwrap();
        let rootfs = dest.join("rootfs");
        let tree = snapshot(&rootfs);
        (rootfs, tree)
    }
}

/// The summary (the first JSON value of stdout) and the last line of stdout.
fn summary(o: &Output) -> (serde_json::Value, String) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8(o.stdout.clone()).unwrap();
    let json = serde_json::Deserializer::from_str(&stdout)
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    let last = stdout.trim_end().lines().last().unwrap().to_owned();
    (json, last)
}

/// What buildah's RUN leaves behind in any image lacking them: empty `/etc/hostname` and
/// `/etc/resolv.conf`, the targets it bind-mounts the build's own over (as in the MCO's
/// build pod). Checked empty and removed from `tree`.
fn drop_buildah_mount_targets(root: &Path, tree: &mut BTreeMap<String, TreeEntry>) {
    for path in ["/etc/hostname", "/etc/resolv.conf"] {
        if let Some(e) = tree.remove(path) {
            assert_eq!(e.size, 0, "{path} in {}", root.display());
        }
    }
}

/// The paths that differ between two snapshots, with how (`only in native`, `only in
/// final`, `changed`).
fn changes(
    native: &BTreeMap<String, TreeEntry>,
    last: &BTreeMap<String, TreeEntry>,
) -> BTreeMap<String, &'static str> {
    let mut out = BTreeMap::new();
    for (path, entry) in native {
        match last.get(path) {
            None => {
                out.insert(path.clone(), "only in native");
            }
            Some(e) if e != entry && entry.kind != machineos_testkit::EntryKind::Dir => {
                out.insert(path.clone(), "changed");
            }
            Some(_) => {}
        }
    }
    for path in last.keys() {
        if !native.contains_key(path) {
            out.insert(path.clone(), "only in final");
        }
    }
    out
}

#[test]
fn extensions_and_a_kernel_swap_run_in_buildah_on_the_native_image() {
    let s = Setup::new(true);
    let (json, last) = summary(&s.build(&[], None));
    let run = &json["runSteps"];
    let digest = run["digest"].as_str().unwrap();
    let native_digest = json["digest"].as_str().unwrap();
    assert!(digest.starts_with("sha256:") && native_digest.starts_with("sha256:"));
    assert_ne!(digest, native_digest);
    // The existing fields describe the native image; runSteps the result, printed last.
    assert_eq!(run["from"], json["image"]);
    assert_eq!(last, run["image"].as_str().unwrap());
    assert_eq!(
        last,
        format!("{}@{digest}", s.registry.reference("os/worker"))
    );
    assert_eq!(run["kernelType"], "realtime");
    assert_eq!(run["packages"], serde_json::json!(["usbguard"]));
    assert_eq!(
        run["nativeTag"].as_str().unwrap(),
        s.registry.reference("os/worker:v1-native")
    );
    let ext = run["extensionsImage"].as_str().unwrap();
    assert!(
        ext.starts_with(&format!("{}@sha256:", s.registry.reference("stub/ext"))),
        "resolved by digest: {ext}"
    );
    assert!(run["buildah"]["version"].as_str().is_some());
    // The tags: the result under the output tag, the native image beside it.
    assert!(skopeo_inspect_raw(&s.output(), None, None, false).is_ok());

    let (_, native) = s.tree(&format!("docker://{}-native", s.output()), "native");
    let (root, mut result) = s.tree(&format!("docker://{}", s.output()), "final");
    drop_buildah_mount_targets(&root, &mut result);
    // The native layer's files are there, unchanged.
    for path in [
        "/etc/chrony.conf",
        "/etc/machine-config-daemon/currentconfig",
    ] {
        assert!(native.contains_key(path), "{path} in the native image");
        assert_eq!(native.get(path), result.get(path), "{path}");
    }
    // What differs is what the RUN steps did, and only that.
    let state = "/usr/share/machineos-stub";
    let mut want: BTreeMap<String, &str> = BTreeMap::new();
    for p in KernelType::Default.packages() {
        want.insert(format!("{state}/packages/{p}"), "only in native");
    }
    for p in KernelType::Realtime
        .packages()
        .iter()
        .chain(["usbguard"].iter())
    {
        want.insert(format!("{state}/packages/{p}"), "only in final");
    }
    want.insert(format!("{state}/log"), "only in final");
    want.insert(
        "/usr/lib/tmpfiles.d/usbguard_ipsec.conf".into(),
        "only in final",
    );
    let got = changes(&native, &result);
    assert_eq!(got, want);
    assert_eq!(
        std::fs::read_to_string(root.join("usr/share/machineos-stub/log")).unwrap(),
        "rpm-ostree install usbguard\n\
         dnf remove kernel kernel-core kernel-modules kernel-modules-core kernel-modules-extra\n\
         dnf install kernel-rt-core kernel-rt-modules kernel-rt-modules-extra kernel-rt-kvm\n\
         ostree container commit\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("usr/share/machineos-stub/packages/usbguard")).unwrap(),
        "rpm-ostree install\n"
    );

    // The labels name the rendered MachineConfig, the pool and the base by digest.
    let o = Command::new(env!("CARGO_BIN_EXE_machineos"))
        .args(["inspect", &s.output()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let inspection: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(inspection["digest"], digest);
    let labels = &inspection["labels"];
    assert_eq!(labels["machineconfigpool"], "worker");
    assert_eq!(
        labels["machineconfig"].as_str().unwrap(),
        json["input"]
            .as_str()
            .unwrap()
            .trim_start_matches("MachineConfig ")
    );
    assert_eq!(labels["baseOSContainerImage"], json["base"]);

    // --native-only (the OpenShift Build backend's first stage): the same native image,
    // digest for digest, pushed where --output says, with no buildah in PATH.
    let empty = s.tmp.path().join("no-buildah");
    std::fs::create_dir(&empty).unwrap();
    let elsewhere = s.registry.reference("os/worker:native-only");
    let o = s.build_to(&elsewhere, &["--native-only"], Some(&empty), &[]);
    let (only, last) = summary(&o);
    assert_eq!(only["digest"], json["digest"], "the native stage's digest");
    assert!(only.get("runSteps").is_none_or(serde_json::Value::is_null));
    assert_eq!(
        last,
        format!("{}@{native_digest}", s.registry.reference("os/worker"))
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "--native-only: the RUN steps (rpm-ostree install usbguard, kernel swap to realtime) \
             are left to the next stage"
        ),
        "{err}"
    );
}

#[test]
fn a_user_containerfile_runs_after_the_native_layer() {
    let s = Setup::new(false);
    let file = s.tmp.path().join("Containerfile");
    std::fs::write(
        &file,
        "# The user's part.\nFROM configs AS final\nRUN echo hi > /etc/hello\n",
    )
    .unwrap();
    let (json, last) = summary(&s.build(&["--containerfile", file.to_str().unwrap()], None));
    let run = &json["runSteps"];
    assert_eq!(last, run["image"].as_str().unwrap());
    assert_eq!(
        run["extensionsImage"],
        serde_json::Value::Null,
        "not needed"
    );
    assert_eq!(run["steps"][0], format!("Containerfile {}", file.display()));
    let (_, native) = s.tree(&format!("docker://{}-native", s.output()), "native");
    let (root, mut result) = s.tree(&format!("docker://{}", s.output()), "final");
    drop_buildah_mount_targets(&root, &mut result);
    assert_eq!(
        std::fs::read_to_string(root.join("etc/hello")).unwrap(),
        "hi\n"
    );
    let got = changes(&native, &result);
    assert_eq!(
        got,
        BTreeMap::from([("/etc/hello".to_owned(), "only in final")])
    );
}

#[test]
fn without_buildah_the_error_names_what_needs_it_and_nothing_is_pushed() {
    let s = Setup::new(true);
    let empty = s.tmp.path().join("empty-path");
    std::fs::create_dir(&empty).unwrap();
    let o = s.build(&[], Some(&empty));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "spec.extensions [usbguard] and spec.kernelType realtime need RUN steps: buildah not found in PATH"
        ) && err.contains("MachineConfig rendered-worker-"),
        "{err}"
    );
    assert!(!s.exists(&s.output()), "the output tag was pushed");
    assert!(
        !s.exists(&format!("{}-native", s.output())),
        "the native tag was pushed"
    );

    // An OCI layout output is refused as clearly, before anything is written.
    let out = s.tmp.path().join("layout-out");
    let o = Command::new(env!("CARGO_BIN_EXE_machineos"))
        .current_dir(repo())
        .args([
            "build",
            "--base",
            &s.registry.reference("stub/base:1"),
            "--output",
            &format!("oci:{}:x", out.display()),
            "--no-cache",
        ])
        .arg(&s.mcs)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("registry --output only"), "{err}");
    assert!(!out.join("index.json").exists());
}

#[test]
fn a_containerfile_syntax_error_names_its_line_before_buildah_runs() {
    let s = Setup::new(false);
    // A buildah that records how it is run.
    let bin = s.tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let calls = s.tmp.path().join("buildah-calls");
    let fake = bin.join("buildah");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho \"$*\" >> {}\necho 'buildah version 9.9.9'\n",
            calls.display()
        ),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();
    let file = s.tmp.path().join("Containerfile");
    for (content, line) in [
        (
            "FROM configs AS final\nRUNN echo hi\n",
            "line 2: unknown instruction RUNN",
        ),
        (
            "FROM quay.io/x/y AS final\nRUN true\n",
            "line 1: the Containerfile must continue from the configs stage",
        ),
    ] {
        std::fs::write(&file, content).unwrap();
        let o = s.build(&["--containerfile", file.to_str().unwrap()], Some(&bin));
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("--containerfile {}: {line}", file.display())),
            "{err}"
        );
        assert!(!calls.exists(), "buildah ran");
    }
    // A heredoc the local step cannot run is refused before anything is pushed, too.
    std::fs::write(&file, "FROM configs AS final\nCOPY <<EOF /etc/x\nhi\nEOF\n").unwrap();
    let o = s.build(&["--containerfile", file.to_str().unwrap()], Some(&bin));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "--containerfile {}: line 2: COPY with a heredoc",
            file.display()
        )),
        "{err}"
    );
    assert!(!calls.exists(), "buildah ran");
    assert!(!s.exists(&s.output()));
    assert!(!s.exists(&format!("{}-native", s.output())));
}

/// A registry with TLS and basic auth: the credentials of `--authfile` reach buildah (pull of
/// the native image, push of the result) through its private auth file, which is gone
/// afterwards with the rest of buildah's temporary directory.
#[test]
fn registry_credentials_reach_buildah_and_its_files_are_removed() {
    let s = Setup::with_registry(
        false,
        RegistryOptions::new()
            .with_tls()
            .with_auth("builder", "s3cret"),
    );
    let auth = s.tmp.path().join("auth.json");
    let token =
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "builder:s3cret");
    std::fs::write(
        &auth,
        format!(
            r#"{{"auths":{{"{}":{{"auth":"{token}"}}}}}}"#,
            s.registry.host()
        ),
    )
    .unwrap();
    let file = s.tmp.path().join("Containerfile");
    std::fs::write(&file, "FROM configs AS final\nRUN echo hi > /etc/hello\n").unwrap();
    let tmpdir = s.tmp.path().join("tmpdir");
    std::fs::create_dir(&tmpdir).unwrap();
    let o = s.build_with(
        &[
            "--containerfile",
            file.to_str().unwrap(),
            "--authfile",
            auth.to_str().unwrap(),
            "--ca-file",
            s.registry.ca_path().unwrap().to_str().unwrap(),
        ],
        None,
        &[("TMPDIR", &tmpdir)],
    );
    let (json, last) = summary(&o);
    assert_eq!(last, json["runSteps"]["image"].as_str().unwrap());
    let (root, _) = s.tree(&format!("docker://{}", s.output()), "final");
    assert_eq!(
        std::fs::read_to_string(root.join("etc/hello")).unwrap(),
        "hi\n"
    );
    let left: Vec<_> = std::fs::read_dir(&tmpdir).unwrap().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}
