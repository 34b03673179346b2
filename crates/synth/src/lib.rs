//! Deterministic synthetic CoreOS-like base images, written as OCI layouts.
