//! Programs whose options can make them run, load or write something else: the one
//! table of them ([`PROGRAMS`], shown in `docs/TOOLS.md`) and the reading of their
//! arguments.
//!
//! A grant for one of these programs covers only an invocation whose every option is
//! known: an option that runs or loads another program is a [`Reason::RunsProgram`], a
//! file an option or operand writes outside the workspace is a
//! [`Reason::WritesOutside`], and an option the table does not know is a
//! [`Reason::UnknownOption`] — as is a word whose value the line does not give, since
//! bash may split it into options (`x='--compress-program=sh'; sort $x`). GNU long
//! options may be abbreviated; an abbreviation is not in the table, so it asks.

use super::parse::Walker;
use super::{Reason, Word, paths};

/// One program of the table, as `docs/TOOLS.md` shows it.
#[derive(Debug, Clone, Copy)]
pub struct Program {
    /// The program's names.
    pub names: &'static [&'static str],
    /// What runs or loads another program, and so asks every time.
    pub runs: &'static str,
    /// What it writes, judged as a redirection is (inside the workspace, or asks).
    pub writes: &'static str,
}

/// Programs known to only read and print: none runs another program, writes a file
/// (other than through a redirection, which the analysis sees) or changes anything.
/// A line of these alone is read-only ([`super::read_only`]). Programs whose options
/// can run or write (`sed`, `find`, `sort`, `git`, `less`, `env`, `rg --pre`, `tree -o`,
/// `uniq IN OUT`, `file -C`, …) are not here.
pub const READ_ONLY: &[&str] = &[
    "basename", "cat", "cmp", "cut", "df", "diff", "dirname", "du", "echo", "egrep", "false",
    "fgrep", "grep", "head", "id", "ls", "nl", "printf", "pwd", "readlink", "realpath", "stat",
    "tail", "test", "tr", "true", "uname", "wc", "which", "whoami",
];

/// Every program whose options the analysis reads, with what asks.
pub const PROGRAMS: &[Program] = &[
    Program {
        names: &["sed"],
        runs: "the `e` command, the `e` flag of `s`, a script from a file (`-f`) or not given by the line",
        writes: "the `w`/`W` commands and the `w` flag of `s`; the files of `-i`",
    },
    Program {
        names: &["tar"],
        runs: "`--to-command`, `--checkpoint-action`, `-I`/`--use-compress-program`, `--rsh-command`, `--rmt-command`, `-F`/`--info-script`/`--new-volume-script`, an archive `host:file` (run through rsh)",
        writes: "the archive when creating or updating; the folder of `-C` and the files extracted; `-P` (absolute names) asks; `--index-file`, `--listed-incremental`",
    },
    Program {
        names: &["git"],
        runs: "`-c`/`git config` keys that are not known to be inert (pager, editor, fsmonitor, sshCommand, diff.external, hooksPath, aliases, …), `--config-env`, `--exec-path`, `--upload-pack`, `--receive-pack`, `--exec`, `grep -O`/`--open-files-in-pager`, `--ext-diff`, `--textconv`, `difftool`/`mergetool` tools, `rebase --exec`, `bisect run`, `submodule foreach`, `filter-branch`, `clone --template`/`--config`, `ext::` and `fd::` remotes, a repository outside the workspace (`-C`, `--git-dir`, `--work-tree`)",
        writes: "`--output`/`-o` of `log`, `diff`, `show`, `format-patch`, `archive`; `bundle create`; the folder of `clone`, `init`, `worktree add`",
    },
    Program {
        names: &["sort"],
        runs: "`--compress-program`",
        writes: "`-o`/`--output`; `-T`/`--temporary-directory`",
    },
    Program {
        names: &["find"],
        runs: "`-exec`, `-execdir`, `-ok`, `-okdir` (their command is analysed and keyed too)",
        writes: "`-fprint`, `-fprint0`, `-fprintf`, `-fls`; `-delete` has its own key",
    },
    Program {
        names: &["xargs"],
        runs: "its command, with words from its input (keyed, and not known)",
        writes: "",
    },
    Program {
        names: &["awk", "gawk", "mawk", "nawk"],
        runs: "`system(…)` and pipes in the program (key `shell:awk system`), `-f`/`-E` program files, `-i`/`-l` extensions, `@load`/`@include`",
        writes: "`print … > \"file\"` and `>>` (a target that is not a string asks)",
    },
    Program {
        names: &["env"],
        runs: "its command (keyed too); `-S`/`--split-string`",
        writes: "",
    },
    Program {
        names: &["rsync"],
        runs: "`-e`/`--rsh`, `--rsync-path`",
        writes: "the destination; `--log-file`, `--write-batch`, `--only-write-batch`, `--backup-dir`, `--temp-dir`, `--partial-dir`; the sources of `--remove-source-files`",
    },
    Program {
        names: &["ssh", "scp", "sftp"],
        runs: "`-o` options other than a known inert set (ProxyCommand, LocalCommand, …), `-F` configuration files, `scp -S`/`sftp -S` programs",
        writes: "`-E` log files; a local destination of `scp`",
    },
    Program {
        names: &["zip"],
        runs: "`-TT`/`--unzip-command`",
        writes: "the archive; `-O`/`--output-file`, `-b`/`--temp-path`",
    },
    Program {
        names: &["unzip"],
        runs: "",
        writes: "the folder of `-d` (or the current one); `-:` (names with `..`) asks",
    },
    Program {
        names: &["make", "gmake"],
        runs: "`--eval`/`-E`, a makefile (`-f`) or folder (`-C`) outside the workspace, assignments to `SHELL`, `.SHELLFLAGS`, `MAKESHELL`, `MAKEFILES`, `MAKEFLAGS`",
        writes: "",
    },
    Program {
        names: &["cargo"],
        runs: "`--config`, `+toolchain`, `-Z` flags, a manifest outside the workspace (`--manifest-path`); an unknown subcommand is `cargo-<name>`, keyed `shell:cargo <name>`",
        writes: "`--target-dir`, `--artifact-dir`",
    },
    Program {
        names: &["npm", "pnpm", "yarn"],
        runs: "`--script-shell`, `--node-options`, `--userconfig`, `--globalconfig`, `config set`/`config edit`, `exec`/`dlx`/`x` (keyed by package), `-c`/`--call`",
        writes: "",
    },
    Program {
        names: &["less", "more", "man"],
        runs: "`+` commands (but `+N` and `+/pattern`), lesskey files (`-k`), `man -P`/`--pager`, `-H`/`--html`, `-C`/`--config-file`, `--preprocessor`",
        writes: "`less -o`/`-O`/`--log-file`",
    },
    Program {
        names: &["vi", "vim", "nvim", "view", "ex", "emacs"],
        runs: "every option and `+` command (`-c`, `--cmd`, `-S`, `-u`, `--eval`, `-l`, …)",
        writes: "",
    },
    Program {
        names: &[
            "tee", "cp", "mv", "ln", "install", "dd", "touch", "mkdir", "rm", "rmdir", "truncate",
            "chmod", "chown", "chgrp", "shred", "unlink", "mkfifo",
        ],
        runs: "",
        writes: "every file they write, create, change or remove: `tee`'s files, the destination (or `-t` folder) of `cp`, `mv` (and its sources), `ln` and `install`, `dd of=`, the operands of the others",
    },
];

