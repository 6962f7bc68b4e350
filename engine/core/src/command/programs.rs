//! What a simple command runs, by its program: wrappers run another command (keyed too),
//! shells and `eval` run text (reasons), interpreters given inline code get their own
//! key, git and package runners have options that run commands.

use super::parse::Walker;
use super::{Reason, Word, paths};

/// Shells: `-c` is a nested shell, no script is a shell reading its input.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish", "csh", "tcsh",
];

/// Git subcommands that are git's own; any other is an alias or a `git-<name>` program
/// and gets its own key (`shell:git lg`).
const GIT_COMMANDS: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "bisect",
    "blame",
    "branch",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "checkout",
    "cherry",
    "cherry-pick",
    "clean",
    "clone",
    "commit",
    "commit-tree",
    "config",
    "count-objects",
    "describe",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "difftool",
    "fetch",
    "filter-branch",
    "for-each-ref",
    "format-patch",
    "fsck",
    "gc",
    "grep",
    "hash-object",
    "help",
    "init",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "maintenance",
    "merge",
    "merge-base",
    "mergetool",
    "mv",
    "notes",
    "prune",
    "pull",
    "push",
    "range-diff",
    "rebase",
    "reflog",
    "remote",
    "repack",
    "replace",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "shortlog",
    "show",
    "show-branch",
    "show-ref",
    "sparse-checkout",
    "stash",
    "status",
    "submodule",
    "switch",
    "symbolic-ref",
    "tag",
    "update-index",
    "update-ref",
    "var",
    "verify-commit",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
];

/// Git configuration keys (lowercase, or prefixes ending in `.`) that run nothing: `git
/// -c` or `git config` with any other key may set a pager, an editor, a hook path, an
/// alias or an ssh command, and is a reason.
const GIT_SAFE_CONFIG: &[&str] = &[
    "user.",
    "color.",
    "advice.",
    "pull.",
    "push.",
    "fetch.",
    "status.",
    "branch.",
    "log.",
    "format.",
    "init.defaultbranch",
    "core.quotepath",
    "core.autocrlf",
    "core.filemode",
    "commit.gpgsign",
    "tag.gpgsign",
    "merge.conflictstyle",
    "diff.renames",
];

/// A wrapper's leading options.
struct Options {
    /// Options seen, by name (`-c`, `--eval`; a long option without its `=value`).
    flags: Vec<String>,
    /// Options with their values.
    values: Vec<(String, Word)>,
    /// The index of the first operand (the wrapped program, the script).
    rest: usize,
}

impl Options {
    fn has(&self, names: &[&str]) -> bool {
        self.flags.iter().any(|f| names.contains(&f.as_str()))
    }

    fn value(&self, names: &[&str]) -> Option<&Word> {
        self.values
            .iter()
            .find(|(n, _)| names.contains(&n.as_str()))
            .map(|(_, v)| v)
    }
}

/// Reads leading options: short ones may be combined (`-lc`), a value may be attached
/// (`-n10`, `--user=x`) or the next word (`-n 10`); `--` ends them, and so does the first
/// operand or a word whose value the line does not give. With `plus`, `+o` is an option
/// too (the shells').
fn options(args: &[Word], with_value: &[&str], plus: bool) -> Options {
    let mut o = Options {
        flags: Vec::new(),
        values: Vec::new(),
        rest: args.len(),
    };
    let mut i = 0;
    while i < args.len() {
        let w = &args[i];
        let t = w.text.as_str();
        if !w.known {
            o.rest = i;
            return o;
        }
        if t == "--" {
            o.rest = i + 1;
            return o;
        }
        let sign = match t.chars().next() {
            Some('-') => '-',
            Some('+') if plus => '+',
            _ => {
                o.rest = i;
                return o;
            }
        };
        if t.len() == 1 {
            o.rest = i;
            return o;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((n, v)) => (format!("--{n}"), Some(v)),
                None => (t.to_string(), None),
            };
            if with_value.contains(&name.as_str()) {
                let value = match attached {
                    Some(v) => Some(Word::literal(v)),
                    None => {
                        i += 1;
                        args.get(i).cloned()
                    }
                };
                if let Some(v) = value {
                    o.values.push((name.clone(), v));
                }
            }
            o.flags.push(name);
        } else {
            let cluster = &t[1..];
            for (at, c) in cluster.char_indices() {
                let name = format!("{sign}{c}");
                o.flags.push(name.clone());
                if with_value.contains(&name.as_str()) {
                    let attached = &cluster[at + c.len_utf8()..];
                    let value = if attached.is_empty() {
                        i += 1;
                        args.get(i).cloned()
                    } else {
                        Some(Word::literal(attached))
                    };
                    if let Some(v) = value {
                        o.values.push((name, v));
                    }
                    break;
                }
            }
        }
        i += 1;
    }
    o
}

