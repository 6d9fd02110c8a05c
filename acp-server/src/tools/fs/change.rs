//! `write` and `edit`: the change is stored (through the editor or on
//! disk), then described: a whole-file diff the editor can review, or a
//! summary past a size, and a count of the lines changed computed with a
//! deadline.

use std::path::Path;

use dsh_protocol::tool::{FileDiff, ToolContent, ToolOutcome, ToolView};
use dsh_protocol::ErrorCode;

use super::disk::{blocking, current_text, store, Current};
use super::{location, EditArgs, WriteArgs, DIFF_DEADLINE, MAX_DIFF_BYTES, MAX_EDIT_BYTES};
use crate::tools::ToolEnv;

/// The 1-based line where `new` first differs from `old`, within `new`
/// (line 1 when nothing changed).
fn first_changed_line(old: &str, new: &str) -> u32 {
    let same = old
        .lines()
        .zip(new.lines())
        .take_while(|(a, b)| a == b)
        .count();
    if old == new {
        return 1;
    }
    (same + 1).min(new.lines().count().max(1)) as u32
}

/// "+3 -1 lines": counted with a deadline, so a pathological rewrite costs
/// at most [`DIFF_DEADLINE`] (the count is then approximate).
fn change_summary(old: &str, new: &str) -> String {
    let started = std::time::Instant::now();
    let diff = similar::TextDiff::configure()
        .deadline(started + DIFF_DEADLINE)
        .diff_lines(old, new);
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    if started.elapsed() >= DIFF_DEADLINE {
        format!("about +{added} -{removed} lines")
    } else {
        format!("+{added} -{removed} lines")
    }
}

/// The final view of a change: a whole-file diff the editor can review,
/// or a summary when a side is over [`MAX_DIFF_BYTES`].
fn diff_view(path: &Path, old: &Current, new: &str) -> ToolView {
    let (old_text, old_len) = match old {
        Current::Missing => (None, 0),
        Current::Text(text) => (Some(text.as_str()), text.len() as u64),
        Current::TooLarge(size) => (None, *size),
    };
    let line = first_changed_line(old_text.unwrap_or(""), new);
    let too_big = matches!(old, Current::TooLarge(_))
        || old_len > MAX_DIFF_BYTES
        || new.len() as u64 > MAX_DIFF_BYTES;
    let content = if too_big {
        vec![ToolContent::Text {
            text: format!(
                "{} changed ({old_len} → {} bytes); the diff is too large to show (over {} MiB a side).",
                path.display(),
                new.len(),
                MAX_DIFF_BYTES / (1024 * 1024)
            ),
        }]
    } else {
        vec![ToolContent::Diff(FileDiff {
            path: path.display().to_string(),
            old_text: old_text.map(str::to_owned),
            new_text: new.to_owned(),
        })]
    };
    ToolView {
        locations: vec![location(path, line)],
        content,
        ..ToolView::default()
    }
}

/// Summary and view of a change, computed off the async workers.
pub(super) async fn describe_change(path: &Path, old: Current, new: String) -> (String, ToolView) {
    let owned = path.to_path_buf();
    let described = blocking(move || {
        let summary = match &old {
            Current::Text(old) => change_summary(old, &new),
            Current::Missing => format!("+{} lines", new.lines().count()),
            Current::TooLarge(size) => format!("replaced {size} bytes"),
        };
        Ok((summary, diff_view(&owned, &old, &new)))
    })
    .await;
    described.unwrap_or_else(|message| (message, ToolView::default()))
}

pub async fn write(args: &WriteArgs, path: &Path, env: &ToolEnv<'_>) -> ToolOutcome {
    let old = match current_text(path, MAX_DIFF_BYTES, env).await {
        Ok(old) => old,
        Err(message) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    if let Err(message) = store(path, &args.content, env).await {
        return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message);
    }
    let lines = args.content.lines().count();
    let created = matches!(old, Current::Missing);
    let (summary, view) = describe_change(path, old, args.content.clone()).await;
    let output = if created {
        format!("Created {} ({lines} lines).", path.display())
    } else {
        format!("Wrote {} ({lines} lines; {summary}).", path.display())
    };
    ToolOutcome::ok(output, view)
}

