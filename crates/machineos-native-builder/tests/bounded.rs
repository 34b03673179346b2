//! A file's contents flow from the config to the layer in bounded memory, whatever their
//! size: a gzip bomb that inflates to half a gigabyte, a data: URL of tens of megabytes. This
//! binary's allocator is capped; holding such contents whole would fail an allocation and
//! abort the tests.

mod support;

use std::io::Write;

use base64::Engine;
use machineos_image::auth::Credentials;
use support::*;

/// What the tests may hold together beyond what the process held at start: the configs
/// themselves (tens of MB) and working buffers, not the contents they describe.
const HEADROOM: usize = 256 << 20;

machineos_testkit::capped_allocator!(HEADROOM);

fn config_with(file: serde_json::Value) -> String {
    serde_json::json!({
        "ignition": {"version": "3.4.0"},
        "storage": {"files": [file]}
    })
    .to_string()
}

/// Builds `config` on the example base into a new layout; the layer's uncompressed size.
fn build_layer(config: &str) -> u64 {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_layout(tmp.path(), &["linux/amd64"], false);
    let outcome = build(
        spec(
            &format!("oci:{}:base", base.display()),
            &format!("oci:{}:v1", tmp.path().join("out").display()),
            config,
        ),
        env(registry_options(None, Credentials::default()), None),
    )
    .unwrap();
    outcome.layer.uncompressed_size
}

#[test]
fn a_gzip_bomb_is_written_without_being_held() {
    cap_memory();
    // More than the cap: holding it would abort.
    const SIZE: u64 = 512 << 20;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..(SIZE >> 20) {
        gz.write_all(&zeros).unwrap();
    }
    let gz = gz.finish().unwrap();
    drop(zeros);
    let url = format!(
        "data:;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&gz)
    );
    let config = config_with(serde_json::json!({
        "path": "/var/lib/bomb",
        "contents": {"source": url, "compression": "gzip"}
    }));
    assert!(config.len() < 2 << 20);
    assert!(build_layer(&config) > SIZE);
}

#[test]
fn a_large_data_url_is_written_without_being_copied() {
    cap_memory();
    // 24 MiB of incompressible bytes: a 32 MiB base64 data: URL (the old decoder held
    // twelve times that).
    let mut data = vec![0u8; 24 << 20];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for b in data.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let hash = format!(
        "sha256-{}",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&data))
    );
    let url = format!(
        "data:;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&data)
    );
    drop(data);
    let config = config_with(serde_json::json!({
        "path": "/var/lib/big",
        "contents": {"source": url, "verification": {"hash": hash}}
    }));
    drop(url);
    assert!(build_layer(&config) > 24 << 20);
}