/// The words' texts joined by spaces, when every one is known.
fn joined(words: &[Word]) -> Option<String> {
    words
        .iter()
        .map(|w| w.known.then_some(w.text.as_str()))
        .collect::<Option<Vec<_>>>()
        .map(|v| v.join(" "))
}

impl Walker {
    /// One simple command: its key, then whatever it runs.
    pub(super) fn simple(&mut self, argv: &[Word], fed: bool) {
        let Some(first) = argv.first() else {
            return;
        };
        if !first.known {
            self.reason(Reason::DynamicProgram(first.text.clone()));
            return;
        }
        let program = self.program(&first.text);
        let index = self.push(format!("shell:{program}"), argv);
        let name = paths::basename(&first.text);
        let args = &argv[1..];
        match name {
            _ if SHELLS.contains(&name) => self.shell(name, args),
            "pwsh" | "powershell" => self.powershell(name, args),
            "eval" => {
                self.reason(Reason::Eval(name.to_string()));
                if let Some(text) = joined(args) {
                    self.nested(&text);
                }
            }
            "trap" => {
                if args.len() >= 2 && !args[0].text.starts_with('-') {
                    self.reason(Reason::Eval(name.to_string()));
                    if args[0].known {
                        self.nested(&args[0].text.clone());
                    }
                }
            }
            "source" | "." => self.reason(Reason::Source(name.to_string())),
            "exec" => {
                self.reason(Reason::Exec);
                let o = options(args, &["-a"], false);
                self.inner(&args[o.rest..], fed);
            }
            "command" => {
                let o = options(args, &[], false);
                if !o.has(&["-v", "-V"]) {
                    self.inner(&args[o.rest..], fed);
                }
            }
            "builtin" | "busybox" | "nohup" | "setsid" => {
                let o = options(args, &[], false);
                self.inner(&args[o.rest..], fed);
            }
            "nice" => self.wrapper(args, &["-n", "--adjustment"], 0, fed),
            "ionice" => self.wrapper(
                args,
                &[
                    "-c",
                    "--class",
                    "-n",
                    "--classdata",
                    "-p",
                    "--pid",
                    "-P",
                    "--pgid",
                ],
                0,
                fed,
            ),
            "timeout" => self.wrapper(args, &["-s", "--signal", "-k", "--kill-after"], 1, fed),
            "stdbuf" => self.wrapper(
                args,
                &["-i", "-o", "-e", "--input", "--output", "--error"],
                0,
                fed,
            ),
            "time" => {
                let o = options(args, &["-f", "--format", "-o", "--output"], false);
                if let Some(file) = o.value(&["-o", "--output"]) {
                    self.write(&file.clone());
                }
                self.inner(&args[o.rest..], fed);
            }
            "env" => self.env(args, fed),
            "watch" => self.watch(args),
            "xargs" => self.xargs(args),
            "find" => self.find(index, &program, args),
            "git" => self.git(args),
            "npx" | "bunx" | "pnpx" => self.package(name, args),
            "npm" | "pnpm" | "yarn" | "bun" => {
                let o = options(args, &[], false);
                let sub = args
                    .get(o.rest)
                    .filter(|w| w.known)
                    .map(|w| w.text.as_str());
                match (name, sub) {
                    ("npm", Some(sub @ ("exec" | "x")))
                    | ("pnpm", Some(sub @ ("dlx" | "exec")))
                    | ("yarn", Some(sub @ ("dlx" | "exec")))
                    | ("bun", Some(sub @ "x")) => {
                        self.package(&format!("{name} {sub}"), &args[o.rest + 1..]);
                    }
                    ("bun", _) => self.interpreter(index, &program, args, fed),
                    _ => {}
                }
            }
            "sudo" | "doas" | "su" | "pkexec" | "run0" => self.privileged(name, args, fed),
            "cd" | "pushd" => self.cd(args),
            _ => self.interpreter(index, &program, args, fed),
        }
    }

