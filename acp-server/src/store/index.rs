//! The session index: what `session/list` shows of every log (cwd, roots,
//! title), keyed by the log's size and modification time, so a listing
//! reads the directory and one `stat` per log and opens only the logs
//! written since the index was saved. It is a cache: kept in memory after
//! the first listing, saved next to the logs (`index.v3.tsv`, 0600,
//! replaced atomically; processes that race each write a whole, valid
//! index), rebuilt from the logs when missing, stale or unreadable. The
//! logs stay the truth.
//!
//! The file is one line per log, tab-separated and escaped (`\\`, `\t`,
//! `\n`, `\r`): id, size, mtime (ns), parent (`-` none, `^` and the
//! session a subagent's log belongs to), cwd, title (`-` none, `+` and the
//! title), then the extra roots. A new process reads it in a pass over its
//! bytes, without a JSON parser (a JSON index of 10,000 sessions took
//! longer to parse than the directory took to `stat`), while the directory
//! is read and its logs `stat`ed on up to four threads; logs written since
//! are summarized on as many.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, CString};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dsh_protocol::log::SessionHeader;
use rustix::fs::{AtFlags, Mode, OFlags, StatxFlags};
use serde::Deserialize;

use super::SessionSummary;

/// The index's file name in the sessions directory.
pub(super) const FILE: &str = "index.v3.tsv";

/// The first line of the index file.
const MAGIC: &str = "dsh-session-index\t3";

/// How far into a log its title is looked for (it is written with the
/// first prompt, near the top).
const TITLE_WINDOW: u64 = 64 * 1024;

/// Below this many logs to summarize, one thread does it.
const PARALLEL_FROM: usize = 64;

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    /// The log's size and modification time (ns) when summarized.
    len: u64,
    mtime_ns: u128,
    cwd: Arc<str>,
    roots: Arc<[String]>,
    title: Option<Arc<str>>,
    /// A subagent's log: its parent session (not listed unless asked for).
    parent: Option<Arc<str>>,
    /// The listing that last saw its log.
    seen: u64,
}

