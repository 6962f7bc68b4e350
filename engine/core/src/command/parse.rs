//! The walk over tree-sitter's syntax tree: simple commands and their words, the
//! constructs that are reasons in themselves (substitutions, functions), redirections,
//! assignments and the directory a `cd` leads to. What each program does with its
//! arguments is in `programs`.

use tree_sitter::{Node, Parser};

use super::{Analysis, Command, Reason, Word, paths, scan};
use crate::limits::COMMAND_NESTING_DEPTH_MAX;

/// Targets a redirection may write without leaving the workspace.
const DEVICES: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"];

/// Variables whose value is a command another program runs (`GIT_PAGER=cat git log`
/// runs `cat`): a known value is analysed as a command line, an unknown one is a reason.
const COMMAND_VARIABLES: &[&str] = &[
    "PAGER",
    "MANPAGER",
    "GIT_PAGER",
    "EDITOR",
    "VISUAL",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_PROXY_COMMAND",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CC",
    "CXX",
    "SHELL",
];

/// Variables that change which programs run or what they load: setting one is a reason.
const RUNNING_VARIABLES: &[&str] = &[
    "PATH",
    "IFS",
    "ENV",
    "BASH_ENV",
    "CDPATH",
    "PS4",
    "PROMPT_COMMAND",
    "SHELLOPTS",
    "BASHOPTS",
    "HOME",
    "XDG_CONFIG_HOME",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "LESSOPEN",
    "LESSCLOSE",
    "GIT_EXEC_PATH",
    "GIT_DIR",
    "GIT_TEMPLATE_DIR",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS",
    "GIT_SSH",
    "RUSTC",
    "RUSTDOC",
    "CARGO_HOME",
    "CARGO_BUILD_RUSTC",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "CARGO_BUILD_RUSTDOC",
    // Options a program reads from its environment, which can name programs to run
    // (`TAR_OPTIONS=--to-command=…`) or change where it writes.
    "TAR_OPTIONS",
    "MANOPT",
    "LESS",
    "LESSKEY",
    "LESSKEYIN",
    "ZIPOPT",
    "UNZIP",
    "UNZIPOPT",
    "RSYNC_RSH",
    "RSYNC_CONNECT_PROG",
    "MAKEFLAGS",
    "GNUMAKEFLAGS",
    "MFLAGS",
    "MAKEFILES",
    "GZIP",
    "XZ_OPT",
    "BZIP2",
    "GREP_OPTIONS",
    "SUDO_ASKPASS",
    "BROWSER",
    "FCEDIT",
    "TEXTDOMAIN",
    "TEXTDOMAINDIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_OBJECT_DIRECTORY",
    "GIT_WORK_TREE",
    "GIT_ATTR_SOURCE",
];

/// Prefixes of variables of that kind (`LD_PRELOAD`, `LD_LIBRARY_PATH`, `DYLD_…`, bash's
/// exported functions, git's numbered configuration).
const RUNNING_PREFIXES: &[&str] = &[
    "LD_",
    "DYLD_",
    "BASH_FUNC_",
    "GIT_CONFIG_KEY_",
    "GIT_CONFIG_VALUE_",
    "NPM_CONFIG_",
    "npm_config_",
    "YARN_",
    "PNPM_",
    "CARGO_ALIAS_",
    "CARGO_BUILD_",
    "CARGO_REGISTRIES_",
];

/// Node kinds the walk reads by their children alone: lists, loops, conditions and the
/// parts of words and tests. A kind not here (and not handled by name) is a reason.
const UNDERSTOOD: &[&str] = &[
    "program",
    "list",
    "do_group",
    "if_statement",
    "elif_clause",
    "else_clause",
    "while_statement",
    "case_statement",
    "case_item",
    "negated_command",
    "variable_assignments",
    "herestring_redirect",
    "heredoc_start",
    "heredoc_body",
    "heredoc_content",
    "heredoc_end",
    "comment",
    "file_descriptor",
    "word",
    "number",
    "string",
    "string_content",
    "concatenation",
    "command_name",
    "simple_expansion",
    "variable_name",
    "special_variable_name",
    "brace_expression",
    "extglob_pattern",
    "regex",
    "test_operator",
    "array",
    "binary_expression",
    "unary_expression",
    "parenthesized_expression",
    "ternary_expression",
    "postfix_expression",
];

