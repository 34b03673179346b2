//! A throwaway registry for trying machineos by hand: Debian's docker-registry on
//! 127.0.0.1 with TLS from a fresh test CA and htpasswd basic auth, until stdin closes.
//!
//! ```sh
//! cargo run -p machineos-testkit --example registry -- /tmp/demo
//! ```
//!
//! It writes `/tmp/demo/ca.crt` (for `--ca-file` and skopeo's `--cert-dir /tmp/demo`) and
//! `/tmp/demo/auth.json` (for `--authfile`), and prints the registry's `host:port`.

use std::io::Read;

use anyhow::Context;
use base64::Engine;
use machineos_testkit::{RegistryOptions, TestRegistry};

fn main() -> anyhow::Result<()> {
    let dir = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .context("usage: registry DIR (where ca.crt and auth.json are written)")?,
    );
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let (user, pass) = ("demo", "demo-password");
    let reg = TestRegistry::start(RegistryOptions::new().with_tls().with_auth(user, pass))?;
    std::fs::write(dir.join("ca.crt"), reg.ca_pem())?;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    std::fs::write(
        dir.join("auth.json"),
        format!(
            "{{\"auths\": {{\"{}\": {{\"auth\": \"{auth}\"}}}}}}\n",
            reg.host()
        ),
    )?;
    println!("{}", reg.host());
    eprintln!(
        "registry {} (TLS, user {user}); CA {}/ca.crt, credentials {}/auth.json; close stdin to stop",
        reg.host(),
        dir.display(),
        dir.display()
    );
    let mut sink = Vec::new();
    std::io::stdin()
        .read_to_end(&mut sink)
        .context("waiting for stdin to close")?;
    Ok(())
}
