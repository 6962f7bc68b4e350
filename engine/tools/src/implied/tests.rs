use super::*;
use crate::event::Status::{Cancelled, Denied, Error, Interrupted, Ok as Fine, Timeout};
use Kind::*;

/// A call of `status` that asked nothing, was refused by nothing, ran in the
/// foreground.
fn call(status: Status) -> Call {
    Call {
        status,
        refusal: None,
        asks: Asks::Nothing,
        stopped: false,
        background: false,
        early: false,
        replayed: false,
    }
}

fn asked(status: Status) -> Call {
    Call {
        asks: Asks::Question,
        ..call(status)
    }
}

/// What the table finds wrong with `records` of a call of `tool`: `missing <kind>`,
/// `extra <kind>`, or `never <status>` for a status the tool never ends with.
fn misfits(tool: &str, c: Call, records: &[Kind]) -> Vec<String> {
    let effects = crate::effects_of(tool).unwrap_or_else(|| panic!("no tool {tool}"));
    let expect = implied(&effects, &c);
    if !expect.possible() {
        return vec![format!("never {}", c.status.as_str())];
    }
    let mut counts = [0; Kind::COUNT];
    for k in records {
        counts[k.index()] += 1;
    }
    expect
        .misfits(&counts)
        .iter()
        .map(|m| match m {
            Misfit::Missing { kind, .. } => format!("missing {}", kind.name()),
            Misfit::Extra { kind, .. } => format!("extra {}", kind.name()),
        })
        .collect()
}

/// The misfits of `records` are `expected`, in any order.
fn check(tool: &str, c: Call, records: &[Kind], expected: &[&str]) {
    let mut found = misfits(tool, c, records);
    found.sort();
    let mut expected = expected.to_vec();
    expected.sort();
    assert_eq!(found, expected, "{tool} {c:?} with {records:?}");
}

#[test]
fn reads_show_one_file_when_they_succeed() {
    check("read_file", call(Fine), &[Read], &[]);
    check("read_file_range", call(Fine), &[Read], &[]);
    check("read_file", call(Fine), &[], &["missing file_read"]);
    check("read_file", call(Fine), &[Read, Read], &["extra file_read"]);
    check("read_file", call(Error), &[], &[]);
    check("read_file", call(Error), &[Read], &["extra file_read"]);
    // A credential file asks first.
    check("read_file", asked(Fine), &[Asked, Answered, Read], &[]);
    check(
        "read_file",
        asked(Fine),
        &[Read],
        &[
            "missing permission_requested",
            "missing permission_decided (by the user or a policy)",
        ],
    );
    check("read_file", call(Timeout), &[], &["never timeout"]);
    check("read_file", call(Cancelled), &[], &["never cancelled"]);
}

#[test]
fn tools_that_record_nothing_hold_nothing() {
    for tool in ["grep", "glob", "list_dir", "find_files", "search_text"] {
        check(tool, call(Fine), &[], &[]);
        check(tool, call(Error), &[], &[]);
        check(tool, call(Fine), &[Read], &["extra file_read"]);
        check(
            tool,
            call(Fine),
            &[ExecStarted],
            &["extra shell_exec started"],
        );
        check(tool, call(Timeout), &[], &["never timeout"]);
    }
}

#[test]
fn writes_record_their_intent_then_their_install() {
    let w = |s| asked(s);
    check(
        "write_file",
        w(Fine),
        &[Asked, Answered, WriteIntent, WriteOk],
        &[],
    );
    check("create_file", call(Fine), &[WriteIntent, WriteOk], &[]);
    check(
        "edit_file",
        w(Fine),
        &[Asked, Answered, WriteIntent],
        &["missing file_write ok"],
    );
    check(
        "edit_file",
        w(Fine),
        &[Asked, Answered],
        &["missing file_write intent", "missing file_write ok"],
    );
    // Refused before its intent (no change, a bad old_string), or its install failed.
    check("edit_file", w(Error), &[Asked, Answered], &[]);
    check(
        "edit_file",
        w(Error),
        &[Asked, Answered, WriteIntent, WriteFailed],
        &[],
    );
    check(
        "edit_file",
        w(Error),
        &[Asked, Answered, WriteIntent, WriteOk],
        &["missing file_write failed", "extra file_write ok"],
    );
    check(
        "write_patch",
        w(Fine),
        &[Asked, Answered, WriteIntent, WriteOk, WriteFailed],
        &["extra file_write failed"],
    );
    // A rule refused it: asked, then stopped before its write.
    let refused = Call {
        refusal: Some(Rule::ReadBeforeEdit),
        ..w(Error)
    };
    check("edit_file", refused, &[Asked, Answered], &[]);
    check(
        "edit_file",
        refused,
        &[Asked, Answered, WriteIntent],
        &["extra file_write intent"],
    );
}

