//! Unified diffs with line numbers, as every change is shown to the model and to people.

use similar::{ChangeTag, TextDiff};

/// A unified diff of `before` → `after` for `path`, with old and new line numbers in
/// front of each line, 3 lines of context, cut after `lines_max` lines with a note.
/// `before` is `None` for a file that did not exist: the diff then starts
/// `--- /dev/null`, as `diff -N` and git show a creation.
pub fn unified(path: &str, before: Option<&str>, after: &str, lines_max: usize) -> String {
    let diff = TextDiff::from_lines(before.unwrap_or(""), after);
    let mut out = Vec::new();
    out.push(match before {
        Some(_) => format!("--- a/{path}"),
        None => "--- /dev/null".to_string(),
    });
    out.push(format!("+++ b/{path}"));
    for group in diff.grouped_ops(3) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old = first.old_range().start..last.old_range().end;
        let new = first.new_range().start..last.new_range().end;
        // An empty side starts at the line before it, as in diff(1): `@@ -0,0 +1,3 @@`.
        let start = |r: &std::ops::Range<usize>| if r.is_empty() { r.start } else { r.start + 1 };
        out.push(format!(
            "@@ -{},{} +{},{} @@",
            start(&old),
            old.len(),
            start(&new),
            new.len()
        ));
        for op in &group {
            for change in diff.iter_changes(op) {
                let num = |n: Option<usize>| n.map_or(String::new(), |n| (n + 1).to_string());
                let sign = match change.tag() {
                    ChangeTag::Delete => '-',
                    ChangeTag::Insert => '+',
                    ChangeTag::Equal => ' ',
                };
                let text = change.value().trim_end_matches(['\n', '\r']);
                out.push(format!(
                    "{:>5} {:>5} {sign}{text}",
                    num(change.old_index()),
                    num(change.new_index())
                ));
                if change.missing_newline() {
                    out.push("\\ No newline at end of file".into());
                }
            }
        }
    }
    if out.len() > lines_max {
        let more = out.len() - lines_max;
        out.truncate(lines_max);
        out.push(format!("…({more} more diff lines)"));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_both_sides_and_caps() {
        let d = unified("a.txt", Some("one\ntwo\nthree\n"), "one\n2\nthree\n", 120);
        assert_eq!(
            d,
            "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n    1     1  one\n    2       -two\n          2 +2\n    3     3  three"
        );
        assert_eq!(
            unified("n.txt", Some(""), "a\n", 120),
            "--- a/n.txt\n+++ b/n.txt\n@@ -0,0 +1,1 @@\n          1 +a"
        );
        // A creation: the old side is /dev/null.
        assert_eq!(
            unified("n.txt", None, "a\n", 120),
            "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,1 @@\n          1 +a"
        );
        let capped = unified("a.txt", Some("one\ntwo\nthree\n"), "one\n2\nthree\n", 4);
        assert!(capped.ends_with("…(3 more diff lines)"), "{capped}");
    }
}
