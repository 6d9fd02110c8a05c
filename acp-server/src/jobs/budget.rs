//! A session's budgets for its jobs' output (`[jobs]
//! max_unread_bytes_per_session`, `max_spill_bytes_per_session`): what the
//! model has not read yet is kept in memory, and every job's output is
//! spilled to disk, within one budget each for all of a session's jobs.
//! Past the memory budget the oldest finished jobs' unread output is
//! dropped first (then the oldest bytes of running ones); past the disk
//! budget the oldest finished jobs' spill files are deleted first (and a
//! running job stops spilling). `job_output` says what went. Tool calls'
//! spill files (`crate::tools::spill`) count in the same disk budget
//! ([`SpillBudget`]) and are deleted likewise, oldest first, once their
//! call has ended.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{lock, Job, JobSettings, Registry, SPILL_BYTES, UNREAD_CAP};

/// The unread bytes of a session's jobs: each job counts its own in and
/// out, under its state's lock.
#[derive(Debug)]
pub(super) struct Budget {
    unread: AtomicU64,
    /// The most unread output kept, in all.
    pub(super) max_unread: u64,
    /// The most spill bytes on disk, in all.
    pub(super) max_spill: u64,
}

impl Budget {
    /// What one job keeps unread at most.
    pub(super) fn unread_cap(&self) -> usize {
        UNREAD_CAP.min(usize::try_from(self.max_unread).unwrap_or(usize::MAX))
    }

    /// What one job's spill file holds at most.
    pub(super) fn spill_cap(&self) -> u64 {
        SPILL_BYTES.min(self.max_spill)
    }

    /// `added` bytes became unread and `removed` stopped being (call under
    /// the job's state lock); whether the session is now over its budget.
    pub(super) fn count(&self, added: usize, removed: usize) -> bool {
        if added > 0 {
            self.unread.fetch_add(added as u64, Ordering::Relaxed);
        }
        if removed > 0 {
            self.unread.fetch_sub(removed as u64, Ordering::Relaxed);
        }
        self.unread.load(Ordering::Relaxed) > self.max_unread
    }

    /// How far over its budget the session is.
    fn over(&self) -> u64 {
        self.unread
            .load(Ordering::Relaxed)
            .saturating_sub(self.max_unread)
    }

    /// The unread bytes of all of the session's jobs now.
    #[cfg(all(test, unix))]
    pub(super) fn unread(&self) -> u64 {
        self.unread.load(Ordering::Relaxed)
    }
}

/// The jobs and their budgets, shared with the tasks that read the jobs'
/// output.
pub(super) struct Shared {
    pub(super) registry: Mutex<Registry>,
    pub(super) budget: Arc<Budget>,
}

impl Shared {
    pub(super) fn new(settings: &JobSettings) -> Shared {
        Shared {
            registry: Mutex::new(Registry::default()),
            budget: Arc::new(Budget {
                unread: AtomicU64::new(0),
                max_unread: settings.max_unread_bytes_per_session,
                max_spill: settings.max_spill_bytes_per_session,
            }),
        }
    }

    /// Back within the memory budget: the unread output of the oldest
    /// finished jobs is dropped whole, then (still over) the oldest bytes
    /// of the oldest running jobs.
    pub(super) fn shed_unread(&self) {
        let jobs: Vec<Arc<Job>> = lock(&self.registry).jobs.values().cloned().collect();
        for finished in [true, false] {
            for job in &jobs {
                let mut state = lock(&job.state);
                let over = self.budget.over();
                if over == 0 {
                    return;
                }
                if state.end.is_some() != finished || state.unread.is_empty() {
                    continue;
                }
                let cut = if finished {
                    state.unread.len()
                } else {
                    state
                        .unread
                        .len()
                        .min(usize::try_from(over).unwrap_or(usize::MAX))
                };
                if finished {
                    state.unread = Vec::new();
                    state.evicted += cut as u64;
                } else {
                    state.unread.drain(..cut);
                    state.dropped += cut as u64;
                }
                self.budget.count(0, cut);
            }
        }
    }

    /// Room for `wanted` more bytes in `job`'s spill file: how many it may
    /// write, and the spill files of older finished jobs and tool calls to
    /// delete first (already counted out).
    pub(super) fn reserve_spill(&self, job: &Job, wanted: u64) -> (u64, Vec<PathBuf>) {
        let mut registry = lock(&self.registry);
        let room = self
            .budget
            .spill_cap()
            .saturating_sub(lock(&job.state).spilled);
        let (granted, doomed) = self.make_room(&mut registry, wanted.min(room), Some(job), None);
        lock(&job.state).spilled += granted;
        (granted, doomed)
    }