#[test]
fn a_foreground_command_that_ran_has_its_shell_exec() {
    for tool in ["shell", "run_shell"] {
        let c = asked;
        check(tool, c(Fine), &[Asked, Answered, ExecStarted, ExecOk], &[]);
        check(
            tool,
            c(Fine),
            &[Asked, Answered, ExecStarted, ExecOk, Changed, Changed],
            &[],
        );
        // The forgery of issue 41: the status and the answer changed, no command.
        check(
            tool,
            c(Fine),
            &[Asked, Answered],
            &[
                "missing shell_exec started",
                "missing shell_exec finished ok",
            ],
        );
        // None ran: only when it may have failed before (a working folder).
        let early = Call {
            early: true,
            ..c(Error)
        };
        check(tool, early, &[Asked, Answered], &[]);
        check(
            tool,
            c(Error),
            &[Asked, Answered],
            &["missing shell_exec that could not start"],
        );
        check(tool, c(Error), &[Asked, Answered, NotStarted], &[]);
        check(
            tool,
            c(Error),
            &[Asked, Answered, ExecStarted, ExecFailed, Changed],
            &[],
        );
        check(
            tool,
            c(Error),
            &[Asked, Answered, ExecStarted, ExecOk],
            &[
                "missing shell_exec finished failed",
                "extra shell_exec finished ok",
            ],
        );
        check(
            tool,
            c(Timeout),
            &[Asked, Answered, ExecStarted, ExecTimeout],
            &[],
        );
        check(
            tool,
            c(Timeout),
            &[Asked, Answered, ExecStarted, ExecFailed],
            &[
                "missing shell_exec finished timeout",
                "extra shell_exec finished failed",
            ],
        );
        check(
            tool,
            c(Cancelled),
            &[Asked, Answered, ExecStarted, ExecCancelled],
            &[],
        );
        check(
            tool,
            c(Cancelled),
            &[Asked, Answered, ExecStarted, ExecTimeout],
            &[
                "missing shell_exec finished cancelled",
                "extra shell_exec finished timeout",
            ],
        );
        // Never inside a call: a scan before its command ended, a lost end, a
        // background process's end.
        for k in [ChangedEarly, ExecLost, BgEnded] {
            check(
                tool,
                c(Fine),
                &[Asked, Answered, ExecStarted, ExecOk, k],
                &[&format!("extra {}", k.name())],
            );
        }
    }
}

#[test]
fn a_background_command_has_its_start_only() {
    let bg = |status| Call {
        background: true,
        ..asked(status)
    };
    check("shell", bg(Fine), &[Asked, Answered, BgStarted], &[]);
    check(
        "shell",
        bg(Fine),
        &[Asked, Answered],
        &["missing background shell_exec started"],
    );
    check("shell", bg(Error), &[Asked, Answered, NotStarted], &[]);
    // The most background processes run already.
    let early = Call {
        early: true,
        ..bg(Error)
    };
    check("shell", early, &[Asked, Answered], &[]);
    check(
        "shell",
        bg(Error),
        &[Asked, Answered],
        &["missing shell_exec that could not start"],
    );
    check(
        "run_shell",
        bg(Fine),
        &[Asked, Answered, BgStarted, ExecStarted],
        &["extra shell_exec started"],
    );
    check("shell", bg(Timeout), &[Asked, Answered], &["never timeout"]);
}