/// How a program's options are spelled.
struct Spec<'a> {
    /// Options without a value (short ones one letter, `-n`; long ones `--quiet`).
    flags: &'a [&'a str],
    /// Options whose value is the next word or attached.
    values: &'a [&'a str],
    /// Options whose value may only be attached (`-i.bak`, `--in-place=.bak`).
    optional: &'a [&'a str],
}

/// A program's words, read by its [`Spec`].
#[derive(Default)]
struct Parsed {
    /// Options in order, with their value when they take one.
    options: Vec<(String, Option<Word>)>,
    operands: Vec<Word>,
}

impl Parsed {
    fn has(&self, names: &[&str]) -> bool {
        self.options
            .iter()
            .any(|(n, _)| names.contains(&n.as_str()))
    }

    fn values<'s>(&'s self, names: &'s [&'s str]) -> impl Iterator<Item = &'s Word> + 's {
        self.options
            .iter()
            .filter(move |(n, _)| names.contains(&n.as_str()))
            .filter_map(|(_, v)| v.as_ref())
    }
}

impl Walker {
    /// Reads `args` of `program` by `spec`: an unknown option, or a word the line does
    /// not give before `--`, is a reason. GNU option order: options may follow operands.
    fn read_options(&mut self, program: &str, args: &[Word], spec: &Spec) -> Parsed {
        let mut p = Parsed::default();
        let mut i = 0;
        let mut ended = false;
        while i < args.len() {
            let w = &args[i];
            let t = w.text.as_str();
            i += 1;
            if ended || (w.known && (t == "-" || !t.starts_with('-'))) {
                if !w.known && !ended {
                    self.reason(Reason::UnknownOption(format!("{program} {t}")));
                }
                p.operands.push(w.clone());
                continue;
            }
            if !w.known {
                self.reason(Reason::UnknownOption(format!("{program} {t}")));
                p.operands.push(w.clone());
                continue;
            }
            if t == "--" {
                ended = true;
                continue;
            }
            if t.starts_with("--") {
                let (name, attached) = match t.split_once('=') {
                    Some((n, v)) => (n, Some(Word::literal(v))),
                    None => (t, None),
                };
                if spec.values.contains(&name) {
                    let value = attached.or_else(|| {
                        i += 1;
                        args.get(i - 1).cloned()
                    });
                    p.options.push((name.to_string(), value));
                } else if spec.optional.contains(&name)
                    || (spec.flags.contains(&name) && attached.is_none())
                {
                    p.options.push((name.to_string(), attached));
                } else {
                    self.reason(Reason::UnknownOption(format!("{program} {t}")));
                }
                continue;
            }
            // A cluster of short options: `-rf`, `-n5`, `-k2,2`.
            let cluster = &t[1..];
            for (at, c) in cluster.char_indices() {
                let name = format!("-{c}");
                let rest = &cluster[at + c.len_utf8()..];
                if spec.values.contains(&name.as_str()) {
                    let value = if rest.is_empty() {
                        i += 1;
                        args.get(i - 1).cloned()
                    } else {
                        Some(Word::literal(rest))
                    };
                    p.options.push((name, value));
                    break;
                }
                if spec.optional.contains(&name.as_str()) {
                    let value = (!rest.is_empty()).then(|| Word::literal(rest));
                    p.options.push((name, value));
                    break;
                }
                if spec.flags.contains(&name.as_str()) {
                    p.options.push((name, None));
                } else {
                    self.reason(Reason::UnknownOption(format!("{program} {t}")));
                    break;
                }
            }
        }
        p
    }

    fn runs(&mut self, what: String) {
        self.reason(Reason::RunsProgram(what));
    }

    /// The table's programs: true when `name` is one (and its words were read here).
    pub(super) fn table(&mut self, name: &str, args: &[Word]) -> bool {
        match name {
            "sed" => self.sed(args),
            "tar" => self.tar(args),
            "sort" => self.sort(args),
            "rsync" => self.rsync(args),
            "ssh" | "scp" | "sftp" => self.ssh(name, args),
            "zip" => self.zip(args),
            "unzip" => self.unzip(args),
            "make" | "gmake" => self.make(name, args),
            "less" | "more" | "man" => self.pager(name, args),
            "vi" | "vim" | "nvim" | "view" | "ex" | "emacs" => {
                for a in args {
                    if !a.known || a.text.starts_with('-') || a.text.starts_with('+') {
                        self.runs(format!("{name} {}", a.text));
                    }
                }
            }
            "tee" | "cp" | "mv" | "ln" | "install" | "dd" | "touch" | "mkdir" | "rm" | "rmdir"
            | "truncate" | "chmod" | "chown" | "chgrp" | "shred" | "unlink" | "mkfifo" => {
                self.writer(name, args)
            }
            _ => return false,
        }
        true
    }

