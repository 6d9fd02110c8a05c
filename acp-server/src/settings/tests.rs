//! Unit tests of a session's settings: defaults, the fold of logged
//! changes, the validation of a client's change, the options menu.

use super::*;

fn model(id: &str, name: Option<&str>, window: u64) -> ModelInfo {
    ModelInfo {
        id: id.to_owned(),
        name: name.map(str::to_owned),
        description: Some(format!("about {id}")),
        context_window: window,
        max_tokens: None,
        images: false,
        pricing: None,
    }
}

/// Two models (the default second, so "the first" and "the default"
/// differ), low effort and read-only by default.
fn choices() -> Choices {
    Choices {
        models: vec![
            model("small", Some("Small"), 8_000),
            model("big", None, 128_000),
        ],
        default_model: "big".to_owned(),
        default_thought_level: ThoughtLevel::Low,
        default_mode: Mode::ReadOnly,
        web: true,
    }
}

#[test]
fn defaults_are_the_choices_defaults() {
    let settings = Settings::defaults(&choices());
    assert_eq!(
        settings,
        Settings {
            mode: Mode::ReadOnly,
            model: "big".to_owned(),
            thought_level: ThoughtLevel::Low,
            web: true,
        }
    );
}

#[test]
fn apply_folds_known_values_and_ignores_unknown_ones() {
    let choices = choices();
    let mut settings = Settings::defaults(&choices);
    settings.apply(ConfigKey::Model, "small", &choices);
    settings.apply(ConfigKey::Mode, "full-access", &choices);
    settings.apply(ConfigKey::ThoughtLevel, "max", &choices);
    settings.apply(ConfigKey::Web, "off", &choices);
    let changed = Settings {
        mode: Mode::FullAccess,
        model: "small".to_owned(),
        thought_level: ThoughtLevel::Max,
        web: false,
    };
    assert_eq!(settings, changed);
    // Values a newer dsh may write, and keys it may add: nothing moves.
    settings.apply(ConfigKey::Mode, "yolo", &choices);
    settings.apply(ConfigKey::ThoughtLevel, "extreme", &choices);
    settings.apply(ConfigKey::Web, "maybe", &choices);
    settings.apply(ConfigKey::Unknown, "small", &choices);
    assert_eq!(settings, changed);
}

#[test]
fn a_model_that_left_the_catalog_falls_back_to_the_default() {
    let choices = choices();
    let mut settings = Settings::defaults(&choices);
    settings.apply(ConfigKey::Model, "small", &choices);
    // Not "keep the current one": the default.
    settings.apply(ConfigKey::Model, "retired-model", &choices);
    assert_eq!(settings.model, "big");
}

#[test]
fn validate_accepts_known_options_and_values() {
    let choices = choices();
    for (key, value, expected) in [
        ("mode", "plan", ConfigKey::Mode),
        ("model", "small", ConfigKey::Model),
        ("thought_level", "off", ConfigKey::ThoughtLevel),
    ] {
        let validated = Settings::validate(&choices, key, value).unwrap();
        assert_eq!(validated, expected, "{key}={value}");
    }
}

#[test]
fn validate_names_the_choices_of_a_bad_value() {
    let choices = choices();
    let error = Settings::validate(&choices, "model", "gpt").unwrap_err();
    assert!(matches!(error, AgentError::InvalidParams(_)), "{error:?}");
    assert_eq!(error.to_string(), "unknown model \"gpt\"; use small, big");
    let error = Settings::validate(&choices, "mode", "Ask").unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown mode \"Ask\"; use read-only, plan, ask, accept-edits, full-access"
    );
    let error = Settings::validate(&choices, "thought_level", "").unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown thought_level \"\"; use off, low, high, max"
    );
}

#[test]
fn validate_refuses_an_unknown_option() {
    // "unknown" is what ConfigKey calls a key it does not know: never a
    // key a client may set.
    for key in ["temperature", "unknown", "Mode"] {
        let error = Settings::validate(&choices(), key, "ask").unwrap_err();
        assert!(matches!(error, AgentError::InvalidParams(_)), "{error:?}");
        assert!(
            error
                .to_string()
                .contains("this session has mode, model, thought_level, web"),
            "{error}"
        );
    }
}

#[test]
fn options_are_in_menu_order_with_current_values() {
    let choices = choices();
    let mut settings = Settings::defaults(&choices);
    settings.apply(ConfigKey::Mode, "accept-edits", &choices);
    let options = settings.options(&choices);
    let keys: Vec<ConfigKey> = options.iter().map(|option| option.key).collect();
    assert_eq!(
        keys,
        [
            ConfigKey::Mode,
            ConfigKey::Model,
            ConfigKey::ThoughtLevel,
            ConfigKey::Web
        ]
    );
    let current: Vec<&str> = options
        .iter()
        .map(|option| option.current.as_str())
        .collect();
    assert_eq!(current, ["accept-edits", "big", "low", "on"]);
    let ids = |index: usize| -> Vec<String> {
        options[index]
            .values
            .iter()
            .map(|value| value.id.clone())
            .collect()
    };
    assert_eq!(
        ids(0),
        ["read-only", "plan", "ask", "accept-edits", "full-access"]
    );
    assert_eq!(ids(1), ["small", "big"]);
    assert_eq!(ids(2), ["off", "low", "high", "max"]);
}

#[test]
fn model_values_show_the_display_name_and_description() {
    let choices = choices();
    let options = Settings::defaults(&choices).options(&choices);
    let models = &options[1].values;
    assert_eq!(models[0].name, "Small");
    // No name: the id.
    assert_eq!(models[1].name, "big");
    assert_eq!(models[1].description.as_deref(), Some("about big"));
    // Every mode and level says what it means.
    assert!(options[0].values.iter().all(|v| v.description.is_some()));
    assert!(options[2].values.iter().all(|v| v.description.is_some()));
}

#[test]
fn context_window_is_the_selected_models() {
    let choices = choices();
    let mut settings = Settings::defaults(&choices);
    assert_eq!(settings.context_window(&choices), 128_000);
    settings.apply(ConfigKey::Model, "small", &choices);
    assert_eq!(settings.context_window(&choices), 8_000);
    // A model outside the catalog (set directly, not folded): unknown.
    settings.model = "elsewhere".to_owned();
    assert_eq!(settings.context_window(&choices), 0);
}

/// The `web` switch: offered (last, values on and off) only when a web
/// tool is configured; validated like the others.
#[test]
fn the_web_switch_exists_only_with_web_tools() {
    let choices = choices();
    let options = Settings::defaults(&choices).options(&choices);
    let web = options.last().unwrap();
    assert_eq!(
        (web.key, web.toggle, web.current.as_str()),
        (ConfigKey::Web, true, "on")
    );
    let values: Vec<&str> = web.values.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(values, ["on", "off"]);
    assert!(options[..options.len() - 1].iter().all(|o| !o.toggle));
    assert_eq!(
        Settings::validate(&choices, "web", "off").unwrap(),
        ConfigKey::Web
    );
    let err = Settings::validate(&choices, "web", "maybe")
        .unwrap_err()
        .to_string();
    assert!(err.contains("use on, off"), "{err}");

    let without = Choices {
        web: false,
        ..choices
    };
    let options = Settings::defaults(&without).options(&without);
    assert!(
        options.iter().all(|o| o.key != ConfigKey::Web),
        "{options:?}"
    );
    let err = Settings::validate(&without, "web", "off")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("this session has mode, model, thought_level"),
        "{err}"
    );
}
