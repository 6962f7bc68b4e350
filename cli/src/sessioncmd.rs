//! The session verbs: `run --script`, `sessions`, `show`, `tools`, `demo`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use cairn_cli::summary;
use cairn_engine::event::{Answer, Status};
use cairn_engine::event::{Enforcement, Feature, SandboxMode, Sandboxed};
use cairn_engine::permission::{AllowList, Approver, Policy, Request};
use cairn_engine::settings::{self, Settings};
use cairn_engine::{CallOutcome, Catalog, Engine, EngineConfig, Home, Registry, script};

use crate::out;

/// Prints a call's progress line as it ends (after what its command printed that is
/// not yet out): wrapped to the width of a terminal, whole on a file or a pipe.
pub(crate) fn print_progress(o: &CallOutcome) {
    flush_output();
    let line = summary::progress(o);
    match terminal_columns() {
        Some(width) => out::note(&summary::wrap(
            &line,
            width,
            summary::PROGRESS_INDENT_COLUMNS,
        )),
        None => out::note(&line),
    }
}

/// The width of the terminal standard error goes to, if it goes to one.
fn terminal_columns() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    crossterm::terminal::size()
        .ok()
        .map(|(w, _)| usize::from(w))
        .filter(|&w| w > 0)
}

/// What the running command printed since its last whole line.
static OUTPUT_PENDING: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());

/// The prefix of a running command's output lines on standard error.
const OUTPUT_PREFIX: &str = "  │ ";

/// The longest piece of a line held back waiting for its end, in bytes: a longer
/// one is printed as it is (a line that never ends is not held forever).
const OUTPUT_PENDING_BYTES_MAX: usize = 64 * 1024;

/// Prints what a running command prints, line by line as the lines come, on standard
/// error under [`OUTPUT_PREFIX`] (plain `run` and `run --script`: the output reaches
/// the person before the command ends). Its stdout and stderr come from their own
/// threads; each piece goes in whole, so a line may hold the end of one stream and
/// the start of the other only when a command writes partial lines to both at once.
pub(crate) fn stream_output(engine: &mut Engine) {
    engine.set_output_observer(std::sync::Arc::new(|piece: &[u8]| {
        let mut pending = OUTPUT_PENDING.lock().unwrap_or_else(|e| e.into_inner());
        pending.extend_from_slice(piece);
        if let Some(lines) = whole_lines(&mut pending) {
            print_lines(&lines);
        }
    }));
}

/// What of `pending` goes out now: up to its last line end, or all of it once it holds
/// more than [`OUTPUT_PENDING_BYTES_MAX`] bytes of a line with no end yet.
fn whole_lines(pending: &mut Vec<u8>) -> Option<Vec<u8>> {
    let whole = match memchr_last(pending) {
        Some(i) => i + 1,
        None if pending.len() > OUTPUT_PENDING_BYTES_MAX => pending.len(),
        None => return None,
    };
    Some(pending.drain(..whole).collect())
}

/// Prints what is held of a line with no end yet (the command ended).
fn flush_output() {
    let rest: Vec<u8> =
        std::mem::take(&mut *OUTPUT_PENDING.lock().unwrap_or_else(|e| e.into_inner()));
    if !rest.is_empty() {
        print_lines(&rest);
    }
}

fn print_lines(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for l in text.lines() {
        out::note(&format!("{OUTPUT_PREFIX}{l}"));
    }
}

fn memchr_last(bytes: &[u8]) -> Option<usize> {
    bytes.iter().rposition(|&b| b == b'\n')
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
    /// TCP refused by Landlock, every socket but a Unix one by seccomp) or off
    /// (default: the configuration's `sandbox`, else workspace-write).
    #[arg(long)]
    pub sandbox: Option<SandboxMode>,
    /// A folder commands may also write in (a build tool's cache such as
    /// ~/.cargo/registry); repeat it for more.
    #[arg(long = "sandbox-write-root", value_name = "DIR")]
    pub sandbox_write_roots: Vec<PathBuf>,
}

impl SandboxArgs {
    /// What the flags set, as a layer of settings.
    pub fn settings(&self) -> Settings {
        Settings {
            sandbox: self.sandbox,
            sandbox_write_roots: (!self.sandbox_write_roots.is_empty())
                .then(|| self.sandbox_write_roots.clone()),
            ..Settings::default()
        }
    }
}

