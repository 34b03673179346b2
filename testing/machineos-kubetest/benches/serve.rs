//! The test API server's benchmark (`cargo bench -p machineos-kubetest --bench serve`):
//! how fast `kubetest serve` starts, and whether it serves 10 000 objects with watch
//! fan-out to 20 watchers without falling behind. A benchmark, not a timed test: it
//! prints figures and checks only correctness (every watcher sees every object, in
//! resourceVersion order, with no error frame).
//!
//! * **Startup**: wall time from spawning the binary to its first stdout line, which it
//!   prints once it listens and has written its kubeconfig; median and max of
//!   [`STARTS`] runs.
//! * **Fan-out**: one server process; [`WATCHERS`] watches of a namespace's ConfigMaps
//!   opened first, then [`OBJECTS`] ConfigMaps created by [`WRITERS`] concurrent
//!   clients. Reported: create throughput, the lag from each create's response to each
//!   watcher receiving its `ADDED` event (p50/p99/max over all watcher × object pairs),
//!   the time from the last create's response to the last watcher's last event (how far
//!   behind the watchers are when the writes stop), and the server's peak RSS.
//! * **Lists** of the 10 000 objects: whole, and paged with `limit=500`.
//!
//! Options after `--`: `--objects N`, `--watchers N`, `--writers N`, `--starts N`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Startup runs.
const STARTS: usize = 20;
/// Objects created.
const OBJECTS: usize = 10_000;
/// Concurrent watchers.
const WATCHERS: usize = 20;
/// Concurrent writers.
const WRITERS: usize = 16;

struct Opts {
    objects: usize,
    watchers: usize,
    writers: usize,
    starts: usize,
}

fn opts() -> Opts {
    let mut o = Opts {
        objects: OBJECTS,
        watchers: WATCHERS,
        writers: WRITERS,
        starts: STARTS,
    };
    let args: Vec<String> = std::env::args().collect();
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let slot = match a.as_str() {
            "--objects" => &mut o.objects,
            "--watchers" => &mut o.watchers,
            "--writers" => &mut o.writers,
            "--starts" => &mut o.starts,
            _ => continue, // cargo's own `--bench`
        };
        if let Some(n) = it.next().and_then(|v| v.parse().ok()) {
            *slot = n;
        }
    }
    o
}

