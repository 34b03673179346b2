//! The boot guard's script as a host runs it at boot, in its own mount namespace: an
//! overlay of this machine's root (so bash, curl and coreutils are the real ones, at their
//! real paths) with the script at `/usr/libexec/machineos/boot-guard`, a `/sysroot` laid out
//! as ostree lays out deployments (`ostree/boot.1/OS/BOOTCSUM/0` → `ostree/deploy/OS/deploy/
//! CHECKSUM.SERIAL`), `/proc/cmdline` carrying `ostree=`, and at `/usr/bin` the rpm-ostree,
//! bootc and systemctl stand-ins of `machineos-host`, written from those tools' sources
//! (`rollback` as bootc's `deploy.rs` and rpm-ostree's rollback transaction do it). The
//! settings are passed as the unit's `EnvironmentFile` hands them; the kubelet's health
//! endpoint is a server on 127.0.0.1 this test answers.
//!
//! What it shows: a node that gets healthy is marked and left alone (also on its next boot,
//! healthy or not); one that never does rolls back once with rpm-ostree, or with bootc where
//! rpm-ostree is absent, and reboots, writing the record the agent reads; booted into the
//! previous deployment and failing again, it does not roll back a second time; with no
//! previous deployment nothing is written and nothing reboots; off, or not an ostree boot,
//! it does nothing.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use machineos_boot_guard::{HEALTHY_PATH, RECORD_PATH, Record, SCRIPT, SCRIPT_PATH};

const A: &str =
    "quay.io/org/os@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str =
    "quay.io/org/os@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
/// The deployments' directories (`CHECKSUM.SERIAL`): A's is booted first.
const DEPLOY_A: &str = "a1a1a1a1.0";
const DEPLOY_B: &str = "b2b2b2b2.0";
/// The stand-ins' state, inside the node's root.
const STANDIN: &str = "/run/standin";

