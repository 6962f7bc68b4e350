//! A seeded, grammar-based generator of bash command lines for the consent oracle
//! (`oracle`, `tests/tests/it/consent_oracle.rs`).
//!
//! Each line belongs to one [`Class`]: a way of making bash run a program that the
//! line's words do not show plainly (a substitution in some position, a builtin that
//! evaluates a name, a program option that runs a command, a write through a path that
//! leads outside the workspace), or a harmless line an "always" should cover. A class is
//! a set of forms, each a piece of bash with holes («s»: a command substitution of the
//! marker, «o»: a path into `out/`, «h»: a harmless command, …) filled at random; the
//! result is then mixed with harmless commands of granted programs (before it, after it,
//! around it in a subshell, a group, an `if`, a loop or a `case`), joined by `;`, `&&`,
//! `&`, `|`, newlines and tabs.
//!
//! The payload is the marker program `cairnmark`: by its name (found on `PATH`) or by its
//! absolute path. A line is a [`Template`] holding placeholders for the marker and the
//! `out/` folder; [`Template::render`] puts in the paths of one run. Every write a line
//! makes lands in the workspace (`ws/`), in `out/` beside it or in the run's home and
//! temporary folders: no line names a path outside the run's folder, removes a file or
//! reaches the network.

use crate::Rng;

/// Stands for the marker as a command word found on `PATH` (`cairnmark`).
pub const MARK_NAME: char = '\u{E000}';
/// Stands for the marker's absolute path.
pub const MARK_PATH: char = '\u{E001}';
/// Stands for the absolute path of the `out/` folder beside the workspace.
pub const OUT_DIR: char = '\u{E002}';

/// The marker program's name, as the runs put it on `PATH`.
pub const MARKER: &str = "cairnmark";

/// The programs a person has answered "always" for: every line is made of these, the
/// marker and shell syntax.
pub const GRANTED: &[&str] = &[
    "echo", "cat", "printf", "git", "sed", "tar", "sort", "cp", "mv", "tee", "ln", "find", "xargs",
    "awk", "grep", "ls", "head", "tail", "wc", "env", "true", "test", "[", "dd", "touch", "mkdir",
];

/// What the placeholders of a template stand for in one run.
#[derive(Debug, Clone, Copy)]
pub struct Places<'a> {
    /// The marker as a command word found on `PATH` (`cairnmark`); a run without the
    /// marker on `PATH` (the engine's) gives its absolute path here too.
    pub mark_name: &'a str,
    /// The marker's absolute path.
    pub mark_path: &'a str,
    /// The absolute path of `out/`.
    pub out_dir: &'a str,
}

/// One generated line, its paths still placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub class: Class,
    pub text: String,
}

impl Template {
    /// The line as bash runs it in a run whose paths are `places`.
    pub fn render(&self, places: &Places<'_>) -> String {
        let mut out = String::with_capacity(self.text.len() + 64);
        for c in self.text.chars() {
            match c {
                MARK_NAME => out.push_str(places.mark_name),
                MARK_PATH => out.push_str(places.mark_path),
                OUT_DIR => out.push_str(places.out_dir),
                c => out.push(c),
            }
        }
        out
    }

    /// The line with readable stand-ins for its paths (`cairnmark`, `$MARK`, `$OUT`):
    /// what a report shows.
    pub fn readable(&self) -> String {
        self.render(&Places {
            mark_name: MARKER,
            mark_path: "$MARK",
            out_dir: "$OUT",
        })
    }
}

macro_rules! classes {
    ($($variant:ident => $name:literal,)*) => {
        /// A construct class: one way of hiding a program or a write, or harmless lines.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Class { $($variant,)* }

        impl Class {
            /// Every class, in the order lines take them in turn.
            pub const ALL: &'static [Class] = &[$(Class::$variant,)*];

            /// Its name in reports.
            pub fn name(self) -> &'static str {
                match self { $(Class::$variant => $name,)* }
            }
        }
    };
}

classes! {
    Harmless => "harmless",
    Control => "control",
    SubArgument => "sub_argument",
    SubDquote => "sub_dquote",
    ParamOperand => "param_operand",
    SquoteInParam => "squote_in_param",
    Arith => "arith",
    ArithVariable => "arith_variable",
    Subscript => "subscript",
    NameSubscript => "name_subscript",
    Dbracket => "dbracket",
    Indirect => "indirect",
    HeredocUnquoted => "heredoc_unquoted",
    HeredocQuoted => "heredoc_quoted",
    HeredocDelimiter => "heredoc_delimiter",
    Herestring => "herestring",
    Case => "case",
    ForList => "for_list",
    RedirectTarget => "redirect_target",
    ProcessSub => "process_sub",
    Backquote => "backquote",
    AssignmentValue => "assignment_value",
    Eval => "eval",
    Function => "function",
    Alias => "alias",
    Source => "source",
    Exec => "exec",
    HashEnable => "hash_enable",
    Trap => "trap",
    EnvAssign => "env_assign",
    Builtins => "builtins",
    Wrapper => "wrapper",
    SedRuns => "sed_runs",
    TarRuns => "tar_runs",
    GitRuns => "git_runs",
    SortRuns => "sort_runs",
    AwkRuns => "awk_runs",
    Continuation => "continuation",
    Lexical => "lexical",
    WritesRedirect => "writes_redirect",
    WritesProgram => "writes_program",
}

/// The line of number `index` of the corpus of `seed`: its class is the index's turn
/// among [`Class::ALL`], its text depends on the seed and the index only (so a run on
/// any number of threads makes the same lines, and one line can be made again alone).
pub fn line(seed: u64, index: u64) -> Template {
    let classes = Class::ALL.len() as u64;
    let class = Class::ALL[(index % classes) as usize];
    let mut g = Gen {
        rng: Rng::new(seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17)),
    };
    // The first draws of SplitMix64 from nearby seeds differ well enough; two more
    // mix in the index once again.
    g.rng.next_u64();
    let text = g.line(class);
    Template { class, text }
}

/// Harmless simple commands of granted programs (cwd: the workspace).
const HARMLESS: &[&str] = &[
    "echo hello",
    "echo \"$HOME\"",
    "printf '%s\\n' a b",
    "cat a.txt",
    "cat a.txt b.txt",
    "git status --short",
    "git log --oneline -1",
    "git diff --stat",
    "sed -n 1p a.txt",
    "sed 's/hello/bye/' a.txt",
    "tar -tf a.tar",
    "sort a.txt",
    "sort -r b.txt",
    "cp a.txt copy.txt",
    "mv c.txt moved.txt",
    "tee t.txt < a.txt",
    "ln -s a.txt l.txt",
    "find . -name '*.txt'",
    "find src -type f",
    "awk '{print $1}' a.txt",
    "grep -n hello a.txt",
    "grep -rn main src",
    "ls -la",
    "ls src",
    "head -n 1 a.txt",
    "tail -n 1 a.txt",
    "wc -l a.txt",
    "env",
    "true",
    "test -f a.txt",
    "[ -d src ]",
    "dd if=a.txt of=d.txt status=none",
    "touch new.txt",
    "mkdir -p d/e",
    "echo x > made.txt",
    "echo x >> b.txt",
];