/// Node kinds a line continuation may lie in without being inside a word: between the
/// words of a command, or between commands.
const BETWEEN_WORDS: &[&str] = &[
    "program",
    "list",
    "pipeline",
    "command",
    "redirected_statement",
    "subshell",
    "compound_statement",
    "do_group",
    "if_statement",
    "elif_clause",
    "else_clause",
    "while_statement",
    "for_statement",
    "case_statement",
    "negated_command",
    "declaration_command",
    "unset_command",
    "variable_assignments",
];

/// Ancestors inside which single quotes are not quotes to bash (inside double quotes,
/// an expansion's word, a here-document body, arithmetic), so a `raw_string` there is
/// not literal text.
const EXPANDING: &[&str] = &[
    "string",
    "expansion",
    "heredoc_body",
    "heredoc_redirect",
    "arithmetic_expansion",
    "translated_string",
    "subscript",
    "regex",
    "extglob_pattern",
];

/// What the walk needs to know of each node's ancestors, found in one pass over the
/// tree: tree-sitter's `parent()` walks down from the root each time, which made a long
/// line's analysis quadratic.
#[derive(Debug, Default)]
struct Ancestry {
    /// The single-quoted strings (by node id) inside no construct where their quotes
    /// are not quotes ([`EXPANDING`]): literal text.
    literal_quotes: std::collections::HashSet<usize>,
    /// The commands (by node id) whose input the line feeds: a here-document, a
    /// here-string, or the command before them in a pipeline.
    fed: std::collections::HashSet<usize>,
    /// An unquoted word holds a newline that is not a line continuation: the parse and
    /// bash disagree on where the command ends.
    word_spans_lines: bool,
}

fn ancestry(top: Node, src: &str) -> Ancestry {
    let mut out = Ancestry::default();
    let mut path: Vec<Node> = Vec::new();
    let mut expanding = 0usize;
    let mut cursor = top.walk();
    loop {
        let n = cursor.node();
        match kind(n) {
            "raw_string" if expanding == 0 => {
                out.literal_quotes.insert(n.id());
            }
            "command" if stdin_fed(n, &path) => {
                out.fed.insert(n.id());
            }
            "word" | "extglob_pattern" if !out.word_spans_lines => {
                let raw = text(n, src).as_bytes();
                // A newline after an odd run of backslashes is a continuation.
                out.word_spans_lines = raw.iter().enumerate().any(|(i, b)| {
                    *b == b'\n'
                        && raw[..i].iter().rev().take_while(|c| **c == b'\\').count() % 2 == 0
                });
            }
            _ => {}
        }
        if cursor.goto_first_child() {
            expanding += usize::from(EXPANDING.contains(&kind(n)));
            path.push(n);
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return out;
            }
            if let Some(p) = path.pop() {
                expanding -= usize::from(EXPANDING.contains(&kind(p)));
            }
        }
    }
}

