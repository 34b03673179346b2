//! Blob streams checked against their descriptor as they pass: the bytes must hash to the
//! digest (in its own algorithm, sha256 or sha512) and, when known, add up to the size. A
//! stream that is too long fails as soon as it is; a wrong digest or a short stream fails
//! in place of its end, so a consumer that reads to the end has every byte verified.

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use machineos_image::{Digest, Hasher};

/// `stream`, failing when its bytes are not `expected` (and `size` bytes, if given).
pub fn verified(
    stream: BoxStream<'static, std::io::Result<Bytes>>,
    expected: Digest,
    size: Option<u64>,
) -> BoxStream<'static, std::io::Result<Bytes>> {
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let state = (stream, Some(Hasher::new(expected.algorithm())), 0u64);
    Box::pin(futures_util::stream::unfold(
        state,
        move |(mut stream, mut hasher, mut read)| {
            let expected = expected.clone();
            async move {
                let h = hasher.as_mut()?;
                match stream.next().await {
                    Some(Ok(chunk)) => {
                        h.update(&chunk);
                        read += chunk.len() as u64;
                        if let Some(size) = size
                            && read > size
                        {
                            let e = bad(format!(
                                "blob {expected} is longer than the {size} bytes its descriptor says"
                            ));
                            return Some((Err(e), (stream, None, read)));
                        }
                        Some((Ok(chunk), (stream, hasher, read)))
                    }
                    Some(Err(e)) => Some((Err(e), (stream, None, read))),
                    None => {
                        let actual = hasher.take().map(Hasher::finish);
                        if let Some(size) = size
                            && read != size
                        {
                            let e = bad(format!(
                                "blob {expected} has {read} bytes, its descriptor says {size}"
                            ));
                            return Some((Err(e), (stream, None, read)));
                        }
                        match actual {
                            Some(d) if d != expected => Some((
                                Err(bad(format!("blob {expected} has digest {d}"))),
                                (stream, None, read),
                            )),
                            _ => None,
                        }
                    }
                }
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::TryStreamExt;

    async fn collect(
        chunks: &[&'static [u8]],
        d: &Digest,
        size: Option<u64>,
    ) -> Result<Vec<u8>, String> {
        let s: BoxStream<'static, std::io::Result<Bytes>> = Box::pin(futures_util::stream::iter(
            chunks
                .iter()
                .map(|c| Ok(Bytes::from_static(c)))
                .collect::<Vec<_>>(),
        ));
        verified(s, d.clone(), size)
            .try_fold(Vec::new(), |mut all, chunk| async move {
                all.extend_from_slice(&chunk);
                Ok(all)
            })
            .await
            .map_err(|e| e.to_string())
    }

    #[tokio::test]
    async fn table() {
        let d = Digest::sha256(b"hello world");
        let d512 = Digest::parse(&format!("sha512:{}", "0".repeat(128)))
            .unwrap()
            .same_algorithm_of(b"hello world");
        assert_eq!(
            collect(&[b"hello ", b"world"], &d, Some(11)).await.unwrap(),
            b"hello world"
        );
        assert_eq!(
            collect(&[b"hello world"], &d512, None).await.unwrap(),
            b"hello world"
        );
        let e = collect(&[b"hello ", b"there"], &d, Some(11))
            .await
            .unwrap_err();
        assert!(e.contains("has digest"), "{e}");
        let e = collect(&[b"hello world", b"!"], &d, Some(11))
            .await
            .unwrap_err();
        assert!(e.contains("longer than the 11 bytes"), "{e}");
        let e = collect(&[b"hello"], &d, Some(11)).await.unwrap_err();
        assert!(e.contains("has 5 bytes"), "{e}");
    }
}
