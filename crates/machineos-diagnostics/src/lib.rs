//! What every machineos library reports besides its result: typed [`Warning`]s, and how a
//! caller acts on an error ([`Classify`]).
//!
//! A controller's reconcile turns a library error into data: whether to requeue with
//! backoff ([`Retry::Transient`]: a registry 5xx, 429 or reset, an API conflict, a timeout)
//! or to report and wait for the input to change ([`Retry::Permanent`]: a bad config, auth
//! denied, a missing base), and a short stable [`Classify::reason`] that is both a
//! Kubernetes condition `reason` and a metric label. The CLI prints the same errors.
//!
//! **Convention for causes.** A machineos error's `Display` carries its whole story — what
//! failed, on which object and path, and why — and it does not also expose the cause as
//! [`std::error::Error::source`]. So an error prints once, whole, with `{}`, and a chain
//! walked with `source()` (anyhow's `{:#}`) shows each cause exactly once without any
//! de-duplication of substrings. ([`check_chain`] tests a value against this convention.)
//!
//! Messages that must read as a Go program's (the MCO's, kube-apiserver's) share Go's
//! formats: [`go_quote`] (`%q`) and [`go_octal`] (`%#o`).
//!
//! How long to wait before repeating is the one [`Backoff`] (module [`backoff`]); an error
//! that must cross a boundary as a value keeps its class as a [`Classified`].
//!
//! No I/O and no dependency on any other machineos crate: every library depends on this one.

pub mod backoff;
pub mod classified;
pub use backoff::Backoff;
pub use classified::Classified;

/// Whether repeating the failed operation, unchanged, can succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Retry {
    /// Yes, after a backoff: the failure was in the environment (a registry 5xx or 429, a
    /// reset or timed-out connection, an API conflict, a full disk).
    Transient,
    /// No: the input or the permissions must change first (a bad config, auth denied, a
    /// missing base, a malformed image).
    Permanent,
}

/// How a caller acts on an error: retry or not, and under which reason to report it.
pub trait Classify {
    /// A short, stable reason in CamelCase (`RegistryUnavailable`, `InvalidConfig`, …):
    /// valid as a Kubernetes condition `reason` (see [`is_valid_reason`]) and as a metric
    /// label. Reasons name a kind of failure, never a value, so the set is small and fixed.
    fn reason(&self) -> &'static str;

    /// Whether to retry with backoff.
    fn retry(&self) -> Retry;

    /// Shorthand for `self.retry() == Retry::Transient`.
    fn is_transient(&self) -> bool {
        self.retry() == Retry::Transient
    }
}

/// How an I/O error is classified: interrupted, timed-out, reset and out-of-space
/// conditions are transient; the rest (not found, permission denied, invalid data) are not.
pub fn io_retry(e: &std::io::Error) -> Retry {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::Interrupted
        | K::TimedOut
        | K::WouldBlock
        | K::ConnectionReset
        | K::ConnectionAborted
        | K::ConnectionRefused
        | K::BrokenPipe
        | K::UnexpectedEof
        | K::StorageFull
        | K::ResourceBusy
        | K::OutOfMemory => Retry::Transient,
        _ => Retry::Permanent,
    }
}

/// Whether `reason` matches the Kubernetes condition reason format
/// (`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`, at most 1024 characters).
pub fn is_valid_reason(reason: &str) -> bool {
    let b = reason.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':');
    !b.is_empty()
        && b.len() <= 1024
        && b[0].is_ascii_alphabetic()
        && b.iter().all(inner)
        && b.last()
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// Checks an error against the convention for causes: when it has a `source()`, its own
/// text must not already contain the source's text (else a chain would print it twice).
/// Returns the offending pair, for tests.
pub fn check_chain(e: &(dyn std::error::Error + 'static)) -> Result<(), (String, String)> {
    let mut cur = e;
    while let Some(next) = cur.source() {
        let (outer, inner) = (cur.to_string(), next.to_string());
        if !inner.is_empty() && outer.contains(&inner) {
            return Err((outer, inner));
        }
        cur = next;
    }
    Ok(())
}

/// Checks an error against what a caller expects of it — `reason` and `retry`, a reason
/// valid as a Kubernetes condition reason, a non-empty message, each cause printed once
/// ([`check_chain`]) — and says what is off. For the error tables of every crate's tests.
pub fn check_classified(e: &dyn ClassifiedError, reason: &str, retry: Retry) -> Result<(), String> {
    let text = e.to_string();
    if (e.reason(), e.retry()) != (reason, retry) {
        return Err(format!(
            "{text}: classified {:?} {:?}, expected {reason:?} {retry:?}",
            e.reason(),
            e.retry()
        ));
    }
    if e.is_transient() != (retry == Retry::Transient) {
        return Err(format!("{text}: is_transient disagrees with retry"));
    }
    if !is_valid_reason(e.reason()) {
        return Err(format!("{text}: reason {:?} is not valid", e.reason()));
    }
    if text.is_empty() {
        return Err(format!("{:?} has an empty message", e.reason()));
    }
    check_chain(e).map_err(|(outer, inner)| format!("{outer:?} also has the cause {inner:?}"))
}

/// An error that says how to act on it: what [`check_classified`] checks (every machineos
/// library error).
pub trait ClassifiedError: Classify + std::error::Error + 'static {}

impl<E: Classify + std::error::Error + 'static> ClassifiedError for E {}

/// A non-fatal finding, reported and otherwise ignored: where (a JSON path such as
/// `$.storage.files.0.contnets`, a path in the image, or a file) and what.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Warning {
    /// Where: a JSON path, a path in the image, a file; empty when it is about the whole
    /// operation.
    pub path: String,
    /// What, in a sentence.
    pub message: String,
}

