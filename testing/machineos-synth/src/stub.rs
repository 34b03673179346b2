//! Stub package tools, so a synthetic base runs the RUN steps of machineos's Containerfile
//! (`machineos_buildrequest::containerfile`): a real shell, the coreutils a RUN step uses,
//! and shell-script stand-ins for `rpm-ostree`, `rpm`, `dnf` and `ostree` that record what
//! they were asked to do instead of touching RPMs. Plus the other image such a build
//! mounts: an *extensions image* whose `/usr/share/rpm-ostree/extensions/` is a fake rpm-md
//! repository listing the packages it "has".
//!
//! **What [`SynthSpec::with_stub_tools`] adds** (as [`ExtraFile`]s of the final layer):
//!
//! * `/usr/bin/busybox`: the host's *static* busybox (Debian's `busybox-static`,
//!   [`HOST_BUSYBOX`]), checked to be a 64-bit little-endian ELF without an interpreter
//!   (a dynamic one would not start: the image has no real libc besides bash's).
//! * `/usr/bin/bash`: the host's bash ([`HOST_BASH`]) with the shared libraries and the
//!   loader `ldd` lists ([`host_program_files`]). The tree's `/usr/bin/sh` is a symlink to
//!   `bash`, so `/bin/sh -c` — the shell form of RUN — runs it too. Not busybox's ash: the
//!   template is bash (`[[ … ]]`, `pipefail`), and ash, built as Debian builds it, runs its
//!   own applets before `PATH` — its `rpm` applet instead of the `rpm` stub.
//! * `/usr/bin/<applet>` for each of [`APPLETS`] (`cat`, `chmod`, `rm`, …): a script
//!   `exec busybox <applet> "$@"`, replacing the tree's random-content "binaries".
//! * The stubs `/usr/bin/rpm-ostree`, `/usr/bin/rpm`, `/usr/bin/dnf`, `/usr/bin/ostree`
//!   and their shared functions `/usr/lib/machineos-stub/stub.sh`. The state is in
//!   [`STUB_STATE_DIR`]: `packages/<name>` exists for each "installed" package (its
//!   content: which command installed it, `base` for the image's own), and `log` gets one
//!   line per change (`rpm-ostree install usbguard`, `dnf remove kernel …`, `dnf install
//!   kernel-rt-core …`, `ostree container commit`).
//!   - `rpm-ostree install PKG…`: each package must be in an enabled repository of
//!     `/etc/yum.repos.d/*.repo` (a `baseurl` directory whose
//!     `repodata/machineos-stub-packages` lists it, as [`write_extensions_image`]
//!     writes), else `error: Packages not found: PKG` and exit 1, as rpm-ostree.
//!   - `rpm -q PKG…` (also `--quiet`): exit 0 when every package is installed, else
//!     `package PKG is not installed` and exit 1; `rpm -qa` lists them.
//!   - `dnf [-y] shell`: reads `remove …`, `install …`, `run` (and `exit`, blank lines,
//!     comments) from stdin; `run` removes (each must be installed) then installs (each
//!     must be available), as one transaction.
//!   - `ostree container commit`: empties `/tmp` and `/var/tmp`, as the real one cleans
//!     them, and logs; other `ostree` commands exit 1.
//!   - Anything else the stubs are asked exits 1 with a message naming the stub.
//! * The base's installed packages [`BASE_PACKAGES`] (the default kernel's) and
//!   `/etc/yum.repos.d/fedora.repo`, a disabled repository (so the directory exists, as on
//!   Fedora CoreOS, for the template's `cat > /etc/yum.repos.d/…`).
//!
//! **Determinism.** Generation stays a pure function of the spec; [`SynthSpec::with_stub_tools`]
//! puts the host's busybox, bash and library *bytes* into the spec, so the image's digest
//! depends on the host's builds of them, and the spec's architecture must be the host's. Such images are outside the pinned-digest guarantees of the
//! presets (`tests/pinned.rs`); [`stub_tool_files`] gives the same files from given binaries.
//!
//! **The extensions image** ([`write_extensions_image`]): one layer with
//! `/usr/share/rpm-ostree/extensions/repodata/repomd.xml` (a minimal, fake repomd) and
//! `repodata/machineos-stub-packages` (the package names, one a line), the layout the MCO's
//! template bind-mounts as `coreos-extensions`. Byte-identical for equal inputs.
//!
//! Hand-written: a few shell scripts and one tar layer; nothing here needs a crate beyond
//! the ones the generator already uses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use machineos_diagnostics::{Classify, Retry, io_retry};
use machineos_image::{Descriptor, ImageManifest, Layout, Platform, media_type};
use serde_json::json;

