//! The network: every `web_fetched` inside its call, its text's blob checked.

use super::*;

/// Checks `web_fetched` records.
#[derive(Default)]
pub(super) struct NetworkFold;

impl Fold for NetworkFold {
    fn apply(&mut self, v: &mut Verifier, rec: &Record) {
        if let Event::WebFetched(w) = &rec.event {
            v.web_fetched(w);
        }
    }
}

impl Verifier {
    pub(super) fn web_fetched(&mut self, w: &WebFetched) {
        if let Some(b) = &w.text {
            self.blob(b, &format!("call {} text of {}", w.call, w.url));
        }
        if !self.pending.contains_key(&w.call) {
            self.problem(
                ProblemKind::Structure,
                format!("web_fetched of {} outside its call {}", w.url, w.call),
            );
        }
        self.side_effect(
            &w.call,
            Kind::of_fetch(w),
            &format!("web_fetched of {}", w.url),
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{found, pending, rec, run, verifier};
    use super::*;

    #[test]
    fn a_fetch_is_inside_its_call() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        pending(
            &mut v,
            1,
            "c1",
            "fetch",
            json!({"url": "https://example.org"}),
        );
        let fetch = |seq, call: &str| {
            rec(
                seq,
                json!({"type": "web_fetched", "call": call, "url": "https://example.org",
                    "status": 200}),
            )
        };
        run(&mut v, &mut NetworkFold, &[fetch(2, "c1"), fetch(3, "c2")]);
        assert_eq!(v.pending["c1"].records.len(), 1);
        assert_eq!(
            found(v),
            [(
                Some(3),
                ProblemKind::Structure,
                "web_fetched of https://example.org outside its call c2".to_string()
            )]
        );
    }
}
