//! The intermediate ("native") image's tag. A build with RUN steps first pushes what the
//! native engine built under `<tag>-native` (buildah pulls it from the registry as its
//! `FROM`), then the final image.
//!
//! One rule: [`native_tag`] is `machineos_buildrequest::tag`'s (re-exported here), which the
//! controller's RUN-step backends use for a MachineOSBuild's name; [`native_output`] applies
//! it to `machineos build`'s `--output` tag. A tag is at most [`MAX_TAG_LEN`] characters: a
//! longer one is shortened with a hash of what was cut, so two long tags stay apart.

use anyhow::Context;
use machineos_image::RegistryRef;

pub use machineos_buildrequest::tag::{MAX_TAG_LEN, NATIVE_TAG_SUFFIX, native_tag};

/// Where the native image goes: the output repository, tag [`native_tag`] of the output
/// tag (`latest` when it has none).
pub fn native_output(output: &RegistryRef) -> anyhow::Result<RegistryRef> {
    let tag = native_tag(output.tag_or_latest());
    output
        .with_tag(&tag)
        .with_context(|| format!("--output {output}: the native image's tag {tag:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_native_output_is_the_output_tag_native() {
        let out = RegistryRef::parse("127.0.0.1:5000/os/worker:v1").unwrap();
        assert_eq!(
            native_output(&out).unwrap().to_string(),
            "127.0.0.1:5000/os/worker:v1-native"
        );
        // A tag too long for `-native` is fitted (with a hash), not refused.
        let long = RegistryRef::parse(&format!("h/r:{}", "t".repeat(128))).unwrap();
        let native = native_output(&long).unwrap();
        let tag = native.to_string().rsplit_once(':').unwrap().1.to_owned();
        assert!(tag.len() <= 128 && tag.ends_with("-native"), "{tag}");
    }
}