pub(crate) use cairn_cli::live_export::project_for;

/// The settings in force: `flags` over the environment over the project's
/// configuration file over the user's over the defaults.
pub(crate) fn effective(
    home: &Home,
    project: Option<&cairn_engine::Project>,
    flags: &Settings,
) -> Result<Settings> {
    let files = settings::Files::load(home, project)?;
    let (s, _) = settings::resolve(flags, &files, |k| std::env::var(k).ok())?;
    Ok(s)
}

/// A session's configuration from the settings in force.
pub(crate) fn engine_config(s: &Settings) -> Result<EngineConfig> {
    let mut config = EngineConfig::new(s.catalog.unwrap_or(Catalog::Thoth));
    s.apply(&mut config)?;
    Ok(config)
}

/// Says once, on stderr, when the sandbox asked for is not (or only partly) enforced,
/// naming each part this kernel lacks.
pub fn note_sandbox(s: &Sandboxed) {
    if s.mode == SandboxMode::Off {
        return;
    }
    let lacking: Vec<&str> = s
        .features
        .iter()
        .flat_map(|f| {
            [
                ("filesystem rules", f.filesystem),
                ("TCP rules", f.tcp),
                ("socket filter", f.sockets),
                ("io_uring filter", f.io_uring),
                ("signal scope", f.signals),
                ("abstract Unix socket scope", f.abstract_unix),
            ]
        })
        .filter(|(_, f)| matches!(f, Feature::Missing | Feature::Partial))
        .map(|(name, _)| name)
        .collect();
    match s.enforced {
        Enforcement::None => eprintln!(
            "warning: this kernel has no Landlock: commands run without the sandbox ({}); the log records it",
            s.mode
        ),
        _ if !lacking.is_empty() => eprintln!(
            "note: the sandbox ({}) is only partly enforced: this kernel (Landlock ABI {}) lacks {}; the log records it",
            s.mode,
            s.abi,
            lacking.join(", ")
        ),
        Enforcement::Partial => eprintln!(
            "note: the sandbox ({}) is only partly enforced: this kernel's Landlock ABI is {}",
            s.mode, s.abi
        ),
        Enforcement::Full => {}
    }
}

pub use cairn_cli::hook::Approve;

/// Asks on the terminal, showing exactly what is being allowed; denies when there is
/// no terminal (or the output is the `--json` stream, which a prompt must not
/// interleave with), saying how to allow.
pub(crate) struct TerminalApprover {
    /// False with `--json`: never prompt.
    pub prompt: bool,
}

