//! The Containerfile template, case by case, against golden files in
//! `tests/golden/containerfile/` (one per case: the Containerfile, or what `render` or
//! `RunSteps::new` said instead). Regenerate them with
//! `MACHINEOS_UPDATE_SNAPSHOTS=1 cargo test -p machineos-buildrequest --test containerfile`
//! and read the diff. Every rendered golden also passes `validate`.

use std::path::PathBuf;

use machineos_api::v1::{ContainerfileArch, MachineConfig};
use machineos_buildrequest::containerfile::{
    ContainerfileErrorKind, ContainerfileInputs, Extension, KernelType, RenderError, RunSteps,
    RunStepsError, render, validate,
};
use machineos_diagnostics::Classify;
use serde_json::json;

const FROM: &str = "registry.example.com/os/worker@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const EXTENSIONS: &str = "quay.io/openshift/extensions@sha256:2222222222222222222222222222222222222222222222222222222222222222";
const BASE: &str = "quay.io/openshift/rhcos@sha256:3333333333333333333333333333333333333333333333333333333333333333";

const USER: &str = "FROM configs AS final\nRUN dnf install -y tmux && \\\n    dnf clean all\n# a comment\nRUN <<EOF\necho hello > /etc/hello\nEOF\n\n";
const USER_ARM64: &str = "FROM configs AS final\nRUN echo arm64 > /etc/arch\n";

fn mc(extensions: &[&str], kernel_type: &str) -> MachineConfig {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "rendered-worker-0123456789abcdef0123456789abcdef"},
        "spec": {"extensions": extensions, "kernelType": kernel_type, "osImageURL": BASE},
    }))
    .unwrap()
}

fn inputs(steps: &RunSteps) -> ContainerfileInputs<'_> {
    ContainerfileInputs {
        run_steps: steps,
        from_image: FROM,
        extensions_image: Some(EXTENSIONS),
        machine_config: "rendered-worker-0123456789abcdef0123456789abcdef",
        pool: "worker",
        base_image: BASE,
    }
}

/// What the golden file records for one case.
fn outcome(
    extensions: &[&str],
    kernel_type: &str,
    containerfiles: &[(ContainerfileArch, &str)],
    target: &str,
) -> String {
    let steps = match RunSteps::new(&mc(extensions, kernel_type), containerfiles, target) {
        Ok(s) => s,
        Err(e) => return format!("# RunSteps::new refused ({}): {e}\n", e.reason()),
    };
    match render(&inputs(&steps)) {
        Ok(Some(text)) => {
            validate(&text).unwrap_or_else(|e| panic!("rendered golden does not validate: {e}"));
            text
        }
        Ok(None) => "# nothing needs RUN: no Containerfile, no Job\n".to_owned(),
        Err(e) => format!("# render refused ({}): {e}\n", e.reason()),
    }
}

fn golden(name: &str, got: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/containerfile")
        .join(format!("{name}.Containerfile"));
    machineos_testkit::golden::assert_golden(&path, got);
}

#[test]
fn golden_user_containerfile_only() {
    let got = outcome(&[], "", &[(ContainerfileArch::NoArch, USER)], "amd64");
    assert!(got.starts_with("# Rendered by machineos"));
    assert!(!got.contains("rpm-ostree"), "{got}");
    golden("user-containerfile", &got);
}

#[test]
fn golden_extensions() {
    let got = outcome(
        &["usbguard", "kerberos", "usbguard"],
        "default",
        &[],
        "amd64",
    );
    assert!(
        got.contains("rpm-ostree install usbguard krb5-workstation libkadm5\n"),
        "{got}"
    );
    assert!(!got.contains("dnf -y shell"), "{got}");
    golden("extensions", &got);
}

#[test]
fn golden_realtime_kernel() {
    let got = outcome(&[], "realtime", &[], "amd64");
    assert!(got.contains(
        "install kernel-rt-core kernel-rt-modules kernel-rt-modules-extra kernel-rt-kvm"
    ));
    assert!(!got.contains("rpm-ostree install"), "{got}");
    golden("realtime", &got);
}

#[test]
fn golden_64k_pages_on_arm64() {
    let got = outcome(&[], "64k-pages", &[], "arm64");
    assert!(got.contains("install kernel-64k-core kernel-64k-modules kernel-64k-modules-core kernel-64k-modules-extra"));
    golden("64k-pages-arm64", &got);
}

