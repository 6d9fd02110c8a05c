use super::*;
use dsh_protocol::log::{Event, EventData};
use file::{parse_line, write_line};

fn event_line(seq: u64, data: EventData) -> String {
    let event = Event {
        seq,
        time: 1,
        ignorable: false,
        data,
    };
    serde_json::to_string(&event).unwrap() + "\n"
}

fn title(title: &str) -> EventData {
    EventData::Title {
        title: title.to_owned(),
        usage: None,
    }
}

fn log(dir: &Path, id: &str, title_of: Option<&str>) {
    let header = SessionHeader::new(
        dsh_protocol::SessionId::new(id),
        1,
        format!("/work/{id}"),
        Vec::new(),
    );
    let mut text = serde_json::to_string(&header).unwrap() + "\n";
    if let Some(title_of) = title_of {
        text += &event_line(1, title(title_of));
    }
    std::fs::write(dir.join(format!("{id}.jsonl")), text).unwrap();
}

/// An index that never trusts the directory (every listing `stat`s the
/// logs), for tests that write logs by hand: a stalled machine must not
/// let the directory settle under them.
fn untrusting(dir: &Path) -> Index {
    Index {
        settle: Duration::from_secs(24 * 3600),
        ..Index::new(dir.join(FILE))
    }
}

fn summarize_file(path: &Path) -> Summary {
    let len = std::fs::metadata(path).unwrap().len();
    summarize(std::fs::File::open(path).unwrap(), len, &mut Vec::new())
}

fn titles(index: &Index, dir: &Path) -> Vec<(String, Option<String>)> {
    let mut listed: Vec<(String, Option<String>)> = index
        .list(dir)
        .into_iter()
        .map(|s| (s.id.to_string(), s.title.as_deref().map(str::to_owned)))
        .collect();
    listed.sort();
    listed
}

#[test]
fn the_index_follows_the_logs() {
    let dir = tempfile::tempdir().unwrap();
    log(dir.path(), "a", Some("first"));
    log(dir.path(), "b", None);
    let index = untrusting(dir.path());
    assert_eq!(
        titles(&index, dir.path()),
        [("a".into(), Some("first".into())), ("b".into(), None)]
    );
    // Saved: a new process reads the index, not the logs.
    let saved = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
    assert!(saved.starts_with("dsh-session-index\t4\n-\n"), "{saved}");
    assert!(saved.contains("\t/work/a\t+first\n"), "{saved}");
    // A log written since, a new log and a deleted log.
    log(dir.path(), "b", Some("now titled"));
    log(dir.path(), "c", None);
    std::fs::remove_file(dir.path().join("a.jsonl")).unwrap();
    let fresh = untrusting(dir.path());
    let expected = [("b".into(), Some("now titled".into())), ("c".into(), None)];
    assert_eq!(titles(&fresh, dir.path()), expected);
    assert_eq!(titles(&index, dir.path()), expected);
    // A corrupt index is rebuilt; a corrupt line is read again from
    // its log.
    std::fs::write(dir.path().join(FILE), "{not json").unwrap();
    assert_eq!(titles(&untrusting(dir.path()), dir.path()), expected);
    let saved = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
    std::fs::write(
        dir.path().join(FILE),
        saved.replace("\t+now titled", "\tbroken"),
    )
    .unwrap();
    assert_eq!(titles(&untrusting(dir.path()), dir.path()), expected);
}

/// A FIFO or a link named like a log is not a log: the listing neither
/// blocks on it nor follows it.
#[cfg(unix)]
#[test]
fn only_regular_files_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    log(dir.path(), "a", Some("first"));
    let fifo = dir.path().join("f.jsonl");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::os::unix::fs::symlink(dir.path().join("a.jsonl"), dir.path().join("l.jsonl")).unwrap();
    // Built (the logs opened), then read with the index (the logs
    // `stat`ed).
    for _ in 0..2 {
        let index = untrusting(dir.path());
        assert_eq!(
            titles(&index, dir.path()),
            [("a".into(), Some("first".into()))]
        );
    }
}

