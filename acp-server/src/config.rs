//! Configuration: `$DSH_HOME/config.toml` layered under environment
//! variables. Two stages, like ripgrep's: [`RawConfig`] is what serde reads,
//! [`Config`] is validated and complete.
//!
//! Each subsystem owns its settings type and receives only that (the model
//! client [`ModelSettings`], the sandbox [`crate::sandbox::SandboxSettings`],
//! a session's choices [`Choices`], ...): this module composes them and
//! nothing below it imports it back.
//!
//! The API key is never stored here: only the *name* of the variable that
//! holds it, resolved per request ([`crate::credentials::KeySource`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_protocol::model::{ModelInfo, ThoughtLevel};
use serde::Deserialize;

use crate::credentials::{Env, KeySource};
use crate::model::settings::{builtin_models, KeyPolicy, DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL};
use crate::model::{ModelSettings, ProviderKind, RetryPolicy};
use crate::settings::Choices;

/// Why there is no configuration. Its message names the file or the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Neither `DSH_HOME` nor `HOME` is set.
    #[error("cannot find a home for dsh state: set DSH_HOME or HOME")]
    NoHome,
    /// The file exists and cannot be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML for `RawConfig` (an unknown key, a wrong
    /// type).
    #[error("invalid config file {}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where and why.
        source: Box<toml::de::Error>,
    },
    /// A value is refused; the message names its key.
    #[error("{0}")]
    Invalid(String),
}

/// `config.toml` as written by the user. Every field is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Provider settings.
    #[serde(default)]
    pub provider: RawProvider,
    /// Model catalog; replaces the built-in one when present.
    #[serde(default)]
    pub models: Vec<ModelInfo>,
    /// Default model id.
    pub default_model: Option<String>,
    /// Default reasoning effort.
    pub default_thought_level: Option<ThoughtLevel>,
    /// Default permission mode (`read-only`, `ask`, `accept-edits`, `full-access`).
    pub default_mode: Option<String>,
    /// Session settings.
    #[serde(default)]
    pub session: RawSession,
    /// Session titles.
    #[serde(default)]
    pub titles: RawTitles,
    /// The model's questions to the user.
    #[serde(default)]
    pub questions: RawQuestions,
    /// Language servers.
    #[serde(default)]
    pub lsp: dsh_lsp_bridge::BridgeSettings,
    /// What children see of dsh's environment.
    #[serde(default)]
    pub env: RawEnv,
    /// Permission settings beyond the mode.
    #[serde(default)]
    pub permissions: RawPermissions,
    /// Workspace instructions (AGENTS.md).
    #[serde(default)]
    pub instructions: crate::context::instructions::InstructionSettings,
    /// Compaction of long conversations.
    #[serde(default)]
    pub compaction: crate::context::compaction::CompactionSettings,
    /// The kernel sandbox for commands.
    #[serde(default)]
    pub sandbox: crate::sandbox::SandboxSettings,
    /// Background jobs.
    #[serde(default)]
    pub jobs: crate::jobs::JobSettings,
    /// Subagents.
    #[serde(default)]
    pub subagents: crate::tools::SubagentSettings,
    /// Goals (`[goals]`).
    #[serde(default)]
    pub goals: crate::tools::GoalSettings,
    /// Which tools are offered and how (`[tools]`).
    #[serde(default)]
    pub tools: crate::tools::ToolSettings,
    /// What `/undo` keeps.
    #[serde(default)]
    pub checkpoints: crate::checkpoint::CheckpointSettings,
    /// `web_fetch` and `web_search`.
    #[serde(default)]
    pub web: crate::web::WebSettings,
    /// Where the API key may come from.
    #[serde(default)]
    pub credentials: crate::credentials::CredentialSettings,
    /// MCP servers every session starts (`[mcp_servers.<name>]`).
    #[serde(default)]
    pub mcp_servers: std::collections::BTreeMap<String, crate::mcp::RawMcpServer>,
    /// Hooks (`[hooks]`).
    #[serde(default)]
    pub hooks: crate::hooks::HookSettings,
    /// The time context (`[time]`).
    #[serde(default)]
    pub time: crate::context::time::TimeSettings,
}

