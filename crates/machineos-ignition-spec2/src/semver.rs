//! A semantic version as github.com/coreos/go-semver parses and compares it (the MCO and
//! Ignition's spec 2 parser route configs by it): `NewVersion`, equality as Go compares the
//! structs, and `LessThan` where a pre-release sorts before its release.

/// A semantic version as go-semver parses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Semver {
    pub major: i64,
    pub minor: i64,
    pub patch: i64,
    pub pre: String,
    pub meta: String,
}

impl Semver {
    /// go-semver's `NewVersion`.
    pub(crate) fn parse(s: &str) -> Option<Semver> {
        let (rest, meta) = s.split_once('+').unwrap_or((s, ""));
        let (core, pre) = rest.split_once('-').unwrap_or((rest, ""));
        let parts: Vec<&str> = core.splitn(3, '.').collect();
        if parts.len() != 3 || !valid_identifier(pre) || !valid_identifier(meta) {
            return None;
        }
        let num = |p: &str| -> Option<i64> {
            // strconv.ParseInt: an optional sign, then decimal digits.
            let digits = p.strip_prefix(['+', '-']).unwrap_or(p);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            p.parse::<i64>().ok()
        };
        Some(Semver {
            major: num(parts[0])?,
            minor: num(parts[1])?,
            patch: num(parts[2])?,
            pre: pre.to_string(),
            meta: meta.to_string(),
        })
    }

    /// `Version == {major, minor, 0}` as Go compares the structs.
    pub(crate) fn is(&self, major: i64, minor: i64) -> bool {
        (self.major, self.minor, self.patch) == (major, minor, 0)
            && self.pre.is_empty()
            && self.meta.is_empty()
    }

    /// `LessThan({major, minor, 0})`: a pre-release sorts before its release.
    pub(crate) fn less_than(&self, major: i64, minor: i64) -> bool {
        let own = (self.major, self.minor, self.patch);
        own < (major, minor, 0) || (own == (major, minor, 0) && !self.pre.is_empty())
    }
}

/// `^[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*$`, or empty.
fn valid_identifier(id: &str) -> bool {
    id.is_empty()
        || id
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semver_as_go_semver() {
        let v = Semver::parse("2.2.0").unwrap_or_else(|| panic!("2.2.0"));
        assert!(v.is(2, 2) && !v.less_than(2, 2));
        assert!(Semver::parse("02.2.00").is_some_and(|v| v.is(2, 2)));
        assert!(Semver::parse("2.2.0-rc1").is_some_and(|v| v.less_than(2, 2) && !v.is(2, 2)));
        assert!(Semver::parse("2.2.0+x").is_some_and(|v| !v.less_than(2, 2) && !v.is(2, 2)));
        // An empty pre-release is no pre-release.
        assert!(Semver::parse("2.2.0-").is_some_and(|v| v.is(2, 2)));
        for bad in [
            "",
            "2.2",
            "2.2.x",
            "v2.2.0",
            "2.2.0-a..b",
            "2.2.0+a..b",
            "2.2. 0",
        ] {
            assert_eq!(Semver::parse(bad), None, "{bad:?}");
        }
    }
}