    fn sed(&mut self, args: &[Word]) {
        let spec = Spec {
            flags: &[
                "-n",
                "--quiet",
                "--silent",
                "-E",
                "-r",
                "--regexp-extended",
                "-s",
                "--separate",
                "-z",
                "--null-data",
                "-u",
                "--unbuffered",
                "--posix",
                "--debug",
                "--sandbox",
                "--follow-symlinks",
                "-b",
                "--binary",
            ],
            values: &["-e", "--expression", "-f", "--file", "-l", "--line-length"],
            optional: &["-i", "--in-place"],
        };
        let p = self.read_options("sed", args, &spec);
        let sandboxed = p.has(&["--sandbox"]);
        let mut scripts: Vec<Word> = p.values(&["-e", "--expression"]).cloned().collect();
        let mut files = p.operands.clone();
        if p.has(&["-f", "--file"]) {
            self.runs("sed -f (a script from a file)".to_string());
        } else if scripts.is_empty() && !files.is_empty() {
            scripts.push(files.remove(0));
        }
        for script in &scripts {
            if !script.known {
                self.runs(format!(
                    "sed {} (a script the line does not give)",
                    script.text
                ));
                continue;
            }
            match sed_script(&script.text) {
                Ok(effects) => {
                    for e in effects {
                        match e {
                            SedEffect::Runs(what) if !sandboxed => self.runs(format!("sed {what}")),
                            SedEffect::Writes(file)
                                if !sandboxed
                                    && !matches!(file.as_str(), "/dev/stdout" | "/dev/stderr") =>
                            {
                                self.write(&Word::literal(&file));
                            }
                            _ => {}
                        }
                    }
                }
                Err(why) => self.reason(Reason::NotUnderstood(format!("sed script: {why}"))),
            }
        }
        if p.has(&["-i", "--in-place"]) {
            for f in &files {
                self.write(f);
            }
            // A suffix with a `/` names where the backup goes (`*` is the file's name).
            for suffix in p.values(&["-i", "--in-place"]).cloned().collect::<Vec<_>>() {
                if suffix.text.contains('/') || !suffix.known {
                    for f in &files {
                        let name = paths::basename(&f.text);
                        self.write(&Word {
                            text: suffix.text.replace('*', name),
                            known: suffix.known && f.known,
                            glob: false,
                        });
                    }
                    if files.is_empty() {
                        self.write(&suffix);
                    }
                }
            }
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "tar's options, one arm each (old-style clusters, long options and their abbreviations)"
    )]
    fn tar(&mut self, args: &[Word]) {
        // Old style: a first word without a dash is a cluster of letters whose values
        // follow in order (`tar czf out.tgz dir`).
        let mut words: Vec<Word> = Vec::new();
        let mut rest = args;
        if let Some(first) = args.first()
            && first.known
            && !first.text.starts_with('-')
            && !first.text.is_empty()
        {
            let mut values = args[1..].iter();
            let mut consumed = 1;
            for c in first.text.chars() {
                words.push(Word::literal(&format!("-{c}")));
                if "fCTXgbILNVK".contains(c)
                    && let Some(v) = values.next()
                {
                    words.push(v.clone());
                    consumed += 1;
                }
            }
            rest = &args[consumed.min(args.len())..];
        }
        words.extend(rest.iter().cloned());
        let spec = Spec {
            flags: &[
                "-c",
                "--create",
                "-x",
                "--extract",
                "--get",
                "-t",
                "--list",
                "-r",
                "--append",
                "-u",
                "--update",
                "-A",
                "--catenate",
                "--concatenate",
                "-d",
                "--diff",
                "--compare",
                "--delete",
                "-z",
                "--gzip",
                "--gunzip",
                "--ungzip",
                "-j",
                "--bzip2",
                "-J",
                "--xz",
                "--zstd",
                "--lzma",
                "--lzip",
                "--lzop",
                "-Z",
                "--compress",
                "--uncompress",
                "-a",
                "--auto-compress",
                "-v",
                "--verbose",
                "-k",
                "--keep-old-files",
                "--skip-old-files",
                "--keep-newer-files",
                "--overwrite",
                "--overwrite-dir",
                "-p",
                "--preserve-permissions",
                "--same-permissions",
                "--same-owner",
                "--no-same-owner",
                "--no-same-permissions",
                "-m",
                "--touch",
                "--wildcards",
                "--no-wildcards",
                "--anchored",
                "--no-anchored",
                "-O",
                "--to-stdout",
                "--totals",
                "-h",
                "--dereference",
                "--null",
                "--no-null",
                "--numeric-owner",
                "--one-file-system",
                "--no-recursion",
                "--recursion",
                "-W",
                "--verify",
                "--exclude-vcs",
                "--exclude-vcs-ignores",
                "--exclude-backups",
                "--exclude-caches",
                "--ignore-failed-read",
                "--force-local",
                "--show-transformed-names",
                "--utc",
                "-S",
                "--sparse",
                "-i",
                "--ignore-zeros",
                "-l",
                "--check-links",
                "-B",
                "--read-full-records",
                "-w",
                "--interactive",
                "--confirmation",
                "-U",
                "--unlink-first",
                "--remove-files",
                "--full-time",
                "--checkpoint",
                "--delay-directory-restore",
                "--no-delay-directory-restore",
                "--no-ignore-case",
                "--ignore-case",
                "--acls",
                "--no-acls",
                "--xattrs",
                "--no-xattrs",
                "--selinux",
                "--no-selinux",
                "-M",
                "--multi-volume",
                "-G",
                "--incremental",
                "--quiet",
                "-P",
                "--absolute-names",
            ],
            values: &[
                "-f",
                "--file",
                "-C",
                "--directory",
                "--exclude",
                "-X",
                "--exclude-from",
                "-T",
                "--files-from",
                "--strip-components",
                "--transform",
                "--xform",
                "--owner",
                "--group",
                "--mode",
                "--mtime",
                "--sort",
                "--format",
                "-H",
                "-b",
                "--blocking-factor",
                "--record-size",
                "-V",
                "--label",
                "-N",
                "--newer",
                "--after-date",
                "--newer-mtime",
                "--suffix",
                "--warning",
                "-K",
                "--starting-file",
                "-L",
                "--tape-length",
                "--exclude-tag",
                "--exclude-tag-under",
                "--exclude-tag-all",
                "--occurrence",
                "--backup",
                "--index-file",
                "-g",
                "--listed-incremental",
                "--level",
                "--to-command",
                "--checkpoint-action",
                "-I",
                "--use-compress-program",
                "--rsh-command",
                "--rmt-command",
                "-F",
                "--info-script",
                "--new-volume-script",
                "--volno-file",
            ],
            optional: &[],
        };
        let p = self.read_options("tar", &words, &spec);
        for run in [
            "--to-command",
            "--checkpoint-action",
            "-I",
            "--use-compress-program",
            "--rsh-command",
            "--rmt-command",
            "-F",
            "--info-script",
            "--new-volume-script",
        ] {
            if p.has(&[run]) {
                self.runs(format!("tar {run}"));
            }
        }
        let force_local = p.has(&["--force-local"]);
        let archives: Vec<Word> = p.values(&["-f", "--file"]).cloned().collect();
        for a in &archives {
            let remote = a
                .text
                .split('/')
                .next()
                .is_some_and(|head| head.contains(':'));
            if remote && !force_local {
                self.runs(format!(
                    "tar -f {} (a remote archive, run through rsh)",
                    a.text
                ));
            }
        }
        let writes_archive = p.has(&[
            "-c",
            "--create",
            "-r",
            "--append",
            "-u",
            "--update",
            "-A",
            "--catenate",
            "--concatenate",
            "--delete",
        ]);
        let extracts = p.has(&["-x", "--extract", "--get"]);
        if writes_archive {
            for a in &archives {
                if a.text != "-" {
                    self.write(a);
                }
            }
        }
        if extracts {
            if p.has(&["-P", "--absolute-names"]) {
                self.reason(Reason::WritesOutside("tar -P (absolute names)".to_string()));
            }
            let dirs: Vec<Word> = p.values(&["-C", "--directory"]).cloned().collect();
            if dirs.is_empty() {
                self.write(&Word::literal("."));
            }
            for d in &dirs {
                self.write(d);
            }
        }
        if p.has(&["--remove-files"]) {
            for f in &p.operands {
                self.write(f);
            }
        }
        for f in p
            .values(&["--index-file", "-g", "--listed-incremental", "--volno-file"])
            .cloned()
            .collect::<Vec<_>>()
        {
            self.write(&f);
        }
    }

