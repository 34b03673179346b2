//! `machineos check` against a TLS + htpasswd `docker-registry`: with the right auth file
//! every check passes and nothing is pushed; without credentials it fails at once naming the
//! registry and what to configure; with a wrong password it says the credentials were
//! refused; `-o json` reports the same.

use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use machineos_image::{Platform, layout::Layout};
use machineos_testkit::{CopyOptions, RegistryOptions, TestRegistry, skopeo_copy};

fn base_layout(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("base-layout");
    let layout = Layout::create(&path).expect("layout");
    let spec = machineos_synth::SynthSpec::example()
        .with_platform("linux/amd64".parse::<Platform>().expect("platform"));
    let desc = machineos_synth::write_image(&layout, &spec).expect("synth");
    layout.set_tag("base", &desc).expect("tag");
    path
}

fn authfile(dir: &Path, host: &str, user: &str, pw: &str) -> std::path::PathBuf {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"));
    let p = dir.join(format!("auth-{pw}.json"));
    std::fs::write(
        &p,
        serde_json::json!({"auths": {host: {"auth": auth}}}).to_string(),
    )
    .unwrap();
    p
}

fn check(home: &Path, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_machineos"))
        .arg("check")
        .args(args)
        .env("HOME", home)
        .env_remove("REGISTRY_AUTH_FILE")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("DOCKER_CONFIG")
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn the_preflight_says_what_is_needed_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start(RegistryOptions::new().with_tls().with_auth("builder", "pw"))
        .expect("registry");
    let host = reg.host();
    let base = format!("{host}/base/os:1");
    skopeo_copy(
        &format!("oci:{}:base", base_layout(tmp.path()).display()),
        &format!("docker://{base}"),
        &CopyOptions::new().dest_registry(&reg),
    )
    .expect("push base");
    let ca = tmp.path().join("ca.pem");
    std::fs::write(&ca, reg.ca_pem()).unwrap();
    let ca = ca.to_str().unwrap().to_owned();
    let output = format!("{host}/machineos/worker:latest");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();

    let good = authfile(tmp.path(), &host, "builder", "pw");
    let (ok, out, err) = check(
        &home,
        &[
            "--base",
            &base,
            "--output",
            &output,
            "--ca-file",
            &ca,
            "--authfile",
            good.to_str().unwrap(),
        ],
    );
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("anonymous pull refused (a pull secret is needed)"),
        "{out}"
    );
    assert!(
        out.contains(&format!("base {base}: pull ok (sha256:")),
        "{out}"
    );
    assert!(
        out.contains("push ok (an upload was started and cancelled)"),
        "{out}"
    );
    // Nothing was pushed: the output repository has no tag.
    let tags = Command::new("skopeo")
        .args([
            "list-tags",
            "--tls-verify=false",
            &format!("docker://{output}"),
        ])
        .args(["--creds", "builder:pw"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&tags.stdout).contains("latest"),
        "{tags:?}"
    );

    // No credentials: fails at once, naming the registry and what to give.
    let (ok, out, err) = check(&home, &["--base", &base, "--ca-file", &ca]);
    assert!(!ok);
    assert!(
        out.contains(&format!("{host} requires authentication to pull {base} and no credentials for it were found: give --authfile")),
        "{out}\n{err}"
    );

    // A wrong password: the credentials were refused.
    let bad = authfile(tmp.path(), &host, "builder", "wrong");
    let (ok, out, _) = check(
        &home,
        &[
            "--base",
            &base,
            "--output",
            &output,
            "--ca-file",
            &ca,
            "--authfile",
            bad.to_str().unwrap(),
            "-o",
            "json",
        ],
    );
    assert!(!ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["anonymousPull"], false);
    assert!(
        v["pull"]
            .as_str()
            .unwrap()
            .contains(&format!("{host} refused the credentials")),
        "{v}"
    );
    assert!(
        v["push"]
            .as_str()
            .unwrap()
            .contains("refused the credentials"),
        "{v}"
    );
}
