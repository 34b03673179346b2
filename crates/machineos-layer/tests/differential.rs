//! Differential test: every case in `tests/differential/cases/` is applied by the real
//! `ignition-apply` (Debian's ignition 2.14) to a copy of an RHCOS-like base tree, and by our
//! engine as a layer tar extracted over another copy; the two trees must be identical (type,
//! mode, owner, content, link target, hard links), both sides must fail together, and
//! deliberate deviations from 2.14 are checked against what the case says we produce.
//!
//! A `harness = false` test (libtest-mimic): each case file is its own trial, named by its
//! file stem (`cargo test -p machineos-layer --test differential -- --list`; a name filter
//! such as `-- file-01` runs the matching cases), and so are the harness's own checks
//! (`harness_detects_differences`, `harness_extracts_layers`). The base tree is built once,
//! by the first case that runs.
//!
//! Needs root (ownership) and `ignition-apply`; every case fails without them unless
//! `MACHINEOS_SKIP_DIFFERENTIAL=1`, which reports every trial as ignored, with the reason.
//! Debugging aids: `--nocapture` prints both sides' errors for passing cases too,
//! `MACHINEOS_DIFF_CASE=substr` keeps only matching cases, `MACHINEOS_DIFF_KEEP=1` keeps the
//! trees and prints where, `MACHINEOS_DIFF_REFERENCE_ONLY=1` checks only the reference side
//! against the cases.

mod support;

use machineos_layer::DirView;
use machineos_layer::ignition_layer_tar;

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use support::cases::{Case, CompareTo, Expect};
use support::tree::{CompareOptions, Tree};
use support::{base_tree, cases, extract, reference, selftest, tree};

/// Generous: a run takes well under a second, but a remote source would retry forever.
const REFERENCE_TIMEOUT: Duration = Duration::from_secs(60);

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}

fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .map_err(|e| format!("running cp: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cp -a {} {} failed", from.display(), to.display()))
    }
}

/// An error with its sources, on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let _ = write!(s, ": {inner}");
        src = inner.source();
    }
    s
}

struct Env<'a> {
    bin: &'a Path,
    base: &'a Path,
    base_tree: &'a Tree,
    work: &'a Path,
    mode: Mode,
}

/// What produces "our" side.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The engine (the real test).
    Engine,
    /// Nothing: only the reference side is checked against the cases.
    ReferenceOnly,
    /// The naive base→reference diff layer: checks the harness itself.
    SelfTest,
}

/// The result of one case: problems (empty = pass) and notes shown either way.
#[derive(Default)]
struct Report {
    description: String,
    problems: Vec<String>,
    notes: Vec<String>,
}