    fn sort(&mut self, args: &[Word]) {
        let spec = Spec {
            flags: &[
                "-b",
                "--ignore-leading-blanks",
                "-d",
                "--dictionary-order",
                "-f",
                "--ignore-case",
                "-g",
                "--general-numeric-sort",
                "-i",
                "--ignore-nonprinting",
                "-M",
                "--month-sort",
                "-h",
                "--human-numeric-sort",
                "-n",
                "--numeric-sort",
                "-R",
                "--random-sort",
                "-r",
                "--reverse",
                "-V",
                "--version-sort",
                "-c",
                "-C",
                "--check",
                "-m",
                "--merge",
                "-s",
                "--stable",
                "-u",
                "--unique",
                "-z",
                "--zero-terminated",
                "--debug",
            ],
            values: &[
                "-k",
                "--key",
                "-t",
                "--field-separator",
                "-S",
                "--buffer-size",
                "--parallel",
                "--batch-size",
                "--random-source",
                "--files0-from",
                "--sort",
                "-o",
                "--output",
                "-T",
                "--temporary-directory",
                "--compress-program",
            ],
            optional: &["--check"],
        };
        let p = self.read_options("sort", args, &spec);
        if p.has(&["--compress-program"]) {
            self.runs("sort --compress-program".to_string());
        }
        for f in p
            .values(&["-o", "--output", "-T", "--temporary-directory"])
            .cloned()
            .collect::<Vec<_>>()
        {
            self.write(&f);
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "rsync's options that run programs or write, one arm each"
    )]
    fn rsync(&mut self, args: &[Word]) {
        let spec = Spec {
            flags: &[
                "-a",
                "--archive",
                "-v",
                "--verbose",
                "-q",
                "--quiet",
                "-z",
                "--compress",
                "-r",
                "--recursive",
                "-l",
                "--links",
                "-L",
                "--copy-links",
                "-p",
                "--perms",
                "-t",
                "--times",
                "-g",
                "--group",
                "-o",
                "--owner",
                "-D",
                "--devices",
                "--specials",
                "-h",
                "--human-readable",
                "-n",
                "--dry-run",
                "-u",
                "--update",
                "-c",
                "--checksum",
                "--delete",
                "--delete-after",
                "--delete-before",
                "--delete-during",
                "--delete-excluded",
                "--progress",
                "-P",
                "--partial",
                "--stats",
                "-R",
                "--relative",
                "--no-implied-dirs",
                "-H",
                "--hard-links",
                "-A",
                "--acls",
                "-X",
                "--xattrs",
                "-S",
                "--sparse",
                "--inplace",
                "--append",
                "--size-only",
                "--ignore-existing",
                "--existing",
                "-i",
                "--itemize-changes",
                "-m",
                "--prune-empty-dirs",
                "-x",
                "--one-file-system",
                "-W",
                "--whole-file",
                "--numeric-ids",
                "-k",
                "--copy-dirlinks",
                "-K",
                "--keep-dirlinks",
                "-E",
                "--executability",
                "-O",
                "--omit-dir-times",
                "-J",
                "--omit-link-times",
                "-C",
                "--cvs-exclude",
                "--remove-source-files",
                "-b",
                "--backup",
                "-8",
                "--8-bit-output",
                "--list-only",
                "--safe-links",
                "--munge-links",
            ],
            values: &[
                "--exclude",
                "--include",
                "--exclude-from",
                "--include-from",
                "-f",
                "--filter",
                "--bwlimit",
                "--timeout",
                "--contimeout",
                "--max-size",
                "--min-size",
                "--chmod",
                "--chown",
                "--suffix",
                "--compare-dest",
                "--copy-dest",
                "--link-dest",
                "--info",
                "--debug",
                "--out-format",
                "--files-from",
                "--modify-window",
                "--port",
                "--password-file",
                "--log-file",
                "--write-batch",
                "--only-write-batch",
                "--backup-dir",
                "-T",
                "--temp-dir",
                "--partial-dir",
                "-e",
                "--rsh",
                "--rsync-path",
                "--read-batch",
            ],
            optional: &[],
        };
        let p = self.read_options("rsync", args, &spec);
        for run in ["-e", "--rsh", "--rsync-path"] {
            if p.has(&[run]) {
                self.runs(format!("rsync {run}"));
            }
        }
        for f in p
            .values(&[
                "--log-file",
                "--write-batch",
                "--only-write-batch",
                "--backup-dir",
                "-T",
                "--temp-dir",
                "--partial-dir",
            ])
            .cloned()
            .collect::<Vec<_>>()
        {
            self.write(&f);
        }
        if let Some((dest, sources)) = p.operands.split_last()
            && !sources.is_empty()
        {
            if !remote(dest) {
                self.write(dest);
            }
            if p.has(&["--remove-source-files"]) {
                for s in sources.iter().filter(|s| !remote(s)) {
                    self.write(s);
                }
            }
        }
    }

