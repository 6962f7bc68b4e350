//! The session verbs: `run --script`, `sessions`, `show`, `tools`, `demo`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use cairn_cli::summary;
use cairn_engine::event::{Answer, Event, Status};
use cairn_engine::event::{Enforcement, SandboxMode, Sandboxed};
use cairn_engine::permission::{AllowList, Approver, Policy, Request};
use cairn_engine::{CallOutcome, Catalog, Engine, EngineConfig, Home, Registry, fold, script};
use cairn_store::LogReader;

use crate::out;

/// A session folder from an id, prefix, path or `last`.
pub fn session_dir(spec: &str) -> Result<PathBuf> {
    let home = Home::from_env()?;
    let cwd = std::env::current_dir().ok();
    Ok(cairn_engine::find_session(&home, spec, cwd.as_deref())?.dir)
}

/// Prints a call's progress line as it ends.
pub(crate) fn print_progress(o: &CallOutcome) {
    out::note(&summary::progress(o));
}

/// Readies this process to run sessions: SIGINT, SIGTERM and SIGHUP stop the session
/// (the running call cancelled, the session ended; `main` then exits with 128 + the
/// signal's number), and processes that leave their command's group come back to this
/// process to be reaped at the session's end. A failure is said, not fatal: the
/// session runs as before.
pub fn prepare() {
    if let Err(e) = cairn_engine::signal::install() {
        out::note(&format!(
            "cairn: cannot handle signals ({e}): a signal will kill cairn without ending the session"
        ));
    }
    if let Err(e) = cairn_engine::process::become_subreaper() {
        out::note(&format!(
            "cairn: cannot become the subreaper of the session's processes ({e}): one that leaves its command's process group will not be found at the end"
        ));
    }
}

/// The reason to end a session with: `reason`, or the signal that stopped it.
pub(crate) fn end_reason(engine: &Engine, reason: &str) -> String {
    match engine.stopped() {
        Some(s) => {
            out::note(&format!(
                "cairn: {} received: the running call was cancelled; ending session {}",
                s.name(),
                engine.id()
            ));
            s.reason()
        }
        None => reason.to_string(),
    }
}

/// Reads a line from standard input, or `None` at its end or once a signal arrived
/// (the read waits with `poll`, not in a blocking `read` a signal would not end).
pub(crate) fn read_stdin_line() -> Option<String> {
    use std::io::Read;
    use std::os::fd::AsFd;
    let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    let mut input = cairn_engine::signal::Interruptible::new(std::fs::File::from(fd));
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    // A byte at a time, so that nothing after the line is taken from the terminal.
    loop {
        match input.read(&mut byte) {
            Ok(1) => {
                line.push(byte[0]);
                if byte[0] == b'\n' {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            _ if line.is_empty() => return None,
            _ => break,
        }
    }
    if cairn_engine::signal::received().is_some() {
        return None;
    }
    Some(String::from_utf8_lossy(&line).into_owned())
}

/// `--sandbox` and `--sandbox-write-root`: how commands are confined.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxArgs {
    /// The OS sandbox of commands: workspace-write (writes only in the workspace,
    /// $TMPDIR and the --sandbox-write-root folders), strict (the same, and no network:
    /// TCP refused by Landlock, every socket but a Unix one by seccomp) or off.
    #[arg(long, default_value = "workspace-write")]
    pub sandbox: SandboxMode,
    /// A folder commands may also write in (a build tool's cache such as
    /// ~/.cargo/registry); repeat it for more.
    #[arg(long = "sandbox-write-root", value_name = "DIR")]
    pub sandbox_write_roots: Vec<PathBuf>,
}

impl SandboxArgs {
    /// Sets the configuration's sandbox (the roots made absolute).
    pub fn apply(&self, config: &mut EngineConfig) {
        config.sandbox = self.sandbox;
        config.sandbox_write_roots = self
            .sandbox_write_roots
            .iter()
            .map(|r| std::path::absolute(r).unwrap_or(r.clone()))
            .collect();
    }
}

/// Says once, on stderr, when the sandbox asked for is not (or only partly) enforced.
pub fn note_sandbox(s: &Sandboxed) {
    if s.mode == SandboxMode::Off {
        return;
    }
    match s.enforced {
        Enforcement::Full => {}
        Enforcement::Partial => eprintln!(
            "note: the sandbox ({}) is only partly enforced: this kernel's Landlock ABI is {}",
            s.mode, s.abi
        ),
        Enforcement::None => eprintln!(
            "warning: this kernel has no Landlock: commands run without the sandbox ({}); the log records it",
            s.mode
        ),
    }
}

/// `--approve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Approve {
    Ask,
    Always,
    Never,
}

