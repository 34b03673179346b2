//! The OpenShift build controller of the test cluster: the Build state machine against a
//! scripted stand-in for `buildah` (inputs laid out, phases, digest, failure reasons,
//! cancellation, deletion, a missing push secret, an unresolvable output). The real buildah
//! runs are in `real_buildah.rs`.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use machineos_kubetest::buildexec::BuildExecutor;
use machineos_kubetest::hooks;
use machineos_kubetest::http::{Server, new_store};
use machineos_kubetest::podexec::ExecSettings;
use machineos_kubetest::{DeleteOptions, GroupResource, Store, WriteOptions};
use serde_json::{Value, json};

const W: WriteOptions = WriteOptions { dry_run: false };
const NS: &str = "default";
/// A generous bound for "eventually".
const EVENTUALLY: Duration = Duration::from_secs(60);
const FAKE_DIGEST: &str = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

/// Stands in for buildah: prints its arguments and inputs, sleeps or fails on request, and
/// writes a digest on push.
const FAKE_BUILDAH: &str = r#"#!/bin/bash
set -eu
echo "fake-buildah $*"
prev=""
for a in "$@"; do
  if [ "$prev" = --authfile ]; then echo "--- authfile"; cat "$a"; echo; fi
  if [ "$prev" = --digestfile ]; then digestfile=$a; fi
  prev=$a
done
case "$1" in
bud)
  ctx="${@: -1}"
  echo "--- Dockerfile"; cat "$ctx/Dockerfile"
  echo "--- context"; (cd "$ctx" && find . -type f | sort)
  if [ -n "${FAKE_SLEEP:-}" ]; then
    sleep "$FAKE_SLEEP" &
    echo $! > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"
    echo sleeping
    wait
  fi
  if [ -n "${FAKE_BUD_FAIL:-}" ]; then echo "error: $FAKE_BUD_FAIL" >&2; exit 1; fi ;;
push)
  if [ -n "${FAKE_PUSH_FAIL:-}" ]; then echo "error: $FAKE_PUSH_FAIL" >&2; exit 1; fi
  printf '%s' "$FAKE_DIGEST" > "$digestfile" ;;
esac
"#;

fn builds() -> GroupResource {
    GroupResource::new("build.openshift.io", "builds")
}

fn b64(s: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn create(s: &Server, gr: &GroupResource, obj: Value) {
    s.store()
        .lock()
        .unwrap()
        .create(gr, Some(NS), &obj, W)
        .unwrap();
    s.notify();
}

fn push_secret(s: &Server, host: &str) {
    let auth = json!({"auths": {host: {"auth": b64(b"user:pw")}}}).to_string();
    create(
        s,
        &GroupResource::new("", "secrets"),
        json!({"metadata": {"name": "push"}, "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": b64(auth.as_bytes())}}),
    );
}

fn extra_config_map(s: &Server) {
    create(
        s,
        &GroupResource::new("", "configmaps"),
        json!({"metadata": {"name": "extra"}, "data": {"hello.txt": "hello\n"}}),
    );
}

fn build(name: &str, dockerfile: &str, output: &str) -> Value {
    json!({
        "apiVersion": "build.openshift.io/v1", "kind": "Build",
        "metadata": {"name": name},
        "spec": {
            "source": {"type": "Dockerfile", "dockerfile": dockerfile,
                "configMaps": [{"configMap": {"name": "extra"}, "destinationDir": "extra"}]},
            "strategy": {"type": "Docker", "dockerStrategy": {"pullSecret": {"name": "push"}}},
            "output": {"to": {"kind": "DockerImage", "name": output},
                "pushSecret": {"name": "push"}},
        },
    })
}

struct Fixture {
    server: Server,
    executor: BuildExecutor,
    tmp: tempfile::TempDir,
}

impl Fixture {
    fn pidfile(&self) -> PathBuf {
        self.tmp.path().join("pid")
    }
}

/// A server and a build executor running the fake buildah with `env`.
async fn fake(env: &[(&str, &str)]) -> Fixture {
    let server = Server::start(new_store(), 0).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("buildah");
    std::fs::write(&fake, FAKE_BUILDAH).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut settings = ExecSettings::new(tmp.path().join("work"))
        .env("FAKE_DIGEST", FAKE_DIGEST)
        .env("PIDFILE", tmp.path().join("pid").to_str().unwrap());
    settings.buildah = fake.to_string_lossy().into_owned();
    for (k, v) in env {
        settings = settings.env(*k, *v);
    }
    let executor = BuildExecutor::spawn(server.shared().clone(), settings);
    Fixture {
        server,
        executor,
        tmp,
    }
}

