//! Applying layers: whiteouts, opaque directories, replacement, implicit parents, hard
//! links, kept and located contents, compression, and rejected member names.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;

use common::{M, Mem, desc, index, index_plain, tar};
use machineos_baseindex::{
    ApplyError, IndexBuilder, IndexError, KEEP_LIMIT, LayerCompression, keep_content,
};
use machineos_layer::{BaseError, BaseView};

struct Case {
    name: &'static str,
    layers: Vec<Vec<M>>,
    /// Path → expected description (see `common::desc`), `None` for absent.
    want: Vec<(&'static str, Option<&'static str>)>,
    /// Directory → expected children.
    children: Vec<(&'static str, Vec<&'static str>)>,
}

fn cases() -> Vec<Case> {
    use M::*;
    vec![
        Case {
            name: "whiteout deletes a lower file",
            layers: vec![
                vec![Dir("etc", 0o755), File("etc/a", b"A"), File("etc/b", b"B")],
                vec![Dir("etc", 0o755), File("etc/.wh.a", b"")],
            ],
            want: vec![("/etc/a", None), ("/etc/b", Some("file 644 B"))],
            children: vec![("/etc", vec!["b"])],
        },
        Case {
            name: "whiteout deletes a lower directory with its subtree",
            layers: vec![
                vec![
                    Dir("usr", 0o755),
                    Dir("usr/d", 0o755),
                    Dir("usr/d/e", 0o755),
                    File("usr/d/e/f", b"F"),
                    File("usr/d-x", b"X"),
                ],
                vec![File("usr/.wh.d", b"")],
            ],
            want: vec![
                ("/usr/d", None),
                ("/usr/d/e", None),
                ("/usr/d/e/f", None),
                ("/usr/d-x", Some("file 644 X")),
            ],
            children: vec![("/usr", vec!["d-x"])],
        },
        Case {
            name: "whiteout before a same-layer entry hides only the lower node",
            layers: vec![
                vec![Dir("d", 0o755), File("d/old", b"O")],
                vec![File(".wh.d", b""), Dir("d", 0o700), File("d/new", b"N")],
            ],
            want: vec![
                ("/d", Some("dir 700")),
                ("/d/old", None),
                ("/d/new", Some("file 644 N")),
            ],
            children: vec![("/d", vec!["new"])],
        },
        Case {
            name: "whiteout after a same-layer entry hides only the lower node",
            layers: vec![
                vec![Dir("d", 0o755), File("d/old", b"O"), File("f", b"lower")],
                vec![
                    Dir("d", 0o700),
                    File("d/new", b"N"),
                    File(".wh.d", b""),
                    File("f", b"upper"),
                    File(".wh.f", b""),
                ],
            ],
            want: vec![
                ("/d", Some("dir 700")),
                ("/d/old", None),
                ("/d/new", Some("file 644 N")),
                ("/f", Some("file 644 upper")),
            ],
            children: vec![("/d", vec!["new"]), ("/", vec!["d", "f"])],
        },
        Case {
            name: "opaque marker first",
            layers: vec![
                vec![Dir("o", 0o755), File("o/lower", b"L"), Dir("o/sub", 0o755)],
                vec![
                    Dir("o", 0o750),
                    File("o/.wh..wh..opq", b""),
                    File("o/upper", b"U"),
                ],
            ],
            want: vec![
                ("/o", Some("dir 750")),
                ("/o/lower", None),
                ("/o/sub", None),
                ("/o/upper", Some("file 644 U")),
            ],
            children: vec![("/o", vec!["upper"])],
        },
        Case {
            name: "opaque marker last",
            layers: vec![
                vec![Dir("o", 0o755), File("o/lower", b"L"), File("o/same", b"1")],
                vec![
                    Dir("o", 0o755),
                    File("o/upper", b"U"),
                    File("o/same", b"2"),
                    File("o/.wh..wh..opq", b""),
                ],
            ],
            want: vec![
                ("/o/lower", None),
                ("/o/upper", Some("file 644 U")),
                ("/o/same", Some("file 644 2")),
            ],
            children: vec![("/o", vec!["same", "upper"])],
        },
        Case {
            name: "opaque keeps a lower directory only as the parent of same-layer entries",
            layers: vec![
                vec![
                    Dir("o", 0o755),
                    Dir("o/keep", 0o700),
                    File("o/keep/old", b"old"),
                    Dir("o/gone", 0o755),
                ],
                vec![File("o/keep/new", b"new"), File("o/.wh..wh..opq", b"")],
            ],
            want: vec![
                ("/o/keep", Some("dir 755")),
                ("/o/keep/old", None),
                ("/o/keep/new", Some("file 644 new")),
                ("/o/gone", None),
            ],
            children: vec![("/o", vec!["keep"]), ("/o/keep", vec!["new"])],
        },
        Case {
            name: "opaque directory that did not exist below",
            layers: vec![vec![Dir("x", 0o755)], vec![File("n/.wh..wh..opq", b"")]],
            want: vec![("/n", Some("dir 755"))],
            children: vec![("/n", vec![]), ("/", vec!["n", "x"])],
        },
        Case {
            name: "a file replaces a directory and drops its subtree",
            layers: vec![
                vec![Dir("d", 0o755), Dir("d/s", 0o755), File("d/s/f", b"F")],
                vec![File("d", b"now a file")],
            ],
            want: vec![
                ("/d", Some("file 644 now a file")),
                ("/d/s", None),
                ("/d/s/f", None),
            ],
            children: vec![("/", vec!["d"])],
        },
        Case {
            name: "a directory over a directory keeps children, takes metadata",
            layers: vec![
                vec![Dir("d", 0o755), File("d/f", b"F")],
                vec![Dir("d", 0o1777)],
            ],
            want: vec![("/d", Some("dir 1777")), ("/d/f", Some("file 644 F"))],
            children: vec![("/d", vec!["f"])],
        },
        Case {
            name: "a directory replaces a file; a symlink replaces a directory",
            layers: vec![
                vec![File("a", b"A"), Dir("b", 0o755), File("b/x", b"X")],
                vec![Dir("a", 0o700), File("a/y", b"Y"), Sym("b", "a")],
            ],
            want: vec![
                ("/a", Some("dir 700")),
                ("/a/y", Some("file 644 Y")),
                ("/b", Some("sym a")),
                ("/b/x", None),
            ],
            children: vec![("/", vec!["a", "b"]), ("/a", vec!["y"])],
        },
        Case {
            name: "later entries of one layer replace earlier ones",
            layers: vec![vec![
                File("f", b"1"),
                File("f", b"2"),
                Sym("s", "x"),
                Sym("s", "y"),
            ]],
            want: vec![("/f", Some("file 644 2")), ("/s", Some("sym y"))],
            children: vec![],
        },
        Case {
            name: "implicit parents are 0755 root directories",
            layers: vec![vec![FileWith("a/b/c", b"C".to_vec(), 0o600, 1000, 1001)]],
            want: vec![
                ("/a", Some("dir 755")),
                ("/a/b", Some("dir 755")),
                ("/a/b/c", Some("file 600 C 1000:1001")),
            ],
            children: vec![("/", vec!["a"]), ("/a", vec!["b"]), ("/a/b", vec!["c"])],
        },
        Case {
            name: "an existing parent directory keeps its metadata",
            layers: vec![vec![Dir("p", 0o700)], vec![File("p/f", b"F")]],
            want: vec![("/p", Some("dir 700")), ("/p/f", Some("file 644 F"))],
            children: vec![],
        },
        Case {
            name: "a non-directory parent is replaced by an implicit directory",
            layers: vec![
                vec![
                    Dir("usr", 0o755),
                    Dir("usr/lib", 0o755),
                    Sym("lib", "usr/lib"),
                ],
                vec![File("lib/x", b"X")],
            ],
            want: vec![
                ("/lib", Some("dir 755")),
                ("/lib/x", Some("file 644 X")),
                ("/usr/lib/x", None),
            ],
            children: vec![],
        },
        Case {
            name: "member names in any spelling",
            layers: vec![vec![
                M::Raw("./usr/a", tar::EntryType::Regular, b"A"),
                M::Raw("usr/d/", tar::EntryType::Directory, b""),
                M::Raw("/usr/b", tar::EntryType::Regular, b"B"),
                M::Raw("usr/x/../c", tar::EntryType::Regular, b"C"),
                M::Raw("./", tar::EntryType::Directory, b""),
            ]],
            want: vec![
                ("/usr/a", Some("file 644 A")),
                ("/usr/d", Some("dir 644")),
                ("/usr/b", Some("file 644 B")),
                ("/usr/c", Some("file 644 C")),
                ("/usr/x", None),
                ("/", Some("dir 644")),
            ],
            children: vec![("/usr", vec!["a", "b", "c", "d"])],
        },
        Case {
            name: "whiteouts of absent names and aufs bookkeeping change nothing",
            layers: vec![
                vec![Dir("e", 0o755), File("e/f", b"F")],
                vec![File("e/.wh.nothing", b""), File("e/.wh..wh.plnk", b"")],
            ],
            want: vec![("/e/f", Some("file 644 F")), ("/e/.wh..wh.plnk", None)],
            children: vec![("/e", vec!["f"])],
        },
        Case {
            name: "long names and link targets",
            layers: vec![vec![
                FileWith(
                    "usr/share/a-very-long-directory-name-that-goes-on-and-on/and-a-file-name-that-is-also-quite-long-indeed.txt",
                    b"long".to_vec(),
                    0o644,
                    0,
                    0,
                ),
                Sym(
                    "usr/s",
                    "/usr/share/a-very-long-directory-name-that-goes-on-and-on/and-a-file-name-that-is-also-quite-long-indeed.txt",
                ),
            ]],
            want: vec![
                (
                    "/usr/share/a-very-long-directory-name-that-goes-on-and-on/and-a-file-name-that-is-also-quite-long-indeed.txt",
                    Some("file 644 long"),
                ),
                (
                    "/usr/s",
                    Some(
                        "sym /usr/share/a-very-long-directory-name-that-goes-on-and-on/and-a-file-name-that-is-also-quite-long-indeed.txt",
                    ),
                ),
            ],
            children: vec![],
        },
        Case {
            name: "devices and fifos are other",
            layers: vec![vec![Fifo("run/f")]],
            want: vec![("/run/f", Some("other 600"))],
            children: vec![],
        },
    ]
}