pub async fn edit(args: &EditArgs, path: &Path, env: &ToolEnv<'_>) -> ToolOutcome {
    if args.old_string.is_empty() {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            "old_string is empty; use write to create or replace a whole file.",
        );
    }
    if args.old_string == args.new_string {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            "old_string and new_string are identical; nothing to change.",
        );
    }
    let old = match current_text(path, MAX_EDIT_BYTES, env).await {
        Ok(Current::Text(old)) => old,
        Ok(Current::Missing) => {
            return ToolOutcome::failed(
                ErrorCode::InvalidToolArgs,
                format!(
                    "File not found: {}; use write to create it.",
                    path.display()
                ),
            )
        }
        Ok(Current::TooLarge(size)) => {
            return ToolOutcome::failed(
                ErrorCode::InvalidToolArgs,
                format!(
                    "{} is {size} bytes; edit handles files up to {} MiB. Use bash (sed, a script) for a file this large.",
                    path.display(),
                    MAX_EDIT_BYTES >> 20
                ),
            )
        }
        Err(message) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    let (old_string, new_string, replace_all) = (
        args.old_string.clone(),
        args.new_string.clone(),
        args.replace_all,
    );
    let owned = path.to_path_buf();
    let replaced = blocking(move || {
        let (old_string, new_string) = in_line_endings(&old, old_string, new_string);
        if old_string == new_string {
            return Err(
                "old_string and new_string are the same in the file's line endings; nothing to change."
                    .to_owned(),
            );
        }
        let found = find(&old, &old_string, "old_string", &owned)?;
        if found.count > 1 && !replace_all {
            return Err(format!(
                "old_string matches {} places in {} (lines {}). Include more surrounding context to make it unique, or set replace_all to true.",
                found.count,
                owned.display(),
                found.lines_shown(),
            ));
        }
        let new = if replace_all {
            old.replace(&old_string, &new_string)
        } else {
            old.replacen(&old_string, &new_string, 1)
        };
        Ok((old, new, found.count, found.lines[0]))
    })
    .await;
    let (old, new, count, first_line) = match replaced {
        Ok(replaced) => replaced,
        Err(message) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    if let Err(message) = store(path, &new, env).await {
        return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message);
    }
    let (summary, view) = describe_change(path, Current::Text(old), new).await;
    let output = format!(
        "Edited {}: replaced {count} occurrence{} at line {first_line} ({summary}).",
        path.display(),
        if count == 1 { "" } else { "s" },
    );
    ToolOutcome::ok(output, view)
}

/// `old_string` and `new_string` in the file's line endings. In a file
/// whose every line ends in CRLF (a Windows checkout), the model writes
/// `\n` alone (as `read` shows lines): an `old_string` that does not occur
/// as given is matched with CRLF, and `new_string`'s lines are written
/// with CRLF (also when `old_string` is one line), so the file stays
/// CRLF. Any other file, or text that occurs as given, is taken as given.
pub(super) fn in_line_endings(
    text: &str,
    old_string: String,
    new_string: String,
) -> (String, String) {
    let crlf = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
    let all_crlf = text.contains("\r\n") && !text.replace("\r\n", "").contains('\n');
    if !all_crlf {
        return (old_string, new_string);
    }
    let old_string = if old_string.contains('\n') && !text.contains(old_string.as_str()) {
        crlf(&old_string)
    } else {
        old_string
    };
    (old_string, crlf(&new_string))
}

/// Line numbers of matches a refusal names.
const SHOWN_MATCHES: usize = 10;

/// Where a string occurs in a text (`edit`'s and `str_replace_editor`'s
/// matching).
#[derive(Debug)]
pub(super) struct Matches {
    /// Byte offset of the first match.
    pub first: usize,
    /// Lines of the first [`SHOWN_MATCHES`] matches (1-based).
    pub lines: Vec<usize>,
    /// Matches in all (non-overlapping), counted without keeping where.
    pub count: usize,
}

impl Matches {
    /// "2, 3" — with ", …" when there are more than are shown.
    pub fn lines_shown(&self) -> String {
        let lines: Vec<String> = self.lines.iter().map(ToString::to_string).collect();
        let more = if self.count > self.lines.len() {
            ", …"
        } else {
            ""
        };
        format!("{}{more}", lines.join(", "))
    }
}

