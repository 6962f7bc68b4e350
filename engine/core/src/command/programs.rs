//! What a simple command runs, by its program: wrappers run another command (keyed too),
//! shells and `eval` run text (reasons), interpreters given inline code get their own
//! key, git and package runners have options that run commands.

use super::parse::Walker;
use super::{Reason, Word, paths, scan};

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

/// git's global options (before the subcommand) the analysis knows.
const GIT_GLOBAL_OPTIONS: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--super-prefix",
    "--no-pager",
    "-P",
    "-p",
    "--paginate",
    "--bare",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--version",
    "-v",
    "--help",
    "-h",
    "--html-path",
    "--man-path",
    "--info-path",
    "--exec-path",
    "--list-cmds",
    "--no-lazy-fetch",
    "--no-advice",
];

/// Long options of git subcommands that run a program (or make git run one).
const GIT_RUNS_LONG: &[&str] = &[
    "upload-pack",
    "receive-pack",
    "exec",
    "exec-path",
    "extcmd",
    "open-files-in-pager",
    "ext-diff",
    "textconv",
    "template",
    "config",
    "tool",
    "gpg-program",
    "sequence-editor",
    "editor",
    "filter",
    "ssh-command",
    "run",
];

/// Long options of git subcommands whose value is a file or folder git writes.
const GIT_WRITES_LONG: &[&str] = &["output", "output-directory", "separate-git-dir"];

/// The options of `xargs` that take no value.
const XARGS_FLAGS: &[&str] = &[
    "-0",
    "--null",
    "-r",
    "--no-run-if-empty",
    "-t",
    "--verbose",
    "-p",
    "--interactive",
    "-x",
    "--exit",
    "-o",
    "--open-tty",
    "--show-limits",
];

/// The options of `xargs` that take a value.
const XARGS_VALUES: &[&str] = &[
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
];

/// git options whose value is the next word (so an unknown word there is only text).
const GIT_VALUE_OPTIONS: &[&str] = &[
    "--message",
    "--author",
    "--date",
    "--format",
    "--pretty",
    "--since",
    "--until",
    "--after",
    "--before",
    "--grep",
    "--max-count",
    "--skip",
    "--branch",
    "--depth",
    "--origin",
    "--reference",
    "--committer",
    "--file",
    "--reuse-message",
    "--fixup",
    "--squash",
    "--onto",
    "--strategy",
    "--strategy-option",
    "--abbrev",
    "--unified",
    "--dirstat",
    "--word-diff",
    "--color",
    "--set-upstream-to",
    "--points-at",
    "--contains",
    "--merged",
    "--no-merged",
    "--sort",
    "--jobs",
    "--shallow-since",
    "--shallow-exclude",
    "--filter-by",
];

/// git short options whose value is the next word.
const GIT_SHORT_VALUES: &[&str] = &["m", "n", "b", "B", "C", "F", "S", "G", "U", "j", "X", "s"];

/// find's predicates that take a value (the next word).
const FIND_VALUE_PREDICATES: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-lname",
    "-ilname",
    "-type",
    "-xtype",
    "-size",
    "-newer",
    "-anewer",
    "-cnewer",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-used",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-perm",
    "-links",
    "-inum",
    "-samefile",
    "-maxdepth",
    "-mindepth",
    "-regextype",
    "-fstype",
    "-context",
    "-printf",
    "-files0-from",
    "-D",
];

/// find's predicates, operators and options without a value.
const FIND_PREDICATES: &[&str] = &[
    "-print",
    "-print0",
    "-ls",
    "-prune",
    "-quit",
    "-delete",
    "-true",
    "-false",
    "-empty",
    "-nouser",
    "-nogroup",
    "-readable",
    "-writable",
    "-executable",
    "-depth",
    "-mount",
    "-xdev",
    "-follow",
    "-daystart",
    "-noleaf",
    "-ignore_readdir_race",
    "-noignore_readdir_race",
    "-not",
    "-a",
    "-and",
    "-o",
    "-or",
    "-L",
    "-P",
    "-H",
    "-O0",
    "-O1",
    "-O2",
    "-O3",
    "-warn",
    "-nowarn",
    "-help",
    "--help",
    "-version",
    "--version",
];