use crate::image::{CREATED, SynthError};
use crate::layer::{LayerError, write_layer};
use crate::spec::{ExtraFile, SynthSpec};
use crate::tree::{Body, DIR, Kind, Node, REG};

/// Where Debian's `busybox-static` installs the binary.
pub const HOST_BUSYBOX: &str = "/bin/busybox";

/// The host's bash.
pub const HOST_BASH: &str = "/bin/bash";

/// The stubs' state directory in the image: `packages/<name>` per installed package and the
/// `log` of changes.
pub const STUB_STATE_DIR: &str = "/usr/share/machineos-stub";

/// The packages the stub base ships installed: the default kernel's (so the template's
/// kernel swap finds `kernel` with `rpm -q` and removes these).
pub const BASE_PACKAGES: [&str; 5] = [
    "kernel",
    "kernel-core",
    "kernel-modules",
    "kernel-modules-core",
    "kernel-modules-extra",
];

/// The busybox applets installed as `/usr/bin/<name>` wrappers.
pub const APPLETS: &[&str] = &[
    "awk", "basename", "cat", "chmod", "chown", "cp", "cut", "date", "dirname", "echo", "env",
    "false", "find", "grep", "head", "id", "ln", "ls", "mkdir", "mktemp", "mv", "printf",
    "readlink", "rm", "rmdir", "sed", "sleep", "sort", "stat", "tail", "tee", "test", "touch",
    "tr", "true", "uname", "wc", "xargs",
];

/// The extensions image's repository, as the MCO's template mounts it.
pub const EXTENSIONS_REPO_DIR: &str = "/usr/share/rpm-ostree/extensions";

/// The file of the extensions repository that lists its packages, one a line.
pub const EXTENSIONS_PACKAGE_LIST: &str = "repodata/machineos-stub-packages";

/// Why the stub tools cannot be added or the extensions image written.
#[derive(Debug, thiserror::Error)]
pub enum StubError {
    /// A host file (busybox, bash, a library) could not be read.
    #[error(
        "reading {path}: {error} (the stub base needs Debian's busybox-static, which provides {HOST_BUSYBOX}, and bash)"
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error (part of the message, not [`std::error::Error::source`]).
        error: std::io::Error,
    },
    /// The busybox binary is not a static 64-bit little-endian ELF executable.
    #[error(
        "busybox {path}: {why}; the stub base needs a static busybox (Debian's busybox-static)"
    )]
    NotStatic {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: &'static str,
    },
    /// `ldd` failed on a host program.
    #[error("listing the shared libraries of {program} with ldd: {message}")]
    Ldd {
        /// The program.
        program: PathBuf,
        /// ldd's error output.
        message: String,
    },
    /// The spec's architecture is not the host's, whose binaries the stub base ships.
    #[error(
        "the stub base ships this machine's binaries ({host}); it cannot be built for {platform}"
    )]
    ForeignPlatform {
        /// The spec's platform.
        platform: String,
        /// The host's.
        host: String,
    },
    /// A package name for the extensions image is empty or has `/`, blanks or controls.
    #[error(
        "extensions image: package name {0:?} must be non-empty, without `/`, blanks or control characters"
    )]
    PackageName(String),
    /// Writing the extensions image failed.
    #[error(transparent)]
    Synth(#[from] SynthError),
}

