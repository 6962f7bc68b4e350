//! `cairn key generate|show`: the Ed25519 key in the home that signs tree checkpoints.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use cairn_engine::project::Home;
use cairn_engine::tlog::Signer;

use crate::out;

/// Makes a new key (`$CAIRN_HOME/log.key`, mode 0600) and prints its verifier key.
pub fn generate(name: &str, force: bool) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let path = home.log_key_file();
    if path.exists() && !force {
        bail!(
            "{} already holds a key: checkpoints signed with it verify only with it (add --force to replace it)",
            path.display()
        );
    }
    let signer = Signer::generate(name)?;
    cairn_store::private::create_dir_all(&home.root)
        .with_context(|| home.root.display().to_string())?;
    // Written whole beside the old one, then renamed over it: a key is never half
    // written. `NamedTempFile` makes it with mode 0600.
    let mut tmp = tempfile::NamedTempFile::new_in(&home.root)
        .with_context(|| home.root.display().to_string())?;
    writeln!(tmp, "{}", signer.to_private_text())?;
    tmp.as_file().sync_all()?;
    tmp.persist(&path)
        .with_context(|| path.display().to_string())?;
    out::note(&format!("cairn: wrote {}", path.display()));
    out::line(&signer.vkey())?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the verifier key of the home's key (`--cosigner`: of its cosignatures, for a
/// witness policy; `json`: both keys, the name and the file as one object).
pub fn show(cosigner: bool, json: bool) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let Some(signer) = home.log_signer()? else {
        bail!(
            "no key in {} (`cairn key generate` makes one)",
            home.log_key_file().display()
        );
    };
    if json {
        let v = serde_json::json!({
            "name": signer.name(),
            "vkey": signer.vkey(),
            "cosigner_vkey": signer.cosigner_vkey(),
            "path": home.log_key_file(),
        });
        out::line(&v.to_string())?;
        return Ok(ExitCode::SUCCESS);
    }
    out::line(&if cosigner {
        signer.cosigner_vkey()
    } else {
        signer.vkey()
    })?;
    Ok(ExitCode::SUCCESS)
}