    /// The key of a program as written: a bare name is itself; a path inside the
    /// workspace is `./<path>`; a path in a system folder of programs is its name; any
    /// other path is itself, absolute.
    fn program(&mut self, text: &str) -> String {
        if !text.contains('/') || text.starts_with('~') {
            return text.to_string();
        }
        let Some(path) = paths::absolute(text, self.cwd.as_deref()) else {
            self.reason(Reason::UnknownDirectory);
            return text.to_string();
        };
        if let Some(rel) = paths::inside(&path, &self.root) {
            return format!("./{rel}");
        }
        let dir = match path.rsplit_once('/') {
            Some(("", _)) => "/",
            Some((dir, _)) => dir,
            None => "",
        };
        if paths::system_bin(dir) {
            paths::basename(&path).to_string()
        } else {
            path
        }
    }

    /// A command a wrapper runs, one level deeper.
    fn inner(&mut self, argv: &[Word], fed: bool) {
        if !argv.is_empty() {
            self.deeper(|w| w.simple(argv, fed));
        }
    }

    /// A wrapper with options, then `skip` operands of its own (timeout's duration),
    /// then the command it runs.
    fn wrapper(&mut self, args: &[Word], with_value: &[&str], skip: usize, fed: bool) {
        let o = options(args, with_value, false);
        let start = (o.rest + skip).min(args.len());
        self.inner(&args[start..], fed);
    }

    fn shell(&mut self, name: &str, args: &[Word]) {
        let with_value: &[&str] = if name == "fish" {
            &["-c", "--command", "-C", "--init-command"]
        } else {
            &["-o", "+o", "-O", "+O", "--rcfile", "--init-file"]
        };
        let o = options(args, with_value, true);
        if o.has(&["-c", "--command"]) {
            self.reason(Reason::NestedShell(format!("{name} -c")));
            let string = o.value(&["-c", "--command"]).or(args.get(o.rest)).cloned();
            if let Some(s) = string.filter(|s| s.known) {
                self.nested(&s.text);
            }
        } else if o.has(&["-s", "-i"]) || o.rest >= args.len() || args[o.rest].text == "-" {
            self.reason(Reason::ShellReadsInput(name.to_string()));
        }
    }

    fn powershell(&mut self, name: &str, args: &[Word]) {
        let inline = args.iter().any(|a| {
            let t = a.text.to_ascii_lowercase();
            matches!(
                t.as_str(),
                "-c" | "-command" | "-e" | "-ec" | "-encodedcommand"
            )
        });
        if inline {
            self.reason(Reason::NestedShell(format!("{name} -c")));
        } else if args.is_empty() {
            self.reason(Reason::ShellReadsInput(name.to_string()));
        }
    }

    fn privileged(&mut self, name: &str, args: &[Word], fed: bool) {
        self.reason(Reason::Privilege(name.to_string()));
        let with_value: &[&str] = match name {
            "su" => &[
                "-c",
                "--command",
                "-s",
                "--shell",
                "-g",
                "--group",
                "-G",
                "--supp-group",
            ],
            "doas" => &["-u", "-C"],
            "pkexec" => &["--user"],
            "run0" => &["-u", "--user", "-g", "--group", "-D", "--chdir", "--setenv"],
            _ => &[
                "-u",
                "--user",
                "-g",
                "--group",
                "-p",
                "--prompt",
                "-C",
                "--close-from",
                "-D",
                "--chdir",
                "-R",
                "--chroot",
                "-r",
                "--role",
                "-t",
                "--type",
                "-T",
                "--command-timeout",
                "-U",
                "--other-user",
            ],
        };
        let o = options(args, with_value, false);
        if name == "su" {
            if let Some(s) = o.value(&["-c", "--command"]).filter(|s| s.known).cloned() {
                self.nested(&s.text);
            }
        } else {
            self.inner(&args[o.rest..], fed);
        }
    }