/// Asks on the terminal, showing exactly what is being allowed; denies when there is
/// no terminal, saying how to allow.
pub(crate) struct TerminalApprover;

impl Approver for TerminalApprover {
    fn answer(&mut self, r: &Request) -> (Answer, bool) {
        use std::io::{IsTerminal, Write};
        if !std::io::stdin().is_terminal() {
            out::note(&format!(
                "cairn: {} needs permission for {} and there is no terminal to ask: denied (use --approve always, or \"approve\" in the script step)",
                r.call, r.key
            ));
            return (Answer::Deny, false);
        }
        let mut err = std::io::stderr();
        let _ = writeln!(err);
        for line in r.headline() {
            let _ = writeln!(err, "{line}");
        }
        let _ = writeln!(err, "{}", r.detail);
        loop {
            let _ = write!(err, "allow? {}: ", r.choices());
            let _ = err.flush();
            let Some(line) = read_stdin_line() else {
                // A signal is nobody's answer; the end of the input is a person's.
                let by_person = cairn_engine::signal::received().is_none();
                return (Answer::Deny, by_person);
            };
            match line.trim() {
                "y" | "Y" => return (Answer::Once, true),
                "a" | "A" if r.always_offered() => return (Answer::Always, true),
                "a" | "A" => {
                    let _ = writeln!(err, "always is not offered for this call: answer y or n");
                }
                "n" | "N" => return (Answer::Deny, true),
                _ => {}
            }
        }
    }
}

pub fn run_script(
    script_path: &Path,
    workspace: &Path,
    catalog: Catalog,
    approve: Approve,
    sandbox: &SandboxArgs,
) -> Result<ExitCode> {
    let mut config = EngineConfig::new(catalog);
    sandbox.apply(&mut config);
    let text = std::fs::read_to_string(script_path)
        .with_context(|| format!("cannot read script {}", script_path.display()))?;
    let steps = script::parse(&text)?;
    {
        use std::io::IsTerminal;
        // On a terminal, the live view.
        if std::io::stdout().is_terminal() && std::io::stdin().is_terminal() {
            let policy = match approve {
                Approve::Ask => None,
                Approve::Always => Some(Policy::AllowAll),
                Approve::Never => Some(Policy::DenyAll),
            };
            return crate::livecmd::run(steps, workspace, config, policy);
        }
    }
    let home = Home::from_env()?;
    let mut engine = Engine::start(&home, workspace, config)?;
    engine.set_approver(approver(approve));
    note_refused_grants(&engine);
    note_sandbox(engine.sandbox());
    let id = engine.id().to_string();
    script::run(&mut engine, &steps, print_progress)?;
    let reason = end_reason(&engine, "script finished");
    engine.end(&reason)?;
    out::line(&id)?;
    Ok(ExitCode::SUCCESS)
}

/// What `cairn run TASK` is given.
pub struct TaskArgs {
    pub task: String,
    pub workspace: PathBuf,
    pub catalog: Catalog,
    pub sandbox: SandboxArgs,
    pub approve: Approve,
    pub provider: cairn_engine::provider::Kind,
    pub overrides: cairn_engine::provider::Overrides,
    pub context_window: Option<u64>,
    pub turns_max: u32,
    pub check: Option<String>,
    pub search: Option<cairn_engine::web::SearchBackend>,
    pub searxng_url: Option<String>,
}

/// A model provider built from the flags and the environment (shared by `run TASK`
/// and `resume --provider`), with the key it uses.
pub struct Model {
    pub provider: Box<dyn cairn_engine::provider::Provider + Send>,
    key: cairn_engine::provider::Secret,
    key_var: String,
}

