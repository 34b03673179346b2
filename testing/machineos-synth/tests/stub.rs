//! The stub base under buildah: RUN steps run in it (chroot isolation, as the CLI and the
//! MCO's build pod run them), the stubs record installs from the mounted extensions image,
//! swap the kernel with `dnf -y shell`, and refuse what is not in a repository. Needs root,
//! buildah, busybox-static and bash; fails (never passes silently) without them.

use std::path::{Path, PathBuf};
use std::process::Command;

use machineos_image::{Layout, Platform};
use machineos_synth::{StubError, SynthSpec, write_extensions_image, write_image};

/// A lower-case scratch directory (buildah names `oci:` images after their path, which must
/// be lower case), removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("machineos-synth-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `buildah bud` of `containerfile` in storage under `dir`; (success, stdout + stderr).
fn bud(dir: &Path, containerfile: &str) -> (bool, String) {
    machineos_testkit::require_tool("buildah").unwrap();
    let ctx = dir.join("ctx");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::write(ctx.join("Containerfile"), containerfile).unwrap();
    let o = Command::new("buildah")
        .arg("--root")
        .arg(dir.join("root"))
        .arg("--runroot")
        .arg(dir.join("run"))
        .args(["--storage-driver", "vfs", "bud", "--isolation", "chroot"])
        .arg(&ctx)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

#[test]
fn run_steps_work_in_the_stub_base() {
    let scratch = Scratch::new("stub");
    let layout_dir = scratch.0.join("layout");
    let layout = Layout::create(&layout_dir).unwrap();
    let spec = SynthSpec::example()
        .with_platform(Platform::host())
        .with_stub_tools()
        .expect("the stub tools (busybox-static and bash installed)");
    layout
        .set_tag("base", &write_image(&layout, &spec).unwrap())
        .unwrap();
    let ext = write_extensions_image(
        &layout,
        &Platform::host(),
        &["usbguard", "kernel-rt-core", "kernel-rt-kvm"],
    )
    .unwrap();
    layout.set_tag("ext", &ext).unwrap();
    let l = layout_dir.display();
    let script = "set -xeuo pipefail; \
        printf '[ext]\\nbaseurl=/tmp/ext/usr/share/rpm-ostree/extensions/\\n' > /etc/yum.repos.d/ext.repo; \
        rpm -q kernel; ! rpm -q usbguard; \
        rpm-ostree install usbguard; rpm -q --quiet usbguard; \
        ! rpm-ostree install not-in-the-repo 2>/tmp/err; grep -q 'Packages not found: not-in-the-repo' /tmp/err; \
        (echo 'remove kernel kernel-core kernel-modules kernel-modules-core kernel-modules-extra'; echo 'install kernel-rt-core kernel-rt-kvm'; echo run) | dnf -y shell; \
        ! rpm -q kernel; rpm -q kernel-rt-core; \
        rm /etc/yum.repos.d/ext.repo";
    let containerfile = format!(
        "FROM oci:{l}:base\n\
         RUN --mount=type=bind,from=oci:{l}:ext,source=/,target=/tmp/ext {}\n\
         RUN touch /tmp/left-over && ostree container commit && test ! -e /tmp/left-over\n\
         RUN [\"cat\", \"/usr/share/machineos-stub/log\"]\n",
        serde_json::to_string(&["/bin/sh", "-c", script]).unwrap()
    );
    let (ok, out) = bud(&scratch.0, &containerfile);
    assert!(ok, "{out}");
    let log = "rpm-ostree install usbguard\n\
        dnf remove kernel kernel-core kernel-modules kernel-modules-core kernel-modules-extra\n\
        dnf install kernel-rt-core kernel-rt-kvm\n\
        ostree container commit\n";
    assert!(out.contains(log), "the stubs' log:\n{out}");

    // Without the repository, the install fails as rpm-ostree's does.
    let (ok, out) = bud(
        &scratch.0,
        &format!("FROM oci:{l}:base\nRUN rpm-ostree install usbguard\n"),
    );
    assert!(!ok);
    assert!(out.contains("Packages not found: usbguard"), "{out}");
}

#[test]
fn stub_tools_need_a_static_busybox_and_the_hosts_architecture() {
    let e = SynthSpec::example()
        .with_stub_tools_from(Path::new("/bin/bash"), Path::new("/bin/bash"))
        .unwrap_err();
    assert!(
        matches!(&e, StubError::NotStatic { why, .. } if why.contains("dynamically linked")),
        "{e}"
    );
    let e = SynthSpec::example()
        .with_stub_tools_from(Path::new("/nonexistent/busybox"), Path::new("/bin/bash"))
        .unwrap_err();
    assert!(e.to_string().contains("busybox-static"), "{e}");
    let foreign = if Platform::host().architecture == "arm64" {
        "amd64"
    } else {
        "arm64"
    };
    let e = SynthSpec::example()
        .with_platform(Platform::new("linux", foreign, None))
        .with_stub_tools()
        .unwrap_err();
    assert!(matches!(e, StubError::ForeignPlatform { .. }), "{e}");
}
