//! Image references, platforms, manifests and configs, OCI layouts, registry credentials.