/// Harmless commands that read their input, for the end of a pipe.
const CONSUMERS: &[&str] = &[
    "cat",
    "wc -l",
    "sort",
    "head -n 1",
    "tail -n 2",
    "grep -c x",
];

/// Workspace files the lines read.
const FILES: &[&str] = &["a.txt", "b.txt", "src/main.rs", "big.txt"];

/// Spellings of a file in `out/`, from the workspace: lexically outside, through the
/// symlink `link -> ../out`, through `/proc` and `/dev/fd`, through `$PWD` and `~`
/// (home is a folder beside the workspace).
const OUT_FILES: &[&str] = &[
    "../out/f",
    "\u{E002}/f",
    "link/f",
    "./link/f",
    "link/./f",
    "src/../link/f",
    "../ws/link/f",
    "/dev/fd/../cwd/../out/f",
    "/proc/self/cwd/../out/f",
    "\"$PWD\"/../out/f",
    "~/../out/f",
    "$HOME/../out/f",
    "\"${HOME}/../out/f\"",
];

/// The same, as folders.
const OUT_DIRS: &[&str] = &[
    "../out",
    "\u{E002}",
    "link",
    "./link/",
    "src/../link",
    "/dev/fd/../cwd/../out",
    "/proc/self/cwd/../out",
    "\"$PWD/../out\"",
    "~/../out",
];

const HARMLESS_FORMS: &[&str] = &[
    "«h»",
    "«h»; «h»",
    "«h» && «h»",
    "«h» | sort | head -n 2",
    "cat «f» | grep -c o",
    "git log --oneline | wc -l",
    "for f in a.txt b.txt; do wc -l \"$f\"; done",
    "if test -f «f»; then cat «f»; else echo none; fi",
    "if [ -d src ]; then ls src; fi",
    "case \"$HOME\" in /*) echo abs;; *) echo rel;; esac",
    "echo \"${HOME:-none}\" \"${x:-default}\" \"${#HOME}\"",
    "x=1; echo \"$x\"",
    "echo '$(«m»)' \"\\$(«m»)\" \\`«m»\\`",
    "cat <<'EOF'«nl»literal $(«m») `«m»`«nl»EOF",
    "cat <<EOF«nl»plain text $HOME«nl»EOF",
    "grep -n hello «f» > matches.txt",
    "{ echo a; echo b; } > two.txt",
    "(cd src && ls)",
    "cat «f» | tee copy.txt | wc -l",
    "sed -i s/hello/bye/ a.txt",
    "find . -name '*.txt' -newer a.txt",
    "echo a.txt | xargs wc -l",
    "find src -name '*.rs' -exec wc -l {} +",
    "awk 'NR==1{print $1}' «f»",
    "printf '%s\\n' one two | sort -r",
    "tar -cf w.tar a.txt b.txt",
    "git diff --stat && git status --short",
    "test -n \"$HOME\" && echo set",
    "echo $((1 + 2))",
    "echo x 2>/dev/null >> a.txt",
];

const CONTROL: &[&str] = &[
    "«m»",
    "( «m» )",
    "{ «m»; }",
    "if «m»; then echo y; fi",
    "if true; then «m»; fi",
    "while «m»; do break; done",
    "for i in 1; do «m»; done",
    "case x in x) «m»;; esac",
    "! «m»",
    "time «m»",
    "«m» &",
    "true && «m»",
    "false || «m»",
    "echo x | «m»",
    "«m» | cat",
    "«m» > /dev/null 2>&1",
    "coproc «m»",
    "command «m»",
    "x=1 «m»",
    "\"«m»\"",
    "\\«m»",
    "true;«m»",
    "true&&«m»",
    "true|«m»",
    "«h»«nl»\\«m»",
    "«h»«nl»\\«m» x",
];

const SUB_ARGUMENT: &[&str] = &[
    "echo «s»",
    "echo x«s»y",
    "cat «s»",
    "printf '%s\\n' «s» «s»",
    "ls «s»",
    "git log «s»",
    "grep -n x «s»",
    "head -n 1 «s» a.txt",
    "test -n «s»",
    "[ -n «s» ]",
    "find «s» -maxdepth 0",
    "echo --opt=«s»",
    "sort «s» a.txt",
    "wc -l a.txt «s»",
    "git -C . status «s»",
];

const SUB_DQUOTE: &[&str] = &[
    "echo \"«s»\"",
    "echo \"a «s» b\"",
    "printf '%s\\n' \"x«s»\"",
    "test -z \"«s»\"",
    "echo \"$HOME«s»\"",
    "echo \"'«s»'\"",
    "echo \"${HOME}«s»\"",
    "cat \"«s»\"",
    "echo \"\\\"«s»\\\"\"",
    "echo \"a\"\"«s»\"",
    "echo x\"«s»\"x",
];

const PARAM_OPERAND: &[&str] = &[
    "echo ${x:-«s»}",
    "echo \"${x:-«s»}\"",
    "x=a; echo ${x:+«s»}",
    "x=a; echo \"${x:+«s»}\"",
    "echo ${x:=«s»}",
    "echo ${x=«s»}",
    "echo ${x-«s»}",
    "x=abc; echo ${x#«s»}",
    "x=abc; echo ${x%%«s»}",
    "x=abc; echo ${x/«s»/y}",
    "x=abc; echo \"${x/b/«s»}\"",
    "x=abc; echo ${x//a/«s»}",
    "x=abc; echo ${x^«s»}",
    "echo ${x:?«s»}",
    "echo \"${x:-${y:-«s»}}\"",
    "echo ${HOME:+«s»}",
    "x=abc; echo ${x/#a/«s»}",
];

const SQUOTE_IN_PARAM: &[&str] = &[
    "echo \"${x:-'«s»'}\"",
    "x=a; echo \"${x:+'«s»'}\"",
    "echo \"${x:='«s»'}\"",
    "echo ${x:-'«s»'}",
    "x=abc; echo \"${x#'«s»'}\"",
    "x=abc; echo \"${x/'«s»'/y}\"",
    "x=abc; echo \"${x/b/'«s»'}\"",
    "echo \"${x:-\"'«s»'\"}\"",
    "echo \"${x:-'a'«s»'b'}\"",
    "echo \"${x-'«s»'}\"",
    "x=a; echo \"${x+'«s»'}\"",
    "echo \"${HOME:+'«s»'}\"",
    "echo \"${x:-'«s»\"}\"",
];

const ARITH: &[&str] = &[
    "echo $((«s»))",
    "echo $(( 1 + «s» ))",
    "(( «s» ))",
    "((x = «s» + 1))",
    "echo $[«s»]",
    "let x=«s»",
    "let \"x=«s»\"",
    "for ((i=«s»; i<1; i++)); do :; done",
    "echo $(( x[«s»] ))",
    "x=abc; echo ${x:«s»}",
    "x=abc; echo ${x:0:«s»1}",
    "echo $(( \"«s»\" ))",
    "declare -i n=«s»",
    "(( x[«s»] = 1 ))",
];

