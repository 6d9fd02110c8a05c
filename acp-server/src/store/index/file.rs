//! The index file (see the parent module): a first line naming the
//! format, a line with the stamp of the sessions directory the entries
//! were read under (`-` for none), then one line per log — tab-separated
//! and escaped (`\\`, `\t`, `\n`, `\r`): id, size, mtime (ns), parent
//! (`-` none, `^` and the session a subagent's log belongs to), cwd, title
//! (`-` none, `+` and the title), then the extra roots. Read in a pass over
//! its bytes, without a JSON parser (a JSON index of 10,000 sessions took
//! longer to parse than the directory took to `stat`).

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use super::{ById, Entries, Entry, Stamp};

/// The first line of the index file.
const MAGIC: &str = "dsh-session-index\t4";

/// The index file's text.
pub(super) fn write(entries: &Entries) -> String {
    let mut text = String::with_capacity(entries.by_id.len() * 120 + 64);
    text.push_str(MAGIC);
    text.push('\n');
    match entries.stamp {
        Some((ino, ctime_ns)) => {
            text.push_str(&ino.to_string());
            text.push('\t');
            text.push_str(&ctime_ns.to_string());
        }
        None => text.push('-'),
    }
    text.push('\n');
    for (id, entry) in &entries.by_id {
        write_line(&mut text, id, entry);
    }
    text
}

/// The stamp an index file was saved with: `None` when it has none or is
/// not an index.
pub(super) fn saved_stamp(text: &str) -> Option<Stamp> {
    let mut lines = text.splitn(3, '\n');
    if lines.next()? != MAGIC {
        return None;
    }
    parse_stamp(lines.next()?)
}

fn parse_stamp(line: &str) -> Option<Stamp> {
    let (ino, ctime_ns) = line.split_once('\t')?;
    Some((ino.parse().ok()?, ctime_ns.parse().ok()?))
}

/// An index file read back; `None` when it is not one. A line that cannot
/// be read is left out and the stamp dropped with it, so the next listing
/// `stat`s every log and reads that one again. (Read on one thread: with
/// one malloc arena, two threads allocating the entries were slower.)
pub(super) fn read(text: &str) -> Option<Entries> {
    let (magic, rest) = text.split_once('\n')?;
    if magic != MAGIC {
        return None;
    }
    let (stamp, lines) = rest.split_once('\n').unwrap_or((rest, ""));
    let mut stamp = parse_stamp(stamp);
    let mut by_id = ById::with_capacity_and_hasher(lines.len() / 80, Default::default());
    let mut shared = Shared::default();
    for line in lines.split_terminator('\n').filter(|line| !line.is_empty()) {
        match parse_line(line, &mut shared) {
            Some((id, entry)) => {
                by_id.insert(id, entry);
            }
            None => {
                tracing::debug!("a session index line is unreadable; its log will be read");
                stamp = None;
            }
        }
    }
    Some(Entries {
        by_id,
        stamp,
        ..Entries::default()
    })
}

/// One index line (see the module docs).
pub(super) fn write_line(text: &mut String, id: &str, entry: &Entry) {
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
pub(super) struct Shared {
    cwds: HashSet<Arc<str>>,
    /// The last cwd (neighbouring lines often share theirs).
    last: Option<Arc<str>>,
    no_roots: Option<Arc<[String]>>,
}

impl Shared {
    pub(super) fn cwd(&mut self, cwd: &str) -> Arc<str> {
        if let Some(last) = self.last.as_ref().filter(|last| ***last == *cwd) {
            return last.clone();
        }
        let shared = match self.cwds.get(cwd) {
            Some(shared) => shared.clone(),
            None => {
                let shared: Arc<str> = Arc::from(cwd);
                self.cwds.insert(shared.clone());
                shared
            }
        };
        self.last = Some(shared.clone());
        shared
    }

    pub(super) fn roots(&mut self, roots: Vec<String>) -> Arc<[String]> {
        if roots.is_empty() {
            self.no_roots
                .get_or_insert_with(|| Arc::from(Vec::new()))
                .clone()
        } else {
            roots.into()
        }
    }
}

/// An index line read back; `None` when it is not one.
pub(super) fn parse_line(line: &str, shared: &mut Shared) -> Option<(Arc<str>, Entry)> {
    let mut fields = Fields(Some(line));
    let id: Arc<str> = Arc::from(&*unescape(fields.next()?)?);
    let len = fields.next()?.parse().ok()?;
    // Nanoseconds since 1970 fit in 64 bits until 2554 (and parse faster).
    let mtime_ns = fields.next()?;
    let mtime_ns = match mtime_ns.parse::<u64>() {
        Ok(mtime_ns) => u128::from(mtime_ns),
        Err(_) => mtime_ns.parse().ok()?,
    };
    let parent = match fields.next()? {
        "-" => None,
        parent => Some(Arc::from(&*unescape(parent.strip_prefix('^')?)?)),
    };
    let cwd = shared.cwd(&unescape(fields.next()?)?);
    let title = match fields.next()? {
        "-" => None,
        title => Some(Arc::from(&*unescape(title.strip_prefix('+')?)?)),
    };
    let roots = match fields.0 {
        None => shared.roots(Vec::new()),
        Some(_) => shared.roots(
            fields
                .map(|root| unescape(root).map(Cow::into_owned))
                .collect::<Option<Vec<String>>>()?,
        ),
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

/// A line's tab-separated fields (tabs found with memchr).
struct Fields<'a>(Option<&'a str>);

impl<'a> Iterator for Fields<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = self.0?;
        match memchr::memchr(b'\t', rest.as_bytes()) {
            Some(at) => {
                self.0 = Some(&rest[at + 1..]);
                Some(&rest[..at])
            }
            None => {
                self.0 = None;
                Some(rest)
            }
        }
    }
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
    if memchr::memchr(b'\\', field.as_bytes()).is_none() {
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
