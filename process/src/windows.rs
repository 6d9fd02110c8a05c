//! Windows: process trees through Job Objects and the process table.
//!
//! - **Children die with dsh.** The first child dsh starts puts dsh itself
//!   into a Job Object with `KILL_ON_JOB_CLOSE` ([`die_with_dsh`]); every
//!   process started afterwards inherits the job, and when dsh exits —
//!   however it exits — the system closes the job's last handle and kills
//!   them all (the Linux death signal's counterpart).
//! - **A command's tree dies with its guard.** The guard
//!   (`dsh __guard`, `guard/windows.rs`) puts itself into a job of its own, nested in
//!   dsh's, before it starts the command: whatever the command starts is in
//!   that job, and when the guard exits or is killed the job goes with
//!   every process in it (no subreaper and no process groups are needed).
//! - **Stopping a group** ([`kill_tree`]): the process and its descendants
//!   by parent links in one snapshot of the process table, deepest first.
//!   Windows has no SIGTERM: every stop is a forced one (the catalog: a
//!   forced kill settles as `[exit code: 1]`).
//!
//! Not defended: a process started with `CREATE_BREAKAWAY_FROM_JOB` where a
//! job allows it (dsh's jobs do not), and a pid reused between the snapshot
//! and the kill (a child must have started after its parent, which keeps
//! stale parent links out, but the root pid itself is taken as given).

use windows_sys::Win32::Foundation::FILETIME;
use windows_sys::Win32::Foundation::{CloseHandle, FALSE, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Process32FirstW, Process32NextW, PROCESSENTRY32W, TH32CS_SNAPPROCESS,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectExtendedLimitInformation,
    SetInformationJobObject, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, GetProcessTimes, OpenProcess, TerminateProcess,
    PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_TERMINATE,
};

/// A job that kills its processes when its last handle closes; the
/// handle is never closed by dsh (it lives as long as the process).
fn kill_on_close_job() -> std::io::Result<HANDLE> {
    // SAFETY: plain Win32 calls with a null name and attributes and a
    // properly sized, zero-initialised information block.
    #[allow(unsafe_code)]
    unsafe {
        let job = CreateJobObjectW(std::ptr::null(), std::ptr::null());
        if job.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = std::mem::zeroed();
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        if SetInformationJobObject(
            job,
            JobObjectExtendedLimitInformation,
            (&raw const info).cast(),
            std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
        ) == FALSE
        {
            let err = std::io::Error::last_os_error();
            CloseHandle(job);
            return Err(err);
        }
        Ok(job)
    }
}

/// Puts this process into a new kill-on-close job; its handle is kept
/// open (deliberately leaked) until the process ends.
pub(crate) fn enter_own_job() -> std::io::Result<()> {
    let job = kill_on_close_job()?;
    // SAFETY: `job` is a valid job handle; the pseudo-handle of the
    // current process needs no closing.
    #[allow(unsafe_code)]
    unsafe {
        if AssignProcessToJobObject(job, GetCurrentProcess()) == FALSE {
            let err = std::io::Error::last_os_error();
            CloseHandle(job);
            return Err(err);
        }
    }
    Ok(())
}

/// Makes every child dsh starts from now on die with dsh (once).
pub(crate) fn die_with_dsh() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Err(err) = enter_own_job() {
            tracing::warn!(%err, "cannot put dsh into a job object; children may outlive it");
        }
    });
}

/// Every process's (pid, parent pid), from one snapshot.
fn process_table() -> Vec<(u32, u32)> {
    let mut table = Vec::new();
    // SAFETY: the snapshot handle is checked and closed; the entry's
    // `dwSize` is set as the API requires before the first call.
    #[allow(unsafe_code)]
    unsafe {
        let snapshot = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
        if snapshot == INVALID_HANDLE_VALUE {
            return table;
        }
        let mut entry: PROCESSENTRY32W = std::mem::zeroed();
        entry.dwSize = std::mem::size_of::<PROCESSENTRY32W>() as u32;
        let mut more = Process32FirstW(snapshot, &mut entry) != FALSE;
        while more {
            table.push((entry.th32ProcessID, entry.th32ParentProcessID));
            more = Process32NextW(snapshot, &mut entry) != FALSE;
        }
        CloseHandle(snapshot);
    }
    table
}

/// Forcibly ends one process (exit code 1); a process already gone is
/// fine.
pub(crate) fn terminate(pid: u32) {
    // SAFETY: the handle is checked and closed.
    #[allow(unsafe_code)]
    unsafe {
        let process = OpenProcess(PROCESS_TERMINATE, FALSE, pid);
        if !process.is_null() {
            TerminateProcess(process, 1);
            CloseHandle(process);
        }
    }
}

/// When process `pid` started (100 ns since 1601), if it is running and
/// may be asked.
fn created(pid: u32) -> Option<u64> {
    // SAFETY: the handle is checked and closed; the four FILETIMEs are
    // written by the call.
    #[allow(unsafe_code)]
    unsafe {
        let process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid);
        if process.is_null() {
            return None;
        }
        let zero = FILETIME {
            dwLowDateTime: 0,
            dwHighDateTime: 0,
        };
        let (mut creation, mut exit, mut kernel, mut user) = (zero, zero, zero, zero);
        let ok = GetProcessTimes(process, &mut creation, &mut exit, &mut kernel, &mut user);
        CloseHandle(process);
        (ok != FALSE)
            .then(|| (u64::from(creation.dwHighDateTime) << 32) | u64::from(creation.dwLowDateTime))
    }
}

/// Forcibly ends `pid` and every descendant of it (by parent links in one
/// snapshot), deepest first. 0 is never touched.
pub(crate) fn kill_tree(pid: u32) {
    if pid == 0 {
        return;
    }
    let table = process_table();
    let mut tree = vec![pid];
    let mut at = 0;
    // Windows never updates a process's parent id: a process whose parent
    // died long ago names a pid that may since be this one. A child counts
    // only if it started after its parent; with the parent gone (no start
    // time), none does.
    while at < tree.len() {
        let parent = tree[at];
        let Some(born) = created(parent) else {
            at += 1;
            continue;
        };
        let children: Vec<u32> = table
            .iter()
            .filter(|(child, ppid)| {
                *ppid == parent && *child != parent && *child != 0 && !tree.contains(child)
            })
            .map(|(child, _)| *child)
            .filter(|child| created(*child).is_some_and(|started| started >= born))
            .collect();
        tree.extend(children);
        at += 1;
    }
    for pid in tree.into_iter().rev() {
        terminate(pid);
    }
}
