//! `dsh sdk` on stdio under a flood from a client that writes requests and
//! never reads its answers: dsh stops reading stdin at its cap of calls in
//! flight, its memory stays bounded, and every request is answered once
//! the client reads again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::{peak_rss, TestEnv};

const REQUESTS: usize = 200_000;

#[tokio::test]
async fn a_client_that_never_reads_cannot_grow_dsh_without_bound() {
    let env = TestEnv::new().await;
    let mut child = env.dsh(&["sdk"]).spawn().expect("spawn dsh sdk");
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let count = written.clone();
    let writer = tokio::spawn(async move {
        for batch in 0..REQUESTS / 1000 {
            let mut chunk = String::new();
            for id in batch * 1000..(batch + 1) * 1000 {
                chunk.push_str(&format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"initialize\",\"params\":{{}}}}\n"
                ));
            }
            stdin.write_all(chunk.as_bytes()).await.unwrap();
            count.store((batch + 1) * 1000, Ordering::SeqCst);
        }
        stdin
    });

    // Wait until dsh has taken all of it, or has stopped taking any: the
    // writer made no progress for a whole second.
    let (mut last, mut still) = (0, 0);
    while !writer.is_finished() && still < 20 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = written.load(Ordering::SeqCst);
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
    let peak = peak_rss(pid);
    let taken = written.load(Ordering::SeqCst);
    eprintln!(
        "SDK stdio flood: {taken} of {REQUESTS} requests written, peak RSS {:.1} MB",
        peak as f64 / 1e6
    );
    assert!(
        !writer.is_finished(),
        "dsh read all {REQUESTS} requests with no one reading its answers"
    );
    assert!(peak < 150_000_000, "peak RSS {peak} bytes");

    // Reading again, every request gets its answer.
    let reader = tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        let mut answered = 0;
        while answered < REQUESTS {
            let line = lines.next_line().await.unwrap().expect("an answer");
            assert!(line.contains("\"result\""), "{line}");
            answered += 1;
        }
        answered
    });
    let stdin = tokio::time::timeout(Duration::from_secs(300), writer)
        .await
        .expect("dsh takes the rest once its answers are read")
        .unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(300), reader)
        .await
        .expect("every request is answered")
        .unwrap();
    assert_eq!(answered, REQUESTS);
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("dsh sdk exits when stdin ends")
        .unwrap();
    assert!(status.success());
}
