//! Server-sent events: `event:` and `data:` lines, an event ending at a blank line.

use super::ProviderError;

/// The event being read: its `event:` name and its `data:` lines joined.
#[derive(Default)]
struct Pending {
    event: String,
    data: String,
}

impl Pending {
    /// Takes one line (its end removed); true when the line ends an event with data.
    fn line(&mut self, line: &str) -> bool {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if !self.data.is_empty() {
                return true;
            }
            self.event.clear();
            return false;
        }
        if let Some(v) = line.strip_prefix("event:") {
            self.event = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("data:") {
            if !self.data.is_empty() {
                self.data.push('\n');
            }
            self.data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
        false
    }

    fn clear(&mut self) {
        self.event.clear();
        self.data.clear();
    }
}

/// Calls `each(event, data)` for every event of `resp`'s body, as its bytes arrive,
/// until it returns `Ok(true)` (done) or the stream ends. Returns whether `each` said
/// done; a read error or text that is not UTF-8 is a cut stream.
pub(crate) async fn read(
    mut resp: reqwest::Response,
    key: &super::Secret,
    mut each: impl FnMut(&str, &str) -> Result<bool, ProviderError>,
) -> Result<bool, ProviderError> {
    let cut = |e: &dyn std::fmt::Display| ProviderError::StreamCut(key.scrub(&e.to_string()));
    let mut pending = Pending::default();
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let chunk = resp
            .chunk()
            .await
            .map_err(|e| cut(&super::http::transport_text(&e)))?;
        let ended = chunk.is_none();
        match chunk {
            Some(c) => buf.extend_from_slice(&c),
            // The last line may have no end.
            None if !buf.is_empty() && buf.last() != Some(&b'\n') => buf.push(b'\n'),
            None => {}
        }
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            let line = std::str::from_utf8(&line[..end]).map_err(|e| cut(&e))?;
            if pending.line(line) {
                if each(&pending.event, &pending.data)? {
                    return Ok(true);
                }
                pending.clear();
            }
        }
        if ended {
            break;
        }
    }
    if !pending.data.is_empty() && each(&pending.event, &pending.data)? {
        return Ok(true);
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events of `text` fed a line at a time.
    fn events(text: &str) -> Vec<(String, String)> {
        let mut p = Pending::default();
        let mut out = Vec::new();
        for line in text.split('\n') {
            if p.line(line) {
                out.push((p.event.clone(), p.data.clone()));
                p.clear();
            }
        }
        out
    }

    #[test]
    fn events_end_at_a_blank_line_and_join_their_data_lines() {
        assert_eq!(
            events("event: a\r\ndata: 1\r\ndata:2\r\n\r\n: comment\n\ndata: {}\n\n"),
            [("a".into(), "1\n2".into()), (String::new(), "{}".into())]
        );
    }
}
