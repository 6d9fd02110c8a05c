//! Tests that cannot run here (no Neovim, an unbuilt extension, a missing
//! language server) skip visibly: a `SKIPPED: <test>: <reason>` line on
//! stderr (cargo shows it with `--nocapture`) and a line in
//! `target/test-skips.txt`, which `.ci/run` prints after the tests. Where a
//! run must not skip — `DSH_CI=1`, set by `.ci/run`, or the skip's own
//! variable (`DSH_REAL_LSP`, `DSH_EXAMPLES`, `DSH_VSCODE`, `DSH_NVIM`) — a
//! skip is a failure instead. `CI` (GitHub Actions and GitLab set it for
//! every job) means nothing here: `cargo test --workspace` in a CI job
//! without the editors installed skips, and says so.

use std::io::Write;
use std::path::PathBuf;

/// The file the skips are listed in (`CARGO_TARGET_DIR`, else the
/// workspace's `target/`).
pub fn skips_file() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("test-skips.txt")
}

/// Whether `.ci/run` (or whoever set `DSH_CI=1`) wants no skips at all.
pub fn must_not_skip() -> bool {
    std::env::var("DSH_CI").is_ok_and(|value| value == "1")
}

/// `test` cannot run here because of `reason`: says so and records it;
/// panics instead when skips are not allowed (`DSH_CI=1`, or `required`:
/// the skip's own variable asked for the test).
pub fn skip(test: &str, reason: &str, required: bool) {
    assert!(
        !(required || must_not_skip()),
        "{test} must run here (DSH_CI=1 or its own variable is set), but: {reason}"
    );
    note(test, reason);
}

/// A part of `test` that cannot run here and never has to (it needs root,
/// say): said and recorded like a skip, never a failure.
pub fn note(test: &str, reason: &str) {
    let line = format!("{test}: {reason}");
    let _ = writeln!(std::io::stderr(), "SKIPPED: {line}");
    let file = skips_file();
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // One short append per skip: lines from parallel tests do not mix.
    if let Ok(mut out) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
    {
        let _ = out.write_all(format!("{line}\n").as_bytes());
    }
}