    fn ssh(&mut self, name: &str, args: &[Word]) {
        let spec = Spec {
            flags: &[
                "-4", "-6", "-A", "-a", "-C", "-f", "-G", "-g", "-K", "-k", "-M", "-N", "-n", "-q",
                "-s", "-T", "-t", "-V", "-v", "-X", "-x", "-Y", "-y", "-r", "-p", "-3", "-B", "-O",
                "-R", "-D",
            ],
            values: &[
                "-b", "-c", "-e", "-i", "-J", "-l", "-m", "-o", "-P", "-F", "-E", "-S", "-W", "-w",
                "-L", "-Q", "-I", "-B",
            ],
            optional: &[],
        };
        // ssh's `-p PORT`, `-R`/`-L`/`-D` forwardings take values; scp's `-p`/`-r` do not.
        let spec = if name == "ssh" {
            Spec {
                flags: &[
                    "-4", "-6", "-A", "-a", "-C", "-f", "-G", "-g", "-K", "-k", "-M", "-N", "-n",
                    "-q", "-s", "-T", "-t", "-V", "-v", "-X", "-x", "-Y", "-y",
                ],
                values: &[
                    "-B", "-b", "-c", "-D", "-e", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o",
                    "-p", "-Q", "-R", "-W", "-w", "-F", "-E", "-S",
                ],
                optional: &[],
            }
        } else {
            spec
        };
        let p = self.read_options(name, args, &spec);
        for (opt, value) in &p.options {
            match opt.as_str() {
                "-o" => {
                    let key = value.as_ref().map(|v| {
                        v.text
                            .split(['=', ' '])
                            .next()
                            .unwrap_or("")
                            .to_ascii_lowercase()
                    });
                    let inert = value.as_ref().is_some_and(|v| v.known)
                        && key
                            .as_deref()
                            .is_some_and(|k| SSH_INERT_OPTIONS.contains(&k));
                    if !inert {
                        self.runs(format!(
                            "{name} -o {}",
                            value.as_ref().map_or("", |v| v.text.as_str())
                        ));
                    }
                }
                "-F" => self.runs(format!("{name} -F (a configuration file)")),
                "-S" if name != "ssh" => {
                    self.runs(format!("{name} -S (a program for the connection)"))
                }
                "-S" => {
                    if let Some(v) = value {
                        self.write(v);
                    }
                }
                "-E" => {
                    if let Some(v) = value {
                        self.write(v);
                    }
                }
                _ => {}
            }
        }
        if name == "scp"
            && let Some((dest, sources)) = p.operands.split_last()
            && !sources.is_empty()
            && !remote(dest)
        {
            self.write(dest);
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "zip's and unzip's options, one arm each"
    )]
    fn zip(&mut self, args: &[Word]) {
        let spec = Spec {
            flags: &[
                "-r",
                "--recurse-paths",
                "-q",
                "--quiet",
                "-v",
                "--verbose",
                "-j",
                "--junk-paths",
                "-u",
                "--update",
                "-f",
                "--freshen",
                "-d",
                "--delete",
                "-m",
                "--move",
                "-0",
                "-1",
                "-2",
                "-3",
                "-4",
                "-5",
                "-6",
                "-7",
                "-8",
                "-9",
                "-y",
                "--symlinks",
                "-D",
                "--no-dir-entries",
                "-X",
                "--no-extra",
                "-T",
                "--test",
                "-o",
                "--latest-time",
                "-g",
                "--grow",
                "-9",
                "-l",
                "-ll",
                "-z",
                "--archive-comment",
                "-c",
                "--entry-comments",
                "-e",
                "--encrypt",
                "-A",
                "--adjust-sfx",
                "-F",
                "--fix",
                "-FF",
                "--fixfix",
                "-@",
                "--names-stdin",
                "-S",
                "--system-hidden",
                "-k",
                "--DOS-names",
            ],
            values: &[
                "-x",
                "--exclude",
                "-i",
                "--include",
                "-n",
                "--suffixes",
                "-b",
                "--temp-path",
                "-O",
                "--output-file",
                "-P",
                "--password",
                "-t",
                "--from-date",
                "-tt",
                "--before-date",
                "-Z",
                "--compression-method",
                "-TT",
                "--unzip-command",
            ],
            optional: &[],
        };
        // zip's two-letter options (`-TT cmd`, `-tt date`, `-ll`, `-FF`) look like
        // clusters to a getopt reading; `-TT` runs its value.
        if args
            .iter()
            .any(|a| a.known && (a.text.starts_with("-TT") || a.text.starts_with("--unz")))
        {
            self.runs("zip -TT/--unzip-command".to_string());
        }
        let p = self.read_options("zip", args, &spec);
        if p.has(&["-TT", "--unzip-command"]) {
            self.runs("zip --unzip-command".to_string());
        }
        for f in p
            .values(&["-b", "--temp-path", "-O", "--output-file"])
            .cloned()
            .collect::<Vec<_>>()
        {
            self.write(&f);
        }
        if let Some(archive) = p.operands.first() {
            self.write(archive);
        }
        if p.has(&["-m", "--move"]) {
            for f in p.operands.iter().skip(1) {
                self.write(f);
            }
        }
    }

    fn unzip(&mut self, args: &[Word]) {
        let spec = Spec {
            flags: &[
                "-l", "-v", "-t", "-z", "-T", "-u", "-f", "-n", "-o", "-j", "-C", "-L", "-X", "-q",
                "-qq", "-a", "-aa", "-b", "-p", "-c", "-Z", "-:", "-^", "-K", "-M", "-V", "-W",
            ],
            values: &["-d", "-x", "-P", "-O", "-I"],
            optional: &[],
        };
        let p = self.read_options("unzip", args, &spec);
        if p.has(&["-:"]) {
            self.reason(Reason::WritesOutside(
                "unzip -: (names with ..)".to_string(),
            ));
        }
        let listing = p.has(&["-l", "-v", "-t", "-z", "-p", "-c", "-Z"]);
        if !listing {
            let dirs: Vec<Word> = p.values(&["-d"]).cloned().collect();
            if dirs.is_empty() {
                self.write(&Word::literal("."));
            }
            for d in &dirs {
                self.write(d);
            }
        }
    }

