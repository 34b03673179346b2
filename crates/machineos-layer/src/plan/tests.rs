//! Unit tests of the planner's own rules.

use super::*;

#[test]
fn ignored_sections_are_reported() {
    let c = machineos_ignition::parse(
        br#"{"ignition":{"version":"3.5.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["k"]}]},
            "kernelArguments":{"shouldExist":["a"]},"storage":{"disks":[{"device":"/dev/vda"}]}}"#,
    )
    .unwrap()
    .config;
    let w = ignored_sections(&c);
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w[0].starts_with("$.passwd.users: ignored"));
    assert!(ignored_sections(&Config::default()).is_empty());
}
