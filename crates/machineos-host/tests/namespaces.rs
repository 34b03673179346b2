//! The agent's host runner as a node runs it, across mount namespaces: the runner
//! [`Runner::for_host`] builds for the DaemonSet, its tools run under an `nsenter` prefix into
//! another mount namespace with the switch as a (stand-in) systemd-run unit — so a path that
//! exists on only one side fails here as it would fail the node.
//!
//! The layout, made with `unshare -m` and `mount` (root only):
//! * **the host**: a process in its own mount namespace with a fresh tmpfs on `/run` (the
//!   host's `/run`); the tools enter it with `nsenter -t <its pid> -m --` (on a node: `nsenter
//!   -t 1 -m -u -i -n -p --`), and the stand-in systemd-run opens the unit's stderr file
//!   there, as systemd does;
//! * **the agent's container**: a child namespace of the host's where the host's `/run` is
//!   bind-mounted at `<host root>/run` (the DaemonSet's `/host/run` mount) and `/run` is the
//!   container's own, empty tmpfs. This test binary re-runs itself there (one process per
//!   agent start, `MACHINEOS_NS_PHASE`), so "an agent restart" is a new process in a new
//!   container namespace.
//!
//! What it shows: the switch through systemd-run succeeds and its stderr file is on the
//! host's `/run`, read back by the agent through the host mount when the switch fails; the
//! rpm-ostree pull mark written by one agent is seen by the next; a live apply writes the
//! host's `/etc` through the host mount, its record lands on the host's `/run` and the next
//! agent makes the recorded paths the next image's from it, and the policy's `systemctl`
//! action runs in the host's namespace; and the layout before
//! `tools_state_dir` existed (one path, `/run/machineos-host`, for both sides) fails the unit
//! before the switch runs — the bug a node would have hit.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use machineos_host::run::{HOST_STATE_DIR, Mode, Runner, Tools};
use machineos_host::{Host, HostError};

const A: &str =
    "quay.io/org/os@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str =
    "quay.io/org/os@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str =
    "quay.io/org/os@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
const D: &str =
    "quay.io/org/os@sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd";
const UNIT: &str = "machineos-host-switch";
const TEST: &str = "the_agents_runner_holds_across_mount_namespaces";

/// The directories of one run: stand-in wrappers, their state (the host's deployments),
/// and the host root as the agent's container mounts it.
struct Dirs {
    bin: PathBuf,
    state: PathBuf,
    root: PathBuf,
}

impl Dirs {
    fn at(base: &Path) -> Dirs {
        Dirs {
            bin: base.join("bin"),
            state: base.join("state"),
            root: base.join("root"),
        }
    }

    fn tools(&self) -> Tools {
        let systemctl = self.bin.join("systemctl");
        Tools {
            bootc: self.bin.join("bootc"),
            rpm_ostree: self.bin.join("rpm-ostree"),
            systemd_run: self.bin.join("systemd-run"),
            reboot: vec![systemctl.display().to_string(), "reboot".into()],
            systemctl,
            ostree: self.bin.join("ostree"),
            ..Tools::default()
        }
    }

    fn set(&self, name: &str, text: &str) {
        std::fs::write(self.state.join(name), format!("{text}\n")).unwrap();
    }

    fn get(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.state.join(name))
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    }
}

/// The runner the agent builds (`machineos agent`'s `--host-exec nsenter`), with the host
/// entered by `host_pid` instead of pid 1.
fn agent_runner(d: &Dirs, host_pid: &str) -> Runner {
    let prefix = ["nsenter", "-t", host_pid, "-m", "--"]
        .map(String::from)
        .to_vec();
    let mut r = Runner::for_host(
        d.tools(),
        &d.root,
        prefix,
        Mode::SystemdRun { unit: UNIT.into() },
    );
    r.poll = Duration::from_millis(5);
    r
}

