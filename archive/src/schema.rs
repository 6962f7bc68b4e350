//! The archive's tables, created and migrated by the tool itself: `archive_schema`
//! holds the version, each migration runs once, in order, in one transaction, under an
//! advisory lock so that two pushers starting at once do not both create the tables.
//!
//! The database enforces what the archive promises, not the pusher: triggers refuse an
//! UPDATE, DELETE or TRUNCATE of every table, and a record is accepted only when its
//! `prev` is the hash of the session's stored record `seq - 1` (the head: a record with
//! that seq already there is refused by the primary key) and its columns agree with its
//! bytes. Checkpoints and their signatures are kept as given, and `checkpoint_newest`
//! holds each session's newest checkpoint, which only grows: a trigger refuses a smaller
//! size, or another root at the same size (a forked history). A superuser can still
//! disable or drop the triggers; `verify` re-checks everything from the stored bytes
//! for that case, and the checkpoints held outside the database (the home's files,
//! witnesses) catch what a superuser removed together with its checkpoints.

use postgres::Client;

use crate::ArchiveError;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i32 = 3;

/// An arbitrary, fixed key of the advisory lock taken while migrating.
const MIGRATE_LOCK_KEY: i64 = 0x6361_6972_6e61_7263; // "cairnarc"

/// The migrations, version 1 first: migration `i` brings the schema to version `i + 1`.
const MIGRATIONS: &[&str] = &[V1, V2, V3];

const V1: &str = r#"
create table sessions (
    id      text primary key check (id <> ''),
    project text not null,
    -- The verifier key of the home that first pushed the session (signed-note vkey),
    -- the key `verify` checks its checkpoints with when none is given.
    vkey    text
);

create table records (
    session text   not null references sessions (id),
    seq     bigint not null check (seq >= 0),
    hash    text   not null check (hash ~ '^[0-9a-f]{64}$'),
    prev    text   not null check (prev ~ '^[0-9a-f]{64}$'),
    type    text,
    ts      text   not null,
    -- NULL only when the event holds a \u0000 escape, which jsonb cannot store; `line`
    -- always holds the record.
    event   jsonb,
    -- The record's line exactly as the log holds it, without its newline: what `hash`
    -- was computed over (up to its `,"hash":"` suffix).
    line    bytea  not null,
    primary key (session, seq)
);

create table blobs (
    hash    text   primary key check (hash ~ '^[0-9a-f]{64}$'),
    len     bigint not null check (len >= 0),
    content bytea  not null,
    check (length(content) = len)
);

create table session_blobs (
    session text not null references sessions (id),
    hash    text not null references blobs (hash),
    primary key (session, hash)
);

create table checkpoints (
    session text   not null references sessions (id),
    size    bigint not null check (size >= 0),
    -- The note's text (the checkpoint), ending in a newline.
    text    text   not null,
    primary key (session, size)
);

create table checkpoint_signatures (
    session text    not null,
    size    bigint  not null,
    -- The line's place in the note: the log's signature, then cosignatures as added.
    n       integer not null check (n >= 0),
    -- The signature line with its newline.
    line    text    not null,
    primary key (session, size, n),
    unique (session, size, line),
    foreign key (session, size) references checkpoints (session, size)
);

create function archive_refuse_change() returns trigger language plpgsql as $f$
begin
    raise exception 'the archive is append-only: % on % refused', tg_op, tg_table_name
        using hint = 'archived rows are never changed or removed; a push only adds records after a session''s stored head';
end
$f$;

create function archive_check_record() returns trigger language plpgsql as $f$
declare
    head text;
begin
    if new.seq = 0 then
        if new.prev <> repeat('0', 64) then
            raise exception 'record 0 of session % refused: its prev must be 64 zeros', new.session;
        end if;
    else
        select hash into head from records where session = new.session and seq = new.seq - 1;
        if head is null then
            raise exception 'record % of session % refused: record % is not archived (the stored head is older)',
                new.seq, new.session, new.seq - 1
                using hint = 'records are added in order, each after the stored head';
        end if;
        if head <> new.prev then
            raise exception 'record % of session % refused: its prev % is not the stored head % (record %)',
                new.seq, new.session, new.prev, head, new.seq - 1;
        end if;
    end if;
    if substring(new.line from 1 for 9 + 64 + 8 + length(new.seq::text) + 1)
        <> convert_to('{"prev":"' || new.prev || '","seq":' || new.seq || ',', 'UTF8')
       or substring(new.line from length(new.line) - 74)
        <> convert_to(',"hash":"' || new.hash || '"}', 'UTF8') then
        raise exception 'record % of session % refused: its prev, seq or hash column differs from its line',
            new.seq, new.session;
    end if;
    return new;
end
$f$;

create trigger records_in_order before insert on records
    for each row execute function archive_check_record();

create trigger sessions_append_only before update or delete on sessions
    for each row execute function archive_refuse_change();
create trigger records_append_only before update or delete on records
    for each row execute function archive_refuse_change();
create trigger blobs_append_only before update or delete on blobs
    for each row execute function archive_refuse_change();
create trigger session_blobs_append_only before update or delete on session_blobs
    for each row execute function archive_refuse_change();
create trigger checkpoints_append_only before update or delete on checkpoints
    for each row execute function archive_refuse_change();
create trigger checkpoint_signatures_append_only before update or delete on checkpoint_signatures
    for each row execute function archive_refuse_change();