/// A node's kind. tree-sitter's `Node::kind` measures and checks the name's bytes on
/// every call, and the walk asks thousands of times per line: the names are read once.
fn kind<'t>(n: Node<'t>) -> &'t str {
    static KINDS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let kinds = KINDS.get_or_init(|| {
        let language: tree_sitter::Language = tree_sitter_bash::LANGUAGE.into();
        (0..language.node_kind_count())
            .map(|id| {
                u16::try_from(id)
                    .ok()
                    .and_then(|id| language.node_kind_for_id(id))
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    });
    match kinds.get(usize::from(n.kind_id())) {
        Some(name) => name,
        None => n.kind(),
    }
}

/// A node's named children.
fn named(n: Node) -> Vec<Node> {
    let mut cursor = n.walk();
    n.named_children(&mut cursor).collect()
}

/// True when assigning `name` changes what programs run.
fn running_variable(name: &str) -> bool {
    RUNNING_VARIABLES.contains(&name)
        || RUNNING_PREFIXES.iter().any(|p| name.starts_with(p))
        || (name.starts_with("CARGO_TARGET_")
            && (name.ends_with("_RUNNER") || name.ends_with("_LINKER")))
}

/// The analysis under way: what one line (and the lines nested in it) runs.
pub struct Walker {
    /// The workspace root, normalised.
    pub(super) root: String,
    /// The directory the shell is in at this point of the line; None once a `cd` went
    /// somewhere the line does not tell.
    pub(super) cwd: Option<String>,
    /// Wrappers and nested lines entered so far.
    depth: u32,
    commands: Vec<Command>,
    reasons: Vec<Reason>,
    /// Files written inside the workspace, absolute, each once.
    pub(super) writes: Vec<String>,
    /// What the walk of the line being read understood, for its raw-text check.
    marks: scan::Marks,
    /// What the nodes of the line being read have above them.
    ancestry: Ancestry,
    /// True while reading the command of a `find -exec` whose starting points all lie
    /// in the workspace: its `{}` is a path inside.
    pub(super) found_inside: bool,
}

impl Walker {
    pub fn new(root: &str) -> Walker {
        let root = paths::root(root);
        Walker {
            cwd: Some(root.clone()),
            root,
            depth: 0,
            commands: Vec::new(),
            reasons: Vec::new(),
            writes: Vec::new(),
            marks: scan::Marks::default(),
            ancestry: Ancestry::default(),
            found_inside: false,
        }
    }

    pub fn finish(self, line: String) -> Analysis {
        let mut keys: Vec<String> = Vec::new();
        for c in &self.commands {
            if !keys.contains(&c.key) {
                keys.push(c.key.clone());
            }
        }
        Analysis {
            line,
            root: self.root,
            commands: self.commands,
            keys,
            reasons: self.reasons,
            writes: self.writes,
        }
    }

    /// Adds a reason once.
    pub(super) fn reason(&mut self, reason: Reason) {
        if !self.reasons.contains(&reason) {
            self.reasons.push(reason);
        }
    }

    /// Records a command that will run; returns its index.
    pub(super) fn push(&mut self, key: String, argv: &[Word]) -> usize {
        self.commands.push(Command {
            key,
            argv: argv.to_vec(),
            cwd: self.cwd.clone(),
        });
        self.commands.len() - 1
    }

    /// Changes the key of a recorded command (an interpreter given inline code).
    pub(super) fn rekey(&mut self, index: usize, key: String) {
        self.commands[index].key = key;
    }

    /// Runs `f` one level deeper, or records that the line nests too deep.
    pub(super) fn deeper(&mut self, f: impl FnOnce(&mut Walker)) {
        if self.depth >= COMMAND_NESTING_DEPTH_MAX {
            self.reason(Reason::TooDeep);
            return;
        }
        self.depth += 1;
        f(self);
        self.depth -= 1;
    }

    /// Analyses an argv run without a shell.
    pub fn argv(&mut self, argv: &[Word]) {
        self.simple(argv, false);
    }

    /// Parses and walks one command line (the top one, or one a program runs).
    pub fn line(&mut self, text: &str) {
        // One parser per thread: making one and loading the grammar costs more than
        // parsing a typical line.
        thread_local! {
            static PARSER: std::cell::RefCell<Option<Parser>> = const { std::cell::RefCell::new(None) };
        }
        let parsed = PARSER.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                let mut parser = Parser::new();
                let language: tree_sitter::Language = tree_sitter_bash::LANGUAGE.into();
                parser.set_language(&language).ok()?;
                *slot = Some(parser);
            }
            slot.as_mut()?.parse(text, None)
        });
        // Both fail only on a grammar built for another tree-sitter: a bug, but one that
        // must leave every line asking rather than none.
        debug_assert!(parsed.is_some(), "tree-sitter-bash did not load");
        let Some(tree) = parsed else {
            self.reason(Reason::Unparsed);
            return;
        };
        for what in scan::ambiguities(text) {
            self.reason(Reason::Ambiguous(what.to_string()));
        }
        let top = tree.root_node();
        if top.has_error() {
            self.reason(Reason::Unparsed);
        }
        let ancestry = ancestry(top, text);
        if ancestry.word_spans_lines {
            // tree-sitter glues `a\n\\prog` into one word of the first command; bash
            // runs `prog` as a new command.
            self.reason(Reason::Ambiguous(
                "a word that spans lines, which bash reads as a new command".to_string(),
            ));
        }
        // Each line (a nested one too) is checked against its own raw text.
        let outer = std::mem::take(&mut self.marks);
        let outer_ancestry = std::mem::replace(&mut self.ancestry, ancestry);
        self.node(top, text);
        self.ancestry = outer_ancestry;
        for at in scan::continuations(text) {
            let inside = top
                .descendant_for_byte_range(at, at + 2)
                .is_some_and(|n| !BETWEEN_WORDS.contains(&kind(n)));
            if inside {
                self.reason(Reason::Ambiguous(
                    "a line continuation inside a word".to_string(),
                ));
            }
        }
        let mut marks = std::mem::replace(&mut self.marks, outer);
        for finding in scan::unexplained(text, &mut marks) {
            self.reason(match finding {
                scan::Finding::Substitution => Reason::CommandSubstitution,
                scan::Finding::ProcessSubstitution => Reason::ProcessSubstitution,
                scan::Finding::Expansion => {
                    Reason::Expansion("${…} the parse did not read".to_string())
                }
                scan::Finding::Arithmetic => {
                    Reason::Arithmetic("arithmetic the parse did not read".to_string())
                }
            });
        }
    }

    /// Analyses a line a program runs (a nested shell's string, a command variable's
    /// value, `watch`'s command), one level deeper. Its `cd`s stay inside it.
    pub(super) fn nested(&mut self, text: &str) {
        let cwd = self.cwd.clone();
        self.deeper(|w| w.line(text));
        if self.cwd != cwd {
            self.cwd = None;
        }
    }

    fn node(&mut self, n: Node, src: &str) {
        if n.is_missing() {
            self.reason(Reason::Unparsed);
        }
        match kind(n) {
            "command" => self.command(n, src),
            // The body first: tree-sitter hangs `cd /tmp && echo x > f`'s redirection on
            // the whole list, but it is opened where the last command runs.
            "redirected_statement" => self.children(n, src),
            "declaration_command" => self.declaration(n, src),
            "unset_command" => {
                self.push("shell:unset".to_string(), &[Word::literal("unset")]);
                let words: Vec<Word> = named(n).iter().map(|w| word(*w, src)).collect();
                self.variable_names("unset", &words, &[]);
                self.children(n, src);
            }
            "test_command" => self.test(n, src),
            "variable_assignment" => {
                let name = n
                    .child_by_field_name("name")
                    .map(|v| match v.child_by_field_name("name") {
                        Some(array) => text(array, src),
                        None => text(v, src),
                    })
                    .unwrap_or("")
                    .to_string();
                let value = n.child_by_field_name("value").map(|v| word(v, src));
                self.assign(&name, value.as_ref());
                self.children(n, src);
            }
            "function_definition" => {
                let name = n
                    .child_by_field_name("name")
                    .map_or("", |v| text(v, src))
                    .to_string();
                self.reason(Reason::Function(name));
                self.children(n, src);
            }
            "command_substitution" => {
                self.reason(Reason::CommandSubstitution);
                self.marks.understood(n.start_byte());
                self.scoped(n, src);
            }
            "process_substitution" => {
                self.reason(Reason::ProcessSubstitution);
                self.marks.understood(n.start_byte());
                self.scoped(n, src);
            }
            "subshell" | "pipeline" => self.scoped(n, src),
            "file_redirect" => {
                self.redirect(n, src);
                self.children(n, src);
            }
            "heredoc_redirect" => {
                self.heredoc(n, src);
                self.children(n, src);
            }
            "raw_string" | "ansi_c_string" => self.quoted(n, src),
            "expansion"
            | "arithmetic_expansion"
            | "compound_statement"
            | "c_style_for_statement"
            | "subscript" => self.evaluated(n, src),
            "for_statement" => {
                if n.child(0).is_some_and(|k| kind(k) == "select") {
                    self.reason(Reason::NotUnderstood("select".to_string()));
                }
                self.children(n, src);
            }
            kind if UNDERSTOOD.contains(&kind) => self.children(n, src),
            // A syntax error is `Unparsed` already.
            "ERROR" => self.children(n, src),
            kind => {
                self.reason(Reason::NotUnderstood(kind.replace('_', " ")));
                self.children(n, src);
            }
        }
    }

    /// A single-quoted or ANSI-C string: literal text for the raw-text check where bash
    /// takes it literally.
    fn quoted(&mut self, n: Node, src: &str) {
        match kind(n) {
            "raw_string" => {
                let t = text(n, src);
                if t.len() >= 2
                    && t.starts_with('\'')
                    && t.ends_with('\'')
                    && self.ancestry.literal_quotes.contains(&n.id())
                {
                    self.marks.literal(n.start_byte(), n.end_byte());
                }
            }
            "ansi_c_string" => {
                let t = text(n, src);
                if t.len() >= 3 && t.starts_with("$'") && t.ends_with('\'') {
                    self.marks.literal(n.start_byte(), n.end_byte());
                }
            }
            _ => {}
        }
    }

    /// Expansions, arithmetic and subscripts: judged here, and their insides walked.
    fn evaluated(&mut self, n: Node, src: &str) {
        match kind(n) {
            "expansion" => {
                let t = text(n, src);
                if scan::plain_expansion(t) {
                    self.marks.understood(n.start_byte());
                } else {
                    self.reason(Reason::Expansion(t.to_string()));
                }
                self.children(n, src);
            }
            "arithmetic_expansion" => {
                let t = text(n, src);
                let inner = t
                    .strip_prefix("$((")
                    .and_then(|r| r.strip_suffix("))"))
                    .or_else(|| t.strip_prefix("$[").and_then(|r| r.strip_suffix(']')));
                if inner.is_some_and(scan::literal_arithmetic) && t.starts_with("$((") {
                    self.marks.understood(n.start_byte());
                } else {
                    self.reason(Reason::Arithmetic(t.to_string()));
                }
                self.children(n, src);
            }
            "compound_statement" => {
                // `((…))` is an arithmetic command; `{ …; }` a group.
                let t = text(n, src);
                if let Some(inner) = t.strip_prefix("((") {
                    let inner = inner.strip_suffix("))").unwrap_or(inner);
                    if !scan::literal_arithmetic(inner) {
                        self.reason(Reason::Arithmetic(t.to_string()));
                    }
                }
                self.children(n, src);
            }
            "c_style_for_statement" => {
                let t = text(n, src);
                let head = t.split("))").next().unwrap_or(t);
                self.reason(Reason::Arithmetic(format!("{head}))")));
                self.children(n, src);
            }
            "subscript" => {
                let index = n.child_by_field_name("index").map_or("", |i| text(i, src));
                if !(index.chars().all(|c| c.is_ascii_digit()) && !index.is_empty()
                    || index == "@"
                    || index == "*")
                {
                    self.reason(Reason::Arithmetic(text(n, src).to_string()));
                }
                self.children(n, src);
            }
            _ => self.children(n, src),
        }
    }

    /// A here-document: a delimiter with quotes or backslashes is read by bash in ways
    /// the grammar does not follow (and a body it would not expand may be one it does).
    fn heredoc(&mut self, n: Node, src: &str) {
        let mut cursor = n.walk();
        for child in n.children(&mut cursor) {
            if kind(child) == "heredoc_start" && text(child, src).contains(['\'', '"', '\\']) {
                self.reason(Reason::Ambiguous(
                    "a here-document delimiter with quotes or backslashes".to_string(),
                ));
            }
        }
    }

    /// `declare`, `typeset`, `local`, `export`, `readonly`: options that make later
    /// assignments arithmetic (`-i`) or names references (`-n`) are reasons, and so is a
    /// name only known when it runs.
    fn declaration(&mut self, n: Node, src: &str) {
        let keyword = n.child(0).map_or("", |k| text(k, src)).to_string();
        self.push(format!("shell:{keyword}"), &[Word::literal(&keyword)]);
        for child in named(n) {
            match kind(child) {
                "variable_assignment" => {}
                _ => {
                    let w = word(child, src);
                    self.declared(&keyword, &w);
                }
            }
        }
        self.children(n, src);
    }

    /// One word of a declaration: an option, or a variable name.
    pub(super) fn declared(&mut self, keyword: &str, w: &Word) {
        let t = w.text.as_str();
        if w.known && (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
            for c in t[1..].chars() {
                match c {
                    'i' => self.reason(Reason::Arithmetic(format!("{keyword} -i"))),
                    'n' if keyword != "export" => {
                        self.reason(Reason::VariableName(format!("{keyword} -n")))
                    }
                    'a' | 'A' | 'f' | 'F' | 'g' | 'p' | 'r' | 't' | 'x' | 'l' | 'u' | 'I' | 'n' => {
                    }
                    _ => self.reason(Reason::UnknownOption(format!("{keyword} {t}"))),
                }
            }
        } else if !(w.known && (scan::identifier(t) || assignment_name(t))) {
            self.reason(Reason::VariableName(format!("{keyword} {t}")));
        }
    }

    /// Names given to a builtin that assigns, tests or unsets them: each must be a plain
    /// identifier; options (given in `options`, which take no value) are skipped.
    pub(super) fn variable_names(&mut self, builtin: &str, words: &[Word], options: &[&str]) {
        for w in words {
            let t = w.text.as_str();
            if w.known && t.starts_with('-') && t.len() > 1 {
                if !t[1..]
                    .chars()
                    .all(|c| options.contains(&format!("-{c}").as_str()) || "fvn".contains(c))
                {
                    self.reason(Reason::UnknownOption(format!("{builtin} {t}")));
                }
                continue;
            }
            if !(w.known && scan::identifier(t)) {
                self.reason(Reason::VariableName(format!("{builtin} {t}")));
            }
        }
    }

    /// `[ … ]` and `[[ … ]]`: `-v` tests a variable by name (its subscript evaluated);
    /// in `[[ … ]]` the numeric comparisons evaluate their operands as arithmetic.
    fn test(&mut self, n: Node, src: &str) {
        let double = text(n, src).starts_with("[[");
        let bracket = if double { "[[" } else { "[" };
        self.push(format!("shell:{bracket}"), &[Word::literal(bracket)]);
        self.test_operands(n, src, double);
        self.children(n, src);
    }

    fn test_operands(&mut self, n: Node, src: &str, double: bool) {
        for child in named(n) {
            match kind(child) {
                "unary_expression" => {
                    let parts = named(child);
                    let op = parts.first().map_or("", |o| text(*o, src));
                    if op == "-v"
                        && let Some(operand) = parts.get(1)
                    {
                        let w = word(*operand, src);
                        if !(w.known && scan::identifier(&w.text)) {
                            self.reason(Reason::VariableName(format!("-v {}", w.text)));
                        }
                    }
                    self.test_operands(child, src, double);
                }
                "binary_expression" if double => {
                    let parts = named(child);
                    let arithmetic = parts.iter().any(|p| {
                        kind(*p) == "test_operator"
                            && matches!(
                                text(*p, src),
                                "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge"
                            )
                    });
                    if arithmetic {
                        for p in parts.iter().filter(|p| kind(**p) != "test_operator") {
                            let w = word(*p, src);
                            let t = w.text.trim_start_matches(['-', '+']);
                            if !(w.known && !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()))
                            {
                                self.reason(Reason::Arithmetic(text(child, src).to_string()));
                            }
                        }
                    }
                    self.test_operands(child, src, double);
                }
                "parenthesized_expression" | "binary_expression" => {
                    self.test_operands(child, src, double)
                }
                _ => {}
            }
        }
    }

    fn children(&mut self, n: Node, src: &str) {
        let mut cursor = n.walk();
        for child in n.named_children(&mut cursor) {
            self.node(child, src);
        }
    }

    /// Walks a part of the line that runs in a subshell: a `cd` in it leaves the rest of
    /// the line in a directory this analysis no longer claims to know.
    fn scoped(&mut self, n: Node, src: &str) {
        let cwd = self.cwd.clone();
        self.children(n, src);
        if self.cwd != cwd {
            self.cwd = None;
        }
    }

    fn command(&mut self, n: Node, src: &str) {
        let mut argv = Vec::new();
        for (field, child) in fields(n) {
            match field {
                Some("redirect") => self.node(child, src),
                Some("name") | Some("argument") => argv.push(word(child, src)),
                _ => {}
            }
        }
        let fed = self.ancestry.fed.contains(&n.id());
        self.simple(&argv, fed);
        for (field, child) in fields(n) {
            if field != Some("redirect") {
                self.node(child, src);
            }
        }
    }

    /// A redirection: writing outside the workspace is a reason.
    fn redirect(&mut self, n: Node, src: &str) {
        let Some(destination) = n.child_by_field_name("destination") else {
            return;
        };
        let mut cursor = n.walk();
        let operator = n
            .children(&mut cursor)
            .filter(|c| !c.is_named())
            .map(|c| kind(c))
            .next()
            .unwrap_or("");
        let writes = match operator {
            ">" | ">>" | "&>" | "&>>" | ">|" | "<>" => true,
            // `>&2` duplicates a descriptor; `>&file` is `&>file`.
            ">&" => kind(destination) != "number" && text(destination, src) != "-",
            _ => false,
        };
        if writes {
            let target = word(destination, src);
            self.write(&target);
        }
    }

    /// A file a command writes: outside the workspace (or unknown) is a reason.
    pub(super) fn write(&mut self, target: &Word) {
        let t = target.text.as_str();
        if !target.known && t.contains("{}") && self.found_inside {
            // A path `find -exec` passes: found beneath starting points inside the
            // workspace (find does not follow links unless told to).
            return;
        }
        if !target.known || t.starts_with('~') {
            self.reason(Reason::WritesOutside(t.to_string()));
            return;
        }
        if target.glob {
            // Only a last component may be a pattern, and one that cannot match `..`.
            let (dir, pattern) = t.rsplit_once('/').unwrap_or(("", t));
            let dir_glob = dir.contains(['*', '?', '[']);
            if dir_glob || pattern.starts_with('.') || pattern.starts_with('[') {
                self.reason(Reason::WritesOutside(t.to_string()));
                return;
            }
        }
        // Judged after normalising: `/dev/fd/../../etc/x` is `/etc/x`.
        match paths::absolute(t, self.cwd.as_deref()) {
            None => self.reason(Reason::UnknownDirectory),
            Some(path) => {
                if DEVICES.contains(&path.as_str()) || descriptor(&path) {
                    return;
                }
                if paths::inside(&path, &self.root).is_none() {
                    self.reason(Reason::WritesOutside(t.to_string()));
                } else {
                    if runs_git(&path) {
                        self.reason(Reason::RunsProgram(format!(
                            "a write to {t}, git's hooks or configuration, which run programs"
                        )));
                    }
                    if !self.writes.contains(&path) {
                        self.writes.push(path);
                    }
                }
            }
        }
    }

    /// An assignment (`NAME=value`, `export NAME=value`, `env NAME=value`).
    pub(super) fn assign(&mut self, name: &str, value: Option<&Word>) {
        if COMMAND_VARIABLES.contains(&name) {
            match value {
                Some(v) if !v.known => self.reason(Reason::Assignment(name.to_string())),
                Some(v) if !v.text.trim().is_empty() => self.nested(&v.text.clone()),
                _ => {}
            }
        } else if running_variable(name) {
            self.reason(Reason::Assignment(name.to_string()));
        }
    }
}

