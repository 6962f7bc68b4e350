//! The command line describing itself: `cairn --help` lists the commands in groups that
//! follow a user's journey (record, review, re-run, integrity, team, other), and the
//! hidden `cairn help-markdown` prints `docs/CLI.md`, the reference of every command,
//! from the same clap definitions, so the reference cannot drift from the flags.
//!
//! clap 4.6 gives every subcommand the one heading `Commands:` (`subcommand_help_heading`
//! is per parent, and `next_help_heading` applies to arguments only), so the grouped
//! list is rendered here and placed where clap's list would be by a help template.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use clap::builder::StyledStr;
use clap::{Arg, Command};

/// One group of commands: its heading, a line on what its commands are for
/// (`docs/CLI.md`), and its commands in order.
struct Group {
    heading: &'static str,
    what: &'static str,
    commands: &'static [&'static str],
}

/// The groups, in the order `cairn --help` and `docs/CLI.md` list them. A command that
/// no group names goes under the last one, so a new command is never left out.
const GROUPS: &[Group] = &[
    Group {
        heading: "Record",
        what: "Run an agent through cairn, or record the agents you already use.",
        commands: &["run", "chat", "hook", "mcp"],
    },
    Group {
        heading: "Review",
        what: "Find sessions and read what they did.",
        commands: &["sessions", "show", "browse", "audit", "search", "ps", "log"],
    },
    Group {
        heading: "Re-run",
        what: "Replay a session, compare two, go back to a point of one, go on from one.",
        commands: &[
            "replay", "rerun", "diff", "checkout", "fork", "resume", "continue",
        ],
    },
    Group {
        heading: "Integrity",
        what: "Check a log, sign it, prove what it holds, have witnesses cosign it.",
        commands: &["verify", "head", "key", "prove", "witness", "checkpoint"],
    },
    Group {
        heading: "Team",
        what: "Share sessions in an archive, bring in other agents' sessions, send them to other tools.",
        commands: &["archive", "worker", "import", "export"],
    },
    Group {
        heading: "Other",
        what: "Settings, the project's lists, the catalogs and the rest.",
        commands: &[
            "demo",
            "config",
            "allow",
            "memory",
            "tools",
            "schema",
            "completions",
            "help",
        ],
    },
];