impl Model {
    pub fn build(
        kind: cairn_engine::provider::Kind,
        overrides: &cairn_engine::provider::Overrides,
    ) -> Result<Model> {
        use cairn_engine::provider::ProviderConfig;
        let pc = ProviderConfig::from_env(kind, overrides, |k| std::env::var(k).ok())?;
        let key = pc.api_key.clone();
        let key_var = pc.key_var.clone();
        Ok(Model {
            provider: pc.build()?,
            key,
            key_var,
        })
    }

    /// Runs the agent loop in `engine` (after `task`, when given), ends the session
    /// and prints the answer and the session id. The key is registered as a secret
    /// first, so it never reaches the log, and scrubbed from errors.
    /// A model turn being awaited is given up when a signal stops the session.
    pub fn drive(self, mut engine: Engine, task: Option<&str>, turns_max: u32) -> Result<ExitCode> {
        use cairn_engine::agent::{self, Step};
        let Model {
            provider,
            key,
            key_var,
        } = self;
        if let Some(k) = key.expose() {
            engine.add_secret(&key_var, k);
        }
        let id = engine.id().to_string();
        let cfg = agent::AgentConfig {
            turns_max,
            system: None,
        };
        let mut provider = agent::Interruptible::new(provider, engine.cancel_handle());
        let result = agent::run(&mut engine, &mut provider, task, &cfg, |step| match step {
            Step::Turn(t) => {
                if !t.text.is_empty() && !t.tool_calls.is_empty() {
                    out::note(&format!("model: {}", t.text.lines().next().unwrap_or("")));
                }
            }
            Step::Call(o) => print_progress(o),
        });
        match result {
            Ok(run) => {
                let reason = match run.stop {
                    agent::Stop::Answered => "answered".to_string(),
                    agent::Stop::TurnLimit => format!("turn limit ({turns_max} turns)"),
                    agent::Stop::Signal(_) => end_reason(&engine, ""),
                };
                engine.end(&reason)?;
                if let agent::Stop::Signal(_) = run.stop {
                    // `main` exits with the signal's code.
                    out::line(&id)?;
                    return Ok(ExitCode::SUCCESS);
                }
                if run.stop == agent::Stop::TurnLimit {
                    eprintln!(
                        "cairn: stopped at the turn limit ({turns_max} turns): raise --turns-max, or resume"
                    );
                }
                out::line(&run.answer)?;
                out::line(&id)?;
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                let msg = key.scrub(&e.to_string());
                let reason = end_reason(&engine, &format!("stopped: {msg}"));
                engine.end(&reason)?;
                let msg = cairn_cli::hint::with_hint(msg, &e);
                Err(anyhow::anyhow!("{msg} (session {id})"))
            }
        }
    }
}

pub fn run_task(a: &TaskArgs) -> Result<ExitCode> {
    let model = Model::build(a.provider, &a.overrides)?;
    let mut config = EngineConfig::new(a.catalog);
    a.sandbox.apply(&mut config);
    cairn_engine::agent::fit_limits(&mut config.limits, a.context_window);
    config.check_command = a
        .check
        .as_ref()
        .map(|c| c.split_whitespace().map(str::to_string).collect());
    if let Some(b) = a.search {
        config.web.search_backend = b;
    }
    if let Some(u) = &a.searxng_url {
        config.web.searxng_url = Some(u.clone());
    }
    let home = Home::from_env()?;
    let mut engine = Engine::start(&home, &a.workspace, config)?;
    engine.set_approver(approver(a.approve));
    out::note(&format!("session {}", engine.id()));
    note_refused_grants(&engine);
    note_sandbox(engine.sandbox());
    model.drive(engine, Some(&a.task), a.turns_max)
}

/// Says on stderr that the allow list holds grants the session does not honour.
fn note_refused_grants(engine: &Engine) {
    let n = engine.refused_grants().len();
    if n > 0 {
        out::note(&format!(
            "cairn: note: {n} grant{} of the allow list not honoured: no session recorded the answer behind it (cairn allow list says why)",
            if n == 1 { "" } else { "s" }
        ));
    }
}

/// The approver `--approve` names.
pub(crate) fn approver(approve: Approve) -> Box<dyn Approver> {
    match approve {
        Approve::Ask => Box::new(TerminalApprover),
        Approve::Always => Box::new(Policy::AllowAll),
        Approve::Never => Box::new(Policy::DenyAll),
    }
}

