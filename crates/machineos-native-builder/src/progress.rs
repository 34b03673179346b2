//! What a build reports while it runs, so a terminal can show progress and a script can stay
//! quiet: the library emits events, the caller decides how (or whether) to show them.

/// One step of a build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A stage began (`resolving base`, `indexing base`, `planning`, `publishing`).
    Stage(&'static str),
    /// A base layer is being indexed (0-based), of `count`.
    IndexLayer {
        /// Which layer.
        index: usize,
        /// How many there are.
        count: usize,
        /// Its compressed size.
        size: u64,
    },
    /// A blob is being copied to the destination.
    CopyBlob {
        /// Its digest.
        digest: String,
        /// Its size.
        size: u64,
    },
    /// Bytes of a base layer or a copied blob went by.
    Bytes(u64),
}

/// Receives build events. Implementations must be cheap: events come from the hot path.
pub trait Progress: Send + Sync {
    /// Called for every event.
    fn event(&self, event: Event);
}

/// Shows nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Progress for Quiet {
    fn event(&self, _: Event) {}
}
