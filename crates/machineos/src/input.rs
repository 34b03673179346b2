//! Reading the command line's inputs: Ignition configs, or MachineConfig (and
//! MachineConfigPool) manifests in files or directories, rendered for one pool.

use std::path::PathBuf;

use anyhow::{Context, bail};
use machineos_render::{Manifests, RenderDefaults, Rendered};

/// What the inputs amount to.
pub enum Input {
    /// A plain Ignition config.
    Ignition {
        /// The file it came from.
        name: String,
        /// Its bytes.
        bytes: Vec<u8>,
    },
    /// A pool's MachineConfigs, rendered.
    Rendered(Box<Rendered>),
}

/// Options of rendering.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// The pool to render for: MachineConfigs are selected by a MachineConfigPool manifest
    /// of this name among the inputs, else by the label
    /// `machineconfiguration.openshift.io/role`.
    #[arg(long, default_value = "worker")]
    pub pool: String,
    /// The base OS image, as the cluster's ControllerConfig gives it
    /// (`spec.baseOSContainerImage`): the rendered `osImageURL` unless a user MachineConfig
    /// overrides it. With the matching --extensions-image, a real cluster's rendered
    /// MachineConfig is reproduced name and all.
    #[arg(long, value_name = "IMAGE", default_value = "")]
    pub os_image_url: String,
    /// The extensions image, as the ControllerConfig gives it
    /// (`spec.baseOSExtensionsContainerImage`): the rendered `baseOSExtensionsContainerImage`
    /// unless a user MachineConfig overrides it.
    #[arg(long, value_name = "IMAGE", default_value = "")]
    pub extensions_image: String,
}

fn collect(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut inner: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading directory {}", p.display()))?
                .map(|e| e.map(|e| e.path()))
                .collect::<Result<_, _>>()
                .with_context(|| format!("reading directory {}", p.display()))?;
            inner.retain(|f| {
                matches!(
                    f.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml" | "json")
                )
            });
            inner.sort();
            files.extend(inner);
        } else {
            files.push(p.clone());
        }
    }
    if files.is_empty() {
        bail!(
            "no input files (give MachineConfig manifests, directories of them, or one Ignition config)"
        );
    }
    Ok(files)
}

/// Whether `bytes` are a JSON object with an `ignition` key and no `kind` — found without
/// building the document (a config can hold hundreds of megabytes of data: URLs).
fn is_ignition(bytes: &[u8]) -> bool {
    use std::collections::HashMap;
    serde_json::from_slice::<HashMap<String, serde::de::IgnoredAny>>(bytes)
        .is_ok_and(|k| k.contains_key("ignition") && !k.contains_key("kind"))
}

/// Read the inputs: one Ignition config, or manifests rendered for `args.pool`.
pub fn read(paths: &[PathBuf], args: &RenderArgs) -> anyhow::Result<Input> {
    let files = collect(paths)?;
    let mut manifests = Manifests::default();
    for (i, f) in files.iter().enumerate() {
        let name = f.display().to_string();
        let bytes = std::fs::read(f).with_context(|| format!("reading {name}"))?;
        if bytes.is_empty() && files.len() == 1 {
            // Ignition's own error for an empty config (ErrEmpty), rather than "nothing
            // selected for the pool".
            bail!("{name}: not a config (empty)");
        }
        if is_ignition(&bytes) {
            if files.len() != 1 || i != 0 {
                bail!("{name}: an Ignition config must be the only input");
            }
            return Ok(Input::Ignition { name, bytes });
        }
        let m = machineos_render::load_manifests(&name, &bytes)?;
        manifests.machine_configs.extend(m.machine_configs);
        manifests.pools.extend(m.pools);
    }
    Ok(Input::Rendered(Box::new(render(&manifests, args)?)))
}

/// Render the manifests for the pool, reporting the render's warnings on stderr.
pub fn render(m: &Manifests, args: &RenderArgs) -> anyhow::Result<Rendered> {
    let defaults = RenderDefaults {
        os_image_url: args.os_image_url.clone(),
        base_os_extensions_container_image: args.extensions_image.clone(),
        ..RenderDefaults::default()
    };
    let rendered = machineos_render::render_pool(m, &args.pool, &defaults)?;
    for w in &rendered.warnings {
        eprintln!("MachineConfig {}: {}", w.machine_config, w.warning);
    }
    Ok(rendered)
}

/// `--rendered`: one MachineConfig already rendered, read as it is (see the flag's help):
/// a manifest (YAML or JSON), the MCO's build encoding (base64 of gzip) in a file, or the
/// directory a build's MachineConfig ConfigMap (or its parts) is mounted at.
pub fn read_rendered(path: &std::path::Path) -> anyhow::Result<machineos_api::v1::MachineConfig> {
    use machineos_buildrequest::objects::from_mounted_keys;
    let name = path.display().to_string();
    let bytes = if path.is_dir() {
        let mut files = std::collections::BTreeMap::new();
        // The keys in the directory, and one directory down: each part's ConfigMap mounted
        // apart (an OpenShift Build's volumes hold one ConfigMap each).
        let mut dirs = vec![(path.to_path_buf(), true)];
        while let Some((dir, top)) = dirs.pop() {
            for entry in
                std::fs::read_dir(&dir).with_context(|| format!("--rendered {name}: reading it"))?
            {
                let entry = entry.with_context(|| format!("--rendered {name}: reading it"))?;
                let file = entry.file_name().to_string_lossy().into_owned();
                // Keys only: a mounted volume's `..data` bookkeeping is a directory link.
                if file.starts_with("..") {
                    continue;
                }
                if entry.path().is_dir() {
                    if top {
                        dirs.push((entry.path(), false));
                    }
                    continue;
                }
                if !entry.path().is_file() {
                    continue;
                }
                let text = std::fs::read_to_string(entry.path())
                    .with_context(|| format!("--rendered {name}: reading {file}"))?;
                files.insert(file, text);
            }
        }
        from_mounted_keys(&files)
            .with_context(|| format!("--rendered {name}: the mounted MachineConfig"))?
    } else {
        let raw = std::fs::read(path).with_context(|| format!("--rendered {name}: reading it"))?;
        let trimmed = raw.trim_ascii_start();
        if trimmed.starts_with(b"{")
            || trimmed.starts_with(b"apiVersion")
            || trimmed.starts_with(b"kind")
            || trimmed.starts_with(b"---")
            || trimmed.starts_with(b"#")
        {
            raw
        } else {
            // The MCO's encoding: base64 of gzip.
            let text = String::from_utf8(raw)
                .map_err(|_| anyhow::anyhow!("--rendered {name}: neither a manifest nor base64"))?;
            let files = std::collections::BTreeMap::from([(
                machineos_buildrequest::objects::configmaps::MC_KEY.to_owned(),
                text,
            )]);
            from_mounted_keys(&files).with_context(|| {
                format!("--rendered {name}: not a manifest, and not the MCO's base64 of gzip")
            })?
        }
    };
    let m = machineos_render::load_manifests(&name, &bytes)?;
    let (n, p) = (m.machine_configs.len(), m.pools.len());
    let mut mcs = m.machine_configs;
    match mcs.pop() {
        Some(mc) if n == 1 && p == 0 => Ok(mc),
        _ => bail!(
            "--rendered {name}: holds {n} MachineConfig(s) and {p} pool(s); give exactly one \
             rendered MachineConfig"
        ),
    }
}
