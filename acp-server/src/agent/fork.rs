//! `session/fork`: a new session whose history is another's up to its
//! last completed turn ([`crate::session::fork`] writes its log). The
//! parent is only read: a live one as far as its log is written now.

use std::path::{Path, PathBuf};

use dsh_protocol::SessionId;

use super::{blocking, Agent, Opened};
use crate::error::AgentError;
use crate::mcp::McpServerConfig;

impl Agent {
    /// Forks `parent` into a new session in `cwd` (with `extra_roots` and
    /// `mcp`): its events up to the last `turn/end` (a turn still running
    /// is left out), then the title "<parent's title> (fork)".
    /// Checkpoints stay with the parent: `/undo` in the fork reaches only
    /// the fork's own turns.
    ///
    /// # Errors
    /// Unknown or unreadable parent, invalid cwd or roots, missing
    /// credential, unwritable store.
    pub async fn fork_session(
        &self,
        parent: &SessionId,
        cwd: &Path,
        extra_roots: &[PathBuf],
        mcp: Vec<McpServerConfig>,
    ) -> Result<Opened, AgentError> {
        let (cwd, roots) = self.workspace(cwd, extra_roots).await?;
        let mut header = crate::session::new_header(cwd, roots);
        header.mcp_servers = crate::mcp::recorded(&mcp);
        let live = self.live(parent);
        let (store, parent) = (self.store.clone(), parent.clone());
        let id = blocking(move || match live {
            Some(session) => session.fork_into(header),
            None => {
                let path = store.path(parent.as_str())?;
                if !path.is_file() {
                    return Err(AgentError::SessionNotFound(parent.to_string()));
                }
                let source = crate::session::fork::Source {
                    path: &path,
                    limit: u64::MAX,
                };
                crate::session::fork::write(&store, &parent, &source, header)
            }
        })
        .await?;
        // Opened as any stored session is: folded from its log (a fork that
        // cannot be opened is removed).
        let session = match self.open(&id, None).await {
            Ok(session) => session,
            Err(error) => {
                let store = self.store.clone();
                let _ = blocking(move || store.delete(id.as_str())).await;
                return Err(error);
            }
        };
        Ok(self.opened(session, mcp).await)
    }

    /// The working directory a session was started in (live or stored).
    ///
    /// # Errors
    /// Unknown or unreadable session.
    pub async fn stored_cwd(&self, id: &SessionId) -> Result<PathBuf, AgentError> {
        if let Some(session) = self.live(id) {
            return Ok(PathBuf::from(&session.header.cwd));
        }
        let (store, key) = (self.store.clone(), id.to_string());
        blocking(move || Ok(PathBuf::from(&store.read(&key, None)?.header.cwd))).await
    }
}