#[test]
fn layer_semantics() {
    for case in cases() {
        let idx = index(&case.layers);
        for (p, want) in &case.want {
            assert_eq!(desc(&idx, p).as_deref(), *want, "{}: {p}", case.name);
        }
        for (dir, want) in &case.children {
            assert_eq!(
                idx.children(dir).unwrap(),
                *want,
                "{}: children of {dir}",
                case.name
            );
        }
        // Every listed path is reachable from the root, and nothing else is listed.
        let mut walked = 0;
        let mut stack = vec!["/".to_string()];
        while let Some(d) = stack.pop() {
            walked += 1;
            if matches!(
                idx.lstat(&d).unwrap().map(|n| n.kind),
                Some(machineos_layer::NodeKind::Dir)
            ) {
                for c in idx.children(&d).unwrap() {
                    stack.push(if d == "/" {
                        format!("/{c}")
                    } else {
                        format!("{d}/{c}")
                    });
                }
            }
        }
        assert_eq!(walked, idx.len(), "{}", case.name);
    }
}

#[test]
fn hard_links() {
    use M::*;
    let idx = index(&[
        vec![
            Dir("usr", 0o755),
            Dir("usr/bin", 0o755),
            FileWith("usr/bin/a", b"binary".to_vec(), 0o755, 0, 0),
            FileWith("etc/x", b"kept".to_vec(), 0o644, 0, 0),
            Link("etc/y", "etc/x"),
        ],
        vec![
            Link("usr/bin/b", "usr/bin/a"),
            Link("usr/bin/c", "./usr/bin/a"),
        ],
        vec![File("usr/bin/.wh.a", b""), File("etc/y", b"replaced")],
    ]);
    let b = idx.lstat("/usr/bin/b").unwrap().unwrap();
    let c = idx.lstat("/usr/bin/c").unwrap().unwrap();
    assert!(b.link_id.is_some());
    assert_eq!(b.link_id, c.link_id);
    assert_eq!(
        idx.hard_link_group(b.link_id.unwrap()).unwrap(),
        ["/usr/bin/b", "/usr/bin/c"]
    );
    // The whited-out name's contents are still reachable through the other names.
    assert_eq!(desc(&idx, "/usr/bin/c").as_deref(), Some("file 644 binary"));
    assert_eq!(idx.lstat("/usr/bin/a").unwrap(), None);
    // Replacing a member breaks the link; a lone survivor has no link identity.
    let x = idx.lstat("/etc/x").unwrap().unwrap();
    assert_eq!(x.link_id, None);
    assert_eq!(desc(&idx, "/etc/x").as_deref(), Some("file 644 kept"));
    assert_eq!(desc(&idx, "/etc/y").as_deref(), Some("file 644 replaced"));
}