/// Finds `needle` (the parameter `name`) in `text`: the first match, the
/// lines of the first few, and a count of the rest (no positions kept).
///
/// # Errors
/// No match: what was looked for and where its first line appears.
pub(super) fn find(text: &str, needle: &str, name: &str, path: &Path) -> Result<Matches, String> {
    let mut starts = text.match_indices(needle).map(|(at, _)| at);
    let Some(first) = starts.next() else {
        return Err(not_found_message(text, needle, name, path));
    };
    let (mut line, mut counted_to) = (1, 0);
    let mut lines = Vec::with_capacity(SHOWN_MATCHES);
    for at in std::iter::once(first).chain(starts.by_ref().take(SHOWN_MATCHES - 1)) {
        line += text[counted_to..at].matches('\n').count();
        counted_to = at;
        lines.push(line);
    }
    let count = lines.len() + starts.count();
    Ok(Matches {
        first,
        lines,
        count,
    })
}

/// Explains a failed match: zero matches, and where the first line of
/// `needle` (the parameter `name`) does appear (with nearby lines) when
/// it does.
fn not_found_message(text: &str, needle: &str, name: &str, path: &Path) -> String {
    let mut message = format!("{name} was not found in {} (0 matches).", path.display());
    let first = needle
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    let lines: Vec<&str> = text.lines().collect();
    let hits: Vec<usize> = if first.is_empty() {
        Vec::new()
    } else {
        lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.contains(first))
            .map(|(i, _)| i)
            .take(3)
            .collect()
    };
    if hits.is_empty() {
        message.push_str(
            " Read the file again and copy the exact text, including whitespace and indentation.",
        );
        return message;
    }
    message.push_str(" Its first line appears here; check whitespace and the following lines:\n");
    for hit in hits {
        for (index, line) in lines
            .iter()
            .enumerate()
            .take(hit + 3)
            .skip(hit.saturating_sub(2))
        {
            message.push_str(&format!("{:>6}\t{}\n", index + 1, line));
        }
        message.push_str("   ...\n");
    }
    message
}

/// Peak memory of a piece of work, measured alone in a child process.
#[cfg(test)]
#[cfg(target_os = "linux")]
pub(super) mod peak {
    /// The growth of this process's peak resident memory, bytes, while
    /// `work` runs (`clear_refs` resets the peak; Linux).
    pub fn growth(work: impl FnOnce()) -> u64 {
        let kib = |field: &str| -> u64 {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let line = status.lines().find(|l| l.starts_with(field)).unwrap();
            line.split_whitespace().nth(1).unwrap().parse().unwrap()
        };
        std::fs::write("/proc/self/clear_refs", "5").unwrap();
        let before = kib("VmRSS:");
        work();
        kib("VmHWM:").saturating_sub(before) * 1024
    }

    /// Prints a measured growth (and what else the parent checks) for
    /// [`in_child`].
    pub fn report(growth: u64, note: &str) {
        use std::io::Write as _;
        writeln!(std::io::stdout(), "peak growth {growth} bytes, {note}").unwrap();
    }

