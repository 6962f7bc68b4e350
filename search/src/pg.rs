//! The archive's index: PostgreSQL full-text search over the same documents.
//!
//! `search_docs` holds each document with a `tsvector` built from our tokens
//! (`array_to_tsvector`), not from PostgreSQL's parser: the `simple` configuration's
//! parser splits `foo-bar`, e-mail addresses, paths and non-ASCII words under the C
//! locale its own way, so the archive would find other documents than the embedded
//! index. Queries are built the same way (`'tok' & 'pre':*` as a `tsquery`), and the
//! phrase order is checked by the same function as the embedded index's. A GIN index
//! on the vector answers the terms.
//!
//! [`ensure_schema`] creates the tables; [`index_session`] adds a session's documents
//! (idempotent: a document already there is left as it is), e.g. after an archive push.

use postgres::GenericClient;

use crate::doc::SessionDocs;
use crate::error::Result;
use crate::hit::{Candidate, Filter, Hit, run, session_key};
use crate::query::{Query, index_terms};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS search_sessions (
    session_id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    workspace TEXT NOT NULL,
    next_seq BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS search_docs (
    session_id TEXT NOT NULL,
    session_key BIGINT NOT NULL,
    project TEXT NOT NULL,
    workspace TEXT NOT NULL,
    seq BIGINT NOT NULL,
    call TEXT,
    tool TEXT,
    kind TEXT NOT NULL,
    ts TEXT NOT NULL,
    ts_us BIGINT NOT NULL,
    body TEXT NOT NULL,
    terms TSVECTOR NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX IF NOT EXISTS search_docs_terms ON search_docs USING GIN (terms);
";

/// Creates the search tables and index when missing.
pub fn ensure_schema(client: &mut impl GenericClient) -> Result<()> {
    client.batch_execute(SCHEMA)?;
    migrate_session_key(client)
}

/// An archive indexed before documents carried their session's order key
/// (`session_key`) gets the column, filled from each session's id.
fn migrate_session_key(client: &mut impl GenericClient) -> Result<()> {
    let has = client
        .query_one(
            "SELECT count(*) FROM information_schema.columns \
             WHERE table_name = 'search_docs' AND column_name = 'session_key' \
             AND table_schema = current_schema()",
            &[],
        )?
        .get::<_, i64>(0)
        > 0;
    if has {
        return Ok(());
    }
    let mut tx = client.transaction()?;
    tx.batch_execute("ALTER TABLE search_docs ADD COLUMN session_key BIGINT")?;
    let ids: Vec<String> = tx
        .query("SELECT DISTINCT session_id FROM search_docs", &[])?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for id in &ids {
        tx.execute(
            "UPDATE search_docs SET session_key = $1 WHERE session_id = $2",
            &[&session_key(id), id],
        )?;
    }
    tx.batch_execute("ALTER TABLE search_docs ALTER COLUMN session_key SET NOT NULL")?;
    tx.commit()?;
    Ok(())
}

/// Adds a session's documents (in one transaction, a savepoint inside a caller's);
/// returns how many were new.
pub fn index_session(client: &mut impl GenericClient, docs: &SessionDocs) -> Result<u64> {
    let mut tx = client.transaction()?;
    let s = &docs.session;
    let st = tx.prepare(
        "INSERT INTO search_docs
           (session_id, project, workspace, seq, call, tool, kind, ts, ts_us, body, terms, session_key)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, array_to_tsvector($11::text[]), $12)
         ON CONFLICT (session_id, seq) DO NOTHING",
    )?;
    let key = session_key(&s.id);
    let mut n = 0;
    for d in &docs.docs {
        let seq = i64::try_from(d.seq).unwrap_or(i64::MAX);
        n += tx.execute(
            &st,
            &[
                &s.id,
                &s.project,
                &s.workspace,
                &seq,
                &d.call,
                &d.tool,
                &d.kind.as_str(),
                &d.ts,
                &d.ts_us,
                &d.text,
                &index_terms(&d.text),
                &key,
            ],
        )?;
    }
    let next = i64::try_from(docs.next_seq).unwrap_or(i64::MAX);
    tx.execute(
        "INSERT INTO search_sessions (session_id, project, workspace, next_seq)
         VALUES ($1, $2, $3, $4)
         ON CONFLICT (session_id) DO UPDATE
           SET next_seq = GREATEST(search_sessions.next_seq, EXCLUDED.next_seq)",
        &[&s.id, &s.project, &s.workspace, &next],
    )?;
    tx.commit()?;
    Ok(n)
}

/// The first seq of a session the archive's index does not hold (0 when unknown).
pub fn indexed_to(client: &mut impl GenericClient, session_id: &str) -> Result<u64> {
    let row = client.query_opt(
        "SELECT next_seq FROM search_sessions WHERE session_id = $1",
        &[&session_id],
    )?;
    Ok(row.map_or(0, |r| u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)))
}

/// The `tsquery` of `q`'s terms.
fn tsquery(q: &Query) -> String {
    q.terms()
        .iter()
        .map(|t| {
            format!(
                "'{}'{}",
                t.text.replace('\\', "\\\\").replace('\'', "''"),
                if t.prefix { ":*" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join(" & ")
}

/// The documents matching `q` that pass `f`, in the embedded index's order.
pub fn search(client: &mut impl GenericClient, q: &Query, f: &Filter) -> Result<Vec<Hit>> {
    let tq = tsquery(q);
    run(q, f, |limit, each| {
        let sql = format!(
            "SELECT session_id, project, workspace, seq, call, tool, kind, ts, body
             FROM search_docs
             WHERE terms @@ $1::text::tsquery
               AND ($2::text IS NULL OR project = $2 OR workspace = $2)
               AND ($3::text IS NULL OR tool = $3)
               AND ($4::bigint IS NULL OR ts_us >= $4)
             ORDER BY session_key DESC, session_id COLLATE \"C\" DESC, seq ASC{}",
            limit.map_or(String::new(), |n| format!(" LIMIT {n}"))
        );
        let rows = client.query(&sql, &[&tq, &f.project, &f.tool, &f.since_us])?;
        for r in rows {
            let c = Candidate {
                session: r.get(0),
                project: r.get(1),
                workspace: r.get(2),
                seq: u64::try_from(r.get::<_, i64>(3)).unwrap_or(0),
                call: r.get(4),
                tool: r.get(5),
                kind: r.get(6),
                time: r.get(7),
                text: r.get(8),
            };
            if !each(c) {
                break;
            }
        }
        Ok(())
    })
}