const ARITH_SET: &[&str] = &[
    "x='a[«q»]'",
    "x=\"a[\\$(«m»)]\"",
    "x=a\\[\\$\\(«m»\\)\\]",
    "read x <<< 'a[«q»]'",
    "printf -v x %s 'a[«q»]'",
    "declare x='a[«q»]'",
    "export x='a[«q»]'",
    "x='«q»'",
    "x='y[«q»]' y=1",
];

const ARITH_USE: &[&str] = &[
    "echo $((x))",
    "echo $((x + 1))",
    "((x))",
    "let x",
    "let y=x",
    "echo ${a[x]}",
    "echo \"${a[x]}\"",
    "[[ $x -eq 0 ]]",
    "[[ x -lt 1 ]]",
    "y=abc; echo ${y:x}",
    "y=abc; echo ${y:0:x}",
    "declare -i y=x",
    "declare -i y; y=x",
    "echo $[x]",
    "for ((i=x; i<1; i++)); do :; done",
    "test $x -eq 0",
    "[ \"$x\" -gt 1 ]",
    "printf '%d\\n' \"$x\"",
    "a[x]=1",
    "echo $(( $x ))",
];

const SUBSCRIPT: &[&str] = &[
    "a[«s»]=1",
    "echo ${a[«s»]}",
    "echo \"${a[«s»]}\"",
    "a=([«s»]=1)",
    "declare a[«s»]=1",
    "echo ${#a[«s»]}",
    "declare -A b; b[«s»]=1",
    "echo ${a[«s»]:-x}",
    "a[1]=«s»",
    "echo ${a[@]:«s»}",
    "unset a[«s»]",
];

const NAME_SUBSCRIPT: &[&str] = &[
    "declare 'a[«q»]=1'",
    "typeset 'a[«q»]'=1",
    "printf -v 'a[«q»]' x",
    "read 'a[«q»]' <<< x",
    "let 'a[«q»]=1'",
    "let 'a[«q»]++'",
    "unset 'a[«q»]'",
    "unset -v 'a[«q»]'",
    "export 'a[«q»]=1'",
    "readonly 'a[«q»]=1'",
    "mapfile -t 'a[«q»]' < a.txt",
    "getopts a 'a[«q»]'",
    "wait -p 'a[«q»]'",
    "[[ -v 'a[«q»]' ]]",
    "test -v 'a[«q»]'",
    "[ -v 'a[«q»]' ]",
    "declare -n r='a[«q»]'; r=1",
    "declare -a 'a[«q»]'",
    "read -a x <<< 1; read 'x[«q»]' <<< 2",
    "printf -v \"a[\\«q»]\" x",
    "f() { local 'a[«q»]=1'; }; f",
];

const DBRACKET: &[&str] = &[
    "[[ «s» ]]",
    "[[ -n «s» ]]",
    "[[ x == «s» ]]",
    "[[ «s» == x ]]",
    "[[ x =~ «s» ]]",
    "[[ -f «s» ]]",
    "[[ 'a[«q»]' -eq 1 ]]",
    "[[ 1 -lt 'a[«q»]' ]]",
    "[[ a[«s»] -eq 0 ]]",
    "[[ -v a[«s»] ]]",
    "[[ x == x && «s» ]]",
    "[[ \"«s»\" ]]",
    "[[ -n «p» ]]",
    "[[ 'x' < «s» ]]",
];

const INDIRECT: &[&str] = &[
    "x='a[«q»]'; echo ${!x}",
    "x='a[«q»]'; echo \"${!x}\"",
    "x='a[«q»]'; echo ${!x:-y}",
    "x='«q»'; echo ${x@P}",
    "x='«q»'; echo \"${x@P}\"",
    "declare -n r='a[«q»]'; echo $r",
    "x='a[«q»]'; declare -n r=$x; echo $r",
    "x='a[«q»]'; echo ${!x@Q}",
    "x='«q»'; echo ${x@E}",
    "x='«q»'; y=x; echo ${!y}",
];

const HEREDOC_UNQUOTED: &[&str] = &[
    "cat <<EOF«nl»«s»«nl»EOF",
    "cat <<EOF«nl»text «s» more«nl»EOF",
    "cat <<-EOF«nl»«tab»«s»«nl»«tab»EOF",
    "sed p <<EOF«nl»«s»«nl»EOF",
    "cat <<EOF > h.txt«nl»«s»«nl»EOF",
    "cat <<EOF«nl»${x:-«s»}«nl»EOF",
    "cat <<EOF«nl»'«s»'«nl»EOF",
    "cat <<EOF«nl»\"«s»\"«nl»EOF",
    "cat <<EOF«nl»$((«s»))«nl»EOF",
    "cat <<EOF | wc -l«nl»«s»«nl»EOF",
    "cat <<EOF; echo done«nl»«s»«nl»EOF",
    "cat <<A <<B«nl»x«nl»A«nl»«s»«nl»B",
    "cat <<'A' <<B«nl»x«nl»A«nl»«s»«nl»B",
    "cat <<A; cat <<'B'«nl»«s»«nl»A«nl»x«nl»B",
    "echo \"$(cat <<EOF«nl»«s»«nl»EOF«nl»)\"",
    "cat << EOF«nl»«s»«nl»EOF",
    "tee h.txt <<EOF«nl»«s»«nl»EOF",
    "cat <<EOF«nl»\\\\«s»«nl»EOF",
];

const HEREDOC_QUOTED: &[&str] = &[
    "cat <<'EOF'«nl»«s»«nl»EOF",
    "cat <<\"EOF\"«nl»«s»«nl»EOF",
    "cat <<\\EOF«nl»«s»«nl»EOF",
    "cat <<E'O'F«nl»«s»«nl»EOF",
    "cat <<-'EOF'«nl»«tab»«s»«nl»«tab»EOF",
    "sed p <<'X'«nl»«s»«nl»X",
    "cat <<'EOF' | wc -l«nl»«s»«nl»EOF",
    "cat <<'EOF'«nl»${x:-«s»} `«m»`«nl»EOF",
    "cat <<\"E\"OF«nl»«s»«nl»EOF",
];

