//! The session index: what `session/list` shows of every log (cwd, roots,
//! title), keyed by the log's size and modification time, so a listing
//! opens only the logs written since the index was saved. It is a cache:
//! kept in memory after the first listing, saved beside the logs
//! (`index/sessions.v4.tsv`, 0600, replaced atomically; processes that
//! race each write a whole, valid index), rebuilt from the logs when
//! missing or unreadable. The logs stay the truth. Built with no index
//! file, each log is opened once (its size and time read from the open
//! file) rather than `stat`ed by name and then opened.
//!
//! Whether any log was written since is told by the sessions directory's
//! change time (`ctime`): dsh's log writers touch the directory after
//! they write (`store::LogWriter`; at most once a second), and creating,
//! removing or renaming a log changes it anyway. The index is saved with
//! the directory's inode and change time as they were *before* its logs
//! were read, and only when that change time was at least [`SETTLE`] old
//! (a write in the same tick of a coarse clock would leave it equal) and
//! every log could be read. A listing that finds the same stamp reads the
//! index alone; any other reads the directory and `stat`s every log (on
//! up to four threads, while a new process parses the index file),
//! summarizing the ones written since. A log changed in place by another
//! program (not a dsh writer) shows once anything else in the directory
//! changes. The index file is trusted only when it is this user's alone.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dsh_protocol::log::SessionHeader;
use serde::Deserialize;

use super::dir::{self, Dir, Kind};
use super::SessionSummary;

mod file;

use file::Shared;

/// The index file, in the sessions directory (in a directory of its own:
/// saving it must not change the sessions directory).
pub(super) const FILE: &str = "index/sessions.v4.tsv";

/// The index file of earlier versions, removed when the index is built.
const OLD_FILE: &str = "index.v3.tsv";

/// How old the sessions directory's change time must be for the index to
/// be trusted while it stays the same (see the module docs).
const SETTLE: Duration = Duration::from_secs(2);

/// The sessions directory as a listing found it: inode and change time
/// (ns).
type Stamp = (u64, u128);

/// How far into a log its title is looked for (it is written with the
/// first prompt, near the top, and the model's soon after).
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

impl Entry {
    /// Its log's last write, milliseconds since the epoch (the listing's
    /// order and cursor).
    fn millis(&self) -> u128 {
        self.mtime_ns / 1_000_000
    }

    fn summary(&self, id: &Arc<str>) -> SessionSummary {
        SessionSummary {
            id: id.clone(),
            cwd: self.cwd.clone(),
            roots: self.roots.clone(),
            title: self.title.clone(),
            parent: self.parent.clone(),
            updated_at: UNIX_EPOCH
                + Duration::from_nanos(u64::try_from(self.mtime_ns).unwrap_or(u64::MAX)),
        }
    }
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
    /// The sessions directory when the entries were last brought up to
    /// date (`None`: it had changed too recently to be trusted).
    stamp: Option<Stamp>,
    /// What the last listing did.
    pass: Pass,
}

/// How a listing brought the entries up to date.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
enum Pass {
    /// Nothing listed yet.
    #[default]
    None,
    /// Every log opened (no index file).
    Built,
    /// Every log `stat`ed; this many summarized.
    Scanned(usize),
    /// The directory's stamp unchanged: nothing read but the index.
    Unchanged,
}

#[derive(Debug)]
pub(super) struct Index {
    path: PathBuf,
    /// See [`SETTLE`]; shorter in tests.
    settle: Duration,
    /// Loaded on the first listing.
    entries: Mutex<Option<Entries>>,
}

/// A log in the sessions directory as `stat` saw it: file name (the id
/// and `.jsonl`), size, mtime.
type Found = (CString, u64, u128);

/// A log's id: its file name without `.jsonl` (checked by [`stat_log`]).
fn id_of(name: &CStr) -> &str {
    let name = name.to_str().unwrap_or_default();
    name.strip_suffix(".jsonl").unwrap_or(name)
}

/// A log's header and title, or why it cannot be read.
type Summary = Result<(SessionHeader, Option<String>), String>;

impl Index {
    pub(super) fn new(path: PathBuf) -> Index {
        Index {
            path,
            settle: SETTLE,
            entries: Mutex::new(None),
        }
    }

    /// Every log in `dir`, summarized, in no particular order.
    pub(super) fn list(&self, dir: &Path) -> Vec<SessionSummary> {
        let Some(guard) = self.refresh(dir) else {
            return Vec::new();
        };
        let Some(entries) = guard.as_ref() else {
            return Vec::new();
        };
        entries
            .by_id
            .iter()
            .map(|(id, entry)| entry.summary(id))
            .collect()
    }

