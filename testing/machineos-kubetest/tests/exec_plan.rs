//! The pure cores of the pod and build executors, table-tested: re-rooting, `$(VAR)`
//! expansion, volume materialisation plans (and laying one out), the termination message
//! and its `FallbackToLogsOnError` log tail, build plans and build statuses.

use std::path::{Path, PathBuf};

use machineos_kubetest::buildexec::{
    BuildEnd, BuildPlanError, CANCELLED, DOCKER_BUILD_FAILED, finished_status, plan_build,
};
use machineos_kubetest::podexec::materialise;
use machineos_kubetest::podexec::plan::{
    self, PlanError, SourceKind, expand, log_tail, plan_pod, reroot, termination_message,
};
use serde_json::{Value, json};

fn b64(s: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn absolute_paths_are_rerooted_lexically() {
    let root = Path::new("/w/pod/root");
    let cases: &[(&str, Option<&str>)] = &[
        (
            "/dev/termination-log",
            Some("/w/pod/root/dev/termination-log"),
        ),
        ("/a/./b/", Some("/w/pod/root/a/b")),
        ("/a/../b", Some("/w/pod/root/b")),
        ("/../../etc/passwd", Some("/w/pod/root/etc/passwd")),
        ("/a/b/../../..", Some("/w/pod/root")),
        ("/", Some("/w/pod/root")),
        ("relative/x", None),
        ("", None),
    ];
    for (path, want) in cases {
        assert_eq!(
            reroot(root, path),
            want.map(PathBuf::from),
            "reroot({path:?})"
        );
    }
}

#[test]
fn variable_references_expand_as_the_kubelet_does() {
    let lookup = |n: &str| match n {
        "A" => Some("/x".to_string()),
        "EMPTY" => Some(String::new()),
        _ => None,
    };
    let cases = [
        ("$(A)/y", "/x/y"),
        ("$(A)$(A)", "/x/x"),
        ("$(UNDEFINED)", "$(UNDEFINED)"),
        ("$$(A)", "$(A)"),
        ("$$", "$"),
        ("$A", "$A"),
        ("$(A", "$(A"),
        ("tail$", "tail$"),
        ("é$(A)ü", "é/xü"),
        ("[$(EMPTY)]", "[]"),
        ("plain", "plain"),
    ];
    for (input, want) in cases {
        assert_eq!(expand(input, &lookup), want, "expand({input:?})");
    }
}

#[test]
fn log_tail_keeps_the_last_80_lines_and_2048_bytes() {
    let lines: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    let t = log_tail(lines.as_bytes());
    assert!(t.starts_with("line 21\n"), "{t:?}");
    assert!(t.ends_with("line 100\n"));
    assert_eq!(t.lines().count(), 80);
    // No final newline: still the last 80 lines.
    let t = log_tail(lines.trim_end().as_bytes());
    assert!(
        t.starts_with("line 21\n") && t.ends_with("line 100"),
        "{t:?}"
    );
    // Long lines: the last 2048 bytes of them.
    let long: String = (0..10)
        .map(|i| format!("{}\n", char::from(b'a' + i).to_string().repeat(500)))
        .collect();
    let t = log_tail(long.as_bytes());
    assert_eq!(t.len(), plan::FALLBACK_LOG_BYTES);
    assert!(t.ends_with(&format!("{}\n", "j".repeat(500))));
    assert_eq!(log_tail(b""), "");
    assert_eq!(log_tail(b"one"), "one");
}

#[test]
fn termination_message_rules() {
    let log = b"building\nerror: boom\n";
    let big = vec![b'x'; 5000];
    // (file, exit code, fallback, want)
    let cases: Vec<(Option<&[u8]>, i32, bool, String)> = vec![
        (Some(b"sha256:abc"), 0, true, "sha256:abc".into()),
        (Some(b"written"), 1, true, "written".into()),
        (Some(b""), 1, true, String::from_utf8_lossy(log).into()),
        (None, 2, true, String::from_utf8_lossy(log).into()),
        (Some(b""), 0, true, String::new()),
        (Some(b""), 1, false, String::new()),
        (None, 1, false, String::new()),
        (
            Some(&big),
            0,
            false,
            "x".repeat(plan::MAX_TERMINATION_MESSAGE),
        ),
    ];
    for (i, (file, code, fallback, want)) in cases.into_iter().enumerate() {
        assert_eq!(
            termination_message(file, code, fallback, log),
            want,
            "case {i}"
        );
    }
}

/// The build Job's pod as machineos-buildrequest renders it (trimmed).
fn build_pod() -> Value {
    json!({
        "metadata": {"name": "build-w-abcde", "namespace": "mco", "uid": "u1"},
        "spec": {
            "containers": [{
                "name": "build",
                "command": ["/bin/bash", "-c", "echo $(TAG) > \"$TERMINATION_LOG\"", "build.sh"],
                "args": ["$(CONTEXT_DIR)", "$$(TAG)"],
                "env": [
                    {"name": "HOME", "value": "/home/build"},
                    {"name": "TAG", "value": "registry.example.com/os:w"},
                    {"name": "CONTEXT_DIR", "value": "$(HOME)/context"},
                    {"name": "TERMINATION_LOG", "value": "/dev/termination-log"},
                ],
                "workingDir": "/home/build",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "volumeMounts": [
                    {"name": "containerfile", "mountPath": "/tmp/containerfile", "readOnly": true},
                    {"name": "machineconfig", "mountPath": "/tmp/machineconfig"},
                    {"name": "push-secret", "mountPath": "/tmp/final-image-push-creds"},
                    {"name": "context", "mountPath": "/home/build/context"},
                    {"name": "context", "mountPath": "/also/context"},
                ],
            }],
            "volumes": [
                {"name": "containerfile", "configMap": {"name": "cf",
                    "items": [{"key": "Containerfile", "path": "Containerfile"}]}},
                {"name": "machineconfig", "projected": {"defaultMode": 0o600, "sources": [
                    {"configMap": {"name": "mc", "items": [{"key": "machineconfig.json.gz", "path": "machineconfig.json.gz"}]}},
                    {"secret": {"name": "extra", "optional": true}},
                ]}},
                {"name": "push-secret", "secret": {"secretName": "push",
                    "items": [{"key": ".dockerconfigjson", "path": "config.json", "mode": 0o400}]}},
                {"name": "context", "emptyDir": {}},
            ],
        },
    })
}

fn objects(kind: SourceKind, name: &str) -> Option<Value> {
    match (kind, name) {
        (SourceKind::ConfigMap, "cf") => {
            Some(json!({"data": {"Containerfile": "FROM x\n", "other": "y"}}))
        }
        (SourceKind::ConfigMap, "mc") => {
            Some(json!({"binaryData": {"machineconfig.json.gz": b64(b"\x1f\x8b\x08")}}))
        }
        (SourceKind::Secret, "push") => Some(json!({"type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": b64(br#"{"auths":{}}"#)}})),
        _ => None,
    }
}

#[test]
fn the_build_pod_plan_reroots_volumes_env_and_the_termination_log() {
    let dir = Path::new("/w/pods/mco/build-w-abcde-u1");
    let root = dir.join("root");
    let p = plan_pod(&build_pod(), dir, &objects).unwrap();
    assert_eq!(p.root, root);
    assert_eq!(p.program, "/bin/bash");
    let env = |k: &str| {
        p.env
            .iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(env("TAG"), Some("registry.example.com/os:w"));
    assert_eq!(
        env("HOME"),
        Some("/w/pods/mco/build-w-abcde-u1/root/home/build")
    );
    assert_eq!(
        env("CONTEXT_DIR"),
        Some("/w/pods/mco/build-w-abcde-u1/root/home/build/context"),
        "expanded with the container's view of HOME, then re-rooted once"
    );
    assert_eq!(
        env("TERMINATION_LOG"),
        Some("/w/pods/mco/build-w-abcde-u1/root/dev/termination-log")
    );
    assert_eq!(env("PATH"), Some(plan::DEFAULT_PATH));
    assert_eq!(env("HOSTNAME"), Some("build-w-abcde"));
    assert_eq!(
        env("CONTAINERS_STORAGE_CONF"),
        Some("/w/pods/mco/build-w-abcde-u1/storage.conf")
    );
    assert_eq!(
        p.args,
        [
            "-c",
            "echo registry.example.com/os:w > \"$TERMINATION_LOG\"",
            "build.sh",
            "/w/pods/mco/build-w-abcde-u1/root/home/build/context",
            "$(TAG)",
        ]
    );
    assert_eq!(p.working_dir, root.join("home/build"));
    assert_eq!(p.termination_message_path, root.join("dev/termination-log"));
    assert!(p.fallback_to_logs);
    let vols = dir.join("volumes");
    assert_eq!(
        p.links,
        [
            (root.join("tmp/containerfile"), vols.join("containerfile")),
            (root.join("tmp/machineconfig"), vols.join("machineconfig")),
            (
                root.join("tmp/final-image-push-creds"),
                vols.join("push-secret")
            ),
            (root.join("home/build/context"), vols.join("context")),
            (root.join("also/context"), vols.join("context")),
        ]
    );
    let files: Vec<(PathBuf, Vec<u8>, u32)> = p
        .files
        .iter()
        .map(|f| (f.path.clone(), f.contents.clone(), f.mode))
        .collect();
    assert_eq!(
        files[..3],
        [
            (
                vols.join("containerfile/Containerfile"),
                b"FROM x\n".to_vec(),
                0o644
            ),
            (
                vols.join("machineconfig/machineconfig.json.gz"),
                b"\x1f\x8b\x08".to_vec(),
                0o600
            ),
            (
                vols.join("push-secret/config.json"),
                br#"{"auths":{}}"#.to_vec(),
                0o400
            ),
        ],
        "items only; the optional missing Secret projects nothing"
    );
    assert_eq!(files[3].0, root.join("dev/termination-log"));
    assert!(files[3].1.is_empty());
    let conf = String::from_utf8(files[4].1.clone()).unwrap();
    assert!(conf.contains("driver = \"vfs\""), "{conf}");
    assert!(
        conf.contains("graphroot = \"/w/pods/mco/build-w-abcde-u1/storage/graph\""),
        "{conf}"
    );
    assert!(p.dirs.contains(&vols.join("context")));
}

#[test]
fn every_key_without_items_and_secret_data_decoded() {
    let pod = json!({"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "command": ["true"],
            "volumeMounts": [{"name": "a", "mountPath": "/a"}, {"name": "s", "mountPath": "/s"}]}],
        "volumes": [{"name": "a", "configMap": {"name": "cf", "defaultMode": 0o755}},
                    {"name": "s", "secret": {"secretName": "sec"}}]}});
    let lookup = |kind: SourceKind, name: &str| match (kind, name) {
        (SourceKind::Secret, "sec") => {
            Some(json!({"data": {"k": b64(b"v1")}, "stringData": {"s": "plain"}}))
        }
        _ => objects(kind, name),
    };
    let p = plan_pod(&pod, Path::new("/d"), &lookup).unwrap();
    let got: Vec<(String, String, u32)> = p
        .files
        .iter()
        .take(4)
        .map(|f| {
            (
                f.path.display().to_string(),
                String::from_utf8_lossy(&f.contents).into_owned(),
                f.mode,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "/d/volumes/a/Containerfile".into(),
                "FROM x\n".into(),
                0o755
            ),
            ("/d/volumes/a/other".into(), "y".into(), 0o755),
            ("/d/volumes/s/k".into(), "v1".into(), 0o644),
            ("/d/volumes/s/s".into(), "plain".into(), 0o644),
        ]
    );
    assert_eq!(p.working_dir, Path::new("/d/root"));
    assert_eq!(
        p.termination_message_path,
        Path::new("/d/root/dev/termination-log")
    );
    assert!(!p.fallback_to_logs);
}

#[test]
fn plan_errors_name_the_object_and_field() {
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut p = build_pod();
        edit(&mut p);
        plan_pod(&p, Path::new("/d"), &objects).unwrap_err()
    };
    let e = with(&|p| p["spec"]["volumes"][0]["configMap"]["name"] = json!("gone"));
    assert!(e.is_config_error());
    assert_eq!(
        e.to_string(),
        "configmap \"gone\" not found (referenced by spec.volumes[0].configMap.name)"
    );
    let e = with(&|p| p["spec"]["volumes"][2]["secret"]["items"][0]["key"] = json!("nope"));
    assert!(e.is_config_error());
    assert_eq!(
        e.to_string(),
        "secret references non-existent secret key: nope (at spec.volumes[2].secret.items[0])"
    );
    let e = with(&|p| {
        p["spec"]["containers"][0]["env"][1] =
            json!({"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    });
    assert!(!e.is_config_error());
    assert_eq!(
        e.to_string(),
        "spec.containers[0].env[1].valueFrom: valueFrom is not supported by the test kubelet"
    );
    let e = with(&|p| p["spec"]["containers"][0]["volumeMounts"][0]["subPath"] = json!("x"));
    assert!(matches!(e, PlanError::Unsupported { .. }), "{e}");
    let e =
        with(&|p| p["spec"]["volumes"][3] = json!({"name": "context", "hostPath": {"path": "/"}}));
    assert_eq!(
        e.to_string(),
        "spec.volumes[3]: volume type hostPath is not supported by the test kubelet"
    );
    let e =
        with(&|p| p["spec"]["volumes"][0]["configMap"]["items"][0]["path"] = json!("../escape"));
    assert!(matches!(e, PlanError::BadPath { .. }), "{e}");
    let e =
        with(&|p| p["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] = json!("relative"));
    assert!(matches!(e, PlanError::BadPath { .. }), "{e}");
    let e = with(&|p| p["spec"]["containers"][0]["volumeMounts"][0]["name"] = json!("none"));
    assert!(matches!(e, PlanError::UnknownVolume { .. }), "{e}");
    let e = with(&|p| {
        p["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("command");
    });
    assert!(matches!(e, PlanError::Unsupported { .. }), "{e}");
    let e = with(&|p| p["spec"]["initContainers"] = json!([{"name": "i"}]));
    assert!(matches!(e, PlanError::Unsupported { .. }), "{e}");
    let e = with(&|p| {
        p["spec"]["volumes"][1]["projected"]["sources"][0]["configMap"]["name"] = json!("mc2")
    });
    assert_eq!(
        e.to_string(),
        "configmap \"mc2\" not found (referenced by spec.volumes[1].projected.sources[0].configMap.name)"
    );
}

#[test]
fn a_plan_is_laid_out_with_mounts_as_links() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pod");
    let p = plan_pod(&build_pod(), &dir, &objects).unwrap();
    materialise(&p).unwrap();
    let root = dir.join("root");
    assert_eq!(
        std::fs::read(root.join("tmp/containerfile/Containerfile")).unwrap(),
        b"FROM x\n"
    );
    assert_eq!(
        std::fs::read(root.join("tmp/final-image-push-creds/config.json")).unwrap(),
        br#"{"auths":{}}"#
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(root.join("tmp/final-image-push-creds/config.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o400);
    // Two mounts of one emptyDir share it.
    std::fs::write(root.join("home/build/context/f"), b"shared").unwrap();
    assert_eq!(
        std::fs::read(root.join("also/context/f")).unwrap(),
        b"shared"
    );
    assert_eq!(
        std::fs::read(root.join("dev/termination-log")).unwrap(),
        b""
    );
    assert!(dir.join("storage.conf").is_file());
    assert!(root.join("home/build").is_dir());
    machineos_kubetest::podexec::remove_dir_safely(&dir).unwrap();
    assert!(!dir.exists());
}

fn build(spec: Value) -> Value {
    json!({"apiVersion": "build.openshift.io/v1", "kind": "Build",
        "metadata": {"name": "b", "namespace": "ns", "uid": "u"}, "spec": spec})
}

fn build_spec() -> Value {
    json!({
        "source": {"type": "Dockerfile", "dockerfile": "FROM base\nLABEL a=b\n",
            "configMaps": [{"configMap": {"name": "cf"}, "destinationDir": "extra/dir"}]},
        "strategy": {"type": "Docker", "dockerStrategy": {
            "pullSecret": {"name": "push"}, "noCache": true,
            "buildArgs": [{"name": "A", "value": "1"}]}},
        "output": {"to": {"kind": "DockerImage", "name": "127.0.0.1:5000/out:1"},
            "pushSecret": {"name": "push"}, "imageLabels": [{"name": "l", "value": "v"}]},
    })
}

#[test]
fn a_build_plan_lays_out_the_context_and_the_buildah_commands() {
    let dir = Path::new("/w/builds/ns/b-u");
    let p = plan_build(&build(build_spec()), dir, &objects).unwrap();
    assert_eq!(p.output.as_deref(), Some("127.0.0.1:5000/out:1"));
    let files: Vec<(String, String)> = p
        .files
        .iter()
        .map(|f| {
            (
                f.path.display().to_string(),
                String::from_utf8_lossy(&f.contents).into_owned(),
            )
        })
        .collect();
    assert_eq!(
        files[..5],
        [
            (
                "/w/builds/ns/b-u/context/Dockerfile".into(),
                "FROM base\nLABEL a=b\n".into()
            ),
            (
                "/w/builds/ns/b-u/context/extra/dir/Containerfile".into(),
                "FROM x\n".into()
            ),
            (
                "/w/builds/ns/b-u/context/extra/dir/other".into(),
                "y".into()
            ),
            (
                "/w/builds/ns/b-u/auth/pull.json".into(),
                r#"{"auths":{}}"#.into()
            ),
            (
                "/w/builds/ns/b-u/auth/push.json".into(),
                r#"{"auths":{}}"#.into()
            ),
        ]
    );
    assert_eq!(
        p.bud_args.join(" "),
        "bud --storage-driver vfs --isolation chroot --authfile /w/builds/ns/b-u/auth/pull.json \
         --no-cache --build-arg A=1 --label l=v -f /w/builds/ns/b-u/context/Dockerfile \
         -t 127.0.0.1:5000/out:1 /w/builds/ns/b-u/context"
    );
    assert_eq!(
        p.push_args.join(" "),
        "push --storage-driver vfs --authfile /w/builds/ns/b-u/auth/push.json \
         --digestfile /w/builds/ns/b-u/digest 127.0.0.1:5000/out:1"
    );
    assert!(p.env.contains(&(
        "CONTAINERS_STORAGE_CONF".into(),
        "/w/builds/ns/b-u/storage.conf".into()
    )));
}

/// Build volumes (openshift/api `BuildVolume`): the source's keys (or its `items`, at their
/// paths) under `volumes/<name>`, mounted read-only at each `destinationPath`; no
/// `spec.output`: built, not pushed.
#[test]
fn build_volumes_are_mounted_read_only_and_a_build_without_output_pushes_nothing() {
    let mut spec = build_spec();
    spec.as_object_mut().unwrap().remove("output");
    spec["strategy"]["dockerStrategy"]["volumes"] = json!([
        {"name": "mc", "source": {"type": "ConfigMap", "configMap": {"name": "cf",
            "items": [{"key": "Containerfile", "path": "sub/Containerfile"}]}},
         "mounts": [{"destinationPath": "/in/mc"}, {"destinationPath": "/also"}]},
        {"name": "pull", "source": {"type": "Secret", "secret": {"secretName": "push"}},
         "mounts": [{"destinationPath": "/in/pull"}]},
    ]);
    let dir = Path::new("/w/builds/ns/b-u");
    let p = plan_build(&build(spec.clone()), dir, &objects).unwrap();
    assert_eq!(p.output, None);
    assert!(p.push_args.is_empty());
    let files: Vec<String> = p
        .files
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    for want in [
        "/w/builds/ns/b-u/volumes/mc/sub/Containerfile",
        "/w/builds/ns/b-u/volumes/pull/.dockerconfigjson",
    ] {
        assert!(files.contains(&want.to_string()), "{want} in {files:?}");
    }
    assert!(
        !files.iter().any(|f| f.ends_with("volumes/mc/other")),
        "items select the keys: {files:?}"
    );
    assert_eq!(
        p.bud_args.join(" "),
        "bud --storage-driver vfs --isolation chroot --authfile /w/builds/ns/b-u/auth/pull.json \
         --no-cache --build-arg A=1 --volume /w/builds/ns/b-u/volumes/mc:/in/mc:ro \
         --volume /w/builds/ns/b-u/volumes/mc:/also:ro \
         --volume /w/builds/ns/b-u/volumes/pull:/in/pull:ro \
         -f /w/builds/ns/b-u/context/Dockerfile /w/builds/ns/b-u/context"
    );
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut s = spec.clone();
        edit(&mut s);
        plan_build(&build(s), dir, &objects)
            .unwrap_err()
            .to_string()
    };
    let v = "/strategy/dockerStrategy/volumes/0";
    for (edit, want) in [
        (
            ("mounts/0/destinationPath", json!("in/mc")),
            "volumes[0].mounts[0].destinationPath",
        ),
        (
            ("mounts/0/destinationPath", json!("/a:b")),
            "must not contain '..' or ':'",
        ),
        (("name", json!("Not_A_Label")), "must be a DNS label"),
        (
            ("source/configMap/name", json!("gone")),
            "\"gone\" not found",
        ),
        (("source/configMap/items/0/key", json!("nope")), "nope"),
        (("source/type", json!("CSI")), "volume source Some(\"CSI\")"),
    ] {
        let e = with(&|s| *s.pointer_mut(&format!("{v}/{}", edit.0)).unwrap() = edit.1.clone());
        assert!(e.contains(want), "{want} in {e}");
    }
}

#[test]
fn build_plan_errors() {
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut s = build_spec();
        edit(&mut s);
        plan_build(&build(s), Path::new("/d"), &objects).unwrap_err()
    };
    let e = with(&|s| s["output"]["to"]["kind"] = json!("ImageStreamTag"));
    assert!(matches!(e, BuildPlanError::InvalidOutput { .. }), "{e}");
    let e = with(&|s| s["output"]["pushSecret"]["name"] = json!("gone"));
    assert_eq!(
        e,
        BuildPlanError::MissingPushSecret {
            name: "gone".into()
        }
    );
    let e = with(&|s| s["source"]["configMaps"][0]["configMap"]["name"] = json!("gone"));
    assert!(
        matches!(&e, BuildPlanError::Input(p) if p.is_config_error()),
        "{e}"
    );
    assert!(
        e.to_string().contains("configmap \"gone\" not found"),
        "{e}"
    );
    let e = with(&|s| s["strategy"]["dockerStrategy"]["pullSecret"]["name"] = json!("gone"));
    assert!(
        matches!(&e, BuildPlanError::Input(p) if p.is_config_error()),
        "{e}"
    );
    let e = with(&|s| s["source"]["git"] = json!({"uri": "https://x"}));
    assert_eq!(
        e.to_string(),
        "spec.source.git: a git source is not supported by the test build controller"
    );
    let e = with(&|s| s["strategy"]["type"] = json!("Source"));
    assert!(matches!(e, BuildPlanError::Unsupported { .. }), "{e}");
    let e = with(&|s| s["source"]["configMaps"][0]["destinationDir"] = json!("../up"));
    assert!(
        matches!(e, BuildPlanError::Input(PlanError::BadPath { .. })),
        "{e}"
    );
}

#[test]
fn finished_build_statuses() {
    let running = json!({"phase": "Running", "startTimestamp": "2024-01-01T00:00:00Z",
        "outputDockerImageReference": "r/o:1", "cancelled": true});
    let now = "2024-01-01T00:01:05Z";
    let done = finished_status(
        &running,
        &BuildEnd::Complete {
            digest: Some("sha256:ab".into()),
        },
        now,
    );
    assert_eq!(done["phase"], "Complete");
    assert_eq!(done["output"]["to"]["imageDigest"], "sha256:ab");
    assert_eq!(done["completionTimestamp"], now);
    assert_eq!(done["duration"], 65_000_000_000i64);
    assert_eq!(done["outputDockerImageReference"], "r/o:1");
    assert!(done.get("reason").is_none());
    let failed = finished_status(
        &running,
        &BuildEnd::Failed {
            why: DOCKER_BUILD_FAILED,
            log_snippet: "error: x".into(),
        },
        now,
    );
    assert_eq!(
        (
            failed["phase"].as_str(),
            failed["reason"].as_str(),
            failed["message"].as_str(),
            failed["logSnippet"].as_str()
        ),
        (
            Some("Failed"),
            Some("DockerBuildFailed"),
            Some("Docker build strategy has failed."),
            Some("error: x")
        )
    );
    // No output: Complete, no digest.
    let built = finished_status(&running, &BuildEnd::Complete { digest: None }, now);
    assert_eq!(built["phase"], "Complete");
    assert!(built.get("output").is_none());
    let c = finished_status(&running, &BuildEnd::Cancelled, now);
    assert_eq!(
        (
            c["phase"].as_str(),
            c["reason"].as_str(),
            c["message"].as_str()
        ),
        (Some("Cancelled"), Some(CANCELLED.0), Some(CANCELLED.1))
    );
    assert_eq!(c["cancelled"], true);
    // Never started: no duration.
    let c = finished_status(&json!({"phase": "New"}), &BuildEnd::Cancelled, now);
    assert!(c.get("duration").is_none());
}
