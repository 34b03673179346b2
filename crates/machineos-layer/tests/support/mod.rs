//! Support code for the differential test against the real `ignition-apply`: the base tree,
//! the layer extractor, tree snapshots and comparison, case files, and the reference runner.

pub mod base_tree;
pub mod cases;
pub mod extract;
pub mod reference;
pub mod selftest;
pub mod tar_path;
pub mod tree;
