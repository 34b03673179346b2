//! `machineos-ostree-judge deploy IMAGE SYSROOT`: import and deploy `IMAGE` (e.g.
//! `oci:/dir:tag`) into the sysroot at `SYSROOT` (new, or beside its deployment, merged from
//! it) with ostree-ext, and print the
//! [`machineos_ostree_judge::Deployed`] as JSON. Set `OSTREE_SYSROOT_OPTS=skip-sync`.

use anyhow::{Result, bail};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [cmd, image, sysroot] if cmd == "deploy" => {
            let d = machineos_ostree_judge::deploy(image, std::path::Path::new(sysroot)).await?;
            println!("{}", serde_json::to_string(&d)?);
            Ok(())
        }
        _ => bail!("usage: machineos-ostree-judge deploy IMAGE SYSROOT"),
    }
}
