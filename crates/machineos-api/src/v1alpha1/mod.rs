//! `machineconfiguration.openshift.io/v1alpha1`: machineos' own kinds, which the MCO proposed
//! but never shipped (its on-cluster layering design proposed per-node MachineImage
//! assignment, multi-arch images and image retention).
//!
//! * [`MachineOSImage`]: the record of a built image — per-architecture manifest digests, the
//!   digest nodes pull (the OCI index for a multi-arch build), the base image it was built
//!   from, the rendered MachineConfig and pool it carries — and its rollout conditions.
//! * [`MachineImage`]: an admin's assignment of one image, by digest, to one node or to the
//!   nodes a selector matches; those nodes leave their pool's rollout.

mod machineimage;
mod machineosimage;

pub use machineimage::{
    MachineImage, MachineImageSpec, MachineImageSpecError, MachineImageStatus, NodeTarget,
};
pub use machineosimage::{
    ArchitectureManifest, ClassCount, ImageChanges, ImageDisruption, ImageFileChange,
    MAX_LISTED_CHANGES, MachineOSImage, MachineOSImageSpec, MachineOSImageStatus,
};