/// `[env]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEnv {
    /// More name patterns (case-insensitive globs) of variables children
    /// must not see, on top of `dsh_process::DEFAULT_SECRET_PATTERNS`.
    #[serde(default)]
    pub scrub: Vec<String>,
    /// Variables (exact names) children see although the built-in scrub
    /// would remove them: chosen on purpose. Never the model key's.
    #[serde(default)]
    pub pass: Vec<String>,
}

/// `[permissions]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPermissions {
    /// More protected paths (globs), on top of `permission::protected::PROJECT`.
    #[serde(default)]
    pub protected_paths: Vec<String>,
}

/// `[provider]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProvider {
    /// Wire dialect.
    pub kind: Option<ProviderKind>,
    /// Base URL (`{base}/chat/completions`).
    pub base_url: Option<String>,
    /// Name of the environment variable that holds the key; `""`: the
    /// endpoint takes no key (none is looked up or sent).
    pub api_key_env: Option<String>,
    /// Script for the replay provider.
    pub replay_file: Option<PathBuf>,
    /// Idle timeout between stream reads.
    pub stream_idle_timeout_ms: Option<u64>,
    /// Timeout for connecting and receiving response headers.
    pub request_timeout_ms: Option<u64>,
    /// Retries before the first byte.
    pub max_retries: Option<u32>,
    /// First backoff delay.
    pub retry_initial_delay_ms: Option<u64>,
    /// Backoff cap; a longer `Retry-After` gives up.
    pub retry_max_delay_ms: Option<u64>,
    /// Send the session id as `x-deepseek-harness-session-id` (default
    /// true; the provider may use it for caching and support).
    pub session_header: Option<bool>,
}

/// `[session]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSession {
    /// Page size of `session/list`.
    pub list_page_size: Option<usize>,
    /// Model calls allowed in one turn.
    pub max_steps: Option<u64>,
    /// Largest accepted image, bytes.
    pub max_image_bytes: Option<usize>,
    /// Seconds a session may stay idle (no turn, no running job) before
    /// its derived model history is dropped from memory (rebuilt from the
    /// log when next needed); 0 = never. Default 60.
    pub idle_evict_s: Option<u64>,
    /// Bytes of model history all sessions of the process may hold in
    /// memory; past it, the least recently active ones leave (those
    /// nothing else holds first; rebuilt from the log when next read), 0 = no
    /// limit. Default 32 MiB.
    pub max_history_bytes: Option<u64>,
}

/// `[questions]`: the model's questions to the user.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQuestions {
    /// Timed questions: how long a call waits for the answers by default,
    /// seconds (the call may ask for 1 to 3600); unset: a call waits until
    /// answered.
    pub timeout_s: Option<u64>,
}

/// `[titles]`: session titles.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTitles {
    /// Ask the model for a title during the first turn (default: yes, but
    /// not with the replay provider).
    pub from_model: Option<bool>,
    /// The longest title accepted from the model, bytes (default 80).
    pub max_title_bytes: Option<usize>,
}

/// Validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `$DSH_HOME`.
    pub home: PathBuf,
    /// Timed questions' default wait, seconds (`[questions] timeout_s`).
    pub question_timeout: Option<u64>,
    /// MCP servers from the config file, for every session.
    pub mcp_servers: crate::mcp::ConfiguredServers,
    /// The model client's settings.
    pub model: Arc<ModelSettings>,
    /// The models, reasoning levels and modes a session can pick, and its
    /// defaults. For a served catalog ([`ModelSettings::served_catalog`])
    /// no model until [`Config::serving`] (the agent, before the first
    /// session), and `default_model` is the configured one or "".
    pub choices: Arc<Choices>,
    /// `session/list` page size.
    pub list_page_size: usize,
    /// Ask the model for a title during the first turn.
    pub model_titles: bool,
    /// The longest title accepted from the model, bytes.
    pub max_title_bytes: usize,
    /// Model calls per turn.
    pub max_steps: u64,
    /// Largest accepted image, bytes.
    pub max_image_bytes: usize,
    /// How long a session stays idle before its model history leaves
    /// memory (`None`: never).
    pub idle_evict: Option<Duration>,
    /// Bytes of model history the sessions may hold in memory (`None`: no
    /// limit).
    pub max_history_bytes: Option<u64>,
    /// Language servers.
    pub lsp: dsh_lsp_bridge::BridgeSettings,
    /// How children are started (environment scrubbing, command guard).
    pub spawner: dsh_process::Spawner,
    /// Paths whose change is always asked about, and `$DSH_HOME`.
    pub protected: crate::permission::Protected,
    /// Workspace instructions (AGENTS.md).
    pub instructions: crate::context::instructions::InstructionSettings,
    /// Compaction of long conversations.
    pub compaction: crate::context::compaction::CompactionSettings,
    /// The kernel sandbox for commands.
    pub sandbox: crate::sandbox::SandboxSettings,
    /// Background jobs.
    pub jobs: crate::jobs::JobSettings,
    /// Subagents (`[subagents]`).
    pub subagents: crate::tools::SubagentSettings,
    /// Goals (`[goals]`).
    pub goals: crate::tools::GoalSettings,
    /// Which tools are offered and how (`[tools]`).
    pub tools: crate::tools::ToolSettings,
    /// What `/undo` keeps.
    pub checkpoints: crate::checkpoint::CheckpointSettings,
    /// `web_fetch` and `web_search`.
    pub web: crate::web::WebSettings,
    /// Hooks: the settings and the user's hooks.
    pub hooks: crate::hooks::Hooks,
    /// The time context (`[time]`; `DSH_FAKE_NOW` fixes its clock).
    pub time: crate::context::time::Clock,
}

