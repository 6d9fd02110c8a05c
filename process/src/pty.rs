//! Pseudo-terminals for persistent shells (Unix): a master dsh reads and
//! writes, a slave that becomes a guarded command's stdin, stdout and
//! stderr. The shell that runs on it is started like any command
//! ([`crate::Spawner::guarded`]): the guard gives it a session of its
//! own and makes the slave, its stdin, that session's controlling
//! terminal (`adopt_stdin_terminal`), so job control works and a `^C`
//! or a signal reaches the foreground job, not the shell.
//!
//! On Linux the pair is opened close-on-exec from the start
//! (`posix_openpt` with `O_CLOEXEC | O_NOCTTY`, then the slave by its
//! name with `O_CLOEXEC | O_NOCTTY`), so no child another thread of dsh
//! starts meanwhile inherits the terminal. Elsewhere it comes from
//! `openpty` and both ends are marked close-on-exec right after: a spawn
//! on another thread in between could inherit them. The master reports
//! end of file (Linux: `EIO`) once every process that had the slave open
//! is gone.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// A signal a terminal's foreground job may be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PtySignal {
    /// SIGINT (what `^C` sends).
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGKILL.
    Kill,
    /// SIGTSTP (what `^Z` sends).
    Stop,
    /// SIGHUP.
    Hangup,
}

impl PtySignal {
    fn unix(self) -> nix::sys::signal::Signal {
        use nix::sys::signal::Signal;
        match self {
            PtySignal::Interrupt => Signal::SIGINT,
            PtySignal::Terminate => Signal::SIGTERM,
            PtySignal::Kill => Signal::SIGKILL,
            PtySignal::Stop => Signal::SIGTSTP,
            PtySignal::Hangup => Signal::SIGHUP,
        }
    }
}

/// One pseudo-terminal.
#[derive(Debug)]
pub struct Pty {
    master: OwnedFd,
    /// dsh's copy of the slave, until the command has it
    /// ([`Pty::release_slave`]).
    slave: Option<OwnedFd>,
    path: PathBuf,
}

/// A master and slave, both close-on-exec from the start, and the
/// slave's path; the window `size`.
#[cfg(target_os = "linux")]
fn pair(size: &nix::pty::Winsize) -> io::Result<(OwnedFd, OwnedFd, PathBuf)> {
    use nix::fcntl::OFlag;
    use std::os::fd::{FromRawFd, IntoRawFd};
    use std::os::unix::fs::OpenOptionsExt;
    let master = nix::pty::posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC)?;
    nix::pty::grantpt(&master)?;
    nix::pty::unlockpt(&master)?;
    let path = PathBuf::from(nix::pty::ptsname_r(&master)?);
    // SAFETY: the descriptor was just taken out of `master`, which owned it.
    #[allow(unsafe_code)]
    let master = unsafe { OwnedFd::from_raw_fd(master.into_raw_fd()) };
    // std opens with O_CLOEXEC.
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(&path)?;
    let slave = OwnedFd::from(slave);
    {
        use std::os::fd::AsRawFd;
        let size = libc::winsize {
            ws_row: size.ws_row,
            ws_col: size.ws_col,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one `winsize`, which lives on the stack.
        #[allow(unsafe_code)]
        let set = unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        if set != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((master, slave, path))
}

/// The same from `openpty`, marked close-on-exec after (not atomic).
#[cfg(not(target_os = "linux"))]
fn pair(size: &nix::pty::Winsize) -> io::Result<(OwnedFd, OwnedFd, PathBuf)> {
    let pair = nix::pty::openpty(size, None).map_err(io::Error::from)?;
    cloexec(&pair.master)?;
    cloexec(&pair.slave)?;
    let path = nix::unistd::ttyname(pair.slave.as_fd()).map_err(io::Error::from)?;
    Ok((pair.master, pair.slave, path))
}

/// Marks `fd` close-on-exec.
#[cfg(not(target_os = "linux"))]
fn cloexec(fd: &OwnedFd) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    use std::os::fd::AsRawFd;
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))
        .map(drop)
        .map_err(io::Error::from)
}

impl Pty {
    /// A new terminal of `rows` × `cols`.
    ///
    /// # Errors
    /// No terminal could be allocated.
    pub fn open(rows: u16, cols: u16) -> io::Result<Pty> {
        let size = nix::pty::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let (master, slave, path) = pair(&size)?;
        Ok(Pty {
            master,
            slave: Some(slave),
            path,
        })
    }

    /// The slave's device path (`/dev/pts/N`; a sandboxed command's
    /// mount namespace has a devpts of its own, where it does not exist).
    pub fn slave_path(&self) -> &Path {
        &self.path
    }

