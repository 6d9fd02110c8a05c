//! The open index, brought up to date with the logs, and its queries.
//!
//! A log is known by its size, modification time and inode as last read
//! (kept in memory too, so a search with nothing new only `stat`s the
//! logs). A changed log is read from where the index stopped, after
//! checking that its header and the last line read are still what they
//! were; otherwise (truncated, rewritten by an editor, another file under
//! the same name) its rows are dropped and it is read again from the top.
//! Only whole lines are read: a line being written is read next time.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::{params, params_from_iter, Connection, Transaction};
use sha2::{Digest, Sha256};

use super::extract;
use super::{Hit, Query, Scope, SearchError, SessionInfo, Surface, MAX_LIMIT, SNIPPET_CHARS};

/// A log's size, modification time (ns) and inode when read.
type Stamp = (u64, i64, u64);

/// Events written per transaction while catching up (a first build of
/// many logs commits as it goes).
const BATCH_EVENTS: usize = 20_000;

/// The open index.
pub(super) struct Synced {
    conn: Connection,
    /// The sessions directory.
    dir: PathBuf,
    /// Each indexed log's stamp as last read (by this process or, when it
    /// opened the index, any).
    known: HashMap<String, Stamp>,
    /// The index file's inode when opened (0 where there are none).
    ino: u64,
}

impl std::fmt::Debug for Synced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Synced")
            .field("dir", &self.dir)
            .field("known", &self.known.len())
            .finish_non_exhaustive()
    }
}

/// Why work on the index failed.
pub(super) enum Failure {
    /// The file is damaged: it is built anew.
    Corrupt(String),
    /// Anything else.
    Other(SearchError),
}

impl From<rusqlite::Error> for Failure {
    fn from(err: rusqlite::Error) -> Failure {
        if super::db::is_corrupt(&err) {
            Failure::Corrupt(err.to_string())
        } else {
            Failure::Other(SearchError::Index(err.to_string()))
        }
    }
}

impl From<SearchError> for Failure {
    fn from(err: SearchError) -> Failure {
        Failure::Other(err)
    }
}

impl From<Failure> for SearchError {
    fn from(failure: Failure) -> SearchError {
        match failure {
            Failure::Corrupt(message) => SearchError::Index(message),
            Failure::Other(err) => err,
        }
    }
}

/// [`SearchError::Stopped`] once `stop` is set.
fn check(stop: &AtomicBool) -> Result<()> {
    if stop.load(Ordering::Relaxed) {
        Err(Failure::Other(SearchError::Stopped))
    } else {
        Ok(())
    }
}

type Result<T> = std::result::Result<T, Failure>;

/// A row of `sessions`: where reading stopped.
struct Row {
    sid: i64,
    read_to: u64,
    head: Vec<u8>,
    tail_at: u64,
    tail: Vec<u8>,
    file_len: u64,
    mtime: i64,
    ino: u64,
}

impl Synced {
    pub(super) fn open(dir: &Path, file: &Path) -> Result<Synced> {
        let conn = super::db::open(file).map_err(|err| Failure::Other(SearchError::Index(err)))?;
        let ino = std::fs::metadata(file).map_or(0, |meta| stamp(&meta).2);
        let mut synced = Synced {
            conn,
            dir: dir.to_path_buf(),
            known: HashMap::new(),
            ino,
        };
        synced.load_known()?;
        Ok(synced)
    }

    /// Whether `file` is still the file it opened.
    pub(super) fn is_at(&self, file: &Path) -> bool {
        std::fs::metadata(file).is_ok_and(|meta| stamp(&meta).2 == self.ino)
    }