    /// Up to `size` of the logs in `dir` that `keep(cwd, parent)` keeps and
    /// that come after `after` (`(ms, id)`), in the cursor's order: newer
    /// millisecond first, then by id; and whether more follow. Only the
    /// page is copied out and sorted (a listing of 10,000 for a page of
    /// 50 had spent a quarter of its time copying and sorting the rest).
    pub(super) fn page(
        &self,
        dir: &Path,
        keep: &dyn Fn(&str, Option<&str>) -> bool,
        after: Option<(u128, &str)>,
        size: usize,
    ) -> (Vec<SessionSummary>, bool) {
        let Some(guard) = self.refresh(dir) else {
            return (Vec::new(), false);
        };
        let Some(entries) = guard.as_ref() else {
            return (Vec::new(), false);
        };
        type Row<'a> = (std::cmp::Reverse<u128>, &'a Arc<str>, &'a Entry);
        let mut rest: Vec<Row<'_>> = entries
            .by_id
            .iter()
            .filter(|(_, entry)| keep(&entry.cwd, entry.parent.as_deref()))
            .map(|(id, entry)| (std::cmp::Reverse(entry.millis()), id, entry))
            .filter(|(ms, id, _)| {
                after.is_none_or(|(after, after_id)| {
                    ms.0 < after || (ms.0 == after && &***id > after_id)
                })
            })
            .collect();
        let order = |a: &Row<'_>, b: &Row<'_>| (a.0, &**a.1).cmp(&(b.0, &**b.1));
        let more = rest.len() > size;
        if more && size > 0 {
            rest.select_nth_unstable_by(size - 1, order);
        }
        rest.truncate(size);
        rest.sort_unstable_by(order);
        let page = rest
            .iter()
            .map(|(_, id, entry)| entry.summary(id))
            .collect();
        (page, more)
    }