pub fn memory_list(workspace: &Path, json: bool) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let ws = workspace.canonicalize().unwrap_or(workspace.to_path_buf());
    let mut facts = cairn_engine::memory::ProjectMemory::new(&home.project(&ws).dir).list()?;
    // Facts kept before memory was redacted are shown redacted.
    let redactor = cairn_engine::redact::Redactor::with_env(std::env::vars());
    for f in &mut facts {
        f.text = redactor
            .redact(&f.text, &mut Default::default())
            .into_owned();
    }
    for f in &facts {
        if json {
            out::line(&serde_json::to_string(f)?)?;
        } else {
            out::line(&format!("{:>3}. {}", f.n, f.text))?;
        }
    }
    if facts.is_empty() && !json {
        eprintln!("no facts remembered for {}", ws.display());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn memory_forget(workspace: &Path, n: usize) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let ws = workspace.canonicalize().unwrap_or(workspace.to_path_buf());
    let f = cairn_engine::memory::ProjectMemory::new(&home.project(&ws).dir).forget(n)?;
    let text = cairn_engine::redact::Redactor::with_env(std::env::vars())
        .redact(&f.text, &mut Default::default())
        .into_owned();
    out::line(&format!("forgot: {text}"))?;
    Ok(ExitCode::SUCCESS)
}

