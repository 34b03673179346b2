//! A MachineOSBuild's phase and the only transitions allowed between phases.
//!
//! The MCO writes all five conditions (`Prepared`, `Building`, `Succeeded`, `Failed`,
//! `Interrupted`) on every status update, exactly one True except in the initial state where
//! all are False (MCO `pkg/apihelpers/machineosbuild.go`). Allowed transitions follow MCO
//! `pkg/controller/build/helpers.go:isMachineOSBuildStatusUpdateNeeded`: initial → anything,
//! Prepared → Building or terminal, Building → terminal; nothing leaves a terminal phase
//! (openshift/api's CEL rules on `status.conditions` reject it too), and Building never goes
//! back to Prepared. [`transition`] is the one gate every status change in
//! [`crate::decide()`] passes through.

use serde::Serialize;

/// One `metav1.Condition` of a MachineOSBuild (the executor stamps `lastTransitionTime` when
/// the status changes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Condition {
    /// type.
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    /// reason.
    pub reason: String,
    /// message.
    pub message: String,
    /// observedGeneration.
    pub observed_generation: i64,
}

/// Where a build is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Phase {
    /// Created, all conditions False (or none written yet).
    #[default]
    Initial,
    /// Backend accepted it; not running.
    Prepared,
    /// Running.
    Building,
    /// Pushed; terminal.
    Succeeded,
    /// Gave up; terminal.
    Failed,
    /// Superseded or cancelled; terminal.
    Interrupted,
}

/// A transition [`transition`] refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransitionError {
    /// From.
    pub from: Phase,
    /// To.
    pub to: Phase,
}

impl std::fmt::Display for TransitionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MachineOSBuild cannot go from {:?} to {:?}",
            self.from, self.to
        )
    }
}

impl std::error::Error for TransitionError {}

impl machineos_diagnostics::Classify for TransitionError {
    fn reason(&self) -> &'static str {
        "IllegalTransition"
    }
    fn retry(&self) -> machineos_diagnostics::Retry {
        machineos_diagnostics::Retry::Permanent
    }
}

impl Phase {
    /// Succeeded, Failed or Interrupted: the conditions never change again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed | Phase::Interrupted)
    }

    /// Not terminal: the build occupies its MachineOSConfig's one active slot.
    pub fn is_active(self) -> bool {
        !self.is_terminal()
    }

    /// The condition type that is True in this phase (`None` for [`Phase::Initial`]).
    pub fn condition_type(self) -> Option<&'static str> {
        match self {
            Phase::Initial => None,
            Phase::Prepared => Some("Prepared"),
            Phase::Building => Some("Building"),
            Phase::Succeeded => Some("Succeeded"),
            Phase::Failed => Some("Failed"),
            Phase::Interrupted => Some("Interrupted"),
        }
    }

    /// The MCO's reason and message when this phase's condition is True.
    pub fn reason_message(self) -> (&'static str, &'static str) {
        match self {
            Phase::Initial => ("Initial", "Build Initial"),
            Phase::Prepared => ("Prepared", "Build Prepared and Pending"),
            Phase::Building => ("Building", "Image Build In Progress"),
            Phase::Succeeded => ("Ready", "Build Ready"),
            Phase::Failed => ("Failed", "Build Failed"),
            Phase::Interrupted => ("Interrupted", "Build Interrupted"),
        }
    }

    /// The phase a build's conditions say: `(type, status)` pairs. A terminal True condition
    /// wins over a transient one (a status the API would not have accepted still reads as
    /// finished, never as running); none True is [`Phase::Initial`].
    pub fn from_conditions<'a>(conditions: impl IntoIterator<Item = (&'a str, &'a str)>) -> Phase {
        let mut best = Phase::Initial;
        for (type_, status) in conditions {
            if status != "True" {
                continue;
            }
            let p = match type_ {
                "Prepared" => Phase::Prepared,
                "Building" => Phase::Building,
                "Succeeded" => Phase::Succeeded,
                "Failed" => Phase::Failed,
                "Interrupted" => Phase::Interrupted,
                _ => continue,
            };
            if rank(p) > rank(best) {
                best = p;
            }
        }
        best
    }

    /// All five conditions for this phase, the MCO's way: this phase's True with `message`
    /// (or the MCO's default), the others False with their own reason and message.
    pub fn conditions(self, message: Option<&str>, observed_generation: i64) -> Vec<Condition> {
        crate::vocab::BUILD_CONDITION_TYPES
            .iter()
            .map(|&type_| {
                let on = self.condition_type() == Some(type_);
                let phase = match type_ {
                    "Prepared" => Phase::Prepared,
                    "Building" => Phase::Building,
                    "Succeeded" => Phase::Succeeded,
                    "Failed" => Phase::Failed,
                    _ => Phase::Interrupted,
                };
                let (reason, default_message) = phase.reason_message();
                Condition {
                    type_: type_.to_owned(),
                    status: if on { "True" } else { "False" }.to_owned(),
                    reason: reason.to_owned(),
                    message: match (on, message) {
                        (true, Some(m)) => m.to_owned(),
                        _ => default_message.to_owned(),
                    },
                    observed_generation,
                }
            })
            .collect()
    }
}

