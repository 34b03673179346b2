//! The intermediate ("native") image's tag — one rule for `machineos build` and the
//! controller's RUN-step backends. A build with RUN steps first pushes what the native engine
//! built under `<tag>-native` (buildah pulls it from the registry as its `FROM`, by a tag, so
//! registries that garbage-collect untagged manifests keep it), then the final image. The
//! controller's `<tag>` is the MachineOSBuild's name, the CLI's the `--output` tag.
//!
//! A tag is at most [`MAX_TAG_LEN`] characters (the OCI distribution spec's
//! `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`): a longer one is shortened with a hash of what was
//! cut ([`crate::objects::names::fit_name`]), so two long tags stay apart.

use crate::objects::names::fit_name;

/// Suffix of the intermediate native image's tag.
pub const NATIVE_TAG_SUFFIX: &str = "-native";

/// The longest tag a registry takes.
pub const MAX_TAG_LEN: usize = 128;

/// `<tag>-native`, fitted to [`MAX_TAG_LEN`].
pub fn native_tag(tag: &str) -> String {
    let native = format!("{tag}{NATIVE_TAG_SUFFIX}");
    if native.len() <= MAX_TAG_LEN {
        return native;
    }
    let short = fit_name(tag, MAX_TAG_LEN - NATIVE_TAG_SUFFIX.len());
    format!("{short}{NATIVE_TAG_SUFFIX}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_native_tag_fits_a_tag() {
        assert_eq!(native_tag("worker-0a"), "worker-0a-native");
        assert_eq!(native_tag("v1"), "v1-native");
        let long = format!("{}-{}", "p".repeat(100), "f".repeat(32));
        let tag = native_tag(&long);
        assert!(tag.len() <= MAX_TAG_LEN, "{}", tag.len());
        assert!(tag.ends_with(NATIVE_TAG_SUFFIX));
        assert_ne!(native_tag(&long), native_tag(&format!("{long}0")));
    }
}