impl Config {
    /// Loads `$DSH_HOME/config.toml` (if present) and applies the environment.
    ///
    /// # Errors
    /// An unreadable or invalid config file, with its path in the message.
    pub fn load(env: &dyn Env) -> Result<Config, ConfigError> {
        let home = match env.var("DSH_HOME") {
            Some(home) => PathBuf::from(home),
            None => match crate::credentials::user_home(env) {
                Some(home) => home.join(".dsh"),
                None => return Err(ConfigError::NoHome),
            },
        };
        let path = home.join("config.toml");
        let raw = match std::fs::read_to_string(&path) {
            Ok(text) => {
                toml::from_str::<RawConfig>(&text).map_err(|source| ConfigError::Parse {
                    path: path.clone(),
                    source: Box::new(source),
                })?
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => RawConfig::default(),
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        Self::from_raw(raw, home, env)
    }

    /// Validates a raw config.
    ///
    /// # Errors
    /// A default model missing from the catalog, or an empty replay path.
    pub fn from_raw(raw: RawConfig, home: PathBuf, env: &dyn Env) -> Result<Config, ConfigError> {
        let (base_url, base_url_key) = match (env.var("DEEPSEEK_BASE_URL"), raw.provider.base_url) {
            (Some(url), _) => (url, "DEEPSEEK_BASE_URL"),
            (None, Some(url)) => (url, "[provider] base_url"),
            (None, None) => (DEFAULT_BASE_URL.to_owned(), "the default base URL"),
        };
        let base_url = base_url.trim().trim_end_matches('/').to_owned();
        let provider = match env.var("DSH_PROVIDER") {
            Some(kind) => match kind.as_str() {
                "deepseek" => ProviderKind::Deepseek,
                "openai" => ProviderKind::Openai,
                "replay" => ProviderKind::Replay,
                other => {
                    return Err(ConfigError::Invalid(format!(
                        "DSH_PROVIDER={other:?} is not one of deepseek, openai, replay"
                    )))
                }
            },
            // DeepSeek's dialect for its API, OpenAI's for any other.
            None => raw
                .provider
                .kind
                .unwrap_or_else(|| crate::model::settings::implied_kind(&base_url)),
        };
        if provider != ProviderKind::Replay {
            crate::model::settings::check_base_url(&base_url, base_url_key)
                .map_err(ConfigError::Invalid)?;
        }
        let replay_file = env
            .var("DSH_REPLAY_FILE")
            .map(PathBuf::from)
            .or(raw.provider.replay_file);
        // DeepSeek's prices are its models' defaults on its API only
        // (another endpoint serving a model of that name bills its own); a
        // model's own `pricing` wins.
        let deepseek = provider == ProviderKind::Deepseek;
        // An OpenAI-compatible endpoint without `[[models]]`: the catalog
        // is the model it serves, asked when a session is first opened
        // (`model::served`, `Config::serving`); DeepSeek's built-in
        // catalog means nothing to it.
        let served_catalog = raw.models.is_empty() && provider == ProviderKind::Openai;
        let models: Vec<ModelInfo> = if served_catalog {
            Vec::new()
        } else if raw.models.is_empty() {
            builtin_models()
                .into_iter()
                .map(|model| ModelInfo {
                    pricing: model.pricing.filter(|_| deepseek),
                    ..model
                })
                .collect()
        } else {
            raw.models
                .into_iter()
                .map(|model| ModelInfo {
                    pricing: model.pricing.or_else(|| {
                        deepseek
                            .then(|| crate::model::settings::deepseek_pricing(&model.id))
                            .flatten()
                    }),
                    ..model
                })
                .collect()
        };
        for model in &models {
            let Some(pricing) = &model.pricing else {
                continue;
            };
            let prices = [pricing.input, pricing.output]
                .into_iter()
                .chain(pricing.input_cache_hit);
            if prices
                .into_iter()
                .any(|price| !price.is_finite() || price < 0.0)
                || pricing.currency.trim().is_empty()
            {
                return Err(ConfigError::Invalid(format!(
                    "[models] {:?} pricing: prices are numbers of at least 0 per million tokens, and currency is not empty",
                    model.id
                )));
            }
        }
        // Served: checked against what the endpoint serves ("" picks its
        // only model).
        let default_model = match raw.default_model {
            Some(model) => model,
            None if served_catalog => String::new(),
            None => models[0].id.clone(),
        };
        if !served_catalog && !models.iter().any(|model| model.id == default_model) {
            return Err(ConfigError::Invalid(format!(
                "default_model {default_model:?} is not in the model catalog"
            )));
        }
        let default_mode = match raw.default_mode.as_deref() {
            None => dsh_protocol::Mode::Ask,
            Some(mode) => dsh_protocol::Mode::parse(mode).ok_or_else(|| {
                ConfigError::Invalid(format!(
                    "default_mode {mode:?} is not one of read-only, plan, ask, accept-edits, full-access"
                ))
            })?,
        };
        let ms = Duration::from_millis;
        let api_key_env = raw
            .provider
            .api_key_env
            .unwrap_or_else(|| DEFAULT_API_KEY_ENV.to_owned())
            .trim()
            .to_owned();
        // `api_key_env = ""`: the endpoint takes no key.
        let keyless = api_key_env.is_empty();
        let key_names: &[String] = if keyless {
            &[]
        } else {
            std::slice::from_ref(&api_key_env)
        };
        let env_policy = dsh_process::EnvPolicy::new(&raw.env.scrub, key_names)
            .map_err(|err| ConfigError::Invalid(format!("[env] scrub: {err}")))?
            .passing(&raw.env.pass);
        let protected = crate::permission::Protected::new(&raw.permissions.protected_paths, &home)
            .map_err(|err| ConfigError::Invalid(format!("[permissions] protected_paths: {err}")))?
            .reading(&raw.instructions)
            .hiding(raw.sandbox.hidden_paths(&home));
        raw.compaction.validate().map_err(ConfigError::Invalid)?;
        let mcp_servers = crate::mcp::ConfiguredServers::from_raw(raw.mcp_servers, &home, env)
            .map_err(ConfigError::Invalid)?;
        if raw.questions.timeout_s == Some(0) {
            return Err(ConfigError::Invalid(
                "[questions] timeout_s must be at least 1 (leave it out for questions that wait until answered)".to_owned(),
            ));
        }
        let hooks = crate::hooks::Hooks::load(raw.hooks, &home).map_err(ConfigError::Invalid)?;
        let fake_now = env.var("DSH_FAKE_NOW");
        let time = crate::context::time::Clock::new(&raw.time, fake_now.as_deref())
            .map_err(ConfigError::Invalid)?;
        raw.tools
            .repeat_reminder
            .validate()
            .map_err(ConfigError::Invalid)?;
        let tools = raw.tools.checked().map_err(ConfigError::Invalid)?;
        let web_tools = raw.web.fetch || raw.web.search.is_some();
        Ok(Config {
            hooks,
            time,
            question_timeout: raw.questions.timeout_s,
            mcp_servers,
            instructions: raw.instructions,
            compaction: raw.compaction,
            sandbox: raw.sandbox,
            jobs: raw.jobs,
            subagents: raw.subagents,
            goals: raw.goals.checked().map_err(ConfigError::Invalid)?,
            tools,
            checkpoints: raw.checkpoints,
            web: raw.web,
            model: Arc::new(ModelSettings {
                key_policy: KeyPolicy::of(provider, keyless, &base_url),
                provider,
                base_url,
                key: KeySource {
                    home: home.clone(),
                    name: api_key_env,
                    dotenv: raw.credentials.dotenv,
                },
                replay_file,
                stream_idle_timeout: ms(raw.provider.stream_idle_timeout_ms.unwrap_or(300_000)),
                request_timeout: ms(raw.provider.request_timeout_ms.unwrap_or(120_000)),
                retry: RetryPolicy {
                    max_retries: raw.provider.max_retries.unwrap_or(5),
                    initial_delay: ms(raw.provider.retry_initial_delay_ms.unwrap_or(500)),
                    max_delay: ms(raw.provider.retry_max_delay_ms.unwrap_or(10_000)),
                },
                session_header: raw.provider.session_header.unwrap_or(true),
                served_catalog,
            }),
            choices: Arc::new(Choices {
                models,
                default_model,
                default_thought_level: raw.default_thought_level.unwrap_or(ThoughtLevel::High),
                default_mode,
                web: web_tools,
            }),
            list_page_size: raw.session.list_page_size.unwrap_or(50).max(1),
            model_titles: raw
                .titles
                .from_model
                .unwrap_or(provider != ProviderKind::Replay),
            max_title_bytes: raw.titles.max_title_bytes.unwrap_or(80).max(8),
            max_steps: raw.session.max_steps.unwrap_or(100).max(1),
            max_image_bytes: raw.session.max_image_bytes.unwrap_or(20 * 1024 * 1024),
            idle_evict: match raw.session.idle_evict_s.unwrap_or(60) {
                0 => None,
                seconds => Some(Duration::from_secs(seconds)),
            },
            max_history_bytes: match raw.session.max_history_bytes.unwrap_or(32 << 20) {
                0 => None,
                bytes => Some(bytes),
            },
            lsp: raw.lsp,
            spawner: dsh_process::Spawner::new(env_policy),
            protected,
            home,
        })
    }

    /// This configuration with the catalog the endpoint serves
    /// ([`ModelSettings::served_catalog`]): `model`, the one
    /// [`crate::model::served::pick`] chose, and the default.
    pub fn serving(&self, model: ModelInfo) -> Config {
        let mut config = self.clone();
        config.choices = Arc::new(Choices {
            default_model: model.id.clone(),
            models: vec![model],
            ..(*self.choices).clone()
        });
        config
    }

    /// Runs shell commands under the command guard of this executable
    /// (dsh's own binary; see `dsh_process::guard`).
    pub fn with_command_guard(mut self, executable: PathBuf) -> Config {
        self.spawner = self.spawner.with_guard(executable);
        self
    }

    /// The optional tools sessions offer.
    pub fn offer(&self) -> crate::tools::Offer {
        crate::tools::Offer {
            jobs: self.jobs.enabled,
            web_fetch: self.web.fetch,
            web_search: self.web.search.is_some(),
            // Per session: a turn offers it once the catalog was given.
            skills: false,
            // Per session: it depends on how deep the session is.
            subagents: false,
            // Per session: it depends on the session's model.
            images: false,
            goals: self.goals.enabled,
            enabled: self.tools.enabled(),
            disabled: self.tools.disabled(),
        }
    }

    /// How commands are guarded besides the permission prompt.
    pub fn command_guard(&self) -> crate::sandbox::Guard {
        self.sandbox.guard(self.spawner.sandbox_support())
    }

    /// Where session logs live.
    pub fn sessions_dir(&self) -> PathBuf {
        self.home.join("sessions")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct MapEnv(HashMap<&'static str, &'static str>);
    impl Env for MapEnv {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|v| (*v).to_owned())
        }
    }

    #[test]
    fn env_overrides_file_and_defaults_hold() {
        let raw: RawConfig = toml::from_str(
            "[provider]\nkind = \"openai\"\nbase_url = \"http://file/\"\napi_key_env = \"MY_KEY\"\n",
        )
        .unwrap();
        let env = MapEnv(HashMap::from([("DEEPSEEK_BASE_URL", "http://env/v1/")]));
        let config = Config::from_raw(raw, "/h".into(), &env).unwrap();
        assert_eq!(config.model.base_url, "http://env/v1");
        assert_eq!(config.model.provider, ProviderKind::Openai);
        assert_eq!(config.model.key.name, "MY_KEY");
        // No `[[models]]` for an OpenAI-compatible endpoint: what it
        // serves, asked later; no default named.
        assert!(config.model.served_catalog);
        assert!(config.choices.models.is_empty());
        assert_eq!(config.choices.default_model, "");
        assert_eq!(config.model.retry.max_retries, 5);
        assert_eq!(config.choices.default_thought_level, ThoughtLevel::High);
        assert_eq!(config.idle_evict, Some(Duration::from_secs(60)));
    }

    /// Issue 38, item 1: a base URL alone implies the dialect, and an
    /// OpenAI-compatible endpoint without `[[models]]` gets the catalog it
    /// serves, never DeepSeek's.
    #[test]
    fn a_base_url_alone_implies_the_dialect_and_the_catalog() {
        let load = |text: &str, url: Option<&'static str>| {
            let raw: RawConfig = toml::from_str(text).unwrap();
            let env = MapEnv(
                url.map(|url| ("DEEPSEEK_BASE_URL", url))
                    .into_iter()
                    .collect(),
            );
            Config::from_raw(raw, "/h".into(), &env).unwrap()
        };
        let local = load("", Some("http://127.0.0.1:8080/v1"));
        assert_eq!(local.model.provider, ProviderKind::Openai);
        assert!(local.model.served_catalog && local.choices.models.is_empty());
        let served: ModelInfo = toml::from_str("id = \"qwen2.5-coder:32b\"").unwrap();
        let serving = local.serving(served);
        assert_eq!(serving.choices.default_model, "qwen2.5-coder:32b");
        assert_eq!(serving.choices.models.len(), 1);
        assert_eq!(serving.choices.models[0].max_tokens, None);
        // `default_model` is checked against what is served, later.
        let named = load(
            "default_model = \"llama3.2\"\n",
            Some("http://localhost:11434/v1"),
        );
        assert_eq!(named.choices.default_model, "llama3.2");
        let deepseek = load("", None);
        assert_eq!(deepseek.model.provider, ProviderKind::Deepseek);
        assert!(!deepseek.model.served_catalog);
        assert_eq!(deepseek.choices.default_model, "deepseek-v4-flash");
        let listed = load(
            "[[models]]\nid = \"qwen2.5-coder:32b\"\n",
            Some("http://127.0.0.1:8080/v1"),
        );
        assert_eq!(listed.model.provider, ProviderKind::Openai);
        assert!(!listed.model.served_catalog);
        assert_eq!(listed.choices.models[0].max_tokens, None);
        // A declared kind wins (a proxy of DeepSeek's API).
        let proxy = load(
            "[provider]\nkind = \"deepseek\"\n",
            Some("https://llm-proxy.example.com/v1"),
        );
        assert_eq!(proxy.model.provider, ProviderKind::Deepseek);
        assert_eq!(proxy.choices.default_model, "deepseek-v4-flash");
    }

