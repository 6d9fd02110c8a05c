//! Where a session's kept contents live: content-addressed files (SHA-256)
//! under `$DSH_HOME/checkpoints/<session>/`, 0600 in a 0700 directory, and
//! beside it `<session>.turns`, which turn kept which content and which
//! turns were evicted.
//!
//! The store has a budget (`[checkpoints] max_bytes_per_session`): a new
//! content that would take it past the budget first evicts the oldest
//! turns' kept contents, a whole turn at a time (a content a later turn
//! also kept stays), and the evicted turns are written down so that
//! `/undo` of one says why it cannot put anything back. The running turn
//! never evicts itself: what does not fit is not kept, and the checkpoint
//! says so.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::hash;

/// What a session's store may hold by default.
pub const DEFAULT_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// Where a session's kept contents live.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    /// `<session>.turns` beside `dir`.
    manifest: PathBuf,
    /// The most it may hold.
    max_bytes: u64,
    /// The turn that keeps contents now (0: none in particular).
    turn: u64,
}

/// What the store holds, as `<session>.turns` says (loaded once a turn).
#[derive(Debug, Default)]
pub struct Index {
    /// hash → (size, the turns that kept it).
    entries: BTreeMap<String, (u64, BTreeSet<u64>)>,
    evicted: BTreeSet<u64>,
    total: u64,
}

impl Index {
    fn add(&mut self, hash: &str, size: u64, turn: u64) -> bool {
        let entry = self.entries.entry(hash.to_owned()).or_insert_with(|| {
            self.total += size;
            (size, BTreeSet::new())
        });
        entry.1.insert(turn)
    }

    /// The bytes held.
    pub fn total(&self) -> u64 {
        self.total
    }
}

