//! The new layer's compressed bytes, kept in memory while small and in an unnamed temporary
//! file past [`SPILL_AT`], so a build's memory does not grow with the size of what its
//! configuration writes. Readers read by position, so any number of them (an upload and its
//! retries) can read it independently.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::BoxStream;

/// Blobs larger than this are written to a temporary file instead of kept in memory.
pub const SPILL_AT: usize = 32 << 20;

/// Bytes written once, read many times; see the module documentation.
#[derive(Debug, Clone)]
pub enum Spooled {
    /// Small: in memory.
    Memory(Bytes),
    /// Large: in an unnamed temporary file (deleted when the last clone goes).
    File {
        /// The file.
        file: Arc<File>,
        /// Its length.
        len: u64,
    },
}

/// Writes a [`Spooled`].
#[derive(Debug, Default)]
pub struct SpoolWriter {
    memory: Vec<u8>,
    file: Option<(File, u64)>,
}

impl Write for SpoolWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.file.is_none() && self.memory.len() + buf.len() > SPILL_AT {
            let mut f = tempfile::tempfile()?;
            f.write_all(&self.memory)?;
            self.file = Some((f, self.memory.len() as u64));
            self.memory = Vec::new();
        }
        match &mut self.file {
            Some((f, len)) => {
                let n = f.write(buf)?;
                *len += n as u64;
                Ok(n)
            }
            None => {
                self.memory.extend_from_slice(buf);
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.file {
            Some((f, _)) => f.flush(),
            None => Ok(()),
        }
    }
}

impl SpoolWriter {
    /// What was written.
    pub fn finish(self) -> Spooled {
        match self.file {
            Some((file, len)) => Spooled::File {
                file: Arc::new(file),
                len,
            },
            None => Spooled::Memory(self.memory.into()),
        }
    }
}

impl Spooled {
    /// The size in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Spooled::Memory(b) => b.len() as u64,
            Spooled::File { len, .. } => *len,
        }
    }

    /// A blocking reader from the first byte (for a blocking thread).
    pub fn reader(&self) -> Box<dyn Read + Send> {
        match self {
            Spooled::Memory(b) => Box::new(io::Cursor::new(b.clone())),
            Spooled::File { file, len } => Box::new(PositionedReader {
                file: file.clone(),
                pos: 0,
                len: *len,
            }),
        }
    }

    /// The bytes as a stream (file reads run on blocking threads).
    pub fn stream(&self) -> BoxStream<'static, io::Result<Bytes>> {
        const CHUNK: u64 = 1 << 20;
        match self {
            Spooled::Memory(b) => Box::pin(futures_util::stream::once(std::future::ready(Ok(
                b.clone()
            )))),
            Spooled::File { file, len } => {
                let (file, len) = (file.clone(), *len);
                Box::pin(futures_util::stream::try_unfold(0u64, move |pos| {
                    let file = file.clone();
                    async move {
                        if pos >= len {
                            return Ok(None);
                        }
                        let n = (len - pos).min(CHUNK) as usize;
                        let chunk = tokio::task::spawn_blocking(move || {
                            let mut buf = vec![0u8; n];
                            file.read_exact_at(&mut buf, pos).map(|()| buf)
                        })
                        .await
                        .map_err(io::Error::other)??;
                        Ok(Some((Bytes::from(chunk), pos + n as u64)))
                    }
                }))
            }
        }
    }
}

struct PositionedReader {
    file: Arc<File>,
    pos: u64,
    len: u64,
}

impl Read for PositionedReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.len - self.pos;
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn small_stays_in_memory_large_spills_and_both_read_back() {
        for size in [10usize, SPILL_AT + 12345] {
            let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let mut w = SpoolWriter::default();
            for chunk in data.chunks(7919) {
                w.write_all(chunk).unwrap();
            }
            let s = w.finish();
            assert_eq!(matches!(s, Spooled::File { .. }), size > SPILL_AT);
            assert_eq!(s.len(), size as u64);
            let mut back = Vec::new();
            s.reader().read_to_end(&mut back).unwrap();
            assert!(back == data);
            let streamed: Vec<u8> = futures_util::TryStreamExt::try_fold(
                s.stream(),
                Vec::new(),
                |mut all, c| async move {
                    all.extend_from_slice(&c);
                    Ok(all)
                },
            )
            .await
            .unwrap();
            assert!(streamed == data);
        }
    }
}