    fn env(&mut self, args: &[Word], fed: bool) {
        let o = options(
            args,
            &["-u", "--unset", "-C", "--chdir", "-S", "--split-string"],
            false,
        );
        if let Some(split) = o.value(&["-S", "--split-string"]).cloned() {
            self.reason(Reason::NestedShell("env -S".to_string()));
            if split.known {
                self.nested(&split.text);
            }
        }
        let mut rest = o.rest;
        if args.get(rest).is_some_and(|w| w.known && w.text == "-") {
            rest += 1;
        }
        while let Some(w) = args.get(rest) {
            let Some((name, value)) = w.text.split_once('=').filter(|(n, _)| {
                w.known && !n.is_empty() && n.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
            }) else {
                break;
            };
            self.assign(name, Some(&Word::literal(value)));
            rest += 1;
        }
        match o.value(&["-C", "--chdir"]).cloned() {
            Some(dir) => {
                let cwd = self.cwd.clone();
                self.cwd = if dir.known {
                    paths::absolute(&dir.text, cwd.as_deref())
                } else {
                    None
                };
                self.inner(&args[rest..], fed);
                self.cwd = cwd;
            }
            None => self.inner(&args[rest..], fed),
        }
    }

    /// `watch CMD…` runs `sh -c "CMD …"`; with `-x` it runs the argv itself.
    fn watch(&mut self, args: &[Word]) {
        let o = options(args, &["-n", "--interval", "-q", "--equexit"], false);
        let command = &args[o.rest..];
        if o.has(&["-x", "--exec"]) {
            self.inner(command, false);
        } else if let Some(text) = joined(command) {
            self.nested(&text);
        } else {
            self.reason(Reason::NestedShell("watch".to_string()));
        }
    }

    /// `xargs CMD…` runs CMD with words from its input appended (or put in place of the
    /// `-I` string): those words are not known.
    fn xargs(&mut self, args: &[Word]) {
        let o = options(
            args,
            &[
                "-I",
                "-L",
                "-n",
                "-P",
                "-s",
                "-d",
                "-E",
                "-a",
                "--arg-file",
                "--delimiter",
                "--eof",
                "--replace",
                "--max-lines",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            ],
            false,
        );
        let replace = o.value(&["-I", "--replace"]).map(|w| w.text.clone());
        let mut argv: Vec<Word> = args[o.rest..].to_vec();
        if argv.is_empty() {
            argv.push(Word::literal("echo"));
        }
        match replace.filter(|r| !r.is_empty()) {
            Some(r) => {
                for w in argv.iter_mut().skip(1) {
                    if w.text.contains(&r) {
                        w.known = false;
                    }
                }
            }
            None => argv.push(Word {
                text: "…".to_string(),
                known: false,
            }),
        }
        self.inner(&argv, true);
    }

    /// `find … -exec CMD … ;` runs CMD with `{}` a found path; `-delete` gets its own
    /// key.
    fn find(&mut self, index: usize, program: &str, args: &[Word]) {
        let mut i = 0;
        while i < args.len() {
            let t = args[i].text.as_str();
            if matches!(t, "-exec" | "-execdir" | "-ok" | "-okdir") {
                let mut argv = Vec::new();
                i += 1;
                while let Some(w) = args.get(i) {
                    if w.known && (w.text == ";" || w.text == "+") {
                        break;
                    }
                    let mut w = w.clone();
                    if w.text.contains("{}") {
                        w.known = false;
                    }
                    argv.push(w);
                    i += 1;
                }
                self.inner(&argv, false);
            } else if t == "-delete" {
                self.rekey(index, format!("shell:{program} -delete"));
            }
            i += 1;
        }
    }