fn is_hash(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Store {
    /// The store of `session` under `home`, with the default budget.
    pub fn new(home: &Path, session: &str) -> Store {
        let root = home.join("checkpoints");
        Store {
            dir: root.join(session),
            manifest: root.join(format!("{session}.turns")),
            max_bytes: DEFAULT_MAX_BYTES,
            turn: 0,
        }
    }

    /// The store as turn `turn` keeps contents, within `max_bytes`.
    pub fn for_turn(mut self, turn: u64, max_bytes: u64) -> Store {
        self.turn = turn;
        self.max_bytes = max_bytes;
        self
    }

    /// The budget.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// What the store holds now (blocking). A store from before the
    /// manifest counts its files as kept by turn 0 (the oldest).
    pub fn load(&self) -> Index {
        let mut index = Index::default();
        match std::fs::read_to_string(&self.manifest) {
            Ok(text) => {
                for line in text.lines() {
                    let words: Vec<&str> = line.split(' ').collect();
                    match words.as_slice() {
                        ["evicted", turn] => {
                            index.evicted.extend(turn.parse::<u64>().ok());
                        }
                        ["ref", turn, hash, size] if is_hash(hash) => {
                            if let (Ok(turn), Ok(size)) = (turn.parse(), size.parse()) {
                                if self.dir.join(hash).exists() {
                                    index.add(hash, size, turn);
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            Err(_) => {
                for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if let (true, Ok(meta)) = (is_hash(&name), entry.metadata()) {
                        index.add(&name, meta.len(), 0);
                    }
                }
            }
        }
        index
    }

    /// Keeps `bytes` (blocking); their hash.
    ///
    /// # Errors
    /// The directory or file cannot be written, or the content does not
    /// fit in the budget.
    pub fn put(&self, bytes: &[u8]) -> std::io::Result<String> {
        let mut index = self.load();
        self.put_in(&mut index, bytes)
    }

    /// Keeps `bytes` as this store's turn, with `index` what the store
    /// holds (kept up to date); their hash. Older turns are evicted first
    /// when the new content would not fit.
    ///
    /// # Errors
    /// The directory or file cannot be written, or the content does not
    /// fit in the budget.
    pub fn put_in(&self, index: &mut Index, bytes: &[u8]) -> std::io::Result<String> {
        let hash = hash(bytes);
        let size = bytes.len() as u64;
        crate::private::create_dir_all(&self.dir)?;
        let path = self.dir.join(&hash);
        if !index.entries.contains_key(&hash) || !path.exists() {
            if let Some((size, _)) = index.entries.remove(&hash) {
                index.total -= size;
            }
            self.make_room(index, size)?;
            let temp = self.dir.join(format!(".{hash}.{}", std::process::id()));
            let written = crate::private::options()
                .write(true)
                .create_new(true)
                .open(&temp)
                .and_then(|mut file| file.write_all(bytes))
                .and_then(|()| std::fs::rename(&temp, &path));
            if written.is_err() {
                let _ = std::fs::remove_file(&temp);
            }
            written?;
        }
        if index.add(&hash, size, self.turn) {
            self.append(&format!("ref {} {hash} {size}\n", self.turn))?;
        }
        Ok(hash)
    }

    /// Evicts the oldest turns (before this one) until `size` more bytes
    /// fit.
    fn make_room(&self, index: &mut Index, size: u64) -> std::io::Result<()> {
        let refused = || {
            std::io::Error::other(format!(
                "the session's checkpoints are at their budget of {} bytes ([checkpoints] max_bytes_per_session)",
                self.max_bytes
            ))
        };
        if size > self.max_bytes {
            return Err(refused());
        }
        let mut evicted = false;
        while index.total + size > self.max_bytes {
            let oldest = index
                .entries
                .values()
                .flat_map(|(_, turns)| turns.iter().copied())
                .filter(|turn| *turn < self.turn)
                .min();
            let Some(oldest) = oldest else {
                break;
            };
            self.evict(index, oldest);
            evicted = true;
        }
        if evicted {
            self.rewrite(index)?;
        }
        if index.total + size > self.max_bytes {
            return Err(refused());
        }
        Ok(())
    }

    /// Drops `turn`'s contents: those no other turn kept are deleted.
    fn evict(&self, index: &mut Index, turn: u64) {
        let mut gone = Vec::new();
        for (hash, (size, turns)) in &mut index.entries {
            if turns.remove(&turn) && turns.is_empty() {
                gone.push((hash.clone(), *size));
            }
        }
        for (hash, size) in gone {
            match std::fs::remove_file(self.dir.join(&hash)) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => tracing::warn!(%err, "cannot delete an evicted checkpoint content"),
            }
            index.entries.remove(&hash);
            index.total -= size;
        }
        index.evicted.insert(turn);
        tracing::info!(
            turn,
            kept = index.total,
            "evicted a turn's checkpoint contents to stay within the budget"
        );
    }

    fn append(&self, line: &str) -> std::io::Result<()> {
        if !self.manifest.exists() {
            // The first line of a store from before the manifest: its
            // files are written down as turn 0's.
            let index = self.load();
            if !index.entries.is_empty() {
                self.rewrite(&index)?;
            }
        }
        let mut options = crate::private::options();
        options.append(true).create(true);
        crate::private::open_no_follow(&options, &self.manifest)
            .and_then(|mut file| file.write_all(line.as_bytes()))
    }

    /// Writes the whole manifest anew (temporary file, then rename).
    fn rewrite(&self, index: &Index) -> std::io::Result<()> {
        let mut text = String::new();
        for turn in &index.evicted {
            text.push_str(&format!("evicted {turn}\n"));
        }
        for (hash, (size, turns)) in &index.entries {
            for turn in turns {
                text.push_str(&format!("ref {turn} {hash} {size}\n"));
            }
        }
        let temp = self
            .manifest
            .with_extension(format!("turns.{}", std::process::id()));
        let written = crate::private::options()
            .write(true)
            .create_new(true)
            .open(&temp)
            .and_then(|mut file| file.write_all(text.as_bytes()))
            .and_then(|()| std::fs::rename(&temp, &self.manifest));
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    }

    /// Whether turn `turn`'s contents were evicted for the budget
    /// (blocking).
    pub fn evicted(&self, turn: u64) -> bool {
        self.load().evicted.contains(&turn)
    }

    /// Whether the content `hash` is kept.
    pub fn has(&self, hash: &str) -> bool {
        is_hash(hash) && self.dir.join(hash).is_file()
    }

    /// A kept content.
    ///
    /// # Errors
    /// It is gone or unreadable.
    pub fn get(&self, hash: &str) -> std::io::Result<Vec<u8>> {
        if !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(std::io::Error::other("not a checkpoint hash"));
        }
        std::fs::read(self.dir.join(hash))
    }

    /// Deletes the session's kept contents (with its log).
    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.manifest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(home: &Path, session: &str) -> u64 {
        std::fs::read_dir(home.join("checkpoints").join(session))
            .unwrap()
            .map(|entry| entry.unwrap().metadata().unwrap().len())
            .sum()
    }

    #[test]
    fn the_oldest_turns_are_evicted_first_and_a_content_a_later_turn_kept_stays() {
        let home = tempfile::tempdir().unwrap();
        let megabyte = |fill: u8| vec![fill; 1024 * 1024];
        let turn = |n| Store::new(home.path(), "s").for_turn(n, 3 * 1024 * 1024);
        let mut index = turn(1).load();
        let one = turn(1).put_in(&mut index, &megabyte(1)).unwrap();
        let shared = turn(1).put_in(&mut index, &megabyte(9)).unwrap();
        let two = turn(2).put_in(&mut index, &megabyte(2)).unwrap();
        // A new process loads what the manifest says.
        let mut index = turn(3).load();
        assert_eq!(index.total(), 3 * 1024 * 1024);
        turn(3).put_in(&mut index, &megabyte(9)).unwrap(); // already kept
        let three = turn(3).put_in(&mut index, &megabyte(3)).unwrap();
        // Turn 1 went (its content 9 stays: turn 3 kept it too).
        let store = turn(4);
        assert!(store.evicted(1) && !store.evicted(2) && !store.evicted(3));
        assert!(!store.has(&one) && store.has(&shared) && store.has(&two) && store.has(&three));
        assert!(kept(home.path(), "s") <= 3 * 1024 * 1024);
        // Turn 2 goes next; then only turn 3's own contents are left, and
        // the running turn never evicts itself: what does not fit is refused.
        let mut index = turn(3).load();
        let four = turn(3).put_in(&mut index, &megabyte(4)).unwrap();
        assert!(turn(4).evicted(2) && !turn(4).has(&two));
        let err = turn(3).put_in(&mut index, &megabyte(5)).unwrap_err();
        assert!(err.to_string().contains("budget"), "{err}");
        assert!(store.has(&three) && store.has(&shared) && store.has(&four));
        assert!(!turn(4).evicted(3));
        // Deleting the session deletes the manifest too.
        store.remove();
        assert!(!home.path().join("checkpoints/s.turns").exists());
        assert!(!home.path().join("checkpoints/s").exists());
    }

    #[test]
    fn a_store_from_before_the_manifest_counts_its_files_as_the_oldest() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("checkpoints/s");
        std::fs::create_dir_all(&dir).unwrap();
        let old = vec![7u8; 600];
        std::fs::write(dir.join(hash(&old)), &old).unwrap();
        let store = Store::new(home.path(), "s").for_turn(5, 1000);
        assert_eq!(store.load().total(), 600);
        let new = store.put(&[8u8; 600]).unwrap();
        assert!(store.has(&new) && !store.has(&hash(&old)));
        assert!(store.evicted(0));
        assert_eq!(kept(home.path(), "s"), 600);
    }
}
