//! The sandbox for shell commands on macOS: Seatbelt, through
//! `/usr/bin/sandbox-exec -p <profile> -D NAME=VALUE… -- program args…`.
//!
//! The profile is generated from the same [`Sandbox`] as Linux's Landlock
//! rules and means the same:
//!
//! - **Files.** Everything is readable except the hidden paths. Only the
//!   writable paths and a few devices (`/dev/null`, `/dev/zero`, the
//!   terminals, `/dev/fd/*`…) can be written; the hidden paths cannot be
//!   written or run either, even beneath a writable path. The read-only
//!   paths cannot be written, created, renamed or deleted (unlike Linux,
//!   one that does not exist yet cannot be created) — nor can a directory
//!   between a writable path and one of them, so `mv .git x` cannot carry
//!   `.git/hooks` out of its protection.
//! - **Network.** With it, everything (`network*`) and the services TLS and
//!   DNS need. Without it, none — only Unix sockets beneath the writable
//!   paths (a test's own server in its temporary directory), not one of the
//!   user's daemons elsewhere (`/var/run/docker.sock`).
//! - **Processes.** The command may start programs (they stay inside the
//!   profile) and signal or inspect only processes inside it: not dsh, not
//!   its guard. It may read the usual system facts (CPU, memory, OS
//!   version) but not other processes' arguments and environment
//!   (`kern.procargs2`, where dsh's key would be), and reach only the few
//!   system services programs need (user lookups, preferences). The base
//!   follows codex's, which follows Chrome's.
//!
//! Paths never appear in the profile's text: each is a parameter
//! (`(subpath (param "WRITABLE_0"))` with `-D WRITABLE_0=/path`), so a path
//! with quotes, parentheses or newlines cannot change the profile.
//! Seatbelt matches resolved paths, so the caller passes absolute,
//! canonical ones (no links, no `..`); the generator touches no file, but
//! for a path under `/tmp`, `/var` or `/etc` it also adds the
//! `/private/…` form those links resolve to.
//!
//! Not defended: reading anything outside the hidden paths (as on Linux);
//! a hard link to a read-only file, written through (Seatbelt checks the
//! path, where Linux's bind mount refuses the link); a read-only or hidden
//! path given through a link; anything the allowed system services do for
//! the command. Seatbelt and `sandbox-exec` are deprecated by Apple but still
//! what Chrome, codex and others use. This module is generated and
//! unit-tested only; it has not run on a Mac here.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::sandbox::Sandbox;

/// The program that applies a profile: always this one, never one found on
/// `PATH`.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// What every command needs to run at all: deny by default, then
/// processes, system facts, the few system services, terminals.
const BASE: &str = r#"(version 1)
(deny default)

; Programs it starts stay in this profile. It may signal and inspect only
; processes inside it: not dsh, not the guard that cleans up after it.
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))

; System facts programs ask for. Not kern.procargs2: other processes'
; arguments and environment.
(allow sysctl-read
  (sysctl-name-prefix "hw.")
  (sysctl-name-prefix "machdep.cpu.")
  (sysctl-name-prefix "kern.proc.pid.")
  (sysctl-name-prefix "kern.proc.pgrp.")
  (sysctl-name-prefix "net.routetable.")
  (sysctl-name "kern.argmax")
  (sysctl-name "kern.boottime")
  (sysctl-name "kern.clockrate")
  (sysctl-name "kern.hostname")
  (sysctl-name "kern.maxfilesperproc")
  (sysctl-name "kern.maxproc")
  (sysctl-name "kern.ngroups")
  (sysctl-name "kern.osproductversion")
  (sysctl-name "kern.osrelease")
  (sysctl-name "kern.ostype")
  (sysctl-name "kern.osvariant_status")
  (sysctl-name "kern.osversion")
  (sysctl-name "kern.secure_kernel")
  (sysctl-name "kern.usrstack64")
  (sysctl-name "kern.version")
  (sysctl-name "sysctl.proc_cputype")
  (sysctl-name "sysctl.proc_translated")
  (sysctl-name "vm.loadavg")
  (sysctl-name "vm.swapusage"))