    /// The entries brought up to date with the directory: the index alone
    /// when the directory's stamp is the one they were read under;
    /// otherwise every log `stat`ed, the ones written since summarized,
    /// the gone ones dropped, and the index saved when it changed. `None`
    /// when the directory cannot be opened.
    fn refresh(&self, dir: &Path) -> Option<std::sync::MutexGuard<'_, Option<Entries>>> {
        let started = std::time::Instant::now();
        let dir_fd = dir::open(dir).ok()?;
        let mut guard = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if guard.is_none() {
            // Before the stamp: neither changes the directory again.
            self.make_room(&dir_fd);
        }
        // Taken before any log is read: a write after it changes it.
        let stamp = stamp(&dir_fd, self.settle);
        let saved = guard.is_none().then(|| self.read());
        // A first listing without an index file (a first start, or one
        // removed): every log is read anyway, so each is opened once — its
        // size and time from the open file, not a `stat` by name first.
        if matches!(saved, Some(Saved::Missing)) {
            let (names, mut complete) = dir::log_names(&dir_fd);
            let read = in_parallel(names, Vec::new, |buffer, (name, kind)| {
                read_log(&dir_fd, name, kind, buffer)
            });
            let statted = started.elapsed();
            let entries = guard.insert(Entries {
                by_id: ById::with_capacity_and_hasher(read.len(), Default::default()),
                listings: 1,
                stamp: None,
                pass: Pass::Built,
            });
            complete &= absorb(entries, dir, read.into_iter().flatten(), 1);
            entries.stamp = stamp.filter(|_| complete);
            let summarized_at = started.elapsed();
            self.save(entries);
            log_refresh(entries, [statted, summarized_at, started.elapsed()]);
            return Some(guard);
        }
        let text = match saved {
            Some(Saved::Text(text)) => Some(text),
            _ => None,
        };
        // The index is trusted only as read: a line that cannot be read
        // drops its stamp.
        if guard.is_none()
            && stamp.is_some()
            && text.as_deref().and_then(file::saved_stamp) == stamp
        {
            *guard = Some(self.parse(text.as_deref()));
        }
        if let Some(entries) = guard
            .as_mut()
            .filter(|entries| stamp.is_some() && entries.stamp == stamp)
        {
            entries.listings += 1;
            entries.pass = Pass::Unchanged;
            let at = started.elapsed();
            log_refresh(entries, [at, at, at]);
            return Some(guard);
        }
        // A new process parses the index while the directory is read and
        // every log `stat`ed.
        let (loaded, (found, mut complete)) = std::thread::scope(|scope| {
            let loading = guard
                .is_none()
                .then(|| scope.spawn(|| self.parse(text.as_deref())));
            let (names, complete) = dir::log_names(&dir_fd);
            let found = in_parallel(names, || (), |(), (name, _)| stat_log(&dir_fd, name));
            (loading.map(|loading| loading.join()), (found, complete))
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
        for found in found {
            let (name, len, mtime_ns) = match found {
                Ok(Some(found)) => found,
                Ok(None) => continue,
                // Kept as it was (not dropped as gone), and not trusted.
                Err(name) => {
                    complete = false;
                    if let Some(entry) = entries.by_id.get_mut(id_of(&name)) {
                        entry.seen = listing_no;
                    }
                    continue;
                }
            };
            match entries.by_id.get_mut(id_of(&name)) {
                Some(entry) if entry.len == len && entry.mtime_ns == mtime_ns => {
                    entry.seen = listing_no;
                }
                _ => stale.push((name, len, mtime_ns)),
            }
        }
        let summarized = stale.len();
        let stamp = stamp.filter(|_| complete);
        let mut changed = summarized > 0 || entries.stamp != stamp;
        let summaries = in_parallel(stale, Vec::new, |buffer, log| {
            let summary = dir::open_log(&dir_fd, &log.0)
                .map_err(|err| err.to_string())
                .and_then(|file| summarize(file, log.1, buffer));
            (log, summary)
        });
        let summarized_all = absorb(entries, dir, summaries, listing_no);
        let summarized_at = started.elapsed();
        let before = entries.by_id.len();
        entries.by_id.retain(|_, entry| entry.seen == listing_no);
        changed |= entries.by_id.len() != before;
        entries.stamp = stamp.filter(|_| summarized_all);
        entries.pass = Pass::Scanned(summarized);
        if changed {
            self.save(entries);
        }
        log_refresh(entries, [statted, summarized_at, started.elapsed()]);
        Some(guard)
    }

    /// Makes the index's directory and removes an earlier version's index
    /// file (once per process, before the stamp is taken).
    fn make_room(&self, dir: &Dir) {
        if let Some(parent) = self.path.parent() {
            let _ = super::create_private_dir(parent);
        }
        dir::remove(dir, OLD_FILE);
    }

    /// The index file as a new process finds it: its text when it can be
    /// read and is this user's alone (0600, as it is saved: anything else
    /// is not trusted).
    fn read(&self) -> Saved {
        let mut file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Saved::Missing,
            Err(_) => return Saved::Unusable,
        };
        let Ok(meta) = file.metadata() else {
            return Saved::Unusable;
        };
        if !crate::private::is_owned(&meta, crate::private::GROUP_OTHER) {
            tracing::warn!(path = %self.path.display(), "session index not this user's alone; rebuilding it");
            return Saved::Unusable;
        }
        let mut text = String::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        match file.read_to_string(&mut text) {
            Ok(_) => Saved::Text(text),
            Err(_) => Saved::Unusable,
        }
    }

    /// Entries from the index file's text (none from none, or from a file
    /// that is not an index).
    fn parse(&self, text: Option<&str>) -> Entries {
        let Some(text) = text else {
            return Entries::default();
        };
        file::read(text).unwrap_or_else(|| {
            tracing::warn!(path = %self.path.display(), "session index unreadable; rebuilding it");
            Entries::default()
        })
    }

