//! `machineos agent` on a host without bootc or rpm-ostree (this test machine): it does not
//! exit (a DaemonSet pod would crash-loop), it says so once — a Warning Event
//! `HostNotImageBased` on its Node, which `kubectl get events` shows — and it ends cleanly on
//! SIGTERM.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use machineos_kubetest::kubectl;

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).exists()))
}

#[test]
fn the_agent_idles_on_a_host_it_cannot_update_and_says_so_once() {
    if on_path("bootc") || on_path("rpm-ostree") {
        // A host with bootc is a reason to skip; a missing kubectl under CI is not.
        eprintln!("SKIPPED: this host has bootc or rpm-ostree");
        return;
    }
    if !common::kubectl_or_skip("the agent on a host it cannot update") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let common::ApiServer {
        rt: _rt,
        server: _server,
        kubeconfig,
        kubectl: k,
    } = common::start(tmp.path(), kubectl::DEFAULT_DEADLINE);
    let node = tmp.path().join("node.yaml");
    std::fs::write(
        &node,
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: plain-1\n",
    )
    .unwrap();
    k.ok(&["apply", "-f", node.to_str().unwrap()]).unwrap();
    k.ok(&["create", "namespace", "machineos"]).unwrap();

    let mut agent = Command::new(env!("CARGO_BIN_EXE_machineos"))
        .args(["agent", "--node", "plain-1", "--host-exec", "direct"])
        .arg("--host-root")
        .arg(tmp.path())
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("machineos agent starts");

    let deadline = Instant::now() + Duration::from_secs(60);
    let events = loop {
        let out = k.ok(&["get", "events", "-A"]).unwrap_or_default();
        if out.contains("HostNotImageBased") {
            break out;
        }
        assert!(
            agent.try_wait().unwrap().is_none(),
            "the agent exited instead of idling"
        );
        assert!(Instant::now() < deadline, "no Event:\n{out}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(events.contains("node/plain-1"), "{events}");
    assert!(events.contains("neither bootc nor rpm-ostree"), "{events}");
    // Still running, a while later.
    std::thread::sleep(Duration::from_secs(2));
    assert!(agent.try_wait().unwrap().is_none(), "the agent exited");
    let said = k.ok(&["get", "events", "-A", "-o", "name"]).unwrap();
    assert_eq!(said.lines().count(), 1, "said once: {said}");

    Command::new("kill")
        .args(["-TERM", &agent.id().to_string()])
        .status()
        .unwrap();
    let status = kubectl::wait(&mut agent, "machineos agent", Duration::from_secs(30))
        .expect("the agent exits on SIGTERM");
    let mut log = String::new();
    if let Some(mut e) = agent.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut log);
    }
    assert!(status.success(), "exit {status:?}:\n{log}");
    assert!(log.contains("HostNotImageBased"), "{log}");
}
