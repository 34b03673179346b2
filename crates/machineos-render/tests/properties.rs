//! Properties of rendering: deterministic, independent of the order the MachineConfigs are
//! given in (only their names and roles order the merge), and the name changes exactly when
//! the rendered spec does.

use machineos_api::v1::MachineConfig;
use machineos_render::{RenderDefaults, go_json::spec_json, render};
use proptest::prelude::*;
use serde_json::{Value, json};

fn mc(name: String, role: &str, spec: Value) -> MachineConfig {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": role}},
        "spec": spec,
    }))
    .expect("a MachineConfig")
}

/// A MachineConfig's spec from a few small choices (so that collisions happen).
fn spec() -> impl Strategy<Value = Value> {
    // Distinct paths within one MachineConfig (Ignition refuses duplicates).
    let files = prop::collection::btree_map(
        0..3usize,
        (0..3usize, prop::option::of(prop::sample::select(vec![0o644, 0o600]))),
        0..3,
    )
    .prop_map(|files| {
        files
            .into_iter()
            .map(|(p, (c, mode))| {
                let mut f = json!({"path": format!("/etc/f{p}"), "contents": {"source": format!("data:,c{c}")}});
                if let Some(m) = mode {
                    f["mode"] = json!(m);
                }
                f
            })
            .collect::<Vec<_>>()
    });
    (
        prop::option::of(files),
        prop::collection::vec(prop::sample::select(vec!["quiet", "nosmt", "a=b"]), 0..2),
        any::<bool>(),
        prop::sample::select(vec!["", "default", "realtime"]),
    )
        .prop_map(|(files, kargs, fips, kernel)| {
            let mut spec = json!({"kernelArguments": kargs, "fips": fips, "kernelType": kernel});
            if let Some(files) = files {
                spec["config"] =
                    json!({"ignition": {"version": "3.2.0"}, "storage": {"files": files}});
            }
            spec
        })
}

fn pool() -> impl Strategy<Value = Vec<MachineConfig>> {
    prop::collection::vec(
        (prop::sample::select(vec!["worker", "infra"]), spec()),
        1..4,
    )
    .prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(|(i, (role, spec))| mc(format!("{i:02}-{role}"), role, spec))
            .collect()
    })
}

fn run(mcs: &[MachineConfig]) -> (String, Value) {
    let refs: Vec<&MachineConfig> = mcs.iter().collect();
    let r = render("infra", &refs, &RenderDefaults::default()).expect("renders");
    (
        r.machine_config.name().to_owned(),
        spec_json(&r.machine_config.spec),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn deterministic_and_independent_of_input_order(mcs in pool(), seed in any::<u64>()) {
        let first = run(&mcs);
        prop_assert_eq!(&first, &run(&mcs));
        let mut shuffled = mcs.clone();
        // A deterministic permutation from the seed.
        let n = shuffled.len();
        for i in (1..n).rev() {
            shuffled.swap(i, (seed as usize).wrapping_add(i * 7) % (i + 1));
        }
        prop_assert_eq!(first, run(&shuffled));
    }

    #[test]
    fn the_name_changes_iff_the_spec_does(a in pool(), b in pool()) {
        let (name_a, spec_a) = run(&a);
        let (name_b, spec_b) = run(&b);
        prop_assert_eq!(name_a == name_b, spec_a == spec_b, "{} {}", name_a, name_b);
    }
}