impl Classify for StubError {
    /// `StubToolsUnavailable` for a host binary that cannot be read or used,
    /// `InvalidSynthSpec` for a bad package name or a foreign platform, the generator's
    /// reason otherwise.
    fn reason(&self) -> &'static str {
        match self {
            StubError::Read { .. } | StubError::NotStatic { .. } | StubError::Ldd { .. } => {
                "StubToolsUnavailable"
            }
            StubError::PackageName(_) | StubError::ForeignPlatform { .. } => "InvalidSynthSpec",
            StubError::Synth(e) => e.reason(),
        }
    }

    /// An I/O error as its kind says; the generator's classification; permanent otherwise.
    fn retry(&self) -> Retry {
        match self {
            StubError::Read { error, .. } => io_retry(error),
            StubError::Synth(e) => e.retry(),
            StubError::NotStatic { .. }
            | StubError::Ldd { .. }
            | StubError::ForeignPlatform { .. }
            | StubError::PackageName(_) => Retry::Permanent,
        }
    }
}

impl SynthSpec {
    /// This spec with the stub tools (see the [module](crate::stub) documentation) added to
    /// its extra files: busybox from [`HOST_BUSYBOX`], bash and its libraries from
    /// [`HOST_BASH`]. The result is as deterministic as the host's binaries are; the spec's
    /// architecture must be the host's.
    pub fn with_stub_tools(&self) -> Result<SynthSpec, StubError> {
        self.with_stub_tools_from(Path::new(HOST_BUSYBOX), Path::new(HOST_BASH))
    }

    /// Like [`SynthSpec::with_stub_tools`], with the given static busybox and bash.
    pub fn with_stub_tools_from(
        &self,
        busybox: &Path,
        bash: &Path,
    ) -> Result<SynthSpec, StubError> {
        let host = Platform::host();
        if self.platform.architecture != host.architecture {
            return Err(StubError::ForeignPlatform {
                platform: self.platform.to_string(),
                host: host.to_string(),
            });
        }
        let bytes = std::fs::read(busybox).map_err(|error| StubError::Read {
            path: busybox.to_path_buf(),
            error,
        })?;
        if let Err(why) = check_static_elf(&bytes) {
            return Err(StubError::NotStatic {
                path: busybox.to_path_buf(),
                why,
            });
        }
        let runtime = host_program_files(bash, "/usr/bin/bash")?;
        let mut spec = self.clone();
        spec.extra_files.extend(stub_tool_files(bytes, runtime));
        Ok(spec)
    }
}

/// The stub tools' files, in a fixed order: `busybox` as `/usr/bin/busybox` (not checked
/// here), `runtime` (bash and its shared libraries, see [`host_program_files`]) as given,
/// then the applet wrappers, the stubs, the base's package records and the disabled
/// repository.
pub fn stub_tool_files(busybox: Vec<u8>, runtime: Vec<ExtraFile>) -> Vec<ExtraFile> {
    let file = |path: &str, contents: &[u8], mode: u32| ExtraFile {
        path: path.to_owned(),
        contents: contents.to_vec(),
        mode,
    };
    let mut out = vec![ExtraFile {
        path: "/usr/bin/busybox".to_owned(),
        contents: busybox,
        mode: 0o755,
    }];
    out.extend(runtime);
    for applet in APPLETS {
        let script = format!(
            "#!/usr/bin/busybox sh\n# machineos-synth stub base: busybox's {applet}.\nexec /usr/bin/busybox {applet} \"$@\"\n"
        );
        out.push(file(
            &format!("/usr/bin/{applet}"),
            script.as_bytes(),
            0o755,
        ));
    }
    out.push(file(
        "/usr/lib/machineos-stub/stub.sh",
        STUB_LIB.as_bytes(),
        0o644,
    ));
    for (name, script) in [
        ("rpm-ostree", RPM_OSTREE),
        ("rpm", RPM),
        ("dnf", DNF),
        ("ostree", OSTREE),
    ] {
        out.push(file(&format!("/usr/bin/{name}"), script.as_bytes(), 0o755));
    }
    for p in BASE_PACKAGES {
        out.push(file(
            &format!("{STUB_STATE_DIR}/packages/{p}"),
            b"base\n",
            0o644,
        ));
    }
    out.push(file(
        "/etc/yum.repos.d/fedora.repo",
        FEDORA_REPO.as_bytes(),
        0o644,
    ));
    out
}

