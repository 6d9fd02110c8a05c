//! initialize, auth, session/new validation, config options.

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AuthMethod, AuthenticateRequest, BooleanConfigOptionCapabilities, ClientSessionCapabilities,
    InitializeRequest, LoadSessionRequest, NewSessionRequest, SessionConfigKind,
    SessionConfigOption, SessionConfigOptionValue, SessionConfigOptionsCapabilities,
    SetSessionConfigOptionRequest,
};

use crate::support::{tool_names, TestEnv};

#[tokio::test]
async fn initialize_advertises_honest_capabilities() {
    let mut env = TestEnv::new().await;
    // The default endpoint, which needs a key: its auth methods (the
    // loopback mock needs none and gets none, tests/e2e/local_server.rs).
    env.extra_env.push((
        "DEEPSEEK_BASE_URL".into(),
        "https://api.deepseek.com".into(),
    ));
    let conn = env.connect().await;
    let init = conn.initialize().await;
    assert_eq!(init.protocol_version, ProtocolVersion::V1);
    let info = init.agent_info.expect("agentInfo");
    assert_eq!(info.name, "dsh");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    let caps = init.agent_capabilities;
    assert!(caps.load_session);
    assert!(caps.prompt_capabilities.image);
    assert!(caps.prompt_capabilities.embedded_context);
    assert!(!caps.prompt_capabilities.audio);
    assert!(
        caps.mcp_capabilities.http && !caps.mcp_capabilities.sse,
        "stdio and Streamable HTTP MCP servers, not SSE"
    );
    let session = caps.session_capabilities;
    assert!(
        session.list.is_some()
            && session.resume.is_some()
            && session.close.is_some()
            && session.delete.is_some()
    );
    assert_eq!(init.auth_methods.len(), 2);
    match &init.auth_methods[0] {
        AuthMethod::Terminal(method) => {
            assert_eq!(method.id.0.as_ref(), "dsh-login");
            assert_eq!(method.args, ["login"]);
            let meta = method.meta.as_ref().expect("_meta.terminal-auth");
            let terminal = &meta["terminal-auth"];
            assert!(terminal["command"].as_str().unwrap().ends_with("/dsh"));
            assert_eq!(terminal["args"], serde_json::json!(["login"]));
            assert_eq!(terminal["label"], "dsh login");
        }
        other => panic!("unexpected auth method {other:?}"),
    }
    match &init.auth_methods[1] {
        AuthMethod::Agent(method) => {
            assert_eq!(method.id.0.as_ref(), "deepseek-api-key");
            assert!(method
                .description
                .as_deref()
                .unwrap_or("")
                .contains("DEEPSEEK_API_KEY"));
        }
        other => panic!("unexpected auth method {other:?}"),
    }
    conn.finish().await;
}

#[tokio::test]
async fn unsupported_protocol_version_is_answered_with_1() {
    let env = TestEnv::new().await;
    let conn = env.connect().await;
    let init = conn
        .cx
        .send_request(InitializeRequest::new(ProtocolVersion::from(7u16)))
        .block_task()
        .await
        .unwrap();
    assert_eq!(init.protocol_version, ProtocolVersion::V1);
    conn.finish().await;
}

#[tokio::test]
async fn missing_key_is_auth_required_at_session_new_not_startup() {
    let mut env = TestEnv::new().await;
    env.api_key = None;
    // An endpoint away from this machine (a loopback one needs no key).
    env.extra_env
        .push(("DEEPSEEK_BASE_URL".into(), "https://example.invalid".into()));
    let conn = env.connect().await;
    conn.initialize().await; // startup and initialize work without a key
    let err = conn
        .cx
        .send_request(NewSessionRequest::new(env.cwd()))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(i32::from(err.code), -32000, "{err:?}");
    assert!(err.message.contains("DEEPSEEK_API_KEY"), "{}", err.message);
    let err = conn
        .cx
        .send_request(AuthenticateRequest::new("deepseek-api-key"))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(i32::from(err.code), -32000);
    conn.finish().await;
}