const HEREDOC_DELIMITER: &[&str] = &[
    "cat <<EO\\«nl»F«nl»«s»«nl»EOF",
    "cat <<E\\«nl»OF«nl»«s»«nl»EOF",
    "cat <<\"EO\\«nl»F\"«nl»«s»«nl»EOF",
    "cat <<'EOF'«cr»«nl»x«nl»EOF«cr»«nl»«m»«nl»EOF",
    "cat <<EOF«cr»«nl»x«nl»EOF«nl»«s»«nl»EOF«cr»",
    "cat <<-EOF«nl»x«nl»«tab»EOF«nl»«m»«nl»EOF",
    "cat <<'EOF'«nl»x«nl» EOF«nl»«m»«nl»EOF",
    "cat <<'EOF'«nl»x«nl»EOF «nl»«m»«nl»EOF",
    "cat <<$x«nl»«s»«nl»$x",
    "cat <<EOF«nl»«s»",
    "cat <<'EOF'«nl»«s»",
    "cat <<'EOF'x«nl»«s»«nl»EOFx",
    "cat <<'E O'«nl»«s»«nl»E O",
    "cat <<EOF«nl»x«nl»EOF\\«nl»«s»«nl»EOF",
    "cat <<'EOF'«nl»x«nl»EOF\\«nl»«m»«nl»EOF",
    "cat <<EOF«tab»«nl»«s»«nl»EOF",
    "cat <<'EOF';«m»«nl»x«nl»EOF",
    "cat <<'EOF' # «nl»«s»«nl»EOF",
    "x=$(cat <<'EOF'«nl»)«nl»EOF«nl»); «m»",
    "cat <<\\EO\\F«nl»«s»«nl»EOF",
];

const HERESTRING: &[&str] = &[
    "cat <<< «s»",
    "cat <<< \"«s»\"",
    "cat <<<«s»",
    "sed p <<< \"x «s»\"",
    "read x <<< «s»",
    "cat <<< '«s»'",
    "cat <<< \"${x:-«s»}\"",
    "wc -l <<< «p»",
    "cat <<< $'«s»'",
    "grep x <<< «s»x",
];

const CASE: &[&str] = &[
    "case x in «s») echo y;; esac",
    "case x in a|«s») ;; esac",
    "case «s» in *) echo any;; esac",
    "case x in («s») ;; esac",
    "case x in \"«s»\") ;; esac",
    "case x in x) echo «s»;; esac",
    "case x in *) ;; «s») ;; esac",
    "case y in x) ;; «s») ;; esac",
    "case x in x) «m»;; esac",
    "case \"«s»\" in x) ;; esac",
    "case x in y) ;; x) echo «s»;; esac",
    "case x in«nl»«s»)«nl»;;«nl»esac",
];

const FOR_LIST: &[&str] = &[
    "for i in «s»; do echo $i; done",
    "for i in a «s» b; do :; done",
    "for i in \"«s»\"; do :; done",
    "for i in ${x:-«s»}; do :; done",
    "for i in «p»; do cat $i; done",
    "for i in «s»«nl»do :«nl»done",
    "select i in «s»; do break; done",
    "for ((i=0; i<«s»1; i++)); do :; done",
    "for i in a; do echo «s»; done",
    "for «s» in a; do :; done",
];

const REDIRECT_TARGET: &[&str] = &[
    "echo x > «s»",
    "echo x >> \"«s»\"",
    "cat < «s»",
    "echo x 2> «s»",
    "echo x &> «s»",
    "echo x > \"${y:-«s»}\"",
    "echo x >«s»",
    "exec 3> «s»",
    "echo x > /dev/null«s»",
    "cat «f» 2>\"«s»\"",
    "ls > «p»",
    "echo x > «p»",
    "cat <«p»",
    "echo x 2>&1 >«s»",
    "echo x >x«s»",
];

const PROCESS_SUB: &[&str] = &[
    "cat <(«m»)",
    "echo x > >(«m»)",
    "tee >(«m») < a.txt",
    "sort a.txt <(«m»)",
    "cat < <(«m»)",
    "echo <(«m»)",
    "wc -l <(«m») a.txt",
    "echo \"<(«m»)\"",
    "git diff --no-index a.txt <(«m»)",
    "cat <( «m» )",
    "echo x >(«m»)",
    "diff=<(«m»)",
    "x=<(«m»)",
];

const BACKQUOTE: &[&str] = &[
    "echo `«m»`",
    "echo \"`«m»`\"",
    "echo ${x:-`«m»`}",
    "echo `echo \\`«m»\\``",
    "echo \"a`«m»`b\"",
    "x=`«m»`",
    "cat <<EOF«nl»`«m»`«nl»EOF",
    "echo \\``«m»`\\`",
    "echo '`'`«m»`'`'",
    "echo `# c`x`«m»`",
    "echo \"${x:-`«m»`}\"",
    "echo `«m» \\`echo\\``",
];

const ASSIGNMENT_VALUE: &[&str] = &[
    "x=«s»",
    "x=«s» echo hi",
    "export x=«s»",
    "declare x=«s»",
    "readonly x=\"«s»\"",
    "x+=«s»",
    "a=(«s»)",
    "a=(x «s»)",
    "local x=«s»",
    "x=«p»",
    "typeset -r y=«s»",
    "x=«s» true",
    "x=y«s» y=«s»",
];

const EVAL: &[&str] = &[
    "eval «m»",
    "eval \"echo x; «m»\"",
    "eval '«m»'",
    "builtin eval «m»",
    "command eval «m»",
    "eval \"$(printf '%s' «m»)\"",
    "eval -- «m»",
    "x=«m»; eval $x",
    "eval echo x\\; «m»",
    "eval «q»",
];

const FUNCTION: &[&str] = &[
    "echo() { «m»; }; echo x",
    "function git { «m»; }; git status",
    "cat() ( «m» ); cat a.txt",
    "ls() { «m»; }«nl»ls",
    "command_not_found_handle() { «m»; }; nosuchprogram",
    "function command_not_found_handle { «m»; }«nl»no_such_program",
    "f() { «m»; }; f",
    "test() { «m»; }; test -f a.txt",
    "true() { «m»; }; true",
    "sort() { «m»; }; printf 'b\\na\\n' | sort",
    "grep () { «m»; }; grep x a.txt",
    "function wc() { «m»; }; wc -l a.txt",
];

const ALIAS: &[&str] = &[
    "shopt -s expand_aliases«nl»alias echo='«m»'«nl»echo x",
    "shopt -s expand_aliases; alias ls=«m»«nl»ls",
    "alias cat='«m» #'«nl»cat a.txt",
    "alias git=«m»«nl»git status",
    "shopt -s expand_aliases«nl»alias true='«m»'«nl»true",
    "alias e='echo'; e x",
    "shopt -s expand_aliases«nl»alias sort='«m»;'«nl»sort a.txt",
    "alias head=\"«m»\"«nl»head a.txt",
    "shopt -s expand_aliases«nl»alias -- wc=«m»«nl»wc a.txt",
];

const SOURCE: &[&str] = &[
    "echo «m» > s.sh; . ./s.sh",
    "printf '%s\\n' «m» > s.sh && source s.sh",
    "echo «m» | tee s.sh > /dev/null; . ./s.sh",
    "source /dev/stdin <<< «m»",
    ". /dev/stdin <<EOF«nl»«m»«nl»EOF",
    ". <(echo «m»)",
    "source <(printf '%s' «m»)",
    "echo «m» > s.sh; . s.sh",
    "echo «m» > s.sh; builtin source ./s.sh",
    "echo «m» | . /dev/stdin",
];

const EXEC: &[&str] = &[
    "exec «m»",
    "exec -a x «m»",
    "exec env «m»",
    "exec echo x",
    "exec «m» x",
    "exec -- «m»",
    "exec -c «m»",
    "exec 3>&1; «m» >&3",
    "exec 2>/dev/null; echo x",
];

