//! What `machineos build --platform` asks for: one platform (by default this machine's),
//! `all` (every platform the base offers), or a comma-separated list (no platform twice).

use anyhow::{Context, bail};
use machineos_image::Platform;

/// What `--platform` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// One platform (the default: this machine's).
    One(Platform),
    /// Every platform the base offers.
    All,
    /// These platforms, in this order.
    List(Vec<Platform>),
}

/// Parses `--platform`.
pub fn choice(arg: Option<&str>) -> anyhow::Result<Choice> {
    let Some(arg) = arg else {
        return Ok(Choice::One(Platform::host()));
    };
    if arg == "all" {
        return Ok(Choice::All);
    }
    if !arg.contains(',') {
        return Ok(Choice::One(arg.parse().context("--platform")?));
    }
    let mut list: Vec<Platform> = Vec::new();
    for part in arg.split(',') {
        let p: Platform = part
            .trim()
            .parse()
            .with_context(|| format!("--platform: {part:?}"))?;
        if list.iter().any(|q| q.matches(&p)) {
            bail!("--platform: {p} is given twice");
        }
        list.push(p);
    }
    Ok(Choice::List(list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_choices() {
        let p = |s: &str| s.parse::<Platform>().unwrap();
        assert_eq!(choice(None).unwrap(), Choice::One(Platform::host()));
        assert_eq!(choice(Some("all")).unwrap(), Choice::All);
        assert_eq!(
            choice(Some("linux/arm64")).unwrap(),
            Choice::One(p("linux/arm64"))
        );
        assert_eq!(
            choice(Some("linux/amd64, linux/s390x")).unwrap(),
            Choice::List(vec![p("linux/amd64"), p("linux/s390x")])
        );
        let twice = choice(Some("linux/arm64,linux/aarch64")).unwrap_err();
        assert!(format!("{twice:#}").contains("given twice"), "{twice:#}");
        assert!(choice(Some("linux/amd64,")).is_err());
    }
}
