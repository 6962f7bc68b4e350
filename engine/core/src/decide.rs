//! The rules, as pure functions of the folded state and the call. The live call path
//! and deep verify both call these; there is no second copy of a rule anywhere.

/// Cuts `text` to `lines_max` lines and `bytes_max` bytes (on a character boundary),
/// with a marker saying what was cut. Returns whether anything was.
pub fn cap_output(text: &str, bytes_max: usize, lines_max: usize) -> (String, bool) {
    let total_lines = text.lines().count();
    let mut out = String::new();
    let mut cut = false;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if i >= lines_max || out.len() + line.len() > bytes_max {
            cut = true;
            let mut room = bytes_max.saturating_sub(out.len());
            if i < lines_max && room > 0 {
                while !line.is_char_boundary(room.min(line.len())) {
                    room -= 1;
                }
                out.push_str(&line[..room.min(line.len())]);
            }
            break;
        }
        out.push_str(line);
    }
    if cut {
        let shown = out.lines().count();
        out.push_str(&format!(
            "\n…(output cut: {} of {} bytes and {shown} of {total_lines} lines shown; the whole output is kept in the session's blobs)",
            out.len(),
            text.len()
        ));
    }
    (out, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_output_at_and_past_the_limits() {
        assert_eq!(
            cap_output("abc\ndef\n", 8, 2),
            ("abc\ndef\n".to_string(), false)
        );
        let (t, cut) = cap_output("abc\ndef\n", 7, 2);
        assert!(cut);
        assert!(
            t.starts_with("abc\ndef\n…(output cut: 7 of 8 bytes and 2 of 2 lines shown"),
            "{t}"
        );
        let (t, cut) = cap_output("a\nb\nc\n", 100, 2);
        assert!(cut);
        assert!(
            t.starts_with("a\nb\n\n…(output cut: 4 of 6 bytes and 2 of 3 lines shown"),
            "{t}"
        );
        let (t, _) = cap_output("ééé", 3, 10);
        assert!(t.starts_with("é\n…"), "{t}");
    }
}