const HASH_ENABLE: &[&str] = &[
    "hash -p «M» echo; echo x",
    "hash -p «M» git; git status",
    "hash -p «M» cat; cat a.txt",
    "hash -p «M» sort; sort a.txt",
    "enable -n echo; echo x",
    "enable -n test; hash -p «M» test; test -f a.txt",
    "enable -n printf; hash -p «M» printf; printf x",
    "enable -n true; hash -p «M» true; true",
    "hash -p «M» ls«nl»ls",
    "enable -n echo«nl»hash -p «M» echo«nl»echo x",
    "hash -p «M» find; find . -maxdepth 0",
];

const TRAP: &[&str] = &[
    "trap «m» EXIT",
    "trap '«m»' EXIT",
    "trap -- \"«m»\" EXIT",
    "trap «m» ERR; false",
    "set -T; trap «m» DEBUG; echo x",
    "trap «m» DEBUG; echo x",
    "trap «m» RETURN; . /dev/null",
    "trap «m» 0",
    "trap '«q»' EXIT",
    "trap -- '«m»' EXIT; echo x",
];

const ENV_ASSIGN: &[&str] = &[
    "cp «M» ./git; PATH=.:$PATH git status",
    "cp «M» ./ls && PATH=. ls",
    "cp «M» cat; export PATH=\".:$PATH\"; cat a.txt",
    "cp «M» sort; PATH=.:/usr/bin:/bin; sort a.txt",
    "cp «M» head; env PATH=.:/usr/bin head a.txt",
    "PS4='«q»'; set -x; echo x",
    "export PS4='«q»'; set -o xtrace; true",
    "GIT_EXTERNAL_DIFF=«m» git diff",
    "PAGER=«m» git -p log",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=«m» git status",
    "GIT_CONFIG_PARAMETERS=\"'core.fsmonitor'='«m»'\" git status",
    "export GIT_EDITOR=«m»; git commit -q --allow-empty",
    "EDITOR=«m» git commit -q --allow-empty",
    "GIT_SSH_COMMAND=«m» git ls-remote ssh://h/x",
    "GIT_SSH=«M» git ls-remote h:x",
    "TAR_OPTIONS=--to-command=«m» tar -xf a.tar",
    "echo «m» > s.sh; BASH_ENV=s.sh git status",
    "env GIT_EXTERNAL_DIFF=«m» git diff",
    "export GIT_EXTERNAL_DIFF=«m»«nl»git diff",
    "x=«m»; GIT_EXTERNAL_DIFF=$x git diff",
    "cp «M» git-y; PATH=$PWD:$PATH git y",
    "cp «M» ./wc; PATH=\"$PWD\" wc a.txt",
];

const BUILTINS: &[&str] = &[
    "mapfile -C «m» -c 1 a < a.txt",
    "readarray -C '«m»' -c 1 < a.txt",
    "mapfile -t -C \"«m»\" -c1 x <<< a",
    "compgen -C «m» x",
    "compgen -W '«q»' x",
    "compgen -W '«q»'",
    "complete -C «m» echo",
    "x='«q»'; echo ${x@P}",
    "printf x | mapfile -C «m» -c 1",
    "command -p «m»",
    "builtin «m»",
    "mapfile -C '«m» #' -c 1 < b.txt",
];

const WRAPPER: &[&str] = &[
    "env «m»",
    "env -i «m»",
    "env -u HOME «m»",
    "env -- «m»",
    "env X=1 «m»",
    "env -C . «m»",
    "env -S '«m» x'",
    "env -S\"«m»\"",
    "env --split-string=«m»",
    "env -S«m»",
    "env -vS«m»",
    "xargs «m» < a.txt",
    "echo x | xargs «m»",
    "echo «m» | xargs env",
    "printf '%s\\n' «m» | xargs -I{} env {}",
    "xargs -a a.txt «m»",
    "echo «m» > cmd.txt; xargs -a cmd.txt env",
    "find . -maxdepth 0 -exec «m» \\;",
    "find . -maxdepth 0 -execdir «m» {} +",
    "find . -maxdepth 0 -exec env «m» \\;",
    "find . -maxdepth 0 -ok «m» \\;",
    "echo a.txt | xargs -I{} find {} -exec «m» \\;",
    "xargs -I{} «m» {} < a.txt",
    "cp «M» w.sh; find . -name w.sh -exec env {} \\;",
    "cp «M» w.sh; echo ./w.sh | xargs env",
    "cp «M» w.sh; ls w.sh | xargs -I{} env ./{}",
    "echo «m» | xargs -0 env",
    "env -S 'X=1 «m»'",
    "xargs «m» < /dev/null",
    "xargs --arg-file=a.txt «m»",
    "xargs -n1 «m» < a.txt",
    "xargs -P2 «m» < a.txt",
    "env --split-string «m»",
    "env - «m»",
    "env -u X -S«m»",
    "find . -maxdepth 0 -exec «m» ';'",
    "find . -maxdepth 0 -exec «m» {} \\+",
];

const SED_RUNS: &[&str] = &[
    "sed '1e «m»' a.txt",
    "sed -n '1e «m»' a.txt",
    "echo «m» | sed e",
    "printf '%s\\n' «m» | sed -n e",
    "sed 's|.*|«m»|e' a.txt",
    "sed -e '1e «m»' a.txt",
    "sed --expression='$e «m»' a.txt",
    "sed -n '/hello/e «m»' a.txt",
    "echo '1e «m»' > p.sed; sed -f p.sed a.txt",
    "sed -E 's|(.*)|«m»|e' a.txt",
    "sed 1e«m» a.txt",
    "sed -s -n '1e «m»' a.txt b.txt",
    "sed -z 'e «m»' a.txt",
    "sed '1!G;1e «m»' a.txt",
    "sed -i '1e «m»' a.txt",
    "echo «m» > cmds; sed e cmds",
    "sed -n '1{e «m»\n}' a.txt",
    "sed --regexp-extended -e 1e\\ «m» a.txt",
    "sed -- '1e «m»' a.txt",
    "sed -ne '1e «m»' a.txt",
    "sed -f /dev/stdin a.txt <<< '1e «m»'",
    "sed --expr='1e «m»' a.txt",
    "sed 's/x/y/;1e «m»' a.txt",
    "sed '1 e «m»' a.txt",
    "sed -n -e '1 {' -e 'e «m»' -e '}' a.txt",
    "sed 'y/a/b/;e «m»' a.txt",
];

