//! The bootc and rpm-ostree backends against stand-in executables (`tests/standins/`,
//! bash + coreutils) that keep a host's deployments in state files, plus status parsing
//! against real-shaped JSON fixtures, detection, the systemd-run mode, files and the pull
//! backoff.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use machineos_host::bootc::{self, BootcEntry};
use machineos_host::run::{Mode, Runner, Tools};
use machineos_host::{
    FakeHost, Host, HostError, HostKind, detect, files, pull_with_retry, rpm_ostree,
};

const A: &str =
    "quay.io/org/os@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str =
    "quay.io/org/os@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str =
    "quay.io/org/os@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
const CMDLINE: &str =
    "rw root=UUID=0a1b ostree=/ostree/boot.1/rhcos/0/0 ignition.platform.id=metal";

/// A host made of a temp dir: `root/` (what the backends see: /proc files, auth files, homes)
/// and `state/` (the stand-ins' deployments), with wrappers for the chosen tools.
struct Stand {
    _dir: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    tools: Tools,
}

impl Stand {
    fn new(booted: Option<&str>, tools: &[&str]) -> Stand {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let state = dir.path().join("state");
        let bin = dir.path().join("bin");
        for d in [&root, &state, &bin] {
            std::fs::create_dir_all(d).unwrap();
        }
        let standins = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/standins");
        let tool = |name: &str| -> PathBuf {
            if !tools.contains(&name) {
                return bin.join(format!("absent-{name}"));
            }
            let p = bin.join(name);
            std::fs::write(
                &p,
                format!(
                    "#!/usr/bin/env bash\nexport STANDIN_STATE='{}'\nexec bash '{}' \"$@\"\n",
                    state.display(),
                    standins.join(name).display()
                ),
            )
            .unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        };
        let systemctl = tool("systemctl");
        let tools = Tools {
            bootc: tool("bootc"),
            rpm_ostree: tool("rpm-ostree"),
            systemd_run: tool("systemd-run"),
            reboot: vec![systemctl.display().to_string(), "reboot".into()],
            systemctl,
            ostree: tool("ostree"),
            // The real one: the stand-ins record the I/O class they ran in.
            ..Tools::default()
        };
        let s = Stand {
            _dir: dir,
            root,
            state,
            tools,
        };
        if let Some(b) = booted {
            s.set("booted", b);
        }
        s.set("kargs", CMDLINE);
        s.write_root(
            "proc/cmdline",
            &format!("BOOT_IMAGE=(hd0,gpt3)/vmlinuz {CMDLINE}\n"),
        );
        s.write_root("proc/sys/kernel/random/boot_id", "boot-0\n");
        s
    }

    fn runner(&self) -> Runner {
        let mut r = Runner::new(self.tools.clone());
        r.state_dir = self.root.join("run/machineos-host");
        r.poll = Duration::from_millis(5);
        r
    }

    fn bootc(&self) -> machineos_host::Bootc {
        machineos_host::Bootc::new(self.runner(), &self.root)
    }

    fn rpm_ostree(&self) -> machineos_host::RpmOstree {
        machineos_host::RpmOstree::new(self.runner(), &self.root)
    }

    fn write_root(&self, rel: &str, text: &str) {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn set(&self, name: &str, text: &str) {
        let p = self.state.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{text}\n")).unwrap();
    }

    fn get(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.state.join(name))
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    }

    fn calls(&self) -> Vec<String> {
        let bin = self
            .state
            .parent()
            .unwrap()
            .join("bin/")
            .display()
            .to_string();
        std::fs::read_to_string(self.state.join("calls"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.replace(&bin, "BIN/"))
            .collect()
    }

    fn clear_calls(&self) {
        let _ = std::fs::remove_file(self.state.join("calls"));
    }

    /// The reboot: the staged deployment (unless download-only; or `boot_into` when set)
    /// becomes the booted one, the old booted one the rollback; the next deployment's kargs
    /// become /proc/cmdline; a new boot id; /run is emptied.
    fn boot(&self) {
        let locked = self.state.join("staged_locked").exists();
        let queued = self.state.join("rollback_queued").exists();
        let next = self
            .get("boot_into")
            .or_else(|| self.get("staged").filter(|_| !locked))
            .or_else(|| self.get("pending"))
            .or_else(|| self.get("rollback").filter(|_| queued));
        if let Some(next) = next {
            if let Some(old) = self.get("booted") {
                self.set("rollback", &old);
            }
            self.set("booted", &next);
        }
        for f in [
            "staged",
            "staged_locked",
            "pending",
            "rollback_queued",
            "pulled",
            "boot_into",
            "reboot_requested",
        ] {
            let _ = std::fs::remove_file(self.state.join(f));
        }
        let kargs = self.get("kargs").unwrap_or_default();
        self.write_root(
            "proc/cmdline",
            &format!("BOOT_IMAGE=(hd0,gpt3)/vmlinuz {kargs}\n"),
        );
        let n: u32 = std::fs::read_to_string(self.root.join("proc/sys/kernel/random/boot_id"))
            .unwrap()
            .trim()
            .trim_start_matches("boot-")
            .parse()
            .unwrap();
        self.write_root(
            "proc/sys/kernel/random/boot_id",
            &format!("boot-{}\n", n + 1),
        );
        let _ = std::fs::remove_dir_all(self.root.join("run"));
    }
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| (*x).to_owned()).collect()
}

// ---------------------------------------------------------------- status parsing

#[test]
fn bootc_status_of_the_real_shape() {
    let st = bootc::parse_status(include_str!(
        "fixtures/bootc-status-staged-booted-rollback.json"
    ))
    .unwrap();
    let image = |e: &Option<BootcEntry>| {
        e.as_ref()
            .map(|e| (e.image.clone(), e.reference.clone(), e.download_only))
    };
    let entry = |i: &str| Some((i.to_owned(), None, false));
    assert_eq!(
        image(&st.booted),
        entry(
            "quay.io/example/someimage@sha256:736b359467c9437c1ac915acaae952aad854e07eb4a16a94999a48af08c83c34"
        )
    );
    assert_eq!(
        image(&st.staged),
        entry(
            "quay.io/example/someimage@sha256:16dc2b6256b4ff0d2ec18d2dbfb06d117904010c8cf9732cdb022818cf7a7566"
        )
    );
    assert_eq!(
        image(&st.rollback),
        entry(
            "quay.io/example/someimage@sha256:5db6d8b5f34d3cbdaa1e82ed0152a5ac980076d19317d4269db149cbde057bb2"
        )
    );
    let hs = st.host_status();
    assert!(hs.pulled.is_empty());
    assert_eq!(hs.staged, st.staged.map(|e| e.image));
}

/// A status fixture and what HostStatus reports of it: (JSON, booted, staged, rollback,
/// pulled).
type StatusRow<'a> = (
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    &'a [&'a str],
);