    #[expect(clippy::too_many_lines, reason = "make's options, one arm each")]
    fn make(&mut self, name: &str, args: &[Word]) {
        let spec = Spec {
            flags: &[
                "-B",
                "--always-make",
                "-d",
                "-e",
                "--environment-overrides",
                "-i",
                "--ignore-errors",
                "-k",
                "--keep-going",
                "-n",
                "--just-print",
                "--dry-run",
                "--recon",
                "-q",
                "--question",
                "-r",
                "--no-builtin-rules",
                "-R",
                "--no-builtin-variables",
                "-s",
                "--silent",
                "--quiet",
                "-S",
                "--no-keep-going",
                "--stop",
                "-t",
                "--touch",
                "-v",
                "--version",
                "-w",
                "--print-directory",
                "--no-print-directory",
                "-p",
                "--print-data-base",
                "--warn-undefined-variables",
                "--trace",
                "-L",
                "--check-symlink-times",
                "-O",
                "--output-sync",
                "--debug",
                "-h",
                "--help",
            ],
            values: &[
                "-f",
                "--file",
                "--makefile",
                "-C",
                "--directory",
                "-j",
                "--jobs",
                "-l",
                "--load-average",
                "--max-load",
                "-o",
                "--old-file",
                "--assume-old",
                "-W",
                "--what-if",
                "--new-file",
                "--assume-new",
                "-I",
                "--include-dir",
                "--eval",
                "-E",
            ],
            optional: &["-j", "--jobs", "-O", "--output-sync", "--debug"],
        };
        let p = self.read_options(name, args, &spec);
        if p.has(&["--eval", "-E"]) {
            self.runs(format!("{name} --eval"));
        }
        for f in p
            .values(&[
                "-f",
                "--file",
                "--makefile",
                "-C",
                "--directory",
                "-I",
                "--include-dir",
            ])
            .cloned()
            .collect::<Vec<_>>()
        {
            self.inside(name, &f, "a makefile outside the workspace");
        }
        for w in &p.operands {
            if let Some((var, _)) = w.text.split_once('=') {
                let var = var.trim_end_matches([':', '+', '?', '!']);
                if matches!(
                    var,
                    "SHELL" | ".SHELLFLAGS" | "MAKESHELL" | "MAKEFILES" | "MAKEFLAGS" | "MFLAGS"
                ) {
                    self.runs(format!("{name} {var}="));
                }
            }
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "less, more, man and the editors: one arm per program's options"
    )]
    fn pager(&mut self, name: &str, args: &[Word]) {
        if name == "man" {
            let spec = Spec {
                flags: &[
                    "-a",
                    "--all",
                    "-f",
                    "--whatis",
                    "-k",
                    "--apropos",
                    "-w",
                    "--where",
                    "--path",
                    "-W",
                    "--where-cat",
                    "-u",
                    "--update",
                    "-c",
                    "--catman",
                    "-d",
                    "--debug",
                    "-D",
                    "--default",
                    "-l",
                    "--local-file",
                    "-i",
                    "--ignore-case",
                    "-I",
                    "--match-case",
                    "--regex",
                    "--wildcard",
                    "--names-only",
                    "-Z",
                    "--ditroff",
                    "-t",
                    "--troff",
                    "-7",
                    "--ascii",
                    "-E",
                    "--encoding",
                    "--no-hyphenation",
                    "--no-justification",
                    "--nh",
                    "--nj",
                    "-h",
                    "--help",
                    "-V",
                    "--version",
                ],
                values: &[
                    "-M",
                    "--manpath",
                    "-L",
                    "--locale",
                    "-m",
                    "--systems",
                    "-S",
                    "-s",
                    "--sections",
                    "-e",
                    "--extension",
                    "-R",
                    "--recode",
                    "-P",
                    "--pager",
                    "-H",
                    "--html",
                    "-C",
                    "--config-file",
                    "-p",
                    "--preprocessor",
                    "-T",
                    "--troff-device",
                    "-X",
                    "--gxditview",
                ],
                optional: &["-H", "--html", "-T", "--troff-device", "-X", "--gxditview"],
            };
            let p = self.read_options(name, args, &spec);
            for run in [
                "-P",
                "--pager",
                "-H",
                "--html",
                "-C",
                "--config-file",
                "-p",
                "--preprocessor",
                "-X",
                "--gxditview",
                "-T",
                "--troff-device",
            ] {
                if p.has(&[run]) {
                    self.runs(format!("man {run}"));
                }
            }
            return;
        }
        for a in args {
            let t = a.text.as_str();
            if !a.known {
                self.reason(Reason::UnknownOption(format!("{name} {t}")));
            } else if let Some(command) = t.strip_prefix('+') {
                let harmless = command.chars().all(|c| c.is_ascii_digit())
                    || (command.starts_with('/') && !command.contains('!'));
                if !harmless {
                    self.runs(format!("{name} {t}"));
                }
            } else if name == "less" {
                if t.starts_with("-k") || t.starts_with("--lesskey") {
                    self.runs(format!("less {t} (a lesskey file)"));
                } else if t.starts_with("-o")
                    || t.starts_with("-O")
                    || t.starts_with("--log-file")
                    || t.starts_with("--LOG-FILE")
                {
                    let file = t
                        .split_once('=')
                        .map(|(_, f)| f)
                        .or_else(|| t.get(2..).filter(|f| !f.is_empty() && !t.starts_with("--")));
                    match file {
                        Some(f) => self.write(&Word::literal(f)),
                        None => self.reason(Reason::UnknownOption(format!("less {t}"))),
                    }
                }
            }
        }
    }

