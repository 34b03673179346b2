//! Why the tree for a spec cannot be planned: too few files or bytes for the fixed parts,
//! extra files that clash with the generated tree, or (a generator bug) a path generated
//! twice.

use machineos_diagnostics::{Classify, Retry};

/// Why the tree for a spec could not be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    /// Not enough files to give every package layer a package.
    #[error(
        "planning synthetic tree: {files} files cannot fill {layers} layers (the fixed files take {fixed}; ask for at least {need})"
    )]
    TooFewFiles {
        /// Requested files.
        files: u32,
        /// Requested layers.
        layers: u32,
        /// Files the fixed skeleton and packages take.
        fixed: u64,
        /// A count that works.
        need: u64,
    },
    /// The fixed text files alone are larger than the requested total.
    #[error(
        "planning synthetic tree: total_bytes = {total} is less than the {need} bytes of fixed text files"
    )]
    TooFewBytes {
        /// Requested bytes.
        total: u64,
        /// Bytes of the fixed files.
        need: u64,
    },
    /// An extra file's path is a directory of the generated tree.
    #[error("planning synthetic tree: extra file /{0} is a directory in the generated tree")]
    ExtraIsDir(String),
    /// An extra file's path lies below a symlink or file of the generated tree.
    #[error(
        "planning synthetic tree: extra file /{path} lies below /{ancestor}, which is not a directory in the generated tree{hint}"
    )]
    ExtraBelowNonDir {
        /// The extra file.
        path: String,
        /// The symlink or file on its way.
        ancestor: String,
        /// `" (a symlink to …)"` when it is a symlink.
        hint: String,
    },
    /// An extra file would collide with the final layer's own entries (whiteouts, opaque
    /// directory, architecture marker, rpm database).
    #[error(
        "planning synthetic tree: extra file /{0} collides with the final layer's own entries (whiteouts, opaque directory, architecture marker, rpm database)"
    )]
    ExtraOnFinalLayer(String),
    /// Two generated paths collided (a bug in the generator).
    #[error("planning synthetic tree: path /{0} generated twice")]
    Collision(String),
}

impl Classify for TreeError {
    /// `InvalidSynthSpec` when the spec asks for too few files or bytes for its shape,
    /// `InvalidExtraFile` when an extra file clashes with the generated tree, and
    /// `InternalError` for a path generated twice (a bug in the generator).
    fn reason(&self) -> &'static str {
        match self {
            TreeError::TooFewFiles { .. } | TreeError::TooFewBytes { .. } => "InvalidSynthSpec",
            TreeError::ExtraIsDir(_)
            | TreeError::ExtraBelowNonDir { .. }
            | TreeError::ExtraOnFinalLayer(_) => "InvalidExtraFile",
            TreeError::Collision(_) => "InternalError",
        }
    }

    /// Always permanent: planning is a pure function of the spec, which must change (or the
    /// generator, for a collision).
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}