    #[test]
    fn env_pass_lets_chosen_variables_through_but_never_the_key() {
        let raw: RawConfig = toml::from_str(
            "[env]\nscrub = [\"ACME_*\"]\npass = [\"SSH_AUTH_SOCK\", \"REDIS_URL\", \"DEEPSEEK_API_KEY\"]\n",
        )
        .unwrap();
        let config = Config::from_raw(raw, "/h".into(), &MapEnv(HashMap::new())).unwrap();
        let env = config.spawner.env();
        assert!(!env.is_secret("SSH_AUTH_SOCK"));
        assert!(!env.is_secret_variable("REDIS_URL", "redis://:pw@cache"));
        assert!(env.is_secret_variable("CACHE_URL", "redis://:pw@cache"));
        assert!(env.is_secret("DEEPSEEK_API_KEY"));
        assert!(env.is_secret("ACME_ID"));
        assert!(toml::from_str::<RawConfig>("[env]\npasss = []\n").is_err());
    }

    #[test]
    fn base_url_mistakes_name_their_key_and_keyless_is_declared() {
        let load = |text: &str, env: &[(&'static str, &'static str)]| {
            let raw: RawConfig = toml::from_str(text).unwrap();
            Config::from_raw(raw, "/h".into(), &MapEnv(env.iter().copied().collect()))
        };
        let err = load("", &[("DEEPSEEK_BASE_URL", "localhost:8080")]).unwrap_err();
        assert!(err.to_string().contains("DEEPSEEK_BASE_URL"), "{err}");
        let err = load("[provider]\nbase_url = \"127.0.0.1:9\"\n", &[]).unwrap_err();
        assert!(err.to_string().contains("[provider] base_url"), "{err}");
        // The replay provider sends nothing: its base URL is not checked.
        assert!(load("[provider]\nkind = \"replay\"\nbase_url = \"x\"\n", &[]).is_ok());

        let config = load("", &[]).unwrap();
        assert_eq!(config.model.key_policy, KeyPolicy::Required);
        let config = load(
            "[provider]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8080/v1\"\napi_key_env = \"LOCAL_LLM_KEY\"\n",
            &[],
        )
        .unwrap();
        assert_eq!(config.model.key_policy, KeyPolicy::Optional);
        assert!(!config.model.needs_key());
        let config = load(
            "[provider]\nbase_url = \"https://llm.example.com/v1\"\napi_key_env = \"\"\n",
            &[],
        )
        .unwrap();
        assert_eq!(config.model.key_policy, KeyPolicy::None);
    }

