//! Server-sent events: `event:` and `data:` lines, an event ending at a blank line.

use std::io::BufRead;

use super::ProviderError;

/// Calls `each(event, data)` for every event until it returns `Ok(true)` (done) or the
/// stream ends. Returns whether `each` said done; a read error is a cut stream.
pub(crate) fn read(
    reader: impl BufRead,
    key: &super::Secret,
    mut each: impl FnMut(&str, &str) -> Result<bool, ProviderError>,
) -> Result<bool, ProviderError> {
    let mut event = String::new();
    let mut data = String::new();
    for line in reader.lines() {
        let line = line.map_err(|e| ProviderError::StreamCut(key.scrub(&e.to_string())))?;
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if line.is_empty() {
            if !data.is_empty() && each(&event, &data)? {
                return Ok(true);
            }
            event.clear();
            data.clear();
            continue;
        }
        if let Some(v) = line.strip_prefix("event:") {
            event = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    if !data.is_empty() && each(&event, &data)? {
        return Ok(true);
    }
    Ok(false)
}