/// The agent's side, in its container namespace: one "agent start" per phase.
fn agent_phase(phase: &str) {
    let base = PathBuf::from(std::env::var("MACHINEOS_NS_BASE").unwrap());
    let host_pid = std::env::var("MACHINEOS_NS_HOST_PID").unwrap();
    let d = Dirs::at(&base);
    let r = agent_runner(&d, &host_pid);
    assert_eq!(r.state_dir, d.root.join("run/machineos-host"));
    assert_eq!(r.tools_state_dir(), Path::new(HOST_STATE_DIR));
    match phase {
        "deploy" => {
            // The container's own /run never gets the directory: only the host's does.
            let bootc = machineos_host::Bootc::new(r.clone(), &d.root);
            bootc
                .deploy(B, None)
                .expect("the switch through systemd-run");
            assert_eq!(d.get("staged").as_deref(), Some(B));
            let log = d
                .root
                .join("run/machineos-host")
                .join(format!("{UNIT}.stderr"));
            assert!(log.is_file(), "the unit's stderr is on the host's /run");
            assert!(
                !Path::new(HOST_STATE_DIR).exists(),
                "nothing is left in the container's own /run"
            );
            // A failing switch: its stderr, written by the unit on the host, is read back.
            d.set("fail_switch", "error: reading manifest: 401 Unauthorized");
            match bootc.deploy(C, None) {
                Err(HostError::Tool { stderr, args, .. }) => {
                    assert_eq!(stderr, "error: reading manifest: 401 Unauthorized");
                    assert!(args.contains(&format!("systemd-run unit {UNIT}")), "{args}");
                }
                other => panic!("{other:?}"),
            }
            let _ = std::fs::remove_file(d.state.join("fail_switch"));
            // A live apply: the booted and staged checkouts where bootc's status says, the
            // live /etc the host's, the record on the host's /run.
            let done = bootc.apply_live().expect("live apply");
            assert_eq!(done.written, ["/etc/chrony.conf"]);
            assert_eq!(
                std::fs::read_to_string(d.root.join("etc/chrony.conf")).unwrap(),
                "server b\n"
            );
            assert!(d.root.join("run/machineos-host/live-applied").is_file());
            assert!(!Path::new(HOST_STATE_DIR).join("live-applied").exists());
            bootc
                .systemctl(&machineos_host::Systemctl::Restart(
                    "chronyd.service".into(),
                ))
                .expect("systemctl through nsenter");
            // rpm-ostree's pull mark, for the next agent.
            let rpm = machineos_host::RpmOstree::new(r.clone(), &d.root);
            rpm.pull(C, None).expect("pull");
            assert!(rpm.status().unwrap().pulled.contains(&C.to_owned()));
        }
        "restarted" => {
            // A new agent in a new container: the mark the last one left is on the host.
            let rpm = machineos_host::RpmOstree::new(r.clone(), &d.root);
            let s = rpm.status().expect("status");
            assert!(s.pulled.contains(&C.to_owned()), "{s:?}");
            // The live record the last agent left is on the host: the next image's file
            // (the staged checkout changed meanwhile) goes live from it.
            let bootc = machineos_host::Bootc::new(r.clone(), &d.root);
            let done = bootc.sync_live().expect("sync");
            assert_eq!(done.written, ["/etc/chrony.conf"]);
            assert_eq!(
                std::fs::read_to_string(d.root.join("etc/chrony.conf")).unwrap(),
                "server b2\n"
            );
        }
        "one-path" => {
            // Before `tools_state_dir`: one path for both sides. The agent makes the
            // directory in its own /run; systemd (on the host) cannot open the log there.
            let mut old = r.clone();
            old.state_dir = PathBuf::from(HOST_STATE_DIR);
            old.tools_state_dir = None;
            let bootc = machineos_host::Bootc::new(old, &d.root);
            match bootc.deploy(D, None) {
                Err(HostError::Tool { stderr, .. }) => {
                    assert!(stderr.contains("No such file or directory"), "{stderr}")
                }
                other => panic!("the one-path layout worked: {other:?}"),
            }
            assert_ne!(d.get("staged").as_deref(), Some(D), "the switch never ran");
        }
        other => panic!("unknown phase {other}"),
    }
}