create trigger sessions_no_truncate before truncate on sessions
    for each statement execute function archive_refuse_change();
create trigger records_no_truncate before truncate on records
    for each statement execute function archive_refuse_change();
create trigger blobs_no_truncate before truncate on blobs
    for each statement execute function archive_refuse_change();
create trigger session_blobs_no_truncate before truncate on session_blobs
    for each statement execute function archive_refuse_change();
create trigger checkpoints_no_truncate before truncate on checkpoints
    for each statement execute function archive_refuse_change();
create trigger checkpoint_signatures_no_truncate before truncate on checkpoint_signatures
    for each statement execute function archive_refuse_change();
"#;

/// Version 2: the newest checkpoint of each session, a record that only grows, filled
/// from the checkpoints already archived.
const V2: &str = r#"
create table checkpoint_newest (
    session text   primary key references sessions (id),
    size    bigint not null check (size >= 0),
    -- The root as the checkpoint's text states it (base64).
    root    text   not null,
    -- The checkpoint's text (the note without its signatures).
    text    text   not null
);

create function archive_newest_only_grows() returns trigger language plpgsql as $f$
begin
    if new.session <> old.session then
        raise exception 'the newest checkpoint of session % refused: it cannot move to another session', old.session;
    end if;
    if new.size < old.size then
        raise exception 'the newest checkpoint of session % refused: size % is smaller than the archived %',
            old.session, new.size, old.size
            using hint = 'the newest checkpoint only grows: a log never loses records';
    end if;
    if new.size = old.size and new.root <> old.root then
        raise exception 'the newest checkpoint of session % refused: another root at the same size % (a forked history)',
            old.session, old.size;
    end if;
    return new;
end
$f$;

create trigger checkpoint_newest_only_grows before update on checkpoint_newest
    for each row execute function archive_newest_only_grows();
create trigger checkpoint_newest_append_only before delete on checkpoint_newest
    for each row execute function archive_refuse_change();
create trigger checkpoint_newest_no_truncate before truncate on checkpoint_newest
    for each statement execute function archive_refuse_change();

insert into checkpoint_newest (session, size, root, text)
    select distinct on (session) session, size, split_part(text, E'\n', 3), text
    from checkpoints order by session, size desc;
"#;

/// Version 3: the job queue (`queue`): runs, their jobs with each one's lease, and
/// results, at most one per job, keyed by job and attempt. Jobs change state; runs and
/// results are append-only.
const V3: &str = r#"
create table runs (
    id           bigserial   primary key,
    kind         text        not null check (kind in ('replay', 'verify', 'rerun')),
    name         text,
    model        text,
    -- Times a job may be taken; its lease expiring after the last fails it.
    attempts_max integer     not null check (attempts_max > 0),
    created      timestamptz not null default now()
);

create table jobs (
    id          bigserial primary key,
    run         bigint    not null references runs (id),
    session     text      not null references sessions (id),
    state       text      not null default 'queued'
                check (state in ('queued', 'running', 'done', 'failed')),
    -- Times taken so far: the attempt the lease and the result belong to.
    attempt     integer   not null default 0 check (attempt >= 0),
    -- The lease: who holds the job, until when (the database's clock).
    worker      text,
    lease_until timestamptz,
    unique (run, session)
);
create index jobs_open on jobs (id) where state in ('queued', 'running');

create table results (
    job        bigint      not null references jobs (id),
    attempt    integer     not null check (attempt >= 0),
    worker     text        not null,
    outcome    text        not null,
    result     jsonb       not null,
    elapsed_ms bigint      not null check (elapsed_ms >= 0),
    finished   timestamptz not null default now(),
    primary key (job, attempt)
);
create unique index results_one_per_job on results (job);

create trigger runs_append_only before update or delete on runs
    for each row execute function archive_refuse_change();
create trigger results_append_only before update or delete on results
    for each row execute function archive_refuse_change();
create trigger runs_no_truncate before truncate on runs
    for each statement execute function archive_refuse_change();
create trigger results_no_truncate before truncate on results
    for each statement execute function archive_refuse_change();
"#;

/// Brings the database's schema to [`SCHEMA_VERSION`], creating it in an empty
/// database. Refuses a database whose schema is newer than this build knows.
pub fn migrate(client: &mut Client) -> Result<(), ArchiveError> {
    let mut tx = client.transaction()?;
    tx.execute("select pg_advisory_xact_lock($1)", &[&MIGRATE_LOCK_KEY])?;
    tx.batch_execute("create table if not exists archive_schema (version integer not null)")?;
    let applied: Vec<i32> = tx
        .query("select version from archive_schema", &[])?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let found = applied.iter().copied().max().unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(ArchiveError::NewerSchema {
            found,
            known: SCHEMA_VERSION,
        });
    }
    // Each migration not applied yet, in order: a superuser who took one back (its
    // tables and its row) gets it again.
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = i as i32 + 1;
        if applied.contains(&version) {
            continue;
        }
        tx.batch_execute(sql)?;
        tx.execute(
            "insert into archive_schema (version) values ($1)",
            &[&version],
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// The schema version of the database (0: none yet), without changing anything.
pub fn version(client: &mut Client) -> Result<i32, ArchiveError> {
    let exists: bool = client
        .query_one("select to_regclass('archive_schema') is not null", &[])?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let v: Option<i32> = client
        .query_one("select max(version) from archive_schema", &[])?
        .get(0);
    Ok(v.unwrap_or(0))
}