/// FNV-1a: session ids are short and come from this user's own
/// directory, and SipHash was a tenth of a warm listing.
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        let mut hash = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for byte in bytes {
            hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = hash;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type ById = HashMap<Arc<str>, Entry, BuildHasherDefault<Fnv>>;

#[derive(Debug, Default)]
struct Entries {
    by_id: ById,
    /// Listings so far (for [`Entry::seen`]).
    listings: u64,
}

#[derive(Debug)]
pub(super) struct Index {
    path: PathBuf,
    /// Loaded on the first listing.
    entries: Mutex<Option<Entries>>,
}

/// A log in the sessions directory as `stat` saw it: id, file name, size,
/// mtime.
type Found = (Arc<str>, CString, u64, u128);

/// A log's header and title, or why it cannot be read.
type Summary = Result<(SessionHeader, Option<String>), String>;

impl Index {
    pub(super) fn new(path: PathBuf) -> Index {
        Index {
            path,
            entries: Mutex::new(None),
        }
    }

    /// Every log in `dir`, summarized, in no particular order.
    pub(super) fn list(&self, dir: &Path) -> Vec<SessionSummary> {
        let started = std::time::Instant::now();
        let Ok(dir_fd) = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return Vec::new();
        };
        let mut guard = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // A new process reads the index while the directory is read and
        // every log `stat`ed.
        let (loaded, found) = std::thread::scope(|scope| {
            let loading = guard.is_none().then(|| scope.spawn(|| self.load()));
            let found = in_parallel(
                log_names(&dir_fd),
                || (),
                |(), name| stat_log(&dir_fd, name),
            );
            (loading.map(|loading| loading.join()), found)
        });
        let entries = match loaded {
            Some(Ok(loaded)) => guard.insert(loaded),
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => guard.get_or_insert_with(Entries::default),
        };
        let statted = started.elapsed();
        entries.listings += 1;
        let listing_no = entries.listings;
        let mut stale: Vec<Found> = Vec::new();
        for (id, name, len, mtime_ns) in found.into_iter().flatten() {
            match entries.by_id.get_mut(&*id) {
                Some(entry) if entry.len == len && entry.mtime_ns == mtime_ns => {
                    entry.seen = listing_no;
                }
                _ => stale.push((id, name, len, mtime_ns)),
            }
        }
        let summarized = stale.len();
        let mut changed = !stale.is_empty();
        let summaries = in_parallel(stale, Vec::new, |buffer, log| {
            let summary = summarize(&dir_fd, &log.1, log.2, buffer);
            (log, summary)
        });
        for ((id, name, len, mtime_ns), summary) in summaries {
            match summary {
                Ok((header, title)) => {
                    let entry = Entry {
                        len,
                        mtime_ns,
                        cwd: header.cwd.into(),
                        roots: header.roots.into(),
                        title: title.map(Arc::from),
                        parent: header.subagent_of.map(|o| Arc::from(o.session.as_str())),
                        seen: listing_no,
                    };
                    entries.by_id.insert(id, entry);
                }
                Err(err) => {
                    let path = dir.join(name.to_string_lossy().as_ref());
                    tracing::warn!(path = %path.display(), %err, "skipping unreadable session log");
                    entries.by_id.remove(&id);
                }
            }
        }
        let before = entries.by_id.len();
        entries.by_id.retain(|_, entry| entry.seen == listing_no);
        changed |= entries.by_id.len() != before;
        if changed {
            self.save(entries);
        }
        let summaries: Vec<SessionSummary> = entries
            .by_id
            .iter()
            .map(|(id, entry)| SessionSummary {
                id: id.clone(),
                cwd: entry.cwd.clone(),
                roots: entry.roots.clone(),
                title: entry.title.clone(),
                parent: entry.parent.clone(),
                updated_at: UNIX_EPOCH
                    + Duration::from_nanos(u64::try_from(entry.mtime_ns).unwrap_or(u64::MAX)),
            })
            .collect();
        let ms = |at: Duration| at.as_secs_f64() * 1000.0;
        tracing::debug!(
            logs = summaries.len(),
            summarized,
            statted_ms = ms(statted),
            total_ms = ms(started.elapsed()),
            "session index listed"
        );
        summaries
    }

    fn load(&self) -> Entries {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return Entries::default();
        };
        let mut lines = text.split('\n');
        if lines.next() != Some(MAGIC) {
            tracing::warn!(path = %self.path.display(), "session index unreadable; rebuilding it");
            return Entries::default();
        }
        let mut by_id = ById::with_capacity_and_hasher(text.len() / 80, Default::default());
        let mut shared = Shared::default();
        for line in lines.filter(|line| !line.is_empty()) {
            match parse_line(line, &mut shared) {
                Some((id, entry)) => {
                    by_id.insert(id, entry);
                }
                None => {
                    tracing::debug!(path = %self.path.display(), "a session index line is unreadable; its log will be read")
                }
            }
        }
        Entries { by_id, listings: 0 }
    }

    fn save(&self, entries: &Entries) {
        let result = (|| -> std::io::Result<()> {
            use std::os::unix::fs::OpenOptionsExt;
            let mut text = String::with_capacity(entries.by_id.len() * 120);
            text.push_str(MAGIC);
            text.push('\n');
            for (id, entry) in &entries.by_id {
                write_line(&mut text, id, entry);
            }
            let temp = self.path.with_extension(format!(
                "tmp.{}.{}",
                std::process::id(),
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .subsec_nanos()
            ));
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            let written = file.write_all(text.as_bytes()).and_then(|()| {
                drop(file);
                std::fs::rename(&temp, &self.path)
            });
            if written.is_err() {
                let _ = std::fs::remove_file(&temp);
            }
            written
        })();
        if let Err(err) = result {
            tracing::debug!(path = %self.path.display(), %err, "cannot save the session index");
        }
    }
}

