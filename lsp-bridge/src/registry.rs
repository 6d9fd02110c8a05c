//! Which language server handles which files. A built-in registry of common
//! servers, overridden or extended by configuration; candidates are found on
//! `PATH` (with `which`), else in the project's `node_modules/.bin`,
//! `.venv/bin` or `venv/bin` — files from the workspace, which the bridge
//! starts only when its owner trusts them — and each is verified by running
//! it with `--version` under a timeout, so a stub (like a rustup proxy
//! without its component) never counts. Nothing is ever downloaded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// One language server, as configured.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// Name (also the key for overrides).
    pub name: String,
    /// Program to run (a name looked up on PATH, or a path).
    pub command: String,
    /// Arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment (over a copy of dsh's with secrets removed).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// File extension → LSP language id.
    #[serde(default)]
    pub extensions: BTreeMap<String, String>,
    /// Files that mark a project root.
    #[serde(default)]
    pub root_markers: Vec<String>,
    /// `initializationOptions`.
    #[serde(default)]
    pub initialization_options: Option<serde_json::Value>,
    /// Answers for `workspace/configuration`, by section.
    #[serde(default)]
    pub settings: Option<serde_json::Value>,
    /// Set to true to turn a built-in server off.
    #[serde(default)]
    pub disabled: bool,
    /// Arguments that make the program print its version and exit 0
    /// (default `--version`). An empty list skips the check (for servers
    /// with no version flag; the `initialize` handshake then verifies them).
    #[serde(default)]
    pub version_args: Option<Vec<String>>,
}

fn spec(
    name: &str,
    command: &str,
    args: &[&str],
    extensions: &[(&str, &str)],
    markers: &[&str],
) -> ServerSpec {
    ServerSpec {
        name: name.to_owned(),
        command: command.to_owned(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: BTreeMap::new(),
        extensions: extensions
            .iter()
            .map(|(e, l)| (e.to_string(), l.to_string()))
            .collect(),
        root_markers: markers.iter().map(|s| s.to_string()).collect(),
        initialization_options: None,
        settings: None,
        disabled: false,
        version_args: None,
    }
}

/// The built-in registry, in preference order (the first usable server for
/// an extension wins).
pub fn builtin() -> Vec<ServerSpec> {
    let ts = [
        ("ts", "typescript"),
        ("tsx", "typescriptreact"),
        ("js", "javascript"),
        ("jsx", "javascriptreact"),
        ("mjs", "javascript"),
        ("cjs", "javascript"),
        ("mts", "typescript"),
        ("cts", "typescript"),
    ];
    let ts_markers = ["tsconfig.json", "jsconfig.json", "package.json"];
    let py = [("py", "python"), ("pyi", "python")];
    let py_markers = [
        "pyproject.toml",
        "pyrightconfig.json",
        "setup.py",
        "setup.cfg",
        "requirements.txt",
    ];
    let c = [
        ("c", "c"),
        ("h", "c"),
        ("cc", "cpp"),
        ("cpp", "cpp"),
        ("cxx", "cpp"),
        ("hpp", "cpp"),
        ("hh", "cpp"),
        ("hxx", "cpp"),
    ];
    let mut tls = spec(
        "typescript-language-server",
        "typescript-language-server",
        &["--stdio"],
        &ts,
        &ts_markers,
    );
    // The syntax server answers wrongly while the project loads; never use it.
    tls.initialization_options =
        Some(serde_json::json!({ "tsserver": { "useSyntaxServer": "never" } }));
    let mut tsc = spec("tsc-lsp", "tsc", &["--lsp", "--stdio"], &ts, &ts_markers);
    tsc.version_args = Some(vec!["--version".into()]);
    // pyright's language servers have no version flag.
    let mut pyright = spec(
        "pyright",
        "pyright-langserver",
        &["--stdio"],
        &py,
        &py_markers,
    );
    pyright.version_args = Some(Vec::new());
    let mut basedpyright = spec(
        "basedpyright",
        "basedpyright-langserver",
        &["--stdio"],
        &py,
        &py_markers,
    );
    basedpyright.version_args = Some(Vec::new());
    vec![
        spec(
            "rust-analyzer",
            "rust-analyzer",
            &[],
            &[("rs", "rust")],
            &["Cargo.toml"],
        ),
        pyright,
        basedpyright,
        tls,
        tsc,
        spec(
            "clangd",
            "clangd",
            &[],
            &c,
            &[
                "compile_commands.json",
                "compile_flags.txt",
                ".clangd",
                "CMakeLists.txt",
            ],
        ),
        spec(
            "gopls",
            "gopls",
            &[],
            &[("go", "go")],
            &["go.work", "go.mod"],
        ),
        spec("pylsp", "pylsp", &[], &py, &py_markers),
        spec(
            "bash-language-server",
            "bash-language-server",
            &["start"],
            &[("sh", "shellscript"), ("bash", "shellscript")],
            &[],
        ),
    ]
}

/// Merges configuration over the built-in list: an entry with a built-in's
/// name replaces it, others are added first (so they win).
pub fn merge(builtin: Vec<ServerSpec>, configured: &[ServerSpec]) -> Vec<ServerSpec> {
    let mut merged: Vec<ServerSpec> = configured.to_vec();
    for spec in builtin {
        if !configured.iter().any(|c| c.name == spec.name) {
            merged.push(spec);
        }
    }
    merged.retain(|spec| !spec.disabled);
    merged
}

/// A server found and verified.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The spec.
    pub spec: ServerSpec,
    /// The program that passed the version check.
    pub program: PathBuf,
    /// It was found inside the workspace (a program the repository's
    /// authors control): it runs in the session's sandbox.
    pub in_workspace: bool,
}

