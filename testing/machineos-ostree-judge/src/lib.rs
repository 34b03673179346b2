//! The judge of whether a node can boot an image: ostree-ext's container import — what
//! `rpm-ostree rebase ostree-unverified-registry:…` and bootc run on a node — imports the
//! image into the `bare` repository of a fresh test sysroot and deploys it, as a node's
//! first deployment; [`Snapshot`] then describes the deployed tree (kind, mode, owner,
//! content digest, symlink target, inode group) so tests can compare it with what the
//! image's layers mean.
//!
//! Test-only: it links libostree (Debian's `libostree-dev` 2022.7 through the crates.io
//! `ostree-ext` 0.15) and uses skopeo's image proxy and the `ostree` command, as ostree-ext
//! does. Deploying goes through the `machineos-ostree-judge` binary, so that the caller can
//! set `OSTREE_SYSROOT_OPTS=skip-sync` for it (a deployment would otherwise `syncfs` and
//! freeze the host's file system) without touching its own environment.
//!
//! Errors are `anyhow` with context naming the image and the step: this crate is a test
//! harness, and ostree-ext's own errors are `anyhow`.

mod deploy;
mod snapshot;

pub use deploy::{Deployed, deploy};
pub use snapshot::{Entry, Kind, Snapshot};
