//! The health gate: what an updated node must show after its reboot before its update counts
//! as done, and what happens when it does not. Pure: the pool's annotations and what the
//! agent sees of its node in, a [`Verdict`] out.
//!
//! Contract:
//! * **The gate** ([`Gate`]) is configured per pool by annotations
//!   ([`vocab::HEALTH_TIMEOUT`], default 10 minutes, `0`/`off` turns it off;
//!   [`vocab::HEALTH_DAEMONSETS`], default none; [`vocab::HEALTH_CONDITIONS`], default none)
//!   and the pool's soak (`minReadySeconds`). The rollout hands it to each node it targets
//!   ([`vocab::HEALTH_GATE`], JSON), so the agent needs no read access to pools.
//! * **The checks** ([`failing`]), all on the node the agent runs on: the Node's `Ready`
//!   condition is `True`; none of the kubelet's pressure conditions (`MemoryPressure`,
//!   `DiskPressure`, `PIDPressure`) nor `NetworkUnavailable` is `True`; every named
//!   DaemonSet has a pod on the node and it is Ready (a DaemonSet with no pod there fails:
//!   name only DaemonSets that run on every node of the pool); every named condition has
//!   the named status.
//! * **The verdict** ([`verdict`]): healthy once every check has held, without a break, for
//!   the soak; failed when a check fails at the deadline (`timeout` after the agent first saw
//!   the node booted into the image), naming the first failing check and its evidence;
//!   otherwise still being checked. A node that passed is never judged again for that move:
//!   the agent finishes the update.
//! * **The rollback record** ([`RolledBack`], [`vocab::ROLLED_BACK`]) is what the agent
//!   leaves on a node it rolled back; the rollout quarantines the image it names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::vocab;

/// The default deadline: 10 minutes after the node booted the image.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 600;

/// The kubelet's conditions that must not be `True` on a healthy node.
pub const KUBELET_PROBLEMS: [&str; 4] = [
    "MemoryPressure",
    "DiskPressure",
    "PIDPressure",
    "NetworkUnavailable",
];

/// A pool's health gate, as handed to its nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Gate {
    /// How long after the node booted the image it has to pass.
    pub timeout_seconds: u64,
    /// How long every check must hold, without a break, to pass (the pool's
    /// `minReadySeconds`).
    #[serde(default)]
    pub soak_seconds: u64,
    /// DaemonSets (`namespace/name`) whose pod on the node must be Ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub daemon_sets: Vec<String>,
    /// Node conditions that must hold: type → status (`True`, `False`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub conditions: BTreeMap<String, String>,
}

/// A pool annotation of the gate that cannot be read: which, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {key}: {message}")]
pub struct GateError {
    /// The annotation.
    pub key: &'static str,
    /// Why.
    pub message: String,
}