/// The host program `program` installed at `dest`, and every shared library and the loader
/// `ldd` lists for it (none for a static program), at their host paths — below `/usr` for
/// those under `/lib`, `/lib64`, `/bin` or `/sbin`, which the synthetic tree has as symlinks
/// into `/usr` (extra files may not lie below a symlink; the loader still finds them
/// through the links). Modes are the host files'.
pub fn host_program_files(program: &Path, dest: &str) -> Result<Vec<ExtraFile>, StubError> {
    let mut out = Vec::new();
    for lib in shared_libraries(program)? {
        let path = image_path(&lib);
        if !out.iter().any(|f: &ExtraFile| f.path == path) {
            out.push(host_file(Path::new(&lib), path)?);
        }
    }
    out.push(host_file(program, dest.to_owned())?);
    Ok(out)
}

fn host_file(host: &Path, path: String) -> Result<ExtraFile, StubError> {
    use std::os::unix::fs::PermissionsExt;
    let read_err = |error| StubError::Read {
        path: host.to_path_buf(),
        error,
    };
    let contents = std::fs::read(host).map_err(read_err)?;
    let mode = std::fs::metadata(host)
        .map_err(read_err)?
        .permissions()
        .mode()
        & 0o7777;
    Ok(ExtraFile {
        path,
        contents,
        mode,
    })
}

fn image_path(host: &str) -> String {
    for top in ["/bin/", "/sbin/", "/lib/", "/lib64/"] {
        if host.starts_with(top) {
            return format!("/usr{host}");
        }
    }
    host.to_owned()
}

/// The absolute paths `ldd program` lists (libraries and loader); none for a static one.
fn shared_libraries(program: &Path) -> Result<Vec<String>, StubError> {
    let ldd_err = |message: String| StubError::Ldd {
        program: program.to_path_buf(),
        message,
    };
    if !program.is_file() {
        return Err(StubError::Read {
            path: program.to_path_buf(),
            error: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        });
    }
    let out = std::process::Command::new("ldd")
        .arg(program)
        .output()
        .map_err(|e| ldd_err(format!("running ldd: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        if stdout.contains("not a dynamic executable")
            || stderr.contains("not a dynamic executable")
        {
            return Ok(Vec::new());
        }
        return Err(ldd_err(stderr.trim().to_owned()));
    }
    Ok(parse_ldd(&stdout))
}

/// The absolute paths of `ldd`'s output: `name => /path (0x…)` and `/loader (0x…)` lines.
fn parse_ldd(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        })
        .filter(|p| p.starts_with('/'))
        .map(str::to_owned)
        .collect()
}