    /// `tee`, `cp`, `mv`, `ln`, `install`, `dd` and the programs that change the files
    /// they name: every file written is judged.
    #[expect(
        clippy::too_many_lines,
        reason = "one arm per writing program (tee, cp, mv, ln, install, dd, touch, …) and its destination options"
    )]
    fn writer(&mut self, name: &str, args: &[Word]) {
        if name == "dd" {
            for a in args {
                if let Some(file) = a.text.strip_prefix("of=") {
                    self.write(&Word {
                        text: file.to_string(),
                        known: a.known,
                        glob: a.glob,
                    });
                } else if !a.known {
                    self.reason(Reason::UnknownOption(format!("dd {}", a.text)));
                }
            }
            return;
        }
        let values: &[&str] = match name {
            "cp" | "mv" | "ln" | "install" => &[
                "-t",
                "--target-directory",
                "-S",
                "--suffix",
                "-m",
                "--mode",
                "-o",
                "--owner",
                "-g",
                "--group",
                "--reflink",
                "--sparse",
                "--preserve",
                "--no-preserve",
                "--backup",
                "--context",
                "--strip-program",
                "--update",
            ],
            "truncate" => &["-s", "--size", "-r", "--reference"],
            "chmod" | "chown" | "chgrp" => &["--reference", "--from"],
            "mkdir" | "mkfifo" => &["-m", "--mode", "--context"],
            "shred" => &["-n", "--iterations", "-s", "--size", "--random-source"],
            "touch" => &["-d", "--date", "-t", "-r", "--reference", "--time"],
            "tee" => &["--output-error"],
            _ => &[],
        };
        // Flags are not listed one by one: none of these programs runs another, so an
        // unknown option only matters for where it writes, and the operands are all
        // judged. `install --strip-program` is the exception.
        let mut operands: Vec<Word> = Vec::new();
        let mut targets: Vec<Word> = Vec::new();
        let mut i = 0;
        let mut ended = false;
        while i < args.len() {
            let w = &args[i];
            let t = w.text.as_str();
            i += 1;
            if !w.known {
                // A file only known when it runs (and, unquoted, maybe options such as
                // `-t DIR`): where it writes is not known. It still takes its place
                // among the operands (`find -exec cp {} DEST`: DEST is the last).
                self.write(w);
                operands.push(w.clone());
                continue;
            }
            if ended || t == "-" || !t.starts_with('-') {
                operands.push(w.clone());
                continue;
            }
            if t == "--" {
                ended = true;
                continue;
            }
            let (option, attached) = match t.split_once('=') {
                Some((o, v)) if t.starts_with("--") => (o, Some(Word::literal(v))),
                _ => (t, None),
            };
            // GNU programs take any unique prefix of a long option (`--target-dir`).
            let option = match long_option(values, option) {
                Ok(full) => full,
                Err(()) => {
                    self.reason(Reason::UnknownOption(format!("{name} {option}")));
                    option
                }
            };
            let short_value = (!t.starts_with("--"))
                .then(|| {
                    t[1..].char_indices().find_map(|(at, c)| {
                        values
                            .contains(&format!("-{c}").as_str())
                            .then(|| (format!("-{c}"), &t[1 + at + c.len_utf8()..]))
                    })
                })
                .flatten();
            let (option, value) = if let Some((o, rest)) = short_value {
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i - 1).cloned()
                } else {
                    Some(Word::literal(rest))
                };
                (o, value)
            } else if values.contains(&option) && attached.is_none() && t.starts_with("--") {
                // A long option whose value may be optional (`--backup`) takes the next
                // word only when it has to.
                if matches!(
                    option,
                    "--backup" | "--reflink" | "--sparse" | "--preserve" | "--update" | "--context"
                ) {
                    (option.to_string(), None)
                } else {
                    i += 1;
                    (option.to_string(), args.get(i - 1).cloned())
                }
            } else {
                (option.to_string(), attached)
            };
            match option.as_str() {
                "-t" | "--target-directory" => {
                    if let Some(v) = value {
                        targets.push(v);
                    }
                }
                "--strip-program" => self.runs("install --strip-program".to_string()),
                _ => {}
            }
        }
        if name == "ln"
            && args.iter().any(|a| {
                a.known
                    && (a.text == "--symbolic"
                        || (a.text.starts_with('-')
                            && !a.text.starts_with("--")
                            && a.text.contains('s')))
            })
        {
            self.link_targets(&operands, !targets.is_empty());
        }
        match name {
            "cp" | "mv" | "ln" | "install" => {
                let directory_mode = name == "install"
                    && args
                        .iter()
                        .any(|a| a.known && (a.text == "-d" || a.text == "--directory"));
                if directory_mode {
                    targets.extend(operands.iter().cloned());
                } else if targets.is_empty() {
                    match operands.split_last() {
                        Some((dest, _)) if operands.len() >= 2 => targets.push(dest.clone()),
                        // `ln TARGET` makes a link in the current folder.
                        Some(_) if name == "ln" => targets.push(Word::literal(".")),
                        _ => {}
                    }
                }
                if name == "mv" {
                    let sources = if operands.len() >= 2
                        && targets.len() == 1
                        && !args
                            .iter()
                            .any(|a| a.text.starts_with("-t") || a.text.starts_with("--target"))
                    {
                        &operands[..operands.len() - 1]
                    } else {
                        &operands[..]
                    };
                    targets.extend(sources.iter().cloned());
                }
            }
            "chmod" | "chown" | "chgrp" => {
                let reference = args.iter().any(|a| a.text.starts_with("--reference"));
                targets.extend(operands.iter().skip(usize::from(!reference)).cloned());
            }
            _ => targets.extend(operands.iter().cloned()),
        }
        for t in &targets {
            self.write(t);
        }
    }

    /// `ln -s`: a link whose target lies outside the workspace lets a later write in the
    /// same line (`ln -s /etc l; echo x > l/f`) leave it unseen, so it is a write
    /// outside. A relative target is read from the link's folder.
    fn link_targets(&mut self, operands: &[Word], to_folder: bool) {
        let (targets, link_dir): (&[Word], Option<String>) = if to_folder || operands.len() < 2 {
            (operands, self.cwd.clone())
        } else {
            let (last, rest) = operands
                .split_last()
                .map_or((None, operands), |(l, r)| (Some(l), r));
            let dir = last.and_then(|l| {
                paths::absolute(&l.text, self.cwd.as_deref()).map(|p| {
                    if rest.len() > 1 {
                        p
                    } else {
                        p.rsplit_once('/').map_or("/".to_string(), |(d, _)| {
                            if d.is_empty() {
                                "/".to_string()
                            } else {
                                d.to_string()
                            }
                        })
                    }
                })
            });
            (rest, dir)
        };
        for t in targets {
            let inside = t.known
                && !t.text.starts_with('~')
                && paths::absolute(&t.text, link_dir.as_deref())
                    .is_some_and(|p| paths::inside(&p, &self.root).is_some());
            if !inside {
                self.reason(Reason::WritesOutside(format!("{} (a link to it)", t.text)));
            } else if paths::absolute(&t.text, link_dir.as_deref())
                .is_some_and(|p| super::parse::runs_git(&p))
            {
                // A link into `.git/hooks` lets a later write through it name a program.
                self.runs(format!(
                    "a link to {}, git's hooks or configuration",
                    t.text
                ));
            }
        }
    }

    /// A path an option names must lie in the workspace, or the program reads (and
    /// runs) what the line cannot vouch for.
    pub(super) fn inside(&mut self, program: &str, path: &Word, what: &str) {
        let lexical = path
            .known
            .then(|| paths::absolute(&path.text, self.cwd.as_deref()))
            .flatten();
        match lexical {
            Some(p) if paths::inside(&p, &self.root).is_some() => {}
            _ => self.runs(format!("{program} {} ({what})", path.text)),
        }
    }
}

/// The long option of `values` that `option` names: itself, or the one it is a prefix
/// of (`--target-dir` is `--target-directory`); `Err` when it is a prefix of several
/// (GNU refuses it, but which one it means cannot be told). Anything else is returned
/// as it is: a flag that takes no value.
fn long_option<'a>(values: &[&'a str], option: &'a str) -> Result<&'a str, ()> {
    if !option.starts_with("--") || option.len() < 3 || values.contains(&option) {
        return Ok(option);
    }
    let mut of = values.iter().filter(|v| v.starts_with(option));
    match (of.next(), of.next()) {
        (Some(full), None) => Ok(full),
        (Some(_), Some(_)) => Err(()),
        (None, _) => Ok(option),
    }
}

/// ssh `-o` options that run nothing and write nothing.
const SSH_INERT_OPTIONS: &[&str] = &[
    "batchmode",
    "connecttimeout",
    "connectionattempts",
    "stricthostkeychecking",
    "loglevel",
    "port",
    "user",
    "identityfile",
    "identitiesonly",
    "serveraliveinterval",
    "serveralivecountmax",
    "passwordauthentication",
    "pubkeyauthentication",
    "compression",
    "addressfamily",
    "hostkeyalias",
    "requesttty",
    "forwardagent",
    "forwardx11",
    "tcpkeepalive",
    "checkhostip",
    "preferredauthentications",
    "kbdinteractiveauthentication",
    "ciphers",
    "macs",
    "hostkeyalgorithms",
    "kexalgorithms",
    "updatehostkeys",
    "visualhostkey",
    "numberofpasswordprompts",
];

/// True for an rsync or scp operand on another host (`host:path`, `rsync://…`).
fn remote(w: &Word) -> bool {
    let t = w.text.as_str();
    t.contains("://") || t.split('/').next().is_some_and(|head| head.contains(':'))
}

/// What a sed script does beyond reading and printing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SedEffect {
    /// A command that runs one (`e`, `s///e`).
    Runs(String),
    /// A file it writes (`w`, `W`, `s///w`).
    Writes(String),
}

