//! End-to-end checks of the `machineos` binary on the repository's examples: the README's
//! main job works, is deterministic, and bad input fails with the file and JSON path.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{example_base_image, machineos, repo};

fn example_base(dir: &Path) -> PathBuf {
    let base = dir.join("base");
    let st = Command::new("bash")
        .arg(repo().join("crates/machineos/tests/fixtures/rootfs.sh"))
        .arg(&base)
        .status()
        .expect("bash runs");
    assert!(st.success());
    base
}

#[test]
fn build_is_deterministic_and_summarised() {
    let tmp = tempfile::tempdir().unwrap();
    let base = example_base(tmp.path());
    let mut layers = Vec::new();
    for i in 0..2 {
        let out = tmp.path().join(format!("layer{i}.tar"));
        let o = machineos(&[
            "build",
            "--base-dir",
            base.to_str().unwrap(),
            "--layer-out",
            out.to_str().unwrap(),
            "-o",
            "json",
            "examples/machineconfigs",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(
            summary["layerDigest"]
                .as_str()
                .unwrap()
                .starts_with("sha256:")
        );
        assert!(
            summary["input"]
                .as_str()
                .unwrap()
                .starts_with("MachineConfig rendered-worker-")
        );
        layers.push(std::fs::read(out).unwrap());
    }
    assert_eq!(layers[0], layers[1]);
    let mut archive = tar::Archive::new(layers[0].as_slice());
    let names: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert!(
        names.contains(&"etc/machine-config-daemon/currentconfig".to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"etc/chrony.conf".to_string()), "{names:?}");
}

#[test]
fn bad_input_names_file_and_path_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let base = example_base(tmp.path());
    let cfg = tmp.path().join("bad.ign");
    std::fs::write(
        &cfg,
        r#"{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"etc/x"}]}}"#,
    )
    .unwrap();
    let out = tmp.path().join("layer.tar");
    let o = machineos(&[
        "build",
        "--base-dir",
        base.to_str().unwrap(),
        "--layer-out",
        out.to_str().unwrap(),
        cfg.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.trim_end(),
        format!(
            "error: {}: error at $.storage.files.0.path: path not absolute",
            cfg.display()
        ),
        "the cause is printed once, whole"
    );
    assert!(!out.exists());

    // A failure deep in the stack (a layout that is not one, read through the builder and
    // the image crate) also prints each cause once.
    let not_a_layout = tmp.path().join("not-a-layout");
    std::fs::create_dir(&not_a_layout).unwrap();
    let o = machineos(&[
        "build",
        "--base",
        &format!("oci:{}:base", not_a_layout.display()),
        "--output",
        &format!("oci:{}", tmp.path().join("out").display()),
        cfg.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let parts: Vec<&str> = err.trim_end().split(": ").collect();
    for (i, p) in parts.iter().enumerate() {
        assert!(
            !parts[i + 1..].contains(p),
            "{p:?} is printed twice in {err}"
        );
    }
}

/// `machineos build` of the example MachineConfigs from `base` to `output` for linux/amd64,
/// with the base index cache in `cache` and a JSON summary.
fn json_build(base: &str, output: &str, cache: &Path) -> std::process::Output {
    machineos(&[
        "build",
        "--base",
        base,
        "--output",
        output,
        "--cache-dir",
        cache.to_str().unwrap(),
        "--platform",
        "linux/amd64",
        "-o",
        "json",
        "examples/machineconfigs",
    ])
}

#[test]
fn build_from_an_image_prints_the_pullspec_last_and_inspect_reads_it_back() {
    let tmp = tempfile::tempdir().unwrap();
    let base = format!("oci:{}:base", example_base_image(tmp.path()).display());
    let out = tmp.path().join("out");
    let cache = tmp.path().join("cache");
    let run = || json_build(&base, &format!("oci:{}:worker", out.display()), &cache);
    let cold = run();
    assert!(
        cold.status.success(),
        "{}",
        String::from_utf8_lossy(&cold.stderr)
    );
    let warm = run();
    assert!(
        warm.status.success(),
        "{}",
        String::from_utf8_lossy(&warm.stderr)
    );
    let stdout = String::from_utf8(warm.stdout).unwrap();
    let (json, last) = stdout.trim_end().rsplit_once('\n').unwrap();
    let summary: serde_json::Value = serde_json::from_str(json).unwrap();
    let digest = summary["digest"].as_str().unwrap();
    assert_eq!(last, format!("oci:{}@{digest}", out.display()));
    assert_eq!(summary["baseIndexCache"], "hit");
    assert_eq!(summary["baseLayerReads"], 0);
    assert_eq!(summary["units"], 2);
    // Same inputs, same image.
    let cold_stdout = String::from_utf8(cold.stdout).unwrap();
    assert_eq!(cold_stdout.trim_end().rsplit_once('\n').unwrap().1, last);

    let o = machineos(&[
        "inspect",
        "--platform",
        "linux/amd64",
        &format!("oci:{}:worker", out.display()),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let inspection: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(inspection["digest"], digest);
    assert_eq!(inspection["labels"]["machineconfigpool"], "worker");
    assert_eq!(inspection["labels"]["ostree.bootable"], "true");
    let mc_name = inspection["labels"]["machineconfig"].as_str().unwrap();
    assert!(mc_name.starts_with("rendered-worker-"), "{mc_name}");
    assert_eq!(inspection["machineConfig"]["metadata"]["name"], mc_name);
}

#[test]
fn a_rendered_machine_config_builds_the_same_image_from_a_file_or_its_mounted_config_maps() {
    use base64::Engine;
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let base = format!("oci:{}:base", example_base_image(tmp.path()).display());
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("out");
    let built = json_build(&base, &format!("oci:{}:inputs", out.display()), &cache);
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let stdout = String::from_utf8(built.stdout).unwrap();
    let (json, _) = stdout.trim_end().rsplit_once('\n').unwrap();
    let want = serde_json::from_str::<serde_json::Value>(json).unwrap()["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    // The rendered MachineConfig the image carries, as the controller stores it.
    let o = machineos(&["inspect", &format!("oci:{}:inputs", out.display())]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mc =
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["machineConfig"].clone();
    let mc_json = serde_json::to_vec(&mc).unwrap();
    let file = tmp.path().join("rendered.json");
    std::fs::write(&file, &mc_json).unwrap();
    // The MCO's encoding, split across two mounted ConfigMap keys as a build pod sees them.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&mc_json).unwrap();
    let encoded = base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap());
    let mounted = tmp.path().join("mounted");
    std::fs::create_dir(&mounted).unwrap();
    let (a, b) = encoded.split_at(encoded.len() / 2);
    std::fs::write(mounted.join("machineconfig.json.gz.part0"), a).unwrap();
    std::fs::write(mounted.join("machineconfig.json.gz.part1"), b).unwrap();
    // The same parts one directory down each, as an OpenShift Build's volumes mount them
    // (one ConfigMap per volume), with a volume's `..data` bookkeeping beside.
    let apart = tmp.path().join("apart");
    for (i, part) in [a, b].iter().enumerate() {
        let dir = apart.join(i.to_string());
        std::fs::create_dir_all(dir.join("..data")).unwrap();
        std::fs::write(dir.join(format!("machineconfig.json.gz.part{i}")), part).unwrap();
    }
    for (n, rendered) in [file, mounted, apart].iter().enumerate() {
        let digestfile = tmp.path().join(format!("digest-{n}"));
        let o = machineos(&[
            "build",
            "--rendered",
            rendered.to_str().unwrap(),
            "--base",
            &base,
            "--output",
            &format!("oci:{}:rendered-{n}", out.display()),
            "--cache-dir",
            cache.to_str().unwrap(),
            "--platform",
            "linux/amd64",
            "--digestfile",
            digestfile.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            std::fs::read_to_string(&digestfile).unwrap(),
            want,
            "--rendered {} builds what the MachineConfigs built",
            rendered.display()
        );
    }
    // A directory without the MachineConfig's keys: refused, naming the flag.
    let o = machineos(&[
        "build",
        "--rendered",
        "examples/machineconfigs",
        "--base",
        &base,
        "--output",
        &format!("oci:{}:x", out.display()),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--rendered examples/machineconfigs"), "{err}");
}

#[test]
fn build_without_a_base_names_what_is_missing() {
    let o = machineos(&["build", "examples/machineconfigs"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no base image") && err.contains("--base"),
        "{err}"
    );

    let o = machineos(&["build", "--base", "Not A Ref", "examples/machineconfigs"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--base") && err.contains("Not A Ref"), "{err}");
}

#[test]
fn an_unwritable_layer_out_fails_before_anything_is_tagged() {
    let tmp = tempfile::tempdir().unwrap();
    let base = format!("oci:{}:base", example_base_image(tmp.path()).display());
    let out = tmp.path().join("out");
    let o = machineos(&[
        "build",
        "--base",
        &base,
        "--output",
        &format!("oci:{}:worker", out.display()),
        "--no-cache",
        "--platform",
        "linux/amd64",
        "--layer-out",
        tmp.path().join("no/such/dir/layer.tar").to_str().unwrap(),
        "examples/machineconfigs",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("layer.tar"), "{err}");
    let index = std::fs::read_to_string(out.join("index.json")).unwrap_or_default();
    assert!(!index.contains("worker"), "a tag was left behind: {index}");
}

/// Builds `config` (an Ignition config) on `base` into the layout `out` with tag `tag`.
fn build_ignition(tmp: &Path, base: &str, out: &Path, tag: &str, config: &str) {
    let cfg = tmp.join(format!("{tag}.ign"));
    std::fs::write(&cfg, config).unwrap();
    let o = machineos(&[
        "build",
        "--base",
        base,
        "--output",
        &format!("oci:{}:{tag}", out.display()),
        "--cache-dir",
        tmp.join("cache").to_str().unwrap(),
        "--platform",
        "linux/amd64",
        cfg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A hard link's tar member carries its inode's mode and owner: containers/storage (buildah,
/// podman, CRI-O) applies a link member's header to the inode, and so does machineos's own
/// base indexer when the image is the base of the next build.
#[test]
fn hard_links_keep_their_inode_metadata_in_buildah_and_in_a_chained_build() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let base = format!("oci:{}:base", example_base_image(tmp.path()).display());
    let out = tmp.path().join("out");
    // One: a second name for the base's /etc/passwd.
    build_ignition(
        tmp.path(),
        &base,
        &out,
        "one",
        r#"{"ignition":{"version":"3.3.0"},"storage":{"links":[
            {"path":"/etc/passwd-hard","target":"/etc/passwd","hard":true}]}}"#,
    );
    // Two, on top of one: append to that file through its new name.
    build_ignition(
        tmp.path(),
        &format!("oci:{}:one", out.display()),
        &out,
        "two",
        r#"{"ignition":{"version":"3.3.0"},"storage":{"files":[
            {"path":"/etc/passwd-hard","append":[{"source":"data:,extra:x:1234:1234::/:/sbin/nologin%0A"}]}]}}"#,
    );
    for tag in ["one", "two"] {
        let root = machineos_testkit::buildah_mount(&out, tag).unwrap();
        let a = std::fs::symlink_metadata(root.path().join("etc/passwd")).unwrap();
        let b = std::fs::symlink_metadata(root.path().join("etc/passwd-hard")).unwrap();
        assert_eq!(
            (a.mode() & 0o7777, a.uid(), a.gid()),
            (0o644, 0, 0),
            "{tag}: /etc/passwd as buildah unpacks it"
        );
        assert_eq!(a.ino(), b.ino(), "{tag}: one inode, two names");
        let text = std::fs::read_to_string(root.path().join("etc/passwd")).unwrap();
        assert_eq!(text.contains("extra:x:1234"), tag == "two", "{tag}: {text}");
    }
}

/// Builds racing into one fresh OCI layout: every one succeeds and every tag is there.
#[test]
fn concurrent_builds_into_one_fresh_layout_keep_every_tag() {
    let tmp = tempfile::tempdir().unwrap();
    let base = format!("oci:{}:base", example_base_image(tmp.path()).display());
    let out = tmp.path().join("out");
    let cache = tmp.path().join("cache");
    let children: Vec<_> = (0..4)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_machineos"))
                .current_dir(repo())
                .args([
                    "build",
                    "--base",
                    &base,
                    "--output",
                    &format!("oci:{}:t{i}", out.display()),
                    "--cache-dir",
                    cache.to_str().unwrap(),
                    "--platform",
                    "linux/amd64",
                    "examples/machineconfigs",
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let layout = machineos_image::Layout::open(&out).unwrap();
    for i in 0..4 {
        layout.resolve(Some(&format!("t{i}"))).unwrap();
    }
}

#[test]
fn source_date_epoch_out_of_range_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let base = format!("oci:{}:base", example_base_image(tmp.path()).display());
    let out = tmp.path().join("out");
    for value in ["18446744073709551615", "253402300800", "-5"] {
        let o = Command::new(env!("CARGO_BIN_EXE_machineos"))
            .current_dir(repo())
            .env("SOURCE_DATE_EPOCH", value)
            .args([
                "build",
                "--base",
                &base,
                "--output",
                &format!("oci:{}:x", out.display()),
                "--no-cache",
                "--platform",
                "linux/amd64",
                "examples/machineconfigs",
            ])
            .output()
            .unwrap();
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("SOURCE_DATE_EPOCH=\"{value}\"")) && !err.contains("internal"),
            "{err}"
        );
    }
}

/// `mknod DIR/NAME c 1 MINOR` (3: like /dev/null, 7: like /dev/full), in a scratch directory
/// so that a regression cannot replace the machine's own devices. Needs root.
fn mem_device(dir: &Path, name: &str, minor: u32) -> PathBuf {
    let p = dir.join(name);
    let st = Command::new("mknod")
        .arg(&p)
        .args(["c", "1", &minor.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "mknod (the test needs root)");
    p
}

fn is_char_device(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(p)
        .unwrap()
        .file_type()
        .is_char_device()
}

/// `--layer-out` never renames over what is not a regular file, and every output is checked
/// (or, for a device, written) before anything is published.
#[test]
fn layer_out_writes_through_devices_and_fails_before_publishing() {
    let tmp = tempfile::tempdir().unwrap();
    let base = format!("oci:{}:base", example_base_image(tmp.path()).display());
    let out = tmp.path().join("out");
    let build = |tag: &str, layer_out: &Path| {
        machineos(&[
            "build",
            "--base",
            &base,
            "--output",
            &format!("oci:{}:{tag}", out.display()),
            "--no-cache",
            "--platform",
            "linux/amd64",
            "--layer-out",
            layer_out.to_str().unwrap(),
            "examples/machineconfigs",
        ])
    };
    let tags = || std::fs::read_to_string(out.join("index.json")).unwrap_or_default();

    // A device that takes anything: written through, still a device, the image published.
    let null = mem_device(tmp.path(), "null", 3);
    let o = build("to-null", &null);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(is_char_device(&null), "--layer-out replaced a device");
    assert!(tags().contains("to-null"));

    // A device that is full: ENOSPC, and nothing published.
    let full = mem_device(tmp.path(), "full", 7);
    let o = build("to-full", &full);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("No space left on device"), "{err}");
    assert!(is_char_device(&full));
    assert!(!tags().contains("to-full"), "published despite the failure");

    // A directory: refused before anything is done.
    let dir = tmp.path().join("a-directory");
    std::fs::create_dir(&dir).unwrap();
    let o = build("to-dir", &dir);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is a directory"), "{err}");
    assert!(!tags().contains("to-dir"), "published despite the failure");

    // A symlink to a regular file: the file gets the layer, the link stays a link.
    let real = tmp.path().join("real.tar");
    std::fs::write(&real, b"old").unwrap();
    let link = tmp.path().join("link.tar");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let o = build("to-link", &link);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let mut archive = tar::Archive::new(std::fs::File::open(&real).unwrap());
    assert!(archive.entries().unwrap().count() > 10);
}

/// An unusable cache — a FIFO or a symlink to /dev/zero at the entry's path, a cache
/// directory that cannot be created — costs a warning and a re-index, never a hang, an
/// unbounded read or a failed build.
#[test]
fn an_unusable_cache_is_a_warning_not_a_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let base = format!("oci:{}:base", example_base_image(tmp.path()).display());
    let out = tmp.path().join("out");
    let build = |cache: &Path| {
        let o = json_build(&base, &format!("oci:{}:x", out.display()), cache);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // The summary, then the pullspec on a line of its own.
        let summary: serde_json::Value = serde_json::Deserializer::from_slice(&o.stdout)
            .into_iter()
            .next()
            .unwrap()
            .unwrap();
        (summary, String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let cache = tmp.path().join("cache");
    let (first, _) = build(&cache);
    assert_eq!(first["baseIndexCache"], "miss");
    let digest = first["base"]
        .as_str()
        .unwrap()
        .rsplit_once('@')
        .unwrap()
        .1
        .to_string();
    let entry = cache
        .join("index/sha256")
        .join(format!("{}.idx", digest.trim_start_matches("sha256:")));
    assert!(entry.is_file());

    std::fs::remove_file(&entry).unwrap();
    let st = Command::new("mkfifo").arg(&entry).status().unwrap();
    assert!(st.success());
    let (s, err) = build(&cache);
    assert_eq!(s["baseIndexCache"], "unusable", "{err}");
    // The warning names the cache file, on stderr and typed in the summary.
    let at = entry.display().to_string();
    assert!(
        err.contains(&format!("warning at {at}: ")) && err.contains("not a regular file"),
        "{err}"
    );
    assert_eq!(s["warnings"][0]["path"], at.as_str(), "{s}");
    assert!(
        s["warnings"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not a regular file")),
        "{s}"
    );
    // The rebuild replaced the FIFO: the next build hits.
    assert_eq!(build(&cache).0["baseIndexCache"], "hit");

    std::fs::remove_file(&entry).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &entry).unwrap();
    let (s, err) = build(&cache);
    assert_eq!(s["baseIndexCache"], "unusable", "{err}");
    assert!(err.contains("symbolic link"), "{err}");

    // A cache directory that cannot be created (below a regular file).
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let (s, err) = build(&file.join("cache"));
    assert_eq!(s["baseIndexCache"], "unusable", "{err}");
    assert!(err.contains("not cached"), "{err}");
}

/// Auth files are read only when a registry is contacted: a broken one does not fail a
/// build between OCI layouts, and fails a registry build with its path named.
#[test]
fn a_broken_auth_file_only_matters_when_a_registry_is_used() {
    let tmp = tempfile::tempdir().unwrap();
    let base = format!("oci:{}:base", example_base_image(tmp.path()).display());
    let home = tmp.path().join("home");
    std::fs::create_dir_all(home.join(".docker")).unwrap();
    std::fs::write(home.join(".docker/config.json"), b"{ not json").unwrap();
    let run = |output: &str| {
        Command::new(env!("CARGO_BIN_EXE_machineos"))
            .current_dir(repo())
            .env("HOME", &home)
            .env_remove("REGISTRY_AUTH_FILE")
            .env_remove("XDG_RUNTIME_DIR")
            .args([
                "build",
                "--base",
                &base,
                "--output",
                output,
                "--no-cache",
                "--platform",
                "linux/amd64",
                "--registry-deadline",
                "20",
                "examples/machineconfigs",
            ])
            .output()
            .unwrap()
    };
    let o = run(&format!("oci:{}:x", tmp.path().join("out").display()));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Nothing listens on port 9 of loopback; the auth file is read before that matters.
    let o = run("127.0.0.1:9/out/x:v1");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(".docker/config.json"), "{err}");
}

/// `render` names the rendered MachineConfig as the MCO does and `render --diff` compares
/// it with another: exit 0 identical, 1 different (each difference on its own line), 2 on
/// error. `--os-image-url` / `--extensions-image` are the ControllerConfig's images.
#[test]
fn render_diff_exits_like_diff() {
    let tmp = tempfile::tempdir().unwrap();
    let image = format!("quay.io/x/rhcos@sha256:{}", "a".repeat(64));
    let ext = format!("quay.io/x/ext@sha256:{}", "b".repeat(64));
    let args = [
        "--os-image-url",
        &image,
        "--extensions-image",
        &ext,
        "examples/machineconfigs",
    ];
    let o = machineos(&[&["render"][..], &args].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mine: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(mine["spec"]["osImageURL"], image.as_str());
    assert_eq!(mine["spec"]["baseOSExtensionsContainerImage"], ext.as_str());
    let saved = tmp.path().join("rendered.json");
    std::fs::write(&saved, &o.stdout).unwrap();

    let o = machineos(&[&["render", "--diff", saved.to_str().unwrap()][..], &args].concat());
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains(": identical to "));

    // Another kernel argument: a different spec, so a different name too.
    let mut theirs = mine.clone();
    theirs["spec"]["kernelArguments"] = serde_json::json!(["quiet"]);
    std::fs::write(&saved, serde_json::to_vec(&theirs).unwrap()).unwrap();
    let o = machineos(&[&["render", "--diff", saved.to_str().unwrap()][..], &args].concat());
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].contains("differs from"), "{out}");
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start().starts_with("spec.kernelArguments")),
        "{out}"
    );

    let o = machineos(&[&["render", "--diff", "/nonexistent/mc.yaml"][..], &args].concat());
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/mc.yaml"));
}

/// An empty input is Ignition's "not a config (empty)", naming the file — not a complaint
/// that no MachineConfig was selected for the pool.
#[test]
fn an_empty_input_is_not_a_config() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("config.ign");
    std::fs::write(&empty, b"").unwrap();
    for command in ["render", "build"] {
        let o = machineos(&[command, empty.to_str().unwrap()]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{}: not a config (empty)", empty.display())),
            "{command}: {err}"
        );
    }
}

#[test]
fn build_help_names_every_accepted_ignition_version() {
    use machineos_ignition::SpecVersion;
    let out = machineos(&["build", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    let range = format!(
        "spec {}–{}",
        SpecVersion::ALL[0].as_str(),
        SpecVersion::LATEST.as_str()
    );
    assert!(help.contains(&range), "{range} not in:\n{help}");
}

#[test]
fn check_says_an_unreachable_registry_once_and_logs_without_colour() {
    // `.invalid` never resolves (RFC 6761). Where the resolver answers "no such name", the
    // failure is final: one attempt, said once.
    let out = machineos(&["check", "--base", "no-such-host.invalid/os/base:1"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(stdout.matches("pull FAILED").count(), 1, "{stdout}");
    assert!(!stdout.contains("anonymous probe failed"), "{stdout}");
    if stdout.contains("does not resolve (DNS)") {
        assert!(stdout.contains("failed after 1 attempt"), "{stdout}");
    }
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    // Logs to a pipe are plain text.
    let out = Command::new(env!("CARGO_BIN_EXE_machineos"))
        .env("MACHINEOS_LOG", "debug")
        .args(["check", "--base", "no-such-host.invalid/os/base:1"])
        .output()
        .expect("binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("DEBUG"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

#[test]
fn disruption_says_what_a_config_change_costs_by_the_mcos_policies() {
    let tmp = tempfile::tempdir().unwrap();
    let render = |dir: &Path, out: &Path| {
        let o = machineos(&["render", dir.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::write(out, &o.stdout).unwrap();
    };
    let (a, b) = (tmp.path().join("a.json"), tmp.path().join("b.json"));
    render(&repo().join("examples/machineconfigs"), &a);
    // The same MachineConfigs with another chrony.conf.
    let changed = tmp.path().join("changed");
    std::fs::create_dir(&changed).unwrap();
    for e in std::fs::read_dir(repo().join("examples/machineconfigs")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), changed.join(e.file_name())).unwrap();
    }
    let chrony = changed.join("chrony.yaml");
    let text = std::fs::read_to_string(&chrony).unwrap();
    let (head, _) = text.split_once("base64,").unwrap();
    let tail = text
        .split_once("base64,")
        .unwrap()
        .1
        .split_once('\n')
        .unwrap()
        .1;
    // "pool time.example.com iburst\n"
    std::fs::write(
        &chrony,
        format!("{head}base64,cG9vbCB0aW1lLmV4YW1wbGUuY29tIGlidXJzdAo=\n{tail}"),
    )
    .unwrap();
    render(&changed, &b);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "disruption",
            "--from",
            a.to_str().unwrap(),
            "--to",
            b.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        machineos(&args)
    };
    // The MCO's defaults: no policy covers /etc/chrony.conf, so the node reboots.
    let o = run(&["-o", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["changes"]["files"],
        serde_json::json!(["/etc/chrony.conf"])
    );
    assert_eq!(v["disruption"]["class"], "Reboot");
    assert_eq!(v["disruption"]["drain"], true);
    // A MachineConfiguration that restarts chronyd for it instead.
    let policy = tmp.path().join("machineconfiguration.yaml");
    std::fs::write(
        &policy,
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata:\n  name: cluster\n\
         spec:\n  nodeDisruptionPolicy:\n    files:\n      - path: /etc/chrony.conf\n        actions:\n\
         \x20         - type: Restart\n            restart:\n              serviceName: chronyd.service\n",
    )
    .unwrap();
    let o = run(&["--policy", policy.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains(": Restart — Restart chronyd.service"),
        "{text}"
    );
    assert!(
        text.contains("file /etc/chrony.conf: Restart chronyd.service (file /etc/chrony.conf)"),
        "{text}"
    );
    // A policy the API server would refuse is refused, naming the field.
    std::fs::write(
        &policy,
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata:\n  name: cluster\n\
         spec:\n  nodeDisruptionPolicy:\n    sshkey:\n      actions: [{type: Reboot}, {type: Drain}]\n",
    )
    .unwrap();
    let o = run(&["--policy", policy.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("spec.nodeDisruptionPolicy.sshkey.actions"),
        "{err}"
    );
}