/// The visible subcommands of `cmd` under each group's heading, in order; those no
/// group names are appended to the last group.
fn grouped(cmd: &Command) -> Vec<(&'static Group, Vec<&Command>)> {
    let visible: Vec<&Command> = cmd.get_subcommands().filter(|c| !c.is_hide_set()).collect();
    let named: BTreeSet<&str> = GROUPS
        .iter()
        .flat_map(|g| g.commands.iter().copied())
        .collect();
    let mut groups: Vec<(&'static Group, Vec<&Command>)> = GROUPS
        .iter()
        .map(|g| {
            let commands = g
                .commands
                .iter()
                .filter_map(|name| visible.iter().copied().find(|c| c.get_name() == *name))
                .collect();
            (g, commands)
        })
        .collect();
    if let Some((_, last)) = groups.last_mut() {
        last.extend(visible.iter().filter(|c| !named.contains(c.get_name())));
    }
    groups
}

/// The command line with its help grouped: each subcommand's `display_order` follows
/// the groups (completions and `cairn help` list them in that order too), and the help
/// shows the groups under their headings, then the options. Nothing is built here (a
/// full build of the tree costs every run of `cairn` a few milliseconds): the `help`
/// subcommand clap adds at parse time is listed from a tiny command's.
pub(crate) fn with_groups(mut cmd: Command) -> Command {
    let groups: Vec<(&'static Group, Vec<(String, String)>)> = grouped(&cmd)
        .into_iter()
        .map(|(group, commands)| {
            let entries = commands
                .iter()
                .map(|c| (c.get_name().to_string(), about(c)))
                .collect();
            (group, entries)
        })
        .collect();
    let mut order = 0;
    for (_, entries) in &groups {
        for (name, _) in entries {
            cmd = cmd.mut_subcommand(name, |c| c.display_order(order));
            order += 1;
        }
    }
    let help = clap_help_subcommand(&cmd);
    let styles = cmd.get_styles();
    let (header, literal) = (*styles.get_header(), *styles.get_literal());
    let width = groups
        .iter()
        .flat_map(|(_, entries)| entries.iter().map(|(name, _)| name.chars().count()))
        .chain(help.iter().map(|(name, _)| name.chars().count()))
        .max()
        .unwrap_or(0);
    let mut list = String::new();
    let last = groups.len().saturating_sub(1);
    for (i, (group, entries)) in groups.iter().enumerate() {
        if i > 0 {
            list.push('\n');
        }
        let _ = writeln!(list, "{header}{}:{header:#}", group.heading);
        let help = help.iter().filter(|_| i == last);
        for (name, about) in entries.iter().chain(help) {
            let _ = writeln!(list, "  {literal}{name:width$}{literal:#}  {about}");
        }
    }
    // The list goes in as the before-help text, placed after the usage: the template
    // itself is parsed for `{…}` tags, which help texts contain.
    let template = format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{{before-help}}{header}Options:{header:#}\n{{options}}{{after-help}}"
    );
    cmd.before_help(StyledStr::from(list.trim_end().to_string()))
        .help_template(StyledStr::from(template))
}

/// A command's one-line description, as clap's list of subcommands shows it.
fn about(cmd: &Command) -> String {
    cmd.get_about()
        .or(cmd.get_long_about())
        .map(ToString::to_string)
        .unwrap_or_default()
}

/// The name and description of the `help` subcommand clap will add to `cmd` when it
/// builds it, taken from a tiny command clap builds the same way.
fn clap_help_subcommand(cmd: &Command) -> Option<(String, String)> {
    if !cmd.has_subcommands() || cmd.is_disable_help_subcommand_set() {
        return None;
    }
    let mut tiny = Command::new("tiny").subcommand(Command::new("sub"));
    tiny.build();
    tiny.find_subcommand("help")
        .map(|h| (h.get_name().to_string(), about(h)))
}

/// `docs/CLI.md`: every command of `cmd` (built by [`with_groups`]) in the order of
/// its groups, each with its description, usage, arguments and options.
pub(crate) fn markdown(cmd: &Command) -> String {
    // Built, so that each subcommand knows its full name (`cairn mcp add`) and has the
    // global arguments.
    let mut cmd = cmd.clone();
    cmd.build();
    let cmd = &cmd;
    let name = cmd.get_name();
    let mut md = String::new();
    let _ = writeln!(md, "# The `{name}` command line\n");
    let _ = writeln!(
        md,
        "Generated from the command line's definitions by `cargo run -p cairn-cli -- help-markdown > docs/CLI.md`; \
         edit the doc comments in `cli/src/`, not this file. `{name} COMMAND --help` prints the same text.\n"
    );
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(md, "{}\n", prose(&about.to_string()));
    }
    let groups = grouped(cmd);
    for (group, commands) in &groups {
        let links: Vec<String> = commands
            .iter()
            .filter(|c| !is_help(c))
            .map(|c| {
                format!(
                    "[`{}`](#{})",
                    c.get_name(),
                    anchor(&format!("{name} {}", c.get_name()))
                )
            })
            .collect();
        if !links.is_empty() {
            let _ = writeln!(
                md,
                "- [{}](#{}): {}",
                group.heading,
                anchor(group.heading),
                links.join(", ")
            );
        }
    }
    md.push('\n');
    let globals: Vec<&Arg> = documented_args(cmd, &BTreeSet::new())
        .into_iter()
        .filter(|a| a.is_global_set())
        .collect();
    if !globals.is_empty() {
        md.push_str(
            "Every command takes `-h` (its summary) and `--help` (its whole text), and these:\n\n",
        );
        for a in &globals {
            md.push_str(&arg_item(a));
        }
        md.push('\n');
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        let _ = writeln!(md, "{}\n", prose(&after.to_string()));
    }
    let inherited: BTreeSet<String> = globals.iter().map(|a| a.get_id().to_string()).collect();
    for (group, commands) in &groups {
        if commands.iter().all(|c| is_help(c)) {
            continue;
        }
        let _ = writeln!(md, "## {}\n\n{}\n", group.heading, group.what);
        for c in commands.iter().filter(|c| !is_help(c)) {
            command_section(&mut md, c, 3, &inherited);
        }
    }
    md.trim_end().to_string() + "\n"
}

/// clap's own `help` subcommand, which each command with subcommands has.
fn is_help(cmd: &Command) -> bool {
    cmd.get_name() == "help"
}

/// One command's section, then its subcommands' one level down.
fn command_section(md: &mut String, cmd: &Command, level: usize, inherited: &BTreeSet<String>) {
    let path = cmd
        .get_bin_name()
        .map(str::to_string)
        .unwrap_or_else(|| cmd.get_name().to_string());
    let _ = writeln!(md, "{} `{path}`\n", "#".repeat(level.min(6)));
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(md, "{}\n", prose(&about.to_string()));
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.strip_prefix("Usage: ").unwrap_or(&usage);
    let _ = writeln!(md, "```text\n{}\n```\n", usage.trim_end());
    let args = documented_args(cmd, inherited);
    let (positionals, options): (Vec<&Arg>, Vec<&Arg>) =
        args.iter().partition(|a| a.is_positional());
    for (title, list) in [("Arguments", positionals), ("Options", options)] {
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(md, "{title}:\n");
        for a in list {
            md.push_str(&arg_item(a));
        }
        md.push('\n');
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        let _ = writeln!(md, "{}\n", prose(&after.to_string()));
    }
    // A global argument of this command is shown here once, not again in each
    // subcommand it reaches.
    let mut inherited = inherited.clone();
    inherited.extend(
        args.iter()
            .filter(|a| a.is_global_set())
            .map(|a| a.get_id().to_string()),
    );
    for sub in cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && !is_help(c))
    {
        command_section(md, sub, level + 1, &inherited);
    }
}

