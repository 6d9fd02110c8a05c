//! The logs the `search` rows measure: valid dsh logs written by a
//! fixed-seed generator (see the parent module).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{Sizes, COMMON, RARE, RARE_EVERY, WORKSPACES};

/// What the generator wrote.
pub(super) struct Written {
    pub(super) ids: Vec<String>,
    /// Per session: its workspace, its last seq and turn.
    pub(super) ends: Vec<(usize, u64, u64)>,
    pub(super) rare_sessions: usize,
    pub(super) rare_in_ws0: usize,
    pub(super) common_events: usize,
}

pub(super) fn generate(dir: &Path, workspaces: &[PathBuf], sizes: &Sizes) -> Written {
    let mut text = Text::new(0x5eed_0042);
    let mut written = Written {
        ids: Vec::with_capacity(sizes.sessions),
        ends: Vec::with_capacity(sizes.sessions),
        rare_sessions: 0,
        rare_in_ws0: 0,
        common_events: 0,
    };
    // The newest session an hour ago, one every five minutes before it.
    let newest = 1_796_000_000_000u64;
    for i in 0..sizes.sessions {
        let id = text.uuid();
        let ws = i % WORKSPACES;
        let created = newest - (sizes.sessions - i) as u64 * 300_000;
        let mut log = Log::create(dir, &id, created, &workspaces[ws]);
        // Never among the last events: a turn/* event is followed by one
        // with text within two.
        let mut plant = i
            .is_multiple_of(RARE_EVERY)
            .then(|| (text.rng.below(sizes.events - 5) as u64 + 1, RARE));
        if plant.is_some() {
            written.rare_sessions += 1;
            written.rare_in_ws0 += usize::from(ws == 0);
        }
        let mut turn = 0;
        while log.seq < sizes.events as u64 {
            turn += 1;
            let max = sizes.events as u64;
            conversation_turn(&mut log, &mut text, turn, max, &workspaces[ws], &mut plant);
        }
        log.file.flush().unwrap();
        written.common_events += log.common;
        written.ends.push((ws, log.seq, turn));
        written.ids.push(id);
    }
    written
}

