//! How the byte budget is spread: fixed text keeps its natural size, and every generated
//! file gets the rest in proportion to its weight, the remainder going to the heaviest.

use super::entry::{Body, Kind, Synth};
use super::{Tree, TreeError};

/// Give every generated file its share of the bytes not taken by fixed text.
pub(super) fn assign_sizes(tree: &mut Tree<'_>, total: u64) -> Result<(), TreeError> {
    let mut fixed = 0u64;
    let mut weights = 0u128;
    for n in tree.layers.iter().flat_map(|l| &l.nodes) {
        match &n.kind {
            Kind::File(Body::Inline(b)) => fixed += b.len() as u64,
            Kind::File(Body::Synth(s)) => weights += u128::from(s.weight),
            _ => {}
        }
    }
    if total < fixed {
        return Err(TreeError::TooFewBytes { total, need: fixed });
    }
    let budget = u128::from(total - fixed);
    let mut assigned = 0u64;
    let mut heaviest: Option<&mut Synth> = None;
    for n in tree.layers.iter_mut().flat_map(|l| &mut l.nodes) {
        if let Kind::File(Body::Synth(s)) = &mut n.kind {
            s.size = (budget * u128::from(s.weight) / weights.max(1)) as u64;
            assigned += s.size;
            if heaviest.as_ref().is_none_or(|h| s.weight > h.weight) {
                heaviest = Some(s);
            }
        }
    }
    if let Some(h) = heaviest {
        h.size += (budget as u64) - assigned;
    }
    Ok(())
}