/// `Ok` when `bytes` are a 64-bit little-endian ELF executable without a `PT_INTERP`
/// program header (statically linked).
fn check_static_elf(bytes: &[u8]) -> Result<(), &'static str> {
    if bytes.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err("not an ELF file");
    }
    if bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
        return Err("not a 64-bit little-endian ELF file");
    }
    let u16_at = |o: usize| {
        bytes
            .get(o..o + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u64_at = |o: usize| {
        bytes
            .get(o..o + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
    };
    let truncated = "a truncated ELF header";
    let phoff = u64_at(0x20).ok_or(truncated)?;
    let phentsize = u16_at(0x36).ok_or(truncated)?;
    let phnum = u16_at(0x38).ok_or(truncated)?;
    for i in 0..u64::from(phnum) {
        let at = phoff
            .checked_add(i * u64::from(phentsize))
            .and_then(|o| usize::try_from(o).ok())
            .ok_or(truncated)?;
        let p_type = bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or(truncated)?;
        if p_type == 3 {
            return Err("dynamically linked (it has a PT_INTERP program header)");
        }
    }
    Ok(())
}

/// Write the extensions image for `platform` whose repository lists `packages` into
/// `layout`; returns the manifest descriptor (platform set). Nothing is tagged.
pub fn write_extensions_image(
    layout: &Layout,
    platform: &Platform,
    packages: &[&str],
) -> Result<Descriptor, StubError> {
    for p in packages {
        if p.is_empty() || p.contains('/') || p.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(StubError::PackageName((*p).to_owned()));
        }
    }
    let root = EXTENSIONS_REPO_DIR.trim_start_matches('/');
    let mut nodes = Vec::new();
    let mut dir = String::new();
    for part in root.split('/').chain(["repodata"]) {
        if !dir.is_empty() {
            dir.push('/');
        }
        dir.push_str(part);
        nodes.push(Node {
            path: dir.clone(),
            kind: Kind::Dir,
            meta: DIR,
        });
    }
    let list: String = packages.iter().map(|p| format!("{p}\n")).collect();
    nodes.push(Node {
        path: format!("{root}/{EXTENSIONS_PACKAGE_LIST}"),
        kind: Kind::File(Body::Inline(list.into_bytes())),
        meta: REG,
    });
    nodes.push(Node {
        path: format!("{root}/repodata/repomd.xml"),
        kind: Kind::File(Body::Inline(REPOMD.as_bytes().to_vec())),
        meta: REG,
    });
    nodes.sort_by(|a, b| a.path.cmp(&b.path));
    let blob = write_layer(layout, 0, &nodes, 6)?;

    let config = json!({
        "created": CREATED,
        "architecture": platform.architecture,
        "os": platform.os,
        "config": {
            "Labels": {
                "org.opencontainers.image.title": "machineos-synth extensions (stub repository)",
            },
        },
        "rootfs": {"type": "layers", "diff_ids": [blob.diff_id.to_string()]},
        "history": [{"created": CREATED, "created_by": "machineos-synth: stub extensions repository"}],
    });
    let mut config = config;
    if let (Some(v), Some(c)) = (&platform.variant, config.as_object_mut()) {
        c.insert("variant".into(), json!(v));
    }
    let json_err = |what, error| SynthError::Json { what, error };
    let blob_err = |what, error| SynthError::Blob { what, error };
    let config_bytes = serde_json::to_vec(&config).map_err(|e| json_err("config", e))?;
    let (digest, size) = layout
        .write_blob(&config_bytes)
        .map_err(|e| blob_err("config", e))?;
    let manifest = ImageManifest {
        schema_version: 2,
        media_type: Some(media_type::OCI_MANIFEST.to_owned()),
        config: Descriptor::new(media_type::OCI_CONFIG, digest, size),
        layers: vec![Descriptor::new(
            media_type::OCI_LAYER_GZIP,
            blob.digest,
            blob.size,
        )],
        annotations: BTreeMap::new(),
    };
    let bytes = serde_json::to_vec(&manifest).map_err(|e| json_err("manifest", e))?;
    let (digest, size) = layout
        .write_blob(&bytes)
        .map_err(|e| blob_err("manifest", e))?;
    let mut desc = Descriptor::new(media_type::OCI_MANIFEST, digest, size);
    desc.platform = Some(platform.clone());
    Ok(desc)
}

impl From<LayerError> for StubError {
    fn from(e: LayerError) -> Self {
        StubError::Synth(SynthError::Layer(e))
    }
}

/// A disabled repository, so `/etc/yum.repos.d` exists as on Fedora CoreOS.
const FEDORA_REPO: &str = "[fedora]
name=Fedora (machineos-synth stub, disabled)
baseurl=/nonexistent/fedora
enabled=0
gpgcheck=0
";

/// A minimal repomd.xml: the stubs read `machineos-stub-packages`, never this.
const REPOMD: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<repomd xmlns="http://linux.duke.edu/metadata/repo">
  <revision>0</revision>
  <!-- machineos-synth stub repository: the packages are listed in machineos-stub-packages -->
</repomd>
"#;

/// Functions the stubs share.
const STUB_LIB: &str = r##"# machineos-synth stub base: functions of the rpm-ostree, rpm, dnf and ostree stubs.
STATE=/usr/share/machineos-stub

die() {
	echo "${0##*/} (machineos-synth stub): error: $*" >&2
	exit 1
}

installed() {
	[ -e "$STATE/packages/$1" ]
}

# The baseurl directories of the enabled repositories of /etc/yum.repos.d.
repo_dirs() {
	for repo in /etc/yum.repos.d/*.repo; do
		[ -f "$repo" ] || continue
		awk '
			function flush() { if (url != "" && enabled != "0") print url }
			/^\[/ { flush(); url = ""; enabled = "1"; next }
			/^[ \t]*baseurl[ \t]*=/ { sub(/^[ \t]*baseurl[ \t]*=[ \t]*/, ""); url = $0; next }
			/^[ \t]*enabled[ \t]*=/ { sub(/^[ \t]*enabled[ \t]*=[ \t]*/, ""); enabled = $0; next }
			END { flush() }' "$repo"
	done
}

