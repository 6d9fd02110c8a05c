//! The guard on Windows: the command in a kill-on-close Job Object of the
//! guard's own (nested in dsh's, see `crate::windows`), so whatever it
//! starts ends when the guard exits or is killed.

use std::ffi::OsString;

/// The guard on Windows: a kill-on-close job of its own (nested in dsh's),
/// then the command; its exit code is returned. Sandbox options are
/// refused (there is no sandbox here; dsh never asks for one, see
/// [`crate::sandbox::probe`]), `--contain` is accepted and has no effect
/// beyond the job.
pub(super) fn main(args: Vec<OsString>) -> i32 {
    let mut args = args.into_iter().peekable();
    if args.peek().is_some_and(|arg| arg == super::CONTAIN) {
        args.next();
    }
    if args.peek().is_some_and(|arg| arg == "--") {
        args.next();
    }
    let Some(program) = args.next() else {
        eprintln!("dsh __guard: usage: dsh __guard -- PROGRAM [ARGS…]");
        return 2;
    };
    if let Err(err) = crate::windows::enter_own_job() {
        eprintln!("dsh __guard: cannot create a job object ({err}); what the command starts may outlive it");
    }
    let mut command = std::process::Command::new(&program);
    let args: Vec<OsString> = args.collect();
    if is_cmd(&program) {
        // cmd.exe does not parse its command line the C runtime's way:
        // `/S /C "LINE"` takes LINE verbatim between the outer quotes, so
        // the arguments go as they are, the line quoted once, not escaped.
        use std::os::windows::process::CommandExt;
        let last = args.len().saturating_sub(1);
        for (at, arg) in args.iter().enumerate() {
            if at == last && at > 0 {
                let mut quoted = OsString::from("\"");
                quoted.push(arg);
                quoted.push("\"");
                command.raw_arg(quoted);
            } else {
                command.raw_arg(arg);
            }
        }
    } else {
        command.args(args);
    }
    match command.status() {
        Ok(status) => status.code().unwrap_or(1),
        Err(err) => {
            eprintln!("dsh: cannot run {}: {err}", program.to_string_lossy());
            127
        }
    }
}

/// Whether `program` is cmd.exe (by file name, any case, with or without
/// `.exe`).
fn is_cmd(program: &std::ffi::OsStr) -> bool {
    std::path::Path::new(program)
        .file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| {
            name.eq_ignore_ascii_case("cmd.exe") || name.eq_ignore_ascii_case("cmd")
        })
}