fn can_unshare() -> bool {
    Command::new("unshare")
        .args(["-m", "--propagation", "private", "true"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The kubelet's health endpoint: `ok` while `healthy`, else a 500 as the kubelet answers
/// with a failing check.
struct Kubelet {
    url: String,
    healthy: Arc<AtomicBool>,
}

impl Kubelet {
    fn start() -> Kubelet {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/healthz", l.local_addr().unwrap());
        let healthy = Arc::new(AtomicBool::new(false));
        let h = healthy.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let (status, body) = if h.load(Ordering::SeqCst) {
                    ("200 OK", "ok")
                } else {
                    (
                        "500 Internal Server Error",
                        "[-]syncloop failed: reason withheld",
                    )
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Kubelet { url, healthy }
    }
}

/// One node: the overlay's upper directory holds everything the node has of its own.
struct Node {
    _tmp: tempfile::TempDir,
    upper: PathBuf,
    work: PathBuf,
    root: PathBuf,
}

impl Node {
    /// A node booted into A's deployment, B's the other one; `tools` are the stand-ins it has.
    fn new(tools: &[&str]) -> Node {
        let tmp = tempfile::tempdir().unwrap();
        let n = Node {
            upper: tmp.path().join("upper"),
            work: tmp.path().join("work"),
            root: tmp.path().join("root"),
            _tmp: tmp,
        };
        for d in [&n.upper, &n.work, &n.root] {
            std::fs::create_dir_all(d).unwrap();
        }
        n.write(SCRIPT_PATH, SCRIPT, 0o755);
        let standins =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../machineos-host/tests/standins");
        for t in tools {
            let text = std::fs::read_to_string(standins.join(t)).unwrap();
            n.write(&format!("/usr/lib/standins/{t}"), &text, 0o755);
            n.write(
                &format!("/usr/bin/{t}"),
                &format!("#!/bin/bash\nexport STANDIN_STATE={STANDIN}\nexec bash /usr/lib/standins/{t} \"$@\"\n"),
                0o755,
            );
        }
        std::fs::create_dir_all(n.at(STANDIN)).unwrap();
        for d in [DEPLOY_A, DEPLOY_B] {
            std::fs::create_dir_all(n.at(&format!("/sysroot/ostree/deploy/fcos/deploy/{d}/usr")))
                .unwrap();
        }
        n.boot(DEPLOY_A);
        n
    }

    fn at(&self, path: &str) -> PathBuf {
        self.upper.join(path.trim_start_matches('/'))
    }

    fn write(&self, path: &str, text: &str, mode: u32) {
        let p = self.at(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.at(path)).ok()
    }

    /// The boot loader's entry for `deployment`, and the kernel command line naming it.
    fn boot(&self, deployment: &str) {
        let entry = self.at("/sysroot/ostree/boot.1/fcos/0b0b0b/0");
        std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&entry);
        std::os::unix::fs::symlink(format!("../../../deploy/fcos/deploy/{deployment}"), &entry)
            .unwrap();
        self.write(
            "/run/cmdline",
            "BOOT_IMAGE=(hd0,gpt3)/boot/ostree/fcos-0b0b0b/vmlinuz-6.11.0 rw ostree=/ostree/boot.1/fcos/0b0b0b/0 ignition.platform.id=metal\n",
            0o644,
        );
    }

    fn standin(&self, name: &str, text: &str) {
        self.write(&format!("{STANDIN}/{name}"), &format!("{text}\n"), 0o644);
    }

    fn standin_get(&self, name: &str) -> Option<String> {
        self.read(&format!("{STANDIN}/{name}"))
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    }

    fn standin_has(&self, name: &str) -> bool {
        self.at(&format!("{STANDIN}/{name}")).exists()
    }

    fn calls(&self) -> String {
        self.read(&format!("{STANDIN}/calls")).unwrap_or_default()
    }

    /// Run the guard as its unit would, with `env` from its EnvironmentFile.
    fn run(&self, env: &[(&str, &str)]) -> Output {
        let r = self.root.display();
        let mut setup = format!(
            "set -e; mount -t overlay -o lowerdir=/,upperdir={},workdir={} overlay {r}; \
             mount -t proc proc {r}/proc; mount --bind {r}/run/cmdline {r}/proc/cmdline; \
             mount --rbind /dev {r}/dev; exec chroot {r} env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin",
            self.upper.display(),
            self.work.display()
        );
        for (k, v) in env {
            setup.push_str(&format!(" {k}='{v}'"));
        }
        setup.push(' ');
        setup.push_str(SCRIPT_PATH);
        Command::new("unshare")
            .args(["-m", "--propagation", "private", "bash", "-c", &setup])
            .output()
            .unwrap()
    }
}

fn quick(k: &Kubelet) -> Vec<(&'static str, String)> {
    vec![
        ("MACHINEOS_BOOT_GUARD_DEADLINE", "2".into()),
        ("MACHINEOS_BOOT_GUARD_INTERVAL", "1".into()),
        ("MACHINEOS_BOOT_GUARD_HEALTHZ", k.url.clone()),
    ]
}

fn run(n: &Node, env: &[(&'static str, String)]) -> (i32, String) {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = n.run(&env);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), err)
}

macro_rules! needs_namespaces {
    () => {
        if !can_unshare() {
            assert!(
                std::env::var_os("CI").is_none(),
                "under CI this test needs root and unshare(1)"
            );
            eprintln!("SKIPPED: needs root and unshare -m");
            return;
        }
    };
}

#[test]
fn a_node_that_gets_healthy_is_marked_and_left_alone_then_and_at_its_next_boot() {
    needs_namespaces!();
    let k = Kubelet::start();
    let n = Node::new(&["rpm-ostree", "systemctl"]);
    n.standin("booted", A);
    n.standin("rollback", B);
    let h = k.healthy.clone();
    let flip = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        h.store(true, Ordering::SeqCst);
    });
    let mut env = quick(&k);
    env[0].1 = "30".into();
    let (code, err) = run(&n, &env);
    flip.join().unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("answered ok after"), "{err}");
    assert_eq!(
        n.read(HEALTHY_PATH).as_deref(),
        Some(format!("{DEPLOY_A}\n").as_str())
    );
    assert!(!n.calls().contains("rollback"), "{}", n.calls());
    assert!(!n.standin_has("reboot_requested"));

    // Its next boot, the kubelet down: a deployment that passed is not the image's fault.
    k.healthy.store(false, Ordering::SeqCst);
    let (code, err) = run(&n, &quick(&k));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("passed before"), "{err}");
    assert!(!n.calls().contains("rollback"), "{}", n.calls());
    assert!(n.read(RECORD_PATH).is_none());
}

#[test]
fn a_node_never_healthy_rolls_back_once_with_rpm_ostree_and_reboots_and_never_twice() {
    needs_namespaces!();
    let k = Kubelet::start();
    let n = Node::new(&["rpm-ostree", "systemctl"]);
    n.standin("booted", A);
    n.standin("rollback", B);
    let (code, err) = run(&n, &quick(&k));
    assert_eq!(code, 0, "the reboot is the script's last word: {err}");
    assert!(
        err.contains("rolled back from a1a1a1a1.0 with rpm-ostree rollback"),
        "{err}"
    );
    // rpm-ostree's rollback: B moves to the top and boots next; the reboot was asked.
    assert_eq!(n.standin_get("pending").as_deref(), Some(B));
    assert!(n.standin_has("reboot_requested"));
    let rec = Record::parse(&n.read(RECORD_PATH).expect("the record")).unwrap();
    assert_eq!(rec.from, DEPLOY_A);
    assert_eq!(rec.tool, "rpm-ostree");
    assert_eq!(rec.check, machineos_boot_guard::CHECK);
    assert!(
        rec.evidence.contains("did not answer ok within 2s"),
        "{}",
        rec.evidence
    );
    assert!(
        rec.evidence.contains("500"),
        "curl's failure is the evidence: {}",
        rec.evidence
    );
    assert!(n.read(HEALTHY_PATH).is_none());

    // The node boots B, and B fails too (a flapping pair): the record stops a second
    // rollback, which would toggle back to A.
    n.boot(DEPLOY_B);
    n.standin("booted", B);
    n.standin("rollback", A);
    let _ = std::fs::remove_file(n.at(&format!("{STANDIN}/pending")));
    let _ = std::fs::remove_file(n.at(&format!("{STANDIN}/reboot_requested")));
    let before = n.read(RECORD_PATH);
    let (code, err) = run(&n, &quick(&k));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not rolling back"), "{err}");
    assert_eq!(
        n.calls().matches("rpm-ostree rollback").count(),
        1,
        "{}",
        n.calls()
    );
    assert!(!n.standin_has("reboot_requested"));
    assert_eq!(
        n.read(RECORD_PATH),
        before,
        "the record is the first rollback's"
    );
}

#[test]
fn a_bootc_host_without_rpm_ostree_rolls_back_with_bootc() {
    needs_namespaces!();
    let k = Kubelet::start();
    let n = Node::new(&["bootc", "systemctl"]);
    n.standin("booted", A);
    n.standin("rollback", B);
    let (code, err) = run(&n, &quick(&k));
    assert_eq!(code, 0, "{err}");
    // bootc's rollback queues the rollback entry for the next boot.
    assert!(n.standin_has("rollback_queued"), "{}", n.calls());
    assert!(n.standin_has("reboot_requested"));
    let rec = Record::parse(&n.read(RECORD_PATH).unwrap()).unwrap();
    assert_eq!(rec.tool, "bootc");
}

#[test]
fn with_no_previous_deployment_nothing_is_written_and_nothing_reboots() {
    needs_namespaces!();
    let k = Kubelet::start();
    let n = Node::new(&["rpm-ostree", "systemctl"]);
    n.standin("booted", A);
    let (code, err) = run(&n, &quick(&k));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("No rollback deployment found"),
        "the tool's refusal: {err}"
    );
    assert!(n.read(RECORD_PATH).is_none());
    assert!(n.read(&format!("{RECORD_PATH}.new")).is_none());
    assert!(!n.standin_has("reboot_requested"));
}

#[test]
fn off_or_not_an_ostree_boot_does_nothing() {
    needs_namespaces!();
    let k = Kubelet::start();
    let n = Node::new(&["rpm-ostree", "systemctl"]);
    n.standin("booted", A);
    n.standin("rollback", B);
    let mut env = quick(&k);
    env.push(("MACHINEOS_BOOT_GUARD", "off".into()));
    let (code, err) = run(&n, &env);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("off"), "{err}");
    n.write(
        "/run/cmdline",
        "BOOT_IMAGE=/vmlinuz root=/dev/sda1 rw\n",
        0o644,
    );
    let (code, err) = run(&n, &quick(&k));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("nothing to guard"), "{err}");
    assert_eq!(n.calls(), "", "no tool was run");
}
