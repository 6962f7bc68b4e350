//! The second reading of a line: its raw text, checked apart from tree-sitter's parse.
//!
//! The parse tells which commands run; this module makes sure nothing runs that the parse
//! did not see. bash executes text the grammar may read as plain characters (a backquote in
//! a here-document body, a `$(…)` in a single-quoted default inside double quotes), so the
//! rule is positive: every `` ` ``, `$(`, `${`, `$[`, `<(` and `>(` of the line that bash
//! could act on must be the start of a node the walk understood, or the line asks. Only
//! text bash surely takes literally is skipped: a single-quoted string outside double
//! quotes and expansions, an ANSI-C string `$'…'`, and a character after an unescaped
//! backslash.
//!
//! It also finds what makes bash's reading differ from any parse: a carriage return, a
//! NUL, a line continuation inside a word or a here-document, a quoted here-document
//! delimiter.

/// Byte ranges of the line bash reads literally, and the starts of nodes the walk
/// understood (`$(` of a command substitution it walked, `${` of an expansion it
/// judged, `$((` of literal arithmetic).
#[derive(Debug, Default)]
pub struct Marks {
    literal: Vec<(usize, usize)>,
    understood: Vec<usize>,
}

impl Marks {
    /// Text bash takes literally: no expansion in it runs.
    pub fn literal(&mut self, start: usize, end: usize) {
        self.literal.push((start, end));
    }

    /// A construct starting at `at` that the walk read (and reasoned about).
    pub fn understood(&mut self, at: usize) {
        self.understood.push(at);
    }
}

/// What the raw text holds that the parse did not account for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A backquote, or a `$(` no command substitution of the parse starts at.
    Substitution,
    /// `<(` or `>(` no process substitution of the parse starts at.
    ProcessSubstitution,
    /// `${` no judged expansion starts at.
    Expansion,
    /// `$[`, or `$((` no literal arithmetic starts at.
    Arithmetic,
}

/// Every unexplained construct of `line`, each kind once, in order of appearance.
pub fn unexplained(line: &str, marks: &mut Marks) -> Vec<Finding> {
    marks.literal.sort_unstable();
    marks.understood.sort_unstable();
    let bytes = line.as_bytes();
    let mut found = Vec::new();
    let mut push = |f: Finding| {
        if !found.contains(&f) {
            found.push(f);
        }
    };
    let mut literal = marks.literal.iter().peekable();
    let mut i = 0;
    while i < bytes.len() {
        // Skip literal ranges (sorted; they may nest or overlap).
        while let Some(&&(_, end)) = literal.peek() {
            if end <= i {
                literal.next();
            } else {
                break;
            }
        }
        if let Some(&&(start, end)) = literal.peek()
            && start <= i
        {
            i = end;
            continue;
        }
        let b = bytes[i];
        if b == b'\\' {
            // The next character is taken literally, in words, double quotes and
            // here-document bodies alike.
            i += 2;
            continue;
        }
        let next = bytes.get(i + 1).copied();
        let known = marks.understood.binary_search(&i).is_ok();
        match (b, next) {
            (b'`', _) => push(Finding::Substitution),
            (b'$', Some(b'(')) if !known => {
                if bytes.get(i + 2) == Some(&b'(') {
                    push(Finding::Arithmetic);
                } else {
                    push(Finding::Substitution);
                }
            }
            (b'$', Some(b'{')) if !known => push(Finding::Expansion),
            (b'$', Some(b'[')) => push(Finding::Arithmetic),
            (b'<' | b'>', Some(b'(')) if !known => push(Finding::ProcessSubstitution),
            _ => {}
        }
        i += 1;
    }
    found
}

/// What in the raw text makes bash's reading of the line differ from a parse.
pub fn ambiguities(line: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    if line.contains('\r') {
        out.push("a carriage return");
    }
    if line.contains('\0') {
        out.push("a NUL byte");
    }
    out
}

/// The offsets of the line's continuations: a newline after an odd run of backslashes.
pub fn continuations(line: &str) -> Vec<usize> {
    let bytes = line.as_bytes();
    let mut out = Vec::new();
    let mut run = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\\' {
            run += 1;
            continue;
        }
        if b == b'\n' && run % 2 == 1 {
            out.push(i - 1);
        }
        run = 0;
    }
    out
}

/// True for a shell variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// True for arithmetic that names no variable: digits, operators, parentheses and
/// blanks only. A variable's value is evaluated as arithmetic in turn, and an array
/// subscript in it runs command substitutions (`x='a[$(cmd)]'; echo $((x))`).
pub fn literal_arithmetic(inner: &str) -> bool {
    inner
        .chars()
        .all(|c| c.is_ascii_digit() || " \t+-*/%<>=!&|^~?:(),".contains(c))
}

