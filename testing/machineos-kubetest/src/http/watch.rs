//! `?watch=true` responses: a chunked stream of newline-separated
//! `{"type":…,"object":…}` frames.
//!
//! Contract: the first frames are [`Store::watch`](crate::Store::watch)'s (the initial
//! events the options ask for); the stream then follows new changes of the resource in
//! the namespace (or all), filtered by the selectors with the store's transitions
//! ([`Store::watch_from`](crate::Store::watch_from)), woken by the server's write signal
//! or every [`POLL`]. It ends cleanly after `timeoutSeconds` (default [`DEFAULT_TIMEOUT`]),
//! when the client goes away, or after an `ERROR` frame carrying a 410 `Expired` `Status`
//! when the start (or the position reached) is older than the retained history — as
//! kube-apiserver sends `too old resource version` inside a 200 watch. Other option errors
//! (bad selectors, a resourceVersion in the future) are plain HTTP `Status` errors.
//! With `allowWatchBookmarks=true` a `BOOKMARK` is sent every [`BOOKMARK_EVERY`] of quiet.
//! Every open stream also ends cleanly when a test calls
//! [`Server::close_watches`](super::Server::close_watches): the stream checks for that
//! under the store lock before reading new changes, so a write made after the call is
//! never sent on a stream it closed.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Response;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::Shared;
use super::body::{ChannelBody, RespBody};
use crate::error::ApiError;
use crate::list::WatchOptions;
use crate::resource::GroupResource;
use crate::selector::Selectors;
use crate::watch::WatchEvent;

/// How often a watch looks at the store's log without a write signal.
pub const POLL: Duration = Duration::from_millis(250);
/// The watch length when the client gives no `timeoutSeconds` (a real server picks
/// 30–60 minutes at random).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// The quiet time between bookmarks.
pub const BOOKMARK_EVERY: Duration = Duration::from_secs(10);

fn frame(v: &Value) -> Bytes {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}

fn error_frame(e: &ApiError) -> Bytes {
    frame(&json!({"type": "ERROR", "object": e.to_status()}))
}

fn response(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Response<RespBody> {
    let mut r = Response::new(ChannelBody(rx).boxed());
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        hyper::header::TRANSFER_ENCODING,
        hyper::header::HeaderValue::from_static("chunked"),
    );
    r
}

/// Rewrites each event's object for the client (a `Table` row, see [`super::table`]); the
/// flag is true for the first event of the stream.
pub type Transform = Box<dyn Fn(&Value, bool) -> Value + Send + Sync>;

fn event_frame(e: &WatchEvent, transform: Option<&Transform>, first: &mut bool) -> Bytes {
    match transform {
        Some(t) if !matches!(e.kind, crate::watch::EventType::Bookmark) => {
            let obj = t(&e.object, *first);
            *first = false;
            frame(&json!({"type": e.kind.as_str(), "object": obj}))
        }
        _ => frame(&e.to_json()),
    }
}

/// Starts a watch of `gr` in `ns` (or all namespaces); `transform` rewrites the objects
/// of `ADDED`/`MODIFIED`/`DELETED` events.
pub fn start(
    shared: &Arc<Shared>,
    gr: &GroupResource,
    ns: Option<&str>,
    opts: &WatchOptions,
    timeout_seconds: Option<u64>,
    transform: Option<Transform>,
) -> Result<Response<RespBody>, ApiError> {
    let timeout = timeout_seconds
        .filter(|t| *t > 0)
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    // Subscribed before the store is read: a close requested from now on ends this stream.
    let mut closes = shared.controls().watch_closes();
    let (first, sel, mut rv, bookmark_of) = {
        let store = shared.lock();
        let info = store.registry().require(gr)?;
        let sel = Selectors::parse(
            opts.label_selector.as_deref(),
            opts.field_selector.as_deref(),
            info,
        )?;
        match store.watch(gr, ns, opts) {
            Ok(w) => (
                w.events,
                sel,
                w.resource_version,
                (info.storage_api_version(), info.kind.clone()),
            ),
            Err(e @ ApiError::Gone { .. }) => {
                let b = error_frame(&e);
                // The channel has room: this send cannot fail for lack of capacity.
                let _ = tx.try_send(b);
                return Ok(response(rx));
            }
            Err(e) => return Err(e),
        }
    };
    let ns = ns.map(str::to_string);
    let gr = gr.clone();
    let shared = shared.clone();
    let bookmarks = opts.allow_watch_bookmarks;
    tokio::spawn(async move {
        let deadline = Instant::now() + timeout;
        let mut signal = shared.subscribe();
        let mut first_event = true;
        for e in &first {
            let f = event_frame(e, transform.as_ref(), &mut first_event);
            if tx.send(f).await.is_err() {
                return;
            }
        }
        let mut last_sent = Instant::now();
        loop {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            let wait = POLL.min(deadline - now);
            tokio::select! {
                _ = signal.changed() => {}
                _ = tokio::time::sleep(wait) => {}
                _ = tx.closed() => return,
                _ = closes.changed() => return,
            }
            let step: Result<(Vec<WatchEvent>, u64), ApiError> = {
                let store = shared.lock();
                if closes.has_changed().unwrap_or(true) {
                    return;
                }
                store
                    .watch_from(&gr, ns.as_deref(), rv, &sel)
                    .map(|ev| (ev, store.resource_version()))
            };
            match step {
                Ok((events, now_rv)) => {
                    rv = now_rv;
                    for e in &events {
                        let f = event_frame(e, transform.as_ref(), &mut first_event);
                        if tx.send(f).await.is_err() {
                            return;
                        }
                    }
                    if !events.is_empty() {
                        last_sent = Instant::now();
                    } else if bookmarks && last_sent.elapsed() >= BOOKMARK_EVERY {
                        let b = crate::watch::bookmark(&bookmark_of.0, &bookmark_of.1, rv);
                        if tx.send(frame(&b.to_json())).await.is_err() {
                            return;
                        }
                        last_sent = Instant::now();
                    }
                }
                Err(e) => {
                    let _ = tx.send(error_frame(&e)).await;
                    return;
                }
            }
        }
    });
    Ok(response(rx))
}
