//! `xtask contents`: what large file contents cost a build — peak memory and time of
//! `machineos build --base-dir` on configs whose contents are huge compared with the config
//! (a gzip bomb) or huge themselves (a `data:` URL of hundreds of megabytes) — and how fast
//! `data:` URLs decode, measured in process on the same URL.
//!
//! With `--baseline BIN` (another `machineos`, e.g. one built from an older commit) each
//! case runs with both binaries side by side, and the report gives the ratios.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use base64::Engine;

use crate::measure::{Cmd, Sample, measure};

/// Arguments of `xtask contents`.
#[derive(Debug, clap::Args)]
pub struct ContentsArgs {
    /// The `machineos` binary to measure. Defaults to the one next to this executable.
    #[arg(long)]
    machineos: Option<PathBuf>,
    /// Another `machineos` binary to measure side by side (e.g. an older build).
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Size of the gzip bomb's inflated contents, MiB.
    #[arg(long, default_value_t = 2048)]
    bomb_mib: u64,
    /// Size of the data: URL's decoded contents, MiB (the URL is 4/3 of it).
    #[arg(long, default_value_t = 150)]
    data_mib: u64,
    /// Scratch directory (configs, logs).
    #[arg(long, default_value = "target/bench/contents")]
    scratch: PathBuf,
}

fn write_config(path: &Path, url: &str, gzip: bool, dest: &str) -> Result<u64> {
    let mut file = serde_json::json!({ "path": dest, "contents": { "source": url } });
    if gzip {
        file["contents"]["compression"] = "gzip".into();
    }
    let config = serde_json::json!({
        "ignition": { "version": "3.4.0" },
        "storage": { "files": [file] }
    });
    let bytes = serde_json::to_vec(&config)?;
    std::fs::write(path, &bytes).with_context(|| format!("writing {}", path.display()))?;
    Ok(bytes.len() as u64)
}

/// A gzip bomb: `mib` MiB of zeros, gzip level 9, as a base64 data: URL.
fn bomb_url(mib: u64) -> Result<String> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..mib {
        gz.write_all(&zeros)?;
    }
    let gz = gz.finish()?;
    Ok(format!(
        "data:;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(gz)
    ))
}

/// `mib` MiB of incompressible bytes (xorshift) as a base64 data: URL.
fn data_url(mib: u64) -> String {
    let mut data = vec![0u8; (mib << 20) as usize];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for b in data.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    format!(
        "data:;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&data)
    )
}

/// MB/s of decoding `url` (best of three), through the streaming decoder.
fn decode_rate(url: &str) -> Result<f64> {
    let mut best = f64::MAX;
    let mut n = 0;
    for _ in 0..3 {
        let t = Instant::now();
        n = machineos_ignition::dataurl::check(url).map_err(|e| anyhow::anyhow!("{e}"))?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(n as f64 / 1e6 / best)
}

fn run_case(bin: &Path, config: &Path, base: &Path, scratch: &Path, name: &str) -> Result<Sample> {
    let cmd = Cmd::new(
        bin.as_os_str(),
        [
            "build".as_ref(),
            "--base-dir".as_ref(),
            base.as_os_str(),
            config.as_os_str(),
        ],
    );
    measure(&cmd, scratch, &scratch.join(format!("{name}.log")))
}

/// Runs the cases and prints the markdown report.
pub fn run(args: &ContentsArgs) -> Result<()> {
    let bin = match &args.machineos {
        Some(b) => b.clone(),
        None => std::env::current_exe()?.with_file_name("machineos"),
    };
    std::fs::create_dir_all(&args.scratch)?;
    let base = args.scratch.join("empty-root");
    std::fs::create_dir_all(&base)?;

    eprintln!("generating a {} MiB gzip bomb…", args.bomb_mib);
    let bomb = args.scratch.join("bomb.ign");
    let bomb_size = write_config(&bomb, &bomb_url(args.bomb_mib)?, true, "/var/lib/bomb")?;
    eprintln!("generating a data: URL of {} MiB…", args.data_mib);
    let url = data_url(args.data_mib);
    let rate = decode_rate(&url)?;
    let big = args.scratch.join("data-url.ign");
    let big_size = write_config(&big, &url, false, "/var/lib/big")?;
    drop(url);

    let mut rows = Vec::new();
    for (name, config, config_size, contents) in [
        ("gzip bomb", &bomb, bomb_size, args.bomb_mib),
        ("data: URL", &big, big_size, args.data_mib),
    ] {
        let mut bins = vec![("machineos", bin.clone())];
        if let Some(b) = &args.baseline {
            bins.push(("baseline", b.clone()));
        }
        for (label, b) in bins {
            eprintln!("{name}: {label}…");
            let tag = format!("{}-{label}", name.replace([' ', ':'], ""));
            let row = match run_case(&b, config, &base, &args.scratch, &tag) {
                Ok(s) => format!(
                    "| {name} | {label} | {:.1} MB | {contents} MiB | {:.0} MiB | {:.1} s |",
                    config_size as f64 / 1e6,
                    s.max_rss_kib as f64 / 1024.0,
                    s.wall
                ),
                Err(e) => format!(
                    "| {name} | {label} | {:.1} MB | {contents} MiB | failed: {} | |",
                    config_size as f64 / 1e6,
                    e.to_string().lines().next().unwrap_or("")
                ),
            };
            rows.push(row);
        }
    }
    println!("| case | binary | config | contents | peak RSS | wall |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for r in rows {
        println!("{r}");
    }
    println!();
    println!(
        "data: URL decoding (base64, {} MiB decoded, streaming, best of 3): {rate:.0} MB/s",
        args.data_mib
    );
    Ok(())
}