fn run_case(env: &Env, file: &Path, name: &str) -> Report {
    let mut r = Report::default();
    let case: Case = match std::fs::read(file)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(c) => c,
        Err(e) => {
            r.problems.push(format!("case file: {e}"));
            return r;
        }
    };
    r.description = case.description.clone();
    if let Err(e) = case.validate() {
        r.problems.push(format!("case file: {e}"));
        return r;
    }
    let config = case.config_bytes().expect("validated");
    let dir = env.work.join(name);
    let setup = || -> Result<(), String> {
        std::fs::create_dir(&dir).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("config.ign"), &config).map_err(|e| e.to_string())
    };
    if let Err(e) = setup() {
        r.problems.push(format!("setup: {e}"));
        return r;
    }

    // The reference side.
    let a = dir.join("A");
    if let Err(e) = copy_tree(env.base, &a) {
        r.problems.push(format!("setup: {e}"));
        return r;
    }
    let out = match reference::run(env.bin, &a, &dir.join("config.ign"), REFERENCE_TIMEOUT) {
        Ok(o) => o,
        Err(e) => {
            r.problems.push(format!("running ignition-apply: {e}"));
            return r;
        }
    };
    let ref_summary = reference::error_summary(&out.output);
    let a_tree = match tree::snapshot(&a) {
        Ok(t) => t,
        Err(e) => {
            r.problems
                .push(format!("snapshot of the reference tree: {e}"));
            return r;
        }
    };
    match (case.expect, out.success) {
        (Expect::Ok, true) => {
            r.problems.extend(cases::check_entries(
                "reference",
                &a_tree,
                &case.entries,
                case.compare_preset_sorted,
            ));
            if case.unchanged {
                let d = tree::diff(
                    "base",
                    env.base_tree,
                    "reference",
                    &a_tree,
                    &CompareOptions::default(),
                );
                r.problems.extend(
                    d.into_iter()
                        .map(|l| format!("reference changed the base: {l}")),
                );
            }
        }
        (Expect::Ok, false) => r.problems.push(format!(
            "reference: ignition-apply failed, the case expects success:\n{}",
            indent(&ref_summary)
        )),
        (Expect::Error, true) => r
            .problems
            .push("reference: ignition-apply succeeded, the case expects an error".to_string()),
        (Expect::Error, false) => {
            r.notes.push(format!(
                "reference error: {}",
                ref_summary.replace('\n', " | ")
            ));
            if let Some(want) = &case.error_contains
                && !out.output.contains(want.as_str())
            {
                r.problems.push(format!(
                    "reference: the error does not contain {want:?}:\n{}",
                    indent(&ref_summary)
                ));
            }
        }
    }
    let ours_case = case.ours.as_ref();
    let ours_expect = ours_case.and_then(|o| o.expect).unwrap_or(case.expect);
    let ours_contains = match ours_case.and_then(|o| o.error_contains.clone()) {
        Some(c) => Some(c),
        None if ours_expect == case.expect => case.error_contains.clone(),
        None => None,
    };

    // Our side: the engine, or in self-test mode the naive diff of base and reference.
    let result = match env.mode {
        Mode::ReferenceOnly => return r,
        Mode::SelfTest if !out.success || case.ours.is_some() => return r,
        Mode::SelfTest => Ok(selftest::diff_layer(env.base_tree, &a_tree)),
        Mode::Engine => {
            let view = DirView::new(env.base);
            let first = ignition_layer_tar(&config, name, &view).map_err(|e| error_chain(&e));
            if let Ok(layer) = &first {
                match ignition_layer_tar(&config, name, &view) {
                    Ok(again) if again == *layer => {}
                    Ok(_) => r
                        .problems
                        .push("ours: two runs on the same inputs gave different tars".to_string()),
                    Err(e) => r
                        .problems
                        .push(format!("ours: the second run failed: {}", error_chain(&e))),
                }
            }
            first
        }
    };
    let reference_said = || {
        if out.success {
            "\n  reference succeeded".to_string()
        } else {
            format!("\n  reference said:\n{}", indent(&ref_summary))
        }
    };
    let layer = match (result, ours_expect) {
        (Err(msg), Expect::Error) => {
            r.notes.push(format!("our error: {msg}"));
            if let Some(want) = &ours_contains
                && !msg.contains(want.as_str())
            {
                r.problems.push(format!(
                    "ours: the error does not contain {want:?}: {msg}{}",
                    reference_said()
                ));
            }
            return r;
        }
        (Err(msg), Expect::Ok) => {
            r.problems.push(format!(
                "ours: failed, expected success: {msg}{}",
                reference_said()
            ));
            return r;
        }
        (Ok(_), Expect::Error) => {
            r.problems.push(format!(
                "ours: succeeded, expected an error{}{}",
                ours_contains
                    .as_deref()
                    .map(|c| format!(" containing {c:?}"))
                    .unwrap_or_default(),
                reference_said()
            ));
            return r;
        }
        (Ok(layer), Expect::Ok) => layer,
    };
    let _ = std::fs::write(dir.join("layer.tar"), &layer);
    let b = dir.join("B");
    if let Err(e) = copy_tree(env.base, &b) {
        r.problems.push(format!("setup: {e}"));
        return r;
    }
    if let Err(e) = extract::apply_layer(&layer, &b) {
        r.problems
            .push(format!("ours: the layer does not apply: {e}"));
        return r;
    }
    let b_tree = match tree::snapshot(&b) {
        Ok(t) => t,
        Err(e) => {
            r.problems.push(format!("snapshot of our tree: {e}"));
            return r;
        }
    };
    let mut opts = CompareOptions {
        preset_sorted: case.compare_preset_sorted,
        ignore: BTreeSet::new(),
    };
    match &case.ours {
        None => {
            let d = tree::diff("reference", &a_tree, "ours", &b_tree, &opts);
            r.problems.extend(d);
        }
        Some(o) => {
            r.problems.extend(cases::check_entries(
                "ours",
                &b_tree,
                &o.entries,
                case.compare_preset_sorted,
            ));
            opts.ignore = o.ignore.iter().chain(o.entries.keys()).cloned().collect();
            let d = match o.compare {
                CompareTo::Reference if !out.success => {
                    vec![
                        "case file: `ours.compare` is `reference` but the reference failed"
                            .to_string(),
                    ]
                }
                CompareTo::Reference => tree::diff("reference", &a_tree, "ours", &b_tree, &opts),
                CompareTo::Base => tree::diff("base", env.base_tree, "ours", &b_tree, &opts),
                CompareTo::None => Vec::new(),
            };
            r.problems.extend(d);
        }
    }
    r
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why a trial cannot run here (not root), or `Ok`.
fn require_root(test: &str) -> Result<(), String> {
    if effective_uid() == Some(0) {
        return Ok(());
    }
    Err(format!(
        "{test}: must run as root (the trees need chown/lchown); run the tests as root \
         or set MACHINEOS_SKIP_DIFFERENTIAL=1 to skip the differential suite"
    ))
}

