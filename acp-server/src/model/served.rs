//! The models an OpenAI-compatible server serves, for an endpoint whose
//! catalog `config.toml` does not list
//! ([`super::ModelSettings::served_catalog`]):
//! `GET {base}/models`, OpenAI's list, which llama.cpp's server, vLLM,
//! Ollama and LM Studio answer. The agent asks when a session is first
//! opened, not at start-up (an editor's `initialize` never waits for it);
//! the provider keeps the answer for the process (a failure is asked again
//! by the next session), and each asking is bounded by [`LIST_TIMEOUT`].
//! One served model is the catalog; of several, `default_model` picks one,
//! or the error lists them.

use std::time::Duration;

use dsh_protocol::model::ModelInfo;
use dsh_protocol::ErrorCode;
use serde::Deserialize;

use super::settings::ModelSettings;
use super::ModelError;

/// The longest wait for the list (the request timeout, when shorter).
pub const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// How many served model ids an error or `dsh doctor` names.
const NAMED: usize = 20;

/// `GET {base}/models` on `client`, with `key` when one was found (as for
/// a model request), within [`LIST_TIMEOUT`]; `unsent` says why a request
/// got no answer (the HTTP provider's words for it).
pub(super) async fn ask(
    client: &reqwest::Client,
    settings: &ModelSettings,
    key: Option<String>,
    unsent: impl Fn(&reqwest::Error) -> ModelError,
) -> Result<Vec<ModelInfo>, ModelError> {
    let base = &settings.base_url;
    let url = format!("{base}/models");
    let mut get = client.get(&url);
    if let Some(key) = &key {
        get = get.bearer_auth(key);
    }
    let key = key.unwrap_or_default();
    let limit = settings.request_timeout.min(LIST_TIMEOUT);
    let asked = async {
        let response = get.send().await.map_err(|err| unsent(&err))?;
        let status = response.status();
        let body = response.text().await.map_err(|err| {
            ModelError::new(
                ErrorCode::ModelTransport,
                format!("the answer to GET {url} broke off: {err}"),
            )
        })?;
        Ok::<_, ModelError>((status, body))
    };
    let (status, body) = match tokio::time::timeout(limit, asked).await {
        Ok(answer) => answer.map_err(|error| error.redact(&key))?,
        Err(_) => {
            return Err(ModelError::new(
                ErrorCode::ModelTimeout,
                format!(
                    "GET {url} (the models the server serves) got no answer within {}; {}",
                    super::human_duration(limit),
                    NAME_IT
                ),
            ))
        }
    };
    tracing::debug!(%url, status = status.as_u16(), "model list");
    if !status.is_success() {
        let mut error = if status == reqwest::StatusCode::NOT_FOUND {
            ModelError::new(
                ErrorCode::ModelInvalidRequest,
                format!(
                    "GET {url} answered HTTP 404: no model list there; check the base URL (llama.cpp's, vLLM's and Ollama's end in /v1), {NAME_IT}"
                ),
            )
        } else {
            let error = ModelError::from_status(status.as_u16(), &body, None, base);
            ModelError::new(
                error.code,
                format!(
                    "GET {url} (the models the server serves): {}; {NAME_IT}",
                    error.message
                ),
            )
        };
        error.status = Some(status.as_u16());
        return Err(error.redact(&key));
    }
    parse(&body).ok_or_else(|| {
        ModelError::new(
            ErrorCode::ModelMalformedResponse,
            format!(
                "GET {url} did not answer with OpenAI's model list ({{\"data\": [{{\"id\": …}}]}}): not an OpenAI-compatible endpoint, or the base URL lacks its /v1; {}",
                NAME_IT
            ),
        )
    })
}

/// What to write instead of asking.
const NAME_IT: &str =
    "or name the model in config.toml ([[models]] id = \"<the server's model name>\")";

/// The models of OpenAI's list, in the server's order; `None` when the
/// body is not one. A model's window comes from the list when the server
/// gives it (vLLM's `max_model_len`, OpenRouter's `context_length`).
fn parse(body: &str) -> Option<Vec<ModelInfo>> {
    #[derive(Deserialize)]
    struct List {
        data: Vec<Entry>,
    }
    #[derive(Deserialize)]
    struct Entry {
        id: String,
        #[serde(default)]
        max_model_len: Option<u64>,
        #[serde(default)]
        context_length: Option<u64>,
    }
    let list: List = serde_json::from_str(body).ok()?;
    let models = list
        .data
        .into_iter()
        .filter(|entry| !entry.id.is_empty())
        .map(|entry| {
            let mut model: ModelInfo =
                serde_json::from_value(serde_json::json!({ "id": entry.id }))
                    .unwrap_or_else(|_| unreachable!("an id is a model"));
            if let Some(window) = entry.max_model_len.or(entry.context_length) {
                model.context_window = window;
            }
            model.description = Some("served by the endpoint".to_owned());
            model
        })
        .collect();
    Some(models)
}

