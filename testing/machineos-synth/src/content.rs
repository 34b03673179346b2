//! File contents of the generated binaries, libraries and data files, produced on demand as a
//! stream so that a gigabyte image never sits in memory, and compressible about as much as
//! the real thing so that blob sizes and gzip times are realistic.
//!
//! A file's bytes are a pure function of its seed, its style and its size: the stream is cut
//! into fixed 4 KiB blocks and block `i` is generated from `(seed, i)` alone, so the result
//! does not depend on how the caller sizes its reads.

use std::io::{self, Read};

use crate::rng::{Rng, mix64};

/// Bytes per generated block.
pub(crate) const BLOCK: usize = 4096;

/// What a generated file looks like inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// Words, spaces and newlines (documentation, data tables): compresses about 3×.
    Text,
    /// A mix of random blocks, repetitive "code" blocks, zero padding and string tables, like
    /// an ELF binary or a database: compresses about 2×.
    Binary,
    /// Uniformly random bytes, like an already compressed file (`.xz`, `.gz`, a kernel image).
    Random,
}

/// Words the text style draws from.
const WORDS: &[&str] = &[
    "the", "system", "service", "device", "kernel", "network", "config", "file", "user", "group",
    "module", "driver", "memory", "socket", "process", "thread", "signal", "path", "mount",
    "image", "layer", "update", "boot", "root", "option", "value", "default", "enable", "disable",
    "error", "warning", "info", "debug", "return", "struct", "buffer", "queue", "timer", "clock",
    "address", "port", "host", "table", "entry", "index", "record", "state", "stream", "channel",
    "target", "unit", "and", "or", "not", "with", "for", "from", "to", "of", "in", "is", "a", "on",
    "by",
];

/// A reader producing the contents of one generated file.
pub(crate) struct Content<'b> {
    seed: u64,
    size: u64,
    style: Style,
    prefix: &'static [u8],
    pos: u64,
    block: &'b mut [u8; BLOCK],
    block_index: Option<u64>,
}

impl<'b> Content<'b> {
    /// The contents of a file of `size` bytes; `prefix` (a magic number such as `\x7fELF`)
    /// replaces its first bytes. `block` is scratch space, reused across files.
    pub(crate) fn new(
        seed: u64,
        size: u64,
        style: Style,
        prefix: &'static [u8],
        block: &'b mut [u8; BLOCK],
    ) -> Content<'b> {
        Content {
            seed,
            size,
            style,
            prefix,
            pos: 0,
            block,
            block_index: None,
        }
    }

    fn fill_block(&mut self, index: u64) {
        let mut rng = Rng::new(mix64(self.seed ^ mix64(index.wrapping_add(1))));
        let block = &mut *self.block;
        match self.style {
            Style::Random => random(&mut rng, block),
            Style::Text => text(&mut rng, block),
            Style::Binary => match rng.below(100) {
                0..40 => random(&mut rng, block),
                40..75 => code(&mut rng, block),
                75..90 => block.fill(0),
                _ => strings(&mut rng, block),
            },
        }
        if index == 0 {
            let n = self.prefix.len().min(BLOCK);
            block[..n].copy_from_slice(&self.prefix[..n]);
        }
        self.block_index = Some(index);
    }
}

impl Read for Content<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos >= self.size || buf.is_empty() {
            return Ok(0);
        }
        let index = self.pos / BLOCK as u64;
        if self.block_index != Some(index) {
            self.fill_block(index);
        }
        let offset = (self.pos % BLOCK as u64) as usize;
        let left_in_file = usize::try_from(self.size - self.pos).unwrap_or(usize::MAX);
        let n = buf.len().min(BLOCK - offset).min(left_in_file);
        buf[..n].copy_from_slice(&self.block[offset..offset + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

fn random(rng: &mut Rng, block: &mut [u8; BLOCK]) {
    for chunk in block.chunks_exact_mut(8) {
        chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
}

/// Eight-byte "instructions" drawn from a small per-block palette.
fn code(rng: &mut Rng, block: &mut [u8; BLOCK]) {
    let palette: [u64; 16] = std::array::from_fn(|_| rng.next_u64());
    let mut bits = 0u64;
    for (i, chunk) in block.chunks_exact_mut(8).enumerate() {
        if i % 16 == 0 {
            bits = rng.next_u64();
        }
        let op = palette[((bits >> ((i % 16) * 4)) & 0xf) as usize];
        chunk.copy_from_slice(&op.to_le_bytes());
    }
}

/// NUL-separated identifiers, like an ELF string table.
fn strings(rng: &mut Rng, block: &mut [u8; BLOCK]) {
    let mut i = 0;
    while i < BLOCK {
        let word = rng.pick(WORDS).as_bytes();
        let n = word.len().min(BLOCK - i);
        block[i..i + n].copy_from_slice(&word[..n]);
        i += n;
        if i < BLOCK {
            block[i] = if rng.percent(50) { b'_' } else { 0 };
            i += 1;
        }
    }
}

fn text(rng: &mut Rng, block: &mut [u8; BLOCK]) {
    let mut i = 0;
    let mut in_line = 0;
    let mut line_len = rng.range(6, 14);
    while i < BLOCK {
        let word = rng.pick(WORDS).as_bytes();
        let n = word.len().min(BLOCK - i);
        block[i..i + n].copy_from_slice(&word[..n]);
        i += n;
        in_line += 1;
        if i < BLOCK {
            block[i] = if in_line >= line_len {
                in_line = 0;
                line_len = rng.range(6, 14);
                b'\n'
            } else {
                b' '
            };
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(seed: u64, size: u64, style: Style, read_size: usize) -> Vec<u8> {
        let mut block = [0u8; BLOCK];
        let mut c = Content::new(seed, size, style, b"\x7fELF", &mut block);
        let mut out = Vec::new();
        let mut buf = vec![0u8; read_size];
        loop {
            let n = c.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    }

    #[test]
    fn independent_of_read_size_and_exact_length() {
        for style in [Style::Text, Style::Binary, Style::Random] {
            let a = bytes(3, 10_000, style, 1);
            let b = bytes(3, 10_000, style, 8192);
            let c = bytes(3, 10_000, style, 777);
            assert_eq!(a.len(), 10_000);
            assert_eq!(a, b);
            assert_eq!(a, c);
            assert!(a.starts_with(b"\x7fELF"));
            assert_ne!(a, bytes(4, 10_000, style, 4096));
        }
        assert_eq!(bytes(1, 2, Style::Binary, 10), b"\x7fE");
        assert!(bytes(1, 0, Style::Text, 10).is_empty());
    }

    #[test]
    fn text_is_text() {
        let t = bytes(9, 20_000, Style::Text, 4096);
        assert!(
            t[4..]
                .iter()
                .all(|b| b.is_ascii_lowercase() || *b == b' ' || *b == b'\n')
        );
    }
}
