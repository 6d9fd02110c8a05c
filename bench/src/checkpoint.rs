//! What a checkpoint costs: the workspace scan around every command, and
//! keeping a file before an edit, in a 10,000-file workspace.

use std::time::Instant;

use dsh_acp_server::checkpoint::{Scan, Snapshot, Store, TurnCapture};

use crate::proc::{median, row};
use crate::Bench;

pub async fn rows(bench: &Bench) {
    let root = bench.scratch.join("ten-thousand");
    for dir in 0..100 {
        let dir_path = root.join(format!("d{dir:03}"));
        std::fs::create_dir_all(&dir_path).unwrap();
        for file in 0..100 {
            std::fs::write(
                dir_path.join(format!("f{file:03}.rs")),
                format!("// file {dir}/{file}\n").repeat(40),
            )
            .unwrap();
        }
    }
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
    let root = root.canonicalize().unwrap();
    let roots = vec![root.clone()];
    let mut scans = Vec::new();
    let mut seen = 0;
    for _ in 0..7 {
        let started = Instant::now();
        let scan = Scan::of(&roots);
        scans.push(started.elapsed().as_secs_f64() * 1000.0);
        seen = scan.len();
    }
    row(
        "checkpoint: scan of a 10,000-file workspace (median of 7)",
        "—",
        format!(
            "{:.1} ms for {seen} files; a command costs two",
            median(scans)
        ),
    );
    // The turn's first command also reads the small files (once a turn).
    let mut precopies = Vec::new();
    for _ in 0..5 {
        let scan = Scan::of(&roots);
        let started = Instant::now();
        let mut capture = TurnCapture::default();
        capture.precopy(&scan);
        precopies.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    row(
        "checkpoint: read the small files before a turn's first command (median of 5)",
        "—",
        format!(
            "{:.1} ms for 10,001 files (~4.8 MB held for the turn; only what a command changes is stored)",
            median(precopies)
        ),
    );
    let store = Store::new(&bench.home, "bench-checkpoint");
    let mut keeps = Vec::new();
    for round in 0..7 {
        let mut capture = TurnCapture::default();
        let started = Instant::now();
        for file in 0..10 {
            let path = root.join(format!("d{round:03}/f{file:03}.rs"));
            let now = Snapshot::on_disk(&path);
            capture.keep(&store, &path, &now);
        }
        keeps.push(started.elapsed().as_secs_f64() * 1000.0 / 10.0);
    }
    let kept: u64 = std::fs::read_dir(bench.home.join("checkpoints/bench-checkpoint"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.metadata().ok())
                .map(|meta| meta.len())
                .sum()
        })
        .unwrap_or(0);
    row(
        "checkpoint: keep one source file before an edit (median of 7 × 10)",
        "—",
        format!(
            "{:.3} ms a file; 70 files of ~480 bytes kept in {kept} bytes",
            median(keeps)
        ),
    );
}