; Java reads the CPU type through a sysctl "write".
(allow sysctl-write (sysctl-name "kern.grade_cputype"))
; host_processor_info (Node's os.cpus()).
(allow mach-host*)
(allow iokit-open (iokit-registry-entry-class "RootDomainUserClient"))

; System services: user and group lookups, power state, preferences.
(allow mach-lookup
  (global-name "com.apple.system.opendirectoryd.libinfo")
  (global-name "com.apple.PowerManagement.control")
  (global-name "com.apple.cfprefsd.daemon")
  (global-name "com.apple.cfprefsd.agent")
  (local-name "com.apple.cfprefsd.agent"))
(allow user-preference-read)
(allow ipc-posix-shm-read* (ipc-posix-name-prefix "apple.cfprefs."))
; Semaphores (Python's multiprocessing), OpenMP's registration.
(allow ipc-posix-sem)
(allow ipc-posix-shm-read-data ipc-posix-shm-write-create ipc-posix-shm-write-unlink
  (ipc-posix-name-regex #"^/__KMP_REGISTERED_LIB_[0-9]+$"))

; Terminals: a new pseudo-terminal.
(allow pseudo-tty)
(allow file-read* file-write* file-ioctl (literal "/dev/ptmx"))
; Only pseudo-terminals made inside the sandbox (the extension marks
; them), as codex's base policy: never the user's other terminals.
(allow file-read* file-write-data file-ioctl
  (require-all (regex #"^/dev/ttys[0-9]+$") (extension "com.apple.sandbox.pty")))

; Files: everything is readable (but the hidden paths, below) — and of
; the terminals only those made inside the sandbox, not the user's others.
(allow file-read*)
(deny file-read* file-write* file-ioctl
  (require-all (regex #"^/dev/ttys[0-9]+$") (require-not (extension "com.apple.sandbox.pty"))))
; Devices every command may write: data only, never unlink or chmod.
(allow file-write-data file-ioctl
  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/random")
  (literal "/dev/urandom")
  (literal "/dev/tty")
  (literal "/dev/dtracehelper")
  (literal "/dev/stdout")
  (literal "/dev/stderr")
  (regex #"^/dev/fd/[0-9]+$"))
"#;

/// With the network: all of it, and the services TLS and DNS go through.
const NETWORK: &str = r#"
; Network: all of it, and the services TLS and DNS go through.
(allow network*)
(allow system-socket)
(allow mach-lookup
  (global-name "com.apple.SecurityServer")
  (global-name "com.apple.trustd.agent")
  (global-name "com.apple.ocspd")
  (global-name "com.apple.networkd")
  (global-name "com.apple.SystemConfiguration.DNSConfiguration")
  (global-name "com.apple.SystemConfiguration.configd")
  (global-name "com.apple.bsd.dirhelper")
  (global-name "com.apple.system.opendirectoryd.membership"))
"#;

/// The profile for `sandbox`. Its paths are parameters: run it with
/// [`command_args`], which passes them.
pub fn profile(sandbox: &Sandbox) -> String {
    build(sandbox).0
}

/// The arguments for [`SANDBOX_EXEC`] that run `program args…` inside
/// `sandbox`: `-p <profile>`, `-D NAME=/path` for each path, `--`, the
/// program and its arguments. The paths must be absolute and canonical.
pub fn command_args(sandbox: &Sandbox, program: &OsStr, args: &[OsString]) -> Vec<OsString> {
    let (profile, params) = build(sandbox);
    let mut out = vec![OsString::from("-p"), OsString::from(profile)];
    for (name, path) in params {
        let mut definition = OsString::from(name);
        definition.push("=");
        definition.push(path.as_os_str());
        out.push(OsString::from("-D"));
        out.push(definition);
    }
    out.push(OsString::from("--"));
    out.push(program.to_owned());
    out.extend(args.iter().cloned());
    out
}

/// The parameters of a profile being written: each path gets a name of its
/// own, and only the name goes into the text.
#[derive(Default)]
struct Params(Vec<(String, PathBuf)>);

impl Params {
    /// A new parameter `<kind>_<n>` for `path`, as the profile reads it.
    fn add(&mut self, kind: &str, path: &Path) -> String {
        let name = format!("{kind}_{}", self.0.len());
        self.0.push((name.clone(), path.to_owned()));
        format!("(param \"{name}\")")
    }
}

/// The profile's text and its parameters.
fn build(sandbox: &Sandbox) -> (String, Vec<(String, PathBuf)>) {
    let mut text = String::from(BASE);
    let mut params = Params::default();
    let writable: Vec<PathBuf> = sandbox.writable.iter().flat_map(|p| forms(p)).collect();
    let read_only: Vec<PathBuf> = sandbox.read_only.iter().flat_map(|p| forms(p)).collect();
    let hidden: Vec<PathBuf> = sandbox.hidden.iter().flat_map(|p| forms(p)).collect();

    text.push_str("\n; Writable paths.\n");
    let writable_params: Vec<String> = writable
        .iter()
        .map(|path| params.add("WRITABLE", path))
        .collect();
    for param in &writable_params {
        text.push_str(&format!("(allow file-write* (subpath {param}))\n"));
    }

    if sandbox.network {
        text.push_str(NETWORK);
    } else if !writable.is_empty() {
        // Unix sockets beneath the writable paths only: a command's own
        // servers, not the user's daemons.
        text.push_str("\n; No network; Unix sockets beneath the writable paths.\n");
        text.push_str("(allow system-socket (socket-domain AF_UNIX))\n");
        for param in &writable_params {
            text.push_str(&format!(
                "(allow network-bind (local unix-socket (subpath {param})))\n\
                 (allow network-outbound (remote unix-socket (subpath {param})))\n"
            ));
        }
    }

    // Later rules win: these denials come after every allow above.
    text.push_str("\n; Read-only paths, and the directories that lead to them.\n");
    for path in &read_only {
        let param = params.add("READ_ONLY", path);
        text.push_str(&format!(
            "(deny file-write* (literal {param}) (subpath {param}))\n"
        ));
    }
    for path in ancestors_in(&read_only, &writable) {
        let param = params.add("READ_ONLY_PARENT", &path);
        text.push_str(&format!("(deny file-write* (literal {param}))\n"));
    }

    text.push_str("\n; Hidden paths: not read, written, run or connected to.\n");
    for path in &hidden {
        let param = params.add("HIDDEN", path);
        text.push_str(&format!(
            "(deny file-read* file-write* process-exec (literal {param}) (subpath {param}))\n\
             (deny network-outbound (remote unix-socket (subpath {param})))\n"
        ));
    }
    (text, params.0)
}

/// `path` as Seatbelt may see it: itself and, under `/tmp`, `/var` or
/// `/etc` (links into `/private`), the `/private/…` path as well.
fn forms(path: &Path) -> Vec<PathBuf> {
    let mut forms = vec![path.to_owned()];
    if ["/tmp", "/var", "/etc"]
        .iter()
        .any(|link| path.starts_with(link))
    {
        if let Ok(relative) = path.strip_prefix("/") {
            forms.push(Path::new("/private").join(relative));
        }
    }
    forms
}

/// The directories between a writable path and each read-only path beneath
/// it (the writable path included, the read-only one not): renaming one
/// would carry the read-only path away from its rule.
fn ancestors_in(read_only: &[PathBuf], writable: &[PathBuf]) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    for path in read_only {
        for ancestor in path.ancestors().skip(1) {
            let beneath = writable.iter().any(|root| ancestor.starts_with(root));
            if beneath && ancestor.parent().is_some() && !found.iter().any(|p| p == ancestor) {
                found.push(ancestor.to_owned());
            }
        }
    }
    found
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn sandbox(writable: &[&str], read_only: &[&str], hidden: &[&str], network: bool) -> Sandbox {
        let paths = |list: &[&str]| list.iter().map(PathBuf::from).collect();
        Sandbox {
            writable: paths(writable),
            hidden: paths(hidden),
            read_only: paths(read_only),
            network,
        }
    }

    /// The `-D` definitions of `args`, as text.
    fn definitions(args: &[OsString]) -> Vec<String> {
        args.windows(2)
            .filter(|pair| pair[0] == "-D")
            .map(|pair| pair[1].to_string_lossy().into_owned())
            .collect()
    }

    /// The parameter the definitions give `path`.
    fn param_of(args: &[OsString], path: &str) -> Vec<String> {
        definitions(args)
            .into_iter()
            .filter_map(|definition| {
                let (name, value) = definition.split_once('=')?;
                (value == path).then(|| name.to_owned())
            })
            .collect()
    }

    /// Where `needle` first occurs in `profile`.
    fn at(profile: &str, needle: &str) -> usize {
        profile
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in\n{profile}"))
    }

    #[test]
    fn the_profile_denies_by_default_and_allows_what_commands_need() {
        let profile = profile(&Sandbox::default());
        assert!(profile.starts_with("(version 1)\n(deny default)\n"));
        for rule in [
            "(allow process-exec)",
            "(allow process-fork)",
            "(allow signal (target same-sandbox))",
            "(allow process-info* (target same-sandbox))",
            "(allow sysctl-read",
            "(allow mach-lookup",
            "(allow file-read*)",
            "(literal \"/dev/null\")",
        ] {
            assert!(profile.contains(rule), "{rule}");
        }
        assert!(!profile.contains("(allow default)"));
        // Sysctls by name, never all of kern.* (kern.procargs2).
        assert!(!profile.contains("(sysctl-name \"kern.procargs"));
        assert!(!profile.contains("(sysctl-name-prefix \"kern.\")"));
        assert!(!profile.contains("(sysctl-name-prefix \"kern.proc\")"));
        // No rule without a filter grants writes or signals everywhere.
        assert!(!profile.contains("(allow file-write*)"));
        assert!(!profile.contains("(allow signal)"));
        assert_eq!(balance(&profile), 0);
    }

    #[test]
    fn paths_are_parameters_never_profile_text() {
        let args = command_args(
            &sandbox(
                &["/Users/me/work", "/tmp/dsh-1"],
                &["/Users/me/work/.git/hooks"],
                &["/Users/me/.ssh"],
                false,
            ),
            OsStr::new("/bin/sh"),
            &[OsString::from("-c"), OsString::from("true")],
        );
        assert_eq!(args[0], "-p");
        let profile = args[1].to_string_lossy().into_owned();
        assert!(!profile.contains("/Users"), "{profile}");
        assert!(!profile.contains("dsh-1"), "{profile}");
        assert_eq!(
            param_of(&args, "/Users/me/work"),
            ["WRITABLE_0", "READ_ONLY_PARENT_5"]
        );
        assert_eq!(param_of(&args, "/private/tmp/dsh-1"), ["WRITABLE_2"]);
        assert_eq!(
            param_of(&args, "/Users/me/work/.git/hooks"),
            ["READ_ONLY_3"]
        );
        assert_eq!(param_of(&args, "/Users/me/.ssh"), ["HIDDEN_6"]);
        for definition in definitions(&args) {
            let name = definition.split('=').next().unwrap();
            assert!(
                profile.contains(&format!("(param \"{name}\")")),
                "{name} is defined but not used"
            );
        }
    }

    #[test]
    fn a_path_cannot_change_the_profile_structure() {
        let evil = "/w/a\") (allow default) (allow file-write* (subpath \"/\")) ;(\n\"";
        let plain = sandbox(&["/w/a"], &["/w/a/b"], &["/w/c"], false);
        let hostile = sandbox(
            &[evil],
            &[&format!("{evil}/b")],
            &["/w/c\n(allow network*)"],
            false,
        );
        assert_eq!(profile(&plain), profile(&hostile));
        let args = command_args(&hostile, OsStr::new("true"), &[]);
        assert!(definitions(&args)
            .iter()
            .any(|definition| definition == &format!("WRITABLE_0={evil}")));
    }

    #[test]
    fn without_network_there_is_no_network_rule_but_unix_sockets_beneath_writable_paths() {
        let profile = profile(&sandbox(&["/w"], &[], &[], false));
        assert!(!profile.contains("(allow network*"), "{profile}");
        assert!(!profile.contains("(allow network-outbound)"), "{profile}");
        assert!(!profile.contains("(allow network-inbound"), "{profile}");
        assert!(!profile.contains("(allow system-socket)"), "{profile}");
        assert!(profile.contains(
            "(allow network-outbound (remote unix-socket (subpath (param \"WRITABLE_0\"))))"
        ));
        assert!(profile.contains("(allow system-socket (socket-domain AF_UNIX))"));
        // Nothing writable: no socket at all.
        let profile = super::profile(&sandbox(&[], &[], &[], false));
        assert!(!profile.contains("network"), "{profile}");
        assert!(!profile.contains("system-socket"), "{profile}");
        // With it, all of it.
        let profile = super::profile(&sandbox(&["/w"], &[], &[], true));
        assert!(profile.contains("(allow network*)"));
        assert!(!profile.contains("unix-socket"), "{profile}");
    }

    #[test]
    fn read_only_paths_and_their_parents_are_denied_after_the_writable_allow() {
        let args = command_args(
            &sandbox(&["/w"], &["/w/.git/hooks", "/w/AGENTS.md"], &[], false),
            OsStr::new("true"),
            &[],
        );
        let profile = args[1].to_string_lossy().into_owned();
        let allow = at(
            &profile,
            "(allow file-write* (subpath (param \"WRITABLE_0\")))",
        );
        let hooks = param_of(&args, "/w/.git/hooks").pop().unwrap();
        let deny = at(
            &profile,
            &format!(
                "(deny file-write* (literal (param \"{hooks}\")) (subpath (param \"{hooks}\")))"
            ),
        );
        assert!(allow < deny);
        // `.git` and the workspace itself cannot be renamed away; nothing
        // above the writable path is listed.
        for parent in ["/w/.git", "/w"] {
            let name = param_of(&args, parent)
                .into_iter()
                .find(|name| name.starts_with("READ_ONLY_PARENT_"))
                .unwrap_or_else(|| panic!("{parent}"));
            assert!(
                allow
                    < at(
                        &profile,
                        &format!("(deny file-write* (literal (param \"{name}\")))")
                    )
            );
        }
        assert!(param_of(&args, "/").is_empty());
        assert_eq!(param_of(&args, "/w").len(), 2, "writable, parent");
    }

    #[test]
    fn hidden_paths_are_neither_read_nor_written_even_beneath_a_writable_path() {
        let args = command_args(
            &sandbox(&["/home/me"], &[], &["/home/me/.ssh"], true),
            OsStr::new("true"),
            &[],
        );
        let profile = args[1].to_string_lossy().into_owned();
        let name = param_of(&args, "/home/me/.ssh").pop().unwrap();
        let deny = at(
            &profile,
            &format!(
                "(deny file-read* file-write* process-exec (literal (param \"{name}\")) \
                 (subpath (param \"{name}\")))"
            ),
        );
        assert!(at(&profile, "(allow file-read*)") < deny);
        assert!(at(&profile, "(param \"WRITABLE_0\")") < deny);
        assert!(at(&profile, "(allow network*)") < deny);
        assert!(profile.contains(&format!(
            "(deny network-outbound (remote unix-socket (subpath (param \"{name}\"))))"
        )));
    }

    #[test]
    fn paths_under_the_private_links_get_both_forms() {
        let args = command_args(
            &sandbox(
                &["/tmp/x", "/var/folders/ab/T", "/tmpfoo"],
                &[],
                &["/etc/secret"],
                true,
            ),
            OsStr::new("true"),
            &[],
        );
        let values: Vec<String> = definitions(&args)
            .iter()
            .map(|definition| definition.split_once('=').unwrap().1.to_owned())
            .collect();
        for path in [
            "/tmp/x",
            "/private/tmp/x",
            "/var/folders/ab/T",
            "/private/var/folders/ab/T",
            "/etc/secret",
            "/private/etc/secret",
            "/tmpfoo",
        ] {
            assert!(values.iter().any(|value| value == path), "{path}");
        }
        assert!(!values.iter().any(|value| value == "/private/tmpfoo"));
        assert_eq!(
            forms(Path::new("/tmp")),
            [Path::new("/tmp"), Path::new("/private/tmp")]
        );
    }

    #[test]
    fn the_arguments_end_with_the_command() {
        let args = command_args(
            &sandbox(&["/w"], &[], &[], true),
            OsStr::new("/bin/sh"),
            &[OsString::from("-c"), OsString::from("echo -- hi")],
        );
        assert_eq!(args[0], "-p");
        assert_eq!(
            &args[2..4],
            [OsString::from("-D"), OsString::from("WRITABLE_0=/w")]
        );
        assert_eq!(
            &args[args.len() - 4..],
            ["--", "/bin/sh", "-c", "echo -- hi"].map(OsString::from)
        );
        assert_eq!(args.iter().filter(|arg| *arg == "--").count(), 1);
    }

    /// Open minus closed parentheses outside strings, regexes and comments
    /// (0 for a well-formed profile).
    fn balance(profile: &str) -> i64 {
        let mut depth = 0;
        for line in profile.lines() {
            let mut in_string = false;
            for c in line.chars() {
                match c {
                    '"' => in_string = !in_string,
                    ';' if !in_string => break,
                    '(' if !in_string => depth += 1,
                    ')' if !in_string => depth -= 1,
                    _ => {}
                }
            }
        }
        depth
    }
}