/// One index line (see the module docs).
fn write_line(text: &mut String, id: &str, entry: &Entry) {
    escape(text, id);
    text.push('\t');
    text.push_str(&entry.len.to_string());
    text.push('\t');
    text.push_str(&entry.mtime_ns.to_string());
    text.push('\t');
    match &entry.parent {
        None => text.push('-'),
        Some(parent) => {
            text.push('^');
            escape(text, parent);
        }
    }
    text.push('\t');
    escape(text, &entry.cwd);
    text.push('\t');
    match &entry.title {
        None => text.push('-'),
        Some(title) => {
            text.push('+');
            escape(text, title);
        }
    }
    for root in entry.roots.iter() {
        text.push('\t');
        escape(text, root);
    }
    text.push('\n');
}

/// What index lines share as they are read: the cwds (many sessions, few
/// workspaces) and the empty list of roots.
#[derive(Default)]
struct Shared {
    cwds: HashSet<Arc<str>>,
    no_roots: Option<Arc<[String]>>,
}

/// An index line read back; `None` when it is not one.
fn parse_line(line: &str, shared: &mut Shared) -> Option<(Arc<str>, Entry)> {
    let mut fields = line.split('\t');
    let id: Arc<str> = Arc::from(&*unescape(fields.next()?)?);
    let len = fields.next()?.parse().ok()?;
    let mtime_ns = fields.next()?.parse().ok()?;
    let parent = match fields.next()? {
        "-" => None,
        parent => Some(Arc::from(&*unescape(parent.strip_prefix('^')?)?)),
    };
    let cwd = unescape(fields.next()?)?;
    let cwd = match shared.cwds.get(&*cwd) {
        Some(cwd) => cwd.clone(),
        None => {
            let cwd: Arc<str> = Arc::from(&*cwd);
            shared.cwds.insert(cwd.clone());
            cwd
        }
    };
    let title = match fields.next()? {
        "-" => None,
        title => Some(Arc::from(&*unescape(title.strip_prefix('+')?)?)),
    };
    let roots = fields
        .map(|root| unescape(root).map(Cow::into_owned))
        .collect::<Option<Vec<String>>>()?;
    let roots = if roots.is_empty() {
        shared
            .no_roots
            .get_or_insert_with(|| Arc::from(Vec::new()))
            .clone()
    } else {
        roots.into()
    };
    let entry = Entry {
        len,
        mtime_ns,
        cwd,
        roots,
        title,
        parent,
        seen: 0,
    };
    Some((id, entry))
}

fn escape(text: &mut String, field: &str) {
    for c in field.chars() {
        match c {
            '\\' => text.push_str("\\\\"),
            '\t' => text.push_str("\\t"),
            '\n' => text.push_str("\\n"),
            '\r' => text.push_str("\\r"),
            c => text.push(c),
        }
    }
}

fn unescape(field: &str) -> Option<Cow<'_, str>> {
    if !field.contains('\\') {
        return Some(Cow::Borrowed(field));
    }
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            '\\' => '\\',
            't' => '\t',
            'n' => '\n',
            'r' => '\r',
            _ => return None,
        });
    }
    Some(Cow::Owned(out))
}

/// The names of the logs (`*.jsonl`) in the directory.
fn log_names(dir: &OwnedFd) -> Vec<CString> {
    let Ok(listing) = rustix::fs::Dir::read_from(dir) else {
        return Vec::new();
    };
    listing
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_bytes().ends_with(b".jsonl"))
        .map(|entry| entry.file_name().to_owned())
        .collect()
}

/// A log's id, size and mtime; `None` for a name that is not UTF-8 or a
/// log that went away.
fn stat_log(dir: &OwnedFd, name: CString) -> Option<Found> {
    let id = name.to_str().ok()?.strip_suffix(".jsonl")?;
    let stat = rustix::fs::statx(
        dir,
        &name,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::TYPE | StatxFlags::SIZE | StatxFlags::MTIME,
    )
    .ok()?;
    // Only regular files are logs: a FIFO or a link named `*.jsonl` in
    // the sessions directory would block or lead elsewhere.
    if u32::from(stat.stx_mode) & 0o170000 != 0o100000 {
        return None;
    }
    // Before 1970 counts as 1970, as it did through `SystemTime`.
    let mtime_ns = u128::try_from(stat.stx_mtime.tv_sec).map_or(0, |secs| {
        secs * 1_000_000_000 + u128::from(stat.stx_mtime.tv_nsec)
    });
    Some((Arc::from(id), name, stat.stx_size, mtime_ns))
}

