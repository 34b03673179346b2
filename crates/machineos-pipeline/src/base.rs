//! Which base image a build starts from, per platform.
//!
//! **One platform** ([`BaseChoice::one`]): a stream source (`--stream`) wins, then `--base`,
//! then the rendered `spec.osImageURL` (or `--os-image-url`); none of them is an error naming
//! all three.
//!
//! **Several platforms**: without a stream, one base for every platform
//! ([`BaseChoice::fixed`]); a per-architecture stream names one per platform, a stream of
//! multi-arch references one for all ([`BaseChoice::shared`]). [`platform_bases`] then
//! pairs each platform asked for (`--platform all`: every platform the base's index lists,
//! or the stream offers) with its base; no platform at all is an error.

use std::path::Path;

use anyhow::{Context, bail};
use machineos_image::{ImageRef, Platform};
use machineos_native_builder::{Environment, PlatformBase};

use crate::platform::Choice;
use crate::stream::{StreamBase, bases_from_stream, stream_platforms};

/// Where a build's base may come from: the command line and the rendered configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct BaseChoice<'a> {
    /// `--base`.
    pub base: Option<&'a str>,
    /// The rendered `spec.osImageURL` (as `--os-image-url` sets it).
    pub os_image_url: Option<&'a str>,
    /// `--stream`.
    pub stream: Option<&'a Path>,
    /// `--stream-name`.
    pub stream_name: Option<&'a str>,
}

impl BaseChoice<'_> {
    /// The base of a one-platform build, and the stream's choice when a stream gave it
    /// (each stream choice described to `report`). `source_name` names the input.
    pub fn one(
        &self,
        platform: &Platform,
        source_name: &str,
        report: &mut dyn FnMut(&str),
    ) -> anyhow::Result<(ImageRef, Option<StreamBase>)> {
        let from_stream = match self.stream {
            Some(path) => bases_from_stream(
                path,
                self.stream_name,
                std::slice::from_ref(platform),
                report,
            )?
            .pop(),
            None => None,
        };
        let base = match (&from_stream, self.base, self.os_image_url) {
            (Some(s), _, _) => s.base.clone(),
            (None, Some(b), _) | (None, None, Some(b)) => {
                ImageRef::parse(b).with_context(|| "--base")?
            }
            (None, None, None) => no_base(source_name)?,
        };
        Ok((base, from_stream))
    }

    /// The one base of every platform when no stream is given: `--base`, else the rendered
    /// `spec.osImageURL`; `None` with a stream (or nothing) given.
    pub fn fixed(&self) -> anyhow::Result<Option<ImageRef>> {
        Ok(match (self.base, self.os_image_url) {
            (Some(b), _) | (None, Some(b)) if self.stream.is_none() => {
                Some(ImageRef::parse(b).with_context(|| "--base")?)
            }
            _ => None,
        })
    }

    /// The base shared by every platform of a multi-platform build: `fixed` (see
    /// [`BaseChoice::fixed`]), else a stream of multi-arch references' image; `None` for a
    /// per-architecture stream (one base per platform). No base and no stream is an error.
    pub fn shared(
        &self,
        fixed: Option<ImageRef>,
        source_name: &str,
        report: &mut dyn FnMut(&str),
    ) -> anyhow::Result<Option<ImageRef>> {
        Ok(match (fixed, self.stream) {
            (Some(b), _) => Some(b),
            (None, Some(path)) => match stream_platforms(path, self.stream_name)? {
                Some(_) => None,
                // A stream of multi-arch references: its (any platform's) image is the base.
                None => Some(
                    bases_from_stream(path, self.stream_name, &[Platform::host()], report)?
                        .pop()
                        .context("the stream names no base")?
                        .base,
                ),
            },
            (None, None) => no_base(source_name)?,
        })
    }
}

fn no_base<T>(source_name: &str) -> anyhow::Result<T> {
    bail!(
        "{source_name}: no base image: give --base IMAGE or --stream FILE (or a MachineConfig with spec.osImageURL, or --os-image-url)"
    )
}

/// Each platform of `choice` with its base: `shared` (see [`BaseChoice::shared`]) for all,
/// else the stream's per platform. `--platform all` asks the shared base's index (through
/// `env`) or the stream which platforms there are.
pub async fn platform_bases(
    source: &BaseChoice<'_>,
    choice: Choice,
    shared: Option<&ImageRef>,
    env: &Environment,
    report: &mut dyn FnMut(&str),
) -> anyhow::Result<Vec<PlatformBase>> {
    let (stream, name) = (source.stream, source.stream_name);
    let platforms = match (choice, shared, stream) {
        (Choice::All, Some(b), _) => {
            let all = machineos_native_builder::base_platforms(b, env).await?;
            if all.is_empty() {
                bail!("--platform all: {b} lists no platforms");
            }
            all
        }
        (Choice::All, None, Some(path)) => stream_platforms(path, name)?.unwrap_or_default(),
        (Choice::All, None, None) => Vec::new(),
        (Choice::List(list), ..) => list,
        (Choice::One(p), ..) => vec![p],
    };
    let bases: Vec<PlatformBase> = match (shared, stream) {
        (Some(b), _) => platforms
            .into_iter()
            .map(|platform| PlatformBase {
                platform,
                base: b.clone(),
            })
            .collect(),
        (None, Some(path)) => bases_from_stream(path, name, &platforms, report)?
            .into_iter()
            .map(|s| PlatformBase {
                platform: s.platform,
                base: s.base,
            })
            .collect(),
        (None, None) => Vec::new(),
    };
    if bases.is_empty() {
        bail!("--platform: no platform to build");
    }
    Ok(bases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_base_table() {
        let amd64 = Platform::new("linux", "amd64", None);
        let mut quiet = |_: &str| {};
        let given = |base, url| BaseChoice {
            base,
            os_image_url: url,
            ..BaseChoice::default()
        };
        // --base wins over the rendered osImageURL; either is the fixed base.
        let (b, s) = given(Some("reg.example/base:1"), Some("reg.example/url:1"))
            .one(&amd64, "in", &mut quiet)
            .unwrap();
        assert_eq!(
            (b.to_string().as_str(), s.is_none()),
            ("reg.example/base:1", true)
        );
        let (b, _) = given(None, Some("reg.example/url:1"))
            .one(&amd64, "in", &mut quiet)
            .unwrap();
        assert_eq!(b.to_string(), "reg.example/url:1");
        assert_eq!(
            given(None, Some("reg.example/url:1"))
                .fixed()
                .unwrap()
                .unwrap()
                .to_string(),
            "reg.example/url:1"
        );
        // A stream leaves no fixed base.
        let streamed = BaseChoice {
            stream: Some(Path::new("s.json")),
            ..given(Some("reg.example/base:1"), None)
        };
        assert!(streamed.fixed().unwrap().is_none());
        // Nothing names a base.
        let e = given(None, None).one(&amd64, "in", &mut quiet).unwrap_err();
        assert!(e.to_string().starts_with("in: no base image"), "{e}");
        let e = given(None, None)
            .shared(None, "in", &mut quiet)
            .unwrap_err();
        assert!(
            e.to_string().contains("give --base IMAGE or --stream FILE"),
            "{e}"
        );
        assert!(given(Some("::"), None).fixed().is_err());
    }
}