pub fn sessions(json: bool) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let mut all = Vec::new();
    for p in home.projects() {
        for id in p.sessions() {
            all.push(p.session_dir(&id));
        }
    }
    all.sort_by(|a, b| b.file_name().cmp(&a.file_name()));
    for dir in all {
        let s = match summary::summarise(&dir) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("cairn: {}: {}", dir.display(), cairn_cli::hint::text(&e));
                continue;
            }
        };
        if json {
            out::line(
                &serde_json::json!({
                    "id": s.id, "dir": s.dir, "workspace": s.workspace, "catalog": s.catalog,
                    "started": s.started, "records": s.records, "calls": s.calls, "state": s.state,
                })
                .to_string(),
            )?;
        } else {
            out::line(&format!(
                "{}  {:<11} {:>4} calls  {:<7} {}",
                s.id, s.state, s.calls, s.catalog, s.workspace
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn show(spec: &str, json: bool) -> Result<ExitCode> {
    let dir = session_dir(spec)?;
    let reader = LogReader::open(&dir)?;
    let blobs = fold::project_blobs(&dir);
    let mut started: std::collections::HashMap<String, (u64, String, serde_json::Value)> =
        Default::default();
    for r in reader.records()? {
        let r = r?;
        let rec = match fold::parse_maybe_in(&r, blobs.as_ref()) {
            Ok(rec) => rec,
            Err(u) => {
                out::line(&format!("{:>6}  ?  {}", u.seq, u.what))?;
                continue;
            }
        };
        match rec.event {
            Event::SessionStarted(s) if !json => {
                out::line(&format!(
                    "session {} ({} catalog) in {}",
                    s.id, s.catalog, s.workspace
                ))?;
                if let Some(p) = s.parent {
                    out::line(&format!(
                        "  parent: {} at seq {} ({})",
                        p.session,
                        p.seq,
                        p.hash.short(12)
                    ))?;
                }
            }
            Event::UserMessage { text } if !json => {
                out::line(&format!("{:>6}  user: {text}", rec.seq))?
            }
            Event::ToolStarted {
                call, tool, input, ..
            } => {
                started.insert(call, (rec.seq, tool, input));
            }
            Event::ToolFinished(f) => {
                let (seq, tool, input) = started.remove(&f.call).unwrap_or((
                    rec.seq,
                    "?".into(),
                    serde_json::Value::Null,
                ));
                if json {
                    out::line(
                        &serde_json::json!({
                            "seq": seq, "call": f.call, "tool": tool, "status": f.status,
                            "elapsed_us": f.elapsed_us, "input": input, "output": f.output,
                            "refusal": f.refusal,
                        })
                        .to_string(),
                    )?;
                } else {
                    let summary = if f.status == Status::Ok {
                        cairn_replay::audit::input_summary(&input)
                    } else {
                        f.output.lines().next().unwrap_or("").to_string()
                    };
                    let summary: String = summary.chars().take(70).collect();
                    out::line(&format!(
                        "{seq:>6}  {tool:<22} {:<8} {:>9}  {summary}",
                        f.status.as_str(),
                        summary::elapsed(f.elapsed_us)
                    ))?;
                }
            }
            Event::SessionEnded { reason, .. } if !json => {
                out::line(&format!("{:>6}  ended: {reason}", rec.seq))?
            }
            _ => {}
        }
    }
    if !json {
        for (call, (seq, tool, _)) in started {
            out::line(&format!("{seq:>6}  {tool:<22} unfinished ({call})"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn tools(catalog: Option<Catalog>, json: bool, markdown: bool) -> Result<ExitCode> {
    if markdown {
        print!("{}", cairn_engine::catalog_markdown());
        return Ok(ExitCode::SUCCESS);
    }
    let catalogs = catalog.map_or(Catalog::ALL.to_vec(), |c| vec![c]);
    for c in catalogs {
        let r = Registry::new(c);
        if json {
            out::line(&serde_json::json!({"catalog": c.name(), "tools": r.to_json()}).to_string())?;
        } else {
            out::line(&format!("{}:", c.name()))?;
            for t in r.tools() {
                let first = t.description().split(". ").next().unwrap_or("");
                out::line(&format!("  {:<22} {first}", t.name()))?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn demo(dir: Option<&Path>) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let base = match dir {
        Some(d) => {
            if d.exists()
                && std::fs::read_dir(d)
                    .map(|mut e| e.next().is_some())
                    .unwrap_or(true)
            {
                anyhow::bail!(
                    "{} is not empty: give a new or empty folder for the demo",
                    d.display()
                );
            }
            d.to_path_buf()
        }
        None => {
            let stamp = cairn_engine::project::new_session_id();
            std::env::temp_dir().join(format!("cairn-demo-{stamp}"))
        }
    };
    eprintln!("sample projects in {}", base.display());
    let runs = cairn_engine::demo::run(&home, &base, |c, o| {
        eprintln!("{:<7}{}", c.name(), summary::progress(o));
    })?;
    out::line("")?;
    for r in &runs {
        let refused = r.outcomes.iter().filter(|o| o.status != Status::Ok).count();
        out::line(&format!(
            "{} session {}: {} calls ({} refused or failed), workspace {}",
            r.catalog.name(),
            r.session,
            r.outcomes.len(),
            refused,
            r.workspace.display()
        ))?;
    }
    out::line(&format!("data in {}", home.root.display()))?;
    out::line("next: cairn show last · cairn verify last · cairn log last · cairn sessions")?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn project_of(workspace: &Path) -> Result<cairn_engine::Project> {
    let root = workspace
        .canonicalize()
        .with_context(|| format!("workspace {}", workspace.display()))?;
    Ok(Home::from_env()?.project(&root))
}

pub fn allow_list(workspace: &Path, json: bool) -> Result<ExitCode> {
    let project = project_of(workspace)?;
    let audit = AllowList::new(&project.dir).audit()?;
    if let Some(r) = &audit.repaired {
        eprintln!(
            "cairn: note: the allow log ended in a torn record: {} bytes moved to {}",
            r.quarantined_bytes,
            r.quarantine_file
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string())
        );
    }
    if json {
        let refused: Vec<serde_json::Value> = audit
            .refused
            .iter()
            .map(|r| {
                let mut v = serde_json::json!(r);
                v["message"] = r.to_string().into();
                v
            })
            .collect();
        out::line(
            &serde_json::json!({
                "project": project.dir,
                "keys": audit.keys,
                "refused": refused,
                "repaired": audit.repaired,
            })
            .to_string(),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    if audit.keys.is_empty() {
        out::line("the allow list is empty")?;
    }
    for k in &audit.keys {
        out::line(k)?;
    }
    for r in &audit.refused {
        out::line(&format!("refused: {r}"))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn allow_reset(workspace: &Path) -> Result<ExitCode> {
    let project = project_of(workspace)?;
    AllowList::new(&project.dir)
        .with_signer(Home::from_env()?.log_signer()?)
        .reset()?;
    out::line("the allow list is empty now")?;
    Ok(ExitCode::SUCCESS)
}
