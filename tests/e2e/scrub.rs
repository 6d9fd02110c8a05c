//! The environment commands see: database passwords, CI tokens,
//! credentialed URLs and registry logins are scrubbed; the SSH agent's
//! socket reaches full-access commands only; `[env] pass` lets a chosen
//! variable through.

use std::time::Duration;

use serde_json::json;

use crate::support::*;

/// Variables the default scrub removes, with values shaped like the real
/// ones.
const SECRETS: &[(&str, &str)] = &[
    ("MYSQL_PWD", "d5h-mysql-pw"),
    ("CI_JOB_JWT", "eyJd5h.jwt.sig"),
    ("CI_JOB_JWT_V2", "eyJd5h.jwt2.sig"),
    (
        "DOCKER_AUTH_CONFIG",
        "{\"auths\":{\"r\":{\"auth\":\"ZDVo\"}}}",
    ),
    ("APP_DB", "postgres://app:d5h-pg-pw@db.internal:5432/app"),
    ("CACHE_URL", "redis://:d5h-redis-pw@cache:6379/0"),
    ("DB_PASS", "d5h-db-pass"),
    (
        "AZURE_STORAGE_CONNECTION_STRING",
        "AccountName=a;AccountKey=d5h-azure==",
    ),
    ("CONN", "Server=x;User Id=u;Password=d5h-conn-pw"),
    ("DSN2", "u:d5h-go-pw@tcp(db:3306)/app"),
    ("GIT_CONFIG_VALUE_0", "AUTHORIZATION: basic ZDVoLWdpdA=="),
    ("API_AUTH_HEADER", "Bearer d5h-bearer"),
    ("GIT_URL", "https://ghp_d5hgithubtoken@github.com/o/r.git"),
    (
        "SLACK_WEBHOOK_URL",
        "https://hooks.slack.com/services/T0/B0/d5h",
    ),
];

/// Runs `env` as the model's one command under `dsh run --approve
/// <approve>`, with the [`SECRETS`], an SSH agent socket, an ordinary
/// URL and `extra_config` in config.toml; returns what `env` printed.
async fn command_env(approve: &str, extra_config: &str) -> String {
    let mut env = TestEnv::with_config(extra_config).await;
    for (name, value) in SECRETS {
        env.extra_env.push(((*name).into(), (*value).into()));
    }
    env.extra_env
        .push(("SSH_AUTH_SOCK".into(), "/tmp/d5h-agent.sock".into()));
    env.extra_env
        .push(("PLAIN_URL".into(), "https://example.com/a:b".into()));
    env.mock
        .push_json(call("b1", "bash", json!({"command": "env"})));
    env.mock.push_json(reply("Done."));
    let mut command = env.dsh(&["run", "--approve", approve, "show the environment"]);
    command.stdin(std::process::Stdio::null());
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("dsh run ends")
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let result = tool_result(&env, "b1");
    assert!(
        result.contains("PLAIN_URL=https://example.com/a:b"),
        "{result}"
    );
    result
}

fn assert_scrubbed(result: &str) {
    for (name, value) in SECRETS {
        assert!(
            !result.contains(&format!("{name}=")) && !result.contains(value),
            "{name} reached the command: {result}"
        );
    }
}

#[tokio::test]
async fn commands_never_see_database_passwords_ci_tokens_or_credentialed_urls() {
    let sandboxed = command_env("sandboxed", "").await;
    assert_scrubbed(&sandboxed);
    assert!(!sandboxed.contains("SSH_AUTH_SOCK"), "{sandboxed}");
    // Full access keeps the agent's socket (git over SSH), nothing else.
    let full = command_env("all", "").await;
    assert_scrubbed(&full);
    assert!(full.contains("SSH_AUTH_SOCK=/tmp/d5h-agent.sock"), "{full}");
}

#[tokio::test]
async fn env_pass_lets_a_chosen_variable_through() {
    let result = command_env(
        "sandboxed",
        "[env]\npass = [\"CACHE_URL\", \"SSH_AUTH_SOCK\"]\n",
    )
    .await;
    assert!(
        result.contains("CACHE_URL=redis://:d5h-redis-pw@cache:6379/0"),
        "{result}"
    );
    assert!(
        result.contains("SSH_AUTH_SOCK=/tmp/d5h-agent.sock"),
        "{result}"
    );
    assert!(!result.contains("MYSQL_PWD"), "{result}");
}