#[test]
fn golden_64k_pages_refused_on_amd64() {
    let got = outcome(&[], "64k-pages", &[], "amd64");
    assert!(
        got.contains("64k-pages is only supported for arm64 targets"),
        "{got}"
    );
    golden("64k-pages-amd64-refused", &got);
}

#[test]
fn golden_extensions_and_user_containerfile_for_the_arch() {
    let files = [
        (ContainerfileArch::NoArch, USER),
        (ContainerfileArch::Arm64, USER_ARM64),
    ];
    let got = outcome(&["sysstat", "kernel-devel"], "realtime", &files, "arm64");
    assert!(got.contains("echo arm64") && !got.contains("tmux"), "{got}");
    golden("extensions-realtime-user-arm64", &got);
    // The same entries on amd64 take the NoArch one.
    let got = outcome(&["sysstat"], "", &files, "amd64");
    assert!(got.contains("tmux") && !got.contains("echo arm64"), "{got}");
    golden("extensions-user-noarch-amd64", &got);
}

#[test]
fn golden_nothing_to_run() {
    let got = outcome(&[], "default", &[], "amd64");
    golden("nothing-to-run", &got);
    // A Containerfile only for another architecture, or only comments: still nothing.
    let steps = RunSteps::new(
        &mc(&[], ""),
        &[
            (ContainerfileArch::Arm64, USER_ARM64),
            (ContainerfileArch::NoArch, "# nothing\n\n"),
        ],
        "amd64",
    )
    .unwrap();
    assert!(steps.is_empty());
    assert_eq!(render(&inputs(&steps)), Ok(None));
}

#[test]
fn run_steps_reads_the_machine_config() {
    let steps = RunSteps::new(
        &mc(&["ipsec", "ipsec", "sysstat"], "realtime"),
        &[],
        "s390x",
    )
    .unwrap();
    assert_eq!(steps.extensions(), &[Extension::Ipsec, Extension::Sysstat]);
    assert_eq!(
        steps.extension_packages(),
        [
            "NetworkManager-libreswan",
            "libreswan",
            "openvswitch3.5-ipsec",
            "sysstat"
        ]
    );
    assert_eq!(steps.kernel_swap(), Some(KernelType::Realtime));
    assert!(steps.needs_extensions_image() && !steps.is_empty());
    assert_eq!(steps.user_containerfile(), None);

    let steps = RunSteps::new(
        &mc(&[], ""),
        &[(ContainerfileArch::NoArch, USER)],
        "ppc64le",
    )
    .unwrap();
    assert_eq!(steps.kernel_type(), KernelType::Default);
    assert_eq!(steps.kernel_swap(), None);
    assert!(!steps.needs_extensions_image() && !steps.is_empty());
    assert_eq!(
        steps.user_containerfile(),
        Some((ContainerfileArch::NoArch, USER.trim_end()))
    );
}