#[test]
fn hard_link_group_shrinks_to_nothing() {
    use M::*;
    let idx = index(&[
        vec![File("a", b"A"), Link("b", "a")],
        vec![File(".wh.a", b"")],
    ]);
    assert_eq!(idx.lstat("/b").unwrap().unwrap().link_id, None);
    assert_eq!(desc(&idx, "/b").as_deref(), Some("file 644 A"));
}

#[test]
fn hard_link_errors_name_layer_and_member() {
    use M::*;
    for (layers, needle) in [
        (vec![vec![Link("b", "missing")]], "no such file"),
        (
            vec![vec![Dir("d", 0o755)], vec![Link("b", "d")]],
            "is a directory",
        ),
        (
            vec![
                vec![File("a", b"")],
                vec![File(".wh.a", b""), Link("b", "a")],
            ],
            "no such file",
        ),
    ] {
        let tars: Vec<Vec<u8>> = layers.iter().map(|l| tar(l)).collect();
        let mut builder = IndexBuilder::new();
        let last = tars.len() - 1;
        for (i, t) in tars[..last].iter().enumerate() {
            builder
                .apply_layer(i as u32, LayerCompression::None, t.as_slice())
                .unwrap();
        }
        let err = builder
            .apply_layer(last as u32, LayerCompression::None, tars[last].as_slice())
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, IndexError::Apply(ApplyError::LinkTarget { .. })),
            "{msg}"
        );
        assert!(msg.contains(&format!("layer {last}")), "{msg}");
        assert!(msg.contains("\"b\""), "{msg}");
        assert!(msg.contains(needle), "{msg}");
    }
}

