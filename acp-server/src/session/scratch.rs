//! For the crate's unit tests: a live session over a new log in a scratch
//! `$DSH_HOME` and workspace, with the replay provider configured.

use std::sync::Arc;

use dsh_protocol::log::SessionHeader;
use dsh_protocol::SessionId;
use tokio_util::sync::CancellationToken;

use super::state::SessionState;
use super::Session;
use crate::config::{Config, RawConfig};
use crate::model::ProviderKind;
use crate::store::{now_ms, SessionStore};

/// A session and the scratch directories it lives in (removed on drop).
pub(crate) struct Scratch {
    /// Kept for its lifetime (the scratch `$DSH_HOME`).
    pub(crate) _home: tempfile::TempDir,
    pub(crate) work: tempfile::TempDir,
    pub(crate) config: Arc<Config>,
    pub(crate) store: SessionStore,
    pub(crate) session: Arc<Session>,
}

/// No environment at all.
pub(crate) struct NoEnv;

impl crate::credentials::Env for NoEnv {
    fn var(&self, _name: &str) -> Option<String> {
        None
    }
}

impl Scratch {
    /// A new session; `config` is `config.toml`'s text, and `prepare` may
    /// put files in the workspace before the session opens.
    pub(crate) fn new(config: &str, prepare: impl FnOnce(&std::path::Path)) -> Scratch {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        prepare(work.path());
        let mut raw: RawConfig = toml::from_str(config).unwrap();
        raw.provider.kind = Some(ProviderKind::Replay);
        // No time context unless a test asks: it would change every prompt.
        if !config.contains("[time]") {
            raw.time.enabled = Some(false);
        }
        let config = Arc::new(Config::from_raw(raw, home.path().to_path_buf(), &NoEnv).unwrap());
        let store = SessionStore::new(config.sessions_dir());
        let cwd = dunce::canonicalize(work.path())
            .unwrap()
            .display()
            .to_string();
        let id = SessionId::new(uuid::Uuid::new_v4().to_string());
        let header = SessionHeader::new(id, now_ms(), cwd, Vec::new());
        let log = store.create(&header).unwrap();
        let session = Session::new(
            config.clone(),
            header,
            SessionState::new(&config.choices),
            log,
            &CancellationToken::new(),
            &crate::session::Residency::new(config.max_history_bytes),
        );
        Scratch {
            _home: home,
            work,
            config,
            store,
            session,
        }
    }
}
