//! The index against logs written here: built, caught up, re-read after a
//! rewrite, forgotten, rebuilt when damaged.

use std::io::Write;
use std::path::Path;

use dsh_protocol::log::SessionHeader;
use dsh_protocol::SessionId;

use super::*;

fn header(id: &str, cwd: &str, created_at: u64) -> String {
    let header = SessionHeader::new(
        SessionId::new(id.to_owned()),
        created_at,
        cwd.to_owned(),
        vec![],
    );
    serde_json::to_string(&header).unwrap() + "\n"
}

fn prompt(seq: u64, text: &str) -> String {
    format!(
        "{}\n",
        serde_json::json!({"seq": seq, "time": 1000 + seq, "type": "user/message",
            "data": {"turn": 1, "content": [{"type": "text", "text": text}]}})
    )
}

fn append(dir: &Path, id: &str, text: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{id}.jsonl")))
        .unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

fn query(text: &str, cwd: &str) -> Query {
    Query {
        text: text.to_owned(),
        scope: Scope::Workspaces(vec![cwd.to_owned()]),
        filter: Filter::default(),
        best_per_session: true,
        limit: 20,
        by_relevance: true,
    }
}

fn ids(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|hit| hit.session.id.as_str()).collect()
}

#[test]
fn finds_appends_rewrites_and_forgets() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    append(
        dir,
        "a",
        &(header("a", "/w", 1) + &prompt(1, "fix the flaky parser") + &prompt(2, "then the lexer")),
    );
    append(dir, "b", &(header("b", "/w", 2) + &prompt(1, "lexer only")));
    append(
        dir,
        "c",
        &(header("c", "/other", 3) + &prompt(1, "flaky elsewhere")),
    );
    let index = SearchIndex::new(dir);
    let hits = index.search(&query("FLAKY", "/w")).unwrap();
    assert_eq!(ids(&hits), ["a"]);
    assert_eq!(
        (hits[0].seq, hits[0].event_type.as_str()),
        (1, "user/message")
    );
    assert_eq!(hits[0].surface, Surface::Current);
    assert!(
        hits[0].snippet.contains("flaky parser"),
        "{}",
        hits[0].snippet
    );
    let mut both = query("lexer", "/w");
    assert_eq!(index.search(&both).unwrap().len(), 2);
    both.scope = Scope::All;
    both.text = "flaky".to_owned();
    assert_eq!(index.search(&both).unwrap().len(), 2);

    // An append is read from where the index stopped; a torn line waits.
    append(dir, "b", &(prompt(2, "now flaky too") + "{\"seq\":3,\"ti"));
    assert_eq!(ids(&index.search(&query("flaky", "/w")).unwrap()).len(), 2);
    append(
        dir,
        "b",
        "me\":1,\"type\":\"agent/notice\",\"data\":{\"text\":\"zebra\"}}\n",
    );
    let hits = index.search(&query("zebra", "/w")).unwrap();
    assert_eq!((ids(&hits), hits[0].surface), (vec!["b"], Surface::LogOnly));

    // A fresh process's handle reads the same file.
    let again = SearchIndex::new(dir);
    assert_eq!(again.search(&query("zebra", "/w")).unwrap().len(), 1);

    // Rewritten by hand (truncated and changed): read again from the top.
    std::fs::write(
        dir.join("a.jsonl"),
        header("a", "/w", 1) + &prompt(1, "only giraffes now"),
    )
    .unwrap();
    assert!(index.search(&query("parser", "/w")).unwrap().is_empty());
    assert_eq!(ids(&index.search(&query("giraffes", "/w")).unwrap()), ["a"]);

    // Deleted: gone at once (forget: searched while the log is still
    // there, nothing but the forget can hide it), and found gone by a
    // search of another handle.
    index.forget("a");
    let rows: i64 = rusqlite::Connection::open(dir.join(FILE))
        .unwrap()
        .query_row("SELECT count(*) FROM sessions WHERE id = 'a'", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(rows, 0);
    std::fs::remove_file(dir.join("a.jsonl")).unwrap();
    assert!(index.search(&query("giraffes", "/w")).unwrap().is_empty());
    std::fs::remove_file(dir.join("b.jsonl")).unwrap();
    assert!(again.search(&query("zebra", "/w")).unwrap().is_empty());
    assert!(matches!(
        index.search(&query(" -- ", "/w")),
        Err(SearchError::EmptyQuery)
    ));
}