    #[test]
    fn pricing_is_configured_per_model_with_deepseek_defaults_on_deepseek() {
        let load = |text: &str| -> Result<Config, String> {
            let raw: RawConfig = toml::from_str(text).map_err(|err| err.to_string())?;
            Config::from_raw(raw, "/h".into(), &MapEnv(HashMap::new()))
                .map_err(|err| err.to_string())
        };
        let price = |config: &Config, id: &str| config.choices.pricing(id).cloned();
        // The built-in catalog, on DeepSeek's API: its published prices.
        let config = load("").unwrap();
        let flash = price(&config, "deepseek-v4-flash").expect("a default price");
        assert_eq!(flash.currency, "USD");
        assert!(flash.input > 0.0 && flash.output > flash.input);
        assert!(flash.input_cache_hit.is_some_and(|hit| hit < flash.input));
        // Another endpoint: no price unless configured.
        let local = "[provider]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8080/v1\"\n";
        assert_eq!(price(&load(local).unwrap(), "deepseek-v4-flash"), None);
        // A configured model's own pricing, inline or as [models.pricing];
        // a DeepSeek model without one keeps the default on DeepSeek.
        let config = load(
            "[[models]]\nid = \"x\"\npricing = { input = 2.0, input_cache_hit = 0.5, output = 8.0, currency = \"EUR\" }\n\
             [[models]]\nid = \"deepseek-v4-pro\"\n\
             [[models]]\nid = \"y\"\n[models.pricing]\ninput = 1\noutput = 3\n",
        )
        .unwrap();
        let x = price(&config, "x").unwrap();
        assert_eq!(
            (x.input, x.input_cache_hit, x.output),
            (2.0, Some(0.5), 8.0)
        );
        assert_eq!(x.currency, "EUR");
        assert!(price(&config, "deepseek-v4-pro").is_some());
        let y = price(&config, "y").unwrap();
        assert_eq!(
            (y.input, y.input_cache_hit, y.currency.as_str()),
            (1.0, None, "USD")
        );
        // 1000 uncached, 3000 cached, 500 out at y's prices (a hit costs
        // the input price when none is set).
        let usage = dsh_protocol::model::Usage {
            input_tokens: 1000,
            output_tokens: 500,
            cache_read_tokens: 3000,
            reasoning_tokens: 0,
        };
        assert!((y.cost(&usage) - (4000.0 + 1500.0) / 1e6).abs() < 1e-12);
        assert!((x.cost(&usage) - (2000.0 + 1500.0 + 4000.0) / 1e6).abs() < 1e-12);
        // Typos and impossible prices are errors.
        assert!(
            load("[[models]]\nid = \"x\"\npricing = { input = 1, output = 1, cache = 1 }\n")
                .is_err()
        );
        let err =
            load("[[models]]\nid = \"x\"\npricing = { input = -1, output = 1 }\n").unwrap_err();
        assert!(err.to_string().contains("pricing"), "{err}");
    }

