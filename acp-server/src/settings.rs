//! A session's settings — permission mode, model, reasoning effort, web
//! access — as
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
    /// Whether a web tool is configured (`[web]`): sessions then have a
    /// `web` switch, on at first.
    pub web: bool,
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
    /// The web tools are offered (the `web` switch; a session without web
    /// tools configured has none to offer anyway).
    pub web: bool,
}

/// The values of an on/off switch.
const ON: &str = "on";
const OFF: &str = "off";

/// An on/off switch's value for a boolean.
pub fn switch_value(on: bool) -> &'static str {
    if on {
        ON
    } else {
        OFF
    }
}

/// An on/off switch's value as a boolean (`None`: neither).
pub fn switch(value: &str) -> Option<bool> {
    match value {
        ON => Some(true),
        OFF => Some(false),
        _ => None,
    }
}

impl Settings {
    /// A new session's settings.
    pub fn defaults(choices: &Choices) -> Settings {
        Settings {
            mode: choices.default_mode,
            model: choices.default_model.clone(),
            thought_level: choices.default_thought_level,
            web: true,
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
            ConfigKey::Web => {
                if let Some(on) = switch(value) {
                    self.web = on;
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
        let key = Self::key(choices, key)?;
        Self::check(choices, key, value)?;
        Ok(key)
    }

    /// The option a client names, if sessions have it.
    ///
    /// # Errors
    /// An unknown option, answered with the session's options.
    pub fn key(choices: &Choices, name: &str) -> Result<ConfigKey, AgentError> {
        ConfigKey::parse(name)
            .filter(|key| Self::offers(choices, *key))
            .ok_or_else(|| {
                let ids: Vec<&str> = Self::defaults(choices)
                    .options(choices)
                    .iter()
                    .map(|option| option.key.as_str())
                    .collect();
                AgentError::InvalidParams(format!(
                    "unknown config option {name:?}; this session has {}",
                    ids.join(", ")
                ))
            })
    }

    /// Whether sessions offer `key` (the web switch only where the web is).
    fn offers(choices: &Choices, key: ConfigKey) -> bool {
        key != ConfigKey::Unknown && (key != ConfigKey::Web || choices.web)
    }

    /// Whether `value` is one of `key`'s values.
    ///
    /// # Errors
    /// An option sessions do not offer, or an unknown value (answered with
    /// the option's values).
    pub fn check(choices: &Choices, key: ConfigKey, value: &str) -> Result<(), AgentError> {
        if !Self::offers(choices, key) {
            return Self::key(choices, key.as_str()).map(drop);
        }
        let known = match key {
            ConfigKey::Model => choices.model(value).is_some(),
            ConfigKey::ThoughtLevel => ThoughtLevel::parse(value).is_some(),
            ConfigKey::Mode => Mode::parse(value).is_some(),
            ConfigKey::Web => switch(value).is_some(),
            ConfigKey::Unknown => false,
        };
        if known {
            return Ok(());
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
        let mut options = vec![
            ConfigOption {
                key: ConfigKey::Mode,
                name: "Mode",
                description: "What the agent may do without asking",
                current: self.mode.as_str().to_owned(),
                toggle: false,
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
                toggle: false,
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
                toggle: false,
                values: ThoughtLevel::ALL
                    .iter()
                    .map(|level| ConfigValue {
                        id: level.as_str().to_owned(),
                        name: level.name().to_owned(),
                        description: Some(level.description().to_owned()),
                    })
                    .collect(),
            },
        ];
        if choices.web {
            options.push(ConfigOption {
                key: ConfigKey::Web,
                name: "Web",
                description: "Whether web_fetch and web_search are offered",
                current: switch_value(self.web).to_owned(),
                toggle: true,
                values: [(ON, "On"), (OFF, "Off")]
                    .into_iter()
                    .map(|(id, name)| ConfigValue {
                        id: id.to_owned(),
                        name: name.to_owned(),
                        description: None,
                    })
                    .collect(),
            });
        }
        options
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
