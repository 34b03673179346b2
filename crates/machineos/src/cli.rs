//! What every subcommand shares and `main` provides: the error chain as printed, the
//! graceful-stop signal, the async runtime, and output that survives a closed pipe. Its own
//! module, so no subcommand imports from `main`.

/// The error and its causes, `: `-joined. Library errors carry their causes in their own
/// message and never also as `source()` (see `machineos_diagnostics`), so each cause
/// appears once; the CLI's own context comes first.
pub fn error_chain(e: &anyhow::Error) -> String {
    format!("{e:#}")
}

/// A token cancelled on SIGTERM or SIGINT (the long-running commands' graceful stop). Call
/// inside the runtime.
pub fn shutdown_on_signal() -> tokio_util::sync::CancellationToken {
    let shutdown = tokio_util::sync::CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        on_signal.cancel();
    });
    shutdown
}

/// The async runtime the registry work runs on.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Writes one line of output to stdout. A closed pipe (`machineos inspect … | head`) ends
/// the output quietly instead of panicking as `println!` would.
pub fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// Whether log lines get colours: only on a terminal, and never with `NO_COLOR` set to
/// anything but the empty string (no-color.org) — files and pod logs stay plain text.
pub fn log_colour(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

#[cfg(test)]
mod tests {
    use super::log_colour;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(log_colour(true, None));
        assert!(log_colour(true, Some(OsStr::new(""))));
        assert!(!log_colour(true, Some(OsStr::new("1"))));
        assert!(!log_colour(false, None));
    }
}
