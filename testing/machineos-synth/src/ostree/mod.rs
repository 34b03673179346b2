//! ostree encapsulation of a synthetic tree (see [`objects`] for the object formats).

mod encapsulate;
pub(crate) mod objects;

pub(crate) use encapsulate::encapsulate;
