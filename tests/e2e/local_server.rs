//! A local OpenAI-compatible server (llama.cpp, vLLM, Ollama) set with
//! `DEEPSEEK_BASE_URL` alone (issue 38, items 1 and 2): OpenAI's dialect,
//! the model the server serves (`GET /models`, asked at the first session,
//! once per process), the errors when that cannot be had, what `dsh
//! doctor` says, and no authentication method for an endpoint that needs
//! no key — while the default endpoint keeps both.

use agent_client_protocol::v1::schema::{AuthMethod, NewSessionRequest};

use crate::support::{reply, TestEnv};

/// The mock on loopback, no key, no `kind` and no `[[models]]`: what a
/// user who only set `DEEPSEEK_BASE_URL` has. `top` goes before the tables.
async fn local(top: &str) -> TestEnv {
    let mut env = TestEnv::new().await;
    env.api_key = None;
    std::fs::write(
        env.home.path().join("config.toml"),
        format!(
            "{top}[titles]\nfrom_model = false\n[provider]\nstream_idle_timeout_ms = 5000\nrequest_timeout_ms = 5000\nmax_retries = 0\n"
        ),
    )
    .unwrap();
    env
}

/// What a request body must not carry for an OpenAI-compatible server.
fn assert_openai_dialect(body: &serde_json::Value) {
    for field in ["thinking", "reasoning_effort", "max_tokens"] {
        assert!(body.get(field).is_none(), "{field} sent: {body}");
    }
    for message in body["messages"].as_array().unwrap() {
        assert!(message.get("reasoning_content").is_none(), "{message}");
    }
}

#[tokio::test]
async fn a_local_server_gets_openai_s_dialect_and_the_model_it_serves() {
    let env = local("").await;
    env.mock.serve_models(&["qwen2.5-coder:32b"]);
    env.mock.push_json(reply("Hi from the local model."));
    env.mock.push_json(reply("Again."));
    let conn = env.connect().await;
    let init = conn.initialize().await;
    assert!(init.auth_methods.is_empty(), "{:?}", init.auth_methods);
    assert_eq!(env.mock.model_lists(), 0, "asked at start-up");
    let opened = conn.new_session(&env.cwd()).await;
    let options = serde_json::to_string(&opened.config_options).unwrap();
    assert!(options.contains("qwen2.5-coder:32b"), "{options}");
    assert!(!options.contains("deepseek-v4"), "{options}");
    conn.prompt(&opened.session_id, "hi").await.unwrap();
    // A second session: the answer was kept.
    let second = conn.new_session(&env.cwd()).await.session_id;
    conn.prompt(&second, "hi").await.unwrap();
    assert_eq!(env.mock.model_lists(), 1);
    for body in env.mock.requests() {
        assert_eq!(body["model"], "qwen2.5-coder:32b");
        assert_openai_dialect(&body);
    }
    for head in env.mock.heads() {
        assert!(
            !head.to_ascii_lowercase().contains("authorization"),
            "{head}"
        );
    }
    conn.finish().await;
}

/// `[[models]]` names the server's model: its id is sent as is, no
/// `max_tokens` unless configured, and the server is not asked.
#[tokio::test]
async fn a_configured_model_is_sent_by_its_id_in_openai_s_dialect() {
    let env = local("").await;
    let config = env.home.path().join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[[models]]\nid = \"qwen2.5-coder:32b\"\n\n[[models]]\nid = \"capped\"\nmax_tokens = 4096\n");
    std::fs::write(&config, text).unwrap();
    env.mock.push_json(reply("One."));
    env.mock.push_json(reply("Two."));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "hi").await.unwrap();
    conn.cx
        .send_request(
            agent_client_protocol::v1::schema::SetSessionConfigOptionRequest::new(
                session.clone(),
                "model",
                "capped",
            ),
        )
        .block_task()
        .await
        .unwrap();
    conn.prompt(&session, "hi").await.unwrap();
    let requests = env.mock.requests();
    assert_eq!(requests[0]["model"], "qwen2.5-coder:32b");
    assert_openai_dialect(&requests[0]);
    assert_eq!(requests[1]["model"], "capped");
    assert_eq!(requests[1]["max_tokens"], 4096);
    assert!(requests[1].get("thinking").is_none());
    assert_eq!(env.mock.model_lists(), 0);
    conn.finish().await;
}