/// MachineConfig, containerfile entries, target, reason, part of the message.
type Case = (
    MachineConfig,
    Vec<(ContainerfileArch, &'static str)>,
    &'static str,
    &'static str,
    &'static str,
);

#[test]
fn run_steps_errors_name_the_field() {
    let cases: Vec<Case> = vec![
        (
            mc(&["sysstat", "nope"], ""),
            vec![],
            "amd64",
            "UnsupportedExtension",
            "$.spec.extensions[1]: unsupported extension \"nope\"",
        ),
        (
            mc(&[], "lowlatency"),
            vec![],
            "amd64",
            "InvalidKernelType",
            "$.spec.kernelType: kernelType=lowlatency is invalid",
        ),
        (
            mc(&[], "64k-pages"),
            vec![],
            "ppc64le",
            "InvalidKernelType",
            "only supported for arm64 targets, this build is for ppc64le",
        ),
        (
            mc(&[], ""),
            vec![],
            "x86_64",
            "UnsupportedArchitecture",
            "\"x86_64\" is not one of",
        ),
        (
            mc(&[], ""),
            vec![
                (ContainerfileArch::Amd64, USER),
                (ContainerfileArch::Amd64, USER),
            ],
            "amd64",
            "InvalidContainerfile",
            "$.spec.containerFile[1].containerfileArch: a second Containerfile for AMD64",
        ),
        (
            mc(&[], ""),
            vec![(ContainerfileArch::NoArch, "FROM ubi9\nRUN true\n")],
            "amd64",
            "InvalidContainerfile",
            "$.spec.containerFile[0].content (NoArch): line 1: the Containerfile must continue from the configs stage",
        ),
        (
            mc(&[], ""),
            vec![(
                ContainerfileArch::S390x,
                "FROM configs AS final\n\nRUNN true\n",
            )],
            "s390x",
            "InvalidContainerfile",
            "$.spec.containerFile[0].content (S390X): line 3: unknown instruction RUNN: \"RUNN true\"",
        ),
        (
            mc(&[], ""),
            vec![(
                ContainerfileArch::NoArch,
                "# escape=`\nFROM configs AS final\n",
            )],
            "amd64",
            "InvalidContainerfile",
            "line 1: parser directive escape: not allowed",
        ),
        (
            mc(&[], ""),
            vec![(
                ContainerfileArch::NoArch,
                "FROM configs AS final\nFROM configs AS configs\n",
            )],
            "amd64",
            "InvalidContainerfile",
            "line 2: duplicate stage name \"configs\"",
        ),
    ];
    for (mc, files, target, reason, message) in cases {
        let e = RunSteps::new(&mc, &files, target).unwrap_err();
        assert_eq!(e.reason(), reason, "{e}");
        assert!(
            e.to_string().contains(message),
            "{e}\n  does not contain {message}"
        );
    }
    // A user Containerfile error keeps its kind and the user's own line number.
    let e = RunSteps::new(
        &mc(&[], ""),
        &[(ContainerfileArch::NoArch, "FROM configs AS final\nRUN\n")],
        "amd64",
    )
    .unwrap_err();
    match e {
        RunStepsError::Containerfile { error, .. } => {
            assert_eq!(error.line, 2);
            assert_eq!(
                error.kind,
                ContainerfileErrorKind::EmptyArguments("RUN".into())
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn render_refuses_bad_inputs() {
    let ext = RunSteps::new(&mc(&["usbguard"], ""), &[], "amd64").unwrap();
    let rt = RunSteps::new(&mc(&[], "realtime"), &[], "amd64").unwrap();
    let user = RunSteps::new(&mc(&[], ""), &[(ContainerfileArch::NoArch, USER)], "amd64").unwrap();

    let e = render(&ContainerfileInputs {
        extensions_image: None,
        ..inputs(&ext)
    })
    .unwrap_err();
    assert!(
        matches!(&e, RenderError::MissingExtensionsImage { what } if what == "extensions"),
        "{e}"
    );
    let e = render(&ContainerfileInputs {
        extensions_image: Some(""),
        ..inputs(&rt)
    })
    .unwrap_err();
    assert!(e.to_string().contains("(kernelType realtime)"), "{e}");
    assert_eq!(e.reason(), "MissingExtensionsImage");
    // Without extensions or kernel swap, no extensions image is needed (nor used).
    let text = render(&ContainerfileInputs {
        extensions_image: None,
        ..inputs(&user)
    })
    .unwrap()
    .unwrap();
    assert!(
        !text.contains("--mount") && !text.contains("rpm-ostree"),
        "{text}"
    );

    let by_tag = "quay.io/openshift/extensions:4.18";
    let e = render(&ContainerfileInputs {
        extensions_image: Some(by_tag),
        ..inputs(&ext)
    })
    .unwrap_err();
    assert_eq!(
        e,
        RenderError::NotByDigest {
            field: "extensions_image",
            value: by_tag.into()
        }
    );
    let e = render(&ContainerfileInputs {
        from_image: "registry.example.com/os/worker:latest",
        ..inputs(&user)
    })
    .unwrap_err();
    assert!(
        matches!(
            e,
            RenderError::NotByDigest {
                field: "from_image",
                ..
            }
        ),
        "{e}"
    );
    let e = render(&ContainerfileInputs {
        machine_config: "x\nRUN evil",
        ..inputs(&user)
    })
    .unwrap_err();
    assert!(
        matches!(
            e,
            RenderError::InvalidValue {
                field: "machine_config",
                ..
            }
        ),
        "{e}"
    );
    let e = render(&ContainerfileInputs {
        pool: "",
        ..inputs(&user)
    })
    .unwrap_err();
    assert!(
        matches!(e, RenderError::InvalidValue { field: "pool", .. }),
        "{e}"
    );
    let e = render(&ContainerfileInputs {
        base_image: "quay.io/x y",
        ..inputs(&user)
    })
    .unwrap_err();
    assert!(
        matches!(
            e,
            RenderError::InvalidValue {
                field: "base_image",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.reason(), "InvalidBuildInput");
}