    /// Runs the ignored test `test` alone in a child process with
    /// `DSH_PEAK` set to `arg`: the growth it reports, and its output.
    pub fn in_child(test: &str, arg: &str) -> (u64, String) {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "--nocapture",
                "--test-threads=1",
                test,
            ])
            .env("DSH_PEAK", arg)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&output.stdout).into_owned();
        let growth = out
            .split("peak growth ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{out}{}", String::from_utf8_lossy(&output.stderr)));
        (growth, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn huge_diffs_degrade_to_a_summary() {
        let big = "y".repeat(MAX_DIFF_BYTES as usize + 1);
        let view = diff_view(
            Path::new("/w/big.txt"),
            &Current::Text("old\n".into()),
            &big,
        );
        assert!(
            matches!(&view.content[0], ToolContent::Text { text } if text.contains("too large"))
        );
        let view = diff_view(Path::new("/w/small.txt"), &Current::Missing, "new\n");
        assert!(matches!(&view.content[0], ToolContent::Diff(diff) if diff.old_text.is_none()));
        let view = diff_view(
            Path::new("/w/huge.txt"),
            &Current::TooLarge(1 << 30),
            "new\n",
        );
        assert!(matches!(&view.content[0], ToolContent::Text { .. }));
    }

    /// Issue 10, items 13 and 20.
    #[test]
    fn first_changed_line_and_not_found_hints() {
        assert_eq!(first_changed_line("a\nb\nc\n", "a\nB\nc\n"), 2);
        assert_eq!(first_changed_line("a\n", "a\nb\n"), 2);
        assert_eq!(first_changed_line("one line\n", "one line\n"), 1);
        assert_eq!(first_changed_line("a\nb\n", "a\n"), 1);
        let hint = not_found_message(
            "fn main() {\n    let x = 1;\n}\n",
            "    let x = 2;",
            "old_string",
            Path::new("/w/m.rs"),
        );
        assert!(hint.contains("0 matches"));
        let hint = not_found_message(
            "fn main() {\n    let  x = 1;\n}\n",
            "fn main() {\n  let x",
            "old_string",
            Path::new("/w/m.rs"),
        );
        assert!(hint.contains("     1\tfn main() {"), "{hint}");
    }

    /// Issue 10, item 13: rewriting a 1.2 MB file of distinct lines (the
    /// worst case for a line diff) costs about the deadline, not a minute.
    #[test]
    fn the_change_count_has_a_deadline() {
        let old: String = (0..60_000u64)
            .map(|i| format!("line {i} {}\n", i * 7919 % 10007))
            .collect();
        let new: String = (0..60_000u64)
            .map(|i| format!("row {i} {}\n", i * 104729 % 10007))
            .collect();
        let started = std::time::Instant::now();
        let summary = change_summary(&old, &new);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(summary.contains('+'), "{summary}");
    }

    /// A CRLF file (a Windows checkout) takes an edit written with `\n`,
    /// and stays CRLF, new lines too; a LF file, a mixed one and a matching
    /// text are untouched.
    #[test]
    fn an_edit_written_with_lf_keeps_a_crlf_files_endings() {
        let text = "one\r\ntwo\r\nthree\r\n";
        let (old, new) = in_line_endings(text, "one\ntwo".into(), "1\n2\n2b".into());
        assert_eq!((old.as_str(), new.as_str()), ("one\r\ntwo", "1\r\n2\r\n2b"));
        assert_eq!(text.replacen(&old, &new, 1), "1\r\n2\r\n2b\r\nthree\r\n");
        let (old, new) = in_line_endings(text, "one".into(), "one\n  more".into());
        assert_eq!((old.as_str(), new.as_str()), ("one", "one\r\n  more"));
        let (old, new) = in_line_endings("one\ntwo\n", "one\ntwo".into(), "x\ny".into());
        assert_eq!((old.as_str(), new.as_str()), ("one\ntwo", "x\ny"));
        let (old, _) = in_line_endings("a\nb\r\n", "a\nb".into(), "x".into());
        assert_eq!(old, "a\nb", "a mixed file is taken as given");
    }

    /// The finder names the caller's parameter and keeps a few match
    /// positions, however many matches there are.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_finder_names_the_parameter_and_counts_without_keeping() {
        let path = Path::new("/w/f.txt");
        let err = find("alpha\n", "beta", "old_str", path).unwrap_err();
        assert!(err.starts_with("old_str was not found"), "{err}");
        let text: String = (0..30).map(|_| "x\n").collect();
        let found = find(&text, "x", "old_str", path).unwrap();
        assert_eq!((found.first, found.count), (0, 30));
        assert_eq!(found.lines, (1..=10).collect::<Vec<_>>());
        assert_eq!(found.lines_shown(), "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, …");
        let found = find("a\nb a\n", "a", "old_string", path).unwrap();
        assert_eq!((found.lines_shown(), found.count), ("1, 2".to_owned(), 2));
        let (growth, out) =
            peak::in_child("tools::fs::change::tests::peak_of_finding_every_byte", "32");
        assert!(out.contains("count 33554432"), "{out}");
        assert!(growth < 8 << 20, "{growth} bytes for a 32 MiB text");
    }

    /// Run alone in a child process: `a` in `DSH_PEAK` MiB of `a`.
    #[cfg(target_os = "linux")]
    #[test]
    #[ignore = "run by the_finder_names_the_parameter_and_counts_without_keeping"]
    fn peak_of_finding_every_byte() {
        let Ok(mib) = std::env::var("DSH_PEAK") else {
            return;
        };
        let text = "a".repeat(mib.parse::<usize>().unwrap() << 20);
        let mut count = 0;
        let growth = peak::growth(|| {
            count = find(&text, "a", "old_str", Path::new("/w/a"))
                .unwrap()
                .count;
        });
        peak::report(growth, &format!("count {count}"));
    }
}