#[test]
fn dot_dot_escape_is_rejected() {
    for name in ["../etc/passwd", "usr/../../x"] {
        let t = tar(&[
            M::File("ok", b""),
            M::Raw(name, tar::EntryType::Regular, b"x"),
        ]);
        let mut b = IndexBuilder::new();
        b.apply_layer(0, LayerCompression::None, tar(&[]).as_slice())
            .unwrap();
        let err = b
            .apply_layer(1, LayerCompression::None, t.as_slice())
            .unwrap_err();
        assert!(matches!(
            err,
            IndexError::Apply(ApplyError::Escape { layer: 1, .. })
        ));
        let msg = err.to_string();
        assert!(msg.contains("layer 1") && msg.contains(name), "{msg}");
    }
}

#[test]
fn layers_must_come_in_order() {
    let mut b = IndexBuilder::new();
    let err = b
        .apply_layer(1, LayerCompression::None, tar(&[]).as_slice())
        .unwrap_err();
    assert!(err.to_string().contains("expected layer 0"), "{err}");
}

#[test]
fn keep_content_rule() {
    for (p, size, want) in [
        ("/etc/passwd", 100, true),
        ("/etc/systemd/system/a.service", KEEP_LIMIT, true),
        ("/etc/big", KEEP_LIMIT + 1, false),
        ("/usr/lib/passwd", KEEP_LIMIT, true),
        ("/usr/lib/passwd", KEEP_LIMIT + 1, false),
        ("/usr/lib/group", 10, true),
        ("/usr/lib/systemd/system/a.service", 10, true),
        ("/usr/lib/systemd/systemd", 2 * KEEP_LIMIT, false),
        ("/usr/lib/os-release", 10, true),
        ("/usr/lib/os-release", KEEP_LIMIT + 1, false),
        ("/usr/lib/os-release.d/x", 10, false),
        ("/usr/bin/bash", 10, false),
        ("/etcetera", 10, false),
    ] {
        assert_eq!(keep_content(p, size), want, "{p}");
    }
}