/// A running `kubetest serve`, stopped by closing its stdin.
struct Served {
    child: Child,
    url: String,
    started_in: Duration,
    dir: std::path::PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn serve(run: usize) -> Served {
    let dir = std::env::temp_dir().join(format!("kubetest-bench-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    let t = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubetest"))
        .args(["serve", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn kubetest");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the URL");
    let started_in = t.elapsed();
    assert!(
        kubeconfig.exists(),
        "the kubeconfig is written before the URL"
    );
    Served {
        child,
        url: line.trim().to_string(),
        started_in,
        dir,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn peak_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// What one watcher saw: when each object's `ADDED` arrived, and any disorder.
struct Seen {
    at: Vec<Option<Instant>>,
    problems: Vec<String>,
}

async fn watch(
    c: reqwest::Client,
    url: String,
    objects: usize,
    ready: tokio::sync::mpsc::Sender<()>,
) -> Seen {
    let mut seen = Seen {
        at: vec![None; objects],
        problems: Vec::new(),
    };
    let mut resp = match c.get(&url).send().await {
        Ok(r) => r,
        Err(e) => {
            seen.problems.push(format!("watch: {e}"));
            return seen;
        }
    };
    let _ = ready.send(()).await;
    let mut buf: Vec<u8> = Vec::new();
    let mut count = 0usize;
    let mut last_rv = 0u64;
    while count < objects {
        let chunk = match resp.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => {
                seen.problems
                    .push(format!("watch ended after {count} events"));
                break;
            }
            Err(e) => {
                seen.problems.push(format!("watch: {e}"));
                break;
            }
        };
        let now = Instant::now();
        buf.extend_from_slice(&chunk);
        while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            let Ok(ev) = serde_json::from_slice::<Value>(&line) else {
                seen.problems.push("unparsable frame".into());
                continue;
            };
            if ev["type"] != "ADDED" {
                seen.problems
                    .push(format!("unexpected frame {}", ev["type"]));
                continue;
            }
            let rv: u64 = ev["object"]["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if rv <= last_rv {
                seen.problems
                    .push(format!("resourceVersion {rv} after {last_rv}"));
            }
            last_rv = rv;
            let i: Option<usize> = ev["object"]["metadata"]["name"]
                .as_str()
                .and_then(|n| n.strip_prefix("cm-"))
                .and_then(|n| n.parse().ok());
            match i {
                Some(i) if i < objects && seen.at[i].is_none() => seen.at[i] = Some(now),
                _ => seen.problems.push("unexpected or repeated object".into()),
            }
            count += 1;
        }
    }
    seen
}

/// GET `url`, its body as JSON.
async fn get_json(c: &reqwest::Client, url: &str) -> Value {
    let body = c
        .get(url)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .expect("GET")
        .bytes()
        .await
        .expect("GET body");
    serde_json::from_slice(&body).expect("a JSON body")
}

async fn fan_out(o: &Opts) {
    let served = serve(usize::MAX);
    let base = served.url.clone();
    let c = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .expect("client");
    let r = c
        .post(format!("{base}/api/v1/namespaces"))
        .header("content-type", "application/json")
        .body(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}})
                .to_string(),
        )
        .send()
        .await
        .expect("create namespace");
    assert_eq!(r.status().as_u16(), 201);
    let coll = format!("{base}/api/v1/namespaces/bench/configmaps");
    let list = get_json(&c, &coll).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();

    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(o.watchers.max(1));
    let watchers: Vec<_> = (0..o.watchers)
        .map(|_| {
            let url = format!("{coll}?watch=true&resourceVersion={rv}&timeoutSeconds=3600");
            tokio::spawn(watch(c.clone(), url, o.objects, ready_tx.clone()))
        })
        .collect();
    drop(ready_tx);
    for _ in 0..o.watchers {
        ready_rx.recv().await;
    }

    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let writers: Vec<_> = (0..o.writers)
        .map(|_| {
            let (c, coll, next, n) = (c.clone(), coll.clone(), next.clone(), o.objects);
            tokio::spawn(async move {
                let mut done = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break done;
                    }
                    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("cm-{i}"), "labels": {"bench": "yes", "shard": (i % 10).to_string()}},
                        "data": {"index": i.to_string(), "payload": "x".repeat(200)}});
                    let r = c
                        .post(&coll)
                        .header("content-type", "application/json")
                        .body(cm.to_string())
                        .send()
                        .await
                        .expect("create");
                    assert_eq!(r.status().as_u16(), 201, "create cm-{i}");
                    done.push((i, Instant::now()));
                }
            })
        })
        .collect();
    let mut created = vec![t0; o.objects];
    for w in writers {
        for (i, t) in w.await.expect("writer") {
            created[i] = t;
        }
    }
    let writes_took = t0.elapsed();
    let last_create = created.iter().max().copied().unwrap_or(t0);

    let mut lags = Vec::with_capacity(o.objects * o.watchers);
    let mut last_event = last_create;
    let mut problems = Vec::new();
    for w in watchers {
        let seen = tokio::time::timeout(Duration::from_secs(300), w)
            .await
            .expect("watchers finish within 5 minutes")
            .expect("watcher");
        problems.extend(seen.problems);
        for (i, at) in seen.at.iter().enumerate() {
            match at {
                Some(at) => {
                    lags.push(at.saturating_duration_since(created[i]));
                    last_event = last_event.max(*at);
                }
                None => problems.push(format!("cm-{i} never arrived")),
            }
        }
    }
    lags.sort();
    let rss = peak_rss_kib(served.child.id());

    let mut whole = Vec::new();
    let mut paged = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let v = get_json(&c, &coll).await;
        whole.push(t.elapsed());
        assert_eq!(v["items"].as_array().map(Vec::len), Some(o.objects));
        let t = Instant::now();
        let mut token = String::new();
        let mut n = 0;
        loop {
            let v = get_json(&c, &format!("{coll}?limit=500&continue={token}")).await;
            n += v["items"].as_array().map_or(0, Vec::len);
            match v["metadata"]["continue"].as_str() {
                Some(t) if !t.is_empty() => token = t.to_string(),
                _ => break,
            }
        }
        paged.push(t.elapsed());
        assert_eq!(n, o.objects);
    }
    whole.sort();
    paged.sort();

    println!(
        "\n## Fan-out: {} objects, {} watchers, {} writers\n",
        o.objects, o.watchers, o.writers
    );
    println!("| measure | value |\n|---|---|");
    println!(
        "| creates | {} ({:.0}/s) |",
        ms(writes_took),
        o.objects as f64 / writes_took.as_secs_f64()
    );
    println!(
        "| watch lag p50 / p99 / max | {} / {} / {} |",
        ms(pct(&lags, 0.5)),
        ms(pct(&lags, 0.99)),
        ms(pct(&lags, 1.0))
    );
    println!(
        "| last event after last create | {} |",
        ms(last_event.saturating_duration_since(last_create))
    );
    println!(
        "| events delivered | {} of {} |",
        lags.len(),
        o.objects * o.watchers
    );
    println!(
        "| list all (median of 5) | {} |",
        ms(whole[whole.len() / 2])
    );
    println!(
        "| list by 500 (median of 5) | {} |",
        ms(paged[paged.len() / 2])
    );
    if let Some(kib) = rss {
        println!("| server peak RSS | {:.0} MiB |", kib as f64 / 1024.0);
    }
    if !problems.is_empty() {
        problems.truncate(10);
        panic!("watchers fell behind or saw disorder: {problems:?}");
    }
}

fn main() {
    let o = opts();
    let mut starts: Vec<Duration> = (0..o.starts).map(|i| serve(i).started_in).collect();
    starts.sort();
    println!("## Startup ({} runs)\n", o.starts);
    println!("| measure | value |\n|---|---|");
    println!("| median | {} |", ms(pct(&starts, 0.5)));
    println!("| max | {} |", ms(pct(&starts, 1.0)));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(fan_out(&o));
}
