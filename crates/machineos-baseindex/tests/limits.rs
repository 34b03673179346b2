//! The bounds a hostile or broken base meets: kept contents capped in total, names longer
//! than Linux allows refused, path counts and path bytes capped — each a clear error naming
//! the layer and member, reached without first spending the memory it guards.

mod common;

use std::io::Read;
use std::sync::Arc;

use common::Mem;
use machineos_baseindex::{
    ApplyError, IndexBuilder, IndexError, KEEP_LIMIT, KEEP_TOTAL, LayerCompression, Limits,
    MAX_PATH_BYTES,
};
use machineos_layer::BaseView;

/// A tar stream written by a thread as it is read (never whole in memory): `count` files
/// of `size` zero bytes, named by `name(i)`.
fn streamed_tar(
    count: usize,
    size: u64,
    name: impl Fn(usize) -> String + Send + 'static,
) -> impl Read {
    let (reader, writer) = std::io::pipe().unwrap();
    std::thread::spawn(move || {
        let mut b = tar::Builder::new(writer);
        for i in 0..count {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(0o644);
            h.set_uid(0);
            h.set_gid(0);
            h.set_size(size);
            h.set_mtime(0);
            // A reader that gave up closes the pipe: stop quietly.
            if b.append_data(&mut h, name(i), std::io::repeat(0).take(size))
                .is_err()
            {
                return;
            }
        }
        let _ = b.finish();
    });
    reader
}

/// A builder with `n` empty layers applied, so the next is layer `n`.
fn after_empty_layers(n: u32) -> IndexBuilder {
    let mut b = IndexBuilder::new();
    for i in 0..n {
        b.apply_layer(i, LayerCompression::None, &[0u8; 1024][..])
            .unwrap();
    }
    b
}

fn limit_error(e: IndexError) -> (u32, String, String) {
    match e {
        IndexError::Apply(ApplyError::Limit { layer, entry, what }) => (layer, entry, what),
        other => panic!("not a limit error: {other}"),
    }
}

/// 80 files of 1 MiB under /etc (the 3 000 in small): kept contents stop at
/// KEEP_TOTAL, the rest is located in the layer and still reads back.
#[test]
fn kept_contents_are_capped_in_total() {
    let count = (KEEP_TOTAL / KEEP_LIMIT) as usize + 16;
    let mut b = IndexBuilder::new();
    b.apply_layer(
        0,
        LayerCompression::None,
        streamed_tar(count, KEEP_LIMIT, |i| format!("etc/zero/{i:04}")),
    )
    .unwrap();
    let mut idx = b.finish().unwrap();
    let kept = idx.stats().kept_bytes;
    assert!(
        kept <= KEEP_TOTAL && kept > KEEP_TOTAL - KEEP_LIMIT,
        "{kept}"
    );
    assert_eq!(idx.stats().files, count as u64);
    // The last ones are located: readable through the layers only.
    let last = format!("/etc/zero/{:04}", count - 1);
    assert!(
        idx.read(&last)
            .unwrap_err()
            .to_string()
            .contains("not in the base index")
    );
    let mut layer = Vec::new();
    streamed_tar(count, KEEP_LIMIT, |i| format!("etc/zero/{i:04}"))
        .read_to_end(&mut layer)
        .unwrap();
    idx.set_layer_source(Arc::new(Mem(vec![layer])));
    assert_eq!(idx.read(&last).unwrap().len() as u64, KEEP_LIMIT);
    // The encoded index (what the cache stores) is bounded the same way.
    assert!((idx.encode().unwrap().len() as u64) < KEEP_TOTAL + (1 << 20));
}

/// One member 40 000 directories deep (a 273-byte layer once gzipped): refused at once,
/// naming the layer, instead of indexing 40 000 parents with their full paths.
#[test]
fn a_path_longer_than_linux_allows_is_refused() {
    let deep = format!("{}f", "a/".repeat(40_000));
    let mut b = after_empty_layers(3);
    let e = b
        .apply_layer(
            3,
            LayerCompression::None,
            streamed_tar(1, 1, move |_| deep.clone()),
        )
        .unwrap_err();
    let (layer, entry, what) = limit_error(e);
    assert_eq!(layer, 3);
    assert!(entry.len() < 300, "the member name is shortened: {entry}");
    assert!(
        what.contains("80002 bytes") && what.contains("4095"),
        "{what}"
    );

    let long_name = format!("etc/{}", "n".repeat(256));
    let e = IndexBuilder::new()
        .apply_layer(
            0,
            LayerCompression::None,
            streamed_tar(1, 1, move |_| long_name.clone()),
        )
        .unwrap_err();
    assert!(limit_error(e).2.contains("256 bytes"));
}

/// Deep paths that each diverge at the root store every ancestor's full path: the total is
/// capped at MAX_PATH_BYTES, long before memory runs out.
#[test]
fn path_bytes_are_capped() {
    let depth = 2_000; // "d/" × 2000: a 4 KiB path, 2 000 ancestors each
    let per_member = depth * depth * 2 / 2; // ≈ the bytes of its ancestors' paths
    let count = MAX_PATH_BYTES / per_member + 8;
    let mut b = after_empty_layers(1);
    let e = b
        .apply_layer(
            1,
            LayerCompression::None,
            streamed_tar(count, 0, move |i| format!("{i:x}/{}f", "d/".repeat(depth))),
        )
        .unwrap_err();
    let (layer, _, what) = limit_error(e);
    assert_eq!(layer, 1);
    assert!(what.contains("path names take more than"), "{what}");
}

#[test]
fn path_counts_are_capped() {
    let mut b = IndexBuilder::with_limits(Limits {
        paths: 100,
        ..Limits::default()
    });
    let e = b
        .apply_layer(
            0,
            LayerCompression::None,
            streamed_tar(200, 0, |i| format!("usr/f{i}")),
        )
        .unwrap_err();
    let (_, entry, what) = limit_error(e);
    assert!(what.contains("more than 100 paths"), "{what}");
    assert!(entry.starts_with("usr/f"), "{entry}");
}
