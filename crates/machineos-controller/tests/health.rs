//! The `/metrics`, `/healthz` and `/readyz` server over real HTTP/1.1 on 127.0.0.1, with a
//! raw tokio `TcpStream` client (no client-side timers, so paused time stays paused).

use std::net::SocketAddr;
use std::time::Duration;

use machineos_build_lifecycle::Phase;
use machineos_controller::health::{self, Health};
use machineos_controller::metrics::{self, Metrics};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

async fn request(addr: SocketAddr, method: &str, path: &str) -> Answer {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.trim().to_string(), v.trim().to_string())
        })
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

async fn get(addr: SocketAddr, path: &str) -> Answer {
    request(addr, "GET", path).await
}

async fn start(
    m: &Metrics,
    h: &Health,
) -> (SocketAddr, CancellationToken, tokio::task::JoinHandle<()>) {
    let stop = CancellationToken::new();
    let (addr, task) = health::serve(
        "127.0.0.1:0".parse().unwrap(),
        m.clone(),
        h.clone(),
        stop.clone(),
    )
    .await
    .unwrap();
    assert_ne!(addr.port(), 0);
    (addr, stop, task)
}

#[tokio::test]
async fn metrics_are_served_as_openmetrics_text() {
    let (m, h) = (Metrics::new(), Health::default());
    let (addr, stop, task) = start(&m, &h).await;
    m.build_state("worker", Phase::Building);
    m.set_leader(true);
    let a = get(addr, "/metrics").await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some(metrics::CONTENT_TYPE));
    assert!(
        a.body
            .contains("ocl_build_state{pool=\"worker\",state=\"building\"} 1\n"),
        "{}",
        a.body
    );
    assert!(a.body.contains("machineos_leader 1\n"));
    assert!(a.body.ends_with("# EOF\n"));
    // The text follows the calls made after the server started.
    m.set_active_builds(2);
    assert!(
        get(addr, "/metrics")
            .await
            .body
            .contains("ocl_active_builds 2\n")
    );
    // HEAD: the headers, no body.
    let a = request(addr, "HEAD", "/metrics").await;
    assert_eq!((a.status, a.body.as_str()), (200, ""));
    stop.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn readiness_follows_the_caches_and_unknown_paths_are_404() {
    let (m, h) = (Metrics::new(), Health::default());
    let (addr, stop, task) = start(&m, &h).await;
    let a = get(addr, "/readyz").await;
    assert_eq!(a.status, 503);
    assert!(a.body.contains("caches not synced"), "{}", a.body);
    assert!(a.header("content-type").unwrap().starts_with("text/plain"));
    h.set_ready(true);
    let a = get(addr, "/readyz").await;
    assert_eq!((a.status, a.body.as_str()), (200, "ok\n"));
    h.set_not_ready("watch of machineconfigpools failed");
    let a = get(addr, "/readyz").await;
    assert_eq!(a.status, 503);
    assert!(a.body.contains("machineconfigpools"), "{}", a.body);
    h.set_ready(true);
    assert_eq!(get(addr, "/readyz").await.status, 200);
    // Liveness does not depend on readiness.
    h.set_ready(false);
    let a = get(addr, "/healthz").await;
    assert_eq!((a.status, a.body.as_str()), (200, "ok\n"));
    assert_eq!(get(addr, "/readyz").await.status, 503);
    for p in ["/", "/metricsx", "/healthz/extra", "/livez"] {
        assert_eq!(get(addr, p).await.status, 404, "{p}");
    }
    let a = request(addr, "POST", "/healthz").await;
    assert_eq!(a.status, 405);
    assert_eq!(a.header("allow"), Some("GET, HEAD"));
    stop.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn liveness_fails_when_the_main_loop_stops_beating() {
    let (m, h) = (Metrics::new(), Health::new(Duration::from_secs(60)));
    let (addr, stop, task) = start(&m, &h).await;
    assert_eq!(get(addr, "/healthz").await.status, 200);
    tokio::time::advance(Duration::from_secs(59)).await;
    assert_eq!(get(addr, "/healthz").await.status, 200);
    tokio::time::advance(Duration::from_secs(2)).await;
    let a = get(addr, "/healthz").await;
    assert_eq!(a.status, 503);
    assert!(a.body.contains("no heartbeat"), "{}", a.body);
    assert!(h.alive().is_err());
    h.beat();
    assert_eq!(get(addr, "/healthz").await.status, 200);
    tokio::time::advance(Duration::from_secs(30)).await;
    h.beat();
    tokio::time::advance(Duration::from_secs(30)).await;
    assert_eq!(
        get(addr, "/healthz").await.status,
        200,
        "the beat restarted the clock"
    );
    stop.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn shutdown_stops_the_server() {
    let (m, h) = (Metrics::new(), Health::default());
    let (addr, stop, task) = start(&m, &h).await;
    // A kept-alive connection, idle when the shutdown comes.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = [0u8; 12];
    idle.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200");
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the server did not stop")
        .unwrap();
    assert!(TcpStream::connect(addr).await.is_err(), "still accepting");
    // The idle connection is closed by the server too.
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), idle.read_to_end(&mut rest))
        .await
        .expect("the idle connection stayed open")
        .unwrap();
}

#[tokio::test]
async fn binding_a_used_port_is_an_error() {
    let (m, h) = (Metrics::new(), Health::default());
    let (addr, stop, task) = start(&m, &h).await;
    let again = health::serve(addr, m.clone(), h.clone(), CancellationToken::new()).await;
    assert!(again.is_err());
    stop.cancel();
    task.await.unwrap();
}