    fn load_known(&mut self) -> Result<()> {
        let mut statement = self
            .conn
            .prepare("SELECT id, file_len, mtime, ino FROM sessions")?;
        let rows = statement.query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                (
                    row.get::<_, i64>(1)? as u64,
                    row.get::<_, i64>(2)?,
                    row.get::<_, i64>(3)? as u64,
                ),
            ))
        })?;
        for row in rows {
            let (id, stamp) = row?;
            self.known.insert(id, stamp);
        }
        Ok(())
    }

    /// Reads what changed in every log of the directory; forgets the
    /// sessions whose logs are gone (whoever indexed them).
    pub(super) fn catch_up_all(&mut self, stop: &AtomicBool) -> Result<()> {
        let mut logs = list_logs(&self.dir)?;
        // Logs a stat could not see: neither gone nor read now.
        logs.retain(|_, stamp| stamp.0 != u64::MAX);
        let indexed: Vec<String> = {
            let mut statement = self.conn.prepare("SELECT id FROM sessions")?;
            let ids = statement.query_map([], |row| row.get(0))?;
            ids.collect::<rusqlite::Result<_>>()?
        };
        for id in indexed.iter().filter(|id| !logs.contains_key(*id)) {
            check(stop)?;
            // Gone only when its file is (not a log another process made
            // since the directory was read, nor one a stat failed on).
            let path = self.dir.join(format!("{id}.jsonl"));
            if matches!(std::fs::symlink_metadata(&path), Err(err) if err.kind() == std::io::ErrorKind::NotFound)
            {
                self.forget(id)?;
            }
        }
        // Oldest written first: the index's order (its rowids) is then the
        // order the logs were written in, which a newest-first search walks.
        let mut changed: Vec<(&String, &Stamp)> = logs
            .iter()
            .filter(|(id, stamp)| self.known.get(*id) != Some(*stamp))
            .collect();
        changed.sort_by_key(|(id, stamp)| (stamp.1, *id));
        let changed: Vec<String> = changed.into_iter().map(|(id, _)| id.clone()).collect();
        self.catch_up(&changed, stop)
    }

    /// Reads what changed in these sessions' logs.
    pub(super) fn catch_up(&mut self, ids: &[String], stop: &AtomicBool) -> Result<()> {
        let mut rest = ids;
        while !rest.is_empty() {
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let mut written = 0;
            let mut read = Vec::new();
            while let Some((id, more)) = rest.split_first() {
                rest = more;
                if let Some(stamp) = read_log(&tx, &self.dir, id, &mut written, stop)? {
                    read.push((id.clone(), stamp));
                }
                if written >= BATCH_EVENTS || stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            // What was read stays, stopped or not.
            tx.commit()?;
            self.known.extend(read);
            check(stop)?;
        }
        Ok(())
    }

    /// Removes a session's rows.
    pub(super) fn forget(&mut self, id: &str) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let sid: Option<i64> = tx
            .query_row("SELECT sid FROM sessions WHERE id = ?1", [id], |row| {
                row.get(0)
            })
            .map(Some)
            .or_else(none_if_no_rows)?;
        if let Some(sid) = sid {
            drop_rows(&tx, sid)?;
            tx.execute("DELETE FROM sessions WHERE sid = ?1", [sid])?;
        }
        tx.commit()?;
        self.known.remove(id);
        Ok(())
    }

    /// Every indexed session of `scope`.
    pub(super) fn sessions(&mut self, scope: &Scope) -> Result<Vec<SessionInfo>> {
        let mut sql = String::from("SELECT ");
        sql.push_str(SESSION_COLUMNS);
        sql.push_str(" FROM sessions s");
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        if let Scope::Workspaces(cwds) = scope {
            sql.push_str(" WHERE s.cwd IN (");
            push_list(&mut sql, &mut args, cwds.iter().cloned().map(Into::into));
            sql.push(')');
        }
        sql.push_str(" ORDER BY s.created_at");
        let mut statement = self.conn.prepare(&sql)?;
        let rows = statement.query_map(params_from_iter(args), |row| session_info(row, 0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Runs a query (the index is up to date).
    pub(super) fn search(&mut self, query: &Query, stop: &AtomicBool) -> Result<Vec<Hit>> {
        let words = extract::words(&query.text);
        if words.is_empty() {
            return Err(SearchError::EmptyQuery.into());
        }
        let (sql, args) = search_sql(query, &extract::fts_expression(&words));
        let limit = query.limit.clamp(1, MAX_LIMIT);
        let mut statement = self.conn.prepare(&sql)?;
        let mut rows = statement.query(params_from_iter(args))?;
        let mut hits: Vec<Hit> = Vec::with_capacity(limit);
        let mut sessions = std::collections::HashSet::new();
        let mut examined = 0u32;
        while hits.len() < limit {
            examined = examined.wrapping_add(1);
            if examined.is_multiple_of(256) {
                check(stop)?;
            }
            let Some(row) = rows.next()? else {
                break;
            };
            let session = session_info(row, 0)?;
            if query.best_per_session && sessions.contains(&session.id) {
                continue;
            }
            let surface = match row.get::<_, i64>(13)? {
                0 => Surface::Current,
                1 => Surface::Shadowed,
                _ => Surface::LogOnly,
            };
            let seq = row.get::<_, i64>(7)? as u64;
            let (at, len) = (row.get::<_, i64>(10)? as u64, row.get::<_, i64>(11)? as u64);
            // The log is the truth: a hit whose line is no longer there (a
            // log deleted or rewritten since) is left out. (A log edited in
            // place was read again before this search.)
            let Some(text) = read_event_text(&self.dir, &session.id, at, len, seq) else {
                continue;
            };
            sessions.insert(session.id.clone());
            hits.push(Hit {
                session,
                seq,
                time: row.get::<_, i64>(8)? as u64,
                event_type: row.get(9)?,
                surface,
                snippet: extract::snippet(&text, &words, SNIPPET_CHARS),
            });
        }
        Ok(hits)
    }
}

/// `Ok(None)` for "no such row".
fn none_if_no_rows<T>(err: rusqlite::Error) -> rusqlite::Result<Option<T>> {
    match err {
        rusqlite::Error::QueryReturnedNoRows => Ok(None),
        err => Err(err),
    }
}

const SESSION_COLUMNS: &str =
    "s.id, s.cwd, s.title, s.created_at, s.subagent_of, s.forked_from, s.sid";

fn session_info(row: &rusqlite::Row<'_>, from: usize) -> rusqlite::Result<SessionInfo> {
    Ok(SessionInfo {
        id: row.get(from)?,
        cwd: row.get(from + 1)?,
        title: row.get(from + 2)?,
        created_at: row.get::<_, i64>(from + 3)? as u64,
        subagent_of: row.get(from + 4)?,
        forked_from: row.get(from + 5)?,
    })
}

/// Appends `?, ?, ...` for `values` (an empty list matches nothing).
fn push_list(
    sql: &mut String,
    args: &mut Vec<rusqlite::types::Value>,
    values: impl Iterator<Item = rusqlite::types::Value>,
) {
    let mut any = false;
    for value in values {
        if any {
            sql.push_str(", ");
        }
        sql.push('?');
        args.push(value);
        any = true;
    }
    if !any {
        sql.push_str("NULL");
    }
}

/// Whether an event is on the model's surface (0), shadowed (1) or
/// log-only (2).
const SURFACE: &str = "CASE WHEN e.surface = 0 THEN 2 \
     WHEN EXISTS (SELECT 1 FROM replaced r WHERE r.sid = e.sid AND e.seq BETWEEN r.first AND r.last AND r.by > e.seq) THEN 1 \
     ELSE 0 END";

/// The SQL of a search and its arguments. Its rows: the session's columns,
/// then seq, time, type, the line's place and length, the rank, the
/// surface code.
///
/// Best first: every match in scope is ranked (BM25), one per session when
/// asked, limited here. Newest first: the matches come in the index's
/// order, newest written first (FTS5 walks its rowids backwards, so a
/// common word costs what the first hits cost), and the caller stops at
/// its limit and keeps a session's first.
fn search_sql(query: &Query, expression: &str) -> (String, Vec<rusqlite::types::Value>) {
    use rusqlite::types::Value;
    let filter = &query.filter;
    let mut args: Vec<Value> = vec![expression.to_owned().into()];
    let rank = if query.by_relevance {
        "bm25(words)"
    } else {
        "0"
    };
    let mut sql = format!(
        "SELECT {SESSION_COLUMNS}, e.seq, e.time, e.type, e.at, e.len, {rank} AS rank, {SURFACE} AS surf \
         FROM words JOIN events e ON e.rowid = words.rowid JOIN sessions s ON s.sid = e.sid \
         WHERE words MATCH ?"
    );
    if let Scope::Workspaces(cwds) = &query.scope {
        sql.push_str(" AND s.cwd IN (");
        push_list(&mut sql, &mut args, cwds.iter().cloned().map(Value::from));
        sql.push(')');
    }
    if let Some(ids) = &filter.session_ids {
        sql.push_str(" AND s.id IN (");
        push_list(&mut sql, &mut args, ids.iter().cloned().map(Value::from));
        sql.push(')');
    }
    let mut bound = |sql: &mut String, column: &str, op: &str, value: Option<u64>| {
        if let Some(value) = value {
            sql.push_str(&format!(" AND {column} {op} ?"));
            args.push(Value::Integer(i64::try_from(value).unwrap_or(i64::MAX)));
        }
    };
    bound(&mut sql, "s.created_at", ">=", filter.created_from);
    bound(&mut sql, "s.created_at", "<=", filter.created_to);
    bound(&mut sql, "e.seq", ">=", filter.seq_from);
    bound(&mut sql, "e.seq", "<=", filter.seq_to);
    bound(&mut sql, "e.time", ">=", filter.time_from);
    bound(&mut sql, "e.time", "<=", filter.time_to);
    if filter.parents.is_some() || filter.include_roots {
        sql.push_str(" AND (s.parent IN (");
        let parents = filter.parents.iter().flatten().cloned().map(Value::from);
        push_list(&mut sql, &mut args, parents);
        sql.push(')');
        // A root: no parent, or one the scope does not show (another
        // workspace's, deleted) — nothing tells that it has one.
        if filter.include_roots {
            sql.push_str(
                " OR s.parent IS NULL OR NOT EXISTS (SELECT 1 FROM sessions p WHERE p.id = s.parent",
            );
            if let Scope::Workspaces(cwds) = &query.scope {
                sql.push_str(" AND p.cwd IN (");
                push_list(&mut sql, &mut args, cwds.iter().cloned().map(Value::from));
                sql.push(')');
            }
            sql.push(')');
        }
        sql.push(')');
    }
    if filter.no_subagents {
        sql.push_str(" AND s.subagent_of IS NULL");
    }
    if let Some(types) = &filter.event_types {
        sql.push_str(" AND e.type IN (");
        push_list(&mut sql, &mut args, types.iter().cloned().map(Value::from));
        sql.push(')');
    }
    if let Some(surfaces) = &filter.surfaces {
        sql.push_str(&format!(" AND ({SURFACE}) IN ("));
        let codes = surfaces.iter().map(|surface| {
            Value::Integer(match surface {
                Surface::Current => 0,
                Surface::Shadowed => 1,
                Surface::LogOnly => 2,
            })
        });
        push_list(&mut sql, &mut args, codes);
        sql.push(')');
    }
    if !query.by_relevance {
        sql.push_str(" ORDER BY words.rowid DESC");
        return (sql, args);
    }
    // Best first (BM25: lower is better; ties by newer session, then
    // seq), one per session when asked. A hit the log no longer bears out
    // is dropped after this limit: a few more are asked for.
    let columns = "id, cwd, title, created_at, subagent_of, forked_from, sid, seq, time, type, at, len, rank, surf";
    let sql = if query.best_per_session {
        format!(
            "SELECT {columns} FROM (SELECT *, row_number() OVER (PARTITION BY sid ORDER BY rank, seq) AS n FROM ({sql})) WHERE n = 1"
        )
    } else {
        format!("SELECT {columns} FROM ({sql})")
    };
    let mut sql = sql;
    sql.push_str(" ORDER BY rank, created_at DESC, seq LIMIT ?");
    args.push(Value::Integer((query.limit.clamp(1, MAX_LIMIT) + 8) as i64));
    (sql, args)
}

/// The logs in `dir` and their stamps.
/// The logs in `dir` and their stamps; an error when the directory
/// cannot be read (nothing is taken to be gone then). A directory not made
/// yet has no logs.
fn list_logs(dir: &Path) -> Result<HashMap<String, Stamp>> {
    let mut logs = HashMap::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(logs),
        Err(err) => {
            return Err(Failure::Other(SearchError::Index(format!(
                "{}: {err}",
                dir.display()
            ))))
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|name| name.strip_suffix(".jsonl")) else {
            continue;
        };
        // Windows: the directory's entry has a growing file's size and
        // time only lazily; the file's own handle has them now.
        #[cfg(windows)]
        let meta = std::fs::metadata(entry.path());
        #[cfg(not(windows))]
        let meta = entry.metadata();
        match meta {
            Ok(meta) if meta.is_file() => {
                logs.insert(id.to_owned(), stamp(&meta));
            }
            Ok(_) => {}
            // Not known to be gone: kept as it was.
            Err(_) => {
                logs.insert(id.to_owned(), (u64::MAX, i64::MAX, u64::MAX));
            }
        }
    }
    Ok(logs)
}

fn stamp(meta: &std::fs::Metadata) -> Stamp {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |since| {
            i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)
        });
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(meta);
    #[cfg(not(unix))]
    let ino = 0;
    (meta.len(), mtime, ino)
}

