//! The Containerfile of a build (see the crate documentation). Written next.