#[test]
fn kept_and_located_contents() {
    use M::*;
    let big_etc = vec![b'e'; (KEEP_LIMIT + 1) as usize];
    let layers = [
        vec![
            FileWith(
                "etc/passwd",
                b"root:x:0:0::/root:/bin/bash\n".to_vec(),
                0o644,
                0,
                0,
            ),
            FileWith(
                "usr/lib/systemd/system/a.service",
                b"[Unit]\n".to_vec(),
                0o644,
                0,
                0,
            ),
            FileWith(
                "usr/bin/tool",
                b"#!/bin/sh\necho hi\n".to_vec(),
                0o755,
                0,
                0,
            ),
            FileWith("etc/big", big_etc.clone(), 0o644, 0, 0),
            File("usr/bin/empty", b""),
        ],
        vec![FileWith(
            "usr/share/doc",
            b"second layer".to_vec(),
            0o644,
            0,
            0,
        )],
    ];
    let tars: Vec<Vec<u8>> = layers.iter().map(|l| tar(l)).collect();
    let mut idx = index_plain(&tars);
    let stats = idx.stats();
    let kept = "root:x:0:0::/root:/bin/bash\n".len() + "[Unit]\n".len();
    assert_eq!(stats.kept_bytes, kept as u64);
    assert_eq!(stats.files, 6);
    assert_eq!(idx.layer_count(), 2);
    // Kept contents and empty files need no layer source.
    assert_eq!(
        idx.read("/etc/passwd").unwrap(),
        b"root:x:0:0::/root:/bin/bash\n"
    );
    assert_eq!(
        idx.read("/usr/lib/systemd/system/a.service").unwrap(),
        b"[Unit]\n"
    );
    assert_eq!(idx.read("/usr/bin/empty").unwrap(), b"");
    // Located ones do.
    for p in ["/usr/bin/tool", "/etc/big", "/usr/share/doc"] {
        let err = idx.read(p).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(p) && msg.contains("not in the base index"),
            "{msg}"
        );
    }
    idx.set_layer_source(Arc::new(Mem(tars)));
    assert_eq!(idx.read("/usr/bin/tool").unwrap(), b"#!/bin/sh\necho hi\n");
    assert_eq!(idx.read("/etc/big").unwrap(), big_etc);
    assert_eq!(idx.read("/usr/share/doc").unwrap(), b"second layer");
    // Non-files and absent paths.
    assert!(matches!(
        idx.read("/usr/bin"),
        Err(BaseError::NotAFile { .. })
    ));
    assert!(matches!(idx.read("/nope"), Err(BaseError::Io { .. })));
    let kind = |r: Result<Vec<String>, BaseError>| match r {
        Err(BaseError::Io { source, .. }) => Some(source.kind()),
        _ => None,
    };
    assert_eq!(
        kind(idx.children("/etc/passwd")),
        Some(std::io::ErrorKind::NotADirectory)
    );
    assert_eq!(
        kind(idx.children("/nope")),
        Some(std::io::ErrorKind::NotFound)
    );
    assert_eq!(idx.lstat("/etc/passwd/x").unwrap(), None);
}

