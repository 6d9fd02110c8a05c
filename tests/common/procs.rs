//! `/proc` helpers shared by the test crates: find live (non-zombie)
//! processes by command line and working directory.

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
