//! The contents of a file the layer writes, as a recipe rather than bytes: pieces in order,
//! each either bytes in memory (small things: unit files, base files, the preset file) or a
//! resource of the config (`contents.source`, `append[]`) that is decoded and decompressed
//! again each time the layer is written.
//!
//! So a file of any size — a 200 MB `data:` URL, a gzip bomb inflating to gigabytes — costs
//! the plan its length and a reference to the config's text, and the layer writer a few
//! buffers. The plan measures each resource once ([`Contents::resource`]), verifying its hash
//! then, so writing can only fail if the same bytes decode differently (they cannot).

use std::io::{self, Read};
use std::sync::Arc;

use machineos_diagnostics::{Classify, Retry, io_retry};
use machineos_ignition::model::Resource;
use machineos_ignition::resource::{self, FetchError};

/// The most the planner reads into memory of a file it must look into (`/etc/passwd` for an
/// owner by name, a unit file for its `[Install]` section, the preset file it appends to).
pub const MAX_READ: u64 = 64 << 20;

/// A file's contents; see the module documentation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    parts: Vec<Part>,
    len: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Bytes(Arc<[u8]>),
    /// A resource that decodes to `len` bytes (the config's text is shared, not copied).
    Resource {
        res: Resource,
        len: u64,
    },
}

/// Why contents could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ContentsError {
    /// More than the caller reads into memory.
    #[error("the file is {len} bytes, more than the {max} read into memory")]
    TooLarge {
        /// The file's size.
        len: u64,
        /// The cap.
        max: u64,
    },
    /// Decoding failed (a bug: the same bytes decoded when they were measured).
    #[error("reading the contents: {0}")]
    Io(io::Error),
}

impl From<io::Error> for ContentsError {
    fn from(e: io::Error) -> Self {
        ContentsError::Io(e)
    }
}

impl Classify for ContentsError {
    /// `ContentsTooLarge` past the cap, `InternalError` for a decoding failure (the bytes
    /// decoded when they were measured).
    fn reason(&self) -> &'static str {
        match self {
            ContentsError::TooLarge { .. } => "ContentsTooLarge",
            ContentsError::Io(_) => "InternalError",
        }
    }

    /// Permanent past the cap; an I/O error's by its kind ([`io_retry`]).
    fn retry(&self) -> Retry {
        match self {
            ContentsError::TooLarge { .. } => Retry::Permanent,
            ContentsError::Io(e) => io_retry(e),
        }
    }
}

impl From<Vec<u8>> for Contents {
    fn from(b: Vec<u8>) -> Self {
        Contents::bytes(b)
    }
}

impl Contents {
    /// These bytes.
    pub fn bytes(b: impl Into<Arc<[u8]>>) -> Contents {
        let b: Arc<[u8]> = b.into();
        let len = b.len() as u64;
        if len == 0 {
            return Contents::default();
        }
        Contents {
            parts: vec![Part::Bytes(b)],
            len,
        }
    }

    /// What `res` decodes to — measured now, its hash verified — or `None` when it has no
    /// `source`.
    pub fn resource(res: &Resource) -> Result<Option<Contents>, FetchError> {
        let Some(len) = resource::measure(res)? else {
            return Ok(None);
        };
        if len == 0 {
            return Ok(Some(Contents::default()));
        }
        Ok(Some(Contents {
            parts: vec![Part::Resource {
                res: res.clone(),
                len,
            }],
            len,
        }))
    }

    /// The size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `other` after these contents.
    pub fn append(&mut self, other: Contents) {
        self.len += other.len;
        self.parts.extend(other.parts);
    }

    /// The bytes, as they are read.
    pub fn reader(&self) -> ContentsReader<'_> {
        ContentsReader {
            parts: &self.parts,
            next: 0,
            current: None,
        }
    }

    /// The bytes in memory, if there are at most `max`.
    pub fn to_vec(&self, max: u64) -> Result<Vec<u8>, ContentsError> {
        if self.len > max {
            return Err(ContentsError::TooLarge { len: self.len, max });
        }
        let mut out = Vec::with_capacity(self.len as usize);
        self.reader().read_to_end(&mut out)?;
        Ok(out)
    }
}

/// Reads [`Contents`]; each resource must give exactly the bytes it was measured at.
pub struct ContentsReader<'a> {
    parts: &'a [Part],
    next: usize,
    current: Option<Exact<Box<dyn Read + Send + 'a>>>,
}

impl Read for ContentsReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if let Some(r) = &mut self.current {
                let n = r.read(buf)?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                self.current = None;
            }
            let Some(part) = self.parts.get(self.next) else {
                return Ok(0);
            };
            self.next += 1;
            let (stream, len): (Box<dyn Read + Send>, u64) = match part {
                Part::Bytes(b) => (Box::new(&b[..]), b.len() as u64),
                Part::Resource { res, len } => (
                    resource::open(res)
                        .map_err(io::Error::other)?
                        .unwrap_or_else(|| Box::new(io::empty())),
                    *len,
                ),
            };
            self.current = Some(Exact {
                inner: stream,
                left: len,
            });
        }
    }
}

/// Exactly `left` bytes of `inner`, or an error.
struct Exact<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Exact<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            // The stream must end where it was measured to.
            let mut probe = [0u8; 1];
            if self.inner.read(&mut probe)? != 0 {
                return Err(io::Error::other("the contents are longer than measured"));
            }
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 && want > 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the contents are shorter than measured",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

impl std::fmt::Debug for ContentsReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContentsReader")
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(url: &str, gzip: bool) -> Resource {
        Resource {
            source: Some(url.into()),
            compression: gzip.then(|| "gzip".to_string()),
            ..Resource::default()
        }
    }

    #[test]
    fn parts_read_in_order() {
        let mut c = Contents::bytes(b"base\n".to_vec());
        c.append(
            Contents::resource(&res("data:,one%0A", false))
                .unwrap()
                .unwrap(),
        );
        c.append(Contents::default());
        c.append(
            Contents::resource(&res("data:;base64,dHdvCg==", false))
                .unwrap()
                .unwrap(),
        );
        assert_eq!(c.len(), 13);
        assert_eq!(c.to_vec(100).unwrap(), b"base\none\ntwo\n");
        assert!(matches!(
            c.to_vec(12),
            Err(ContentsError::TooLarge { len: 13, max: 12 })
        ));
        assert_eq!(Contents::resource(&Resource::default()).unwrap(), None);
    }
}
