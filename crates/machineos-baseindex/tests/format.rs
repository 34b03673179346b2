//! The encoded form: round trips with every node kind, and corrupted or truncated input
//! is an error, never a panic.

mod common;

use std::sync::Arc;

use common::{M, Mem, desc, index, tar};
use machineos_baseindex::{BaseIndex, DecodeError, IndexError, format};
use machineos_layer::{BaseView, NodeKind};

fn every_kind() -> Vec<Vec<M>> {
    use M::*;
    vec![
        vec![
            Dir("etc", 0o755),
            FileWith(
                "etc/passwd",
                b"root:x:0:0::/root:/bin/sh\n".to_vec(),
                0o644,
                0,
                0,
            ),
            FileWith("etc/shadow", b"secret".to_vec(), 0o4640, 0, 15),
            Link("etc/shadow-", "etc/shadow"),
            Dir("usr", 0o755),
            Dir("usr/bin", 0o755),
            FileWith("usr/bin/tool", vec![7; 3000], 0o755, 1000, 1000),
            Link("usr/bin/tool2", "usr/bin/tool"),
            Link("usr/bin/tool3", "usr/bin/tool"),
            File("usr/bin/empty", b""),
            Sym("usr/bin/sh", "bash"),
            Sym("lib", "usr/lib"),
            Sym("usr/bin/ünïcode", "/ziel/ü"),
            Fifo("run/fifo"),
            M::Raw("dev/null", tar::EntryType::Char, b""),
            Dir("empty", 0o1777),
        ],
        vec![FileWith(
            "usr/share/second",
            b"layer one".to_vec(),
            0o600,
            5,
            6,
        )],
    ]
}

#[test]
fn round_trip_with_every_kind() {
    let layers = every_kind();
    let idx = index(&layers);
    let bytes = idx.encode().unwrap();
    assert_eq!(bytes.get(..8), Some(&format::MAGIC[..]));
    assert_eq!(idx.encode().unwrap(), bytes, "encoding is deterministic");
    let mut back = BaseIndex::decode(&bytes).unwrap();
    assert_eq!(back, idx);
    assert_eq!(back.len(), idx.len());
    assert_eq!(back.stats(), idx.stats());
    assert_eq!(back.layer_count(), 2);
    let kinds: Vec<_> = back.iter().map(|(_, n)| n.kind).collect();
    assert!(kinds.contains(&NodeKind::Other));
    assert!(kinds.iter().any(|k| matches!(k, NodeKind::Symlink { .. })));
    // Same answers, with contents read through the layer source where not kept.
    back.set_layer_source(Arc::new(Mem(layers.iter().map(|l| tar(l)).collect())));
    for (p, n) in idx.iter() {
        assert_eq!(back.lstat(p).unwrap(), Some(n.clone()), "{p}");
        assert_eq!(desc(&back, p), desc(&idx, p), "{p}");
        if n.kind == NodeKind::Dir {
            assert_eq!(back.children(p).unwrap(), idx.children(p).unwrap(), "{p}");
        }
        if let Some(id) = n.link_id {
            assert_eq!(
                back.hard_link_group(id).unwrap(),
                idx.hard_link_group(id).unwrap()
            );
        }
    }
    let tool = back.lstat("/usr/bin/tool3").unwrap().unwrap();
    assert_eq!(
        back.hard_link_group(tool.link_id.unwrap()).unwrap(),
        ["/usr/bin/tool", "/usr/bin/tool2", "/usr/bin/tool3"]
    );
    assert_eq!(back.read("/usr/bin/tool2").unwrap(), vec![7; 3000]);
    assert_eq!(back.read("/etc/shadow-").unwrap(), b"secret");
}

#[test]
fn header_errors() {
    let bytes = index(&every_kind()).encode().unwrap();
    let mut bad_magic = bytes.clone();
    bad_magic[0] ^= 1;
    assert!(matches!(
        BaseIndex::decode(&bad_magic),
        Err(IndexError::Decode(DecodeError::Magic))
    ));
    let mut other_version = bytes.clone();
    other_version[8] = 99;
    assert!(matches!(
        BaseIndex::decode(&other_version),
        Err(IndexError::Decode(DecodeError::Version { found: 99 }))
    ));
    let mut flipped = bytes.clone();
    let mid = bytes.len() / 2;
    flipped[mid] ^= 0x40;
    assert!(matches!(
        BaseIndex::decode(&flipped),
        Err(IndexError::Decode(DecodeError::Checksum))
    ));
    assert!(matches!(
        BaseIndex::decode(&[]),
        Err(IndexError::Decode(
            DecodeError::Truncated { .. } | DecodeError::Magic
        ))
    ));
}