    fn save(&self, entries: &Entries) {
        let result = (|| -> std::io::Result<()> {
            let text = file::write(entries);
            if let Some(parent) = self.path.parent() {
                super::create_private_dir(parent)?;
            }
            let temp = self.path.with_extension(format!(
                "tmp.{}.{}",
                std::process::id(),
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .subsec_nanos()
            ));
            let mut file = crate::private::options()
                .write(true)
                .create_new(true)
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

/// The sessions directory's stamp, when its change time is at least
/// `settle` old (see the module docs); `None` otherwise.
fn stamp(dir: &Dir, settle: Duration) -> Option<Stamp> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    let (ino, ctime_ns) = dir::stamp(dir)?;
    (now.as_nanos().checked_sub(ctime_ns)? >= settle.as_nanos()).then_some((ino, ctime_ns))
}

/// Logs summarized in listing `listing_no` into `entries` (an unreadable
/// one leaves them, with a warning); whether every one could be read.
fn absorb(
    entries: &mut Entries,
    dir: &Path,
    summaries: impl IntoIterator<Item = (Found, Summary)>,
    listing_no: u64,
) -> bool {
    let mut all = true;
    let mut shared = Shared::default();
    for ((name, len, mtime_ns), summary) in summaries {
        let id = id_of(&name);
        match summary {
            Ok((header, title)) => {
                let entry = Entry {
                    len,
                    mtime_ns,
                    cwd: shared.cwd(&header.cwd),
                    roots: shared.roots(header.roots),
                    title: title.map(Arc::from),
                    parent: header.subagent_of.map(|o| Arc::from(o.session.as_str())),
                    seen: listing_no,
                };
                entries.by_id.insert(Arc::from(id), entry);
            }
            Err(err) => {
                let path = dir.join(name.to_string_lossy().as_ref());
                tracing::warn!(path = %path.display(), %err, "skipping unreadable session log");
                entries.by_id.remove(id);
                all = false;
            }
        }
    }
    all
}

/// What a refresh did and where it spent its time: until the logs were
/// `stat`ed (or read, building), summarized, and in all (the index saved
/// too).
fn log_refresh(entries: &Entries, [statted, summarized_at, total]: [Duration; 3]) {
    let ms = |at: Duration| at.as_secs_f64() * 1000.0;
    tracing::debug!(
        logs = entries.by_id.len(),
        pass = ?entries.pass,
        statted_ms = ms(statted),
        summarized_ms = ms(summarized_at),
        total_ms = ms(total),
        "session index refreshed"
    );
}

/// The index file as a new process finds it ([`Index::read`]).
enum Saved {
    /// No index file: it is built from the logs.
    Missing,
    /// One that cannot be read or trusted: every log is `stat`ed and read.
    Unusable,
    Text(String),
}

/// A log's name, size and mtime; `None` for a name that is not UTF-8, a
/// log that went away or something that is not a log; its name back when
/// it cannot be `stat`ed.
fn stat_log(dir: &Dir, name: CString) -> Result<Option<Found>, CString> {
    if name
        .to_str()
        .ok()
        .and_then(|name| name.strip_suffix(".jsonl"))
        .is_none()
    {
        return Ok(None);
    }
    match dir::stat(dir, &name) {
        Ok(Some((len, mtime_ns))) => Ok(Some((name, len, mtime_ns))),
        Ok(None) => Ok(None),
        Err(_) => Err(name),
    }
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

/// A log read without an index: opened when the directory says it is a
/// regular file (`stat`ed first when the directory does not say), its
/// size and mtime taken from the open file, and summarized. `None` as for
/// [`stat_log`].
fn read_log(
    dir: &Dir,
    name: CString,
    kind: Kind,
    buffer: &mut Vec<u8>,
) -> Option<(Found, Summary)> {
    name.to_str().ok()?.strip_suffix(".jsonl")?;
    match kind {
        Kind::Regular => {}
        // Never opened before it is known to be a regular file (a device
        // named like a log would be opened for nothing, or worse).
        Kind::Unknown => match stat_log(dir, name.clone()) {
            Ok(Some(_)) => {}
            Ok(None) => return None,
            Err(name) => return Some(((name, 0, 0), Err("cannot stat it".to_owned()))),
        },
        _ => return None,
    }
    let file = match dir::open_log(dir, &name) {
        Ok(file) => file,
        // Gone since the directory was read, or a link: not a log.
        Err(err) if dir::is_gone(&err) => return None,
        Err(err) => return Some(((name, 0, 0), Err(err.to_string()))),
    };
    let (len, mtime_ns) = dir::regular(&file)?;
    let summary = summarize(file, len, buffer);
    Some(((name, len, mtime_ns), summary))
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
/// there (the first prompt's, then the model's when it wrote one, during
/// the first turn or after it). `buffer` is reused from log to log.
fn summarize(mut file: std::fs::File, len: u64, buffer: &mut Vec<u8>) -> Summary {
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
    // Lines found with memchr: a 64 KiB reply is skipped at its speed.
    let text = &buffer[..read];
    let mut start = 0;
    let mut lines = memchr::memchr_iter(b'\n', text)
        .map(|end| end + 1)
        .chain(std::iter::once(text.len() + 1))
        .map(|next| {
            let line = &text[start..next - 1];
            start = next;
            line
        });
    let header: SessionHeader = serde_json::from_slice(lines.next().unwrap_or_default())
        .map_err(|err| format!("bad header: {err}"))?;
    let mut found = None;
    for line in lines {
        // A line whose type its first bytes name (dsh writes seq, time,
        // type, then the data) is not searched unless it is a title.
        if leading_type(line).is_some_and(|kind| kind != b"session/title") {
            continue;
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
mod tests;
