//! `cairn browse`: runs the session browser (`cairn_cli::browse::App`) on the terminal.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;
use cairn_cli::browse::{self, App};
use cairn_engine::Home;
use crossterm::event::{self, Event, KeyEventKind};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Open this session (id, unique prefix, folder, or `last`) directly.
    session: Option<String>,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        browse(self.session.as_deref())
    }
}

fn browse(spec: Option<&str>) -> Result<ExitCode> {
    if !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "cairn browse needs a terminal (try cairn sessions, cairn show or cairn audit)"
        );
    }
    let mut app = match spec {
        Some(spec) => {
            let dir = crate::locate::session_dir(spec)?;
            let row = browse::summarise(&dir)?;
            let view = browse::load_session(&row).map_err(anyhow::Error::msg)?;
            App::on_session(view, Box::new(browse::load_session))
        }
        None => {
            let home = Home::from_env()?;
            let cwd = std::env::current_dir()?;
            let ws = cwd.canonicalize().unwrap_or(cwd);
            App::new(
                browse::list_sessions(&home, &ws),
                Box::new(browse::load_session),
            )
        }
    };
    let mut terminal = ratatui::init();
    let result = (|| -> Result<()> {
        while !app.quit {
            terminal.draw(|f| app.render(f))?;
            if let Event::Key(k) = event::read()?
                && k.kind == KeyEventKind::Press
            {
                app.on_key(k);
            }
        }
        Ok(())
    })();
    ratatui::restore();
    result?;
    Ok(ExitCode::SUCCESS)
}