/// True for a path into a git repository's hooks, configuration or attributes (which
/// name programs git runs: hooks, `core.fsmonitor`, filters, diff drivers), or the
/// repository folder itself: writing one makes a later `git` run another program.
/// `path` is normalised (no `.` or `..` components).
pub fn runs_git(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    parts.iter().enumerate().any(|(i, p)| {
        *p == ".git"
            && match parts.get(i + 1) {
                None => true,
                Some(&next) => matches!(next, "hooks" | "config" | "info" | "modules" | "*"),
            }
    }) || parts
        .last()
        .is_some_and(|f| *f == ".gitattributes" || *f == ".gitmodules")
}

/// True for `/dev/fd/N` (an open descriptor, digits only).
fn descriptor(path: &str) -> bool {
    path.strip_prefix("/dev/fd/")
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// True for `NAME=value` or `NAME+=value` with a plain name (a declaration's word that
/// tree-sitter left as a word).
fn assignment_name(text: &str) -> bool {
    text.split_once('=')
        .is_some_and(|(name, _)| scan::identifier(name.strip_suffix('+').unwrap_or(name)))
}

/// A node's named children with their field names, in one pass of a cursor
/// (`Node::field_name_for_child` walks the children from the first each time).
fn fields<'t>(n: Node<'t>) -> Vec<(Option<&'t str>, Node<'t>)> {
    let mut out = Vec::new();
    let mut cursor = n.walk();
    if cursor.goto_first_child() {
        loop {
            let child = cursor.node();
            if child.is_named() {
                out.push((cursor.field_name(), child));
            }
            if !cursor.goto_next_sibling() {
                break;
            }
        }
    }
    out
}

