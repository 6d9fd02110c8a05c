//! `/proc` helpers shared by the test crates: find live (non-zombie)
//! processes by command line and working directory, and read a process's
//! resident memory.

use std::path::Path;

/// Pids of live processes whose command line contains `needle` and whose
/// working directory is `cwd`.
pub fn live_pids(needle: &str, cwd: &Path) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let Ok(dir) = std::fs::read_link(format!("/proc/{pid}/cwd")) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .split(") ")
            .nth(1)
            .is_some_and(|rest| rest.starts_with('Z'));
        if String::from_utf8_lossy(&cmdline).contains(needle) && dir == cwd && !zombie {
            pids.push(pid);
        }
    }
    pids
}

/// Pids of live processes whose command line holds `marker`, wherever
/// they run (a daemon a test's command left behind).
pub fn holding(marker: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(marker))
                && pid_alive(*pid)
        })
        .collect()
}

/// Whether a process runs (a zombie is dead for our purposes).
pub fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| !stat.split(") ").nth(1).unwrap_or("").starts_with('Z'))
}

/// Peak resident memory of a process, bytes (`VmHWM`).
pub fn peak_rss(pid: u32) -> u64 {
    proc_status_kib(pid, "VmHWM:") * 1024
}

/// Resident memory of a process now, bytes (`VmRSS`).
pub fn rss(pid: u32) -> u64 {
    proc_status_kib(pid, "VmRSS:") * 1024
}

fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|kb| kb.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .unwrap()
}
