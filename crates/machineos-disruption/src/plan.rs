//! The plan of one node's move, as the rollout hands it to the node's agent: the
//! [`NODE_DISRUPTION`] annotation, written by the controller in the same patch as the
//! desired config and image it describes, read by the agent, which carries it out.
//!
//! Contract:
//! * [`NodePlan`] is JSON `{"config": <target rendered MachineConfig>, "image": <target
//!   image>, "class": "Restart", "actions": [<the API's action shape>…]}`. It describes the
//!   move to exactly that config and image: an agent whose target differs ignores it, and
//!   an unreadable or missing plan means `Reboot` (the MCO's behaviour for layered nodes
//!   before policies, and never less disruption than intended).
//! * The class decides the agent's path: below `Drain`, nothing is cordoned or drained;
//!   `Drain` drains first; both apply the change to the running system and leave the image
//!   staged for the next boot. `SoftReboot` and `Reboot` boot the image
//!   ([`Class::boots`]). The actions are run after a live apply, in order.

use serde::{Deserialize, Serialize};

use crate::decide::Class;
use crate::policy::Action;

/// The node annotation the plan is written to (machineos's; the MCO keeps the decision in
/// its daemon).
pub use machineos_vocab::node::NODE_DISRUPTION;

/// One node's move (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePlan {
    /// The rendered MachineConfig moved to.
    pub config: String,
    /// The image moved to, by digest.
    pub image: String,
    /// The class.
    pub class: Class,
    /// The actions run after a live apply, in order (`Reload`, `Restart`, `DaemonReload`,
    /// `Special`; `None` and `Drain` run nothing).
    #[serde(default)]
    pub actions: Vec<Action>,
}

impl NodePlan {
    /// The annotation value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parse an annotation value; `None` for anything unreadable (the move is then a reboot).
    pub fn parse(s: &str) -> Option<NodePlan> {
        serde_json::from_str(s).ok()
    }

    /// Whether it describes the move to `config` and `image`.
    pub fn is_for(&self, config: &str, image: &str) -> bool {
        self.config == config && self.image == image
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_round_trips_through_its_annotation_in_the_apis_action_shape() {
        let p = NodePlan {
            config: "rendered-worker-1".into(),
            image: "r/os@sha256:bb".into(),
            class: Class::Restart,
            actions: vec![
                Action::DaemonReload,
                Action::Restart("chronyd.service".into()),
                Action::Reload("crio.service".into()),
                Action::Special,
            ],
        };
        let a = p.to_annotation();
        assert!(
            a.contains(r#""class":"Restart""#)
                && a.contains(r#"{"type":"Restart","restart":{"serviceName":"chronyd.service"}}"#),
            "{a}"
        );
        assert_eq!(NodePlan::parse(&a), Some(p.clone()));
        assert!(p.is_for("rendered-worker-1", "r/os@sha256:bb"));
        assert!(!p.is_for("rendered-worker-2", "r/os@sha256:bb"));
        for bad in [
            "",
            "{}",
            r#"{"config":"c","image":"i","class":"Gentle"}"#,
            r#"{"config":"c","image":"i","class":"None","actions":[{"type":"Restart"}]}"#,
            r#"{"config":"c","image":"i","class":"None","actions":[{"type":"Jump"}]}"#,
        ] {
            assert_eq!(NodePlan::parse(bad), None, "{bad}");
        }
        for c in Class::ALL {
            assert_eq!(Class::parse(c.name()), Some(c));
            assert_eq!(c.takes_slot(), c >= Class::Drain, "{c:?}");
            assert_eq!(c.boots(), matches!(c, Class::SoftReboot | Class::Reboot));
        }
    }
}
