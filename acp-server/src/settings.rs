//! A session's settings — permission mode, model, reasoning effort — as
//! folded from its `session/config` events, and the options menu every
//! front end shows for them.

use dsh_protocol::log::ConfigKey;

use crate::config::{Config, ThoughtLevel};
use crate::error::AgentError;
use crate::permission::Mode;
use crate::update::{ConfigOption, ConfigValue};

/// The current settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Permission mode.
    pub mode: Mode,
    /// Model id (in the catalog).
    pub model: String,
    /// Reasoning effort.
    pub thought_level: ThoughtLevel,
}

impl Settings {
    /// A new session's settings.
    pub fn defaults(config: &Config) -> Settings {
        Settings {
            mode: config.default_mode,
            model: config.default_model.clone(),
            thought_level: config.default_thought_level,
        }
    }

    /// Folds a logged change in. A model that left the catalog since it was
    /// chosen falls back to the default; unknown values and keys are
    /// ignored (a newer dsh wrote them).
    pub fn apply(&mut self, key: ConfigKey, value: &str, config: &Config) {
        match key {
            ConfigKey::Model => {
                self.model = if config.model(value).is_some() {
                    value.to_owned()
                } else {
                    config.default_model.clone()
                };
            }
            ConfigKey::ThoughtLevel => {
                if let Some(level) = ThoughtLevel::parse(value) {
                    self.thought_level = level;
                }
            }
            ConfigKey::Mode => {
                if let Some(mode) = Mode::parse(value) {
                    self.mode = mode;
                }
            }
            ConfigKey::Unknown => {}
        }
    }

    /// Checks a change a client asked for.
    ///
    /// # Errors
    /// An unknown option or value, with the choices in the message.
    pub fn validate(config: &Config, key: &str, value: &str) -> Result<ConfigKey, AgentError> {
        let key = ConfigKey::parse(key).ok_or_else(|| {
            AgentError::InvalidParams(format!(
                "unknown config option {key:?}; this session has mode, model and thought_level"
            ))
        })?;
        let known = match key {
            ConfigKey::Model => config.model(value).is_some(),
            ConfigKey::ThoughtLevel => ThoughtLevel::parse(value).is_some(),
            ConfigKey::Mode => Mode::parse(value).is_some(),
            ConfigKey::Unknown => false,
        };
        if known {
            return Ok(key);
        }
        let choices: Vec<String> = Self::defaults(config)
            .options(config)
            .into_iter()
            .find(|option| option.key == key)
            .map(|option| option.values.into_iter().map(|value| value.id).collect())
            .unwrap_or_default();
        Err(AgentError::InvalidParams(format!(
            "unknown {} {value:?}; use {}",
            key.as_str(),
            choices.join(", ")
        )))
    }

    /// Every option with its current value, in menu order.
    pub fn options(&self, config: &Config) -> Vec<ConfigOption> {
        vec![
            ConfigOption {
                key: ConfigKey::Mode,
                name: "Mode",
                description: "What the agent may do without asking",
                current: self.mode.as_str().to_owned(),
                values: Mode::ALL
                    .iter()
                    .map(|mode| ConfigValue {
                        id: mode.as_str().to_owned(),
                        name: mode.name().to_owned(),
                        description: Some(mode.description().to_owned()),
                    })
                    .collect(),
            },
            ConfigOption {
                key: ConfigKey::Model,
                name: "Model",
                description: "The model that answers in this session",
                current: self.model.clone(),
                values: config
                    .models
                    .iter()
                    .map(|model| ConfigValue {
                        id: model.id.clone(),
                        name: model.display_name().to_owned(),
                        description: model.description.clone(),
                    })
                    .collect(),
            },
            ConfigOption {
                key: ConfigKey::ThoughtLevel,
                name: "Thinking",
                description: "How much the model reasons before answering",
                current: self.thought_level.as_str().to_owned(),
                values: ThoughtLevel::ALL
                    .iter()
                    .map(|level| ConfigValue {
                        id: level.as_str().to_owned(),
                        name: level.name().to_owned(),
                        description: Some(level.description().to_owned()),
                    })
                    .collect(),
            },
        ]
    }

    /// The selected model's context window.
    pub fn context_window(&self, config: &Config) -> u64 {
        config
            .model(&self.model)
            .map(|model| model.context_window)
            .unwrap_or(0)
    }
}