#[test]
fn a_check_answers_ok_whatever_its_command_exit_code() {
    check("problems", call(Fine), &[ExecStarted, ExecOk], &[]);
    check(
        "problems",
        call(Fine),
        &[ExecStarted, ExecFailed, Changed],
        &[],
    );
    check("problems", call(Error), &[ExecStarted, ExecFailed], &[]);
    // No check command configured.
    let early = Call {
        early: true,
        ..call(Error)
    };
    check("problems", early, &[], &[]);
    check(
        "problems",
        call(Error),
        &[],
        &["missing shell_exec that could not start"],
    );
    check(
        "problems",
        call(Fine),
        &[],
        &[
            "missing shell_exec started",
            "missing shell_exec finished ok",
        ],
    );
    check("problems", call(Timeout), &[ExecStarted, ExecTimeout], &[]);
    check(
        "problems",
        call(Cancelled),
        &[ExecStarted, ExecOk],
        &[
            "missing shell_exec finished cancelled",
            "extra shell_exec finished ok",
        ],
    );
}

#[test]
fn fetches_record_every_page() {
    for tool in ["web_fetch", "read_url"] {
        check(tool, asked(Fine), &[Asked, Answered, Fetched], &[]);
        check(tool, asked(Error), &[Asked, Answered, FetchFailed], &[]);
        check(
            tool,
            asked(Fine),
            &[Asked, Answered, FetchFailed],
            &["missing web_fetched", "extra web_fetched that failed"],
        );
        check(
            tool,
            asked(Error),
            &[Asked, Answered],
            &["missing web_fetched that failed"],
        );
    }
    check(
        "web_search",
        call(Fine),
        &[Fetched, FetchFailed, Fetched],
        &[],
    );
    check("web_search", call(Fine), &[FetchFailed], &[]);
    check("web_search", call(Fine), &[], &["missing web_fetched"]);
    check("web_search", call(Error), &[], &[]);
    check("web_search", call(Error), &[FetchFailed], &[]);
    check(
        "web_search",
        call(Error),
        &[Fetched],
        &["extra web_fetched"],
    );
}

#[test]
fn an_mcp_call_keeps_its_result() {
    let t = "mcp__fs__read";
    check(t, asked(Fine), &[Asked, Answered, McpResult], &[]);
    check(t, asked(Fine), &[Asked, Answered], &["missing mcp_result"]);
    check(t, asked(Error), &[Asked, Answered, McpResult], &[]);
    check(t, asked(Error), &[Asked, Answered], &[]);
    check(t, asked(Timeout), &[Asked, Answered], &[]);
    check(
        t,
        asked(Cancelled),
        &[Asked, Answered, McpResult],
        &["extra mcp_result"],
    );
    let listed = Call {
        asks: Asks::AllowList,
        ..call(Fine)
    };
    check(t, listed, &[AllowListed, McpResult], &[]);
    check(
        t,
        listed,
        &[Asked, AllowListed, McpResult],
        &["extra permission_requested"],
    );
}

#[test]
fn remember_records_the_fact_it_keeps() {
    check("remember", asked(Fine), &[Asked, Answered, Memory], &[]);
    check(
        "remember",
        asked(Fine),
        &[Asked, Answered],
        &["missing memory_written"],
    );
    check(
        "remember",
        asked(Error),
        &[Asked, Answered, Memory],
        &["extra memory_written"],
    );
}

#[test]
fn a_denied_call_was_asked_and_ran_nothing() {
    let denied = Call {
        stopped: true,
        ..asked(Denied)
    };
    check("shell", denied, &[Asked, Answered], &[]);
    check(
        "shell",
        denied,
        &[Asked, Answered, ExecStarted, ExecOk],
        &["extra shell_exec started", "extra shell_exec finished ok"],
    );
    check(
        "edit_file",
        denied,
        &[Asked, Answered, WriteIntent],
        &["extra file_write intent"],
    );
    // Denied with no question: a status changed without its records.
    check(
        "shell",
        call(Denied),
        &[],
        &[
            "missing permission_requested",
            "missing permission_decided (by the user or a policy)",
        ],
    );
    // Its answer denies it, whatever its status says: nothing runs.
    let ok = Call {
        stopped: true,
        ..asked(Fine)
    };
    check(
        "shell",
        ok,
        &[Asked, Answered, ExecStarted, ExecOk],
        &["extra shell_exec started", "extra shell_exec finished ok"],
    );
}

