//! `diff::compare` as a table: two images sharing their first layer, the second adding a
//! layer that adds, modifies (contents, mode, owner, symlink target) and removes (a
//! whiteout) paths. What the indexes can tell without reading a layer is told; the rest is
//! `Unknown`, and reading both sides settles it.

mod common;

use common::{M, index};
use machineos_baseindex::diff::{Change, Content, compare};
use machineos_layer::BaseView;

fn first() -> Vec<M> {
    vec![
        M::Dir("etc", 0o755),
        M::File("etc/a", b"one"),
        M::File("etc/gone", b"x"),
        M::Dir("opt", 0o755),
        M::Dir("usr", 0o755),
        M::Dir("usr/bin", 0o755),
        M::File("usr/bin/tool", b"binary"),
        M::File("usr/bin/same", b"same bytes"),
        M::Dir("usr/lib", 0o755),
        M::File("usr/lib/x", b"untouched"),
        M::Sym("usr/link", "a"),
    ]
}

fn second() -> Vec<M> {
    vec![
        M::File("etc/a", b"two"),
        M::File("etc/.wh.gone", b""),
        M::File("etc/new", b"new"),
        M::Dir("opt", 0o700),
        M::File("usr/bin/tool", b"BINARY"),
        // Rewritten with the same bytes: equal once read.
        M::File("usr/bin/same", b"same bytes"),
        M::FileWith("usr/lib/owned", b"o".to_vec(), 0o600, 1000, 1000),
        M::Sym("usr/link", "b"),
    ]
}

#[test]
fn every_difference_is_listed_in_path_order_with_what_the_indexes_tell() {
    let a = index(&[first()]);
    let b = index(&[first(), second()]);
    let same = |i: u32, j: u32| i == 0 && j == 0;
    let got: Vec<(String, Change, Content)> = compare(&a, &b, &same)
        .into_iter()
        .map(|d| (d.path, d.change, d.content))
        .collect();
    let want = [
        ("/etc/a", Change::Modified, Content::Differs),
        ("/etc/gone", Change::Removed, Content::NotFiles),
        ("/etc/new", Change::Added, Content::NotFiles),
        ("/opt", Change::Modified, Content::NotFiles),
        ("/usr/bin/same", Change::Modified, Content::Unknown),
        ("/usr/bin/tool", Change::Modified, Content::Unknown),
        ("/usr/lib/owned", Change::Added, Content::NotFiles),
        ("/usr/link", Change::Modified, Content::NotFiles),
    ];
    let want: Vec<(String, Change, Content)> = want
        .iter()
        .map(|(p, c, k)| (p.to_string(), *c, *k))
        .collect();
    assert_eq!(got, want);

    // Unknown pairs are settled by reading: `same` is equal, `tool` is not.
    for d in compare(&a, &b, &same)
        .iter()
        .filter(|d| d.content == Content::Unknown)
    {
        let equal = a.read(&d.path).unwrap() == b.read(&d.path).unwrap();
        assert_eq!(equal, d.path == "/usr/bin/same", "{}", d.path);
        assert!(!d.metadata_differs(), "{}", d.path);
    }
    // Metadata: the directory's mode, the symlink's target.
    let diffs = compare(&a, &b, &same);
    let opt = diffs.iter().find(|d| d.path == "/opt").unwrap();
    assert!(opt.metadata_differs());
    assert_eq!(
        (
            opt.before.as_ref().unwrap().mode,
            opt.after.as_ref().unwrap().mode
        ),
        (0o755, 0o700)
    );
}

#[test]
fn an_image_against_itself_or_the_same_layers_differs_in_nothing() {
    let a = index(&[first(), second()]);
    let b = index(&[first(), second()]);
    assert!(compare(&a, &a, &|i, j| i == j).is_empty());
    assert!(compare(&a, &b, &|i, j| i == j).is_empty());
    // Not told the layers are shared: equal-sized located files are Unknown, nothing else.
    let unknown: Vec<String> = compare(&a, &b, &|_, _| false)
        .into_iter()
        .map(|d| {
            assert_eq!(d.content, Content::Unknown, "{}", d.path);
            d.path
        })
        .collect();
    assert_eq!(
        unknown,
        [
            "/usr/bin/same",
            "/usr/bin/tool",
            "/usr/lib/owned",
            "/usr/lib/x"
        ]
    );
}

/// An index continued from another (`IndexBuilder::from_index`) equals the index built from
/// all the layers at once — encodings compared, so every path, owner, mode, link group and
/// content location — also across a whiteout, an opaque directory and hard links.
#[test]
fn an_index_continued_from_its_base_equals_the_one_built_whole() {
    use common::{index_plain, tar};
    use machineos_baseindex::{IndexBuilder, LayerCompression};
    let mut lower = first();
    lower.push(M::Link("usr/bin/hard", "usr/bin/tool"));
    lower.push(M::Dir("opt/sub", 0o750));
    lower.push(M::File("opt/sub/f", b"f"));
    let mut upper = second();
    upper.push(M::File("opt/.wh..wh..opq", b""));
    upper.push(M::File("opt/kept", b"k"));
    upper.push(M::Link("usr/lib/hard2", "usr/lib/owned"));
    let layers = [tar(&lower), tar(&upper), tar(&[M::File("etc/last", b"l")])];
    let whole = index_plain(&layers);
    for split in 1..layers.len() {
        let base = index_plain(&layers[..split]);
        let mut b = IndexBuilder::from_index(&base);
        for (i, l) in layers.iter().enumerate().skip(split) {
            b.apply_layer(i as u32, LayerCompression::None, l.as_slice())
                .unwrap();
        }
        assert!(
            b.finish().unwrap() == whole,
            "continued after {split} layers"
        );
    }
    // Continuing with nothing gives the index back.
    let base = index_plain(&layers);
    assert!(IndexBuilder::from_index(&base).finish().unwrap() == base);
}
