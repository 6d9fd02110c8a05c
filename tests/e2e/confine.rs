//! Issue 23: what a sandboxed command can do to the terminal dsh runs in,
//! to the guard that cleans up after it, with the capabilities root gives
//! it, and through its private temp dir.

use agent_client_protocol::v1::schema::PermissionOptionKind;
use serde_json::json;

use crate::support::client_sim::{Answer, ClientSim};
use crate::support::*;

/// Runs `command` through the bash tool in `mode`, answering the prompt
/// with `answer`, with dsh spawned by `spawn`; the tool's result.
async fn run_in(
    env: &TestEnv,
    command: tokio::process::Command,
    mode: &str,
    answer: Answer,
    script: &str,
) -> String {
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": script, "description": "probe"}),
    ));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, false);
    sim.answer(answer);
    let conn = Conn::spawn_with(command, sim).await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    conn.set_mode(&session, mode).await;
    conn.prompt(&session, "probe").await.unwrap();
    validate_frames(&conn.finish().await);
    tool_result(env, "b1")
}

/// Item 2: dsh runs with a real terminal as its controlling terminal (as
/// `dsh run` in a shell does). A command allowed once in read-only mode
/// tries to type into it with `ioctl(TIOCSTI)`: nothing arrives.
#[tokio::test]
async fn a_sandboxed_command_cannot_type_into_dshs_terminal() {
    let env = TestEnv::new().await;
    let pty = nix::pty::openpty(None, None).expect("a pty");
    let (master, slave) = (pty.master, pty.slave);
    let mut command = env.command();
    {
        use std::os::fd::AsRawFd;
        let slave = slave.as_raw_fd();
        // SAFETY: setsid and ioctl only, between fork and exec.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(move || {
                if libc::setsid() < 0 || libc::ioctl(slave, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let script = r#"python3 - <<'EOF'
import fcntl, os, termios
try:
    fd = os.open("/dev/tty", os.O_RDWR)
    for c in b"touch TIOCSTI-MARKER\n":
        fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))
    print("injected")
except OSError as e:
    print("refused:", e.errno)
EOF"#;
    let result = run_in(
        &env,
        command,
        "read-only",
        Answer::Select(PermissionOptionKind::AllowOnce),
        script,
    )
    .await;
    drop(slave);
    assert!(result.contains("refused"), "{result}");
    assert!(!result.contains("injected"), "{result}");
    // Nothing reached the terminal's input.
    nix::fcntl::fcntl(
        std::os::fd::AsRawFd::as_raw_fd(&master),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .unwrap();
    let mut seen = vec![0u8; 4096];
    let n = nix::unistd::read(std::os::fd::AsRawFd::as_raw_fd(&master), &mut seen).unwrap_or(0);
    let seen = String::from_utf8_lossy(&seen[..n]);
    assert!(
        !seen.contains("TIOCSTI-MARKER"),
        "typed into the terminal: {seen}"
    );
}

/// Item 13: a command cannot kill the guard above it, and a chain of 260
/// `setsid` processes does not outlive the call.
#[tokio::test]
async fn a_command_cannot_kill_its_guard_and_a_deep_setsid_chain_is_swept() {
    let env = TestEnv::relaxed().await;
    std::fs::write(
        env.cwd().join("chain.sh"),
        "n=$1\nif [ \"$n\" -gt 0 ]; then setsid sh chain.sh $((n-1)) & fi\nexec sleep 300\n",
    )
    .unwrap();
    let script = "kill -9 $PPID; echo kill=$?; sh chain.sh 260 & sleep 3; echo started";
    let result = run_in(
        &env,
        env.command(),
        "ask",
        Answer::Select(PermissionOptionKind::AllowOnce),
        script,
    )
    .await;
    assert!(result.contains("kill=1"), "{result}");
    assert!(result.contains("started"), "{result}");
    let cwd = env.cwd().canonicalize().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = procs::live_pids("sleep", &cwd);
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} of the chain outlived the call",
            left.len()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Item 20: "Allow once, with network" keeps no dangerous capability and
/// sets `no_new_privs`.
#[tokio::test]
async fn a_networked_sandboxed_command_has_no_dangerous_capabilities() {
    let env = TestEnv::new().await;
    let result = run_in(
        &env,
        env.command(),
        "ask",
        Answer::SelectId("allow_once_network"),
        "grep -E '^(CapBnd|CapEff|NoNewPrivs)' /proc/self/status",
    )
    .await;
    let field = |name: &str| {
        result
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_else(|| panic!("{name} in {result}"))
            .to_owned()
    };
    assert_eq!(field("NoNewPrivs:"), "1", "{result}");
    let bounding = u64::from_str_radix(&field("CapBnd:"), 16).unwrap();
    // CAP_NET_ADMIN 12, CAP_SYS_MODULE 16, CAP_SYS_RAWIO 17, CAP_SYS_ADMIN
    // 21, CAP_MKNOD 27, CAP_SYS_PTRACE 19.
    for cap in [12, 16, 17, 19, 21, 27] {
        assert_eq!(bounding & (1 << cap), 0, "capability {cap} kept: {result}");
    }
}

/// Item 14: the private temp dir is not the predictable
/// `/tmp/dsh-<session>`: a link planted there is never followed.
#[tokio::test]
async fn a_link_planted_at_the_old_temp_dir_name_is_not_followed() {
    let env = TestEnv::new().await;
    let outside = tempfile::tempdir().unwrap();
    env.mock.push_json(call(
        "b1",
        "bash",
        json!({"command": "echo planted > \"$TMPDIR/x\"; echo tmp=$TMPDIR", "description": "tmp"}),
    ));
    env.mock.push_json(reply("done"));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
    let conn = env.connect_with(sim).await;
    conn.initialize().await;
    let session = conn.start(&env.cwd()).await;
    let planted = std::env::temp_dir().join(format!("dsh-{}", session.0));
    std::os::unix::fs::symlink(outside.path(), &planted).unwrap();
    conn.prompt(&session, "use tmp").await.unwrap();
    conn.finish().await;
    let _ = std::fs::remove_file(&planted);
    let result = tool_result(&env, "b1");
    assert!(
        !outside.path().join("x").exists(),
        "the command wrote through the planted link: {result}"
    );
    let tmp = result
        .lines()
        .find_map(|line| line.strip_prefix("tmp="))
        .unwrap()
        .to_owned();
    assert_ne!(std::path::Path::new(&tmp), planted, "{result}");
    assert!(
        !std::path::Path::new(&tmp).exists(),
        "removed with the session"
    );
}

/// Item 7: metadata changes outside the writable paths and on hidden
/// paths fail; `/dev/shm` is private and the user's terminals are not
/// there. Run in read-only (nothing writable but the temp dir) and in ask
/// mode with the home directory as the workspace (a hidden file inside a
/// writable root).
#[tokio::test]
async fn metadata_shared_memory_and_terminals_are_out_of_a_sandboxed_commands_reach() {
    let mut env = TestEnv::new().await;
    let user = tempfile::tempdir().unwrap();
    let home = user.path().canonicalize().unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "KEY").unwrap();
    env.extra_env
        .push(("HOME".into(), home.display().to_string()));
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("f.txt");
    std::fs::write(&target, "x").unwrap();
    let mode_of = |path: &std::path::Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    };
    let (mode, mtime) = (
        mode_of(&target),
        std::fs::metadata(&target).unwrap().modified().unwrap(),
    );
    let pty = nix::pty::openpty(None, None).expect("a pty");
    let host_pts = nix::unistd::ttyname(&pty.slave).unwrap();
    let probe = format!("dsh-shm-probe-{}", std::process::id());
    let script = format!(
        "f={target:?}\n\
         chmod 777 \"$f\"; echo chmod=$?\n\
         touch -d 2030-01-01 \"$f\"; echo utime=$?\n\
         python3 -c \"import os,sys; os.setxattr(sys.argv[1], 'user.dsh', b'1')\" \"$f\" 2>/dev/null; echo xattr=$?\n\
         chmod u+s \"$f\"; echo suid=$?\n\
         echo x > /dev/shm/{probe}; echo shm=$?\n\
         echo hi > {host_pts:?}; echo pts=$?\n\
         chmod 000 {key:?}; echo hidden=$?\n\
         echo sandbox=$DSH_SANDBOX",
        key = home.join(".ssh/id_rsa"),
    );
    for (mode_name, cwd) in [("read-only", env.cwd()), ("ask", home.clone())] {
        env.mock.push_json(call(
            "b1",
            "bash",
            json!({"command": script, "description": "metadata"}),
        ));
        env.mock.push_json(reply("done"));
        let sim = ClientSim::new(false, false);
        sim.answer(Answer::Select(PermissionOptionKind::AllowOnce));
        let conn = env.connect_with(sim).await;
        conn.initialize().await;
        let session = conn.start(&cwd).await;
        conn.set_mode(&session, mode_name).await;
        conn.prompt(&session, "probe").await.unwrap();
        conn.finish().await;
        let result = tool_result(&env, "b1");
        for name in ["chmod", "utime", "xattr", "suid", "pts", "hidden"] {
            assert!(
                !result.contains(&format!("{name}=0")),
                "{mode_name}: {name} succeeded: {result}"
            );
        }
        assert!(result.contains("sandbox=files,network,mounts"), "{result}");
        assert!(
            result.contains("shm=0"),
            "a private /dev/shm is usable: {result}"
        );
        assert_eq!(mode_of(&target), mode, "{mode_name}");
        assert_eq!(
            std::fs::metadata(&target).unwrap().modified().unwrap(),
            mtime
        );
        assert!(!std::path::Path::new("/dev/shm").join(&probe).exists());
        assert_eq!(mode_of(&home.join(".ssh/id_rsa")) & 0o777, 0o644);
    }
}