/// `each` over `items` in order, on up to four threads when there are many
/// (the `stat` of 10,000 logs, the summaries of a fresh index); `state`
/// makes each thread's scratch space.
fn in_parallel<T: Send, R: Send, S>(
    items: Vec<T>,
    state: impl Fn() -> S + Sync,
    each: impl Fn(&mut S, T) -> R + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4);
    let run = |part: Vec<T>| {
        let mut scratch = state();
        part.into_iter()
            .map(|item| each(&mut scratch, item))
            .collect::<Vec<R>>()
    };
    if items.len() < PARALLEL_FROM || threads < 2 {
        return run(items);
    }
    let per = items.len().div_ceil(threads);
    let mut parts = Vec::new();
    let mut rest = items;
    while rest.len() > per {
        let tail = rest.split_off(per);
        parts.push(rest);
        rest = tail;
    }
    parts.push(rest);
    let first = parts.remove(0);
    std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .into_iter()
            .map(|part| scope.spawn(|| run(part)))
            .collect();
        let mut all = run(first);
        for handle in handles {
            match handle.join() {
                Ok(part) => all.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all
    })
}

/// What [`summarize`] reads of a title line.
#[derive(Deserialize)]
struct TitleLine {
    #[serde(rename = "type")]
    kind: String,
    data: TitleData,
}

#[derive(Deserialize)]
struct TitleData {
    title: String,
}

/// Reads a log's header and the title within its first 64 KiB (`len` is
/// its size, read in as few reads as it takes): the last `session/title`
/// of the first turn (the first prompt's, then the model's when it wrote
/// one), stopping at that turn's end. `buffer` is reused from log to log.
fn summarize(dir: &OwnedFd, name: &CStr, len: u64, buffer: &mut Vec<u8>) -> Summary {
    // Never follows a link and never blocks (a FIFO swapped in after the
    // stat): a log is a regular file.
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|err| err.to_string())?;
    let mut file = std::fs::File::from(fd);
    let want = usize::try_from(len.min(TITLE_WINDOW)).unwrap_or(0);
    buffer.clear();
    buffer.resize(want, 0);
    let mut read = 0;
    while read < want {
        match file.read(&mut buffer[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err.to_string()),
        }
    }
    let mut lines = buffer[..read].split(|&b| b == b'\n');
    let header: SessionHeader = serde_json::from_slice(lines.next().unwrap_or_default())
        .map_err(|err| format!("bad header: {err}"))?;
    let mut found = None;
    for line in lines {
        // A line whose type its first bytes name (dsh writes seq, time,
        // type, then the data) is not searched unless it is one of the
        // two that matter.
        if leading_type(line).is_some_and(|kind| kind != b"session/title" && kind != b"turn/end") {
            continue;
        }
        if found.is_some() && contains(line, "\"turn/end\"") {
            break;
        }
        if !contains(line, "\"session/title\"") {
            continue;
        }
        if let Ok(TitleLine { kind, data }) = serde_json::from_slice::<TitleLine>(line) {
            if kind == "session/title" {
                found = Some(data.title);
            }
        }
    }
    Ok((header, found))
}

/// The event type a line names in its first bytes, when it starts as dsh
/// writes events: `{"seq":N,"time":N,"type":"…"` (`"ignorable":true`
/// may come before the type).
fn leading_type(head: &[u8]) -> Option<&[u8]> {
    let head = &head[..head.len().min(160)];
    let rest = head.strip_prefix(b"{\"seq\":")?;
    let at = rest
        .windows(8)
        .position(|window| window == b"\"type\":\"")?;
    let before = &rest[..at];
    if !before
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || b"\":,".contains(b))
    {
        return None;
    }
    let name = &rest[at + 8..];
    let end = name.iter().position(|&b| b == b'"')?;
    Some(&name[..end])
}