fn rank(p: Phase) -> u8 {
    match p {
        Phase::Initial => 0,
        Phase::Prepared => 1,
        Phase::Building => 2,
        Phase::Succeeded | Phase::Failed | Phase::Interrupted => 3,
    }
}

/// Whether a build may go from `from` to `to`. Staying put is allowed (a no-op); leaving a
/// terminal phase, going back (Building → Prepared) or returning to Initial is not.
pub fn transition(from: Phase, to: Phase) -> Result<Phase, TransitionError> {
    let ok = from == to
        || match from {
            Phase::Initial => to != Phase::Initial,
            Phase::Prepared => to != Phase::Initial,
            Phase::Building => to.is_terminal(),
            Phase::Succeeded | Phase::Failed | Phase::Interrupted => false,
        };
    if ok {
        Ok(to)
    } else {
        Err(TransitionError { from, to })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Phase; 6] = [
        Phase::Initial,
        Phase::Prepared,
        Phase::Building,
        Phase::Succeeded,
        Phase::Failed,
        Phase::Interrupted,
    ];

    #[test]
    fn transition_table() {
        use Phase::*;
        // (from, to, allowed)
        let allowed = [
            (Initial, Prepared),
            (Initial, Building),
            (Initial, Succeeded),
            (Initial, Failed),
            (Initial, Interrupted),
            (Prepared, Building),
            (Prepared, Succeeded),
            (Prepared, Failed),
            (Prepared, Interrupted),
            (Building, Succeeded),
            (Building, Failed),
            (Building, Interrupted),
        ];
        for from in ALL {
            for to in ALL {
                let want = from == to || allowed.contains(&(from, to));
                assert_eq!(transition(from, to).is_ok(), want, "{from:?} -> {to:?}");
            }
        }
    }

    #[test]
    fn terminal_phases_never_change() {
        for from in ALL.into_iter().filter(|p| p.is_terminal()) {
            for to in ALL.into_iter().filter(|&p| p != from) {
                assert_eq!(transition(from, to), Err(TransitionError { from, to }));
            }
        }
    }

    #[test]
    fn conditions_round_trip_through_from_conditions() {
        for p in ALL {
            let conds = p.conditions(None, 1);
            assert_eq!(conds.len(), 5);
            let trues = conds.iter().filter(|c| c.status == "True").count();
            assert_eq!(trues, usize::from(p != Phase::Initial), "{p:?}");
            let back =
                Phase::from_conditions(conds.iter().map(|c| (c.type_.as_str(), c.status.as_str())));
            assert_eq!(back, p);
        }
        let ok = Phase::Succeeded.conditions(None, 3);
        let s = ok.iter().find(|c| c.type_ == "Succeeded").unwrap();
        assert_eq!(
            (s.reason.as_str(), s.message.as_str()),
            ("Ready", "Build Ready")
        );
        assert_eq!(s.observed_generation, 3);
    }

    #[test]
    fn a_terminal_condition_wins_over_a_transient_one() {
        let p = Phase::from_conditions([("Building", "True"), ("Failed", "True")]);
        assert_eq!(p, Phase::Failed);
    }
}