impl Approver for TerminalApprover {
    fn answer(&mut self, r: &Request) -> (Answer, bool) {
        use std::io::{IsTerminal, Write};
        if !self.prompt {
            out::note(&format!(
                "cairn: {} needs permission for {} and --json does not ask on the terminal: denied (use --approve always, or \"approve\" in the script step)",
                r.call, r.key
            ));
            return (Answer::Deny, false);
        }
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
    flags: &Settings,
    approve: Approve,
    json: bool,
) -> Result<ExitCode> {
    let home = crate::searchcmd::indexing_home()?;
    let config = engine_config(&effective(
        &home,
        project_for(&home, workspace).as_ref(),
        flags,
    )?)?;
    let text = std::fs::read_to_string(script_path)
        .with_context(|| format!("cannot read script {}", script_path.display()))?;
    let steps = script::parse(&text)?;
    {
        use std::io::IsTerminal;
        // On a terminal, the live view.
        if !json && std::io::stdout().is_terminal() && std::io::stdin().is_terminal() {
            let policy = match approve {
                Approve::Ask => None,
                Approve::Always => Some(Policy::AllowAll),
                Approve::Never => Some(Policy::DenyAll),
            };
            return crate::livecmd::run(steps, workspace, config, policy);
        }
    }
    let mut engine = Engine::start(&home, workspace, config)?;
    engine.set_approver(approver(approve, json));
    let stream = json.then(|| start_stream(&mut engine, None));
    if !json {
        stream_output(&mut engine);
    }
    note_refused_grants(&engine);
    note_sandbox(engine.sandbox());
    let id = engine.id().to_string();
    if let Err(e) = script::run(&mut engine, &steps, print_progress) {
        // As without --json: an engine error is fatal and the session is not ended.
        if let Some(s) = &stream {
            s.error(&e.to_string());
        }
        return Err(e.into());
    }
    let reason = end_reason(&engine, "script finished");
    engine.end(&reason)?;
    if stream.is_none() {
        out::line(&id)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What `cairn run TASK` is given.
pub struct TaskArgs {
    pub task: String,
    pub workspace: PathBuf,
    /// The settings the flags give (provider, model, catalog, limits, …).
    pub flags: Settings,
    pub approve: Approve,
    pub no_stream: bool,
    /// The `--json` event stream instead of the answer and the id.
    pub json: bool,
}

/// Sets `engine`'s observer to a new `--json` stream, and says the session started.
pub(crate) fn start_stream(
    engine: &mut Engine,
    resume: Option<serde_json::Value>,
) -> crate::stream::Stream {
    let stream = crate::stream::Stream::default();
    engine.set_observer(stream.observer());
    stream.started(engine.id(), &engine.root().to_string_lossy(), resume);
    stream
}

/// A model provider built from the flags and the environment (shared by `run TASK`
/// and `resume --provider`), with the key it uses.
pub struct Model {
    pub provider: Box<dyn cairn_engine::provider::Provider + Send>,
    pub(crate) key: cairn_engine::provider::Secret,
    pub(crate) key_var: String,
    /// What the session's configuration records about it (never the key).
    pub setting: cairn_engine::ModelSetting,
    /// How it was built: `/model` in the chat builds another with a different model.
    pub(crate) built: (
        cairn_engine::provider::Kind,
        cairn_engine::provider::Overrides,
    ),
}

impl Model {
    /// The provider the settings name (their provider, model, base URL and key variable).
    pub fn from_settings(s: &Settings, no_stream: bool) -> Result<Model> {
        Model::build(
            s.provider.unwrap_or(cairn_engine::provider::Kind::Openai),
            &cairn_engine::provider::Overrides {
                base_url: s.base_url.clone(),
                model: s.model.clone(),
                api_key_env: s.api_key_env.clone(),
                stream: Some(!no_stream),
            },
        )
    }

    pub fn build(
        kind: cairn_engine::provider::Kind,
        overrides: &cairn_engine::provider::Overrides,
    ) -> Result<Model> {
        use cairn_engine::provider::ProviderConfig;
        let pc = ProviderConfig::from_env(kind, overrides, |k| std::env::var(k).ok())?;
        let key = pc.api_key.clone();
        let key_var = pc.key_var.clone();
        let base_url = pc.base_url.clone();
        let provider = pc.build()?;
        let setting = cairn_engine::ModelSetting {
            provider: provider.name().to_string(),
            model: provider.model().to_string(),
            base_url,
        };
        Ok(Model {
            provider,
            key,
            key_var,
            setting,
            built: (kind, overrides.clone()),
        })
    }

    /// Runs the agent loop in `engine` (after `task`, when given), ends the session
    /// and prints the answer and the session id. The key is registered as a secret
    /// first, so it never reaches the log, and scrubbed from errors.
    /// A model turn being awaited is given up when a signal stops the session.
    pub fn drive(
        self,
        mut engine: Engine,
        task: Option<&str>,
        turns_max: u32,
        stream: Option<crate::stream::Stream>,
    ) -> Result<ExitCode> {
        use cairn_engine::agent::{self, Step};
        use cairn_engine::provider::Provider as _;
        let Model {
            provider,
            key,
            key_var,
            ..
        } = self;
        if let Some(k) = key.expose() {
            engine.add_secret(&key_var, k);
        }
        if stream.is_none() {
            stream_output(&mut engine);
        }
        let id = engine.id().to_string();
        let cfg = agent::AgentConfig {
            turns_max,
            system: None,
        };
        let mut provider = agent::Interruptible::new(provider, engine.cancel_handle());
        // Each retry is said as it happens: an unreachable provider is not silence;
        // the `--json` stream gets the model's text as it streams.
        let scrub = key.clone();
        let deltas = stream.clone();
        provider.set_progress(Some(std::sync::Arc::new(
            move |p: &cairn_engine::provider::Progress| match p {
                cairn_engine::provider::Progress::Retry { .. } => {
                    out::note(&format!("cairn: provider: {}", scrub.scrub(&p.to_string())))
                }
                cairn_engine::provider::Progress::Text(t) => {
                    if let Some(s) = &deltas {
                        s.text_delta(&scrub.scrub(t));
                    }
                }
            },
        )));
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
                    // Nothing interrupts a turn here (only the chat has the handle).
                    agent::Stop::Interrupted => "interrupted".to_string(),
                };
                engine.end(&reason)?;
                if stream.is_some() {
                    if run.stop == agent::Stop::TurnLimit {
                        out::note(&format!(
                            "cairn: stopped at the turn limit ({turns_max} turns): raise --turns-max, or resume"
                        ));
                    }
                    return Ok(ExitCode::SUCCESS);
                }
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
                if let Some(s) = &stream {
                    s.error(&msg);
                }
                // A provider that failed (not one given up on at a signal) fails the
                // session.
                if let agent::AgentError::Provider(pe) = &e
                    && engine.stopped().is_none()
                {
                    engine
                        .end_failed(&format!("provider failed: {}", key.scrub(&pe.to_string())))?;
                } else {
                    let reason = end_reason(&engine, &format!("stopped: {msg}"));
                    engine.end(&reason)?;
                }
                let msg = cairn_cli::hint::with_hint(msg, &e);
                Err(anyhow::anyhow!("{msg} (session {id})"))
            }
        }
    }
}