    #[test]
    fn idle_eviction_is_configured_in_seconds_and_0_is_never() {
        let config = |text: &str| {
            let raw: RawConfig = toml::from_str(text).unwrap();
            Config::from_raw(raw, "/h".into(), &MapEnv(HashMap::new())).unwrap()
        };
        assert_eq!(
            config("[session]\nidle_evict_s = 5\n").idle_evict,
            Some(Duration::from_secs(5))
        );
        assert_eq!(config("[session]\nidle_evict_s = 0\n").idle_evict, None);
        assert_eq!(config("").max_history_bytes, Some(32 << 20));
        assert_eq!(
            config("[session]\nmax_history_bytes = 1000\n").max_history_bytes,
            Some(1000)
        );
        assert_eq!(
            config("[session]\nmax_history_bytes = 0\n").max_history_bytes,
            None
        );
    }

    #[test]
    fn unknown_keys_and_bad_default_model_are_errors() {
        assert!(toml::from_str::<RawConfig>("[provider]\nbase = 1\n").is_err());
        let raw: RawConfig = toml::from_str("default_model = \"nope\"\n").unwrap();
        let err = Config::from_raw(raw, "/h".into(), &MapEnv(HashMap::new())).unwrap_err();
        assert!(matches!(&err, ConfigError::Invalid(message) if message.contains("nope")));
    }

    #[test]
    fn a_broken_file_is_named_in_its_error() {
        let home = std::env::temp_dir().join(format!("dsh-config-{}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("config.toml"), "[provider\n").unwrap();
        let env = MapEnv(HashMap::from([(
            "DSH_HOME",
            &*Box::leak(home.display().to_string().into_boxed_str()),
        )]));
        let err = Config::load(&env).unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
        assert!(err.to_string().contains("config.toml"), "{err}");
        std::fs::remove_dir_all(&home).unwrap();
        assert!(matches!(
            Config::load(&MapEnv(HashMap::new())),
            Err(ConfigError::NoHome)
        ));
    }
}