/// The extension (or file name) a file is matched by.
pub fn file_type(file: &Path) -> String {
    file.extension()
        .or_else(|| file.file_name())
        .map(|s| s.to_string_lossy().to_lowercase())
        .unwrap_or_default()
}

/// A program found for a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// Where it is.
    pub program: PathBuf,
    /// True when it lies inside the session's roots (a project-local bin,
    /// or a PATH entry that points into the workspace): a file from the
    /// workspace, which dsh runs only with the user's permission.
    pub in_workspace: bool,
}

/// Where project-local servers are looked for, under the project root.
pub const LOCAL_BIN_DIRS: &[&str] = &["node_modules/.bin", ".venv/bin", "venv/bin"];

/// Finds the program for a spec: an explicit path from the configuration
/// as is (the configuration is the user's); otherwise PATH first, then the
/// project's `node_modules/.bin`, `.venv/bin` and `venv/bin`. Nothing is
/// run here.
pub fn locate(
    spec: &ServerSpec,
    project_root: &Path,
    session_roots: &[PathBuf],
) -> Option<Located> {
    let command = Path::new(&spec.command);
    if command.components().count() > 1 {
        return command.is_file().then(|| Located {
            program: command.to_path_buf(),
            in_workspace: false,
        });
    }
    let inside = |program: &Path| {
        let canonical = dunce::canonicalize(program).unwrap_or_else(|_| program.to_path_buf());
        session_roots.iter().any(|root| canonical.starts_with(root))
    };
    if let Ok(program) = which::which(&spec.command) {
        let in_workspace = inside(&program);
        return Some(Located {
            program,
            in_workspace,
        });
    }
    LOCAL_BIN_DIRS.iter().find_map(|local| {
        let candidate = project_root.join(local).join(&spec.command);
        candidate.is_file().then_some(Located {
            in_workspace: true,
            program: candidate,
        })
    })
}

/// A command for `program args…`: under the command guard in `sandbox`
/// when given (a server from the workspace), else as every child of dsh.
///
/// # Errors
/// A sandbox was asked for and cannot be applied (no command guard).
pub fn launch(
    spawner: &dsh_process::Spawner,
    program: &Path,
    args: &[String],
    sandbox: Option<&dsh_process::sandbox::Sandbox>,
) -> Result<tokio::process::Command, String> {
    match sandbox {
        Some(sandbox) => spawner.guarded(&program.to_string_lossy(), args, Some(sandbox)),
        None => {
            let mut command = spawner.command(program);
            command.args(args);
            Ok(command)
        }
    }
}

/// Runs `program --version` (or the spec's version args) with a timeout,
/// started like every child of dsh (scrubbed environment, own process
/// group); true when it exits successfully.
pub async fn verify(
    spec: &ServerSpec,
    program: &Path,
    spawner: &dsh_process::Spawner,
    sandbox: Option<&dsh_process::sandbox::Sandbox>,
) -> bool {
    let args = spec
        .version_args
        .clone()
        .unwrap_or_else(|| vec!["--version".to_owned()]);
    if args.is_empty() {
        return program.is_file();
    }
    let mut command = match launch(spawner, program, &args, sandbox) {
        Ok(command) => command,
        Err(err) => {
            tracing::debug!(server = %spec.name, %err, "cannot run language server");
            return false;
        }
    };
    command
        .envs(&spec.env)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let run = command.status();
    match tokio::time::timeout(Duration::from_secs(10), run).await {
        Ok(Ok(status)) => status.success(),
        Ok(Err(err)) => {
            tracing::debug!(server = %spec.name, %err, "cannot run language server");
            false
        }
        Err(_) => {
            tracing::debug!(server = %spec.name, "language server --version timed out");
            false
        }
    }
}
