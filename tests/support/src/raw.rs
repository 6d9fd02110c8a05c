//! A raw line-level connection to `dsh acp` for malformed-input tests: bytes
//! straight to its stdin, frames read back one by one, and every frame it
//! wrote validated when it is finished.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::schema::validate_exchange;

/// A raw line-level connection for malformed-input tests.
pub struct Raw {
    pub child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    pub frames: Vec<String>,
    pub sent: Vec<String>,
}

impl Raw {
    pub fn spawn(mut command: tokio::process::Command) -> Raw {
        command.stderr(Stdio::null());
        let mut child = command.spawn().expect("spawn dsh");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Raw {
            child,
            stdin,
            lines,
            frames: Vec::new(),
            sent: Vec::new(),
        }
    }

    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        self.sent
            .extend(String::from_utf8_lossy(bytes).lines().map(str::to_owned));
        self.stdin.write_all(bytes).await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    pub async fn send(&mut self, value: serde_json::Value) {
        self.send_bytes(format!("{value}\n").as_bytes()).await;
    }

    /// The next frame, parsed.
    pub async fn recv(&mut self) -> serde_json::Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .expect("a frame within 10 s")
            .expect("read")
            .expect("dsh still running");
        self.frames.push(line.clone());
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    pub async fn finish(mut self) -> Vec<String> {
        drop(self.stdin);
        while let Ok(Ok(Some(line))) =
            tokio::time::timeout(Duration::from_secs(5), self.lines.next_line()).await
        {
            self.frames.push(line);
        }
        let status = tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .expect("exit")
            .expect("wait");
        assert!(status.success(), "dsh exited with {status}");
        validate_exchange(&self.sent, &self.frames);
        self.frames
    }
}