impl Warning {
    /// A warning at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Warning {
        Warning {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "warning: {}", self.message)
        } else {
            write!(f, "warning at {}: {}", self.path, self.message)
        }
    }
}

/// Go's `strconv.Quote` (`%q`), for messages that must read as the Go program's they
/// reproduce: `"…"` with `\"`, `\\`, the C escapes, and `\x..`/`\u....` for other
/// control characters; printable characters, non-ASCII ones included, as they are.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            // Rust's control characters (category Cc) are all below U+0100.
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%#o`, as the MCO prints file modes: a leading `0` (`01755`, `0644`, `0`, `-01`).
pub fn go_octal(n: i64) -> String {
    match n {
        0 => "0".to_owned(),
        n if n < 0 => format!("-0{:o}", n.unsigned_abs()),
        n => format!("0{n:o}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_checked_against_the_kubernetes_pattern() {
        for ok in ["A", "RegistryUnavailable", "Bad_Config", "a:b,c_1"] {
            assert!(is_valid_reason(ok), "{ok}");
        }
        for bad in ["", "1Up", "Trailing,", "With space", "dash-ed", "Colon:"] {
            assert!(!is_valid_reason(bad), "{bad}");
        }
        assert!(!is_valid_reason(&"A".repeat(1025)));
    }

    #[derive(Debug)]
    struct Leaf;
    impl std::fmt::Display for Leaf {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("disk full")
        }
    }
    impl std::error::Error for Leaf {}

    #[derive(Debug)]
    struct Outer(bool);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("writing x: disk full")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.0.then_some(&Leaf)
        }
    }

    #[test]
    fn a_cause_both_displayed_and_sourced_is_caught() {
        assert_eq!(
            check_chain(&Outer(true)),
            Err(("writing x: disk full".into(), "disk full".into()))
        );
        assert_eq!(check_chain(&Outer(false)), Ok(()));
    }

    #[test]
    fn go_formats() {
        for (mode, want) in [
            (0o1755, "01755"),
            (0o644, "0644"),
            (0, "0"),
            (-1, "-01"),
            (0o7777, "07777"),
        ] {
            assert_eq!(go_octal(mode), want);
        }
        assert_eq!(
            go_quote("a\"b\\c\n\t\u{1}\u{7f}\u{85}é"),
            r#""a\"b\\c\n\t\x01\x7f\u0085é""#
        );
    }

    #[test]
    fn io_errors_split_by_kind() {
        use std::io::{Error, ErrorKind};
        assert_eq!(
            io_retry(&Error::from(ErrorKind::TimedOut)),
            Retry::Transient
        );
        assert_eq!(
            io_retry(&Error::from(ErrorKind::StorageFull)),
            Retry::Transient
        );
        assert_eq!(
            io_retry(&Error::from(ErrorKind::NotFound)),
            Retry::Permanent
        );
        assert_eq!(
            io_retry(&Error::from(ErrorKind::PermissionDenied)),
            Retry::Permanent
        );
    }

    #[test]
    fn warnings_print_their_path_when_they_have_one() {
        assert_eq!(
            Warning::new("$.a", "unknown key").to_string(),
            "warning at $.a: unknown key"
        );
        assert_eq!(Warning::new("", "cache").to_string(), "warning: cache");
    }
}