#[test]
fn filters_and_shadowed_events() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    let summary = serde_json::json!({"seq": 3, "time": 1003, "type": "compaction/summary",
        "data": {"start": 1, "end": 1, "summary": "we spoke of otters"}});
    append(
        dir,
        "p",
        &(header("p", "/w", 10)
            + &prompt(1, "otters and beavers")
            + &prompt(2, "otters again")
            + &format!("{summary}\n")),
    );
    let mut child = SessionHeader::new(SessionId::new("k".to_owned()), 20, "/w".to_owned(), vec![]);
    child.subagent_of = Some(dsh_protocol::log::SubagentOrigin {
        session: SessionId::new("p".to_owned()),
        call_id: dsh_protocol::ToolCallId::new("c1".to_owned()),
        description: "d".to_owned(),
        depth: 1,
    });
    append(
        dir,
        "k",
        &(serde_json::to_string(&child).unwrap() + "\n" + &prompt(1, "otters in the child")),
    );
    let index = SearchIndex::new(dir);
    let mut all = query("otters", "/w");
    all.best_per_session = false;
    let hits = index.search(&all).unwrap();
    assert_eq!(hits.len(), 4);
    let surface = |seq| {
        hits.iter()
            .find(|h| h.session.id == "p" && h.seq == seq)
            .unwrap()
            .surface
    };
    assert_eq!(
        (surface(1), surface(2), surface(3)),
        (Surface::Shadowed, Surface::Current, Surface::Current)
    );

    let mut roots = all.clone();
    roots.filter.parents = Some(vec![]);
    roots.filter.include_roots = true;
    let found = index.search(&roots).unwrap();
    assert_eq!((found.len(), ids(&found)[0]), (3, "p"));
    assert!(found.iter().all(|h| h.session.id == "p"));
    // A fork of another workspace's session is a root here.
    let mut fork = SessionHeader::new(SessionId::new("f".to_owned()), 30, "/w".to_owned(), vec![]);
    fork.forked_from = Some(dsh_protocol::log::ForkOrigin {
        session: SessionId::new("elsewhere".to_owned()),
        seq: 1,
    });
    append(
        dir,
        "f",
        &(serde_json::to_string(&fork).unwrap() + "\n" + &prompt(1, "otters forked")),
    );
    append(
        dir,
        "elsewhere",
        &(header("elsewhere", "/x", 1) + &prompt(1, "no")),
    );
    let found = index.search(&roots).unwrap();
    assert_eq!(ids(&found).iter().filter(|id| **id == "f").count(), 1);
    assert!(ids(&found).iter().all(|id| ["p", "f"].contains(id)));
    std::fs::remove_file(dir.join("f.jsonl")).unwrap();
    let found = index.search(&roots).unwrap();
    let mut people = all.clone();
    people.filter.no_subagents = true;
    assert_eq!(index.search(&people).unwrap(), found);
    let mut children = all.clone();
    children.filter.parents = Some(vec!["p".to_owned()]);
    assert_eq!(ids(&index.search(&children).unwrap()), ["k"]);
    let mut shadowed = all.clone();
    shadowed.filter.surfaces = Some(vec![Surface::Shadowed]);
    assert_eq!(index.search(&shadowed).unwrap().len(), 1);
    let mut typed = all.clone();
    typed.filter.event_types = Some(vec!["compaction/summary".to_owned()]);
    typed.filter.seq_from = Some(2);
    assert_eq!(index.search(&typed).unwrap()[0].seq, 3);
    let mut created = all.clone();
    created.filter.created_from = Some(15);
    assert_eq!(ids(&index.search(&created).unwrap()), ["k"]);
    let mut timed = all;
    timed.filter.time_to = Some(1001);
    timed.filter.session_ids = Some(vec!["p".to_owned()]);
    assert_eq!(index.search(&timed).unwrap().len(), 1);
    let lineage = index
        .sessions_until(
            &Scope::Workspaces(vec!["/w".to_owned()]),
            &AtomicBool::new(false),
        )
        .unwrap();
    assert_eq!(lineage[1].parent(), Some("p"));
}