fn text<'s>(n: Node, src: &'s str) -> &'s str {
    src.get(n.byte_range()).unwrap_or("")
}

/// True when a command's input is fed by the line: a here-document, a here-string, or
/// the command before it in a pipeline. `path` holds its ancestors, the root first.
fn stdin_fed(n: Node, path: &[Node]) -> bool {
    let mut current = n;
    let mut up = path.iter().rev();
    loop {
        let mut cursor = current.walk();
        if current
            .children(&mut cursor)
            .any(|c| matches!(kind(c), "heredoc_redirect" | "herestring_redirect"))
        {
            return true;
        }
        let Some(parent) = up.next() else {
            return false;
        };
        match kind(*parent) {
            "redirected_statement" => current = *parent,
            "pipeline" => {
                // `cat <<EOF | sh` nests the rest of the pipeline inside the here-doc.
                return parent.named_child(0).map(|f| f.id()) != Some(current.id())
                    || up.next().is_some_and(|g| kind(*g) == "heredoc_redirect");
            }
            _ => return false,
        }
    }
}

/// A word being built: its text after quote removal, whether every part of it is known,
/// and its unquoted source text (where brace expansion happens).
struct Build {
    text: String,
    known: bool,
    bare: String,
}

impl Build {
    fn unknown(&mut self, raw: &str) {
        self.text.push_str(raw);
        self.known = false;
    }
}