fn wrapper(d: &Dirs, name: &str) {
    let standins = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/standins");
    let p = d.bin.join(name);
    std::fs::write(
        &p,
        format!(
            "#!/usr/bin/env bash\nexport STANDIN_STATE='{}'\nexec bash '{}' \"$@\"\n",
            d.state.display(),
            standins.join(name).display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The host: a process holding a mount namespace with its own tmpfs `/run`.
struct HostNs(Child);

impl Drop for HostNs {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn can_unshare() -> bool {
    rustix::process::geteuid().is_root()
        && Command::new("unshare")
            .args(["-m", "--propagation", "private", "true"])
            .status()
            .is_ok_and(|s| s.success())
}

#[test]
fn the_agents_runner_holds_across_mount_namespaces() {
    if let Ok(phase) = std::env::var("MACHINEOS_NS_PHASE") {
        return agent_phase(&phase);
    }
    if !can_unshare() {
        assert!(
            std::env::var_os("CI").is_none(),
            "under CI this test needs root and unshare(1)"
        );
        eprintln!("SKIPPED: needs root and unshare -m");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = Dirs::at(tmp.path());
    for dir in [&d.bin, &d.state, &d.root] {
        std::fs::create_dir_all(dir).unwrap();
    }
    for tool in ["bootc", "rpm-ostree", "systemd-run", "systemctl", "ostree"] {
        wrapper(&d, tool);
    }
    // The checkouts of A (booted) and B (what the deploy phase stages), where bootc's status
    // names them (the stand-in's checksum is the digest), and the host's live /etc.
    let checkout = |img: &str| {
        d.root
            .join("sysroot/ostree/deploy/default/deploy")
            .join(format!("{}.0", img.rsplit_once(':').unwrap().1))
    };
    for (img, text) in [(A, "server a\n"), (B, "server b\n")] {
        let p = checkout(img).join("usr/etc/chrony.conf");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    std::fs::create_dir_all(d.root.join("etc")).unwrap();
    std::fs::write(d.root.join("etc/chrony.conf"), "server a\n").unwrap();
    d.set("booted", A);
    d.set("kargs", "rw root=UUID=0a1b");
    for (rel, text) in [
        (
            "proc/cmdline",
            "BOOT_IMAGE=(hd0,gpt3)/vmlinuz rw root=UUID=0a1b\n",
        ),
        ("proc/sys/kernel/random/boot_id", "boot-0\n"),
    ] {
        let p = d.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    std::fs::create_dir_all(d.root.join("run")).unwrap();

    let host = HostNs(
        Command::new("unshare")
            .args(["-m", "--propagation", "private", "--", "bash", "-c"])
            .arg("mount -t tmpfs machineos-test-host-run /run && exec sleep 600")
            .stdin(Stdio::null())
            .spawn()
            .expect("unshare"),
    );
    let host_pid = host.0.id().to_string();
    // Until the host's /run is its own tmpfs.
    let mut ready = false;
    for _ in 0..500 {
        let mounts =
            std::fs::read_to_string(format!("/proc/{host_pid}/mountinfo")).unwrap_or_default();
        if mounts.contains("machineos-test-host-run") {
            ready = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ready, "the host namespace came up");

    let exe = std::env::current_exe().unwrap();
    let container = format!(
        "mount --bind /run '{root}/run' && mount -t tmpfs machineos-test-container-run /run \
         && exec \"$0\" \"$@\"",
        root = d.root.display()
    );
    // The one-path layout first: on a fresh host nothing has made the directory yet.
    for phase in ["one-path", "deploy", "restarted"] {
        let out = Command::new("nsenter")
            .args(["-t", &host_pid, "-m", "--"])
            .args([
                "unshare",
                "-m",
                "--propagation",
                "private",
                "--",
                "bash",
                "-c",
            ])
            .arg(&container)
            .arg(&exe)
            .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
            .env("MACHINEOS_NS_PHASE", phase)
            .env("MACHINEOS_NS_BASE", tmp.path())
            .env("MACHINEOS_NS_HOST_PID", &host_pid)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.contains("1 passed"),
            "phase {phase} in the agent's container namespace:\n{text}"
        );
        if phase == "deploy" {
            // The staged image's file changes (another image staged in its place).
            let p = checkout(B).join("usr/etc/chrony.conf");
            std::fs::remove_file(&p).unwrap();
            std::fs::write(p, "server b2\n").unwrap();
        }
    }
    // The host's /run holds the state; the machine's own /run was never touched.
    assert!(
        !Path::new(HOST_STATE_DIR)
            .join(format!("{UNIT}.stderr"))
            .exists()
    );
    drop(host);
}