/// Reads a sed script (GNU syntax) for what runs and what is written; an error for a
/// script the reading does not follow to the end.
#[expect(
    clippy::too_many_lines,
    reason = "a reader of sed's script language: one loop over its commands, one arm per command letter"
)]
pub fn sed_script(script: &str) -> Result<Vec<SedEffect>, String> {
    let chars: Vec<char> = script.chars().collect();
    let mut effects = Vec::new();
    let mut i = 0;
    let n = chars.len();
    let blank = |c: char| c == ' ' || c == '\t';
    // The rest of the line from `i` (a file name, a label, a text).
    let to_line_end = |i: &mut usize| -> String {
        let start = *i;
        while *i < n && chars[*i] != '\n' {
            *i += 1;
        }
        chars[start..*i].iter().collect()
    };
    // A delimited part (`/regex/`, `s`'s parts), `i` just past the opening delimiter.
    let delimited = |i: &mut usize, d: char| -> Result<(), String> {
        while *i < n {
            let c = chars[*i];
            if c == '\\' {
                *i += 2;
                continue;
            }
            if c == d {
                *i += 1;
                return Ok(());
            }
            if c == '\n' && d != '\n' {
                return Err("a newline inside a delimited part".to_string());
            }
            *i += 1;
        }
        Err("an unterminated part".to_string())
    };
    while i < n {
        let c = chars[i];
        if blank(c) || c == '\n' || c == ';' {
            i += 1;
            continue;
        }
        if c == '#' {
            to_line_end(&mut i);
            continue;
        }
        // Addresses.
        for part in 0..2 {
            if part == 1 {
                if i < n && chars[i] == ',' {
                    i += 1;
                    while i < n && blank(chars[i]) {
                        i += 1;
                    }
                } else {
                    break;
                }
            }
            if i >= n {
                break;
            }
            match chars[i] {
                '0'..='9' => {
                    while i < n && (chars[i].is_ascii_digit() || chars[i] == '~') {
                        i += 1;
                    }
                }
                '$' => i += 1,
                '+' | '~' if part == 1 => {
                    i += 1;
                    while i < n && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                '/' => {
                    i += 1;
                    delimited(&mut i, '/')?;
                    while i < n && matches!(chars[i], 'I' | 'M') {
                        i += 1;
                    }
                }
                '\\' => {
                    let d = *chars.get(i + 1).ok_or("an address without its delimiter")?;
                    i += 2;
                    delimited(&mut i, d)?;
                    while i < n && matches!(chars[i], 'I' | 'M') {
                        i += 1;
                    }
                }
                _ => {}
            }
        }
        while i < n && blank(chars[i]) {
            i += 1;
        }
        while i < n && (chars[i] == '!' || blank(chars[i])) {
            i += 1;
        }
        let Some(&command) = chars.get(i) else {
            return Err("an address without a command".to_string());
        };
        i += 1;
        match command {
            '{' | '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x'
            | 'z' | 'F' => {}
            'l' | 'L' | 'q' | 'Q' => {
                while i < n && (chars[i].is_ascii_digit() || blank(chars[i])) {
                    i += 1;
                }
            }
            'b' | 't' | 'T' | ':' => {
                while i < n && chars[i] != '\n' && chars[i] != ';' {
                    i += 1;
                }
            }
            'a' | 'i' | 'c' => {
                // The text, to the end of the line; a backslash-newline goes on.
                while i < n {
                    if chars[i] == '\\' {
                        i += 2;
                        continue;
                    }
                    if chars[i] == '\n' {
                        break;
                    }
                    i += 1;
                }
            }
            'r' | 'R' => {
                to_line_end(&mut i);
            }
            'w' | 'W' => {
                while i < n && blank(chars[i]) {
                    i += 1;
                }
                let file = to_line_end(&mut i);
                effects.push(SedEffect::Writes(file));
            }
            'e' => {
                let rest = to_line_end(&mut i);
                effects.push(SedEffect::Runs(format!("e{rest}")));
            }
            'v' => {
                while i < n && chars[i] != '\n' && chars[i] != ';' {
                    i += 1;
                }
            }
            's' | 'y' => {
                let d = *chars.get(i).ok_or("`s` without its delimiter")?;
                if d == '\n' || d == '\\' {
                    return Err("`s` with a newline or backslash delimiter".to_string());
                }
                i += 1;
                delimited(&mut i, d)?;
                delimited(&mut i, d)?;
                if command == 's' {
                    while i < n {
                        match chars[i] {
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9' => i += 1,
                            'e' => {
                                effects.push(SedEffect::Runs("s///e".to_string()));
                                i += 1;
                            }
                            'w' => {
                                i += 1;
                                while i < n && blank(chars[i]) {
                                    i += 1;
                                }
                                let file = to_line_end(&mut i);
                                effects.push(SedEffect::Writes(file));
                            }
                            _ => break,
                        }
                    }
                }
            }
            other => return Err(format!("the command `{other}`")),
        }
        if command == '{' {
            continue;
        }
        // A command ends at `;`, a newline, `}` or `#`.
        while i < n && blank(chars[i]) {
            i += 1;
        }
        match chars.get(i) {
            None | Some(';' | '\n' | '}' | '#') => {}
            Some(c) => return Err(format!("`{c}` after a command")),
        }
    }
    Ok(effects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sed_scripts_name_what_runs_and_what_is_written() {
        assert_eq!(sed_script("s/a/b/g"), Ok(vec![]));
        assert_eq!(sed_script("1,/x/d;$p"), Ok(vec![]));
        assert_eq!(sed_script("/a/,+2{s|x|y|2;p}"), Ok(vec![]));
        assert_eq!(
            sed_script("1e touch M"),
            Ok(vec![SedEffect::Runs("e touch M".into())])
        );
        assert_eq!(
            sed_script("s/x/id/e"),
            Ok(vec![SedEffect::Runs("s///e".into())])
        );
        assert_eq!(
            sed_script("w /tmp/x"),
            Ok(vec![SedEffect::Writes("/tmp/x".into())])
        );
        assert_eq!(
            sed_script("s/a/b/w out.txt"),
            Ok(vec![SedEffect::Writes("out.txt".into())])
        );
        assert_eq!(sed_script("2!W f"), Ok(vec![SedEffect::Writes("f".into())]));
        assert!(sed_script("s/a/b/x").is_err());
        assert!(sed_script("s/a/b").is_err());
        assert!(sed_script("k").is_err());
        // The escaped delimiter does not end the part; `e` after it is a flag.
        assert_eq!(
            sed_script(r"s/a\/b/c/e"),
            Ok(vec![SedEffect::Runs("s///e".into())])
        );
        // Text of `a` is text, not commands.
        assert_eq!(sed_script("a e touch M"), Ok(vec![]));
    }
}
