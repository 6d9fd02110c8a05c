//! MCP servers from `config.toml` (`[mcp_servers.<name>]`): configured
//! once for every front end — the editors', `dsh run`'s and `dsh sdk`'s
//! sessions — and merged with the servers a client passes (the client's
//! win on a name clash). `${VAR}` in an `env` or `headers` value is taken
//! from dsh's environment when the configuration is read; a variable that
//! is not set keeps that one server from starting, with a notice naming
//! the variable (never a value).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::{McpServerConfig, McpTransport};
use crate::credentials::Env;

/// One `[mcp_servers.<name>]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMcpServer {
    /// Program of a stdio server.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment for it (over the scrubbed one every child gets);
    /// values may name variables of dsh's as `${VAR}`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory (absolute; default: `$DSH_HOME`, never the
    /// session's workspace).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Endpoint of a Streamable HTTP server.
    #[serde(default)]
    pub url: Option<String>,
    /// Headers for it; values may name variables as `${VAR}`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `false` switches the server off.
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// The configured servers, ready to start (or why one cannot).
#[derive(Debug, Clone, Default)]
pub struct ConfiguredServers {
    servers: Vec<(String, Result<McpServerConfig, String>)>,
}

impl ConfiguredServers {
    /// From the config file's tables, with `${VAR}` taken from `env`.
    ///
    /// # Errors
    /// A table that is neither a stdio server (`command`) nor an HTTP one
    /// (`url`), or is both, or has fields of the other kind.
    pub fn from_raw(
        raw: BTreeMap<String, RawMcpServer>,
        home: &std::path::Path,
        env: &dyn Env,
    ) -> Result<ConfiguredServers, String> {
        let mut servers = Vec::new();
        for (name, server) in raw {
            if !server.enabled {
                continue;
            }
            let expand =
                |pairs: &BTreeMap<String, String>| -> Result<Vec<(String, String)>, String> {
                    pairs
                        .iter()
                        .map(|(key, value)| {
                            expand(value, env)
                                .map(|value| (key.clone(), value))
                                .map_err(|why| format!("{key}: {why}"))
                        })
                        .collect()
                };
            let transport = match (server.command, server.url) {
                (Some(command), None) => {
                    // Never a program of the workspace the session opens.
                    if command.contains('/') && !std::path::Path::new(&command).is_absolute() {
                        return Err(format!("[mcp_servers.{name}]: `command` is a relative path; give a program name (found on PATH) or an absolute path"));
                    }
                    if server.cwd.as_ref().is_some_and(|cwd| !cwd.is_absolute()) {
                        return Err(format!("[mcp_servers.{name}]: `cwd` must be an absolute path"));
                    }
                    if !server.headers.is_empty() {
                        return Err(format!("[mcp_servers.{name}]: `headers` is for HTTP servers (`url`), not stdio ones (`command`)"));
                    }
                    expand(&server.env).map(|env| McpTransport::Stdio {
                        command,
                        args: server.args,
                        env,
                        // Not the session's workspace by default: a
                        // launcher (npx, python -m) would run its code.
                        cwd: Some(server.cwd.unwrap_or_else(|| home.to_path_buf())),
                    })
                }
                (None, Some(url)) => {
                    if !server.env.is_empty() || !server.args.is_empty() || server.cwd.is_some() {
                        return Err(format!("[mcp_servers.{name}]: `args`, `env` and `cwd` are for stdio servers (`command`), not HTTP ones (`url`)"));
                    }
                    expand(&server.headers).map(|headers| McpTransport::Http { url, headers })
                }
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "[mcp_servers.{name}] has both `command` and `url`; give one"
                    ))
                }
                (None, None) => {
                    return Err(format!(
                        "[mcp_servers.{name}] needs `command` (a stdio server) or `url` (Streamable HTTP)"
                    ))
                }
            };
            let server = transport
                .map(|transport| McpServerConfig {
                    name: name.clone(),
                    transport,
                })
                .map_err(|missing| {
                    format!("MCP server {name} from config.toml was not started: {missing}")
                });
            servers.push((name, server));
        }
        Ok(ConfiguredServers { servers })
    }

    /// The servers a session starts: the configured ones whose name the
    /// client did not use, then the client's; and one notice per configured
    /// server that cannot start.
    pub fn merged(&self, client: Vec<McpServerConfig>) -> (Vec<McpServerConfig>, Vec<String>) {
        let mut notices = Vec::new();
        let mut servers = Vec::new();
        for (name, server) in &self.servers {
            if client.iter().any(|given| &given.name == name) {
                continue;
            }
            match server {
                Ok(server) => servers.push(server.clone()),
                Err(notice) => notices.push(notice.clone()),
            }
        }
        servers.extend(client);
        (servers, notices)
    }
}