/// One turn of a conversation: the prompt (and the title, at the first),
/// one to three tool steps, the answer; cut at `max` events. `plant` puts
/// a word in the first event from that seq on that has text (and is then
/// taken).
pub(super) fn conversation_turn(
    log: &mut Log,
    text: &mut Text,
    turn: u64,
    max: u64,
    cwd: &Path,
    plant: &mut Option<(u64, &'static str)>,
) {
    let mut events: Vec<Value> = Vec::new();
    let prompt = text.sentence(14, 40);
    events.push(json!({"type":"user/message","data":{"turn":turn,"content":[{"type":"text","text":prompt}]}}));
    if turn == 1 {
        let title: String = prompt.split(' ').take(6).collect::<Vec<_>>().join(" ");
        events.push(json!({"type":"session/title","data":{"title":title}}));
    }
    events.push(json!({"type":"turn/start","data":{"turn":turn}}));
    let steps = 1 + text.rng.below(3);
    for step in 1..=steps as u64 {
        let call_id = format!("call_{turn}_{step}");
        let (name, arguments, title, kind, output) = text.tool(cwd);
        events.push(json!({"type":"assistant/message","data":{
            "turn":turn,"step":step,"text":text.sentence(4, 12),"reasoning":text.sentence(6, 16),
            "tool_calls":[{"id":call_id,"name":name,"arguments":arguments}],
            "usage":{"input_tokens":1200 * step,"output_tokens":40,"cache_read_tokens":1000,"reasoning_tokens":0},
            "finish":"tool_calls","model":"deepseek-v4-flash"}}));
        events.push(
            json!({"type":"tool/call","data":{"turn":turn,"call_id":call_id,"name":name,
            "arguments":arguments,"view":{"title":title,"kind":kind}}}),
        );
        events.push(
            json!({"type":"tool/result","data":{"turn":turn,"call_id":call_id,
            "status":"completed","output":output,"view":{"title":""}}}),
        );
    }
    events.push(json!({"type":"assistant/message","data":{"turn":turn,"step":steps + 1,
        "text":text.sentence(15, 45),"reasoning":"","usage":{"input_tokens":2000,"output_tokens":90,
        "cache_read_tokens":1800,"reasoning_tokens":0},"finish":"stop","model":"deepseek-v4-flash"}}));
    events.push(json!({"type":"turn/end","data":{"turn":turn,"stop":"end_turn"}}));
    for mut event in events {
        if log.seq >= max {
            break;
        }
        if let Some((seq, word)) = *plant {
            if seq <= log.seq + 1 && plant_word(&mut event, word) {
                *plant = None;
            }
        }
        log.common += usize::from(event.to_string().contains(COMMON));
        log.write(event);
    }
}

/// Puts `word` into an event's prose or output; false when it has none
/// (`turn/*`, titles, tool calls).
fn plant_word(event: &mut Value, word: &str) -> bool {
    let data = &mut event["data"];
    let field = if data.get("content").is_some() {
        &mut data["content"][0]["text"]
    } else if data.get("output").is_some() {
        &mut data["output"]
    } else if data.get("text").is_some() {
        &mut data["text"]
    } else {
        return false;
    };
    let old = field.as_str().unwrap_or_default().to_owned();
    *field = format!("{old} {word}").into();
    true
}

/// A log being written.
pub(super) struct Log {
    pub(super) file: std::io::BufWriter<std::fs::File>,
    pub(super) seq: u64,
    pub(super) time: u64,
    pub(super) common: usize,
}

impl Log {
    fn create(dir: &Path, id: &str, created: u64, cwd: &Path) -> Log {
        let file = std::fs::File::create(dir.join(format!("{id}.jsonl"))).unwrap();
        let mut log = Log {
            file: std::io::BufWriter::new(file),
            seq: 0,
            time: created,
            common: 0,
        };
        let header = json!({"format":"dsh-session","version":1,"id":id,"created_at":created,
            "cwd":cwd,"roots":[],"mcp_servers":[]});
        writeln!(log.file, "{header}").unwrap();
        log
    }

    /// Appends to an existing log.
    pub(super) fn append(dir: &Path, id: &str, seq: u64, time: u64) -> Log {
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(format!("{id}.jsonl")))
            .unwrap();
        Log {
            file: std::io::BufWriter::new(file),
            seq,
            time,
            common: 0,
        }
    }

    fn write(&mut self, mut event: Value) {
        self.seq += 1;
        self.time += 1_500;
        let object = event.as_object_mut().unwrap();
        // seq and time first, as dsh writes them.
        let mut line = serde_json::Map::new();
        line.insert("seq".into(), self.seq.into());
        line.insert("time".into(), self.time.into());
        line.append(object);
        serde_json::to_writer(&mut self.file, &line).unwrap();
        self.file.write_all(b"\n").unwrap();
    }
}

/// The fixed-seed generator of text.
pub(super) struct Text {
    pub(super) rng: Rng,
    pub(super) words: Vec<String>,
}

/// Common words first: the draw is log-uniform over the index, so the
/// first words are in most events and the made-up ones each in few.
const COMMON_WORDS: &str =
    "the to and a parser of in is it that for this file test function error value return with \
    line not config we should from when change module string build type path fix call read now \
    use case then check input output struct field let self new list index session token server \
    client request response cache thread lock async await match option result vector map key \
    bytes buffer stream event log write open close timeout retry limit query search handler \
    state update delete insert format json schema version release branch commit merge diff \
    patch crate import export default trait impl closure iterator slice borrow lifetime panic \
    unwrap expect assert flaky regression benchmark memory latency throughput socket database \
    table column row migration deploy docker workflow pipeline lint clippy rustfmt cargo tokio \
    serde anyhow tracing metrics config toml yaml parse tokenizer lexer grammar ast node \
    visitor render template widget layout button dialog editor cursor selection snippet \
    completion diagnostic hover rename refactor extract inline";

impl Text {
    pub(super) fn new(seed: u64) -> Text {
        let mut rng = Rng(seed);
        let mut words: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for word in COMMON_WORDS.split_whitespace() {
            if seen.insert(word.to_string()) {
                words.push(word.to_string());
            }
        }
        let common = words.len();
        const SYLLABLES: &[&str] = &[
            "ka", "to", "ri", "mo", "ne", "sa", "lu", "pe", "di", "gor", "van", "tel", "bri",
            "sto", "ml", "qua", "fen", "dro", "lix", "mar", "ten", "bo", "shi", "ul", "ar", "en",
            "wen", "pla", "cre", "dus",
        ];
        while words.len() < common + 20_000 {
            let n = 2 + rng.below(3);
            let word: String = (0..n)
                .map(|_| SYLLABLES[rng.below(SYLLABLES.len())])
                .collect();
            if seen.insert(word.clone()) {
                words.push(word);
            }
        }
        Text { rng, words }
    }

