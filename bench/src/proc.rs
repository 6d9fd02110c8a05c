//! A `dsh acp` process driven with raw frames, and the table helpers.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

pub struct Proc {
    pub child: tokio::process::Child,
    pub stdin: tokio::process::ChildStdin,
    pub lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
}

impl Proc {
    pub fn spawn(dsh: &Path, home: &Path, base_url: &str) -> Proc {
        let mut child = tokio::process::Command::new(dsh)
            .arg("acp")
            .env("DSH_HOME", home)
            .env("DEEPSEEK_API_KEY", "bench-key")
            .env("DEEPSEEK_BASE_URL", base_url)
            // The mock speaks for DeepSeek's API: its dialect, its catalog
            // (another base URL would be asked for the model it serves).
            .env("DSH_PROVIDER", "deepseek")
            .env("DSH_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn dsh");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap()).lines();
        Proc {
            child,
            stdin,
            lines,
            next_id: 1,
        }
    }

    pub async fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let frame = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        self.stdin
            .write_all(format!("{frame}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
        id
    }

    /// Reads frames until the response to `id`; returns it and the number
    /// of notifications seen on the way.
    pub async fn response(&mut self, id: u64) -> (Value, usize) {
        let mut notifications = 0;
        loop {
            let line = self.lines.next_line().await.unwrap().expect("dsh exited");
            // A notification (or a request from dsh) names its method
            // first: counted without being parsed, which for 100,000
            // replayed updates cost the bench more than dsh spent
            // sending them.
            if line.starts_with(r#"{"jsonrpc":"2.0","method":"#) {
                notifications += 1;
                continue;
            }
            let value: Value = serde_json::from_str(&line).unwrap();
            if value.get("id").and_then(Value::as_u64) == Some(id) && value.get("method").is_none()
            {
                return (value, notifications);
            }
            notifications += 1;
        }
    }

    pub async fn call(&mut self, method: &str, params: Value) -> (Value, usize) {
        let id = self.send(method, params).await;
        self.response(id).await
    }

    /// CPU time the process has used, all threads, nanoseconds
    /// (`/proc/<pid>/task/*/schedstat`).
    pub fn cpu_ns(&self) -> u64 {
        cpu_ns_of(self.child.id().unwrap())
    }

    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// The part of the RSS that is dsh's own memory (heap, stacks), not
    /// pages of its binary and libraries: those the kernel maps around a
    /// fault as the file is cached, so they vary from run to run.
    pub fn rss_anon_kib(&self) -> u64 {
        self.status_kib("RssAnon:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        let pid = self.child.id().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }

    pub async fn close(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}

/// CPU time a process has used, all threads, nanoseconds
/// (`/proc/<pid>/task/*/schedstat`).
pub fn cpu_ns_of(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
                .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values[values.len() / 2]
}

pub fn row(what: &str, target: &str, measured: String) {
    println!("| {what:<64} | {target:<14} | {measured:<28} |");
}

pub fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dsh-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