available() {
	for url in $(repo_dirs); do
		list="${url#file://}/repodata/machineos-stub-packages"
		if [ -f "$list" ] && grep -qxF "$1" "$list"; then
			return 0
		fi
	done
	return 1
}

mark() {
	mkdir -p "$STATE/packages"
	printf '%s\n' "$2" > "$STATE/packages/$1"
}

record() {
	mkdir -p "$STATE"
	printf '%s\n' "$*" >> "$STATE/log"
}
"##;

const RPM_OSTREE: &str = r##"#!/usr/bin/busybox sh
# machineos-synth stub of rpm-ostree: `rpm-ostree install PKG...` records the packages.
set -eu
. /usr/lib/machineos-stub/stub.sh
[ "${1:-}" = install ] || die "only \`rpm-ostree install PACKAGE...\` is supported, got: $*"
shift
[ $# -gt 0 ] || die "install: no packages given"
for p in "$@"; do
	case "$p" in -*) die "install: option $p is not supported" ;; esac
	available "$p" || die "Packages not found: $p"
done
for p in "$@"; do
	mark "$p" "rpm-ostree install"
done
record "rpm-ostree install $*"
echo "machineos-synth stub: installed $*"
"##;

const RPM: &str = r##"#!/usr/bin/busybox sh
# machineos-synth stub of rpm: `rpm -q [--quiet] PKG...` and `rpm -qa`.
set -eu
. /usr/lib/machineos-stub/stub.sh
case "${1:-}" in
-qa)
	[ -d "$STATE/packages" ] && ls "$STATE/packages"
	exit 0
	;;
-q) shift ;;
*) die "only \`rpm -q PACKAGE...\` and \`rpm -qa\` are supported, got: $*" ;;
esac
quiet=
if [ "${1:-}" = --quiet ]; then
	quiet=1
	shift
fi
[ $# -gt 0 ] || die "-q: no packages given"
rc=0
for p in "$@"; do
	if installed "$p"; then
		[ -n "$quiet" ] || echo "$p-0-stub.noarch"
	else
		[ -n "$quiet" ] || echo "package $p is not installed"
		rc=1
	fi
done
exit $rc
"##;

const DNF: &str = r##"#!/usr/bin/busybox sh
# machineos-synth stub of dnf: `dnf [-y] shell` reading remove/install/run from stdin.
set -eu
. /usr/lib/machineos-stub/stub.sh
shell=
for a in "$@"; do
	case "$a" in
	-y | --assumeyes) ;;
	shell) shell=1 ;;
	*) die "only \`dnf -y shell\` is supported, got: $*" ;;
	esac
done
[ -n "$shell" ] || die "only \`dnf -y shell\` is supported, got: $*"
remove=
install=
while read -r cmd args; do
	case "$cmd" in
	"" | "#"*) ;;
	remove) remove="$remove $args" ;;
	install) install="$install $args" ;;
	run)
		for p in $remove; do
			installed "$p" || die "No match for argument: $p"
		done
		for p in $install; do
			available "$p" || die "No match for argument: $p"
		done
		for p in $remove; do
			rm -f "$STATE/packages/$p"
		done
		for p in $install; do
			mark "$p" "dnf install"
		done
		[ -z "$remove" ] || record "dnf remove$remove"
		[ -z "$install" ] || record "dnf install$install"
		remove=
		install=
		;;
	exit | quit) break ;;
	*) die "shell: command $cmd is not supported" ;;
	esac