    fn git(&mut self, args: &[Word]) {
        let o = options(
            args,
            &[
                "-C",
                "-c",
                "--git-dir",
                "--work-tree",
                "--namespace",
                "--config-env",
                "--super-prefix",
            ],
            false,
        );
        for (name, value) in &o.values {
            match name.as_str() {
                "-c" => {
                    let key = value.text.split('=').next().unwrap_or("");
                    if !value.known || !git_safe_config(key) {
                        self.reason(Reason::GitRunsCommand(format!("-c {key}")));
                    }
                }
                "--config-env" => self.reason(Reason::GitRunsCommand(name.clone())),
                _ => {}
            }
        }
        if o.has(&["--exec-path"]) {
            self.reason(Reason::GitRunsCommand("--exec-path".to_string()));
        }
        let Some(sub) = args.get(o.rest) else {
            return;
        };
        if !sub.known {
            self.reason(Reason::DynamicProgram(format!("git {}", sub.text)));
            return;
        }
        let sub = sub.text.clone();
        let rest = &args[o.rest + 1..];
        if !GIT_COMMANDS.contains(&sub.as_str()) {
            // An alias or a `git-<name>` program: its own key.
            let argv = args[o.rest..].to_vec();
            self.deeper(|w| {
                w.push(format!("shell:git {sub}"), &argv);
            });
        }
        let mut i = 0;
        while i < rest.len() {
            let t = rest[i].text.as_str();
            if t == "--" {
                break;
            }
            let name = t.split('=').next().unwrap_or(t);
            let runs = matches!(
                name,
                "--upload-pack" | "--receive-pack" | "--exec" | "--extcmd"
            ) || (t == "-u" && sub == "clone")
                || (t == "-x" && matches!(sub.as_str(), "rebase" | "difftool"));
            if runs {
                self.reason(Reason::GitRunsCommand(format!("{sub} {name}")));
                if sub == "rebase" {
                    let value = match t.split_once('=') {
                        Some((_, v)) => Some(Word::literal(v)),
                        None => rest.get(i + 1).cloned(),
                    };
                    if let Some(v) = value.filter(|v| v.known) {
                        self.nested(&v.text);
                    }
                }
            }
            i += 1;
        }
        match sub.as_str() {
            "submodule" if rest.iter().any(|w| w.text == "foreach") => {
                self.reason(Reason::GitRunsCommand("submodule foreach".to_string()));
                let at = rest.iter().position(|w| w.text == "foreach").unwrap_or(0);
                let o = options(&rest[at + 1..], &[], false);
                if let Some(text) = joined(&rest[at + 1 + o.rest..]) {
                    self.nested(&text);
                }
            }
            "bisect" if rest.first().is_some_and(|w| w.text == "run") => {
                self.inner(&rest[1..], false);
            }
            "filter-branch" => self.reason(Reason::GitRunsCommand(sub.clone())),
            "config" => {
                // Setting a key: `git config KEY VALUE`, `git config set KEY VALUE`,
                // `--add`/`--replace-all KEY VALUE`.
                let o = options(rest, &["-f", "--file", "--blob", "--type"], false);
                let operands: Vec<&Word> = rest[o.rest..].iter().collect();
                let key = match operands.first().map(|w| w.text.as_str()) {
                    Some("set") => operands.get(1),
                    Some("get" | "list" | "unset" | "get-regexp") => None,
                    _ if operands.len() >= 2 => operands.first(),
                    _ => None,
                };
                if let Some(key) = key {
                    if !key.known || !git_safe_config(&key.text) {
                        self.reason(Reason::GitRunsCommand(format!("config {}", key.text)));
                    }
                } else if o.has(&["-e", "--edit"]) {
                    self.reason(Reason::GitRunsCommand("config --edit".to_string()));
                }
            }
            _ => {}
        }
    }