    /// Room for `wanted` more bytes within the disk budget: the spill files
    /// of finished jobs and finished tool calls (not `job`'s or tool call
    /// `tool`'s) are deleted, oldest first, until they fit; how many fit
    /// (counted in) and the files to delete.
    fn make_room(
        &self,
        registry: &mut Registry,
        wanted: u64,
        job: Option<&Job>,
        tool: Option<u64>,
    ) -> (u64, Vec<PathBuf>) {
        let max = self.budget.max_spill;
        let mut total = registry.spilled;
        let mut doomed = Vec::new();
        if total + wanted > max {
            let mut old: Vec<(Instant, Result<Arc<Job>, u64>)> = Vec::new();
            for other in registry.jobs.values() {
                let state = lock(&other.state);
                let me = job.is_some_and(|job| std::ptr::eq(&**other, job));
                if !me && state.end.is_some() && state.spill.is_some() {
                    old.push((other.started, Ok(other.clone())));
                }
            }
            for (key, spill) in &registry.tools {
                if spill.done && Some(*key) != tool {
                    old.push((spill.started, Err(*key)));
                }
            }
            old.sort_by_key(|(started, _)| *started);
            for (_, which) in old {
                if total + wanted <= max {
                    break;
                }
                match which {
                    Ok(other) => {
                        let mut state = lock(&other.state);
                        doomed.extend(state.spill.take());
                        state.spill_deleted = true;
                        total -= state.spilled;
                        state.spilled = 0;
                    }
                    Err(key) => {
                        if let Some(spill) = registry.tools.remove(&key) {
                            total -= spill.bytes;
                            doomed.push(spill.path);
                        }
                    }
                }
            }
        }
        let granted = wanted.min(max.saturating_sub(total));
        registry.spilled = total + granted;
        (granted, doomed)
    }

    /// `bytes` reserved for `job` were not written after all.
    pub(super) fn unspill(&self, job: &Job, bytes: u64) {
        let mut registry = lock(&self.registry);
        let mut state = lock(&job.state);
        let bytes = bytes.min(state.spilled);
        state.spilled -= bytes;
        registry.spilled -= bytes;
    }

    /// The spill bytes of all of the session's jobs now.
    #[cfg(all(test, unix))]
    pub(super) fn spilled(&self) -> u64 {
        lock(&self.registry).spilled
    }
}

/// A tool call's spill file, counted in the session's disk budget.
pub(super) struct ToolSpill {
    path: PathBuf,
    bytes: u64,
    started: Instant,
    /// Its call has ended: it may be deleted for the budget.
    done: bool,
}

/// The session's disk budget for spill files (`[jobs]
/// max_spill_bytes_per_session`), which tool calls' spill files count in
/// too.
#[derive(Clone)]
pub struct SpillBudget(pub(super) Arc<Shared>);

impl SpillBudget {
    /// A new key for one tool call's spill file.
    pub fn key(&self) -> u64 {
        let mut registry = lock(&self.0.registry);
        registry.next_tool += 1;
        registry.next_tool
    }

    /// Room for `wanted` more bytes in the spill file `path` of key `key`
    /// (blocking: older finished spill files are deleted, oldest first, to
    /// make it); how many it may write.
    pub fn reserve(&self, key: u64, path: &Path, wanted: u64) -> u64 {
        let (granted, doomed) = {
            let mut registry = lock(&self.0.registry);
            let (granted, doomed) = self.0.make_room(&mut registry, wanted, None, Some(key));
            registry
                .tools
                .entry(key)
                .or_insert_with(|| ToolSpill {
                    path: path.to_owned(),
                    bytes: 0,
                    started: Instant::now(),
                    done: false,
                })
                .bytes += granted;
            (granted, doomed)
        };
        for path in doomed {
            if let Err(err) = std::fs::remove_file(&path) {
                tracing::debug!(path = %path.display(), %err, "cannot delete a spill file");
            }
        }
        granted
    }

    /// The call of key `key` ended: its spill file may be deleted for the
    /// budget from now on.
    pub fn done(&self, key: u64) {
        if let Some(spill) = lock(&self.0.registry).tools.get_mut(&key) {
            spill.done = true;
        }
    }

    /// The budget, in bytes.
    pub fn max(&self) -> u64 {
        self.0.budget.max_spill
    }
}
