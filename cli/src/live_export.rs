//! The live OpenTelemetry export the commands that write sessions give their home
//! ([`with_live_export`]), and the settings in force it is configured by: here in the
//! library, since the hook's own binary (`cairn-hook`) starts it too.

use std::path::Path;

use anyhow::Result;
use cairn_engine::Home;
use cairn_engine::settings::{self, Settings};
use cairn_export::otel::{LiveExporter, LiveLimits, OtelConfig, OtelTable};

/// The project of a workspace, if the workspace exists.
pub fn project_for(home: &Home, workspace: &Path) -> Option<cairn_engine::Project> {
    workspace.canonicalize().ok().map(|w| home.project(&w))
}

/// The `[otel]` table of the settings in force, as the exporter takes it.
fn table_of(otel: Option<settings::OtelSettings>) -> OtelTable {
    let t = otel.unwrap_or_default();
    OtelTable {
        endpoint: t.endpoint,
        protocol: t.protocol,
        headers: t.headers.unwrap_or_default().into_iter().collect(),
        service_name: t.service_name,
        capture_content: t.capture_content,
        timeout_ms: t.timeout_ms,
    }
}

/// The OpenTelemetry configuration in force in the current folder; `None` when no
/// endpoint is configured.
pub fn config_in_force(
    home: &Home,
    given: Option<&str>,
    protocol: Option<&str>,
) -> Result<Option<OtelConfig>> {
    let cwd = std::env::current_dir()?;
    let project = project_for(home, &cwd);
    let files = settings::Files::load(home, project.as_ref())?;
    let otel = settings::otel_in_force(&Settings::default(), &files, |k| std::env::var(k).ok())?;
    Ok(OtelConfig::resolve_with(
        given,
        protocol,
        |k| std::env::var(k).ok(),
        &table_of(otel),
    ))
}

/// How long, in milliseconds, a hook's process waits at its end for its few spans to
/// be sent: the agent waits for the hook, so a slow collector must not hold it (what is
/// not sent by then, `cairn export otel` sends).
pub const OTEL_HOOK_DRAIN_MS: u64 = 250;

/// `home`, where every session started or resumed sends its spans live to the
/// collector configured (nothing changes when none is).
pub fn with_live_export(home: Home) -> Result<Home> {
    with_live_export_limits(home, LiveLimits::default())
}

/// [`with_live_export`] with the live exporter's `limits`.
pub fn with_live_export_limits(home: Home, limits: LiveLimits) -> Result<Home> {
    let Some(config) = config_in_force(&home, None, None)? else {
        return Ok(home);
    };
    let note: cairn_export::otel::Note = std::sync::Arc::new(|text: &str| crate::hint::note(text));
    let start = LiveExporter::start_for(config, limits, note);
    Ok(home.with_export(start))
}

/// The home of a hook's process: the live export, when configured, waits at most
/// [`OTEL_HOOK_DRAIN_MS`] at the end; a configuration that cannot be read leaves the
/// hook without it (a hook never fails for its export).
pub fn hook_home(home: Home) -> Home {
    let limits = LiveLimits {
        drain_ms: OTEL_HOOK_DRAIN_MS,
        ..LiveLimits::default()
    };
    match with_live_export_limits(home.clone(), limits) {
        Ok(h) => h,
        Err(_) => home,
    }
}