    /// `npx PKG`, `npm exec PKG`, …: the package is keyed (`shell:npx prettier`), since
    /// it may be fetched and run; `-c` runs a shell string.
    fn package(&mut self, runner: &str, args: &[Word]) {
        let o = options(
            args,
            &[
                "-p",
                "--package",
                "-c",
                "--call",
                "-w",
                "--workspace",
                "--cache",
                "--userconfig",
                "--registry",
            ],
            false,
        );
        if let Some(call) = o.value(&["-c", "--call"]).cloned() {
            self.reason(Reason::NestedShell(format!("{runner} -c")));
            if call.known {
                self.nested(&call.text);
            }
        }
        let Some(package) = args.get(o.rest) else {
            return;
        };
        if !package.known {
            self.reason(Reason::DynamicProgram(package.text.clone()));
            return;
        }
        let key = format!("shell:{runner} {}", package.text);
        let argv = args[o.rest..].to_vec();
        self.deeper(|w| {
            w.push(key, &argv);
        });
    }

    /// Interpreters given inline code get their own key (`shell:python3 -c`): code in
    /// an option, or a program read from the line's input.
    fn interpreter(&mut self, index: usize, program: &str, args: &[Word], fed: bool) {
        let name = paths::basename(program);
        let python = name.starts_with("python") || name.starts_with("pypy");
        let (with_value, inline, flag): (&[&str], &[&str], &str) = if python {
            (&["-c", "-m", "-W", "-X"], &["-c"], "-c")
        } else {
            match name {
                "node" | "nodejs" | "bun" => (
                    &[
                        "-e",
                        "--eval",
                        "-p",
                        "--print",
                        "-r",
                        "--require",
                        "--import",
                        "--loader",
                    ],
                    &["-e", "--eval", "-p", "--print"],
                    "-e",
                ),
                "perl" => (&["-e", "-E", "-I", "-M", "-m"], &["-e", "-E"], "-e"),
                "ruby" => (&["-e", "-I", "-r", "-C"], &["-e"], "-e"),
                "php" => (&["-r", "-c", "-d", "-f"], &["-r"], "-r"),
                "lua" | "luajit" | "Rscript" | "R" | "osascript" => (&["-e", "-l"], &["-e"], "-e"),
                "deno" => {
                    if args.first().is_some_and(|w| w.text == "eval") {
                        self.rekey(index, format!("shell:{program} eval"));
                    }
                    return;
                }
                "awk" | "gawk" | "mawk" | "nawk" => {
                    self.awk(index, program, args);
                    return;
                }
                _ => return,
            }
        };
        let o = options(args, with_value, false);
        let module = python && o.has(&["-m"]);
        let from_input = !module
            && (args.get(o.rest).is_some_and(|w| w.known && w.text == "-")
                || (fed && o.rest >= args.len()));
        if o.has(inline) || from_input {
            self.rekey(index, format!("shell:{program} {flag}"));
        }
    }

    /// awk's program runs commands with `system(…)` and `|`: such a program (or one the
    /// line does not give) is keyed `shell:awk system`.
    fn awk(&mut self, index: usize, program: &str, args: &[Word]) {
        let o = options(
            args,
            &[
                "-F",
                "-v",
                "-f",
                "-e",
                "-i",
                "-l",
                "--field-separator",
                "--assign",
                "--file",
                "--source",
                "--include",
                "--load",
            ],
            false,
        );
        let code: Vec<&Word> = if let Some(source) = o.value(&["-e", "--source"]) {
            vec![source]
        } else if o.has(&["-f", "--file"]) {
            Vec::new()
        } else {
            args.get(o.rest).into_iter().collect()
        };
        let runs = code.iter().any(|c| {
            !c.known || c.text.contains("system") || c.text.replace("||", "").contains('|')
        });
        if runs {
            self.rekey(index, format!("shell:{program} system"));
        }
    }

    fn cd(&mut self, args: &[Word]) {
        let o = options(args, &[], false);
        self.cwd = match args.get(o.rest) {
            Some(dir) if dir.known && dir.text != "-" => {
                paths::absolute(&dir.text, self.cwd.as_deref())
            }
            // Home, the previous directory, or a directory only known when it runs.
            _ => None,
        };
    }
}

/// True for a git configuration key that runs nothing.
fn git_safe_config(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    GIT_SAFE_CONFIG.iter().any(|safe| {
        if safe.ends_with('.') {
            key.starts_with(safe)
        } else {
            key == *safe
        }
    })
}