    fn word(&mut self) -> &str {
        let n = self.words.len() as f64;
        let at = ((self.rng.unit() * (n + 1.0).ln()).exp() - 1.0) as usize;
        &self.words[at.min(self.words.len() - 1)]
    }

    fn sentence(&mut self, min: usize, max: usize) -> String {
        let n = min + self.rng.below(max - min + 1);
        let mut out = String::new();
        for i in 0..n {
            if i > 0 {
                out.push(if self.rng.below(12) == 0 { ',' } else { ' ' });
                if out.ends_with(',') {
                    out.push(' ');
                }
            }
            let word = self.word().to_owned();
            out.push_str(&word);
        }
        out.push('.');
        out
    }

    fn ident(&mut self) -> String {
        let n = 1 + self.rng.below(3);
        (0..n)
            .map(|_| self.word().to_owned())
            .collect::<Vec<_>>()
            .join("_")
    }

    /// A tool call: name, arguments, view title and kind, output.
    fn tool(&mut self, cwd: &Path) -> (&'static str, String, String, &'static str, String) {
        let file = format!("src/{}/{}.rs", self.ident(), self.ident());
        match self.rng.below(4) {
            0 => {
                let mut output = String::new();
                let first = 1 + self.rng.below(400);
                for n in first..first + 2 + self.rng.below(4) {
                    let line = match self.rng.below(4) {
                        0 => format!(
                            "fn {}({}: &{}) -> Result<{}> {{",
                            self.ident(),
                            self.word().to_owned(),
                            self.word().to_owned(),
                            self.word().to_owned()
                        ),
                        1 => format!("    let {} = {}()?;", self.ident(), self.ident()),
                        2 => format!("    // {}", self.sentence(4, 10)),
                        _ => format!(
                            "    {}.{}(&{});",
                            self.word().to_owned(),
                            self.ident(),
                            self.ident()
                        ),
                    };
                    output.push_str(&format!("{n:>6}\t{line}\n"));
                }
                let arguments = json!({ "file_path": file }).to_string();
                ("read", arguments, format!("Read {file}"), "read", output)
            }
            1 => {
                let pattern = self.word().to_owned();
                let mut output = String::new();
                for _ in 0..1 + self.rng.below(4) {
                    let n = 1 + self.rng.below(900);
                    output.push_str(&format!(
                        "{}/src/{}.rs:{n}: {} {pattern} {}\n",
                        cwd.display(),
                        self.ident(),
                        self.word().to_owned(),
                        self.ident()
                    ));
                }
                let arguments = json!({ "pattern": pattern, "path": "src" }).to_string();
                (
                    "grep",
                    arguments,
                    format!("grep {pattern}"),
                    "search",
                    output,
                )
            }
            2 => {
                let test = self.ident();
                let command = format!("cargo test {test}");
                let failed = self.rng.below(3) == 0;
                let output = if failed {
                    format!(
                        "running 1 test\ntest {test} ... FAILED\n\n---- {test} stdout ----\nthread panicked: {}\n[exit code: 101]",
                        self.sentence(5, 12)
                    )
                } else {
                    format!("running 1 test\ntest {test} ... ok\n\ntest result: ok. 1 passed\n[exit code: 0]")
                };
                let arguments =
                    json!({ "command": command, "description": "run the test" }).to_string();
                (
                    "bash",
                    arguments,
                    format!("Run {command}"),
                    "execute",
                    output,
                )
            }
            _ => {
                let old = format!("{}({})", self.ident(), self.word().to_owned());
                let new = format!("{}({})", self.ident(), self.word().to_owned());
                let arguments =
                    json!({ "file_path": file, "old_string": old, "new_string": new }).to_string();
                let output = format!(
                    "Edited {}/{file}: replaced 1 occurrence at line {} (+1 -1 lines).",
                    cwd.display(),
                    1 + self.rng.below(500)
                );
                ("edit", arguments, format!("Edit {file}"), "edit", output)
            }
        }
    }

    fn uuid(&mut self) -> String {
        let (a, b) = (self.rng.next(), self.rng.next());
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        )
    }
}

/// xorshift64*.
pub(super) struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