/// Several served models: `session/new` names them and what to write (no
/// session is left behind), `dsh doctor` lists them; `default_model`
/// picks one.
#[tokio::test]
async fn several_served_models_are_listed_until_one_is_named() {
    let env = local("").await;
    env.mock
        .serve_models(&["qwen2.5-coder:32b", "llama3.2:latest", "gemma3:4b"]);
    let conn = env.connect().await;
    conn.initialize().await;
    let err = conn
        .cx
        .send_request(NewSessionRequest::new(env.cwd()))
        .block_task()
        .await
        .unwrap_err();
    assert!(
        err.message
            .contains("serves 3 models (qwen2.5-coder:32b, llama3.2:latest, gemma3:4b)"),
        "{err:?}"
    );
    assert!(
        err.message
            .contains("default_model = \"qwen2.5-coder:32b\""),
        "{err:?}"
    );
    conn.finish().await;
    let stored = std::fs::read_dir(env.sessions_dir()).map_or(0, |dir| dir.count());
    assert_eq!(stored, 0, "a session was created");

    let doctor = env.dsh(&["doctor"]).output().await.unwrap();
    let out = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        out.contains("qwen2.5-coder:32b, llama3.2:latest, gemma3:4b"),
        "{out}"
    );
    assert!(out.contains("default_model"), "{out}");
    assert_eq!(doctor.status.code(), Some(1), "{out}");

    // Named: that one is used.
    let env = local("default_model = \"llama3.2:latest\"\n").await;
    env.mock
        .serve_models(&["qwen2.5-coder:32b", "llama3.2:latest", "gemma3:4b"]);
    env.mock.push_json(reply("Llama here."));
    let conn = env.connect().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "hi").await.unwrap();
    assert_eq!(env.mock.requests()[0]["model"], "llama3.2:latest");
    conn.finish().await;
    let doctor = env.dsh(&["doctor"]).output().await.unwrap();
    let out = String::from_utf8_lossy(&doctor.stdout);
    assert!(out.contains("llama3.2:latest (default_model)"), "{out}");
}

/// A server without the list (a base URL without its `/v1`): the error
/// says what failed and what to write; a failure is not kept, so the
/// next session asks again.
#[tokio::test]
async fn a_failed_model_list_is_a_clear_error_and_asked_again() {
    let env = local("").await;
    let conn = env.connect().await;
    conn.initialize().await;
    let err = conn
        .cx
        .send_request(NewSessionRequest::new(env.cwd()))
        .block_task()
        .await
        .unwrap_err();
    let url = format!("GET {}/models", env.mock.url);
    assert!(err.message.contains(&url), "{err:?}");
    assert!(err.message.contains("HTTP 404"), "{err:?}");
    assert!(err.message.contains("[[models]] id"), "{err:?}");
    let doctor = env.dsh(&["doctor"]).output().await.unwrap();
    let out = String::from_utf8_lossy(&doctor.stdout);
    assert!(out.contains(&url) && out.contains("HTTP 404"), "{out}");

    env.mock.serve_models(&["served"]);
    env.mock.push_json(reply("Now."));
    let session = conn.new_session(&env.cwd()).await.session_id;
    conn.prompt(&session, "hi").await.unwrap();
    assert_eq!(env.mock.requests()[0]["model"], "served");
    // The failed session, the doctor (a process of its own), this one.
    assert_eq!(env.mock.model_lists(), 3);
    conn.finish().await;
}

/// A keyless loopback endpoint offers no authentication method (nothing
/// to authenticate); the default endpoint, DeepSeek's API, still offers
/// both (the ACP registry's verifier requires one).
#[tokio::test]
async fn auth_methods_are_offered_only_where_a_key_is_needed() {
    let env = local("").await;
    let conn = env.connect().await;
    assert!(conn.initialize().await.auth_methods.is_empty());
    conn.finish().await;

    let mut env = TestEnv::new().await;
    env.api_key = None;
    std::fs::write(env.home.path().join("config.toml"), "").unwrap();
    env.extra_env.push((
        "DEEPSEEK_BASE_URL".into(),
        "https://api.deepseek.com".into(),
    ));
    let conn = env.connect().await;
    let methods = conn.initialize().await.auth_methods;
    let ids: Vec<String> = methods
        .iter()
        .map(|method| match method {
            AuthMethod::Terminal(method) => method.id.0.to_string(),
            AuthMethod::Agent(method) => method.id.0.to_string(),
            other => panic!("unexpected auth method {other:?}"),
        })
        .collect();
    assert_eq!(ids, ["dsh-login", "deepseek-api-key"]);
    conn.finish().await;
}

/// `dsh run --model` names one of the served models: it is checked against
/// what the server serves (not the empty catalog of the configuration),
/// and used.
#[tokio::test]
async fn dsh_run_checks_its_model_against_the_served_ones() {
    let env = local("").await;
    env.mock.serve_models(&["llama3.2:latest"]);
    env.mock.push_json(reply("Llama here."));
    let output = env
        .dsh(&["run", "--model", "llama3.2:latest", "hi"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    crate::support::assert_exit(&output, 0, "dsh run --model of a served model");
    assert_eq!(env.mock.requests()[0]["model"], "llama3.2:latest");
    let bogus = env
        .dsh(&["run", "--model", "nope", "hi"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = crate::support::text(&bogus.stderr);
    assert!(stderr.contains("llama3.2:latest"), "{stderr}");
    assert_eq!(bogus.status.code(), Some(2), "{stderr}");
}
