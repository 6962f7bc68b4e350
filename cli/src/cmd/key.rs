//! `cairn key generate|show`: the Ed25519 key in the home that signs tree checkpoints.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use cairn_engine::project::Home;
use cairn_engine::tlog::Signer;

use super::flags::{OutputArgs, with_arg};
use crate::out;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Make a key in the home (`log.key`, mode 0600) and print its verifier key.
    Generate {
        /// The key's name: it signs the logs whose origin is below it
        /// (`cairn.local/<project>/<session>`).
        #[arg(long, default_value = "cairn.local")]
        name: String,
        /// Replace an existing key.
        #[arg(long)]
        force: bool,
    },
    /// Print the verifier key (signed-note vkey).
    #[command(mut_args(with_arg("json", |a| a.help("One JSON object: name, vkey, cosigner_vkey and the key file's path"))))]
    Show {
        /// The key of its cosignatures (type 0x04), for a witness in a policy.
        #[arg(long)]
        cosigner: bool,
        #[command(flatten)]
        output: OutputArgs,
    },
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        match self.action {
            Action::Generate { name, force } => generate(&name, force),
            Action::Show { cosigner, output } => show(cosigner, output.json),
        }
    }
}

/// Makes a new key (`$CAIRN_HOME/log.key`, mode 0600) and prints its verifier key.
fn generate(name: &str, force: bool) -> Result<ExitCode> {
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
fn show(cosigner: bool, json: bool) -> Result<ExitCode> {
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