impl Gate {
    /// The gate a pool's annotations ask for, with its soak; `Ok(None)`: turned off.
    pub fn from_pool(
        annotations: &BTreeMap<String, String>,
        min_ready_seconds: i64,
    ) -> Result<Option<Gate>, GateError> {
        let get = |k: &str| {
            annotations
                .get(k)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
        };
        let timeout_seconds = match get(vocab::HEALTH_TIMEOUT) {
            None => DEFAULT_TIMEOUT_SECONDS,
            Some("off") => return Ok(None),
            Some(v) => parse_duration(v).map_err(|message| GateError {
                key: vocab::HEALTH_TIMEOUT,
                message,
            })?,
        };
        if timeout_seconds == 0 {
            return Ok(None);
        }
        let mut daemon_sets = Vec::new();
        for ds in get(vocab::HEALTH_DAEMONSETS)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            match ds.split_once('/') {
                Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                    daemon_sets.push(ds.to_owned());
                }
                _ => {
                    return Err(GateError {
                        key: vocab::HEALTH_DAEMONSETS,
                        message: format!("{ds:?} is not namespace/name"),
                    });
                }
            }
        }
        let mut conditions = BTreeMap::new();
        for c in get(vocab::HEALTH_CONDITIONS)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            match c.split_once('=') {
                Some((t, s)) if !t.trim().is_empty() && matches!(s.trim(), "True" | "False") => {
                    conditions.insert(t.trim().to_owned(), s.trim().to_owned());
                }
                _ => {
                    return Err(GateError {
                        key: vocab::HEALTH_CONDITIONS,
                        message: format!("{c:?} is not Type=True or Type=False"),
                    });
                }
            }
        }
        Ok(Some(Gate {
            timeout_seconds,
            soak_seconds: u64::try_from(min_ready_seconds).unwrap_or(0),
            daemon_sets,
            conditions,
        }))
    }

    /// The node annotation value (JSON).
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parse the node annotation; `None` for anything unreadable (no gate).
    pub fn parse(s: &str) -> Option<Gate> {
        serde_json::from_str(s).ok()
    }

    /// One line for `machineos rollout plan` and conditions.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "Ready within {}, held {}",
            seconds(self.timeout_seconds),
            seconds(self.soak_seconds)
        );
        if !self.daemon_sets.is_empty() {
            s.push_str(&format!(
                "; DaemonSet pods Ready: {}",
                self.daemon_sets.join(", ")
            ));
        }
        if !self.conditions.is_empty() {
            let c: Vec<String> = self
                .conditions
                .iter()
                .map(|(t, v)| format!("{t}={v}"))
                .collect();
            s.push_str(&format!("; conditions {}", c.join(", ")));
        }
        s
    }
}

/// `45` → `45s`, `600` → `10m`, `5400` → `1h30m`.
fn seconds(n: u64) -> String {
    let (h, m, s) = (n / 3600, n % 3600 / 60, n % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// A duration as Go's `time.ParseDuration` writes the common ones (`90s`, `10m`, `1h30m`),
/// or a number of seconds; in whole seconds (rounded up), at most a day.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let bad = || format!("{s:?} is not a duration (90s, 10m, 1h30m, or seconds)");
    if let Ok(n) = s.parse::<u64>() {
        return (n <= 86_400).then_some(n).ok_or_else(bad);
    }
    if s.is_empty() {
        return Err(bad());
    }
    let mut ms: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        ms = n
            .checked_mul(unit)
            .and_then(|v| ms.checked_add(v))
            .ok_or_else(bad)?;
    }
    let secs = ms.div_ceil(1000);
    (secs <= 86_400).then_some(secs).ok_or_else(bad)
}

/// A DaemonSet's pod on the node, as the agent found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PodHealth {
    /// Its `Ready` condition is `True`.
    Ready,
    /// It exists and is not Ready: its phase and why.
    NotReady(String),
}

/// What the agent sees of its node's health.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeHealth {
    /// The Node's conditions: type → (status — `True`, `False`, `Unknown` —, reason,
    /// message), the last two for the evidence.
    pub conditions: BTreeMap<String, (String, String, String)>,
    /// The pods on the node owned by a DaemonSet (`namespace/name` of the DaemonSet).
    pub daemon_set_pods: BTreeMap<String, PodHealth>,
}

/// A check of the gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "check", content = "name")]
pub enum Check {
    /// The Node's `Ready` condition.
    NodeReady,
    /// A kubelet condition that must not be `True` ([`KUBELET_PROBLEMS`]).
    Kubelet(String),
    /// A named DaemonSet's pod.
    DaemonSet(String),
    /// A named node condition.
    Condition(String),
    /// The boot guard in the image (`machineos_boot_guard`): the kubelet's health endpoint
    /// never answered `ok` after the boot, so the guard rolled back before the agent ran.
    BootGuard,
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Check::NodeReady => f.write_str("node Ready"),
            Check::Kubelet(c) => write!(f, "kubelet condition {c}"),
            Check::DaemonSet(d) => write!(f, "DaemonSet {d}"),
            Check::Condition(c) => write!(f, "node condition {c}"),
            Check::BootGuard => f.write_str("the boot guard's kubelet healthz"),
        }
    }
}

/// A check that does not hold, and what was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// The check.
    pub check: Check,
    /// What the node showed.
    pub evidence: String,
}

