//! `cairn archive run|runs|report` and `cairn worker`: runs of jobs over archived
//! sessions, spread over workers on any number of machines. The queue is
//! `cairn_archive::queue` and the worker's loop `cairn_archive::worker`; a job's work is
//! `cairn_replay::batch`'s. This file picks sessions, prints, and ties them together.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use cairn_archive::queue::{Job, NewRun, RunReport, RunRow};
use cairn_archive::worker::{JobOutput, WorkerOptions, WorkerStats};
use cairn_cli::summary::count;
use cairn_replay::ShellMode;
use cairn_replay::batch;

use crate::archivecmd::connect;
use crate::out;

pub struct RunArgs<'a> {
    pub kind: &'a str,
    pub sessions: &'a [String],
    pub project: Option<&'a str>,
    pub since: Option<&'a str>,
    pub model: Option<&'a str>,
    pub name: Option<&'a str>,
    pub attempts_max: u32,
    pub json: bool,
}

/// `cairn archive run`: one job per session; prints the run's id.
pub fn run(a: &RunArgs<'_>) -> Result<ExitCode> {
    let mut archive = connect(None)?;
    let since = a
        .since
        .map(|d| {
            batch::since_prefix(d)
                .ok_or_else(|| anyhow!("--since {d}: not a date (2026-11-30, or 2026-11-30T12:00)"))
        })
        .transpose()?;
    let ids: Vec<String> = if a.sessions.is_empty() {
        let mut listed = archive.list(a.project)?;
        listed.retain(|l| since.as_deref().is_none_or(|p| l.id.as_str() >= p));
        listed.into_iter().map(|l| l.id).collect()
    } else {
        let mut ids = Vec::new();
        for s in a.sessions {
            let (id, _) = archive.resolve(s)?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids
    };
    if ids.is_empty() {
        return Err(anyhow!(
            "no archived session to run on (cairn archive list shows them)"
        ));
    }
    let id = archive.create_run(
        &NewRun {
            kind: a.kind,
            name: a.name,
            model: a.model,
            attempts_max: a.attempts_max,
        },
        &ids,
    )?;
    if a.json {
        out::line(&serde_json::json!({ "run": id, "jobs": ids.len() }).to_string())?;
    } else {
        out::line(&id.to_string())?;
        out::note(&format!(
            "run {id}: {} queued; start workers with `cairn worker`",
            count(ids.len() as u64, "job")
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn run_line(r: &RunRow) -> String {
    format!(
        "{}\t{}\t{}\t{} jobs: {} queued, {} running, {} done, {} failed\t{}",
        r.id,
        r.kind,
        r.created,
        r.jobs,
        r.queued,
        r.running,
        r.done,
        r.failed,
        r.name.as_deref().unwrap_or("")
    )
}

/// `cairn archive runs`.
pub fn runs(json: bool) -> Result<ExitCode> {
    let rows = connect(None)?.runs()?;
    if json {
        out::line(&serde_json::to_string(&rows)?)?;
    } else {
        for r in &rows {
            out::line(&run_line(r))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cairn archive report RUN`. Exit 0 when every job is done identical or clean, 1
/// otherwise (jobs still open, divergences, problems, failures).
pub fn report(run: i64, html: Option<&Path>, json: bool) -> Result<ExitCode> {
    let r = connect(None)?.report(run)?;
    if let Some(path) = html {
        std::fs::write(path, render_html(&r).into_string())
            .with_context(|| format!("write {}", path.display()))?;
    }
    if json {
        out::line(&serde_json::to_string(&r)?)?;
    } else if html.is_none() {
        for l in text_lines(&r) {
            out::line(&l)?;
        }
    }
    let good = r.run.queued + r.run.running == 0
        && r.outcomes.keys().all(|o| o == "identical" || o == "clean");
    Ok(if good {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn text_lines(r: &RunReport) -> Vec<String> {
    let mut v = vec![run_line(&r.run)];
    v.push(format!(
        "outcomes: {}",
        r.outcomes
            .iter()
            .map(|(o, n)| format!("{n} {o}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if !r.divergences.is_empty() {
        v.push("divergences by tool and field:".into());
        for g in &r.divergences {
            v.push(format!(
                "  {} {}: {} in {} (e.g. {})",
                g.tool,
                g.field,
                count(g.divergences, "divergence"),
                count(g.sessions, "session"),
                g.examples.join(", ")
            ));
        }
    }
    for (s, why) in &r.failures {
        v.push(format!("  {s}: {why}"));
    }
    if !r.slower.is_empty() {
        v.push("slower than recorded:".into());
        for s in &r.slower {
            v.push(format!(
                "  {}: {} µs recorded, {} µs now",
                s.session, s.recorded_us, s.now_us
            ));
        }
    }
    v.push("workers:".into());
    for w in &r.workers {
        v.push(format!(
            "  {}: {}, {:.2} jobs/s",
            w.worker,
            count(w.jobs, "job"),
            w.jobs_per_s
        ));
    }
    v
}

fn render_html(r: &RunReport) -> maud::Markup {
    use maud::html;
    html! {
        (maud::DOCTYPE)
        html {
            head { meta charset="utf-8"; title { "cairn run " (r.run.id) } }
            body {
                h1 { "Run " (r.run.id) " (" (r.run.kind) ")" }
                p { (run_line(&r.run)) }
                h2 { "Outcomes" }
                table { @for (o, n) in &r.outcomes { tr { td { (o) } td { (n) } } } }
                h2 { "Divergences by tool and field" }
                table {
                    tr { th { "tool" } th { "field" } th { "divergences" } th { "sessions" } th { "examples" } }
                    @for g in &r.divergences {
                        tr { td { (g.tool) } td { (g.field) } td { (g.divergences) } td { (g.sessions) } td { (g.examples.join(", ")) } }
                    }
                }
                h2 { "Failures" }
                table { @for (s, why) in &r.failures { tr { td { (s) } td { (why) } } } }
                h2 { "Slower than recorded" }
                table { @for s in &r.slower { tr { td { (s.session) } td { (s.recorded_us) " µs" } td { (s.now_us) " µs" } } } }
                h2 { "Workers" }
                table { @for w in &r.workers { tr { td { (w.worker) } td { (w.jobs) } td { (format!("{:.2} jobs/s", w.jobs_per_s)) } } } }
            }
        }
    }
}

pub struct WorkArgs {
    pub jobs: usize,
    pub lease_ms: u64,
    pub poll_ms: u64,
    pub exit_when_idle: bool,
    pub shell: ShellMode,
    pub json: bool,
}

/// The job's work on the pulled session at `dir`; a rerun's model comes from
/// `settings`, the worker's settings in force, unless the run names one.
fn run_job(
    job: &Job,
    dir: &Path,
    shell: ShellMode,
    settings: &cairn_engine::settings::Settings,
) -> JobOutput {
    let o = match job.kind.as_str() {
        "replay" => batch::replay_outcome(dir, shell),
        "verify" => batch::verify_outcome(dir),
        "rerun" => {
            let start = std::time::Instant::now();
            // The run's model over the worker's settings (environment, configuration).
            let settings = cairn_engine::settings::Settings {
                model: job.model.clone().or_else(|| settings.model.clone()),
                ..settings.clone()
            };
            batch::SessionOutcome {
                session: job.session.clone(),
                outcome: match crate::reruncmd::what_if(dir, None, &settings) {
                    Ok(r) => batch::outcome_of_what_if(&r),
                    Err(e) => batch::Outcome::CouldNotRun {
                        error: format!("{e:#}"),
                    },
                },
                elapsed_ms: start.elapsed().as_millis() as u64,
                calls_us: None,
            }
        }
        other => batch::SessionOutcome {
            session: job.session.clone(),
            outcome: batch::Outcome::CouldNotRun {
                error: format!("this worker cannot run {other} jobs"),
            },
            elapsed_ms: 0,
            calls_us: None,
        },
    };
    let value = serde_json::to_value(&o).unwrap_or_else(
        |e| serde_json::json!({ "outcome": "could_not_run", "error": e.to_string() }),
    );
    (o.outcome.as_str().to_string(), value)
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// `cairn worker`: `jobs` workers in this process, each on connections of its own.
pub fn work(a: &WorkArgs) -> Result<ExitCode> {
    let url = crate::archivecmd::url(None)?;
    let settings =
        crate::sessioncmd::effective(&cairn_engine::Home::from_env()?, None, &Default::default())?;
    let base = format!("{}:{}", host(), std::process::id());
    let results: Vec<Result<WorkerStats, cairn_archive::ArchiveError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..a.jobs.max(1))
            .map(|i| {
                let opts = WorkerOptions {
                    name: if a.jobs > 1 {
                        format!("{base}:{i}")
                    } else {
                        base.clone()
                    },
                    lease_ms: a.lease_ms,
                    poll_ms: a.poll_ms,
                    exit_when_idle: a.exit_when_idle,
                    jobs_max: None,
                    reconnect_ms_max: 10_000,
                };
                let url = &url;
                let shell = a.shell;
                let settings = &settings;
                s.spawn(move || {
                    cairn_archive::worker::work(
                        url,
                        &opts,
                        &mut |job, dir| run_job(job, dir, shell, settings),
                        &mut |m| out::note(&format!("worker {}: {m}", opts.name)),
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(cairn_archive::ArchiveError::Local(
                        "a worker thread panicked".into(),
                    ))
                })
            })
            .collect()
    });
    let mut total = WorkerStats::default();
    for r in results {
        let s = r?;
        total.jobs += s.jobs;
        total.abandoned += s.abandoned;
        total.reconnects += s.reconnects;
        total.phases.add(&s.phases);
    }
    if a.json {
        out::line(&serde_json::to_string(&total)?)?;
    } else {
        out::note(&format!(
            "{} done, {} abandoned, {} reconnects",
            count(total.jobs, "job"),
            total.abandoned,
            total.reconnects
        ));
    }
    Ok(ExitCode::SUCCESS)
}