/// `value` with each `${VAR}` replaced by the variable's value.
///
/// # Errors
/// A variable that is not set (named), or a `${` without its `}`.
fn expand(value: &str, env: &dyn Env) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| "a `${` without its `}`".to_owned())?;
        let name = &after[..end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err("a `${…}` that is not a variable name".to_owned());
        }
        let found = env
            .var(name)
            .ok_or_else(|| format!("the environment variable {name} is not set"))?;
        out.push_str(&found);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Vars;
    impl Env for Vars {
        fn var(&self, name: &str) -> Option<String> {
            (name == "TOKEN").then(|| "s3cret".to_owned())
        }
    }

    fn parse(text: &str) -> Result<ConfiguredServers, String> {
        #[derive(Deserialize)]
        struct File {
            mcp_servers: BTreeMap<String, RawMcpServer>,
        }
        let file: File = toml::from_str(text).map_err(|err| err.to_string())?;
        ConfiguredServers::from_raw(file.mcp_servers, std::path::Path::new("/dsh-home"), &Vars)
    }

    fn stdio(name: &str) -> McpServerConfig {
        McpServerConfig {
            name: name.to_owned(),
            transport: McpTransport::Stdio {
                command: "editor-given".to_owned(),
                args: Vec::new(),
                env: Vec::new(),
                cwd: None,
            },
        }
    }

    #[test]
    fn servers_from_the_config_merge_with_the_clients() {
        let configured = parse(
            r#"
            [mcp_servers.db]
            command = "db-mcp"
            args = ["--ro"]
            env = { DB_TOKEN = "${TOKEN}" }
            [mcp_servers.docs]
            url = "https://docs.example/mcp"
            headers = { Authorization = "Bearer ${TOKEN}" }
            [mcp_servers.off]
            command = "never"
            enabled = false
            [mcp_servers.broken]
            url = "https://x.example/mcp"
            headers = { Authorization = "Bearer ${MISSING}" }
            "#,
        )
        .unwrap();
        let (servers, notices) = configured.merged(vec![stdio("docs")]);
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        // The editor's "docs" wins; "off" is off; "broken" says why.
        assert_eq!(names, ["db", "docs"]);
        assert!(
            matches!(&servers[1].transport, McpTransport::Stdio { command, .. } if command == "editor-given")
        );
        assert!(
            matches!(&servers[0].transport, McpTransport::Stdio { env, .. } if env == &[("DB_TOKEN".to_owned(), "s3cret".to_owned())])
        );
        assert_eq!(notices.len(), 1);
        assert!(
            notices[0].contains("MISSING") && !notices[0].contains("s3cret"),
            "{notices:?}"
        );
        assert!(
            matches!(&servers[0].transport, McpTransport::Stdio { cwd: Some(cwd), .. } if cwd == std::path::Path::new("/dsh-home")),
            "a configured server starts in $DSH_HOME, not the workspace"
        );
        // A broken value is reported by its key, never shown.
        let leaky = parse(
            "[mcp_servers.x]\nurl = \"http://h\"\nheaders = { Authorization = \"Bearer sk-123${\" }",
        )
        .unwrap();
        let (_, notices) = leaky.merged(Vec::new());
        assert!(
            notices[0].contains("Authorization") && !notices[0].contains("sk-123"),
            "{notices:?}"
        );
        let (servers, _) = configured.merged(Vec::new());
        assert!(
            matches!(&servers[1].transport, McpTransport::Http { headers, .. } if headers[0].1 == "Bearer s3cret")
        );
    }

    #[test]
    fn a_table_must_be_one_kind_of_server() {
        for bad in [
            "[mcp_servers.x]\nargs = [\"a\"]",
            "[mcp_servers.x]\ncommand = \"a\"\nurl = \"http://b\"",
            "[mcp_servers.x]\ncommand = \"a\"\nheaders = { A = \"b\" }",
            "[mcp_servers.x]\nurl = \"http://b\"\ncwd = \"/tmp\"",
            "[mcp_servers.x]\ncommand = \"a\"\nshell = true",
            "[mcp_servers.x]\ncommand = \"./server\"",
            "[mcp_servers.x]\ncommand = \"a\"\ncwd = \"rel\"",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
