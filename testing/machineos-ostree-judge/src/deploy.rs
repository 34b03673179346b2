//! Import and deploy: a fresh sysroot (`ostree admin init-fs`, stateroot `default`, no
//! bootloader), ostree-ext's `container::deploy::deploy` of the image, and what came of it.
//! Into a sysroot that has a deployment already, the image is deployed beside it, its
//! `/etc` the three-way merge of that deployment's `/etc` (ostree's merge deployment: the
//! first one), as a node's next deployment gets.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use ostree_ext::container::OstreeImageReference;
use ostree_ext::container::deploy::DeployOpts;
use ostree_ext::container::store::image_filtered_content_warning;
use ostree_ext::ostree;
use ostree_ext::ostree::gio;
use serde::{Deserialize, Serialize};

/// The stateroot every deployment goes to.
const STATEROOT: &str = "default";

/// What a deployment produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployed {
    /// The ostree commit the image's ostree layers carry (label `ostree.commit`).
    pub base_commit: String,
    /// The merge commit ostree-ext made of the image (base commit and derived layers).
    pub merge_commit: String,
    /// The deployment's root, as a node would boot it (`/etc` merged from `/usr/etc`).
    pub root: PathBuf,
    /// The stateroot's `/var`, which a node mounts over the deployment's own.
    pub var: PathBuf,
    /// ostree-ext's warning about paths of derived layers it dropped, if any (as
    /// rpm-ostree and bootc print it: "Image contains non-ostree compatible file paths: …").
    pub filtered: Option<String>,
}

/// Deploy `image` (a containers-image reference such as `oci:/dir:tag`, imported as
/// `ostree-unverified-image:` — no signature policy) into the sysroot at `sysroot`: a new
/// one (an empty or missing directory), or one with a deployment already, merged from it.
/// Run with `OSTREE_SYSROOT_OPTS=skip-sync` in the environment: see the crate docs.
pub async fn deploy(image: &str, sysroot: &Path) -> Result<Deployed> {
    std::fs::create_dir_all(sysroot).with_context(|| format!("creating {}", sysroot.display()))?;
    let imgref: OstreeImageReference = format!("ostree-unverified-image:{image}")
        .as_str()
        .try_into()
        .with_context(|| format!("parsing image reference {image}"))?;
    let cancellable = gio::Cancellable::NONE;
    let sr = ostree::Sysroot::new(Some(&gio::File::for_path(sysroot)));
    sr.ensure_initialized(cancellable)
        .context("initialising the sysroot")?;
    sr.load(cancellable).context("loading the sysroot")?;
    let repo = sr.repo();
    if sr.deployments().is_empty() {
        let config = repo.copy_config();
        config.set_string("sysroot", "bootloader", "none");
        repo.write_config(&config)
            .context("setting sysroot.bootloader=none")?;
        sr.init_osname(STATEROOT, cancellable)
            .context("creating the stateroot")?;
        sr.load(cancellable).context("reloading the sysroot")?;
    }
    let kargs = ["root=LABEL=root"];
    let mut opts = DeployOpts::default();
    opts.kargs = Some(&kargs);
    // Keep the deployment merged from: the caller compares the two.
    opts.no_clean = true;
    let state = ostree_ext::container::deploy::deploy(&sr, STATEROOT, &imgref, Some(opts))
        .await
        .with_context(|| format!("deploying {image}"))?;
    sr.load(cancellable).context("reloading the sysroot")?;
    let deployment = sr
        .deployments()
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("deploying {image}: no deployment was written"))?;
    let root = sysroot.join(sr.deployment_dirpath(&deployment).as_str());
    let filtered = image_filtered_content_warning(&repo, &imgref.imgref)
        .with_context(|| format!("reading what the import of {image} filtered"))?;
    Ok(Deployed {
        base_commit: state.base_commit.clone(),
        merge_commit: state.merge_commit.clone(),
        root,
        var: sysroot.join("ostree/deploy").join(STATEROOT).join("var"),
        filtered,
    })
}