/// The checks of `gate` that `health` fails: Ready, the kubelet conditions, the DaemonSets in
/// the order the gate lists them, then the named conditions by name.
pub fn failing(gate: &Gate, health: &NodeHealth) -> Vec<Failing> {
    let mut out = Vec::new();
    let cond = |t: &str| {
        health
            .conditions
            .get(t)
            .map(|(s, r, m)| (s.as_str(), r.as_str(), m.as_str()))
    };
    let said = |t: &str, (s, r, m): (&str, &str, &str)| {
        let mut e = format!("{t}={s}");
        if !r.is_empty() {
            e.push_str(&format!(" ({r})"));
        }
        if !m.is_empty() {
            e.push_str(&format!(": {m}"));
        }
        e
    };
    match cond("Ready") {
        Some(("True", _, _)) => {}
        Some(seen) => out.push(Failing {
            check: Check::NodeReady,
            evidence: said("Ready", seen),
        }),
        None => out.push(Failing {
            check: Check::NodeReady,
            evidence: "the Node reports no Ready condition".into(),
        }),
    }
    for k in KUBELET_PROBLEMS {
        if let Some(seen) = cond(k).filter(|(s, _, _)| *s == "True") {
            out.push(Failing {
                check: Check::Kubelet(k.to_owned()),
                evidence: said(k, seen),
            });
        }
    }
    for ds in &gate.daemon_sets {
        match health.daemon_set_pods.get(ds) {
            Some(PodHealth::Ready) => {}
            Some(PodHealth::NotReady(why)) => out.push(Failing {
                check: Check::DaemonSet(ds.clone()),
                evidence: format!("its pod on the node is not Ready: {why}"),
            }),
            None => out.push(Failing {
                check: Check::DaemonSet(ds.clone()),
                evidence: "no pod of it on the node".into(),
            }),
        }
    }
    for (t, want) in &gate.conditions {
        match cond(t) {
            Some((s, _, _)) if s == want => {}
            Some(seen) => out.push(Failing {
                check: Check::Condition(t.clone()),
                evidence: format!("wanted {t}={want}, {}", said(t, seen)),
            }),
            None => out.push(Failing {
                check: Check::Condition(t.clone()),
                evidence: format!("wanted {t}={want}, the Node reports no {t} condition"),
            }),
        }
    }
    out
}

/// Where a node stands at the gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every check held for the soak: the update is done.
    Healthy,
    /// Every check holds, since `since`; the soak ends at `until` (seconds).
    Soaking {
        /// When the checks began to hold.
        since: i64,
        /// When the soak ends.
        until: i64,
    },
    /// A check fails; the deadline is `deadline` (seconds).
    Waiting {
        /// The first failing check.
        failing: Failing,
        /// When the node fails the gate if it still does not pass.
        deadline: i64,
    },
    /// The deadline passed with a check failing.
    Failed(Failing),
}

/// The verdict at `now` (all times in seconds since the epoch): `booted` is when the agent
/// first saw the node booted into the image, `healthy_since` when every check last began to
/// hold (`None`: they did not, at the last look).
pub fn verdict(
    gate: &Gate,
    health: &NodeHealth,
    booted: i64,
    healthy_since: Option<i64>,
    now: i64,
) -> Verdict {
    let deadline = booted.saturating_add(i64::try_from(gate.timeout_seconds).unwrap_or(i64::MAX));
    match failing(gate, health).into_iter().next() {
        Some(f) if now >= deadline => Verdict::Failed(f),
        Some(f) => Verdict::Waiting {
            failing: f,
            deadline,
        },
        None => {
            let since = healthy_since.unwrap_or(now);
            let until = since.saturating_add(i64::try_from(gate.soak_seconds).unwrap_or(i64::MAX));
            if now >= until {
                Verdict::Healthy
            } else {
                Verdict::Soaking { since, until }
            }
        }
    }
}