/// True for a `${…}` expansion the analysis understands (its whole source text): a
/// name, a length, or an operator whose word is plain text. Indirection (`${!x}`),
/// substrings with a variable offset, transformations (`${x@P}` runs a prompt's
/// substitutions), subscripts other than digits and any word holding quotes, `$`,
/// backquotes, backslashes or brackets are not.
pub fn plain_expansion(text: &str) -> bool {
    let Some(body) = text.strip_prefix("${").and_then(|b| b.strip_suffix('}')) else {
        return false;
    };
    let body = body
        .strip_prefix('#')
        .filter(|b| !b.is_empty())
        .unwrap_or(body);
    let (name, rest) = split_name(body);
    if name.is_empty() {
        return false;
    }
    let rest = match rest.strip_prefix('[') {
        Some(r) => match r.split_once(']') {
            Some((index, after))
                if !index.is_empty()
                    && (index.chars().all(|c| c.is_ascii_digit())
                        || index == "@"
                        || index == "*") =>
            {
                after
            }
            _ => return false,
        },
        None => rest,
    };
    if rest.is_empty() {
        return true;
    }
    // A substring with literal bounds.
    if let Some(bounds) = rest.strip_prefix(':')
        && bounds.split(':').all(|b| {
            !b.is_empty()
                && b.trim_start()
                    .trim_start_matches('-')
                    .chars()
                    .all(|c| c.is_ascii_digit())
        })
        && bounds.split(':').count() <= 2
        && bounds.chars().any(|c| c.is_ascii_digit())
    {
        return true;
    }
    const OPERATORS: &[&str] = &[
        ":-", ":=", ":?", ":+", "-", "=", "?", "+", "##", "#", "%%", "%", "//", "/#", "/%", "/",
        "^^", "^", ",,", ",",
    ];
    let Some(word) = OPERATORS.iter().find_map(|op| rest.strip_prefix(op)) else {
        return false;
    };
    word.chars()
        .all(|c| c.is_ascii_alphanumeric() || " ._-/:,=+@%^*?~!#".contains(c) || !c.is_ascii())
}

/// The name at the start of an expansion's body: an identifier, digits, or one special
/// parameter character.
fn split_name(body: &str) -> (&str, &str) {
    let first = body.chars().next();
    match first {
        Some(c) if c == '_' || c.is_ascii_alphabetic() => {
            let end = body
                .find(|c: char| c != '_' && !c.is_ascii_alphanumeric())
                .unwrap_or(body.len());
            body.split_at(end)
        }
        Some(c) if c.is_ascii_digit() => {
            let end = body
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(body.len());
            body.split_at(end)
        }
        Some('@' | '*' | '#' | '?' | '-' | '$' | '0') => body.split_at(1),
        _ => ("", body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_expansions_are_names_lengths_and_literal_operator_words() {
        for ok in [
            "${x}",
            "${#x}",
            "${HOME}",
            "${1}",
            "${@}",
            "${#}",
            "${x:-default}",
            "${x-}",
            "${x:+set}",
            "${x#*/}",
            "${x%%.*}",
            "${x//a/b}",
            "${x^^}",
            "${a[0]}",
            "${a[@]}",
            "${#a[@]}",
            "${x:1}",
            "${x:1:2}",
            "${x: -3}",
            "${x:=a b}",
        ] {
            assert!(plain_expansion(ok), "{ok} should be plain");
        }
        for bad in [
            "${!x}",
            "${x:-$(touch M)}",
            "${x:-'$(touch M)'}",
            "${x:+`touch M`}",
            "${a[i]}",
            "${a[$i]}",
            "${x:i}",
            "${x:1:n}",
            "${x@P}",
            "${x@Q}",
            "${x:-\"a\"}",
            "${x:-\\$}",
            "${x:-${y}}",
            "${!prefix*}",
            "${x:-(a)}",
            "${}",
            "${x:-a;b}",
            "${x:-a[1]}",
        ] {
            assert!(!plain_expansion(bad), "{bad} should not be plain");
        }
    }

    #[test]
    fn literal_arithmetic_names_no_variable() {
        assert!(literal_arithmetic("1 + 2 * (3 - 4) << 1"));
        assert!(!literal_arithmetic("x"));
        assert!(!literal_arithmetic("1 + $x"));
        assert!(!literal_arithmetic("a[1]"));
        assert!(!literal_arithmetic("0x10"));
    }

    #[test]
    fn continuations_are_newlines_after_an_odd_run_of_backslashes() {
        assert_eq!(continuations("a \\\nb"), [2]);
        assert_eq!(continuations("a \\\\\nb"), Vec::<usize>::new());
        assert_eq!(continuations("a \\\\\\\nb"), [4]);
    }

    #[test]
    fn unexplained_constructs_are_found_outside_literal_text() {
        let line = "echo '$(a)' \"`b`\" \\$(c) $(d)";
        let mut marks = Marks::default();
        marks.literal(5, 11);
        assert_eq!(unexplained(line, &mut marks), [Finding::Substitution]);
        let mut marks = Marks::default();
        marks.literal(5, 11);
        marks.understood(line.rfind("$(").unwrap_or(0));
        // The backquotes still count.
        assert_eq!(unexplained(line, &mut marks), [Finding::Substitution]);
        let mut marks = Marks::default();
        assert_eq!(
            unexplained("echo <(x) ${y} $[1] $((2))", &mut marks),
            [
                Finding::ProcessSubstitution,
                Finding::Expansion,
                Finding::Arithmetic
            ]
        );
    }
}