    /// The slave as a child's stdin, stdout and stderr.
    ///
    /// # Errors
    /// The slave was released, or could not be duplicated.
    pub fn stdio(&self) -> io::Result<[Stdio; 3]> {
        let slave = self
            .slave
            .as_ref()
            .ok_or_else(|| io::Error::other("the terminal's slave was released"))?;
        Ok([
            Stdio::from(slave.try_clone()?),
            Stdio::from(slave.try_clone()?),
            Stdio::from(slave.try_clone()?),
        ])
    }

    /// Closes dsh's copy of the slave once the command holds it, so the
    /// master sees the end when the command's processes are gone.
    pub fn release_slave(&mut self) {
        self.slave = None;
    }

    /// The master, for reading the terminal's output (blocking).
    ///
    /// # Errors
    /// The descriptor could not be duplicated.
    pub fn reader(&self) -> io::Result<File> {
        Ok(File::from(self.master.try_clone()?))
    }

    /// The master, for typing into the terminal (blocking).
    ///
    /// # Errors
    /// The descriptor could not be duplicated.
    pub fn writer(&self) -> io::Result<File> {
        Ok(File::from(self.master.try_clone()?))
    }

    /// The terminal's foreground process group, if a session has it as
    /// its controlling terminal.
    pub fn foreground_group(&self) -> Option<u32> {
        nix::unistd::tcgetpgrp(self.master.as_fd())
            .ok()
            .map(|pid| pid.as_raw())
            .filter(|pid| *pid > 0)
            .map(|pid| pid as u32)
    }

    /// The session whose controlling terminal this is: its leader's pid
    /// (the shell's).
    pub fn session_leader(&self) -> Option<u32> {
        use std::os::fd::AsRawFd;
        // SAFETY: tcgetsid reads a descriptor this value owns; it touches
        // no memory.
        #[allow(unsafe_code)]
        let sid = unsafe { libc::tcgetsid(self.master.as_raw_fd()) };
        (sid > 0).then_some(sid as u32)
    }

    /// Sends `signal` to the foreground process group; returns the group,
    /// or `None` when there is none (no controlling session) or it is gone.
    pub fn signal_foreground(&self, signal: PtySignal) -> Option<u32> {
        let group = self.foreground_group()?;
        nix::sys::signal::killpg(nix::unistd::Pid::from_raw(group as i32), signal.unix())
            .ok()
            .map(|()| group)
    }
}

/// In a command the guard starts, between `fork` and `exec`, after it
/// got a session of its own: when its stdin is a terminal, that terminal
/// becomes its controlling terminal (`TIOCSCTTY`), so a shell on a
/// [`Pty`] has job control and `^C` reaches its foreground job. Only a
/// terminal no session has yet is taken: dsh's own terminal (the user's
/// shell's) is refused by the kernel, and dsh gives other commands
/// `/dev/null`. Errors are ignored: the shell then runs without job
/// control. Only system calls (async-signal-safe).
pub(crate) fn adopt_stdin_terminal() {
    // SAFETY: isatty and ioctl on descriptor 0 with an integer argument;
    // no memory is touched.
    #[allow(unsafe_code)]
    unsafe {
        if libc::isatty(0) == 1 {
            libc::ioctl(0, libc::TIOCSCTTY as _, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn what_is_written_to_the_slave_is_read_from_the_master() {
        let pty = Pty::open(24, 80).unwrap();
        assert!(pty.slave_path().starts_with("/dev"));
        let [_, out, _] = pty.stdio().unwrap();
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "printf 'hello\\n'"])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child.wait().unwrap();
        let mut reader = pty.reader().unwrap();
        let mut buf = [0u8; 64];
        let n = reader.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello\r\n", "the line discipline adds \\r");
        // Input typed at the master is echoed back.
        pty.writer().unwrap().write_all(b"x").unwrap();
        let n = reader.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"x");
        // No session has it: no foreground group.
        assert_eq!(pty.foreground_group(), None);
    }

    #[test]
    fn both_ends_are_close_on_exec_and_the_window_has_its_size() {
        use nix::fcntl::{fcntl, FcntlArg, FdFlag};
        use std::os::fd::AsRawFd;
        let pty = Pty::open(24, 80).unwrap();
        let slave = pty.slave.as_ref().unwrap();
        for fd in [&pty.master, slave] {
            let flags = fcntl(fd.as_raw_fd(), FcntlArg::F_GETFD).unwrap();
            assert!(FdFlag::from_bits_truncate(flags).contains(FdFlag::FD_CLOEXEC));
        }
        let size = nix::sys::termios::tcgetattr(slave.as_fd()).map(drop);
        assert!(size.is_ok(), "the slave is a terminal");
        let out = std::process::Command::new("stty")
            .arg("size")
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "24 80");
    }
}