/// What the cases share: the reference binary and one pristine base tree.
struct Shared {
    bin: PathBuf,
    work: tempfile::TempDir,
    base: PathBuf,
    base_tree: Tree,
}

/// Built by the first case that runs; an `Err` fails every case with its message.
type SharedCell = Arc<OnceLock<Result<Shared, String>>>;

fn setup() -> Result<Shared, String> {
    let bin = reference::binary();
    if !bin.is_file() {
        return Err(format!(
            "ignition-apply is not installed ({} is missing). Install Debian's `ignition` \
             package (apt-get install -y ignition), point MACHINEOS_IGNITION_BIN at the binary, \
             or set MACHINEOS_SKIP_DIFFERENTIAL=1 to skip the differential suite",
            bin.display()
        ));
    }
    require_root("differential")?;
    let work = tempfile::Builder::new()
        .prefix("machineos-differential-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    let base = work.path().join("base");
    std::fs::create_dir(&base).map_err(|e| format!("base dir: {e}"))?;
    base_tree::build(&base).map_err(|e| format!("building the base tree: {e}"))?;
    let base_tree = tree::snapshot(&base).map_err(|e| format!("snapshot of the base: {e}"))?;
    Ok(Shared {
        bin,
        work,
        base,
        base_tree,
    })
}

/// Why every trial is skipped, if it is: `MACHINEOS_SKIP_DIFFERENTIAL=1`, saying whether the
/// reference could have run.
fn skip_reason() -> Option<String> {
    if !env_flag("MACHINEOS_SKIP_DIFFERENTIAL") {
        return None;
    }
    let bin = reference::binary();
    Some(if bin.is_file() {
        "MACHINEOS_SKIP_DIFFERENTIAL=1".to_string()
    } else {
        format!(
            "MACHINEOS_SKIP_DIFFERENTIAL=1; ignition-apply is not installed ({} is missing)",
            bin.display()
        )
    })
}

/// One case as a trial: pass, or fail with the case's description, problems and notes.
fn case_trial(
    file: PathBuf,
    name: String,
    shared: SharedCell,
    mode: Mode,
    skip: Option<String>,
    verbose: bool,
    keep: bool,
) -> Trial {
    Trial::ignorable_test(name.clone(), move || {
        if let Some(reason) = skip {
            return Ok(Completion::ignored_with(reason));
        }
        let s = shared
            .get_or_init(setup)
            .as_ref()
            .map_err(|e| Failed::from(format!("differential: {e}")))?;
        let env = Env {
            bin: &s.bin,
            base: &s.base,
            base_tree: &s.base_tree,
            work: s.work.path(),
            mode,
        };
        let report = run_case(&env, &file, &name);
        if !keep {
            let _ = std::fs::remove_dir_all(s.work.path().join(&name));
        }
        let notes: String = report.notes.iter().map(|n| format!("\n  ({n})")).collect();
        if report.problems.is_empty() {
            if verbose && !notes.is_empty() {
                println!("{name}:{notes}");
            }
            return Ok(Completion::Completed);
        }
        let mut msg = format!("FAIL {name}: {}", report.description);
        for p in &report.problems {
            let _ = write!(msg, "\n  - {}", p.replace('\n', "\n    "));
        }
        msg.push_str(&notes);
        Err(msg.into())
    })
}

/// A check that needs only root, as a trial (skipped with the suite).
fn harness_trial(name: &str, skip: Option<String>, check: fn() -> Result<(), String>) -> Trial {
    let test = name.to_string();
    Trial::ignorable_test(name, move || match skip {
        Some(reason) => Ok(Completion::ignored_with(reason)),
        None => {
            require_root(&test)?;
            check()?;
            Ok(Completion::Completed)
        }
    })
}

fn main() -> std::process::ExitCode {
    let args = Arguments::from_args();
    let skip = skip_reason();
    let keep = env_flag("MACHINEOS_DIFF_KEEP");
    let filter = std::env::var("MACHINEOS_DIFF_CASE").ok();
    let mode = if env_flag("MACHINEOS_DIFF_SELFTEST") {
        Mode::SelfTest
    } else if env_flag("MACHINEOS_DIFF_REFERENCE_ONLY") {
        Mode::ReferenceOnly
    } else {
        Mode::Engine
    };
    if !args.list {
        if let Some(reason) = &skip {
            eprintln!("differential: every trial is ignored ({reason})");
        }
        match mode {
            Mode::Engine => {}
            Mode::ReferenceOnly => eprintln!("differential: reference side only"),
            Mode::SelfTest => eprintln!("differential: harness self-test"),
        }
    }

    let shared: SharedCell = Arc::new(OnceLock::new());
    let mut trials = vec![
        harness_trial(
            "harness_detects_differences",
            skip.clone(),
            harness_detects_differences,
        ),
        harness_trial(
            "harness_extracts_layers",
            skip.clone(),
            harness_extracts_layers,
        ),
    ];
    let cases_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/differential/cases");
    match cases::case_files(&cases_dir) {
        Err(e) => {
            let msg = format!("reading {}: {e}", cases_dir.display());
            trials.push(Trial::test("cases", move || Err(msg.into())));
        }
        Ok(files) => {
            let mut matched = 0;
            for file in files {
                let name = file
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                if filter.as_deref().is_some_and(|s| !name.contains(s)) {
                    continue;
                }
                matched += 1;
                trials.push(case_trial(
                    file,
                    name,
                    shared.clone(),
                    mode,
                    skip.clone(),
                    args.nocapture,
                    keep,
                ));
            }
            if matched == 0 {
                let msg = format!(
                    "no case matches MACHINEOS_DIFF_CASE={:?}",
                    filter.as_deref().unwrap_or_default()
                );
                trials.push(Trial::test("cases", move || Err(msg.into())));
            }
        }
    }

    let conclusion = libtest_mimic::run(&args, trials);
    // Every trial has run and dropped its handle: the work directory goes now, or is kept.
    let shared = Arc::into_inner(shared).and_then(OnceLock::into_inner);
    if let Some(Ok(s)) = shared
        && keep
    {
        let kept = s.work.keep();
        eprintln!(
            "differential: trees kept under {} (<case>/A = reference, <case>/B = ours)",
            kept.display()
        );
    }
    conclusion.exit_code()
}

/// A fresh base tree in a temp dir.
fn fresh_base() -> (tempfile::TempDir, PathBuf) {
    let work = tempfile::Builder::new()
        .prefix("machineos-harness-")
        .tempdir()
        .expect("temp dir");
    let base = work.path().join("base");
    std::fs::create_dir(&base).expect("base dir");
    base_tree::build(&base).expect("building the base tree");
    (work, base)
}

/// The harness must see every kind of difference, or the differential test proves nothing.
fn harness_detects_differences() -> Result<(), String> {
    use std::os::unix::fs::{PermissionsExt, lchown, symlink};
    let (work, base) = fresh_base();
    let copy = work.path().join("copy");
    copy_tree(&base, &copy).expect("copy");
    let before = tree::snapshot(&base).expect("snapshot");
    let opts = CompareOptions::default();
    let same = tree::diff(
        "base",
        &before,
        "copy",
        &tree::snapshot(&copy).expect("snapshot"),
        &opts,
    );
    assert!(same.is_empty(), "a copy differs: {same:#?}");

    let c = |p: &str| copy.join(p);
    std::fs::set_permissions(c("etc/passwd"), std::fs::Permissions::from_mode(0o4644)).unwrap();
    lchown(c("home"), Some(5), None).unwrap();
    std::fs::write(c("etc/group"), "changed\n").unwrap();
    std::fs::remove_file(c("opt")).unwrap();
    symlink("var/other", c("opt")).unwrap();
    std::fs::remove_file(c("etc/hard-b")).unwrap();
    std::fs::write(c("etc/hard-b"), "hard linked pair\n").unwrap();
    std::fs::write(c("etc/added"), "").unwrap();
    std::fs::remove_dir_all(c("var/lib/app")).unwrap();
    lchown(c("var/abs"), None, Some(7)).unwrap();
    let after = tree::snapshot(&copy).expect("snapshot");
    let d = tree::diff("base", &before, "copy", &after, &opts).join("\n");
    for (path, what) in [
        ("/etc/passwd:", "mode"),
        ("/home:", "owner"),
        ("/etc/group:", "content"),
        ("/opt:", "type/target"),
        ("/etc/hard-a:", "hard links"),
        ("/etc/hard-b:", "hard links"),
        ("/etc/added:", "only in copy"),
        ("/var/lib/app:", "only in base"),
        ("/var/lib/app/state:", "only in base"),
        ("/var/abs:", "owner"),
    ] {
        assert!(
            d.lines().any(|l| l.starts_with(path) && l.contains(what)),
            "{path} {what} not reported in:\n{d}"
        );
    }
    // The preset file compares as sorted lines only when asked to.
    let mut x = before.clone();
    let mut y = before.clone();
    x.get_mut(tree::PRESET).unwrap().content = b"enable a\nenable b\n".to_vec();
    y.get_mut(tree::PRESET).unwrap().content = b"enable b\nenable a\n".to_vec();
    assert_eq!(tree::diff("x", &x, "y", &y, &opts).len(), 1);
    let sorted = CompareOptions {
        preset_sorted: true,
        ..CompareOptions::default()
    };
    assert!(tree::diff("x", &x, "y", &y, &sorted).is_empty());
    Ok(())
}

/// A layer written with raw ustar names, so that bad paths can be expressed too.
fn layer(entries: &[(&str, tar::EntryType, u32, &str)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, kind, mode, data) in entries {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(*kind);
        h.set_mode(*mode);
        h.set_uid(u64::from(*mode % 7));
        h.set_gid(0);
        h.set_mtime(0);
        h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        let body: &[u8] = match kind {
            tar::EntryType::Symlink | tar::EntryType::Link => {
                h.as_old_mut().linkname[..data.len()].copy_from_slice(data.as_bytes());
                &[]
            }
            _ => data.as_bytes(),
        };
        h.set_size(body.len() as u64);
        h.set_cksum();
        b.append(&h, body).unwrap();
    }
    b.into_inner().unwrap()
}

/// The extractor applies whiteouts before entries, keeps special bits, links within the
/// layer, and rejects layers that would write through symlinks or link into lower layers.
fn harness_extracts_layers() -> Result<(), String> {
    use tar::EntryType::{Directory as D, Link as L, Regular as R, Symlink as S};
    let (work, base) = fresh_base();
    let root = work.path().join("root");
    copy_tree(&base, &root).expect("copy");
    let good = layer(&[
        ("etc/", D, 0o755, ""),
        ("etc/replace-dir/", D, 0o700, ""),
        ("etc/replace-dir/new.conf", R, 0o4755, "new\n"),
        ("etc/replace-dir/.wh..wh..opq", R, 0o644, ""),
        ("etc/.wh.existing.conf", R, 0o644, ""),
        ("etc/to-overwrite.conf", S, 0o777, "passwd"),
        ("etc/hard-c", L, 0o644, "etc/replace-dir/new.conf"),
        ("var/lib/app/", D, 0o700, ""),
    ]);
    extract::apply_layer(&good, &root).expect("a good layer applies");
    let t = tree::snapshot(&root).expect("snapshot");
    assert!(!t.contains_key("/etc/existing.conf"));
    assert!(!t.contains_key("/etc/replace-dir/a.conf"));
    assert!(!t.contains_key("/etc/replace-dir/sub"));
    let new = &t["/etc/replace-dir/new.conf"];
    assert_eq!((new.mode, new.uid), (0o4755, 0o4755 % 7));
    assert_eq!(new.links, vec!["/etc/hard-c".to_string()]);
    assert_eq!(t["/etc/replace-dir"].mode, 0o700);
    assert_eq!(
        t["/etc/to-overwrite.conf"].kind,
        tree::Kind::Symlink("passwd".into())
    );
    assert_eq!(t["/var/lib/app"].mode, 0o700);
    assert_eq!(t["/var/lib/app"].uid, 0o700 % 7);
    assert!(
        t.contains_key("/var/lib/app/state"),
        "a directory entry keeps the lower contents"
    );

    for (bad, why, said) in [
        (
            layer(&[("usr/local/bin/x", R, 0o644, "")]),
            "through a symlink",
            "usr/local/bin/x: parent /usr/local is a symlink in the tree",
        ),
        (
            layer(&[("etc/nope/x", R, 0o644, "")]),
            "missing parent",
            "etc/nope/x: parent /etc/nope does not exist",
        ),
        (
            layer(&[("etc/../x", R, 0o644, "")]),
            "dot-dot",
            "tar path \"etc/../x\" is not clean",
        ),
        (
            layer(&[("etc/x", R, 0o644, ""), ("etc/x", R, 0o644, "")]),
            "duplicate",
            "/etc/x: appears more than once in the layer",
        ),
        (
            layer(&[("etc/x", L, 0o644, "etc/hard-a")]),
            "link into a lower layer",
            "/etc/x: hard link to /etc/hard-a, which is not an earlier entry of this layer",
        ),
    ] {
        let root = work.path().join("bad");
        let _ = std::fs::remove_dir_all(&root);
        copy_tree(&base, &root).expect("copy");
        match extract::apply_layer(&bad, &root) {
            Err(e) => assert!(e.contains(said), "a layer with {why}: {e:?} lacks {said:?}"),
            Ok(()) => panic!("accepted a layer with {why}"),
        }
    }
    Ok(())
}
