//! What every sub-controller's pass is given and gives back: [`Cx`], the parts of the
//! controller that do not change during a pass (client, options, Events, metrics), and
//! [`Requeue`], a pass's outcome as data — when the loop should run again — so the loop
//! alone owns the clock.

use std::time::Duration;

use kube::Client;

use crate::api::Events;
use crate::metrics::Metrics;
use crate::options::ControllerOptions;

/// What a pass reads and never changes.
pub(crate) struct Cx<'a> {
    /// The API client.
    pub client: &'a Client,
    /// How the controller runs.
    pub opts: &'a ControllerOptions,
    /// The Event recorder.
    pub events: &'a Events,
    /// The metrics.
    pub metrics: &'a Metrics,
}

/// The soonest moment a pass asks to run again (`None`: only on a change).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Requeue(pub Option<Duration>);

impl Requeue {
    /// Ask to run again after `d` at the latest.
    pub fn after(&mut self, d: Duration) {
        self.0 = Some(self.0.map_or(d, |r| r.min(d)));
    }

    /// The sooner of both.
    pub fn merge(&mut self, other: Requeue) {
        if let Some(d) = other.0 {
            self.after(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soonest_requeue_wins() {
        let mut r = Requeue::default();
        assert_eq!(r.0, None);
        r.after(Duration::from_secs(5));
        r.merge(Requeue(Some(Duration::from_secs(1))));
        r.merge(Requeue(None));
        r.after(Duration::from_secs(3));
        assert_eq!(r.0, Some(Duration::from_secs(1)));
    }
}
