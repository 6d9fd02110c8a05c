//! The signal state commands start with: nothing blocked, nothing ignored,
//! so `timeout`, `kill` and Ctrl-C work on what a command starts — in
//! full-access (no sandbox) and in the kernel sandbox, run as a command
//! and as a background job.

use std::time::Duration;

use serde_json::json;

use crate::support::*;

/// One probe per line: `timeout=<status> ms=<elapsed>`, the status of a
/// background child stopped by `kill` (SIGTERM: 143), the status of a
/// shell that sent itself SIGINT (130), and the command's blocked and
/// ignored signals from `/proc`. Blocked signals held each of the first
/// three for 4 s and left them with status 0.
const PROBE: &str = "s=$(date +%s%N); timeout 1 sleep 4; rc=$?; \
echo \"timeout=$rc ms=$(( ($(date +%s%N) - s) / 1000000 ))\"; \
sleep 4 & pid=$!; kill $pid; wait $pid; echo \"kill=$?\"; \
sh -c 'kill -INT $$; sleep 4; echo survived'; echo \"int=$?\"; \
grep -E '^Sig(Blk|Ign)' /proc/self/status; echo \"sandbox=$DSH_SANDBOX\"";

/// Runs `dsh run --approve <approve>` with a model that runs [`PROBE`]
/// (as a background job when `job`) and returns what the command printed.
async fn probe(approve: &str, job: bool) -> String {
    let env = TestEnv::relaxed().await;
    if job {
        env.mock.push_json(call(
            "b1",
            "bash",
            json!({"command": PROBE, "run_in_background": true}),
        ));
        env.mock.push_json(call(
            "o1",
            "job_output",
            json!({"job_id": "j1", "wait": true, "timeout_ms": 60000}),
        ));
    } else {
        env.mock
            .push_json(call("b1", "bash", json!({"command": PROBE})));
    }
    env.mock.push_json(reply("Done."));
    let mut command = env.dsh(&["run", "--approve", approve, "probe the signals"]);
    command.stdin(std::process::Stdio::null());
    let output = tokio::time::timeout(Duration::from_secs(90), command.output())
        .await
        .expect("dsh run ends")
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    tool_result(&env, if job { "o1" } else { "b1" })
}

fn assert_clean_signals(result: &str) {
    let ms: u64 = result
        .split("timeout=124 ms=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("timeout stopped sleep (124): {result}"));
    assert!(ms < 3000, "timeout 1 sleep 4 took {ms} ms: {result}");
    assert!(result.contains("kill=143"), "kill stops a child: {result}");
    assert!(
        result.contains("int=130") && !result.contains("survived"),
        "SIGINT stops a foreground shell: {result}"
    );
    assert!(
        result.contains("SigBlk:\t0000000000000000"),
        "nothing blocked: {result}"
    );
    assert!(
        result.contains("SigIgn:\t0000000000000000"),
        "nothing ignored: {result}"
    );
}

#[tokio::test]
async fn a_full_access_command_can_be_stopped_by_timeout_kill_and_sigint() {
    assert_clean_signals(&probe("all", false).await);
}

#[tokio::test]
async fn a_sandboxed_command_can_be_stopped_by_timeout_kill_and_sigint() {
    let result = probe("sandboxed", false).await;
    assert!(result.contains("sandbox=files"), "{result}");
    assert_clean_signals(&result);
}

#[tokio::test]
async fn a_background_job_can_be_stopped_by_timeout_kill_and_sigint() {
    assert_clean_signals(&probe("all", true).await);
}
