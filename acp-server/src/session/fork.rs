//! A fork's log: a new session whose history is another's up to its last
//! completed turn. The parent's log is only read, a line at a time, twice
//! (where its last `turn/end` is, then the copy); the fork's log is a new
//! header that names the parent and the seq it took, then the parent's
//! lines up to there **as they are** — seqs included, so every reference
//! between events (a compaction's range) holds — except that titles say
//! "<parent's> (fork)", settings changed since that turn come along, and,
//! when the fork is in another workspace, the parent's mode and standing
//! permission rules stay behind. Checkpoints are
//! copied but their saved contents stay with the parent: `/undo` in the
//! fork reaches only its own turns. A fork that fails half-way is removed.

use std::io::{BufRead, BufReader, Read, Seek};
use std::path::Path;

use dsh_protocol::log::{Event, EventData, ForkOrigin, SessionHeader};
use dsh_protocol::SessionId;
use serde::Deserialize;

use super::Session;
use crate::error::AgentError;
use crate::store::SessionStore;

/// The parent's log: its file and how much of it to read (a live log as
/// far as its writer has written).
pub(crate) struct Source<'a> {
    /// The log.
    pub path: &'a Path,
    /// Bytes to read at most.
    pub limit: u64,
}

/// What a line's head says.
#[derive(Deserialize)]
struct Head {
    seq: u64,
    #[serde(rename = "type")]
    kind: String,
}

/// Writes a fork of `parent` from `source` with `header`'s id, cwd, roots
/// and MCP servers. Blocking. The fork's id.
///
/// # Errors
/// The parent's log cannot be read, or the fork's cannot be written.
pub(crate) fn write(
    store: &SessionStore,
    parent: &SessionId,
    source: &Source<'_>,
    mut header: SessionHeader,
) -> Result<SessionId, AgentError> {
    let read_error = |err: std::io::Error| {
        AgentError::Internal(format!("cannot read {}: {err}", source.path.display()))
    };
    let file = std::fs::File::open(source.path).map_err(read_error)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file.take(source.limit));
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).map_err(read_error)?;
    let parent_header: SessionHeader = serde_json::from_slice(&line)
        .map_err(|err| AgentError::Internal(format!("the parent's header: {err}")))?;
    let start = line.len() as u64;
    let same_workspace = parent_header.cwd == header.cwd && parent_header.roots == header.roots;
    // Where the last completed turn ends, and the settings changed since
    // (they are the parent's current ones: they come along).
    let (mut end, mut seq, mut at) = (start, 0, start);
    let mut since: Vec<(u64, Vec<u8>)> = Vec::new();
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(read_error)?;
        if read == 0 || !line.ends_with(b"\n") {
            break;
        }
        at += read as u64;
        if let Ok(head) = serde_json::from_slice::<Head>(&line) {
            if head.kind == "turn/end" {
                (end, seq) = (at, head.seq);
                since.clear();
            } else if head.kind == "session/config" {
                since.push((head.seq, line.clone()));
            }
        }
    }
    header.forked_from = Some(ForkOrigin {
        session: parent.clone(),
        seq,
    });
    let mut log = store.create(&header)?;
    let path = log.path().to_path_buf();
    let copied = (|| {
        let mut reader = reader.into_inner().into_inner();
        reader
            .seek(std::io::SeekFrom::Start(start))
            .map_err(read_error)?;
        let mut reader = BufReader::with_capacity(64 * 1024, reader.take(end - start));
        let mut since = since.into_iter();
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line).map_err(read_error)? == 0 {
                let Some((_, setting)) = since.next() else {
                    return Ok(());
                };
                line = setting;
            }
            // Only lines that are events (a garbled one is left behind, as
            // a reader of the parent skips or refuses it), read once.
            let Ok(mut event) = Event::from_json(&line) else {
                continue;
            };
            let seq = event.seq;
            match &mut event.data {
                EventData::Title { title, .. } => {
                    title.push_str(" (fork)");
                    let mut retitled = serde_json::to_vec(&event)
                        .map_err(|err| AgentError::Internal(err.to_string()))?;
                    retitled.push(b'\n');
                    log.append_line(&retitled, seq)?;
                }
                // What the user allowed in the parent's workspace.
                EventData::PermissionRule(_) if !same_workspace => {}
                EventData::Config { key, .. }
                    if !same_workspace && *key == dsh_protocol::log::ConfigKey::Mode => {}
                _ => log.append_line(&line, seq)?,
            }
        }
    })();
    match copied {
        Ok(()) => {
            log.sync();
            Ok(header.id)
        }
        Err(error) => {
            drop(log);
            let _ = std::fs::remove_file(&path);
            Err(error)
        }
    }
}

impl Session {
    /// Forks this live session into `header`'s (blocking): its log as far
    /// as written now.
    ///
    /// # Errors
    /// The session is closed, its log cannot be read, or the fork's cannot
    /// be written.
    pub(crate) fn fork_into(&self, header: SessionHeader) -> Result<SessionId, AgentError> {
        let limit = self
            .locked()
            .log
            .as_ref()
            .map(crate::store::LogWriter::written)
            .ok_or_else(|| AgentError::SessionClosed(self.id.to_string()))?;
        let path = self.store.path(self.id.as_str())?;
        write(
            &self.store,
            &self.id,
            &Source { path: &path, limit },
            header,
        )
    }

    /// `/fork`: this session forked in its own workspace, with its MCP
    /// servers.
    ///
    /// # Errors
    /// As [`Self::fork_into`].
    pub(crate) fn fork(&self) -> Result<SessionId, AgentError> {
        let mut header = super::new_header(self.header.cwd.clone(), self.header.roots.clone());
        header.mcp_servers = self.header.mcp_servers.clone();
        self.fork_into(header)
    }
}
