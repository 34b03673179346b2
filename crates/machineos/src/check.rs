//! `machineos check`: the preflight a CI pipeline runs before a build — does pulling the base
//! need credentials at all (asked without them), do the credentials given pull it, and may
//! they push to the output repository (a blob upload started and cancelled: nothing is
//! written). A failed check names the registry and what to configure; the exit status is 1
//! when any check fails.

use anyhow::Context;
use machineos_image::{ImageRef, RegistryRef};
use machineos_registry::{PullAccess, Registry, RegistryError};
use serde::Serialize;

/// Arguments of `machineos check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The base image (`host[:port]/repo[:tag][@digest]`).
    #[arg(long, value_name = "IMAGE")]
    base: String,
    /// Where the build would push (its repository is checked for push permission).
    #[arg(long, value_name = "IMAGE")]
    output: Option<String>,
    /// `text` or `json`.
    #[arg(short = 'o', long = "format", default_value = "text", value_parser = ["text", "json"])]
    format: String,
    #[command(flatten)]
    registry: crate::registry::RegistryArgs,
}

/// What the checks found (`-o json`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    base: String,
    /// Whether the registry serves the base without credentials.
    anonymous_pull: Option<bool>,
    /// `ok`, or why the base cannot be pulled with the credentials found.
    pull: String,
    /// The base's digest, when it could be pulled.
    digest: Option<String>,
    output: Option<String>,
    /// `ok`, or why pushing there would fail.
    push: Option<String>,
    /// Something to know that did not fail a check.
    warnings: Vec<String>,
    ok: bool,
}

fn registry_ref(flag: &str, s: &str) -> anyhow::Result<RegistryRef> {
    match ImageRef::parse(s).with_context(|| format!("{flag} {s}"))? {
        ImageRef::Registry(r) => Ok(r),
        _ => anyhow::bail!("{flag} {s}: a registry image is needed (not an OCI layout)"),
    }
}

/// What to tell the user when `e` refused them.
fn explain(e: &RegistryError, what: &str) -> String {
    match e {
        RegistryError::Unauthorized {
            registry,
            had_credentials: false,
            ..
        } => format!(
            "{registry} requires authentication to {what} and no credentials for it were found: \
             give --authfile (or REGISTRY_AUTH_FILE, ~/.docker/config.json) with an entry for {registry}"
        ),
        RegistryError::Unauthorized { registry, .. } => {
            format!("{registry} refused the credentials to {what}: {e}")
        }
        e if machineos_diagnostics::Classify::reason(e) == "RegistryNameUnresolved" => {
            format!("the registry's host name does not resolve (DNS) — is it spelt right? {e}")
        }
        e => e.to_string(),
    }
}

/// A failure that says nothing about access: the registry was never reached.
fn unreachable(e: &RegistryError) -> bool {
    use machineos_diagnostics::Classify as _;
    matches!(
        e.reason(),
        "RegistryNameUnresolved" | "RegistryUnavailable" | "RegistryTimeout" | "DeadlineExceeded"
    )
}

async fn run_checks(
    registry: &Registry,
    base: &RegistryRef,
    output: Option<&RegistryRef>,
) -> Report {
    let mut report = Report {
        base: base.to_string(),
        anonymous_pull: None,
        pull: String::new(),
        digest: None,
        output: output.map(ToString::to_string),
        push: None,
        warnings: Vec::new(),
        ok: true,
    };
    match registry.pull_access(base).await {
        Ok(PullAccess::Anonymous) => report.anonymous_pull = Some(true),
        Ok(PullAccess::AuthRequired(_)) => report.anonymous_pull = Some(false),
        // The registry cannot be reached at all (its name does not resolve, it does not
        // answer): the pull would fail the same way — said once, as the pull's failure.
        Err(e) if unreachable(&e) => {
            report.pull = explain(&e, &format!("pull {base}"));
            report.ok = false;
        }
        Err(e) => report
            .warnings
            .push(format!("the anonymous probe failed: {e}")),
    }
    let pull = if report.ok {
        Some(registry.image_info(base).await)
    } else {
        None
    };
    match pull.unwrap_or(Ok(None)) {
        _ if !report.ok => {}
        Ok(Some(info)) => {
            report.pull = "ok".into();
            report.digest = Some(info.digest.to_string());
        }
        Ok(None) => {
            report.pull = format!("{base} does not exist");
            report.ok = false;
        }
        Err(e) => {
            report.pull = explain(&e, &format!("pull {base}"));
            report.ok = false;
        }
    }
    if let Some(out) = output {
        match registry.check_push(out).await {
            Ok(check) => {
                report.push = Some("ok".into());
                report.warnings.extend(check.cancel_warning);
            }
            Err(e) => {
                report.push = Some(explain(&e, &format!("push to {}", out.repository())));
                report.ok = false;
            }
        }
    }
    report
}

fn text(r: &Report) -> String {
    let mut out = String::new();
    let anonymous = match r.anonymous_pull {
        Some(true) => "anonymous pull allowed (no pull secret needed)",
        Some(false) => "anonymous pull refused (a pull secret is needed)",
        None => "anonymous pull unknown",
    };
    out.push_str(&format!("base {}: {anonymous}\n", r.base));
    match &r.digest {
        Some(d) => out.push_str(&format!("base {}: pull ok ({d})\n", r.base)),
        None => out.push_str(&format!("base {}: pull FAILED: {}\n", r.base, r.pull)),
    }
    if let (Some(o), Some(p)) = (&r.output, &r.push) {
        if p == "ok" {
            out.push_str(&format!(
                "output {o}: push ok (an upload was started and cancelled)\n"
            ));
        } else {
            out.push_str(&format!("output {o}: push FAILED: {p}\n"));
        }
    }
    for w in &r.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out.trim_end().to_owned()
}

/// Run `machineos check`.
pub fn run(args: &CheckArgs) -> anyhow::Result<()> {
    let base = registry_ref("--base", &args.base)?;
    let output = args
        .output
        .as_deref()
        .map(|o| registry_ref("--output", o))
        .transpose()?;
    let registry = Registry::new(args.registry.options()?)?;
    let report = crate::cli::runtime()?.block_on(run_checks(&registry, &base, output.as_ref()));
    if args.format == "json" {
        crate::cli::emit(&serde_json::to_string_pretty(&report)?)?;
    } else {
        crate::cli::emit(&text(&report))?;
    }
    if !report.ok {
        anyhow::bail!("the preflight failed (see above)");
    }
    Ok(())
}