#[tokio::test]
async fn authenticate_succeeds_when_key_is_present() {
    let env = TestEnv::new().await;
    let conn = env.connect().await;
    conn.initialize().await;
    conn.cx
        .send_request(AuthenticateRequest::new("deepseek-api-key"))
        .block_task()
        .await
        .expect("authenticate");
    let err = conn
        .cx
        .send_request(AuthenticateRequest::new("oauth"))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(i32::from(err.code), -32602);
    conn.finish().await;
}

#[tokio::test]
async fn bad_cwd_is_invalid_params_naming_the_path() {
    let env = TestEnv::new().await;
    let conn = env.connect().await;
    conn.initialize().await;
    let err = conn
        .cx
        .send_request(NewSessionRequest::new("relative/dir"))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(i32::from(err.code), -32602);
    assert!(err.message.contains("relative/dir"), "{}", err.message);
    let missing = env.cwd().join("does-not-exist");
    let err = conn
        .cx
        .send_request(NewSessionRequest::new(&missing))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(i32::from(err.code), -32602);
    assert!(
        err.message.contains(&missing.display().to_string()),
        "{}",
        err.message
    );
    let file = env.cwd().join("hello.txt");
    let err = conn
        .cx
        .send_request(NewSessionRequest::new(&file))
        .block_task()
        .await
        .unwrap_err();
    assert!(err.message.contains("not a directory"), "{}", err.message);
    let err = conn
        .cx
        .send_request(
            NewSessionRequest::new(env.cwd()).additional_directories(vec![missing.clone()]),
        )
        .block_task()
        .await
        .unwrap_err();
    assert!(err.message.contains("does-not-exist"), "{}", err.message);
    conn.finish().await;
}

#[tokio::test]
async fn config_options_are_full_and_changes_reach_the_next_request() {
    let env = TestEnv::new().await;
    let conn = env.connect().await;
    conn.initialize().await;
    let session = conn.new_session(&env.cwd()).await;
    let options = session.config_options.expect("configOptions");
    let ids: Vec<&str> = options.iter().map(|o| o.id.0.as_ref()).collect();
    assert_eq!(ids, ["mode", "model", "thought_level", "web"]);
    assert!(
        session.modes.is_some(),
        "legacy modes for clients without config options"
    );
    let current = |options: &[agent_client_protocol::v1::schema::SessionConfigOption], id: &str| {
        let option = options.iter().find(|o| o.id.0.as_ref() == id).unwrap();
        match &option.kind {
            SessionConfigKind::Select(select) => select.current_value.0.to_string(),
            _ => panic!("select expected"),
        }
    };
    assert_eq!(current(&options, "mode"), "ask");
    assert_eq!(current(&options, "model"), "deepseek-v4-flash");
    assert_eq!(current(&options, "thought_level"), "high");

    let changed = conn
        .cx
        .send_request(SetSessionConfigOptionRequest::new(
            session.session_id.clone(),
            "model",
            "deepseek-v4-pro",
        ))
        .block_task()
        .await
        .unwrap();
    assert_eq!(changed.config_options.len(), 4, "the full list comes back");
    assert_eq!(current(&changed.config_options, "model"), "deepseek-v4-pro");
    let changed = conn
        .cx
        .send_request(SetSessionConfigOptionRequest::new(
            session.session_id.clone(),
            "thought_level",
            "off",
        ))
        .block_task()
        .await
        .unwrap();
    assert_eq!(current(&changed.config_options, "thought_level"), "off");

    let err = conn
        .cx
        .send_request(SetSessionConfigOptionRequest::new(
            session.session_id.clone(),
            "model",
            "gpt-nope",
        ))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(i32::from(err.code), -32602);
    assert!(err.message.contains("gpt-nope"));

    env.mock
        .push_json(serde_json::json!({"chunks":[{"text":"ok"}],"finish":"stop"}));
    conn.prompt(&session.session_id, "hi").await.unwrap();
    let request = &env.mock.requests()[0];
    assert_eq!(request["model"], "deepseek-v4-pro");
    assert_eq!(request["thinking"]["type"], "disabled");
    assert!(request.get("reasoning_effort").is_none());
    conn.finish().await;
}