/// Each fixture parsed by `parse` gives that HostStatus; none keeps an index reference
/// (their references name tags or manifests).
fn assert_status_rows(
    rows: &[StatusRow<'_>],
    parse: impl Fn(&str) -> Result<machineos_host::HostStatus, HostError>,
) {
    for (i, (json, booted, staged, rollback, pulled)) in rows.iter().enumerate() {
        let hs = parse(json).unwrap_or_else(|e| panic!("fixture {i}: {e}"));
        assert_eq!(hs.booted.as_deref(), *booted, "fixture {i}");
        assert_eq!(hs.staged.as_deref(), *staged, "fixture {i}");
        assert_eq!(hs.rollback.as_deref(), *rollback, "fixture {i}");
        assert_eq!(hs.pulled, *pulled, "fixture {i}");
        assert!(hs.references.is_empty(), "fixture {i}: {:?}", hs.references);
    }
}

#[test]
fn bootc_status_of_bootcs_own_fixtures() {
    const SOME_BOOTED: &str = "quay.io/example/someimage@sha256:736b359467c9437c1ac915acaae952aad854e07eb4a16a94999a48af08c83c34";
    const SOME_STAGED: &str = "quay.io/example/someimage@sha256:16dc2b6256b4ff0d2ec18d2dbfb06d117904010c8cf9732cdb022818cf7a7566";
    const CENTOS: &str = "quay.io/centos-bootc/centos-bootc@sha256:47e5ed613a970b6574bfa954ab25bb6e85656552899aa518b5961d9645102b38";
    let rows: [StatusRow; 5] = [
        // A download-only staged deployment is pulled, not the next boot.
        (
            include_str!("fixtures/bootc/spec-staged-download-only.json"),
            Some(SOME_BOOTED),
            None,
            None,
            &[SOME_STAGED],
        ),
        // Booted from a plain ostree commit (no image): nothing booted that we can name.
        (
            include_str!("fixtures/bootc/spec-ostree-to-bootc.json"),
            None,
            Some(CENTOS),
            None,
            &[],
        ),
        (
            include_str!("fixtures/bootc/spec-only-booted.json"),
            Some(CENTOS),
            None,
            None,
            &[],
        ),
        (
            include_str!("fixtures/bootc/spec-booted-pinned.json"),
            Some(CENTOS),
            None,
            None,
            &[],
        ),
        // Deployed from an OCI directory: named by its path, never equal to a registry image.
        (
            include_str!("fixtures/bootc/spec-via-local-oci.json"),
            Some(
                "/var/mnt/osupdate@sha256:47e5ed613a970b6574bfa954ab25bb6e85656552899aa518b5961d9645102b38",
            ),
            None,
            None,
            &[],
        ),
    ];
    assert_status_rows(&rows, |json| {
        bootc::parse_status(json).map(|s| s.host_status())
    });
}

#[test]
fn bootc_download_only_staged_is_pulled_not_next_boot() {
    let json = include_str!("fixtures/bootc-status-staged-booted-rollback.json").replacen(
        "\"downloadOnly\": false",
        "\"downloadOnly\": true",
        1,
    );
    let hs = bootc::parse_status(&json).unwrap().host_status();
    assert_eq!(hs.staged, None);
    assert_eq!(
        hs.pulled,
        [
            "quay.io/example/someimage@sha256:16dc2b6256b4ff0d2ec18d2dbfb06d117904010c8cf9732cdb022818cf7a7566"
        ]
    );
}

#[test]
fn bootc_status_errors_name_the_json_path() {
    let json = include_str!("fixtures/bootc-status-staged-booted-rollback.json").replacen(
        "\"imageDigest\": \"sha256:736b",
        "\"imageDigezt\": \"sha256:736b",
        1,
    );
    match bootc::parse_status(&json) {
        Err(HostError::Output { tool, path, .. }) => {
            assert_eq!(tool, "bootc");
            assert_eq!(path, "$.status.booted.image.imageDigest");
        }
        other => panic!("{other:?}"),
    }
    match bootc::parse_status("{\"kind\":\"BootcHost\",\"status\":{\"booted\":7}}") {
        Err(HostError::Output { path, .. }) => assert_eq!(path, "$.status.booted"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        bootc::parse_status("not json"),
        Err(HostError::Output { .. })
    ));
    // A host that is not bootc-booted: nothing booted.
    let st = bootc::parse_status(
        r#"{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","metadata":{"name":"host"},"spec":{"image":null},"status":{"staged":null,"booted":null,"rollback":null,"rollbackQueued":false,"type":null}}"#,
    )
    .unwrap();
    assert_eq!(st.booted, None);
}

#[test]
fn rpm_ostree_status_of_the_real_shape() {
    let hs = rpm_ostree::parse_status(include_str!(
        "fixtures/rpm-ostree-status-staged-booted-rollback.json"
    ))
    .unwrap();
    assert_eq!(
        hs.booted.as_deref(),
        Some(
            "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        )
    );
    assert_eq!(
        hs.staged.as_deref(),
        Some(
            "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/os-image@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
        )
    );
    // The rollback is a plain ostree commit: no image.
    assert_eq!(hs.rollback, None);
}

#[test]
fn rpm_ostree_status_of_its_own_fixtures() {
    let rows: [StatusRow; 4] = [
        // Signed transport, a tag: the repository at the digest rpm-ostree reports.
        (
            include_str!("fixtures/rpm-ostree/zincati-container-booted.json"),
            Some(
                "quay.io/fedora/fedora-coreos@sha256:ca99893c80a7b84dd84d4143bd27538207c2f38ab6647a58d9c8caa251f9a087",
            ),
            None,
            None,
            &[],
        ),
        // `ostree-remote-image:<remote>:registry:…`: remote and transport dropped.
        (
            include_str!("fixtures/rpm-ostree/zincati-oci-remote-image.json"),
            Some(
                "quay.io/fedora/fedora-coreos@sha256:c4a15145a232d882ccf2ed32d22c06c01a7cf62317eb966a98340ae4bd56dfa6",
            ),
            None,
            None,
            &[],
        ),
        // What the MCO and machineos rebase to.
        (
            include_str!("fixtures/rpm-ostree/rpmostree-client-oci-deployment.json"),
            Some(
                "quay.io/fedora/fedora-coreos@sha256:d12dd2fcb57ecfde0941be604f4dcd43ce0409b86e5ee4e362184c802b80fb84",
            ),
            None,
            None,
            &[],
        ),
        // Plain ostree commits, one staged (finalization-locked) over the booted one: no
        // image anywhere — a node not yet on any container image.
        (
            include_str!("fixtures/rpm-ostree/zincati-staged.json"),
            None,
            None,
            None,
            &[],
        ),
    ];
    assert_status_rows(&rows, rpm_ostree::parse_status);
}

#[test]
fn rpm_ostree_status_details() {
    // Digest member missing: the reference's digest; finalization-locked: pulled.
    let json = r#"{"deployments":[
        {"booted":false,"staged":true,"finalization-locked":true,"container-image-reference":"ostree-unverified-registry:r/os@sha256:02"},
        {"booted":true,"staged":false,"container-image-reference":"ostree-unverified-registry:r/os:tag","container-image-reference-digest":"sha256:01"},
        {"booted":false,"staged":false,"container-image-reference":"ostree-remote-registry:fedora:r/os@sha256:00","container-image-reference-digest":"sha256:00"}]}"#;
    let hs = rpm_ostree::parse_status(json).unwrap();
    assert_eq!(hs.booted.as_deref(), Some("r/os@sha256:01"));
    assert_eq!(hs.staged, None);
    assert_eq!(hs.pulled, ["r/os@sha256:02"]);
    assert_eq!(hs.rollback.as_deref(), Some("r/os@sha256:00"));
    match rpm_ostree::parse_status(r#"{"deployments":[{"booted":"yes"}]}"#) {
        Err(HostError::Output { tool, path, .. }) => {
            assert_eq!(tool, "rpm-ostree");
            assert_eq!(path, "$.deployments[0].booted");
        }
        other => panic!("{other:?}"),
    }
    match rpm_ostree::parse_status(
        r#"{"deployments":[{"booted":true,"container-image-reference":"ostree-unverified-registry:r/os:tag"}]}"#,
    ) {
        Err(HostError::Output { path, .. }) => {
            assert_eq!(path, "$.deployments[0].container-image-reference-digest")
        }
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------- bootc with stand-ins

#[test]
fn bootc_status_from_the_standin() {
    let st = Stand::new(Some(A), &["bootc"]);
    st.set("rollback", C);
    let hs = st.bootc().status().unwrap();
    assert_eq!(hs.booted.as_deref(), Some(A));
    assert_eq!(hs.rollback.as_deref(), Some(C));
    assert_eq!(hs.staged, None);
    assert_eq!(hs.boot_id, "boot-0");
    assert_eq!(
        hs.kargs,
        s(&[
            "rw",
            "root=UUID=0a1b",
            "ostree=/ostree/boot.1/rhcos/0/0",
            "ignition.platform.id=metal"
        ])
    );
}

#[test]
fn bootc_pull_deploy_reboot() {
    let st = Stand::new(Some(A), &["bootc", "systemctl"]);
    let h = st.bootc();
    assert_eq!(h.kind(), HostKind::Bootc);

    h.pull(B, None).unwrap();
    assert_eq!(
        st.calls(),
        [
            "bootc status --format json".to_owned(),
            format!(
                "bootc internals ostree-container image pull --quiet /sysroot/ostree/repo \
                 ostree-unverified-registry:{B}"
            ),
        ]
    );
    assert_eq!(st.get("repo_images").as_deref(), Some(B));
    assert_eq!(
        st.get("pull_ioclass").as_deref(),
        Some("idle"),
        "a pull ahead of the node's turn yields the disk"
    );
    assert_eq!(st.get("staged"), None, "no deployment was written");
    let hs = h.status().unwrap();
    assert_eq!(hs.booted.as_deref(), Some(A));
    assert_eq!(hs.staged, None, "a pull does not change the next boot");
    assert_eq!(hs.pulled, [B]);
    // Pulling again does nothing.
    st.clear_calls();
    h.pull(B, None).unwrap();
    assert_eq!(st.calls(), ["bootc status --format json"]);

    st.clear_calls();
    h.deploy(B, None).unwrap();
    assert_eq!(
        st.calls(),
        [
            "bootc status --format json".to_owned(),
            format!("bootc switch --quiet {B}"),
            "bootc status --format json".to_owned(),
        ]
    );
    let hs = h.status().unwrap();
    assert_eq!(hs.staged.as_deref(), Some(B));
    assert!(hs.pulled.is_empty());
    // Deploying again does nothing.
    st.clear_calls();
    h.deploy(B, None).unwrap();
    assert_eq!(st.calls(), ["bootc status --format json"]);

    st.clear_calls();
    h.reboot().unwrap();
    assert_eq!(st.calls(), ["systemctl reboot"]);
    assert!(st.state.join("reboot_requested").exists());
    st.boot();
    let hs = h.status().unwrap();
    assert_eq!(hs.booted.as_deref(), Some(B));
    assert_eq!(
        hs.rollback.as_deref(),
        Some(A),
        "the old booted image is the rollback"
    );
    assert_eq!(hs.staged, None);
    assert_eq!(hs.boot_id, "boot-1");
}

#[test]
fn an_index_deploys_and_is_recognised_by_the_manifest_the_host_reports() {
    // The host reports the platform manifest it pulled for an index; deploying the index
    // is verified against the reference it was asked by, and is idempotent.
    const INDEX: &str =
        "quay.io/org/os@sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const MANIFEST: &str =
        "quay.io/org/os@sha256:2222222222222222222222222222222222222222222222222222222222222222";
    for tool in ["bootc", "rpm-ostree"] {
        let st = Stand::new(Some(A), &[tool]);
        st.set(
            "index_manifests",
            &format!("{INDEX} {}", MANIFEST.split_once('@').unwrap().1),
        );
        let h: Box<dyn Host> = if tool == "bootc" {
            Box::new(st.bootc())
        } else {
            Box::new(st.rpm_ostree())
        };
        h.pull(INDEX, None).unwrap();
        h.deploy(INDEX, None)
            .unwrap_or_else(|e| panic!("{tool}: deploying an index: {e}"));
        let s = h.status().unwrap();
        assert_eq!(s.staged.as_deref(), Some(MANIFEST), "{tool}");
        assert!(s.is(s.staged.as_deref(), INDEX), "{tool}: {s:?}");
        st.clear_calls();
        h.deploy(INDEX, None).unwrap();
        assert!(
            !st.calls()
                .iter()
                .any(|c| c.contains("switch") || c.contains("rebase")),
            "{tool}: deployed twice: {:?}",
            st.calls()
        );
        st.boot();
        let s = h.status().unwrap();
        assert_eq!(s.booted.as_deref(), Some(MANIFEST), "{tool}");
        assert!(s.is(s.booted.as_deref(), INDEX), "{tool}");
        st.clear_calls();
        h.pull(INDEX, None).unwrap();
        assert_eq!(
            st.calls().len(),
            1,
            "{tool}: only the status: {:?}",
            st.calls()
        );
    }
}

#[test]
fn bootc_deploy_without_pull_switches_and_keeps_the_rollback() {
    let st = Stand::new(Some(A), &["bootc"]);
    st.set("rollback", C);
    let h = st.bootc();
    h.deploy(B, None).unwrap();
    assert!(st.calls().contains(&format!("bootc switch --quiet {B}")));
    let hs = h.status().unwrap();
    assert_eq!(hs.booted.as_deref(), Some(A));
    assert_eq!(hs.staged.as_deref(), Some(B));
    assert_eq!(
        hs.rollback.as_deref(),
        Some(C),
        "deploy leaves the rollback alone"
    );
    st.boot();
    let hs = h.status().unwrap();
    assert_eq!(hs.booted.as_deref(), Some(B));
    assert_eq!(hs.rollback.as_deref(), Some(A));
}

#[test]
fn bootc_pull_leaves_a_staged_deployment_alone() {
    // Another image is staged for the next boot: pulling writes no deployment, so it stays.
    let st = Stand::new(Some(A), &["bootc"]);
    st.set("staged", C);
    st.bootc().pull(B, None).unwrap();
    assert_eq!(st.get("staged").as_deref(), Some(C));
    let hs = st.bootc().status().unwrap();
    assert_eq!(hs.staged.as_deref(), Some(C));
    assert_eq!(hs.pulled, [B]);
}

#[test]
fn a_failed_bootc_pull_changes_nothing_and_the_next_pull_pulls() {
    let st = Stand::new(Some(A), &["bootc"]);
    st.set("fail_pull", "error: Pulling: connection reset by peer");
    let e = st.bootc().pull(B, None).unwrap_err();
    assert!(
        matches!(
            e,
            HostError::Tool {
                transient: true,
                ..
            }
        ),
        "{e:?}"
    );
    let hs = st.bootc().status().unwrap();
    assert_eq!((hs.staged, hs.pulled), (None, vec![]));
    std::fs::remove_file(st.state.join("fail_pull")).unwrap();
    st.bootc().pull(B, None).unwrap();
    let hs = st.bootc().status().unwrap();
    assert_eq!((hs.staged, hs.pulled), (None, vec![B.to_owned()]));
    // A reboot empties /run: the record goes, the next boot is still A.
    st.boot();
    let hs = st.bootc().status().unwrap();
    assert_eq!(hs.booted.as_deref(), Some(A));
    assert!(hs.pulled.is_empty());
}

#[test]
fn bootc_failed_switch_names_tool_args_stderr_and_transience() {
    let st = Stand::new(Some(A), &["bootc"]);
    st.set(
        "fail_switch",
        "ERROR Switching: Pulling: Creating importer: failed to invoke method OpenImage: \
         pinging container registry quay.io: Get \"https://quay.io/v2/\": dial tcp: lookup \
         quay.io on 10.0.0.10:53: Temporary failure in name resolution",
    );
    match st.bootc().deploy(B, None) {
        Err(e @ HostError::Tool { .. }) => {
            let HostError::Tool {
                tool,
                args,
                status,
                stderr,
                transient,
            } = &e
            else {
                unreachable!()
            };
            assert!(tool.ends_with("/bootc"), "{tool}");
            assert_eq!(args, &format!("switch --quiet {B}"));
            assert!(status.contains('1'), "{status}");
            assert!(stderr.contains("Temporary failure in name resolution"));
            assert!(transient);
            assert_eq!(
                machineos_diagnostics::Classify::retry(&e),
                machineos_diagnostics::Retry::Transient
            );
            assert!(e.to_string().contains("switch --quiet"));
        }
        other => panic!("{other:?}"),
    }
    st.set(
        "fail_switch",
        "ERROR Switching: reading manifest sha256:bbbb in quay.io/org/os: manifest unknown",
    );
    assert!(matches!(
        st.bootc().deploy(B, None),
        Err(HostError::Tool {
            transient: false,
            ..
        })
    ));
    assert_eq!(st.get("staged"), None);
}

#[test]
fn bootc_boot_into_the_wrong_image_shows_the_other_digest() {
    let st = Stand::new(Some(A), &["bootc"]);
    let h = st.bootc();
    h.deploy(B, None).unwrap();
    st.set("boot_into", C);
    st.boot();
    let hs = h.status().unwrap();
    assert_eq!(hs.booted.as_deref(), Some(C));
    assert_ne!(hs.booted.as_deref(), Some(B));
    assert_eq!(hs.boot_id, "boot-1");
}

#[test]
fn bootc_kargs_only_when_nothing_changes() {
    let st = Stand::new(Some(A), &["bootc"]);
    let h = st.bootc();
    h.kargs(&[], &[]).unwrap();
    h.kargs(
        &s(&["ignition.platform.id=metal"]),
        &s(&["ignition.platform.id=metal"]),
    )
    .unwrap();
    match h.kargs(&s(&["nosmt"]), &[]) {
        Err(e @ HostError::Unsupported { .. }) => {
            assert!(e.to_string().contains("kargs.d"), "{e}");
            assert!(e.to_string().contains("nosmt"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert!(st.calls().is_empty());
}

// ---------------------------------------------------------------- rpm-ostree with stand-ins

#[test]
fn rpm_ostree_pull_deploy_kargs_reboot() {
    let st = Stand::new(Some(A), &["rpm-ostree", "systemctl"]);
    let h = st.rpm_ostree();
    assert_eq!(h.kind(), HostKind::RpmOstree);

    h.pull(B, None).unwrap();
    assert_eq!(
        st.calls(),
        [
            "rpm-ostree status --json".to_owned(),
            // The pull yields the disk: the daemon's I/O weight lowered around it.
            "systemctl set-property --runtime rpm-ostreed.service IOWeight=1".to_owned(),
            format!(
                "rpm-ostree rebase --experimental --download-only ostree-unverified-registry:{B}"
            ),
            "systemctl set-property --runtime rpm-ostreed.service IOWeight=".to_owned(),
        ]
    );
    let hs = h.status().unwrap();
    assert_eq!(
        (hs.booted.as_deref(), hs.staged.as_deref()),
        (Some(A), None)
    );
    assert_eq!(hs.pulled, [B]);
    st.clear_calls();
    h.pull(B, None).unwrap();
    assert_eq!(st.calls(), ["rpm-ostree status --json"]);

    st.clear_calls();
    h.deploy(B, None).unwrap();
    assert_eq!(
        st.calls(),
        [
            "rpm-ostree status --json".to_owned(),
            format!("rpm-ostree rebase --experimental ostree-unverified-registry:{B}"),
            "rpm-ostree status --json".to_owned(),
        ]
    );
    assert_eq!(h.status().unwrap().staged.as_deref(), Some(B));

    st.clear_calls();
    h.kargs(
        &s(&["nosmt", "a=\"b c\""]),
        &s(&["ignition.platform.id=metal"]),
    )
    .unwrap();
    assert_eq!(
        st.calls(),
        [
            "rpm-ostree kargs --delete-if-present=ignition.platform.id=metal --append=nosmt --append=a=\"b c\""
        ]
    );
    h.kargs(&[], &[]).unwrap();

    st.clear_calls();
    h.reboot().unwrap();
    assert_eq!(st.calls(), ["systemctl reboot"]);
    st.boot();
    let hs = h.status().unwrap();
    assert_eq!(hs.booted.as_deref(), Some(B));
    assert_eq!(hs.rollback.as_deref(), Some(A));
    assert!(hs.pulled.is_empty(), "the pull record is gone with /run");
    assert!(hs.kargs.contains(&"nosmt".to_owned()));
    assert!(!hs.kargs.contains(&"ignition.platform.id=metal".to_owned()));
    assert_eq!(hs.boot_id, "boot-1");
}

/// `bootc rollback` as its source has it (a second call reverts): the agent's rollback runs
/// it once, only when the rollback entry is the image asked for, and the reboot boots it.
#[test]
fn bootc_rollback_once_and_boot_the_previous_image() {
    let st = Stand::new(Some(A), &["bootc", "systemctl"]);
    let h = st.bootc();
    let err = h.rollback(A).map(|()| "ok").unwrap_or("refused");
    assert_eq!(err, "ok", "A boots next already: nothing to do");
    assert!(h.rollback(B).is_err(), "no rollback deployment");
    h.deploy(B, None).unwrap();
    st.boot();
    st.clear_calls();
    let e = h.rollback(C).unwrap_err().to_string();
    assert!(e.contains(A), "{e}");
    st.clear_calls();
    h.rollback(A).unwrap();
    assert_eq!(
        st.calls(),
        [
            "bootc status --format json",
            "bootc rollback",
            "bootc status --format json"
        ]
    );
    let hs = h.status().unwrap();
    assert!(hs.rollback_queued && hs.boots_next(A));
    // Asked again (a restarted agent): the tool is not run, so it does not revert.
    st.clear_calls();
    h.rollback(A).unwrap();
    assert_eq!(st.calls(), ["bootc status --format json"]);
    h.reboot().unwrap();
    st.boot();
    let hs = h.status().unwrap();
    assert_eq!(hs.booted.as_deref(), Some(A));
    assert_eq!(hs.rollback.as_deref(), Some(B));
    assert!(!hs.rollback_queued);
}

/// `rpm-ostree rollback` as its daemon has it: the rollback deployment moves to the top
/// (pending, the next boot), a second call would put the booted one back.
#[test]
fn rpm_ostree_rollback_once_and_boot_the_previous_image() {
    let st = Stand::new(Some(A), &["rpm-ostree", "systemctl"]);
    let h = st.rpm_ostree();
    assert!(h.rollback(B).is_err(), "no rollback deployment");
    h.deploy(B, None).unwrap();
    h.reboot().unwrap();
    st.boot();
    st.clear_calls();
    h.rollback(A).unwrap();
    assert_eq!(
        st.calls(),
        [
            "rpm-ostree status --json",
            "rpm-ostree rollback",
            "rpm-ostree status --json"
        ]
    );
    let hs = h.status().unwrap();
    assert_eq!(hs.staged.as_deref(), Some(A), "pending: the next boot");
    assert!(hs.boots_next(A));
    st.clear_calls();
    h.rollback(A).unwrap();
    assert_eq!(st.calls(), ["rpm-ostree status --json"], "not toggled back");
    // The stand-in refuses as rpm-ostree does with a staged deployment.
    let st2 = Stand::new(Some(A), &["rpm-ostree"]);
    st2.set("rollback", C);
    st2.set("staged", B);
    let e = st2.rpm_ostree().rollback(C).unwrap_err().to_string();
    assert!(e.contains("Staged deployment"), "{e}");
    h.reboot().unwrap();
    st.boot();
    let hs = h.status().unwrap();
    assert_eq!(hs.booted.as_deref(), Some(A));
    assert_eq!(hs.rollback.as_deref(), Some(B));
}

#[test]
fn rpm_ostree_failed_rebase_and_wrong_boot() {
    let st = Stand::new(Some(A), &["rpm-ostree"]);
    let h = st.rpm_ostree();
    st.set(
        "fail_switch",
        "error: Creating importer: failed to invoke method OpenImage: reading manifest: \
         received unexpected HTTP status: 503 Service Unavailable",
    );
    match h.pull(B, None) {
        Err(HostError::Tool {
            tool,
            args,
            stderr,
            transient,
            ..
        }) => {
            assert!(tool.ends_with("/rpm-ostree"));
            assert!(args.starts_with("rebase --experimental --download-only"));
            assert!(stderr.contains("503"));
            assert!(transient);
        }
        other => panic!("{other:?}"),
    }
    std::fs::remove_file(st.state.join("fail_switch")).unwrap();
    h.deploy(B, None).unwrap();
    st.set("boot_into", C);
    st.boot();
    assert_eq!(h.status().unwrap().booted.as_deref(), Some(C));
}

// ---------------------------------------------------------------- systemd-run mode

fn unit_runner(st: &Stand) -> Runner {
    let mut r = st.runner();
    r.long_mode = Mode::SystemdRun {
        unit: "machineos-host-deploy".into(),
    };
    r
}

#[test]
fn systemd_run_mode_command_line() {
    let st = Stand::new(Some(A), &["bootc", "systemd-run", "systemctl"]);
    let r = unit_runner(&st);
    let h = machineos_host::Bootc::new(r.clone(), &st.root);
    h.deploy(B, None).unwrap();
    let log = r.state_dir.join("machineos-host-deploy.stderr");
    assert_eq!(
        st.calls(),
        [
            "bootc status --format json".to_owned(),
            "systemctl is-active machineos-host-deploy".to_owned(),
            format!(
                "systemd-run --unit=machineos-host-deploy --wait --collect --quiet \
                 --property=StandardError=truncate:{} -- BIN/bootc switch --quiet {B}",
                log.display()
            ),
            format!("bootc switch --quiet {B}"),
            "bootc status --format json".to_owned(),
        ]
    );
    assert_eq!(st.get("staged").as_deref(), Some(B));
    assert!(st.get("units/machineos-host-deploy").is_none());
}

#[test]
fn systemd_run_mode_failure_reads_the_units_stderr() {
    let st = Stand::new(Some(A), &["rpm-ostree", "systemd-run", "systemctl"]);
    st.set("fail_switch", "error: i/o timeout");
    let h = machineos_host::RpmOstree::new(unit_runner(&st), &st.root);
    match h.deploy(B, None) {
        Err(HostError::Tool {
            tool,
            args,
            stderr,
            transient,
            ..
        }) => {
            assert!(tool.ends_with("/rpm-ostree"), "{tool}");
            assert!(args.contains("rebase --experimental ostree-unverified-registry:"));
            assert!(
                args.contains("systemd-run unit machineos-host-deploy"),
                "{args}"
            );
            assert_eq!(stderr, "error: i/o timeout");
            assert!(transient);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn systemd_run_mode_waits_for_an_active_unit_instead_of_starting_another() {
    let st = Stand::new(Some(A), &["bootc", "systemd-run", "systemctl"]);
    // A switch to B started before the agent restarted; it finishes after 3 polls.
    st.set("units/machineos-host-deploy", "3");
    st.set("units/machineos-host-deploy.staged", B);
    let h = machineos_host::Bootc::new(unit_runner(&st), &st.root);
    h.deploy(B, None).unwrap();
    let calls = st.calls();
    assert!(
        !calls.iter().any(|c| c.starts_with("systemd-run")),
        "{calls:?}"
    );
    assert!(
        !calls.iter().any(|c| c.starts_with("bootc switch")),
        "{calls:?}"
    );
    assert_eq!(
        calls
            .iter()
            .filter(|c| *c == "systemctl is-active machineos-host-deploy")
            .count(),
        4,
        "{calls:?}"
    );
    assert_eq!(st.get("staged").as_deref(), Some(B));

    // The running unit switched elsewhere: after waiting, ours runs.
    let st = Stand::new(Some(A), &["bootc", "systemd-run", "systemctl"]);
    st.set("units/machineos-host-deploy", "2");
    st.set("units/machineos-host-deploy.staged", C);
    let h = machineos_host::Bootc::new(unit_runner(&st), &st.root);
    h.deploy(B, None).unwrap();
    assert_eq!(
        st.calls()
            .iter()
            .filter(|c| c.starts_with("systemd-run"))
            .count(),
        1
    );
    assert_eq!(st.get("staged").as_deref(), Some(B));
}

// ---------------------------------------------------------------- detection

#[test]
fn detection() {
    // rpm-ostree present: rpm-ostree, as the MCO's daemon, even where bootc booted the
    // image (a layered CoreOS node): its kernel arguments change only through rpm-ostree.
    let st = Stand::new(Some(A), &["bootc", "rpm-ostree"]);
    let h = detect(&st.runner(), &st.root).unwrap();
    assert_eq!(h.kind(), HostKind::RpmOstree);
    h.kargs(&["nosmt".to_owned()], &[])
        .expect("kargs on a layered node");
    // bootc present but nothing booted through it: rpm-ostree.
    let st = Stand::new(None, &["bootc", "rpm-ostree"]);
    assert_eq!(
        detect(&st.runner(), &st.root).unwrap().kind(),
        HostKind::RpmOstree
    );
    // A bootc-only host: bootc.
    let st = Stand::new(Some(A), &["bootc"]);
    assert_eq!(
        detect(&st.runner(), &st.root).unwrap().kind(),
        HostKind::Bootc
    );
    // No bootc: rpm-ostree.
    let st = Stand::new(Some(A), &["rpm-ostree"]);
    let h = detect(&st.runner(), &st.root).unwrap();
    assert_eq!(h.kind(), HostKind::RpmOstree);
    assert_eq!(h.status().unwrap().booted.as_deref(), Some(A));
    // Neither.
    let st = Stand::new(Some(A), &[]);
    assert!(matches!(
        detect(&st.runner(), &st.root),
        Err(HostError::NoTool)
    ));
}

// ---------------------------------------------------------------- files

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn pull_secrets_where_each_tool_reads_them() {
    let st = Stand::new(Some(A), &["bootc", "rpm-ostree"]);
    let json = |p: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    };
    // The node's own credentials for its registries.
    st.write_root(
        "etc/ostree/auth.json",
        r#"{"auths":{"quay.io":{"auth":"bm9kZQ=="}},"credHelpers":{"x":"y"}}"#,
    );
    let p = st
        .bootc()
        .write_pull_secret(br#"{"auths":{"registry.local":{"auth":"cG9vbA=="}}}"#)
        .unwrap();
    assert_eq!(p, st.root.join("etc/ostree/auth.json"));
    assert_eq!(
        json(&p),
        serde_json::json!({"auths": {
            "quay.io": {"auth": "bm9kZQ=="},
            "registry.local": {"auth": "cG9vbA=="}
        }, "credHelpers": {"x": "y"}}),
        "merged: the node's registries stay"
    );
    assert_eq!(mode(&p), 0o600);
    // The same registry again: the Secret's entry replaces the old one.
    st.bootc()
        .write_pull_secret(br#"{"auths":{"registry.local":{"auth":"bmV3"}}}"#)
        .unwrap();
    assert_eq!(json(&p)["auths"]["registry.local"]["auth"], "bmV3");
    assert_eq!(json(&p)["auths"]["quay.io"]["auth"], "bm9kZQ==");
    // rpm-ostree's file, absent before: the Secret's registries; no temp file left.
    let p = st
        .rpm_ostree()
        .write_pull_secret(br#"{"auths":{"a":{}}}"#)
        .unwrap();
    assert_eq!(p, st.root.join("run/ostree/auth.json"));
    assert_eq!(mode(&p), 0o600);
    assert_eq!(json(&p), serde_json::json!({"auths": {"a": {}}}));
    // No temp file left: the file and the record of what the merge replaced.
    let mut names: Vec<String> = std::fs::read_dir(p.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["auth.json", "auth.json.machineos-replaced"]);
    // Not a dockerconfigjson: refused, the file untouched.
    assert!(st.rpm_ostree().write_pull_secret(b"{}").is_err());
    assert_eq!(json(&p), serde_json::json!({"auths": {"a": {}}}));
    // An auth file elsewhere is merged where the tool reads it.
    let other = st.root.join("tmp/auth.json");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::write(&other, br#"{"auths":{"b":{}}}"#).unwrap();
    st.bootc().pull(B, Some(&other)).unwrap();
    let merged = json(&st.root.join("etc/ostree/auth.json"));
    assert_eq!(merged["auths"]["b"], serde_json::json!({}));
    assert_eq!(merged["auths"]["quay.io"]["auth"], "bm9kZQ==");
    assert!(
        merged["auths"].get("registry.local").is_none(),
        "the previous Secret's registry goes when another is written: {merged}"
    );
    // A Secret for the node's own registry replaces its entry while it is the one
    // written; the next write puts the node's own back.
    let auth = st.root.join("etc/ostree/auth.json");
    st.bootc()
        .write_pull_secret(br#"{"auths":{"quay.io":{"auth":"aW1hZ2U="}}}"#)
        .unwrap();
    assert_eq!(json(&auth)["auths"]["quay.io"]["auth"], "aW1hZ2U=");
    st.bootc()
        .write_pull_secret(br#"{"auths":{"c":{}}}"#)
        .unwrap();
    let after = json(&auth);
    assert_eq!(after["auths"]["quay.io"]["auth"], "bm9kZQ==", "{after}");
    assert!(after["auths"].get("b").is_none(), "{after}");
    assert_eq!(after["credHelpers"], serde_json::json!({"x": "y"}));
    // The update done, the release puts the file back as the node had it.
    st.bootc()
        .write_pull_secret(br#"{"auths":{"quay.io":{"auth":"aW1hZ2U="}}}"#)
        .unwrap();
    st.bootc().release_pull_secret().unwrap();
    assert_eq!(
        json(&auth),
        serde_json::json!({"auths": {"quay.io": {"auth": "bm9kZQ=="}}, "credHelpers": {"x": "y"}})
    );
    assert!(!files::replaced_record(&auth).exists());
    st.bootc().release_pull_secret().unwrap();
}

#[test]
fn ssh_keys_fragment() {
    let st = Stand::new(Some(A), &["bootc"]);
    st.write_root(
        "etc/passwd",
        "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\n",
    );
    let h = st.bootc();
    h.write_ssh_keys("core", &s(&["ssh-ed25519 AAAA a@b", "ssh-rsa BBBB c@d"]))
        .unwrap();
    let p = st.root.join("home/core/.ssh/authorized_keys.d/ignition");
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        "ssh-ed25519 AAAA a@b\nssh-rsa BBBB c@d\n"
    );
    assert_eq!(mode(&p), 0o600);
    assert_eq!(mode(&st.root.join("home/core/.ssh")), 0o700);
    assert_eq!(
        mode(&st.root.join("home/core/.ssh/authorized_keys.d")),
        0o700
    );
    if running_as_root() {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid()), (1000, 1000));
    }
    assert_eq!(files::lookup_user(&st.root, "nobody"), None);
    // An unknown user: written, ownership left alone.
    h.write_ssh_keys("someone", &[]).unwrap();
    assert_eq!(
        std::fs::read_to_string(st.root.join("home/someone/.ssh/authorized_keys.d/ignition"))
            .unwrap(),
        ""
    );
    assert!(matches!(
        h.write_ssh_keys("../etc", &[]),
        Err(HostError::Io { .. })
    ));
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // The owner of a file this process creates is its effective uid.
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("f");
    std::fs::write(&f, b"").unwrap();
    std::fs::metadata(&f).unwrap().uid() == 0
}

// ---------------------------------------------------------------- pull backoff

#[test]
fn pull_backoff_table() {
    let secs = |v: &[u64]| {
        v.iter()
            .map(|s| Duration::from_secs(*s))
            .collect::<Vec<_>>()
    };
    for (failures, ok, sleeps) in [
        (0, true, secs(&[])),
        (1, true, secs(&[10])),
        (3, true, secs(&[10, 20, 40])),
        (6, true, secs(&[10, 20, 40, 60, 60, 60])),
        (7, false, secs(&[10, 20, 40, 60, 60, 60])),
    ] {
        let h = FakeHost::booted(A);
        h.lock().fail_pulls = failures;
        let mut slept = Vec::new();
        let r = pull_with_retry(&h, B, None, &mut |d| slept.push(d));
        assert_eq!(r.is_ok(), ok, "{failures} failures: {r:?}");
        assert_eq!(slept, sleeps, "{failures} failures");
        let pulls = h.lock().calls.len() as u32;
        assert_eq!(pulls, (failures + 1).min(7));
    }
    assert_eq!(
        machineos_host::PULL_BACKOFF.delays(),
        secs(&[10, 20, 40, 60, 60, 60])
    );
}

#[test]
fn pull_backoff_stops_on_a_permanent_error() {
    let st = Stand::new(Some(A), &["rpm-ostree"]);
    st.set("fail_switch", "error: reading manifest: manifest unknown");
    let mut slept = Vec::new();
    let r = pull_with_retry(&st.rpm_ostree(), B, None, &mut |d| slept.push(d));
    assert!(matches!(
        r,
        Err(HostError::Tool {
            transient: false,
            ..
        })
    ));
    assert!(slept.is_empty());
    // A transient one through the real backend: 7 attempts.
    st.set(
        "fail_switch",
        "error: dial tcp 10.0.0.1:443: connect: connection refused",
    );
    let r = pull_with_retry(&st.rpm_ostree(), B, None, &mut |d| slept.push(d));
    assert!(matches!(
        r,
        Err(HostError::Tool {
            transient: true,
            ..
        })
    ));
    assert_eq!(slept.len(), 6);
    assert_eq!(
        st.calls()
            .iter()
            .filter(|c| c.starts_with("rpm-ostree rebase"))
            .count(),
        1 + 7
    );
}

// ---------------------------------------------------------------- a command prefix

/// From a container the tools run under a prefix (`nsenter -t 1 … --` in the DaemonSet);
/// `env` stands in for it here: the tools run through it, and errors still name the tool.
#[test]
fn tools_run_under_the_prefix_and_errors_name_the_tool() {
    let st = Stand::new(Some(A), &["bootc"]);
    let mut r = st.runner();
    r.prefix = s(&["env", "MACHINEOS_PREFIXED=1"]);
    let h = machineos_host::Bootc::new(r, &st.root);
    assert_eq!(h.status().unwrap().booted.as_deref(), Some(A));
    st.set("fail_switch", "error: manifest unknown");
    match h.deploy(B, None) {
        Err(HostError::Tool { tool, args, .. }) => {
            assert!(tool.ends_with("bootc"), "{tool}");
            assert!(args.contains("switch"), "{args}");
        }
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------- a hung tool

/// A host tool that never answers is killed after the runner's timeout: a transient failure
/// naming it, not a hung agent.
#[test]
fn a_hung_tool_is_killed_after_the_timeout() {
    let r = {
        let mut r = machineos_host::Runner::new(machineos_host::Tools::default());
        r.timeout = Duration::from_millis(300);
        r
    };
    match r.run(std::path::Path::new("sleep"), &s(&["30"])) {
        Err(HostError::Tool {
            tool,
            status,
            transient,
            ..
        }) => {
            assert_eq!(tool, "sleep");
            assert!(status.contains("killed after"), "{status}");
            assert!(transient);
        }
        other => panic!("{other:?}"),
    }
    // Output of a tool that answers in time is read whole.
    let out = r.run(std::path::Path::new("echo"), &s(&["hello"])).unwrap();
    assert_eq!(out.stdout, "hello\n");
}

/// Where a live apply finds the booted and staged checkouts: bootc's `ostree` members,
/// rpm-ostree's `osname`, `checksum` and `serial`.
#[test]
fn the_booted_and_staged_deployments_are_located_from_either_status() {
    let dep = |stateroot: &str, checksum: &str, serial: u32| {
        Some(machineos_host::live::Deployment {
            stateroot: stateroot.into(),
            checksum: checksum.into(),
            serial,
        })
    };
    let b = bootc::parse_status(include_str!(
        "fixtures/bootc-status-staged-booted-rollback.json"
    ))
    .unwrap()
    .host_status();
    assert_eq!(
        b.staged_deployment,
        dep(
            "default",
            "3c6dad657109522e0b2e49bf44b5420f16f0b438b5b9357e5132211cfbad135d",
            0
        )
    );
    assert_eq!(
        b.booted_deployment,
        dep(
            "default",
            "26836632adf6228d64ef07a26fd3efaf177104efd1f341a2cf7909a3e4e2c72c",
            0
        )
    );
    let r = rpm_ostree::parse_status(include_str!(
        "fixtures/rpm-ostree-status-staged-booted-rollback.json"
    ))
    .unwrap();
    assert_eq!(
        r.staged_deployment,
        dep(
            "rhcos",
            "6b9a7bd1e3b6f1b5c9f0e1d2c3b4a59687766554433221100ffeeddccbbaa998",
            1
        )
    );
    assert_eq!(
        r.booted_deployment,
        dep(
            "rhcos",
            "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
            0
        )
    );
    // A download-only (finalization-locked) deployment is not the next boot: no staged
    // checkout to apply from.
    let z =
        rpm_ostree::parse_status(include_str!("fixtures/rpm-ostree/zincati-staged.json")).unwrap();
    assert_eq!(z.staged_deployment, None);
    assert!(z.booted_deployment.is_some());
}

// ---------------------------------------------------------------- live apply, soft reboot

/// The checkout of a deployment as the stand-ins name it: bootc's checksum is the image's
/// digest hex, rpm-ostree's the sha256 of the image reference; serial 0 booted, rpm-ostree's
/// staged 1.
fn checkout(s: &Stand, stateroot: &str, checksum: &str, serial: u32) -> PathBuf {
    s.root
        .join("sysroot/ostree/deploy")
        .join(stateroot)
        .join(format!("deploy/{checksum}.{serial}"))
}

fn sha256_hex(text: &str) -> String {
    let out = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin.take().unwrap().write_all(text.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

fn write_tree(root: &Path, files: &[(&str, &str)]) {
    for (p, text) in files {
        let p = root.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

#[test]
fn both_backends_apply_the_staged_configuration_where_their_status_says_it_is() {
    for tool in ["bootc", "rpm-ostree"] {
        let s = Stand::new(Some(A), &[tool, "systemctl"]);
        s.set("staged", B);
        let (booted, staged) = if tool == "bootc" {
            (
                checkout(&s, "default", A.rsplit_once(':').unwrap().1, 0),
                checkout(&s, "default", B.rsplit_once(':').unwrap().1, 0),
            )
        } else {
            (
                checkout(&s, "rhcos", &sha256_hex(A), 0),
                checkout(&s, "rhcos", &sha256_hex(B), 1),
            )
        };
        write_tree(
            &booted,
            &[("usr/etc/chrony.conf", "server a\n"), ("usr/bin/x", "x")],
        );
        write_tree(
            &staged,
            &[("usr/etc/chrony.conf", "server b\n"), ("usr/bin/x", "x")],
        );
        write_tree(&s.root, &[("etc/chrony.conf", "server a\n")]);
        let host: Box<dyn Host> = if tool == "bootc" {
            Box::new(s.bootc())
        } else {
            Box::new(s.rpm_ostree())
        };
        let done = host.apply_live().unwrap();
        assert_eq!(done.written, ["/etc/chrony.conf"], "{tool}");
        assert_eq!(
            std::fs::read_to_string(s.root.join("etc/chrony.conf")).unwrap(),
            "server b\n",
            "{tool}"
        );
        // The record of what was applied lives in the runner's state directory (the host's /run).
        assert!(
            s.root.join("run/machineos-host/live-applied").exists(),
            "{tool}"
        );
        // The policy's actions, through systemctl.
        host.systemctl(&machineos_host::Systemctl::Restart(
            "chronyd.service".into(),
        ))
        .unwrap();
        host.systemctl(&machineos_host::Systemctl::DaemonReload)
            .unwrap();
        let calls = s.calls();
        assert!(
            calls.ends_with(&[
                "systemctl restart chronyd.service".to_owned(),
                "systemctl daemon-reload".to_owned()
            ]),
            "{tool}: {calls:?}"
        );
        s.set("fail_unit_crio.service", "Job for crio.service failed.");
        let e = host
            .systemctl(&machineos_host::Systemctl::Reload("crio.service".into()))
            .unwrap_err();
        assert!(e.to_string().contains("Job for crio.service failed"), "{e}");
        // Nothing staged: nothing to apply from.
        std::fs::remove_file(s.state.join("staged")).unwrap();
        assert!(host.apply_live().is_err(), "{tool}");
    }
}

#[test]
fn a_soft_reboot_is_prepared_through_ostree_and_falls_back_to_a_reboot() {
    // bootc: capable by its own status → ostree's preparation, then systemctl soft-reboot.
    let s = Stand::new(Some(A), &["bootc", "systemctl", "ostree"]);
    s.set("staged", B);
    s.set("soft_reboot_capable", "");
    s.bootc().soft_reboot().unwrap();
    assert!(s.state.join("soft_reboot_requested").exists());
    assert_eq!(s.get("nextroot").as_deref(), Some("0"));
    assert!(!s.state.join("reboot_requested").exists());
    // Not capable: a reboot, ostree not even asked.
    let s = Stand::new(Some(A), &["bootc", "systemctl", "ostree"]);
    s.set("staged", B);
    s.bootc().soft_reboot().unwrap();
    assert!(s.state.join("reboot_requested").exists());
    assert!(
        !s.calls().iter().any(|c| c.starts_with("ostree")),
        "{:?}",
        s.calls()
    );
    // rpm-ostree has no soft reboot: ostree's preparation decides; refused → a reboot.
    let s = Stand::new(Some(A), &["rpm-ostree", "systemctl", "ostree"]);
    s.set("staged", B);
    s.rpm_ostree().soft_reboot().unwrap();
    assert!(s.state.join("soft_reboot_requested").exists());
    let s = Stand::new(Some(A), &["rpm-ostree", "systemctl", "ostree"]);
    s.set("staged", B);
    s.set("prepare_fails", "error: Cannot soft-reboot: kernel differs");
    s.rpm_ostree().soft_reboot().unwrap();
    assert!(s.state.join("reboot_requested").exists());
    assert!(!s.state.join("soft_reboot_requested").exists());
    // The count systemd keeps is in the status (absent: 0).
    let s = Stand::new(Some(A), &["rpm-ostree", "systemctl"]);
    assert_eq!(s.rpm_ostree().status().unwrap().soft_reboots, 0);
    s.set("soft_reboots", "2");
    assert_eq!(s.rpm_ostree().status().unwrap().soft_reboots, 2);
}