#[test]
fn a_call_refused_at_admission_holds_nothing() {
    for (rule, status) in [(Rule::Input, Error), (Rule::Repeat, Status::Blocked)] {
        let refused = Call {
            refusal: Some(rule),
            ..asked(status)
        };
        check("shell", refused, &[], &[]);
        check("shell", refused, &[Asked], &["extra permission_requested"]);
        check("read_file", refused, &[Read], &["extra file_read"]);
    }
}

#[test]
fn an_interrupted_call_holds_any_part_of_its_records() {
    check("shell", asked(Interrupted), &[Asked], &[]);
    check(
        "shell",
        asked(Interrupted),
        &[Asked, Answered, ExecStarted],
        &[],
    );
    check(
        "edit_file",
        asked(Interrupted),
        &[Asked, Answered, WriteIntent, WriteOk],
        &[],
    );
    check(
        "read_file",
        call(Interrupted),
        &[ExecStarted],
        &["extra shell_exec started"],
    );
    check(
        "shell",
        asked(Interrupted),
        &[ExecStarted, ExecStarted],
        &["extra shell_exec started"],
    );
}

#[test]
fn a_replayed_call_may_hold_its_recorded_writes_alone() {
    let replayed = Call {
        replayed: true,
        ..call(Fine)
    };
    check("shell", replayed, &[], &[]);
    check("shell", replayed, &[WriteOk, Changed, ChangedEarly], &[]);
    check("web_fetch", replayed, &[], &[]);
    // Run again for real: the table as for any call.
    check(
        "shell",
        Call {
            asks: Asks::Question,
            ..replayed
        },
        &[Asked, Answered, ExecStarted, ExecOk],
        &[],
    );
    check(
        "shell",
        replayed,
        &[ExecStarted],
        &["missing shell_exec finished ok"],
    );
}

#[test]
fn every_tool_ends_with_the_statuses_its_effects_give() {
    let statuses_of = |tool: &str| -> Vec<&str> {
        statuses(&crate::effects_of(tool).unwrap())
            .iter()
            .map(Status::as_str)
            .collect()
    };
    for tool in ["shell", "run_shell", "problems", "mcp__a__b"] {
        assert_eq!(
            statuses_of(tool),
            ["ok", "error", "timeout", "cancelled"],
            "{tool}"
        );
    }
    for c in crate::Catalog::ALL {
        for tool in crate::Registry::new(c).names() {
            if !["shell", "run_shell", "problems"].contains(&tool) {
                assert_eq!(statuses_of(tool), ["ok", "error"], "{tool}");
            }
        }
    }
}

/// `docs/FORMAT.md` shows [`markdown`] between its markers; `CAIRN_REGEN_DOCS=1`
/// writes it there.
#[test]
fn docs_format_md_holds_the_table() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/FORMAT.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = (
        "<!-- status-records: generated by cairn_tools::implied::markdown -->\n",
        "<!-- status-records end -->",
    );
    let (Some(a), Some(b)) = (doc.find(begin), doc.find(end)) else {
        panic!("docs/FORMAT.md has no status-records markers");
    };
    let current = &doc[a + begin.len()..b];
    let table = markdown();
    if current != table && std::env::var_os("CAIRN_REGEN_DOCS").is_some() {
        let fresh = format!("{}{table}{}", &doc[..a + begin.len()], &doc[b..]);
        std::fs::write(&path, fresh).unwrap();
        return;
    }
    assert!(
        current == table,
        "docs/FORMAT.md's status-records table is stale: run CAIRN_REGEN_DOCS=1 cargo test -p cairn-tools implied"
    );
}

/// A kind added to the enum and not to [`Kind::ALL`] would count in another's place.
#[test]
fn every_kind_is_listed_once_at_its_index() {
    for (i, k) in Kind::ALL.iter().enumerate() {
        assert_eq!(k.index(), i, "{k:?}");
    }
    let mut names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), Kind::COUNT);
}