/// The `web` switch (stable since ACP schema 1.17: boolean config
/// options): a toggle for a client that shows boolean options, a select of
/// `on` and `off` for one that does not; off keeps `web_fetch` out of the
/// next request, and stays off when the session is loaded again.
#[tokio::test]
async fn the_web_switch_takes_the_web_tools_out_of_the_session() {
    let env = TestEnv::new().await;
    let web = |options: &[SessionConfigOption]| {
        options
            .iter()
            .find(|o| o.id.0.as_ref() == "web")
            .map(|o| o.kind.clone())
            .expect("a web option")
    };
    let reply = || serde_json::json!({"chunks":[{"text":"ok"}],"finish":"stop"});

    // A client that shows boolean options.
    let conn = env.connect().await;
    let booleans = ClientSessionCapabilities::new().config_options(
        SessionConfigOptionsCapabilities::new().boolean(BooleanConfigOptionCapabilities::new()),
    );
    conn.cx
        .send_request(
            InitializeRequest::new(ProtocolVersion::V1)
                .client_capabilities(conn.sim.capabilities().session(booleans)),
        )
        .block_task()
        .await
        .unwrap();
    let session = conn.new_session(&env.cwd()).await;
    match web(&session.config_options.unwrap()) {
        SessionConfigKind::Boolean(toggle) => assert!(toggle.current_value),
        other => panic!("a boolean expected: {other:?}"),
    }
    env.mock.push_json(reply());
    conn.prompt(&session.session_id, "on").await.unwrap();
    assert!(tool_names(&env.mock.requests()[0]).contains(&"web_fetch".to_owned()));
    let changed = conn
        .cx
        .send_request(SetSessionConfigOptionRequest::new(
            session.session_id.clone(),
            "web",
            SessionConfigOptionValue::boolean(false),
        ))
        .block_task()
        .await
        .unwrap();
    match web(&changed.config_options) {
        SessionConfigKind::Boolean(toggle) => assert!(!toggle.current_value),
        other => panic!("a boolean expected: {other:?}"),
    }
    // A boolean for an option that is not a switch is refused.
    let err = conn
        .cx
        .send_request(SetSessionConfigOptionRequest::new(
            session.session_id.clone(),
            "mode",
            SessionConfigOptionValue::boolean(true),
        ))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(i32::from(err.code), -32602);
    env.mock.push_json(reply());
    conn.prompt(&session.session_id, "off").await.unwrap();
    let names = tool_names(&env.mock.requests()[1]);
    assert!(
        !names.iter().any(|name| name.starts_with("web_")),
        "{names:?}"
    );
    assert!(names.contains(&"read".to_owned()), "{names:?}");
    conn.finish().await;

    // A client without boolean options: a select, still off after a load.
    let conn = env.connect().await;
    conn.initialize().await;
    let loaded = conn
        .cx
        .send_request(LoadSessionRequest::new(
            session.session_id.clone(),
            env.cwd(),
        ))
        .block_task()
        .await
        .unwrap();
    match web(&loaded.config_options.unwrap()) {
        SessionConfigKind::Select(select) => {
            assert_eq!(select.current_value.0.as_ref(), "off");
        }
        other => panic!("a select expected: {other:?}"),
    }
    let changed = conn
        .cx
        .send_request(SetSessionConfigOptionRequest::new(
            session.session_id.clone(),
            "web",
            "on",
        ))
        .block_task()
        .await
        .unwrap();
    assert!(matches!(
        web(&changed.config_options),
        SessionConfigKind::Select(_)
    ));
    env.mock.push_json(reply());
    conn.prompt(&session.session_id, "on again").await.unwrap();
    assert!(tool_names(&env.mock.requests()[2]).contains(&"web_fetch".to_owned()));
    conn.finish().await;
}