done
"##;

const OSTREE: &str = r##"#!/usr/bin/busybox sh
# machineos-synth stub of ostree: `ostree container commit` cleans /tmp and /var/tmp.
set -eu
. /usr/lib/machineos-stub/stub.sh
[ "$*" = "container commit" ] || die "only \`ostree container commit\` is supported, got: $*"
for d in /tmp /var/tmp; do
	[ -d "$d" ] || continue
	rm -rf "$d"/* "$d"/.[!.]* "$d"/..?*
done
record "ostree container commit"
"##;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_elf_check_table() {
        // A minimal ELF64 LE header with no program headers is static.
        let mut header = vec![0u8; 64];
        header[..6].copy_from_slice(b"\x7fELF\x02\x01");
        assert_eq!(check_static_elf(&header), Ok(()));
        // One PT_INTERP program header at 64.
        let mut dynamic = header.clone();
        dynamic[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        dynamic[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        dynamic[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        let mut ph = vec![0u8; 56];
        ph[..4].copy_from_slice(&3u32.to_le_bytes());
        dynamic.extend(ph);
        assert!(
            check_static_elf(&dynamic)
                .unwrap_err()
                .contains("PT_INTERP")
        );
        // The header promises a program header beyond the end.
        let truncated = dynamic[..66].to_vec();
        assert!(
            check_static_elf(&truncated)
                .unwrap_err()
                .contains("truncated")
        );
        assert!(check_static_elf(b"#!/bin/sh\n").is_err());
        let mut be = header.clone();
        be[5] = 2;
        assert!(check_static_elf(&be).unwrap_err().contains("little-endian"));
    }

    #[test]
    fn stub_files_are_valid_extra_files() {
        let spec = SynthSpec {
            extra_files: stub_tool_files(
                b"\x7fELF".to_vec(),
                vec![ExtraFile {
                    path: "/usr/bin/bash".into(),
                    contents: b"\x7fELF".to_vec(),
                    mode: 0o755,
                }],
            ),
            ..SynthSpec::example()
        };
        assert_eq!(spec.validate(), Ok(()));
        let paths: Vec<&str> = spec.extra_files.iter().map(|f| f.path.as_str()).collect();
        for p in [
            "/usr/bin/busybox",
            "/usr/bin/bash",
            "/usr/bin/rpm-ostree",
            "/usr/bin/cat",
        ] {
            assert!(paths.contains(&p), "{p}");
        }
        assert!(paths.contains(&"/usr/share/machineos-stub/packages/kernel"));
    }

    #[test]
    fn ldd_output_is_parsed() {
        let text = "\tlinux-vdso.so.1 (0x00007f54d14f9000)\n\tlibtinfo.so.6 => /lib/x86_64-linux-gnu/libtinfo.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n\tlibgone.so => not found\n";
        assert_eq!(
            parse_ldd(text),
            [
                "/lib/x86_64-linux-gnu/libtinfo.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
        );
        assert_eq!(
            image_path("/lib64/ld-linux-x86-64.so.2"),
            "/usr/lib64/ld-linux-x86-64.so.2"
        );
        assert_eq!(image_path("/usr/lib/x/libc.so.6"), "/usr/lib/x/libc.so.6");
    }

    #[test]
    fn package_names_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::create(dir.path()).unwrap();
        let p = Platform::new("linux", "amd64", None);
        for bad in ["", "a/b", "a b", "a\nb"] {
            let e = write_extensions_image(&layout, &p, &[bad]).unwrap_err();
            assert!(matches!(e, StubError::PackageName(_)), "{bad:?}: {e}");
            assert_eq!(e.reason(), "InvalidSynthSpec");
        }
        let a = write_extensions_image(&layout, &p, &["usbguard"]).unwrap();
        let b = write_extensions_image(&layout, &p, &["usbguard"]).unwrap();
        assert_eq!(a, b, "deterministic");
    }
}