/// The [`vocab::ROLLED_BACK`] record: the agent rolled the node back from `image`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolledBack {
    /// The image it failed on (the target's pullspec).
    pub image: String,
    /// The rendered config it failed with.
    pub config: String,
    /// The image it rolled back to.
    pub to: String,
    /// The check that failed.
    pub check: Check,
    /// What the node showed.
    pub evidence: String,
    /// When the rollback finished (milliseconds since the epoch).
    pub at: i64,
}

impl RolledBack {
    /// The annotation value (JSON).
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parse the annotation; `None` for anything unreadable.
    pub fn parse(s: &str) -> Option<RolledBack> {
        serde_json::from_str(s).ok()
    }

    /// One line: `failed node Ready (Ready=False (KubeletNotReady)) on IMAGE`.
    pub fn describe(&self) -> String {
        format!(
            "failed {} ({}) on {}",
            self.check, self.evidence, self.image
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn health(ready: &str) -> NodeHealth {
        let mut h = NodeHealth::default();
        h.conditions.insert(
            "Ready".into(),
            (ready.into(), "KubeletReady".into(), String::new()),
        );
        h
    }

    #[test]
    fn the_pool_annotations_make_the_gate_with_documented_defaults() {
        let g = Gate::from_pool(&ann(&[]), 30).unwrap().unwrap();
        assert_eq!(g.timeout_seconds, 600);
        assert_eq!(g.soak_seconds, 30);
        assert!(g.daemon_sets.is_empty() && g.conditions.is_empty());
        let g = Gate::from_pool(
            &ann(&[
                (vocab::HEALTH_TIMEOUT, "1h30m"),
                (
                    vocab::HEALTH_DAEMONSETS,
                    "openshift-sdn/sdn, machineos/machineos-agent",
                ),
                (vocab::HEALTH_CONDITIONS, "NetworkReady=True"),
            ]),
            0,
        )
        .unwrap()
        .unwrap();
        assert_eq!(g.timeout_seconds, 5400);
        assert_eq!(
            g.daemon_sets,
            ["openshift-sdn/sdn", "machineos/machineos-agent"]
        );
        assert_eq!(
            g.conditions.get("NetworkReady").map(String::as_str),
            Some("True")
        );
        assert_eq!(Gate::parse(&g.to_annotation()), Some(g.clone()));
        for off in ["0", "off", "0s"] {
            assert_eq!(
                Gate::from_pool(&ann(&[(vocab::HEALTH_TIMEOUT, off)]), 0),
                Ok(None),
                "{off}"
            );
        }
        for (k, v) in [
            (vocab::HEALTH_TIMEOUT, "ten minutes"),
            (vocab::HEALTH_TIMEOUT, "-5m"),
            (vocab::HEALTH_TIMEOUT, "2d"),
            (vocab::HEALTH_DAEMONSETS, "sdn"),
            (vocab::HEALTH_DAEMONSETS, "a/b/c"),
            (vocab::HEALTH_CONDITIONS, "NetworkReady"),
            (vocab::HEALTH_CONDITIONS, "NetworkReady=yes"),
        ] {
            let e = Gate::from_pool(&ann(&[(k, v)]), 0).unwrap_err();
            assert_eq!(e.key, k, "{v}");
        }
    }

    #[test]
    fn durations_as_go_writes_them() {
        for (s, want) in [
            ("90", 90),
            ("90s", 90),
            ("10m", 600),
            ("1h30m", 5400),
            ("1500ms", 2),
            ("86400", 86_400),
        ] {
            assert_eq!(parse_duration(s), Ok(want), "{s}");
        }
        for s in ["", "m", "10x", "1.5h", "25h", "10 m"] {
            assert!(parse_duration(s).is_err(), "{s}");
        }
    }

    #[test]
    fn the_checks_name_what_fails_in_order() {
        let gate = Gate {
            timeout_seconds: 600,
            soak_seconds: 0,
            daemon_sets: vec!["kube-system/cni".into(), "machineos/agent".into()],
            conditions: [("NetworkReady".to_owned(), "True".to_owned())].into(),
        };
        let mut h = health("True");
        h.conditions.insert(
            "DiskPressure".into(),
            (
                "True".into(),
                "KubeletHasDiskPressure".into(),
                "1% free".into(),
            ),
        );
        h.conditions.insert(
            "MemoryPressure".into(),
            ("False".into(), String::new(), String::new()),
        );
        h.daemon_set_pods.insert(
            "kube-system/cni".into(),
            PodHealth::NotReady("Running, CrashLoopBackOff".into()),
        );
        let f = failing(&gate, &h);
        let checks: Vec<String> = f.iter().map(|f| f.check.to_string()).collect();
        assert_eq!(
            checks,
            [
                "kubelet condition DiskPressure",
                "DaemonSet kube-system/cni",
                "DaemonSet machineos/agent",
                "node condition NetworkReady",
            ]
        );
        assert_eq!(
            f[0].evidence,
            "DiskPressure=True (KubeletHasDiskPressure): 1% free"
        );
        assert_eq!(f[2].evidence, "no pod of it on the node");
        assert!(f[3].evidence.contains("no NetworkReady condition"));
        // No Ready condition at all is a failure of Ready.
        let f = failing(&gate, &NodeHealth::default());
        assert_eq!(f[0].check, Check::NodeReady);
    }

    /// The verdict table: (ready, booted, healthy_since, now) → verdict, timeout 100 s, soak
    /// 30 s.
    #[test]
    fn the_verdict_by_deadline_and_soak() {
        let gate = Gate {
            timeout_seconds: 100,
            soak_seconds: 30,
            daemon_sets: Vec::new(),
            conditions: BTreeMap::new(),
        };
        let not_ready = |deadline| Verdict::Waiting {
            failing: Failing {
                check: Check::NodeReady,
                evidence: "Ready=False (KubeletReady)".into(),
            },
            deadline,
        };
        let rows: Vec<(&str, i64, Option<i64>, i64, Verdict)> = vec![
            ("False", 1000, None, 1000, not_ready(1100)),
            ("False", 1000, None, 1099, not_ready(1100)),
            (
                "False",
                1000,
                None,
                1100,
                Verdict::Failed(Failing {
                    check: Check::NodeReady,
                    evidence: "Ready=False (KubeletReady)".into(),
                }),
            ),
            // A break in health after the soak began: the deadline still decides.
            (
                "False",
                1000,
                Some(1050),
                1200,
                match verdict(&gate, &health("False"), 1000, None, 1200) {
                    v @ Verdict::Failed(_) => v,
                    v => panic!("{v:?}"),
                },
            ),
            (
                "True",
                1000,
                None,
                1010,
                Verdict::Soaking {
                    since: 1010,
                    until: 1040,
                },
            ),
            (
                "True",
                1000,
                Some(1010),
                1039,
                Verdict::Soaking {
                    since: 1010,
                    until: 1040,
                },
            ),
            ("True", 1000, Some(1010), 1040, Verdict::Healthy),
            // Healthy past the deadline: passes once soaked, never fails.
            (
                "True",
                1000,
                None,
                5000,
                Verdict::Soaking {
                    since: 5000,
                    until: 5030,
                },
            ),
            ("True", 1000, Some(1090), 1120, Verdict::Healthy),
        ];
        for (i, (ready, booted, since, now, want)) in rows.into_iter().enumerate() {
            assert_eq!(
                verdict(&gate, &health(ready), booted, since, now),
                want,
                "row {i}"
            );
        }
    }

    #[test]
    fn the_rollback_record_round_trips() {
        let r = RolledBack {
            image: "r/os@sha256:bb".into(),
            config: "rendered-worker-2".into(),
            to: "r/os@sha256:aa".into(),
            check: Check::DaemonSet("kube-system/cni".into()),
            evidence: "no pod of it on the node".into(),
            at: 1_700_000_000_000,
        };
        assert_eq!(RolledBack::parse(&r.to_annotation()), Some(r.clone()));
        assert_eq!(
            r.describe(),
            "failed DaemonSet kube-system/cni (no pod of it on the node) on r/os@sha256:bb"
        );
    }
}