/// Whether a line holds `needle` (a line that is not UTF-8 holds nothing).
fn contains(line: &[u8], needle: &str) -> bool {
    std::str::from_utf8(line).is_ok_and(|line| line.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_protocol::log::{Event, EventData};

    fn event_line(seq: u64, data: EventData) -> String {
        let event = Event {
            seq,
            time: 1,
            ignorable: false,
            data,
        };
        serde_json::to_string(&event).unwrap() + "\n"
    }

    fn title(title: &str) -> EventData {
        EventData::Title {
            title: title.to_owned(),
            usage: None,
        }
    }

    fn log(dir: &Path, id: &str, title_of: Option<&str>) {
        let header = SessionHeader::new(
            dsh_protocol::SessionId::new(id),
            1,
            format!("/work/{id}"),
            Vec::new(),
        );
        let mut text = serde_json::to_string(&header).unwrap() + "\n";
        if let Some(title_of) = title_of {
            text += &event_line(1, title(title_of));
        }
        std::fs::write(dir.join(format!("{id}.jsonl")), text).unwrap();
    }

    fn summarize_file(path: &Path) -> Summary {
        let dir = rustix::fs::open(
            path.parent().unwrap(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        let name = CString::new(path.file_name().unwrap().as_encoded_bytes()).unwrap();
        let len = std::fs::metadata(path).unwrap().len();
        summarize(&dir, &name, len, &mut Vec::new())
    }

    fn titles(index: &Index, dir: &Path) -> Vec<(String, Option<String>)> {
        let mut listed: Vec<(String, Option<String>)> = index
            .list(dir)
            .into_iter()
            .map(|s| (s.id.to_string(), s.title.as_deref().map(str::to_owned)))
            .collect();
        listed.sort();
        listed
    }

    #[test]
    fn the_index_follows_the_logs() {
        let dir = tempfile::tempdir().unwrap();
        log(dir.path(), "a", Some("first"));
        log(dir.path(), "b", None);
        let index = Index::new(dir.path().join(FILE));
        assert_eq!(
            titles(&index, dir.path()),
            [("a".into(), Some("first".into())), ("b".into(), None)]
        );
        // Saved: a new process reads the index, not the logs.
        let saved = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(saved.starts_with("dsh-session-index\t3\n"), "{saved}");
        assert!(saved.contains("\t/work/a\t+first\n"), "{saved}");
        // A log written since, a new log and a deleted log.
        log(dir.path(), "b", Some("now titled"));
        log(dir.path(), "c", None);
        std::fs::remove_file(dir.path().join("a.jsonl")).unwrap();
        let fresh = Index::new(dir.path().join(FILE));
        let expected = [("b".into(), Some("now titled".into())), ("c".into(), None)];
        assert_eq!(titles(&fresh, dir.path()), expected);
        assert_eq!(titles(&index, dir.path()), expected);
        // A corrupt index is rebuilt; a corrupt line is read again from
        // its log.
        std::fs::write(dir.path().join(FILE), "{not json").unwrap();
        assert_eq!(
            titles(&Index::new(dir.path().join(FILE)), dir.path()),
            expected
        );
        let saved = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        std::fs::write(
            dir.path().join(FILE),
            saved.replace("\t+now titled", "\tbroken"),
        )
        .unwrap();
        assert_eq!(
            titles(&Index::new(dir.path().join(FILE)), dir.path()),
            expected
        );
    }

    /// A FIFO or a link named like a log is not a log: the listing neither
    /// blocks on it nor follows it.
    #[test]
    fn only_regular_files_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        log(dir.path(), "a", Some("first"));
        let fifo = dir.path().join("f.jsonl");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        std::os::unix::fs::symlink(dir.path().join("a.jsonl"), dir.path().join("l.jsonl")).unwrap();
        let index = Index::new(dir.path().join(FILE));
        assert_eq!(
            titles(&index, dir.path()),
            [("a".into(), Some("first".into()))]
        );
    }

    #[test]
    fn index_lines_keep_every_character() {
        let entry = Entry {
            len: 12,
            mtime_ns: 1_700_000_000_123_456_789,
            cwd: "/work/tab\there\\back\nline".into(),
            roots: vec!["/r1".to_owned(), "/r\t2".to_owned()].into(),
            title: Some("".into()),
            parent: Some("parent-1".into()),
            seen: 0,
        };
        let mut text = String::new();
        write_line(&mut text, "id-1", &entry);
        assert_eq!(text.matches('\n').count(), 1);
        let (id, read) = parse_line(text.trim_end_matches('\n'), &mut Shared::default()).unwrap();
        assert_eq!(&*id, "id-1");
        assert_eq!(read, entry);
        let untitled = Entry {
            title: None,
            roots: Vec::new().into(),
            parent: None,
            ..entry
        };
        let mut text = String::new();
        write_line(&mut text, "id-2", &untitled);
        assert_eq!(
            parse_line(text.trim_end(), &mut Shared::default())
                .unwrap()
                .1,
            untitled
        );
        assert!(parse_line("id\t1\t2\t-\t/cwd\tno-marker", &mut Shared::default()).is_none());
        assert!(parse_line("id\tx\t2\t-\t/cwd\t-", &mut Shared::default()).is_none());
        assert!(parse_line("id\t1\t2\t-\t/bad\\escape\t-", &mut Shared::default()).is_none());
        assert!(parse_line("id\t1\t2\t/cwd\t-", &mut Shared::default()).is_none());
    }

    #[test]
    fn the_title_is_the_last_of_the_first_turn_whatever_the_line_order() {
        let dir = tempfile::tempdir().unwrap();
        let header = SessionHeader::new(
            dsh_protocol::SessionId::new("t"),
            1,
            "/work/t".to_owned(),
            Vec::new(),
        );
        let prompt = EventData::TurnStart { turn: 1 };
        let long = EventData::Notice {
            text: "x".repeat(20_000),
        };
        let end = || EventData::TurnEnd {
            turn: 1,
            stop: Some(dsh_protocol::log::StopReason::EndTurn),
            error: None,
        };
        // dsh's own order: seq, time, type, data.
        let text = serde_json::to_string(&header).unwrap()
            + "\n"
            + &event_line(1, title("From the prompt"))
            + &event_line(2, prompt)
            + &event_line(3, long)
            + &event_line(4, title("From the model"))
            + &event_line(5, end())
            + &event_line(6, title("A later one"));
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, text).unwrap();
        let (_, found) = summarize_file(&path).unwrap();
        assert_eq!(found.as_deref(), Some("From the model"));
        // Keys in another order (another writer): found by searching.
        let sorted = |line: String| {
            let value: serde_json::Value = serde_json::from_str(&line).unwrap();
            value.to_string() + "\n"
        };
        let text = serde_json::to_string(&header).unwrap()
            + "\n"
            + &sorted(event_line(1, title("Sorted keys")))
            + &sorted(event_line(2, end()))
            + &sorted(event_line(3, title("After the end")));
        std::fs::write(&path, text).unwrap();
        let (_, found) = summarize_file(&path).unwrap();
        assert_eq!(found.as_deref(), Some("Sorted keys"));
        assert_eq!(
            leading_type(br#"{"seq":3,"time":9,"ignorable":true,"type":"llm/retry","data":{}}"#),
            Some(&b"llm/retry"[..])
        );
        assert_eq!(leading_type(br#"{"data":{"type":"x"},"seq":1}"#), None);
        assert_eq!(
            leading_type(br#"{"seq":1,"data":{"a":{"type":"x"}}}"#),
            None
        );
    }

    #[test]
    fn many_logs_are_summarized_on_threads_in_the_same_way() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(PARALLEL_FROM * 3) {
            let title = (i % 2 == 0).then(|| format!("title {i}"));
            log(dir.path(), &format!("s{i:04}"), title.as_deref());
        }
        let listed = titles(&Index::new(dir.path().join(FILE)), dir.path());
        assert_eq!(listed.len(), PARALLEL_FROM * 3);
        for (i, (id, title)) in listed.iter().enumerate() {
            assert_eq!(id, &format!("s{i:04}"));
            assert_eq!(title, &(i % 2 == 0).then(|| format!("title {i}")));
        }
    }
}