const TAR_RUNS: &[&str] = &[
    "tar -cf x.tar --checkpoint=1 --checkpoint-action=exec=«m» a.txt",
    "tar -xf a.tar --to-command=«m»",
    "tar -xf a.tar --to-command='«m» x'",
    "tar -I «m» -cf x.tar a.txt",
    "tar --use-compress-program=«m» -cf x.tar a.txt",
    "tar -cf x.tar --use-compress-program «m» a.txt",
    "tar -xf a.tar -I «m»",
    "tar -cf x.tar -I«m» a.txt",
    "tar --checkpoint=1 --checkpoint-action=exec='«m»' -xf a.tar",
    "tar -cf h:x.tar --rsh-command=«m» a.txt",
    "tar -cf x.tar -F «m» -M -L 1 big.txt",
    "tar -x --to-command=«m» -f a.tar",
    "tar --to-command «m» -xf a.tar",
    "tar xf a.tar --to-command=«m»",
    "tar -c --checkpoint-action=exec=«m» --checkpoint=1 -f x.tar a.txt",
    "tar -czf x.tgz a.txt; tar -xzf x.tgz --to-command=«m»",
    "tar --to-comm=«m» -xf a.tar",
    "tar -cf x.tar --new-volume-script=«m» -M -L 1 big.txt",
    "tar -xf a.tar --to-c=«m»",
    "tar --to-command=«m» -xvf a.tar",
    "tar -x -I«m» -f a.tar",
    "tar -cf - a.txt | tar -x --to-command=«m»",
    "tar --use-compress-prog=«m» -cf x.tar a.txt",
    "tar -cf x.tar a.txt --checkpoint-act=exec=«m» --checkp=1",
    "tar -H gnu --checkpoint=1 --checkpoint-action=exec=«m» -cf x.tar a.txt",
];

const GIT_RUNS: &[&str] = &[
    "git -c core.fsmonitor=«m» status",
    "git -c diff.external=«m» diff",
    "git -c alias.y='!«m»' y",
    "git -c alias.y=!«m» y",
    "git grep -O«m» hello",
    "git grep --open-files-in-pager=«m» hello",
    "git -c protocol.ext.allow=always ls-remote 'ext::«m»'",
    "git -c protocol.allow=always ls-remote 'ext::«m» x'",
    "git ls-remote --upload-pack=«m» .",
    "git ls-remote --upload-pack «m» .",
    "git fetch -q --upload-pack=«m» .",
    "git clone -q -u «m» . c",
    "git -c core.sshCommand=«m» ls-remote ssh://h/x",
    "git -c core.editor=«m» commit -q --allow-empty",
    "git -c core.pager=«m» -p log",
    "cp «M» git-y; git --exec-path=. y",
    "git config alias.y '!«m»' && git y",
    "git config core.fsmonitor «m»; git status",
    "echo '[core]' >> .git/config; echo 'fsmonitor = «m»' >> .git/config; git status",
    "printf '[alias]\\n\\ty = !«m»\\n' >> .git/config; git y",
    "cp «M» .git/hooks/pre-commit; git commit -q --allow-empty -m x",
    "cp «M» .git/hooks/post-checkout; git checkout -q -b b2",
    "echo 'a.txt diff=x' > .gitattributes; git -c diff.x.textconv=«m» diff",
    "echo 'a.txt filter=x' > .gitattributes; git -c filter.x.clean=«m» add a.txt",
    "git difftool -y -x «m»",
    "git -c difftool.x.cmd=«m» difftool -y -t x",
    "git stash -q; git rebase -q --exec «m» HEAD~1",
    "git -c gpg.program=«m» commit -q -S --allow-empty -m x",
    "git -c uploadpack.packObjectsHook=«m» clone -q --no-local . c2",
    "git --config-env=core.fsmonitor=X status",
    "X=«m» git --config-env=core.fsmonitor=X status",
    "git -c core.hooksPath=h commit -q --allow-empty -m x",
    "git submodule foreach «m»",
    "git -c alias.y='!«m»' -c alias.z=y z",
    "git -C . -c core.fsmonitor=«m» status",
    "git --git-dir=.git -c core.fsmonitor=«m» status",
    "git -c CORE.FSMONITOR=«m» status",
    "git -c Core.fsMonitor=«m» status",
    "printf '[core]\\n\\tfsmonitor = «m»\\n' > x.cfg; git -c include.path=$PWD/x.cfg status",
    "git -c core.fsmonitor=«m» add a.txt",
    "git -c diff.external=«m» log -p --ext-diff -1",
    "git grep --open-files-in-p=«m» hello",
    "git grep -O«m» -e hello",
];

const SORT_RUNS: &[&str] = &[
    "sort -S 1K --compress-program=«m» big.txt",
    "sort --compress-program «m» -S 1K big.txt > s.txt",
    "sort -T . -S 4K --compress-program=«m» big.txt",
    "sort --compress-prog=«m» -S1K big.txt",
    "sort -S1K --compress-program=«m» -o s.txt big.txt",
    "cat big.txt | sort -S 1K --compress-program=«m»",
    "sort --batch-size=2 -S 1K --compress-program=«m» big.txt big.txt big.txt",
    "sort --compress-program=«m» a.txt",
    "sort --compress-p=«m» -S1K big.txt",
    "sort -S 1K --compress-program=«m» -- big.txt",
    "sort -rS1K --compress-program=«m» big.txt",
];

const AWK_RUNS: &[&str] = &[
    "awk 'BEGIN{system(\"«m»\")}'",
    "awk 'BEGIN{print | \"«m»\"}'",
    "awk 'BEGIN{\"«m»\" | getline}'",
    "awk 'BEGIN { while ((\"«m»\" | getline l) > 0) print l }'",
    "awk '{system(\"«m»\")}' a.txt",
    "awk -v c=«m» 'BEGIN{system(c)}'",
    "echo 'BEGIN{system(\"«m»\")}' > p.awk; awk -f p.awk",
    "awk 'BEGIN{printf \"x\" | \"«m»\"}'",
    "awk -f /dev/stdin <<< 'BEGIN{system(\"«m»\")}'",
    "echo «m» | awk '{system($0)}'",
    "C=«m» awk 'BEGIN{system(ENVIRON[\"C\"])}'",
    "awk 'BEGIN{c=\"«m»\"; c | getline x; close(c)}'",
    "awk '{print | \"«m»\"}' a.txt",
    "awk -- 'BEGIN{system(\"«m»\")}'",
    "awk -F: 'BEGIN{system(\"«m»\")}'",
    "awk -v x=1 'BEGIN{system(\"«m»\")}' /dev/null",
    "awk \"BEGIN{system(\\\"«m»\\\")}\"",
    "awk 'BEGIN { s = \"«m»\"; system(s) }'",
    "awk 'BEGIN{printf \"\" | \"«m»\"}'",
];

const CONTINUATION: &[&str] = &[
    "echo $\\«nl»(«m»)",
    "echo \"$\\«nl»(«m»)\"",
    "echo `«m»\\«nl»`",
    "echo x # \\«nl»«m»",
    "ec\\«nl»ho $\\«nl»(«m»)",
    "echo $(«m»\\«nl»)",
    "echo x\\«nl»$(«m»)",
    "e\\«nl»val «m»",
    "x='a[$\\«nl»(«m»)]'; echo $((x))",
    "cat <<EOF«nl»$\\«nl»(«m»)«nl»EOF",
    "echo $\\«nl»{x:-$(«m»)}",
    "echo ${x:-$\\«nl»(«m»)}",
    "echo $(\\«nl»«m»)",
    "echo '\\«nl»'$(«m»)",
    "echo \\«nl»`«m»`",
    "echo x; # \\«nl»«m»",
    "echo a \\«nl»«tab»$(«m»)",
    "cat <<EOF«nl»\\«nl»$(«m»)«nl»EOF",
];

