//! The integrity part of an audit: what the deep verification it was given found. It is
//! read from the verify report, not folded from the log.

use serde::Serialize;

use crate::verify::{Problem, Report};

/// The outcome of the deep verification the audit ran.
#[derive(Debug, Clone, Serialize)]
pub struct Integrity {
    pub clean: bool,
    pub problems: u64,
    pub decisions_checked: u64,
    pub blobs_checked: u64,
    /// The problems verify kept (the first `problems_max` of `problems`), in order.
    pub list: Vec<Problem>,
}

/// The integrity of a verification: clean when it counted no problem, kept or not.
pub(super) fn integrity((report, problems): &(Report, Vec<Problem>)) -> Integrity {
    Integrity {
        clean: report.problems == 0,
        problems: report.problems,
        decisions_checked: report.decisions_checked,
        blobs_checked: report.blobs_checked,
        list: problems.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrity_is_clean_only_when_verify_counted_no_problem() {
        let report = Report {
            decisions_checked: 4,
            blobs_checked: 9,
            ..Report::default()
        };
        let clean = integrity(&(report.clone(), Vec::new()));
        assert!(clean.clean);
        assert_eq!(
            (clean.problems, clean.decisions_checked, clean.blobs_checked),
            (0, 4, 9)
        );
        // Problems counted but none kept in the list (past `problems_max`): not clean.
        let counted = Report {
            problems: 3,
            ..report
        };
        let dirty = integrity(&(counted, Vec::new()));
        assert!(!dirty.clean);
        assert_eq!(dirty.problems, 3);
        assert!(dirty.list.is_empty());
    }
}