/// The served model sessions use: the only one, or the one `wanted`
/// (`default_model`) names. The error lists what is served and says what
/// to write.
///
/// # Errors
/// `model.invalid_request`: no model served, several and none named, or
/// `wanted` not served.
pub fn pick(
    served: &[ModelInfo],
    wanted: Option<&str>,
    base_url: &str,
) -> Result<ModelInfo, ModelError> {
    choose(served, wanted, base_url).map_err(|why| {
        let mut error = ModelError::new(ErrorCode::ModelInvalidRequest, why);
        error.retryable = false;
        error
    })
}

fn choose(served: &[ModelInfo], wanted: Option<&str>, base_url: &str) -> Result<ModelInfo, String> {
    if let Some(wanted) = wanted {
        return served
            .iter()
            .find(|model| model.id == wanted)
            .cloned()
            .ok_or_else(|| {
                format!(
                    "default_model {wanted:?} is not among the models {base_url} serves ({}); name one of them",
                    names(served)
                )
            });
    }
    match served {
        [] => Err(format!(
            "{base_url}/models lists no model: load one in the server, or name it in config.toml ([[models]] id = \"<the server's model name>\")"
        )),
        [one] => Ok(one.clone()),
        several => Err(format!(
            "{base_url} serves {} models ({}): name the one to use in config.toml — default_model = {:?} (or list them as [[models]], each id as the server names it)",
            several.len(),
            names(several),
            several[0].id
        )),
    }
}

/// The ids of `served`, the first [`NAMED`], comma-separated.
pub fn names(served: &[ModelInfo]) -> String {
    let mut names: Vec<String> = served
        .iter()
        .take(NAMED)
        .map(|model| model.id.clone())
        .collect();
    if served.len() > NAMED {
        names.push(format!("and {} more", served.len() - NAMED));
    }
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_lists_of_llama_cpp_vllm_and_ollama_are_read() {
        // llama.cpp's server.
        let llama = r#"{"object":"list","data":[{"id":"qwen2.5-coder-7b-q4_k_m.gguf","object":"model","created":1,"owned_by":"llamacpp","meta":{"n_ctx_train":32768}}],"models":[{"name":"x"}]}"#;
        let models = parse(llama).unwrap();
        assert_eq!(models.len(), 1);
        assert_eq!(models[0].id, "qwen2.5-coder-7b-q4_k_m.gguf");
        assert_eq!(models[0].max_tokens, None);
        assert!(models[0].pricing.is_none());
        // vLLM: its window.
        let vllm = r#"{"object":"list","data":[{"id":"Qwen/Qwen2.5-Coder-32B-Instruct","object":"model","max_model_len":32768}]}"#;
        assert_eq!(parse(vllm).unwrap()[0].context_window, 32768);
        // Ollama.
        let ollama = r#"{"object":"list","data":[{"id":"qwen2.5-coder:32b","object":"model","created":1,"owned_by":"library"},{"id":"llama3.2:latest","object":"model"}]}"#;
        let models = parse(ollama).unwrap();
        assert_eq!(
            models.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
            ["qwen2.5-coder:32b", "llama3.2:latest"]
        );
        assert!(parse("<html>It works</html>").is_none());
        assert!(parse(r#"{"models":[]}"#).is_none());
    }

    #[test]
    fn one_served_model_is_used_and_several_are_named() {
        let served = parse(r#"{"data":[{"id":"a"},{"id":"b"}]}"#).unwrap();
        let err = choose(&served, None, "http://127.0.0.1:8080/v1").unwrap_err();
        assert!(err.contains("serves 2 models (a, b)"), "{err}");
        assert!(err.contains("default_model = \"a\""), "{err}");
        assert_eq!(pick(&served, Some("b"), "u").unwrap().id, "b");
        let err = choose(&served, Some("c"), "u").unwrap_err();
        assert!(err.contains("\"c\"") && err.contains("a, b"), "{err}");
        assert_eq!(pick(&served[..1], None, "u").unwrap().id, "a");
        assert!(choose(&[], None, "u")
            .unwrap_err()
            .contains("lists no model"));
        let many: Vec<ModelInfo> = (0..25)
            .map(|n| {
                parse(&format!(r#"{{"data":[{{"id":"m{n}"}}]}}"#))
                    .unwrap()
                    .remove(0)
            })
            .collect();
        assert!(
            names(&many).ends_with("m19, and 5 more"),
            "{}",
            names(&many)
        );
    }
}