fn digest(bytes: &[u8]) -> Vec<u8> {
    Sha256::digest(bytes)[..16].to_vec()
}

/// Reads the new lines of one log into the index; its stamp as it was
/// before reading, or `None` when it is not a log to index (yet).
fn read_log(
    tx: &Transaction<'_>,
    dir: &Path,
    id: &str,
    written: &mut usize,
    stop: &AtomicBool,
) -> Result<Option<Stamp>> {
    let path = dir.join(format!("{id}.jsonl"));
    let Ok(file) = crate::private::open_no_follow(std::fs::OpenOptions::new().read(true), &path)
    else {
        return Ok(None);
    };
    let Ok(meta) = file.metadata() else {
        return Ok(None);
    };
    let stamp = stamp(&meta);
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut header = Vec::new();
    match (&mut reader)
        .take(MAX_HEADER)
        .read_until(b'\n', &mut header)
    {
        // No header line (yet, or ever: a file that is not a log): not read
        // again until it changes.
        Ok(_) if header.last() != Some(&b'\n') => return Ok(Some(stamp)),
        Ok(_) => {}
        Err(_) => return Ok(None),
    }
    let parsed = serde_json::from_slice::<dsh_protocol::log::SessionHeader>(&header)
        .ok()
        // A copy under another name (`a.bak.jsonl`) is not that session.
        .filter(|parsed| parsed.id.as_str() == id);
    let Some(parsed) = parsed else {
        // Not a log (or a newer format's header): left out, and not read
        // again until it changes.
        return Ok(Some(stamp));
    };
    let head = digest(&header);
    let row: Option<Row> = tx
        .query_row(
            "SELECT sid, read_to, head, tail_at, tail, file_len, mtime, ino FROM sessions WHERE id = ?1",
            [id],
            |row| {
                Ok(Row {
                    sid: row.get(0)?,
                    read_to: row.get::<_, i64>(1)? as u64,
                    head: row.get(2)?,
                    tail_at: row.get::<_, i64>(3)? as u64,
                    tail: row.get(4)?,
                    file_len: row.get::<_, i64>(5)? as u64,
                    mtime: row.get(6)?,
                    ino: row.get::<_, i64>(7)? as u64,
                })
            },
        )
        .map(Some)
        .or_else(none_if_no_rows)?;
    let header_len = header.len() as u64;
    let mut file = reader.into_inner();
    let (sid, mut read_to, mut tail_at, mut tail) = match row {
        Some(row)
            if row.ino == stamp.2
                && row.head == head
                && row.read_to <= stamp.0
                // A writer only appends: the same size written again is
                // an edit in place.
                && !(row.file_len == stamp.0 && row.mtime != stamp.1)
                && tail_holds(&mut file, &row) =>
        {
            (row.sid, row.read_to, row.tail_at, row.tail)
        }
        Some(row) => {
            // Truncated or rewritten: read again from the top.
            drop_rows(tx, row.sid)?;
            let (subagent_of, forked_from) = origins(&parsed);
            tx.execute(
                "UPDATE sessions SET cwd = ?2, created_at = ?3, subagent_of = ?4, forked_from = ?5, parent = ?6, head = ?7, title = NULL WHERE sid = ?1",
                params![
                    row.sid,
                    parsed.cwd,
                    i64::try_from(parsed.created_at).unwrap_or(i64::MAX),
                    subagent_of,
                    forked_from,
                    subagent_of.clone().or(forked_from.clone()),
                    head,
                ],
            )?;
            (row.sid, header_len, header_len, Vec::new())
        }
        None => {
            let (subagent_of, forked_from) = origins(&parsed);
            tx.execute(
                "INSERT INTO sessions (id, cwd, created_at, subagent_of, forked_from, parent, read_to, head, tail_at, tail, file_len, mtime, ino) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?7, x'', 0, 0, ?9)",
                params![
                    id,
                    parsed.cwd,
                    i64::try_from(parsed.created_at).unwrap_or(i64::MAX),
                    subagent_of,
                    forked_from,
                    subagent_of.clone().or(forked_from.clone()),
                    header_len as i64,
                    head,
                    stamp.2 as i64,
                ],
            )?;
            (tx.last_insert_rowid(), header_len, header_len, Vec::new())
        }
    };
    if file.seek(SeekFrom::Start(read_to)).is_err() {
        return Ok(None);
    }
    let mut insert_event = tx.prepare(
        "INSERT INTO events (sid, seq, time, type, surface, at, len) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    let mut insert_words = tx.prepare("INSERT INTO words (rowid, body) VALUES (?1, ?2)")?;
    let mut insert_replaced =
        tx.prepare("INSERT INTO replaced (sid, first, last, by) VALUES (?1, ?2, ?3, ?4)")?;
    let mut title = None;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::new();
    let mut whole = true;
    let mut lines = 0u32;
    loop {
        line.clear();
        lines = lines.wrapping_add(1);
        if lines.is_multiple_of(STOP_EVERY) && stop.load(Ordering::Relaxed) {
            whole = false;
            break;
        }
        let consumed = match read_line(&mut reader, &mut line) {
            Ok(Some(consumed)) => consumed,
            // Being written: read next time.
            Ok(None) => break,
            // What was read stays; the log is read again from there.
            Err(err) => {
                tracing::debug!(%err, session = id, "a log could not be read to its end");
                whole = false;
                break;
            }
        };
        let at = read_to;
        read_to += consumed;
        tail_at = at;
        tail = digest(&line[..line.len().min(TAIL_BYTES)]);
        if consumed != line.len() as u64 {
            continue;
        }
        let Some(event) = extract::event(&line) else {
            continue;
        };
        if let Some((first, last)) = event.replaces {
            insert_replaced.execute(params![sid, first as i64, last as i64, event.seq as i64])?;
        }
        if event.title.is_some() {
            title = event.title.clone();
        }
        if event.text.is_empty() {
            continue;
        }
        insert_event.execute(params![
            sid,
            event.seq as i64,
            event.time as i64,
            event.kind,
            i64::from(event.surface),
            at as i64,
            line.len() as i64,
        ])?;
        insert_words.execute(params![tx.last_insert_rowid(), event.text])?;
        *written += 1;
    }
    tx.execute(
        "UPDATE sessions SET read_to = ?2, tail_at = ?3, tail = ?4, file_len = ?5, mtime = ?6, ino = ?7, title = coalesce(?8, title) WHERE sid = ?1",
        params![
            sid,
            read_to as i64,
            tail_at as i64,
            tail,
            stamp.0 as i64,
            stamp.1,
            stamp.2 as i64,
            title,
        ],
    )?;
    // A log read only in part is read again (from where this stopped)
    // however it looks next time.
    Ok(whole.then_some(stamp))
}

/// The session a log's header says started it, and the one it was forked
/// from.
fn origins(header: &dsh_protocol::log::SessionHeader) -> (Option<String>, Option<String>) {
    (
        header.subagent_of.as_ref().map(|o| o.session.to_string()),
        header.forked_from.as_ref().map(|o| o.session.to_string()),
    )
}

/// The longest line read whole; a longer one (a log edited by hand: dsh
/// writes none) is skipped, never held in memory.
const MAX_LINE: u64 = if cfg!(test) {
    1024 * 1024
} else {
    32 * 1024 * 1024
};

/// How many lines a catch-up reads between looks at its stop flag.
const STOP_EVERY: u32 = if cfg!(test) { 4 } else { 1024 };

/// The longest header line read (a file with none in this much is not a
/// log).
const MAX_HEADER: u64 = 64 * 1024;

/// How much of the last line read is compared to tell that it is still
/// there.
const TAIL_BYTES: usize = 64 * 1024;

/// Reads one whole line into `line` (only its first [`TAIL_BYTES`] when it
/// was longer than [`MAX_LINE`]); the bytes it took, or `None` at the end
/// of what is written (a line without its newline is being written).
fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<Option<u64>> {
    let mut consumed = 0;
    loop {
        let (done, used) = {
            let buffer = reader.fill_buf()?;
            if buffer.is_empty() {
                return Ok(None);
            }
            match memchr::memchr(b'\n', buffer) {
                Some(end) => (true, end + 1),
                None => (false, buffer.len()),
            }
        };
        consumed += used as u64;
        if consumed <= MAX_LINE {
            line.extend_from_slice(&reader.fill_buf()?[..used]);
        } else {
            line.truncate(TAIL_BYTES);
        }
        reader.consume(used);
        if done {
            return Ok(Some(consumed));
        }
    }
}

/// Whether the last line read is still where it was.
fn tail_holds(file: &mut File, row: &Row) -> bool {
    if row.tail.is_empty() {
        return row.tail_at == row.read_to;
    }
    let Some(len) = row.read_to.checked_sub(row.tail_at) else {
        return false;
    };
    let mut line = vec![0; usize::try_from(len).unwrap_or(0).min(TAIL_BYTES)];
    file.seek(SeekFrom::Start(row.tail_at)).is_ok()
        && file.read_exact(&mut line).is_ok()
        && digest(&line) == row.tail
}

/// Drops a session's events (and their words and replaced ranges).
fn drop_rows(tx: &Transaction<'_>, sid: i64) -> rusqlite::Result<()> {
    tx.execute(
        "DELETE FROM words WHERE rowid IN (SELECT rowid FROM events WHERE sid = ?1)",
        [sid],
    )?;
    tx.execute("DELETE FROM events WHERE sid = ?1", [sid])?;
    tx.execute("DELETE FROM replaced WHERE sid = ?1", [sid])?;
    Ok(())
}

/// The indexed text of the event line at `at` in a session's log, when it
/// is still the event `seq` there.
fn read_event_text(dir: &Path, id: &str, at: u64, len: u64, seq: u64) -> Option<String> {
    let path = dir.join(format!("{id}.jsonl"));
    let mut file =
        crate::private::open_no_follow(std::fs::OpenOptions::new().read(true), &path).ok()?;
    file.seek(SeekFrom::Start(at)).ok()?;
    if len > MAX_LINE {
        return None;
    }
    let mut line = vec![0; usize::try_from(len).ok()?];
    file.read_exact(&mut line).ok()?;
    let event = extract::event(&line)?;
    (event.seq == seq).then_some(event.text)
}