/// cargo's own subcommands (and the usual aliases); any other runs `cargo-<name>`.
const CARGO_COMMANDS: &[&str] = &[
    "add",
    "b",
    "bench",
    "build",
    "c",
    "check",
    "clean",
    "clippy",
    "config",
    "d",
    "doc",
    "fetch",
    "fix",
    "fmt",
    "generate-lockfile",
    "help",
    "info",
    "init",
    "install",
    "locate-project",
    "login",
    "logout",
    "metadata",
    "miri",
    "new",
    "owner",
    "package",
    "pkgid",
    "publish",
    "r",
    "remove",
    "report",
    "rm",
    "run",
    "rustc",
    "rustdoc",
    "search",
    "t",
    "test",
    "tree",
    "uninstall",
    "update",
    "vendor",
    "verify-project",
    "version",
    "yank",
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
    #[expect(
        clippy::too_many_lines,
        reason = "one arm per program or family of programs: the dispatch table a newcomer adds a program to"
    )]
    pub(super) fn simple(&mut self, argv: &[Word], fed: bool) {
        let Some(first) = argv.first() else {
            return;
        };
        if !first.known || first.glob {
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
                self.package_manager(name, args);
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
            "cargo" => self.cargo(args),
            _ if self.builtin(name, args) => {}
            _ if self.table(name, args) => {}
            _ => self.interpreter(index, &program, args, fed),
        }
    }

    /// bash's builtins that take variable names, change how later commands are found or
    /// run, or evaluate arithmetic: true when `name` is one (and its words were read).
    fn builtin(&mut self, name: &str, args: &[Word]) -> bool {
        match name {
            "alias" | "shopt" | "enable" | "fc" | "bind" | "complete" | "compopt" | "coproc"
            | "caller" | "history" => {
                if !(name == "history" && args.is_empty()) && name != "caller" {
                    self.reason(Reason::Builtin(name.to_string()));
                }
            }
            "let" => self.reason(Reason::Arithmetic(format!(
                "let {}",
                args.iter()
                    .map(|a| a.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            ))),
            "hash" => {
                if args
                    .iter()
                    .any(|a| !a.known || (a.text.starts_with('-') && a.text.contains('p')))
                {
                    self.reason(Reason::Builtin("hash -p".to_string()));
                }
            }
            "compgen" => {
                if args
                    .iter()
                    .any(|a| !a.known || (a.text.starts_with('-') && a.text.contains(['C', 'F'])))
                {
                    self.reason(Reason::Builtin("compgen -C/-F".to_string()));
                }
            }
            "set" => self.set(args),
            "read" => {
                let o = options(
                    args,
                    &["-a", "-d", "-i", "-n", "-N", "-p", "-t", "-u"],
                    false,
                );
                for (opt, value) in &o.values {
                    if opt == "-a" && !(value.known && scan::identifier(&value.text)) {
                        self.reason(Reason::VariableName(format!("read -a {}", value.text)));
                    }
                }
                self.variable_names("read", &args[o.rest..], &[]);
            }
            "mapfile" | "readarray" => {
                let o = options(args, &["-d", "-n", "-O", "-s", "-u", "-C", "-c"], false);
                if o.has(&["-C"]) {
                    self.reason(Reason::Builtin(format!("{name} -C")));
                }
                self.variable_names(name, &args[o.rest..], &[]);
            }
            "printf" => {
                let o = options(args, &["-v"], false);
                if let Some(v) = o.value(&["-v"])
                    && !(v.known && scan::identifier(&v.text))
                {
                    self.reason(Reason::VariableName(format!("printf -v {}", v.text)));
                }
            }
            "getopts" => {
                if let Some(var) = args.get(1)
                    && !(var.known && scan::identifier(&var.text))
                {
                    self.reason(Reason::VariableName(format!("getopts {}", var.text)));
                }
            }
            "wait" => {
                let o = options(args, &["-p"], false);
                if let Some(v) = o.value(&["-p"])
                    && !(v.known && scan::identifier(&v.text))
                {
                    self.reason(Reason::VariableName(format!("wait -p {}", v.text)));
                }
            }
            "test" | "[" => {
                for pair in args.windows(2) {
                    if pair[0].known
                        && pair[0].text == "-v"
                        && !(pair[1].known && scan::identifier(&pair[1].text))
                    {
                        self.reason(Reason::VariableName(format!("-v {}", pair[1].text)));
                    }
                }
            }
            "unset" => self.variable_names("unset", args, &[]),
            "declare" | "typeset" | "local" | "export" | "readonly" => {
                for a in args {
                    self.declared(name, a);
                }
            }
            _ => return false,
        }
        true
    }

    /// `set`: options that only make the shell stricter or more verbose.
    fn set(&mut self, args: &[Word]) {
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            i += 1;
            let t = a.text.as_str();
            if !a.known {
                self.reason(Reason::Builtin(format!("set {t}")));
                continue;
            }
            if t == "--" || t == "-" {
                return;
            }
            let Some(flags) = t.strip_prefix('-').or_else(|| t.strip_prefix('+')) else {
                // Positional parameters.
                return;
            };
            for c in flags.chars() {
                match c {
                    'e' | 'u' | 'x' | 'v' | 'f' | 'C' | 'n' | 'b' | 'm' | 'h' | 'B' | 'H' => {}
                    'o' => {
                        let option = args.get(i).filter(|o| o.known).map(|o| o.text.as_str());
                        i += 1;
                        match option {
                            Some(
                                "errexit" | "nounset" | "pipefail" | "xtrace" | "verbose"
                                | "noglob" | "noclobber" | "noexec" | "notify" | "hashall"
                                | "braceexpand" | "monitor",
                            ) => {}
                            other => self.reason(Reason::Builtin(format!(
                                "set -o {}",
                                other.unwrap_or("…")
                            ))),
                        }
                    }
                    _ => self.reason(Reason::Builtin(format!("set {t}"))),
                }
            }
        }
    }

    /// cargo: `--config`, `+toolchain` and `-Z` change what it runs; an unknown
    /// subcommand is a program of its own (`cargo-<name>`).
    fn cargo(&mut self, args: &[Word]) {
        let mut i = 0;
        let mut sub: Option<String> = None;
        while i < args.len() {
            let a = &args[i];
            let t = a.text.as_str();
            i += 1;
            if !a.known {
                self.reason(Reason::UnknownOption(format!("cargo {t}")));
                continue;
            }
            if t == "--" {
                break;
            }
            if t.starts_with('+') && sub.is_none() {
                self.reason(Reason::RunsProgram(format!(
                    "cargo {t} (another toolchain)"
                )));
                continue;
            }
            let name = t.split('=').next().unwrap_or(t);
            match name {
                "--config" => self.reason(Reason::RunsProgram("cargo --config".to_string())),
                _ if name.starts_with("-Z") => {
                    self.reason(Reason::RunsProgram(format!("cargo {name}")));
                }
                "--manifest-path" | "--target-dir" | "--artifact-dir" | "--out-dir" | "--root" => {
                    let value = match t.split_once('=') {
                        Some((_, v)) => Some(Word::literal(v)),
                        None => {
                            i += 1;
                            args.get(i - 1).cloned()
                        }
                    };
                    if let Some(v) = value {
                        if name == "--manifest-path" {
                            self.inside("cargo", &v, "a manifest outside the workspace");
                        } else {
                            self.write(&v);
                        }
                    }
                }
                _ if t.starts_with('-') => {}
                _ if sub.is_none() => {
                    sub = Some(t.to_string());
                    if !CARGO_COMMANDS.contains(&t) {
                        let argv = args[i - 1..].to_vec();
                        let key = format!("shell:cargo {t}");
                        self.deeper(|w| {
                            w.push(key, &argv);
                        });
                    }
                }
                _ => {}
            }
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
        self.known_flags(
            "env",
            &o.flags,
            &[
                "-i",
                "--ignore-environment",
                "-0",
                "--null",
                "-v",
                "--debug",
                "-u",
                "--unset",
                "-C",
                "--chdir",
                "-S",
                "--split-string",
                "--block-signal",
                "--default-signal",
                "--ignore-signal",
                "--list-signal-handling",
            ],
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
        let o = options(args, XARGS_VALUES, false);
        self.known_flags("xargs", &o.flags, &[XARGS_FLAGS, XARGS_VALUES].concat());
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
                glob: false,
            }),
        }
        self.inner(&argv, true);
    }

    /// `find … -exec CMD … ;` runs CMD with `{}` a found path; `-delete` gets its own
    /// key.
    fn find(&mut self, index: usize, program: &str, args: &[Word]) {
        self.find_predicates(args);
        // Starting points: the words before the first predicate (`.` when none), all
        // known and inside the workspace, and no option that follows links.
        let starts: Vec<&Word> = args
            .iter()
            .take_while(|w| {
                !(w.known && (w.text.starts_with('-') || w.text == "(" || w.text == "!"))
            })
            .collect();
        let follows = args
            .iter()
            .any(|w| w.known && matches!(w.text.as_str(), "-L" | "-follow" | "-H"));
        let starts_inside = !follows
            && starts.iter().all(|w| {
                w.known
                    && !w.glob
                    && paths::absolute(&w.text, self.cwd.as_deref())
                        .is_some_and(|p| paths::inside(&p, &self.root).is_some())
            });
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
                let outer = self.found_inside;
                self.found_inside = starts_inside;
                self.inner(&argv, false);
                self.found_inside = outer;
            } else if t == "-delete" {
                self.rekey(index, format!("shell:{program} -delete"));
            }
            i += 1;
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "git's global options, one arm each, read in the order git reads them"
    )]
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
        for flag in &o.flags {
            if !GIT_GLOBAL_OPTIONS.contains(&flag.as_str()) {
                self.reason(Reason::UnknownOption(format!("git {flag}")));
            }
        }
        for (name, value) in &o.values {
            match name.as_str() {
                "-c" => {
                    let key = value.text.split('=').next().unwrap_or("");
                    if !value.known || !git_safe_config(key) {
                        self.reason(Reason::GitRunsCommand(format!("-c {key}")));
                    }
                }
                "--config-env" => self.reason(Reason::GitRunsCommand(name.clone())),
                "-C" | "--git-dir" | "--work-tree" => {
                    self.inside(
                        "git",
                        value,
                        "a repository outside the workspace, whose configuration may run programs",
                    );
                    // Git writes there (`git -C d init`): a link on the way out of the
                    // workspace is found as for any write.
                    if value.known
                        && let Some(path) = paths::absolute(&value.text, self.cwd.as_deref())
                        && paths::inside(&path, &self.root).is_some()
                        && !self.writes.contains(&path)
                    {
                        self.writes.push(path);
                    }
                }
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
        self.git_arguments(&sub, rest);
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
        let sandboxed = o.has(&["--sandbox", "-S"]);
        if !sandboxed {
            for (opt, what) in [
                ("-f", "a program from a file"),
                ("--file", "a program from a file"),
                ("-E", "a program from a file"),
                ("--exec", "a program from a file"),
                ("-i", "an included source file"),
                ("--include", "an included source file"),
                ("-l", "an extension library"),
                ("--load", "an extension library"),
            ] {
                if o.has(&[opt]) {
                    self.reason(Reason::RunsProgram(format!("{program} {opt} ({what})")));
                }
            }
        }
        let runs = code.iter().any(|c| {
            !c.known || c.text.contains("system") || c.text.replace("||", "").contains('|')
        });
        if runs {
            self.rekey(index, format!("shell:{program} system"));
        }
        for c in code.iter().filter(|c| c.known) {
            if sandboxed {
                break;
            }
            if c.text.contains("@load") || c.text.contains("@include") {
                self.reason(Reason::RunsProgram(format!("{program} @load/@include")));
            }
            for target in awk_outputs(&c.text) {
                match target {
                    Some(file) => self.write(&Word::literal(&file)),
                    None => self.reason(Reason::WritesOutside(format!(
                        "{program} print > (a file named by an expression)"
                    ))),
                }
            }
        }
    }

    /// A git subcommand's words: options that run a program or write a file (git takes
    /// any unambiguous prefix of a long option, so a prefix of one counts), remotes
    /// that run a command (`ext::`, `fd::`), and words the line does not give (which
    /// may be split into options).
    #[expect(
        clippy::too_many_lines,
        reason = "one arm per git subcommand whose arguments write or run something"
    )]
    fn git_arguments(&mut self, sub: &str, rest: &[Word]) {
        let mut i = 0;
        let mut ended = false;
        while i < rest.len() {
            let w = &rest[i];
            let t = w.text.as_str();
            i += 1;
            if t.contains("ext::") || t.contains("fd::") {
                self.reason(Reason::GitRunsCommand(format!("{sub} {t}")));
            }
            if !w.known {
                let value_of_known = t.split_once('=').is_some_and(|(o, _)| {
                    o.starts_with("--") && !o.contains('$') && GIT_VALUE_OPTIONS.contains(&o)
                });
                if !ended && !value_of_known {
                    self.reason(Reason::UnknownOption(format!("git {sub} {t}")));
                }
                continue;
            }
            if ended {
                continue;
            }
            if t == "--" {
                ended = true;
                continue;
            }
            if let Some(long) = t.strip_prefix("--") {
                let (name, attached) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(Word::literal(v))),
                    None => (long, None),
                };
                if name.is_empty() || name.starts_with("no-") {
                    continue;
                }
                let prefix_of =
                    |list: &[&str]| list.iter().any(|o| o.starts_with(name) && name.len() >= 2);
                if prefix_of(GIT_RUNS_LONG) {
                    self.reason(Reason::GitRunsCommand(format!("{sub} --{name}")));
                } else if prefix_of(GIT_WRITES_LONG) {
                    let value = attached.or_else(|| {
                        i += 1;
                        rest.get(i - 1).cloned()
                    });
                    match value {
                        Some(v) => self.write(&v),
                        None => self.reason(Reason::WritesOutside(format!("git {sub} --{name}"))),
                    }
                } else if GIT_VALUE_OPTIONS.contains(&format!("--{name}").as_str())
                    && attached.is_none()
                {
                    // Its value is the next word, whatever the line gives there.
                    i += 1;
                }
                continue;
            }
            if t.starts_with('-') && t.len() > 1 {
                let short = &t[1..];
                match sub {
                    "grep" if short.contains('O') => {
                        self.reason(Reason::GitRunsCommand("grep -O".to_string()));
                    }
                    "format-patch" | "archive" if short.starts_with('o') => {
                        let value = match &short[1..] {
                            "" => {
                                i += 1;
                                rest.get(i - 1).cloned()
                            }
                            v => Some(Word::literal(v)),
                        };
                        if let Some(v) = value {
                            self.write(&v);
                        }
                    }
                    "clone" if short.starts_with('c') => {
                        self.reason(Reason::GitRunsCommand("clone -c".to_string()));
                    }
                    "difftool" | "mergetool" if short.contains(['t', 'x']) => {
                        self.reason(Reason::GitRunsCommand(format!("{sub} {t}")));
                    }
                    _ => {
                        // `-m MSG`, `-n N`: the next word is a value, given or not.
                        if short.len() == 1 && GIT_SHORT_VALUES.contains(&short) {
                            i += 1;
                        }
                    }
                }
            }
        }
        // What some subcommands write or run by their operands.
        let operands: Vec<&Word> = rest
            .iter()
            .filter(|w| w.known && !w.text.starts_with('-'))
            .collect();
        match sub {
            "difftool" | "mergetool" => {
                self.reason(Reason::GitRunsCommand(format!("{sub} (a configured tool)")));
            }
            "clone" if operands.len() >= 2 => self.write(operands[1]),
            "init" if !operands.is_empty() => self.write(operands[0]),
            "worktree"
                if operands.first().is_some_and(|w| w.text == "add") && operands.len() >= 2 =>
            {
                self.write(operands[1]);
            }
            "bundle"
                if operands.first().is_some_and(|w| w.text == "create") && operands.len() >= 2 =>
            {
                self.write(operands[1]);
            }
            _ => {}
        }
    }

    /// Options of npm, pnpm, yarn and bun that name a program to run or a configuration
    /// that may (their parsers take abbreviations, so a prefix counts too), and `config
    /// set`/`edit`, which can name the shell that runs scripts.
    fn package_manager(&mut self, name: &str, args: &[Word]) {
        const RUNS: &[&str] = &[
            "script-shell",
            "node-options",
            "userconfig",
            "globalconfig",
            "shell",
            "git",
            "editor",
            "browser",
            "viewer",
            "init-module",
            "onload-script",
        ];
        for a in args {
            let t = a.text.as_str();
            if let Some(long) = t.strip_prefix("--") {
                let option = long.split('=').next().unwrap_or(long);
                if option.len() >= 3 && RUNS.iter().any(|r| r.starts_with(option)) {
                    self.reason(Reason::RunsProgram(format!("{name} --{option}")));
                }
            }
        }
        let words: Vec<&str> = args
            .iter()
            .filter(|a| !a.text.starts_with('-'))
            .map(|a| a.text.as_str())
            .collect();
        if matches!(words.as_slice(), ["config" | "c", "set" | "edit", ..])
            || matches!(words.as_slice(), ["set", ..]) && name == "npm"
        {
            self.reason(Reason::RunsProgram(format!("{name} config set")));
        }
    }

    /// find's predicates that write a file (`-fprint FILE`) and any the analysis does
    /// not know.
    fn find_predicates(&mut self, args: &[Word]) {
        let mut i = 0;
        let mut in_exec = false;
        // Starting points come first: words before the first predicate.
        while i < args.len() {
            let w = &args[i];
            let t = w.text.as_str();
            i += 1;
            if in_exec {
                if w.known && (t == ";" || t == "+") {
                    in_exec = false;
                }
                continue;
            }
            if !w.known {
                // A starting point or a predicate's value only known when it runs.
                if !args
                    .get(i.wrapping_sub(2))
                    .is_some_and(|p| p.known && FIND_VALUE_PREDICATES.contains(&p.text.as_str()))
                {
                    self.reason(Reason::UnknownOption(format!("find {t}")));
                }
                continue;
            }
            if matches!(t, "-exec" | "-execdir" | "-ok" | "-okdir") {
                in_exec = true;
                continue;
            }
            if matches!(t, "-fprint" | "-fprint0" | "-fls" | "-fprintf") {
                if let Some(file) = args.get(i) {
                    self.write(&file.clone());
                }
                i += if t == "-fprintf" { 2 } else { 1 };
                continue;
            }
            if FIND_VALUE_PREDICATES.contains(&t) {
                i += 1;
                continue;
            }
            if t.starts_with("-newer") && t.len() == 8 {
                i += 1;
                continue;
            }
            if t.starts_with('-') && t.len() > 1 && !FIND_PREDICATES.contains(&t) {
                self.reason(Reason::UnknownOption(format!("find {t}")));
            }
        }
    }

    /// Options of a wrapper outside those the analysis knows: each asks.
    fn known_flags(&mut self, program: &str, flags: &[String], known: &[&str]) {
        for f in flags {
            if !known.contains(&f.as_str()) {
                self.reason(Reason::UnknownOption(format!("{program} {f}")));
            }
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

/// The files an awk program's `print`/`printf` statements redirect to (`>` and `>>`):
/// a string literal's text, or `None` for a target the program computes. A `>` in a
/// statement that is not a `print` is a comparison.
fn awk_outputs(program: &str) -> Vec<Option<String>> {
    let chars: Vec<char> = program.chars().collect();
    let mut out = Vec::new();
    let mut statement = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' => {
                // A string: skip it, escapes included.
                statement.push(c);
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
                statement.push('"');
            }
            '{' | '}' | ';' | '\n' => statement.clear(),
            '>' => {
                let head = statement.trim_start();
                if head.starts_with("print") {
                    let mut j = i + 1;
                    if chars.get(j) == Some(&'>') {
                        j += 1;
                    }
                    while chars.get(j).is_some_and(|c| c.is_whitespace()) {
                        j += 1;
                    }
                    if chars.get(j) == Some(&'"') {
                        let start = j + 1;
                        let mut end = start;
                        while end < chars.len() && chars[end] != '"' && chars[end] != '\\' {
                            end += 1;
                        }
                        if chars.get(end) == Some(&'"') {
                            out.push(Some(chars[start..end].iter().collect()));
                        } else {
                            out.push(None);
                        }
                    } else {
                        out.push(None);
                    }
                }
                statement.push(c);
            }
            _ => statement.push(c),
        }
        i += 1;
    }
    out
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
