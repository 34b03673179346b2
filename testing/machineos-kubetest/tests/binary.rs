//! `kubetest serve` ends as its contract says: on SIGTERM while its standard input is still
//! open (a blocked stdin read must not keep the process alive), and when its standard
//! input closes.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn start() -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubetest"))
        .args(["serve", "--port", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("http://127.0.0.1:"), "{line:?}");
    (child, line.trim().to_string())
}

/// Waits for the exit (killing the child and failing after 20 s).
fn exits(child: &mut Child, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("kubetest serve did not exit after {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_ends_it_with_stdin_open() {
    let (mut child, _url) = start();
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let st = exits(&mut child, "SIGTERM");
    assert!(st.success(), "{st:?}");
    drop(child.stdin.take());
}

#[test]
fn closing_stdin_ends_it() {
    let (mut child, url) = start();
    // It serves until then.
    let addr = url.trim_start_matches("http://");
    assert!(std::net::TcpStream::connect(addr).is_ok());
    drop(child.stdin.take());
    let st = exits(&mut child, "stdin closed");
    assert!(st.success(), "{st:?}");
}