/// An index built by opening every log records what a `stat` of each
/// finds: the next process reads no log again, and does not rewrite the
/// index.
#[cfg(unix)]
#[test]
fn a_built_index_is_up_to_date_for_the_next_process() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    for i in 0..(PARALLEL_FROM * 2) {
        log(dir.path(), &format!("s{i:04}"), Some("t"));
    }
    let built = titles(&untrusting(dir.path()), dir.path());
    let saved = std::fs::metadata(dir.path().join(FILE)).unwrap();
    assert_eq!(titles(&untrusting(dir.path()), dir.path()), built);
    let after = std::fs::metadata(dir.path().join(FILE)).unwrap();
    assert_eq!(
        (after.ino(), after.mtime_nsec()),
        (saved.ino(), saved.mtime_nsec())
    );
    // A log written since is read again, and the index saved again.
    log(dir.path(), "s0000", Some("new"));
    let listed = titles(&untrusting(dir.path()), dir.path());
    assert_eq!(listed[0], ("s0000".into(), Some("new".into())));
    assert_ne!(
        std::fs::metadata(dir.path().join(FILE)).unwrap().ino(),
        saved.ino()
    );
}

#[test]
fn index_lines_keep_every_character() {
    let entry = Entry {
        len: 12,
        mtime_ns: 1_700_000_000_123_456_789,
        cwd: "/work/tab\there\\back\nline".into(),
        roots: vec!["/r1".to_owned(), "/r\t2".to_owned()].into(),
        title: Some("".into()),
        parent: Some("parent-1".into()),
        seen: 0,
    };
    let mut text = String::new();
    write_line(&mut text, "id-1", &entry);
    assert_eq!(text.matches('\n').count(), 1);
    let (id, read) = parse_line(text.trim_end_matches('\n'), &mut Shared::default()).unwrap();
    assert_eq!(&*id, "id-1");
    assert_eq!(read, entry);
    let untitled = Entry {
        title: None,
        roots: Vec::new().into(),
        parent: None,
        ..entry
    };
    let mut text = String::new();
    write_line(&mut text, "id-2", &untitled);
    assert_eq!(
        parse_line(text.trim_end(), &mut Shared::default())
            .unwrap()
            .1,
        untitled
    );
    assert!(parse_line("id\t1\t2\t-\t/cwd\tno-marker", &mut Shared::default()).is_none());
    assert!(parse_line("id\tx\t2\t-\t/cwd\t-", &mut Shared::default()).is_none());
    assert!(parse_line("id\t1\t2\t-\t/bad\\escape\t-", &mut Shared::default()).is_none());
    assert!(parse_line("id\t1\t2\t/cwd\t-", &mut Shared::default()).is_none());
}