const LEXICAL: &[&str] = &[
    "echo a#«s»",
    "echo $#«s»",
    "echo ${#}«s»",
    "echo x #«s»",
    "echo x«tab»#«s»",
    "echo x;#«nl»«m»",
    "echo '\\'«s»",
    "echo $'\\''«s»",
    "echo \"\\\\\"«s»",
    "echo \\\"«s»\\\"",
    "echo $\"«s»\"",
    "echo $'\\x27'«s»",
    "echo x«cr»; «m»",
    "echo x«cr»«s»",
    "echo«tab»«s»",
    "echo '#'«s»",
    "echo x\\#«s»",
    "echo \"#\"«s»",
    ": «s»",
    ": '«s»'",
    "echo ''«s»''",
    "echo \"\"«s»",
    "echo $'a\\'b'«s»",
    "echo 'a'\\''«s»'",
    "echo \"a'«s»'b\"",
    "x=$'\\'«s»\\''; echo $x",
    "echo x«cr»«nl»«m»",
    "echo {a,«s»}",
    "echo ~«s»",
    "echo x\\ «s»",
];

const WRITES_REDIRECT: &[&str] = &[
    "echo x > «o»",
    "echo x >> «o»",
    "echo x 2> «o»",
    "echo x &> «o»",
    "echo x >| «o»",
    "echo x <> «o»",
    "echo x 1>«o»",
    "exec > «o»; echo x",
    "exec 3>«o»; echo x >&3",
    "{ echo x; } > «o»",
    "( echo x ) > «o»",
    "cat «f» > «o»",
    "printf x > «o»",
    "ls > «o»",
    "for i in 1; do echo $i; done > «o»",
    "if true; then echo x; fi > «o»",
    "cd ../out && echo x > f",
    "cd link && echo x > f",
    "cd .. && echo x > out/f",
    "cd «d» && touch f",
    "echo x &>> «o»",
    "cat a.txt >«o»",
    "echo x > «d»/g",
    "pushd ../out > /dev/null && touch f",
    "CDPATH=.. cd out && touch f",
    "export CDPATH=..; cd out; echo x > f",
    "cd -P link/.. && touch out/f",
    "cd link && cd -P .. && echo x > out/f",
    "cd ~ && cd ../out && echo x > f",
];

const WRITES_PROGRAM: &[&str] = &[
    "tee «o» < a.txt",
    "cat a.txt | tee -a «o»",
    "cp a.txt «o»",
    "cp a.txt «d»/",
    "cp -t «d» a.txt",
    "cp --target-directory=«d» a.txt",
    "cp -r src «d»/",
    "mv b.txt «o»",
    "ln -s a.txt «o»",
    "ln a.txt «o»",
    "ln -s ../out o2; echo x > o2/f",
    "ln -s ../out o2 && cp a.txt o2/",
    "ln -sT .. up && touch up/out/f",
    "dd if=a.txt of=«o» status=none",
    "touch «o»",
    "mkdir «o»",
    "find . -maxdepth 1 -name a.txt -fprint «o»",
    "find . -maxdepth 1 -fprintf «o» '%p\\n'",
    "find . -maxdepth 0 -fls «o»",
    "find . -maxdepth 0 -fprint0 «o»",
    "sed -n 'w «o»' a.txt",
    "sed 's/h/j/w «o»' a.txt",
    "sed -n '1w «o»' a.txt",
    "git log --output=«o»",
    "git diff --output=«o»",
    "git archive -o «o» HEAD",
    "git bundle create «o» HEAD",
    "git clone -q . «o»",
    "git init -q «o»",
    "git worktree add -q «o»",
    "git -C «d» init -q",
    "awk 'BEGIN{print \"x\" > \"«o»\"}'",
    "awk '{print > \"«o»\"}' a.txt",
    "awk 'BEGIN{print \"x\" >> \"«o»\"}'",
    "sort -o «o» a.txt",
    "sort --output=«o» a.txt",
    "tar -cf «o» a.txt",
    "tar -xf a.tar -C «d»",
    "tar -xf a.tar --directory=«d»",
    "echo a.txt | xargs -I{} cp {} «d»/",
    "find . -name a.txt -exec cp {} «d»/ \\;",
    "env cp a.txt «o»",
    "git format-patch -q -o «d» -1",
    "head -c 3 a.txt | tee «o»",
    "ln -s /proc/self/cwd/.. up; touch up/out/f",
    "mkdir -p «d»/x/y",
    "cp a.txt link",
    "mv c.txt link",
    "cp -t../out a.txt",
    "cp --target-dir=../out a.txt",
    "mv -t ../out c.txt",
    "ln -s -t ../out a.txt",
    "dd of=../out/f if=a.txt status=none",
    "touch -- ../out/f",
    "mkdir -pv ../out/d",
    "tee -- ../out/f < a.txt",
    "tee -ai ../out/f < a.txt",
    "sort -o../out/f a.txt",
    "sed -i'../out/*' -n 1p a.txt",
    "sed --in-place='link/*.bak' -n 1p a.txt",
    "sed -i'«O»/*' 1d a.txt",
    "tar -xf a.tar -P --transform='s,^,../out/,'",
    "git --work-tree=../out checkout HEAD -- a.txt",
    "git --git-dir=../out/g init -q",
    "cp -l a.txt ../out/",
    "awk 'BEGIN{printf \"x\" > \"/dev/fd/../cwd/../out/f\"}'",
    "env -C ../out touch f",
    "env --chdir=«d» touch f",
    "tar -C ../out -xf ../ws/a.tar",
    "xargs -a a.txt -I{} touch ../out/{}",
];

