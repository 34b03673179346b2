//! Times as the API writes them (`metav1.Time`: RFC 3339 at second precision) and this
//! machine's clock, in seconds since the Unix epoch.

/// Now, in seconds since the Unix epoch.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// RFC 3339 of `t` (seconds since the epoch); empty when out of range.
pub fn rfc3339(t: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(t)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// An RFC 3339 time in seconds since the epoch.
pub fn parse(s: &str) -> Option<i64> {
    let t: k8s_openapi::jiff::Timestamp = s.parse().ok()?;
    Some(t.as_second())
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips_at_second_precision() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::parse("2026-12-03T08:00:00Z"), Some(1_796_284_800));
        assert_eq!(
            super::parse(&super::rfc3339(1_796_284_800)),
            Some(1_796_284_800)
        );
        assert_eq!(super::parse("yesterday"), None);
        assert!(super::now() > 1_700_000_000);
    }
}