/// The arguments a command's section shows: not hidden, not clap's `--help` and
/// `--version`, not a global one an enclosing command already showed.
fn documented_args<'a>(cmd: &'a Command, inherited: &BTreeSet<String>) -> Vec<&'a Arg> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .filter(|a| !inherited.contains(a.get_id().as_str()))
        .collect()
}

/// One argument as a list item: its spelling, help, default and accepted values.
fn arg_item(arg: &Arg) -> String {
    let mut spelling = arg.to_string();
    if let (Some(short), Some(_)) = (arg.get_short(), arg.get_long()) {
        spelling = format!("-{short}, {spelling}");
    }
    if arg.is_last_set() {
        spelling = format!("-- {spelling}");
    }
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| prose(&h.to_string()))
        .unwrap_or_default();
    let mut notes = Vec::new();
    if arg.get_action().takes_values() {
        let values: Vec<String> = arg
            .get_possible_values()
            .into_iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| match v.get_help() {
                Some(h) => format!("`{}`: {}", v.get_name(), prose(&h.to_string())),
                None => format!("`{}`", v.get_name()),
            })
            .collect();
        if !values.is_empty() {
            notes.push(format!("one of {}", values.join(", ")));
        }
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|d| format!("`{}`", d.to_string_lossy()))
            .collect();
        if !defaults.is_empty() {
            notes.push(format!("default: {}", defaults.join(" ")));
        }
    }
    let mut item = format!("- `{spelling}`");
    match (help.is_empty(), notes.is_empty()) {
        (true, true) => {}
        (true, false) => {
            let _ = write!(item, ": {}", notes.join("; "));
        }
        (false, true) => {
            let _ = write!(item, ": {help}");
        }
        (false, false) => {
            let _ = write!(item, ": {help} ({})", notes.join("; "));
        }
    }
    item.push('\n');
    item
}

/// Help text made safe for Markdown: outside `code spans`, the characters that would
/// start emphasis or an HTML tag (`mcp__{server}__{tool}`, `archive:<id>`) are escaped.
fn prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for ch in text.trim().chars() {
        match ch {
            '`' => in_code = !in_code,
            '\\' | '*' | '_' | '<' if !in_code => out.push('\\'),
            _ => {}
        }
        out.push(ch);
    }
    out
}

/// The anchor GitHub gives a heading: lowercase, spaces as `-`, other punctuation
/// dropped.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line as clap parses it: built, with the `help` subcommand.
    fn cli() -> Command {
        let mut cmd = with_groups(<crate::Cli as clap::CommandFactory>::command());
        cmd.build();
        cmd
    }

    #[test]
    fn every_command_is_named_by_exactly_one_group() {
        let cmd = cli();
        let mut named: Vec<&str> = GROUPS
            .iter()
            .flat_map(|g| g.commands.iter().copied())
            .collect();
        named.sort_unstable();
        let mut real: Vec<&str> = cmd
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(Command::get_name)
            .collect();
        real.sort_unstable();
        assert_eq!(
            named, real,
            "put each command in one group of clidoc::GROUPS"
        );
    }

    #[test]
    fn display_order_follows_the_groups() {
        let cmd = cli();
        let mut shown: Vec<&Command> = cmd.get_subcommands().collect();
        shown.sort_by_key(|c| c.get_display_order());
        let names: Vec<&str> = shown.iter().map(|c| c.get_name()).collect();
        let expected: Vec<&str> = GROUPS
            .iter()
            .flat_map(|g| g.commands.iter().copied())
            .collect();
        assert_eq!(names, expected);
    }

    #[test]
    fn prose_escapes_markdown_outside_code_spans_only() {
        let check = |text: &str, expected: &str| assert_eq!(prose(text), expected, "{text:?}");
        check("mcp__{server}__{tool}", "mcp\\_\\_{server}\\_\\_{tool}");
        check(
            "take `archive:<id>` or <id>",
            "take `archive:<id>` or \\<id>",
        );
        check("prefix* and a\\b", "prefix\\* and a\\\\b");
        check("`mcp__x` then *y*", "`mcp__x` then \\*y\\*");
    }

    #[test]
    fn anchors_are_githubs() {
        assert_eq!(anchor("cairn mcp add"), "cairn-mcp-add");
        assert_eq!(anchor("Re-run"), "re-run");
        assert_eq!(anchor("`cairn run`"), "cairn-run");
    }
}