/// The forms of a class.
fn forms(class: Class) -> &'static [&'static str] {
    match class {
        Class::Harmless => HARMLESS_FORMS,
        Class::Control => CONTROL,
        Class::SubArgument => SUB_ARGUMENT,
        Class::SubDquote => SUB_DQUOTE,
        Class::ParamOperand => PARAM_OPERAND,
        Class::SquoteInParam => SQUOTE_IN_PARAM,
        Class::Arith => ARITH,
        Class::ArithVariable => &[],
        Class::Subscript => SUBSCRIPT,
        Class::NameSubscript => NAME_SUBSCRIPT,
        Class::Dbracket => DBRACKET,
        Class::Indirect => INDIRECT,
        Class::HeredocUnquoted => HEREDOC_UNQUOTED,
        Class::HeredocQuoted => HEREDOC_QUOTED,
        Class::HeredocDelimiter => HEREDOC_DELIMITER,
        Class::Herestring => HERESTRING,
        Class::Case => CASE,
        Class::ForList => FOR_LIST,
        Class::RedirectTarget => REDIRECT_TARGET,
        Class::ProcessSub => PROCESS_SUB,
        Class::Backquote => BACKQUOTE,
        Class::AssignmentValue => ASSIGNMENT_VALUE,
        Class::Eval => EVAL,
        Class::Function => FUNCTION,
        Class::Alias => ALIAS,
        Class::Source => SOURCE,
        Class::Exec => EXEC,
        Class::HashEnable => HASH_ENABLE,
        Class::Trap => TRAP,
        Class::EnvAssign => ENV_ASSIGN,
        Class::Builtins => BUILTINS,
        Class::Wrapper => WRAPPER,
        Class::SedRuns => SED_RUNS,
        Class::TarRuns => TAR_RUNS,
        Class::GitRuns => GIT_RUNS,
        Class::SortRuns => SORT_RUNS,
        Class::AwkRuns => AWK_RUNS,
        Class::Continuation => CONTINUATION,
        Class::Lexical => LEXICAL,
        Class::WritesRedirect => WRITES_REDIRECT,
        Class::WritesProgram => WRITES_PROGRAM,
    }
}

/// Every form of every class, for tests of the generator itself.
pub fn all_forms() -> Vec<(Class, &'static str)> {
    let mut out = Vec::new();
    for &class in Class::ALL {
        for &form in forms(class) {
            out.push((class, form));
        }
        if class == Class::ArithVariable {
            for &set in ARITH_SET {
                out.push((class, set));
            }
            for &used in ARITH_USE {
                out.push((class, used));
            }
        }
    }
    out
}

struct Gen {
    rng: Rng,
}

impl Gen {
    fn below(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n as u64) as usize
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.rng.next_u64() % 100 < percent
    }

    /// The marker as a command word: by name or by absolute path.
    fn marker(&mut self) -> char {
        if self.chance(50) {
            MARK_NAME
        } else {
            MARK_PATH
        }
    }

    /// A command substitution running the marker, in one of its spellings; now and
    /// then a process substitution instead, so that every position sees both.
    fn substitution(&mut self) -> String {
        if self.chance(10) {
            return self.process_substitution();
        }
        let m = self.marker();
        match self.below(8) {
            0 | 1 => format!("$({m})"),
            2 | 3 => format!("`{m}`"),
            4 => format!("$( {m} )"),
            5 => format!("$({m};)"),
            6 => format!("$({m} 2>/dev/null)"),
            _ => format!("$( ({m}) )"),
        }
    }

    /// A substitution for text inside single quotes (bash evaluates it later, as a
    /// subscript, an arithmetic operand, a prompt, a word list).
    fn quoted_substitution(&mut self) -> String {
        let m = self.marker();
        if self.chance(70) {
            format!("$({m})")
        } else {
            format!("`{m}`")
        }
    }

    fn process_substitution(&mut self) -> String {
        let m = self.marker();
        if self.chance(60) {
            format!("<({m})")
        } else {
            format!(">({m})")
        }
    }

    /// A form with its holes filled.
    fn fill(&mut self, form: &str) -> String {
        let mut out = String::with_capacity(form.len() + 32);
        let mut rest = form;
        while let Some(start) = rest.find('«') {
            out.push_str(&rest[..start]);
            let after = &rest[start + '«'.len_utf8()..];
            let Some(end) = after.find('»') else {
                panic!("form {form:?} has a hole that is not closed");
            };
            let hole = &after[..end];
            rest = &after[end + '»'.len_utf8()..];
            match hole {
                "m" => out.push(self.marker()),
                "M" => out.push(MARK_PATH),
                "O" => out.push(OUT_DIR),
                "s" => out.push_str(&self.substitution()),
                "q" => out.push_str(&self.quoted_substitution()),
                "p" => out.push_str(&self.process_substitution()),
                "f" => out.push_str(self.pick(FILES)),
                "o" => out.push_str(self.pick(OUT_FILES)),
                "d" => out.push_str(self.pick(OUT_DIRS)),
                "h" => out.push_str(self.pick(HARMLESS)),
                "nl" => out.push('\n'),
                "cr" => out.push('\r'),
                "tab" => out.push('\t'),
                other => panic!("form {form:?} has an unknown hole «{other}»"),
            }
        }
        out.push_str(rest);
        out
    }

    fn payload(&mut self, class: Class) -> String {
        if class == Class::ArithVariable {
            let set = self.pick(ARITH_SET);
            let used = self.pick(ARITH_USE);
            let sep = self.pick(&["; ", "\n", " && "]);
            let form = format!("{set}{sep}{used}");
            return self.fill(&form);
        }
        let form = self.pick(forms(class));
        self.fill(form)
    }

    /// A separator between two commands of the line.
    fn separator(&mut self) -> &'static str {
        self.pick(&["; ", " && ", "\n", "; ", " & ", "\t;\t", ";", " ;\n"])
    }

    fn line(&mut self, class: Class) -> String {
        let mut s = self.payload(class);
        let multi = s.contains('\n');
        if self.chance(20) {
            let end = if multi { "\n" } else { "; " };
            s = match self.below(7) {
                0 => format!("( {s}{} )", if multi { "\n" } else { "" }),
                1 => format!("{{ {s}{end}}}"),
                2 => format!("if true; then {s}{end}fi"),
                3 => format!("for i in 1; do {s}{end}done"),
                4 => format!("while true; do {s}{end}break; done"),
                5 => format!("case x in x) {s}{}\n;; esac", if multi { "" } else { " " }),
                _ => format!("true && {{ {s}{end}}}"),
            };
        }
        if self.chance(40) {
            let h = self.pick(HARMLESS);
            let sep = self.separator();
            s = format!("{h}{sep}{s}");
        }
        if self.chance(30) {
            let multi = s.contains('\n');
            if !multi && self.chance(30) {
                let c = self.pick(CONSUMERS);
                s = format!("{s} | {c}");
            } else {
                let h = self.pick(HARMLESS);
                let sep = if multi { "\n" } else { self.separator() };
                s = format!("{s}{sep}{h}");
            }
        }
        if self.chance(10) {
            s.push_str(self.pick(&[" # done", "\n", " ", "\t"]));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_has_forms_and_every_hole_is_known() {
        for &class in Class::ALL {
            let mut g = Gen { rng: Rng::new(7) };
            let line = g.line(class);
            assert!(!line.is_empty(), "{}", class.name());
        }
        let mut g = Gen { rng: Rng::new(1) };
        for (class, form) in all_forms() {
            let filled = g.fill(form);
            assert!(!filled.contains('«'), "{} {form:?}", class.name());
        }
    }

    #[test]
    fn a_line_depends_on_the_seed_and_index_only() {
        assert_eq!(line(3, 17), line(3, 17));
        assert_ne!(line(3, 17).text, line(4, 17).text);
        let classes: std::collections::BTreeSet<Class> = (0..Class::ALL.len() as u64)
            .map(|i| line(9, i).class)
            .collect();
        assert_eq!(classes.len(), Class::ALL.len());
    }
}