/// One word of the line after quote removal.
pub(super) fn word(n: Node, src: &str) -> Word {
    let mut b = Build {
        text: String::new(),
        known: true,
        bare: String::new(),
    };
    piece(n, src, &mut b);
    // `{a,b}` and `{1..3}` become several words when the line runs.
    if b.bare.contains('{')
        && b.bare.contains('}')
        && (b.bare.contains(',') || b.bare.contains(".."))
    {
        b.known = false;
    }
    let glob = b.bare.contains(['*', '?', '[']);
    Word {
        text: b.text,
        known: b.known,
        glob,
    }
}

fn piece(n: Node, src: &str, b: &mut Build) {
    let raw = text(n, src);
    match kind(n) {
        "word" | "extglob_pattern" => {
            b.bare.push_str(raw);
            b.text.push_str(&unescape_bare(raw));
        }
        "number" if n.named_child_count() == 0 => b.text.push_str(raw),
        "raw_string" => {
            let inner = raw.strip_prefix('\'').and_then(|r| r.strip_suffix('\''));
            match inner {
                Some(inner) => b.text.push_str(inner),
                None => b.unknown(raw),
            }
        }
        "string" => {
            // Literal text lies in `string_content` children and between children.
            let start = n.start_byte() + 1;
            let end = if raw.len() >= 2 && raw.ends_with('"') {
                n.end_byte() - 1
            } else {
                n.end_byte()
            };
            let mut pos = start;
            let mut cursor = n.walk();
            for child in n.named_children(&mut cursor) {
                b.text.push_str(&unescape_quoted(
                    src.get(pos..child.start_byte()).unwrap_or(""),
                ));
                if kind(child) == "string_content" {
                    b.text.push_str(&unescape_quoted(text(child, src)));
                } else {
                    piece(child, src, b);
                }
                pos = child.end_byte();
            }
            b.text
                .push_str(&unescape_quoted(src.get(pos..end).unwrap_or("")));
        }
        "translated_string" => match n.named_child(0) {
            Some(s) => piece(s, src, b),
            None => b.unknown(raw),
        },
        "ansi_c_string" => {
            // `$'…'` without escapes is plain text; with them, its value is only worked
            // out when it runs (`$'\x72m'` is `rm`).
            let inner = raw.strip_prefix("$'").and_then(|r| r.strip_suffix('\''));
            match inner {
                Some(inner) if !inner.contains('\\') => b.text.push_str(inner),
                _ => b.unknown(raw),
            }
        }
        "concatenation" | "command_name" => {
            let mut pos = n.start_byte();
            let mut cursor = n.walk();
            for child in n.children(&mut cursor) {
                let gap = src.get(pos..child.start_byte()).unwrap_or("");
                b.bare.push_str(gap);
                b.text.push_str(&unescape_bare(gap));
                if child.is_named() {
                    piece(child, src, b);
                } else {
                    let t = text(child, src);
                    b.bare.push_str(t);
                    b.text.push_str(t);
                }
                pos = child.end_byte();
            }
        }
        "simple_expansion" | "expansion" => {
            if (raw == "$HOME" || raw == "${HOME}") && b.text.is_empty() {
                b.text.push('~');
            } else {
                b.unknown(raw);
            }
        }
        _ => b.unknown(raw),
    }
}

/// Quote removal outside quotes: a backslash keeps the next character; a backslash and
/// a newline vanish.
fn unescape_bare(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') => {}
                Some(next) => out.push(next),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Quote removal inside double quotes: a backslash escapes only `$`, `` ` ``, `"`, `\`
/// and a newline.
fn unescape_quoted(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('\n') => {
                    chars.next();
                }
                Some(&next @ ('$' | '`' | '"' | '\\')) => {
                    out.push(next);
                    chars.next();
                }
                _ => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}
