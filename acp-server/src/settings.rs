//! A session's settings — permission mode, model, reasoning effort — as
//! folded from its `session/config` events, and the options menu every
//! front end shows for them.

use dsh_protocol::log::ConfigKey;

use dsh_protocol::model::{ModelInfo, Pricing, ThoughtLevel};
use dsh_protocol::Mode;

use crate::error::AgentError;
use crate::update::{ConfigOption, ConfigValue};

/// What a session's settings can be, and what a new session starts with.
#[derive(Debug, Clone)]
pub struct Choices {
    /// Model catalog (never empty).
    pub models: Vec<ModelInfo>,
    /// Default model id (in the catalog).
    pub default_model: String,
    /// Default reasoning effort.
    pub default_thought_level: ThoughtLevel,
    /// Default permission mode.
    pub default_mode: Mode,
}

impl Choices {
    /// A model from the catalog.
    pub fn model(&self, id: &str) -> Option<&ModelInfo> {
        self.models.iter().find(|model| model.id == id)
    }

    /// What a model's tokens cost, when the catalog says.
    pub fn pricing(&self, id: &str) -> Option<&Pricing> {
        self.model(id).and_then(|model| model.pricing.as_ref())
    }
}

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
    pub fn defaults(choices: &Choices) -> Settings {
        Settings {
            mode: choices.default_mode,
            model: choices.default_model.clone(),
            thought_level: choices.default_thought_level,
        }
    }

    /// Folds a logged change in. A model that left the catalog since it was
    /// chosen falls back to the default; unknown values and keys are
    /// ignored (a newer dsh wrote them).
    pub fn apply(&mut self, key: ConfigKey, value: &str, choices: &Choices) {
        match key {
            ConfigKey::Model => {
                self.model = if choices.model(value).is_some() {
                    value.to_owned()
                } else {
                    choices.default_model.clone()
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
    pub fn validate(choices: &Choices, key: &str, value: &str) -> Result<ConfigKey, AgentError> {
        let key = ConfigKey::parse(key).ok_or_else(|| {
            AgentError::InvalidParams(format!(
                "unknown config option {key:?}; this session has mode, model and thought_level"
            ))
        })?;
        let known = match key {
            ConfigKey::Model => choices.model(value).is_some(),
            ConfigKey::ThoughtLevel => ThoughtLevel::parse(value).is_some(),
            ConfigKey::Mode => Mode::parse(value).is_some(),
            ConfigKey::Unknown => false,
        };
        if known {
            return Ok(key);
        }
        let choices: Vec<String> = Self::defaults(choices)
            .options(choices)
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
    pub fn options(&self, choices: &Choices) -> Vec<ConfigOption> {
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
                values: choices
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
    pub fn context_window(&self, choices: &Choices) -> u64 {
        choices
            .model(&self.model)
            .map(|model| model.context_window)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
