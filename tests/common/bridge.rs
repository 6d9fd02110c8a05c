//! The bridge as the language-server tests build it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_lsp_bridge::{Bridge, BridgeSettings};

/// A bridge that trusts every server (the tests configure them) and starts
/// them as dsh does.
pub fn new_bridge(settings: BridgeSettings, roots: Vec<PathBuf>) -> Arc<Bridge> {
    Bridge::new(
        settings,
        roots,
        dsh_process::Spawner::default(),
        Arc::new(|_: &Path| true),
    )
}