#[test]
fn a_short_layer_source_is_an_error() {
    let t = tar(&[M::File("usr/bin/tool", b"0123456789")]);
    let mut idx = index_plain(std::slice::from_ref(&t));
    idx.set_layer_source(Arc::new(Mem(vec![t[..515].to_vec()])));
    let msg = idx.read("/usr/bin/tool").unwrap_err().to_string();
    assert!(
        msg.contains("/usr/bin/tool") && msg.contains("layer 0"),
        "{msg}"
    );
}

/// Reads through, counting what was read.
struct Counted<R> {
    inner: R,
    n: usize,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.n += n;
        Ok(n)
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[test]
fn compressions_give_the_same_index_and_consume_everything() {
    use M::*;
    let t = tar(&[
        Dir("etc", 0o755),
        File("etc/hostname", b"node\n"),
        File("usr/bin/x", b"x-binary"),
    ]);
    // Padding after the end-of-archive blocks, as some writers leave.
    let mut padded = t.clone();
    padded.extend_from_slice(&[0u8; 4096]);
    // Two gzip members make one stream.
    let mut two_members = gzip(&padded[..1000]);
    two_members.extend(gzip(&padded[1000..]));
    let zstd = zstd::stream::encode_all(padded.as_slice(), 3).unwrap();

    let mut reference = None;
    for (name, compression, blob) in [
        ("plain", LayerCompression::None, padded.clone()),
        ("gzip", LayerCompression::Gzip, gzip(&padded)),
        ("gzip members", LayerCompression::Gzip, two_members),
        ("zstd", LayerCompression::Zstd, zstd),
    ] {
        let mut b = IndexBuilder::new();
        let mut r = Counted {
            inner: blob.as_slice(),
            n: 0,
        };
        let stats = b.apply_layer(0, compression, &mut r).unwrap();
        assert_eq!(r.n, blob.len(), "{name}: the whole blob is read");
        assert_eq!(stats.bytes_uncompressed, padded.len() as u64, "{name}");
        assert_eq!(stats.entries, 3, "{name}");
        assert_eq!(stats.whiteouts, 0, "{name}");
        let mut idx = b.finish().unwrap();
        idx.set_layer_source(Arc::new(Mem(vec![padded.clone()])));
        assert_eq!(idx.read("/usr/bin/x").unwrap(), b"x-binary", "{name}");
        match &reference {
            None => reference = Some(idx),
            Some(r) => assert_eq!(r, &idx, "{name}"),
        }
    }
}

#[test]
fn bad_streams_are_errors_naming_the_layer() {
    let t = tar(&[M::File("a", b"A")]);
    for (compression, blob) in [
        (LayerCompression::Gzip, t.clone()),
        (LayerCompression::Zstd, t.clone()),
        (LayerCompression::Gzip, gzip(&t)[..20].to_vec()),
        (LayerCompression::None, t[..700].to_vec()),
    ] {
        let err = IndexBuilder::new()
            .apply_layer(0, compression, blob.as_slice())
            .unwrap_err();
        assert!(err.to_string().contains("layer 0"), "{err}");
    }
}

#[test]
fn stats_count_whiteouts() {
    let t = tar(&[
        M::File("a/.wh.b", b""),
        M::File("a/.wh..wh..opq", b""),
        M::File("a/c", b"C"),
    ]);
    let mut b = IndexBuilder::new();
    let stats = b
        .apply_layer(0, LayerCompression::None, t.as_slice())
        .unwrap();
    assert_eq!(stats.whiteouts, 2);
    assert_eq!(stats.entries, 3);
    assert_eq!(stats.bytes_uncompressed, t.len() as u64);
}

/// A GNU sparse member: `data` at offset 0 and again at `gap`, holes elsewhere.
fn sparse_tar(name: &str, data: &[u8], gap: u64, real: u64) -> Vec<u8> {
    fn octal(field: &mut [u8], v: u64) {
        let s = format!("{:0w$o}\0", v, w = field.len() - 1);
        field.copy_from_slice(s.as_bytes());
    }
    let mut h = tar::Header::new_gnu();
    h.set_path(name).unwrap();
    h.set_entry_type(tar::EntryType::GNUSparse);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_size(2 * data.len() as u64);
    {
        let g = h.as_gnu_mut().unwrap();
        octal(&mut g.sparse[0].offset, 0);
        octal(&mut g.sparse[0].numbytes, data.len() as u64);
        octal(&mut g.sparse[1].offset, gap);
        octal(&mut g.sparse[1].numbytes, data.len() as u64);
        // A trailing hole is a last, empty block at the real size.
        octal(&mut g.sparse[2].offset, real);
        octal(&mut g.sparse[2].numbytes, 0);
        octal(&mut g.realsize, real);
    }
    h.set_cksum();
    let mut b = tar::Builder::new(Vec::new());
    let mut both = data.to_vec();
    both.extend_from_slice(data);
    b.append(&h, both.as_slice()).unwrap();
    let mut fh = tar::Header::new_gnu();
    fh.set_path("usr/after").unwrap();
    fh.set_size(1);
    fh.set_mode(0o644);
    fh.set_uid(0);
    fh.set_gid(0);
    fh.set_mtime(0);
    fh.set_cksum();
    b.append(&fh, &b"z"[..]).unwrap();
    b.into_inner().unwrap()
}

#[test]
fn sparse_members_are_expanded() {
    // Sparse blocks are whole 512-byte blocks.
    let block: Vec<u8> = (0..512).map(|i| (i % 251) as u8 + 1).collect();
    let block: &'static [u8] = Box::leak(block.into_boxed_slice());
    let t = sparse_tar("usr/sparse", block, 1024, 2048);
    let mut want = block.to_vec();
    want.resize(1024, 0);
    want.extend_from_slice(block);
    want.resize(2048, 0);
    let mut idx = index_plain(std::slice::from_ref(&t));
    assert_eq!(
        idx.lstat("/usr/sparse").unwrap().unwrap().kind,
        machineos_layer::NodeKind::File { size: 2048 }
    );
    idx.set_layer_source(Arc::new(Mem(vec![t.clone()])));
    assert_eq!(idx.read("/usr/sparse").unwrap(), want);
    assert_eq!(idx.read("/usr/after").unwrap(), b"z");
    // Kept sparse contents are expanded while indexing.
    let t = sparse_tar("etc/sparse", block, 1024, 2048);
    let idx = index_plain(&[t]);
    assert_eq!(idx.read("/etc/sparse").unwrap(), want);
    // And it survives encoding.
    let back = machineos_baseindex::BaseIndex::decode(&idx.encode().unwrap()).unwrap();
    assert_eq!(back, idx);
}

#[test]
fn iteration_is_in_path_order() {
    use M::*;
    let idx = index(&[vec![
        File("usr-a", b""),
        File("usr/x", b""),
        File("a.b", b""),
        File("a/b", b""),
    ]]);
    let paths: Vec<&str> = idx.iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        ["/", "/a", "/a/b", "/a.b", "/usr", "/usr/x", "/usr-a"]
    );
    assert_eq!(idx.children("/").unwrap(), ["a", "a.b", "usr", "usr-a"]);
    let s = idx.stats();
    assert_eq!((s.files, s.dirs, s.symlinks, s.others), (4, 3, 0, 0));
    assert_eq!(idx.len(), 7);
    assert!(!idx.is_empty());
}

#[test]
fn a_hard_link_at_the_root_is_rejected() {
    // `./` as a hard link would replace the whole tree with a file.
    let t = tar(&[M::File("etc/passwd", b"root"), M::Link("./", "etc/passwd")]);
    let err = IndexBuilder::new()
        .apply_layer(0, LayerCompression::None, t.as_slice())
        .unwrap_err();
    assert!(err.to_string().contains("root"), "{err}");
}