#[test]
fn a_damaged_or_older_index_is_built_again() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    append(dir, "a", &(header("a", "/w", 1) + &prompt(1, "walrus")));
    let file = dir.join(FILE);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    // This user's, 0600: rebuilt because it is not a database.
    crate::private::options()
        .write(true)
        .create(true)
        .open(&file)
        .and_then(|mut f| f.write_all(&[b'x'; 8192]))
        .unwrap();
    assert_eq!(
        SearchIndex::new(dir)
            .search(&query("walrus", "/w"))
            .unwrap()
            .len(),
        1
    );
    {
        let conn = rusqlite::Connection::open(&file).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    assert_eq!(
        SearchIndex::new(dir)
            .search(&query("walrus", "/w"))
            .unwrap()
            .len(),
        1
    );
    std::fs::remove_file(&file).unwrap();
    assert_eq!(
        SearchIndex::new(dir)
            .search(&query("walrus", "/w"))
            .unwrap()
            .len(),
        1
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn an_oversized_line_is_skipped_not_held() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    let huge = prompt(1, &format!("ostrich {}", "x ".repeat(1024 * 1024)));
    append(
        dir,
        "a",
        &(header("a", "/w", 1) + &huge + &prompt(2, "ostrich small")),
    );
    let index = SearchIndex::new(dir);
    let mut every = query("ostrich", "/w");
    every.best_per_session = false;
    let hits = index.search(&every).unwrap();
    assert_eq!(hits.iter().map(|h| h.seq).collect::<Vec<_>>(), [2]);
    // The tail check reads a bounded prefix of a huge last line and finds
    // it unchanged: an append is read from there, nothing twice.
    append(dir, "a", &huge);
    append(dir, "a", &prompt(4, "ostrich again"));
    let hits = index.search(&every).unwrap();
    let mut seqs = hits.iter().map(|h| h.seq).collect::<Vec<_>>();
    seqs.sort_unstable();
    assert_eq!(seqs, [2, 4]);
}

#[test]
fn damage_found_while_searching_rebuilds_once() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    for n in 0..40 {
        let id = format!("s{n}");
        let mut log = header(&id, "/w", n);
        for seq in 1..=50 {
            log += &prompt(
                seq,
                &format!("heron number {n} {seq} {}", "filler ".repeat(20)),
            );
        }
        append(dir, &id, &log);
    }
    let index = SearchIndex::new(dir);
    assert_eq!(index.search(&query("heron", "/w")).unwrap().len(), 20);
    drop(index);
    // Scribble over the file past its first quarter (the schema's pages
    // stay): the words' and events' pages go bad.
    let file = dir.join(FILE);
    let len = std::fs::metadata(&file).unwrap().len();
    {
        use std::io::{Seek, SeekFrom};
        let mut f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        f.seek(SeekFrom::Start(len / 4)).unwrap();
        f.write_all(&vec![0xA5; usize::try_from(len - len / 4).unwrap()])
            .unwrap();
    }
    let index = SearchIndex::new(dir);
    let hits = index.search(&query("heron", "/w")).unwrap();
    assert_eq!(hits.len(), 20);
    // Built anew: the scribbles are gone.
    let bytes = std::fs::read(&file).unwrap();
    assert!(!bytes.windows(4096).any(|w| w.iter().all(|b| *b == 0xA5)));
}

#[test]
fn an_edit_in_place_is_read_again_and_newest_comes_first() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    append(
        dir,
        "a",
        &(header("a", "/w", 1) + &prompt(1, "key sk-live-abc123 leaked")),
    );
    append(
        dir,
        "b",
        &(header("b", "/w", 2) + &prompt(5, "the key sk-live-abc123 again sk-live-abc123")),
    );
    let index = SearchIndex::new(dir);
    let mut newest = query("sk-live-abc123", "/w");
    newest.by_relevance = false;
    let hits = index.search(&newest).unwrap();
    // b's event is newer (time 1005 > 1001).
    assert_eq!(ids(&hits), ["b", "a"]);
    // Redacted in place, same length, same inode.
    let path = dir.join("a.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let redacted = text.replace("sk-live-abc123", "**************");
    assert_eq!(redacted.len(), text.len());
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all(redacted.as_bytes()).unwrap();
    file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    drop(file);
    assert_eq!(ids(&index.search(&newest).unwrap()), ["b"]);
}

#[test]
fn a_stopped_search_keeps_what_it_read() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    append(dir, "a", &(header("a", "/w", 1) + &prompt(1, "puffin")));
    let index = SearchIndex::new(dir);
    let stop = AtomicBool::new(true);
    assert!(matches!(
        index.search_until(&query("puffin", "/w"), &stop),
        Err(SearchError::Stopped)
    ));
    assert_eq!(index.search(&query("puffin", "/w")).unwrap().len(), 1);
}

#[test]
fn a_catch_up_stopped_midway_reads_on_from_there_once() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    let mut log = header("a", "/w", 1);
    for seq in 1..=21 {
        log += &prompt(seq, &format!("kestrel {seq}"));
    }
    append(dir, "a", &log);
    let index = SearchIndex::new(dir);
    // Set before it starts: the catch-up looks at it every 4 lines in
    // tests, so a part is read, committed and kept.
    let stop = AtomicBool::new(true);
    let mut every = query("kestrel", "/w");
    every.best_per_session = false;
    every.limit = 100;
    assert!(matches!(
        index.search_until(&every, &stop),
        Err(SearchError::Stopped)
    ));
    let read: i64 = rusqlite::Connection::open(dir.join(FILE))
        .unwrap()
        .query_row("SELECT count(*) FROM events", [], |row| row.get(0))
        .unwrap();
    assert!(
        (1..21).contains(&read),
        "{read} events read before the stop"
    );
    let mut seqs: Vec<u64> = index
        .search(&every)
        .unwrap()
        .iter()
        .map(|h| h.seq)
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=21).collect::<Vec<_>>());
}

#[test]
fn a_copy_under_another_name_is_not_a_session() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    append(dir, "a", &(header("a", "/w", 1) + &prompt(1, "albatross")));
    std::fs::copy(dir.join("a.jsonl"), dir.join("a.bak.jsonl")).unwrap();
    let index = SearchIndex::new(dir);
    assert_eq!(
        ids(&index.search(&query("albatross", "/w")).unwrap()),
        ["a"]
    );
}