#[test]
fn the_title_is_the_last_one_whatever_the_line_order() {
    let dir = tempfile::tempdir().unwrap();
    let header = SessionHeader::new(
        dsh_protocol::SessionId::new("t"),
        1,
        "/work/t".to_owned(),
        Vec::new(),
    );
    let prompt = EventData::TurnStart { turn: 1 };
    let long = EventData::Notice {
        text: "x".repeat(20_000),
    };
    let end = || EventData::TurnEnd {
        turn: 1,
        stop: Some(dsh_protocol::log::StopReason::EndTurn),
        error: None,
    };
    // dsh's own order: seq, time, type, data.
    let text = serde_json::to_string(&header).unwrap()
        + "\n"
        + &event_line(1, title("From the prompt"))
        + &event_line(2, prompt)
        + &event_line(3, long)
        + &event_line(4, title("From the model"))
        + &event_line(5, end())
        + &event_line(6, title("After the turn"));
    let path = dir.path().join("t.jsonl");
    std::fs::write(&path, text).unwrap();
    let (_, found) = summarize_file(&path).unwrap();
    // The model's title may come after the first turn ended.
    assert_eq!(found.as_deref(), Some("After the turn"));
    // Keys in another order (another writer): found by searching.
    let sorted = |line: String| {
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        value.to_string() + "\n"
    };
    let text = serde_json::to_string(&header).unwrap()
        + "\n"
        + &sorted(event_line(1, title("Sorted keys")))
        + &sorted(event_line(2, end()))
        + &sorted(event_line(3, title("After the end")));
    std::fs::write(&path, text).unwrap();
    let (_, found) = summarize_file(&path).unwrap();
    assert_eq!(found.as_deref(), Some("After the end"));
    assert_eq!(
        leading_type(br#"{"seq":3,"time":9,"ignorable":true,"type":"llm/retry","data":{}}"#),
        Some(&b"llm/retry"[..])
    );
    assert_eq!(leading_type(br#"{"data":{"type":"x"},"seq":1}"#), None);
    assert_eq!(
        leading_type(br#"{"seq":1,"data":{"a":{"type":"x"}}}"#),
        None
    );
}

#[test]
fn many_logs_are_summarized_on_threads_in_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..(PARALLEL_FROM * 3) {
        let title = (i % 2 == 0).then(|| format!("title {i}"));
        log(dir.path(), &format!("s{i:04}"), title.as_deref());
    }
    let listed = titles(&untrusting(dir.path()), dir.path());
    assert_eq!(listed.len(), PARALLEL_FROM * 3);
    for (i, (id, title)) in listed.iter().enumerate() {
        assert_eq!(id, &format!("s{i:04}"));
        assert_eq!(title, &(i % 2 == 0).then(|| format!("title {i}")));
    }
}

/// An index whose directory settles in 50 ms (the test's clock), not 2 s.
#[cfg(unix)]
fn quick(dir: &Path) -> Index {
    Index {
        settle: Duration::from_millis(50),
        ..Index::new(dir.join(FILE))
    }
}

fn pass(index: &Index) -> Pass {
    index.entries.lock().unwrap().as_ref().unwrap().pass
}

#[cfg(unix)]
fn settle() {
    std::thread::sleep(Duration::from_millis(80));
}

/// While the sessions directory stays as it was when the index was
/// saved, a listing reads the index alone; every write of a dsh log
/// writer (an append, a torn line cut) is seen by the next listing, in
/// the same process and a new one.
#[cfg(unix)]
#[test]
fn an_unchanged_directory_is_listed_from_the_index_alone() {
    let dir = tempfile::tempdir().unwrap();
    log(dir.path(), "a", Some("first"));
    log(dir.path(), "b", None);
    let store = super::super::SessionStore::new(dir.path().to_owned());
    let listed = vec![("a".into(), Some("first".into())), ("b".into(), None)];
    // Just written: not trusted yet.
    let built = quick(dir.path());
    assert_eq!(titles(&built, dir.path()), listed);
    assert_eq!(pass(&built), Pass::Built);
    settle();
    let scanned = quick(dir.path());
    assert_eq!(titles(&scanned, dir.path()), listed);
    assert_eq!(pass(&scanned), Pass::Scanned(0));
    let saved = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
    assert!(file::saved_stamp(&saved).is_some(), "{saved}");
    let fresh = quick(dir.path());
    for _ in 0..2 {
        assert_eq!(titles(&fresh, dir.path()), listed);
        assert_eq!(pass(&fresh), Pass::Unchanged);
    }
    // An append by a dsh writer.
    let mut writer = store.open("b").unwrap().finish().unwrap();
    writer.append(title("now titled")).unwrap();
    let listed = vec![
        ("a".into(), Some("first".into())),
        ("b".into(), Some("now titled".into())),
    ];
    for index in [&quick(dir.path()), &fresh] {
        assert_eq!(titles(index, dir.path()), listed);
        assert_eq!(pass(index), Pass::Scanned(1));
    }
    drop(writer);
    // A torn line (left by a crash: no dsh writer touched the directory
    // after it) cut by the next writer.
    settle();
    assert_eq!(titles(&fresh, dir.path()), listed);
    assert_eq!(pass(&fresh), Pass::Scanned(0));
    assert_eq!(titles(&fresh, dir.path()), listed);
    assert_eq!(pass(&fresh), Pass::Unchanged);
    std::thread::sleep(Duration::from_millis(20));
    let mut torn = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("a.jsonl"))
        .unwrap();
    torn.write_all(b"{\"seq\":2,\"ti").unwrap();
    drop(store.open("a").unwrap().finish().unwrap());
    assert_eq!(titles(&fresh, dir.path()), listed);
    assert_eq!(pass(&fresh), Pass::Scanned(1));
    // A line of the saved index that cannot be read: not trusted, and its
    // log read again.
    settle();
    assert_eq!(titles(&fresh, dir.path()), listed);
    let saved = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
    assert!(file::saved_stamp(&saved).is_some(), "{saved}");
    std::fs::write(dir.path().join(FILE), saved.replace("\t+first", "\tbroken")).unwrap();
    let reread = quick(dir.path());
    assert_eq!(titles(&reread, dir.path()), listed);
    assert_eq!(pass(&reread), Pass::Scanned(1));
    // A log created and one removed.
    settle();
    assert_eq!(titles(&fresh, dir.path()), listed);
    log(dir.path(), "c", Some("third"));
    std::fs::remove_file(dir.path().join("a.jsonl")).unwrap();
    assert_eq!(
        titles(&quick(dir.path()), dir.path()),
        [
            ("b".into(), Some("now titled".into())),
            ("c".into(), Some("third".into()))
        ]
    );
}

/// A directory that changed less than the settling time ago is not
/// trusted, however often it is listed: each listing `stat`s the logs.
#[test]
fn a_directory_that_just_changed_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    log(dir.path(), "a", Some("first"));
    let index = Index {
        settle: Duration::from_secs(3600),
        ..untrusting(dir.path())
    };
    titles(&index, dir.path());
    for _ in 0..2 {
        titles(&index, dir.path());
        assert_eq!(pass(&index), Pass::Scanned(0));
    }
    let saved = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
    assert_eq!(file::saved_stamp(&saved), None, "{saved}");
}

/// The stamp is kept only with every line of the index: a line that
/// cannot be read drops it, so its log is read again.
#[test]
fn a_stamp_is_kept_only_with_every_line() {
    let entry = Entry {
        len: 1,
        mtime_ns: 2,
        cwd: "/w".into(),
        roots: Vec::new().into(),
        title: None,
        parent: None,
        seen: 0,
    };
    let mut entries = Entries {
        stamp: Some((7, 1_700_000_000_000_000_001)),
        ..Entries::default()
    };
    entries.by_id.insert("a".into(), entry.clone());
    let text = file::write(&entries);
    assert_eq!(file::saved_stamp(&text), entries.stamp);
    let read = file::read(&text).unwrap();
    assert_eq!(
        (read.stamp, read.by_id.get("a")),
        (entries.stamp, Some(&entry))
    );
    let broken = text.replace("\t/w\t-", "\t/w\tbroken");
    let read = file::read(&broken).unwrap();
    assert_eq!((read.stamp, read.by_id.len()), (None, 0));
    assert!(file::read("dsh-session-index\t3\n").is_none());
    // A large index: the same entries; a broken line anywhere drops the
    // stamp.
    for i in 0..6000 {
        let entry = Entry {
            title: Some(format!("title {i} of a session with a longer name").into()),
            cwd: format!("/w{}", i % 3).into(),
            ..entry.clone()
        };
        entries.by_id.insert(format!("s{i}").into(), entry);
    }
    let text = file::write(&entries);
    assert!(text.len() > 256 * 1024);
    let read = file::read(&text).unwrap();
    assert_eq!((read.stamp, &read.by_id), (entries.stamp, &entries.by_id));
    for at in [text.len() / 4, text.len() * 3 / 4] {
        // The line holding byte `at`, its title field made unreadable.
        let start = text[..at].rfind('\n').unwrap() + 1;
        let title = start + text[start..].find("\t+").unwrap() + 1;
        let mut broken = text.clone();
        broken.replace_range(title..=title, "?");
        let read = file::read(&broken).unwrap();
        assert_eq!((read.stamp, read.by_id.len()), (None, 6000));
    }
}
