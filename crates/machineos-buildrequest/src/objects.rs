//! The per-build objects (see the crate documentation). Written next.