#[test]
fn truncated_or_flipped_input_is_an_error() {
    let bytes = index(&every_kind()).encode().unwrap();
    for len in 0..bytes.len() {
        assert!(
            matches!(BaseIndex::decode(&bytes[..len]), Err(IndexError::Decode(_))),
            "truncated to {len}"
        );
    }
    let mut extended = bytes.clone();
    extended.push(0);
    assert!(matches!(
        BaseIndex::decode(&extended),
        Err(IndexError::Decode(_))
    ));
    for i in 0..bytes.len() {
        for bit in [0x01, 0x10, 0x80] {
            let mut b = bytes.clone();
            b[i] ^= bit;
            assert!(
                matches!(BaseIndex::decode(&b), Err(IndexError::Decode(_))),
                "byte {i} bit {bit:#x}"
            );
        }
    }
}

/// Re-seal the checksum after corrupting the body, so the parser itself meets the bad
/// bytes. Decoding may succeed or fail; it must not panic, and whatever it accepts must
/// answer queries without panicking.
#[test]
fn corrupted_bodies_with_valid_checksums_never_panic() {
    let bytes = index(&every_kind()).encode().unwrap();
    let header = 56;
    let body_end = bytes.len() - 4;
    let reseal = |mut b: Vec<u8>| {
        let end = b.len() - 4;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&b[..end]);
        b[end..].copy_from_slice(&crc.finalize().to_le_bytes());
        b
    };
    let mut accepted = 0;
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut candidates = Vec::new();
    for i in header..body_end {
        for v in [0x00, 0x01, 0x7f, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] = v;
            candidates.push(reseal(b));
        }
        let mut b = bytes.clone();
        b[i] ^= 1 << (next() % 8);
        candidates.push(reseal(b));
    }
    for cut in header..body_end {
        let mut b = bytes[..cut].to_vec();
        b.extend_from_slice(&[0; 4]);
        candidates.push(reseal(b));
    }
    // Header fields too: the section sizes and counts.
    for i in 12..header {
        for v in [0x00, 0x01, 0x7f, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] = v;
            candidates.push(reseal(b));
        }
    }
    for _ in 0..2000 {
        let mut b = bytes.clone();
        for _ in 0..(next() % 4 + 1) {
            let i = header + (next() as usize) % (body_end - header);
            b[i] = next() as u8;
        }
        candidates.push(reseal(b));
    }
    for c in candidates {
        if let Ok(idx) = BaseIndex::decode(&c) {
            accepted += 1;
            let paths: Vec<String> = idx.iter().map(|(p, _)| p.to_string()).collect();
            for p in &paths {
                let _ = idx.lstat(p);
                let _ = idx.read(p);
                let _ = idx.children(p);
            }
            for id in 0..4 {
                let _ = idx.hard_link_group(id);
            }
            let _ = idx.stats();
            // Whatever decodes re-encodes to itself.
            assert_eq!(BaseIndex::decode(&idx.encode().unwrap()).unwrap(), idx);
        }
    }
    // Some corruptions (a mode bit, a size) still give a well-formed index.
    assert!(accepted > 0);
}

#[test]
fn decoding_fifty_thousand_entries_is_fast() {
    // 50 000 files in 500 directories, metadata only, like a CoreOS base.
    let mut members = Vec::new();
    let names: Vec<String> = (0..500)
        .flat_map(|d| (0..100).map(move |f| format!("usr/share/pkg{d:03}/file-{f:03}.dat")))
        .collect();
    let names: Vec<&'static str> = names
        .into_iter()
        .map(|n| &*Box::leak(n.into_boxed_str()))
        .collect();
    for n in &names {
        members.push(M::File(n, b"x"));
    }
    let idx = index(&[members]);
    assert_eq!(idx.stats().files, 50_000);
    let bytes = idx.encode().unwrap();
    let back = BaseIndex::decode(&bytes).unwrap();
    assert_eq!(back, idx);
    // Decoding speed is measured by the benchmark, not asserted here (timings on shared
    // machines are noise).
}

#[test]
fn index_can_move_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<BaseIndex>();
    send_sync::<machineos_baseindex::Cache>();
}
