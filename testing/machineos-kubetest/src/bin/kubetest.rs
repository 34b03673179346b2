//! `kubetest serve [--port N] [--tls] [--kubeconfig-out FILE]`: runs the test API server
//! on 127.0.0.1 (port 0 = any free port), once it listens writes a kubeconfig for it
//! atomically (temporary file and rename: a reader polling for the file never sees half
//! of it) and prints its URL on stdout, and runs until SIGTERM/SIGINT or until its
//! standard input closes. `--tls` serves HTTPS with a CA and bearer token generated at
//! start, both in the kubeconfig (`certificate-authority-data`, `token`). The disruption
//! controller runs in it (PodDisruptionBudget status kept current), as in a cluster.

use std::path::Path;

use machineos_kubetest::http::{Server, ServerOptions, new_store};
use tokio::io::AsyncReadExt;
use tokio::signal::unix::{SignalKind, signal};

const USAGE: &str = "usage: kubetest serve [--port N] [--tls] [--kubeconfig-out FILE]";

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut port = 0u16;
    let mut out = None;
    let mut tls = false;
    let mut it = args.iter();
    if it.next().map(String::as_str) != Some("serve") {
        eprintln!("{USAGE}");
        return std::process::ExitCode::from(2);
    }
    while let Some(a) = it.next() {
        if a == "--tls" {
            tls = true;
            continue;
        }
        match (a.as_str(), it.next()) {
            ("--port", Some(p)) => match p.parse() {
                Ok(p) => port = p,
                Err(_) => {
                    eprintln!("kubetest: bad port {p:?}\n{USAGE}");
                    return std::process::ExitCode::from(2);
                }
            },
            ("--kubeconfig-out", Some(f)) => out = Some(f.clone()),
            _ => {
                eprintln!("kubetest: unexpected argument {a:?}\n{USAGE}");
                return std::process::ExitCode::from(2);
            }
        }
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kubetest: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(serve(port, tls, out));
    // Not a plain drop: that waits for the blocking thread still reading stdin, so a
    // SIGTERM would never end the process.
    rt.shutdown_background();
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kubetest: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve(port: u16, tls: bool, out: Option<String>) -> std::io::Result<()> {
    let opts = ServerOptions {
        port,
        tls,
        ..ServerOptions::default()
    };
    // The handlers first: a SIGTERM sent as soon as the URL is printed must not find the
    // default action (death by signal) still in place.
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let server = Server::start_with(new_store(), opts).await?;
    let _budgets = machineos_kubetest::hooks::DisruptionController::spawn(server.shared().clone());
    if let Some(f) = out {
        server.write_kubeconfig(Path::new(&f)).await?;
    }
    println!("{}", server.url());
    let stdin_closed = async {
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 1024];
        while let Ok(n) = stdin.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = stdin_closed => {}
    }
    server.shutdown();
    Ok(())
}