fn get(st: &Store, name: &str) -> Option<Value> {
    st.get(&builds(), Some(NS), name).ok()
}

/// The Build once `done` holds for it.
async fn until(s: &Server, name: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    hooks::wait_for(s.shared(), EVENTUALLY, |st| {
        get(st, name).filter(|b| done(b))
    })
    .await
    .unwrap_or_else(|| {
        let now = get(&s.store().lock().unwrap(), name);
        panic!("build {name} never {what}: {now:#?}")
    })
}

fn phase_is(phase: &'static str) -> impl Fn(&Value) -> bool {
    move |b| b["status"]["phase"] == phase
}

/// The phases Build `name` went through, as a watcher saw them.
fn phases(s: &Server, name: &str) -> Vec<String> {
    let st = s.store();
    let st = st.lock().unwrap();
    let mut out: Vec<String> = Vec::new();
    for (k, e) in st.changes_after(0).unwrap() {
        if k.gr == builds() && k.name == name {
            let p = e.object["status"]["phase"]
                .as_str()
                .unwrap_or("")
                .to_string();
            if out.last() != Some(&p) {
                out.push(p);
            }
        }
    }
    out
}

fn why(b: &Value) -> (&str, &str, &str) {
    let s = &b["status"];
    (
        s["phase"].as_str().unwrap_or(""),
        s["reason"].as_str().unwrap_or(""),
        s["message"].as_str().unwrap_or(""),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_build_lays_out_its_inputs_and_completes_with_the_pushed_digest() {
    let f = fake(&[]).await;
    let s = &f.server;
    push_secret(s, "registry.example.com");
    extra_config_map(s);
    create(
        s,
        &builds(),
        build(
            "ok",
            "FROM base\nCOPY extra/hello.txt /\n",
            "registry.example.com/out:1",
        ),
    );
    let b = until(s, "ok", "completed", phase_is("Complete")).await;
    let st = &b["status"];
    assert_eq!(st["output"]["to"]["imageDigest"], FAKE_DIGEST);
    assert_eq!(
        st["outputDockerImageReference"],
        "registry.example.com/out:1"
    );
    assert!(st["startTimestamp"].is_string() && st["completionTimestamp"].is_string());
    assert!(st["duration"].as_i64().is_some_and(|d| d >= 0), "{st}");
    assert_eq!(phases(s, "ok"), ["", "Pending", "Running", "Complete"]);
    let log = f.executor.log(NS, "ok").unwrap();
    for want in [
        "--- Dockerfile\nFROM base\nCOPY extra/hello.txt /\n",
        "--- context\n./Dockerfile\n./extra/hello.txt\n",
        "fake-buildah bud --storage-driver vfs --isolation chroot --authfile ",
        "fake-buildah push --storage-driver vfs --authfile ",
        r#"{"auths":{"registry.example.com":{"auth":"dXNlcjpwdw=="}}}"#,
    ] {
        assert!(log.contains(want), "{want:?} not in:\n{log}");
    }
    // The build directory (storage included) goes afterwards.
    let work = f.tmp.path().join("work/builds/default");
    let gone = hooks::wait_for(s.shared(), EVENTUALLY, |_| {
        let left = std::fs::read_dir(&work).map(|d| d.count()).unwrap_or(0);
        (left == 0).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the build directory was not removed");
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_builds_and_pushes_carry_their_reason_and_log_snippet() {
    for (env, reason, message) in [
        (
            ("FAKE_BUD_FAIL", "boom in bud"),
            "DockerBuildFailed",
            "Docker build strategy has failed.",
        ),
        (
            ("FAKE_PUSH_FAIL", "boom in push"),
            "PushImageToRegistryFailed",
            "Failed to push the image to the registry.",
        ),
    ] {
        let f = fake(&[env]).await;
        let s = &f.server;
        push_secret(s, "r.example.com");
        extra_config_map(s);
        create(
            s,
            &builds(),
            build("bad", "FROM base\n", "r.example.com/o:1"),
        );
        let b = until(s, "bad", "failed", phase_is("Failed")).await;
        assert_eq!(why(&b), ("Failed", reason, message));
        let snippet = b["status"]["logSnippet"].as_str().unwrap();
        // The error is among the last lines. Not necessarily the very last: the fake's stdout
        // and stderr are two pipes, so its last stdout newline may land after the error line
        // (or the error after an unterminated stdout line).
        let tail: Vec<&str> = snippet
            .lines()
            .rev()
            .filter(|l| !l.is_empty())
            .take(2)
            .collect();
        assert!(
            tail.iter()
                .any(|l| l.ends_with(&format!("error: {}", env.1))),
            "{snippet}"
        );
        assert!(b["status"]["completionTimestamp"].is_string());
        assert!(b["status"]["output"]["to"]["imageDigest"].is_null());
    }
}

/// Whether process `pid` is gone (or a zombie).
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

async fn started(f: &Fixture) -> u32 {
    hooks::wait_for(f.server.shared(), EVENTUALLY, |_| {
        std::fs::read_to_string(f.pidfile())
            .ok()?
            .trim()
            .parse()
            .ok()
    })
    .await
    .expect("the build started")
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_running_build_kills_it() {
    let f = fake(&[("FAKE_SLEEP", "600")]).await;
    let s = &f.server;
    push_secret(s, "r.example.com");
    extra_config_map(s);
    create(s, &builds(), build("c", "FROM base\n", "r.example.com/o:1"));
    let pid = started(&f).await;
    until(s, "c", "ran", phase_is("Running")).await;
    // A client cancels through the status subresource, as `oc cancel-build` does.
    {
        let st = s.store();
        let mut st = st.lock().unwrap();
        let mut b = get(&st, "c").unwrap();
        b["status"]["cancelled"] = json!(true);
        st.update_status(&builds(), Some(NS), "c", &b, W).unwrap();
    }
    s.notify();
    let b = until(s, "c", "cancelled", phase_is("Cancelled")).await;
    assert_eq!(
        why(&b),
        (
            "Cancelled",
            "CancelledBuild",
            "The build was cancelled by the user."
        )
    );
    assert_eq!(b["status"]["cancelled"], true);
    let gone = hooks::wait_for(s.shared(), EVENTUALLY, |_| dead(pid).then_some(())).await;
    assert!(gone.is_some(), "buildah's child {pid} survived the cancel");
    assert_eq!(f.executor.running(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_running_build_kills_it_without_a_status() {
    let f = fake(&[("FAKE_SLEEP", "600")]).await;
    let s = &f.server;
    push_secret(s, "r.example.com");
    extra_config_map(s);
    create(s, &builds(), build("d", "FROM base\n", "r.example.com/o:1"));
    let pid = started(&f).await;
    s.store()
        .lock()
        .unwrap()
        .delete(&builds(), Some(NS), "d", &DeleteOptions::default())
        .unwrap();
    s.notify();
    let gone = hooks::wait_for(s.shared(), EVENTUALLY, |_| {
        (dead(pid) && f.executor.running() == 0).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "buildah's child {pid} survived the deletion"
    );
    assert!(get(&s.store().lock().unwrap(), "d").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_build_waits_for_its_push_secret_and_rejects_other_outputs() {
    let f = fake(&[]).await;
    let s = &f.server;
    extra_config_map(s);
    create(s, &builds(), build("w", "FROM base\n", "r.example.com/o:1"));
    let b = until(s, "w", "reported the missing secret", |b| {
        b["status"]["reason"] == "MissingPushSecret"
    })
    .await;
    assert_eq!(
        why(&b),
        ("New", "MissingPushSecret", "Missing push secret.")
    );
    let mut ist = build("ist", "FROM base\n", "os:1");
    ist["spec"]["output"]["to"]["kind"] = json!("ImageStreamTag");
    create(s, &builds(), ist);
    let b = until(s, "ist", "reported the output", |b| {
        b["status"]["reason"] == "InvalidOutputReference"
    })
    .await;
    assert_eq!(
        why(&b),
        (
            "New",
            "InvalidOutputReference",
            "Output image could not be resolved."
        )
    );
    push_secret(s, "r.example.com");
    let b = until(s, "w", "completed", phase_is("Complete")).await;
    assert!(b["status"]["reason"].is_null(), "{b}");
}
