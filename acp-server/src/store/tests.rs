use super::*;

fn store_with(events: usize, pad: usize) -> (tempfile::TempDir, SessionStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path().to_owned());
    let header = SessionHeader::new(
        dsh_protocol::SessionId::new("s"),
        1,
        "/work".to_owned(),
        Vec::new(),
    );
    let mut writer = store.create(&header).unwrap();
    for i in 0..events {
        writer
            .append(EventData::Notice {
                text: format!("{i} {}", "x".repeat(pad)),
            })
            .unwrap();
    }
    (dir, store)
}

/// `work`'s answer, or a failure when it takes more than 30 s (a read
/// ahead that hangs fails the test instead of hanging it).
fn within<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, answer) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(work()));
    answer
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the read ahead hung")
}

fn texts(events: impl Iterator<Item = Result<Event, AgentError>>) -> Vec<String> {
    events
        .map(|event| match event.unwrap().data {
            EventData::Notice { text } => text,
            other => panic!("{other:?}"),
        })
        .collect()
}

/// A long log read ahead on another thread gives the events a reader
/// gives, and leaves the reader where they end: the writer opened after
/// it continues the log.
#[test]
fn events_read_ahead_are_the_events() {
    let (_dir, store) = store_with(3_000, 600);
    let read = texts(store.read("s", None).unwrap());
    assert!(std::fs::metadata(store.path("s").unwrap()).unwrap().len() > LogReader::AHEAD_FROM);
    let mut log = store.open("s").unwrap();
    let ahead = log.reader.read_ahead(|events| texts(events));
    assert_eq!(ahead, read);
    let mut writer = log.finish().unwrap();
    assert_eq!(writer.last_seq(), 3_000);
    writer
        .append(EventData::Notice {
            text: "next".into(),
        })
        .unwrap();
    assert_eq!(
        texts(store.read("s", None).unwrap()).last().unwrap(),
        "next"
    );
    // A short log is read inline, the same way.
    let (_dir, store) = store_with(10, 10);
    let mut log = store.open("s").unwrap();
    assert_eq!(log.reader.read_ahead(|events| texts(events)).len(), 10);
}

/// A corrupt line in the middle of a long log is an error where it is;
/// a taker that stops early stops the reading thread too (no hang).
#[test]
fn a_corrupt_line_read_ahead_is_an_error_and_stopping_early_stops_the_reader() {
    let (_dir, store) = store_with(3_000, 600);
    let path = store.path("s").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let middle = text[..text.len() / 2].rfind('\n').unwrap() + 1;
    let broken = format!("{}{{not json\n{}", &text[..middle], &text[middle..]);
    std::fs::write(&path, broken).unwrap();
    let reader_store = store.clone();
    let (before, error) = within(move || {
        reader_store.read("s", None).unwrap().read_ahead(|events| {
            let mut before = 0;
            for event in events {
                match event {
                    Ok(_) => before += 1,
                    Err(err) => return (before, Some(err)),
                }
            }
            (before, None)
        })
    });
    assert!(error.is_some());
    assert!((1_000..2_000).contains(&before), "{before}");
    let first = within(move || {
        let mut reader = store.read("s", None).unwrap();
        reader.read_ahead(|events| events.next().map(|event| event.is_ok()))
    });
    assert_eq!(first, Some(true));
}