pub fn run_task(a: &TaskArgs) -> Result<ExitCode> {
    let home = crate::searchcmd::indexing_home()?;
    let s = effective(&home, project_for(&home, &a.workspace).as_ref(), &a.flags)?;
    let model = Model::from_settings(&s, a.no_stream)?;
    let mut config = engine_config(&s)?;
    config.model = Some(model.setting.clone());
    let turns_max = s
        .turns_max
        .unwrap_or(cairn_engine::agent::TURNS_MAX_DEFAULT);
    let mut engine = Engine::start(&home, &a.workspace, config)?;
    engine.set_approver(approver(a.approve, a.json));
    let stream = a.json.then(|| start_stream(&mut engine, None));
    out::note(&format!("session {}", engine.id()));
    note_refused_grants(&engine);
    note_sandbox(engine.sandbox());
    model.drive(engine, Some(&a.task), turns_max, stream)
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

/// The approver `--approve` names; with `--json`, `ask` never prompts.
pub(crate) fn approver(approve: Approve, json: bool) -> Box<dyn Approver> {
    match approve {
        Approve::Ask => Box::new(TerminalApprover { prompt: !json }),
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
    if json {
        // One array, `[]` when there is nothing.
        out::line(&serde_json::to_string(&facts)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    for f in &facts {
        out::line(&format!("{:>3}. {}", f.n, f.text))?;
    }
    if facts.is_empty() {
        eprintln!("no facts remembered for {}", ws.display());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn memory_forget(workspace: &Path, n: usize, json: bool) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let ws = workspace.canonicalize().unwrap_or(workspace.to_path_buf());
    let f = cairn_engine::memory::ProjectMemory::new(&home.project(&ws).dir).forget(n)?;
    let text = cairn_engine::redact::Redactor::with_env(std::env::vars())
        .redact(&f.text, &mut Default::default())
        .into_owned();
    if json {
        out::line(&serde_json::json!({"forgot": {"n": n, "text": text}}).to_string())?;
    } else {
        out::line(&format!("forgot: {text}"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// How a command that prints data prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    /// One JSON document (what `jq` reads whole).
    Json,
    /// JSON Lines: one object per line, as it comes.
    Jsonl,
}

impl Format {
    /// From the `--json` and `--jsonl` flags (clap makes them exclusive).
    pub fn of(json: bool, jsonl: bool) -> Format {
        match (json, jsonl) {
            (_, true) => Format::Jsonl,
            (true, false) => Format::Json,
            (false, false) => Format::Text,
        }
    }
}

pub fn sessions(format: Format, gone_too: bool) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let mut all = Vec::new();
    // Sessions a crash left without a record (by a cairn before sessions were born
    // whole): not listed, named in a note.
    let mut never_started = Vec::new();
    for p in home.projects() {
        for id in p.sessions() {
            all.push(p.session_dir(&id));
        }
        never_started.extend(p.never_started().iter().map(|id| p.session_dir(id)));
    }
    all.sort_by(|a, b| b.file_name().cmp(&a.file_name()));
    if all.is_empty() && format == Format::Text {
        out::line(&format!(
            "no sessions in {} yet (cairn demo, cairn run TASK or cairn chat start one)",
            home.root.display()
        ))?;
    }
    // Each session's shortest unique name (its random suffix), which every verb takes.
    let ids: Vec<String> = all
        .iter()
        .map(|d| {
            d.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    let shorts = cairn_engine::short_ids(&ids);
    let mut rows = Vec::new();
    let mut gone_replays = 0u64;
    for (dir, short) in all.into_iter().zip(shorts) {
        let s = match cairn_replay::summarise(&dir) {
            // Nothing but zero bytes (or a first line cut short): it never started.
            Ok(s) if s.records == 0 => {
                never_started.push(dir);
                continue;
            }
            Ok(s) => s,
            Err(e) => {
                out::note(&format!(
                    "cairn: {}: {}",
                    dir.display(),
                    cairn_cli::hint::text(&e)
                ));
                continue;
            }
        };
        // A replay ran in a copy of the workspace, gone once it ended: not listed
        // unless asked for.
        if s.replay && !gone_too && !Path::new(&s.workspace).exists() {
            gone_replays += 1;
            continue;
        }
        let row = || {
            serde_json::json!({
                "id": s.id, "short": short, "dir": s.dir, "workspace": s.workspace, "catalog": s.catalog,
                "started": s.started, "records": s.records, "calls": s.calls, "state": s.state,
                "task": s.task, "parent": s.parent,
            })
        };
        match format {
            Format::Json => rows.push(row()),
            Format::Jsonl => out::line(&row().to_string())?,
            Format::Text => out::line(&summary::session_line(&s, &short))?,
        }
    }
    if format == Format::Json {
        out::line(&serde_json::Value::Array(rows).to_string())?;
    }
    if gone_replays > 0 {
        out::note(&format!(
            "cairn: note: {} whose workspace copy is gone not listed (--all lists {})",
            cairn_cli::summary::count(gone_replays, "replay"),
            if gone_replays == 1 { "it" } else { "them" }
        ));
    }
    if !never_started.is_empty() {
        never_started.sort();
        let n = never_started.len() as u64;
        out::note(&format!(
            "cairn: note: {} never started, left without a record by a cairn killed as it created {}: not listed, nothing to resume; remove {}",
            cairn_cli::summary::count(n, "session"),
            if n == 1 { "it" } else { "them" },
            never_started
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// The prices `show` and `audit` use, and where they come from: those of `--prices
/// FILE` when given, else the `[prices."MODEL"]` tables of the configuration files (the
/// user's and the session's project's); none when neither has any.
pub(crate) fn prices_for(
    dir: &Path,
    file: Option<&Path>,
) -> Result<Option<(String, std::collections::BTreeMap<String, summary::Price>)>> {
    if let Some(p) = file {
        let prices = cairn_replay::audit::read_prices(p)?;
        return Ok(Some((p.display().to_string(), prices)));
    }
    let home = Home::from_env()?;
    // A session's folder is `<project>/sessions/<id>`.
    let project = dir
        .parent()
        .and_then(Path::parent)
        .map(|d| cairn_engine::Project {
            dir: d.to_path_buf(),
        });
    let files = settings::Files::load(&home, project.as_ref())?;
    let (s, _) = settings::resolve(&Settings::default(), &files, |_| None)?;
    Ok(s.prices.map(|p| {
        (
            "the configuration's [prices] (cairn config shows them)".to_string(),
            summary::prices_of(&p),
        )
    }))
}

/// Prices the audit `a` with `prices` (see [`prices_for`]), noting each model they
/// have no price for.
pub(crate) fn priced(
    a: &mut cairn_replay::audit::Audit,
    prices: Option<&(String, std::collections::BTreeMap<String, summary::Price>)>,
) {
    let Some((from, prices)) = prices else {
        return;
    };
    a.price(prices);
    for model in a.cost.iter().flat_map(|c| &c.unpriced) {
        out::note(&format!(
            "cairn: note: {from} has no price for model {model} (its cost is left out)"
        ));
    }
}

/// `cairn show`: the conversation, then the totals. A log that does not verify is
/// shown from its intact records, with a note.
pub fn show(spec: &str, format: Format, verbose: bool, prices: Option<&Path>) -> Result<ExitCode> {
    let dir = crate::locate::session_dir(spec)?;
    let prices = prices_for(&dir, prices)?;
    let session = match cairn_replay::Session::load(&dir) {
        Ok(s) => s,
        Err(e) => {
            let s = cairn_replay::Session::load_intact(&dir).with_context(|| e.to_string())?;
            out::note(&format!(
                "cairn: note: the log does not verify ({e}); its intact records are shown (cairn verify lists what is wrong)"
            ));
            s
        }
    };
    let mut a = cairn_replay::audit::transcript(&session);
    priced(&mut a, prices.as_ref());
    let costs: Vec<Option<f64>> = a
        .tokens
        .iter()
        .map(|t| {
            a.cost
                .as_ref()
                .and_then(|c| c.models.get(&t.model).copied())
        })
        .collect();
    let total_cost: Option<f64> = a.cost.as_ref().map(|c| c.total);
    if format != Format::Text {
        show_json(&a, &costs, total_cost, format)?;
        return Ok(ExitCode::SUCCESS);
    }
    show_text(&a, &costs, total_cost, verbose)?;
    Ok(ExitCode::SUCCESS)
}

/// `cairn show --json` or `--jsonl`: each step of the conversation, then the totals.
fn show_json(
    a: &cairn_replay::audit::Audit,
    costs: &[Option<f64>],
    total_cost: Option<f64>,
    format: Format,
) -> Result<()> {
    use cairn_replay::audit::Turn;
    let calls: std::collections::HashMap<&str, &cairn_replay::audit::CallEntry> =
        a.calls.iter().map(|c| (c.call.as_str(), c)).collect();
    let mut steps = Vec::new();
    for t in &a.conversation {
        let v = match t {
            Turn::Call { call, .. } => match calls.get(call.as_str()) {
                Some(c) => {
                    let mut v = serde_json::to_value(c)?;
                    v["kind"] = "call".into();
                    v
                }
                None => continue,
            },
            other => serde_json::to_value(other)?,
        };
        match format {
            Format::Jsonl => out::line(&v.to_string())?,
            _ => steps.push(v),
        }
    }
    let tokens: Vec<serde_json::Value> = a
        .tokens
        .iter()
        .zip(costs)
        .map(|(t, c)| {
            let mut v = serde_json::to_value(t).unwrap_or_default();
            if let Some(c) = c {
                v["cost"] = (*c).into();
            }
            v
        })
        .collect();
    let totals = serde_json::json!({
        "kind": "totals",
        "session": a.header.session,
        "state": a.header.end_state,
        "calls": a.calls_by_status,
        "models": a.header.models,
        "tokens": tokens,
        "wall_ms": a.header.duration_ms,
        "cost": total_cost,
        "answer": a.answer,
    });
    match format {
        Format::Jsonl => out::line(&totals.to_string())?,
        _ => out::line(
            &serde_json::json!({"session": a.header.session, "steps": steps, "totals": totals})
                .to_string(),
        )?,
    }
    Ok(())
}

/// `cairn show`: the header, the conversation, then the totals.
fn show_text(
    a: &cairn_replay::audit::Audit,
    costs: &[Option<f64>],
    total_cost: Option<f64>,
    verbose: bool,
) -> Result<()> {
    let paint = cairn_cli::paint::Paint::stdout();
    let h = &a.header;
    // An imported session, or one recorded through an agent's hooks, offered no
    // catalogue: it says which agent it is of.
    let what = match (&a.imported, &h.hooked) {
        (Some(i), _) => format!("imported from {}", i.agent_name()),
        (None, Some(agent)) => format!("recorded from {agent} through its hooks"),
        (None, None) => format!("{} catalog", h.catalog),
    };
    out::line(&format!(
        "session {} ({what}) in {}",
        h.session, h.workspace
    ))?;
    if let Some(p) = &h.parent {
        out::line(&format!(
            "  parent: {} at seq {} ({})",
            p.session,
            p.seq,
            &p.hash[..12.min(p.hash.len())]
        ))?;
    }
    for m in cairn_cli::report::models(a) {
        out::line(&format!("  model: {m}"))?;
    }
    for l in cairn_cli::report::conversation_text(a, verbose, paint) {
        out::line(&l)?;
    }
    out::line("")?;
    let mut st = h.end_state.as_str().to_string();
    if let Some(r) = &h.end_reason {
        st.push_str(&format!(": {r}"));
    }
    out::line(&format!("{} {st}", paint.bold("state    ")))?;
    let total: u64 = a.calls_by_status.values().sum();
    let parts = cairn_cli::report::calls_by_status(a);
    out::line(&format!(
        "{} {}{}",
        paint.bold("calls    "),
        summary::count(total, "call"),
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    ))?;
    for (t, c) in a.tokens.iter().zip(costs) {
        out::line(&format!(
            "{} {}{}",
            paint.bold("tokens   "),
            cairn_cli::report::tokens_line(t),
            c.map_or(String::new(), |c| format!(", ${c:.4}"))
        ))?;
    }
    out::line(&format!(
        "{} {}",
        paint.bold("wall time"),
        summary::elapsed(h.duration_ms * 1000)
    ))?;
    if let Some(c) = total_cost {
        out::line(&format!("{} ${c:.4}", paint.bold("cost     ")))?;
    }
    Ok(())
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

pub fn demo(dir: Option<&Path>, json: bool) -> Result<ExitCode> {
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
    if json {
        let sessions: Vec<serde_json::Value> = runs
            .iter()
            .map(|r| {
                serde_json::json!({
                    "catalog": r.catalog.name(), "session": r.session,
                    "calls": r.outcomes.len(),
                    "refused": r.outcomes.iter().filter(|o| o.status != Status::Ok).count(),
                    "workspace": r.workspace,
                })
            })
            .collect();
        out::line(
            &serde_json::json!({"sessions": sessions, "home": home.root, "dir": base}).to_string(),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    out::line("")?;
    for r in &runs {
        let refused = r.outcomes.iter().filter(|o| o.status != Status::Ok).count();
        out::line(&format!(
            "{} session {}: {} ({} refused or failed), workspace {}",
            r.catalog.name(),
            r.session,
            summary::count(r.outcomes.len() as u64, "call"),
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

pub fn allow_reset(workspace: &Path, json: bool) -> Result<ExitCode> {
    let project = project_of(workspace)?;
    let keys = AllowList::new(&project.dir)
        .with_signer(Home::from_env()?.log_signer()?)
        .reset()?;
    if json {
        out::line(&serde_json::json!({"keys": keys}).to_string())?;
    } else {
        out::line("the allow list is empty now")?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn allow_revoke(workspace: &Path, key: &str, json: bool) -> Result<ExitCode> {
    let project = project_of(workspace)?;
    let keys = AllowList::new(&project.dir)
        .with_signer(Home::from_env()?.log_signer()?)
        .revoke(key)?;
    if json {
        out::line(&serde_json::json!({"revoked": key, "keys": keys}).to_string())?;
    } else {
        out::line(&format!(
            "revoked {key}: {} key{} left on the allow list",
            keys.len(),
            if keys.len() == 1 { "" } else { "s" }
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whole lines go out at once; a line with no end waits, up to the pending limit
    /// (at it: held; one byte past it: out).
    #[test]
    fn whole_lines_go_out_and_an_unended_line_waits_up_to_its_limit() {
        let mut p = b"one\ntwo\nthr".to_vec();
        assert_eq!(whole_lines(&mut p), Some(b"one\ntwo\n".to_vec()));
        assert_eq!(p, b"thr");
        let mut at = vec![b'x'; OUTPUT_PENDING_BYTES_MAX];
        assert_eq!(whole_lines(&mut at), None);
        assert_eq!(at.len(), OUTPUT_PENDING_BYTES_MAX);
        let mut past = vec![b'x'; OUTPUT_PENDING_BYTES_MAX + 1];
        assert_eq!(
            whole_lines(&mut past).map(|l| l.len()),
            Some(OUTPUT_PENDING_BYTES_MAX + 1)
        );
        assert!(past.is_empty());
    }
}
