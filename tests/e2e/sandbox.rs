//! The kernel sandbox for commands: in each mode, one command tries to
//! write inside the workspace, outside it, into `~/.ssh`, through a
//! dangling symlink that points outside, to read a planted `~/.ssh/id_rsa`,
//! and to connect to a local TCP listener — allowed or blocked as the
//! table in docs/security.md says.

use agent_client_protocol::v1::schema::PermissionOptionKind;
use serde_json::json;

use crate::support::client_sim::{Answer, ClientSim};
use crate::support::*;

const SECRET: &str = "-----BEGIN FAKE KEY----- d5h-secret";

/// The world around one session: a fake `$HOME` with a planted key, a
/// directory outside the workspace, a TCP listener that counts the
/// connections it accepts.
struct World {
    env: TestEnv,
    home: tempfile::TempDir,
    outside: tempfile::TempDir,
    port: u16,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The last run's session id.
    session: std::sync::Mutex<String>,
}

impl World {
    async fn new(config: &str) -> World {
        let mut env = TestEnv::with_config(config).await;
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
        std::fs::write(home.path().join(".ssh/id_rsa"), SECRET).unwrap();
        env.extra_env
            .push(("HOME".into(), home.path().display().to_string()));
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path().join("via-link"), env.cwd().join("dangling"))
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((_socket, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        World {
            env,
            home,
            outside,
            port,
            accepted,
            session: std::sync::Mutex::new(String::new()),
        }
    }

    /// The probing command: one line `NAME=ok|no` per attempt.
    fn probe(&self) -> String {
        let home = self.home.path().display();
        let outside = self.outside.path().display();
        let port = self.port;
        format!(
            "t() {{ if eval \"$2\" 2>/dev/null; then echo $1=ok; else echo $1=no; fi; }}\n\
             t W_IN 'echo in > inside.txt'\n\
             t W_OUT 'echo out > {outside}/out.txt'\n\
             t W_SSH 'echo k > {home}/.ssh/planted'\n\
             t W_LINK 'echo x > dangling'\n\
             t R_SSH 'cat {home}/.ssh/id_rsa > /dev/null'\n\
             t NET 'echo hi > /dev/tcp/127.0.0.1/{port}'\n\
             t TMP 'echo t > \"${{TMPDIR:-/tmp}}/dsh-probe-$$\"'\n\
             echo \"ENV=$DSH_MODE/$DSH_SANDBOX/${{#DSH_SESSION_ID}}\"\n\
             echo denied >&2; cat {home}/.ssh/id_rsa; exit 1"
        )
    }

    /// Runs the probe in `mode`, answering the prompt with `answer`;
    /// returns the result the model saw.
    async fn run(&self, mode: &str, answer: Answer) -> String {
        self.env.mock.push_json(call(
            "b1",
            "bash",
            json!({"command": self.probe(), "description": "probe the sandbox"}),
        ));
        self.env.mock.push_json(reply("done"));
        let sim = ClientSim::new(false, false);
        sim.answer(answer);
        let conn = self.env.connect_with(sim.clone()).await;
        conn.initialize().await;
        let session = conn.start(&self.env.cwd()).await;
        *self.session.lock().unwrap() = session.0.to_string();
        conn.set_mode(&session, mode).await;
        conn.prompt(&session, "probe").await.unwrap();
        let result = tool_result(&self.env, "b1");
        // Every frame (the prompt's extra option included) fits the schema.
        validate_frames(&conn.finish().await);
        result
    }

    fn outcomes(result: &str) -> Vec<String> {
        result
            .lines()
            .filter(|line| line.ends_with("=ok") || line.ends_with("=no"))
            .map(str::to_owned)
            .collect()
    }

    fn connections(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

fn expect(pairs: &[(&str, bool)]) -> Vec<String> {
    pairs
        .iter()
        .map(|(name, ok)| format!("{name}={}", if *ok { "ok" } else { "no" }))
        .collect()
}

#[tokio::test]
async fn each_mode_gets_the_sandbox_its_table_row_says() {
    let allow = || Answer::Select(PermissionOptionKind::AllowOnce);
    for (mode, writes_root, sandboxed) in [
        ("read-only", false, true),
        ("plan", false, true),
        ("ask", true, true),
        ("accept-edits", true, true),
        ("full-access", true, false),
    ] {
        let world = World::new("").await;
        let result = world.run(mode, allow()).await;
        let free = !sandboxed;
        assert_eq!(
            World::outcomes(&result),
            expect(&[
                ("W_IN", writes_root),
                ("W_OUT", free),
                ("W_SSH", free),
                ("W_LINK", free),
                ("R_SSH", free),
                ("NET", free),
                ("TMP", true),
            ]),
            "{mode}: {result}"
        );
        assert_eq!(world.connections(), usize::from(free), "{mode}");
        assert_eq!(
            world.outside.path().join("via-link").exists(),
            free,
            "{mode}: a write through a dangling symlink"
        );
        assert_eq!(result.contains(SECRET), free, "{mode}: {result}");
        assert_eq!(
            result.contains(&format!("[sandbox: file access denied under {mode} mode]")),
            sandboxed,
            "{mode}: {result}"
        );
        assert!(result.contains("[exit code: 1]"), "{mode}: {result}");
        // The managed variables say how it ran (a 36-character session id).
        let sandbox = if sandboxed {
            "files,network,mounts"
        } else {
            "none"
        };
        assert!(
            result.contains(&format!("ENV={mode}/{sandbox}/36")),
            "{mode}: {result}"
        );
        // The private temp dir went with the session.
        let prefix = format!("dsh-{}", world.session.lock().unwrap());
        let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
            .map(|entry| entry.path())
            .collect();
        assert!(left.is_empty(), "{mode}: {left:?} outlived its session");
    }
}

#[tokio::test]
async fn the_network_is_allowed_once_or_by_configuration() {
    // "Allow once, with network": this command connects; files stay shut.
    let world = World::new("").await;
    let result = world
        .run("ask", Answer::SelectId("allow_once_network"))
        .await;
    let outcomes = World::outcomes(&result);
    assert!(outcomes.contains(&"NET=ok".to_owned()), "{result}");
    assert!(outcomes.contains(&"R_SSH=no".to_owned()), "{result}");
    assert!(outcomes.contains(&"W_OUT=no".to_owned()), "{result}");
    assert_eq!(world.connections(), 1);
    // The prompt offered it: a sandboxed command without network.
    // `[sandbox] network = true`: every command may connect, and the
    // option is not offered.
    let world = World::new("[sandbox]\nnetwork = true").await;
    let result = world
        .run("ask", Answer::Select(PermissionOptionKind::AllowOnce))
        .await;
    let outcomes = World::outcomes(&result);
    assert!(outcomes.contains(&"NET=ok".to_owned()), "{result}");
    assert!(outcomes.contains(&"W_SSH=no".to_owned()), "{result}");
}

#[tokio::test]
async fn a_sandboxed_command_runs_locally_even_when_the_editor_has_a_terminal() {
    let env = TestEnv::new().await;
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": "echo local; touch ../escape", "description": "run"}),
    ));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, true);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim.clone()).await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    conn.prompt(&session, "run").await.unwrap();
    let result = tool_result(&env, "b1");
    assert!(result.contains("local"), "{result}");
    assert!(
        result.contains("[sandbox: file access denied under ask mode]"),
        "{result}"
    );
    assert!(sim.terminal_calls.lock().unwrap().is_empty());
    // The prompt offered the network option (the sandbox keeps commands
    // off the network by default).
    let ids: Vec<String> = sim.permission_requests.lock().unwrap()[0]
        .options
        .iter()
        .map(|o| o.option_id.0.to_string())
        .collect();
    assert!(ids.contains(&"allow_once_network".to_owned()), "{ids:?}");
    conn.finish().await;
}
