//! What the bridge tests share: the bridge as they build it and the fixture
//! server (the `/proc` process finder is `dsh_test_support::procs`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

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

/// The deterministic test server (`fixtures/test-lsp`), built on first use
/// (a no-op when `.ci/run` built it), next to this test binary's target
/// directory.
pub fn test_server() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            // The same selection as .ci/run's pre-build, so features unify
            // alike and nothing is rebuilt there.
            let status = std::process::Command::new(cargo)
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "dsh-test-lsp",
                    "-p",
                    "dsh-test-mcp",
                ])
                .current_dir(workspace)
                .status()
                .expect("run cargo build for the test server");
            assert!(status.success(), "building dsh-test-lsp failed");
            let target = std::env::current_exe()
                .unwrap()
                .parent()
                .and_then(Path::parent)
                .unwrap()
                .to_path_buf();
            let server = target.join("dsh-test-lsp");
            assert!(server.exists(), "{} missing after build", server.display());
            server
        })
        .clone()
}

/// A fixture workspace (`fixtures/workspaces/<name>`).
pub fn fixture_workspace(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/workspaces")
        .join(name)
}