/// Item 9: a language server from the workspace that the user allowed in
/// plan mode runs in plan mode's sandbox (read-only), not outside it.
#[tokio::test]
async fn a_workspace_language_server_runs_in_the_sessions_sandbox() {
    let mut env = TestEnv::new().await;
    let root = env.cwd();
    let outside = tempfile::tempdir().unwrap();
    let pwned = outside.path().join("pwned.txt");
    plant_workspace_server(
        &mut env,
        &format!(
            "echo pwned >> '{}'\necho in-root >> '{}/in-root.txt'\nexit 1\n",
            pwned.display(),
            root.display()
        ),
    );
    env.mock.push_json(call(
        "l1",
        "lsp",
        json!({"operation":"hover","file_path":"src/main.rs","line":1,"character":1}),
    ));
    env.mock.push_json(reply("ok"));
    let sim = ClientSim::new(false, false);
    sim.answer(Answer::Select(PermissionOptionKind::AllowAlways));
    let conn = env.connect_with(sim.clone()).await;
    conn.initialize().await;
    let session = conn.start(&root).await;
    conn.set_mode(&session, "plan").await;
    conn.prompt(&session, "symbols").await.unwrap();
    conn.finish().await;
    assert_eq!(sim.asked(), ["l1"], "plan mode asks before it starts");
    assert!(
        !pwned.exists(),
        "the workspace server wrote outside the workspace"
    );
    assert!(
        !root.join("in-root.txt").exists(),
        "plan mode's sandbox is read-only, for a server too"
    );
}
