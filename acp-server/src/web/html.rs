//! HTML → markdown for `web_fetch`, bounded against hostile pages.
//!
//! htmd walks the tree recursively, html5ever's tree builder scans its stack
//! of open elements for every tag, and htmd's quote and list handlers
//! rewrite every line of their content at every level: a page of 20,000
//! nested `<div>`s overflowed the walk's stack (aborting dsh), and 10^5
//! nested `<blockquote>`s took minutes to parse. So, in order:
//!
//! 1. **A tokenizer pass** (html5ever's own tokenizer, linear) re-emits the
//!    page with at most [`MAX_DEPTH`] elements open at once. It keeps a
//!    model of the elements the tree builder would hold open — void
//!    elements, the ends that `<p>`, `<li>`, `<dd>`/`<dt>`, table rows and
//!    cells, headings and options imply, scope boundaries, foreign (SVG,
//!    MathML) content — erring towards *more* depth, never less, so real
//!    pages keep their structure and a hostile one cannot grow the builder's
//!    stack. Start tags past the cap are dropped and their text kept (it
//!    lands in the element at the cap); the content of a raw-text element
//!    dropped there (`<script>`, `<style>`, …) is dropped with it. Formatting
//!    elements the builder would keep re-opening (`<b>` closed by something
//!    else) are counted, and past [`MAX_DANGLING`] of them new ones are
//!    dropped (their text kept). End tags of elements the model holds no
//!    open are dropped (the builder would ignore them), except `</p>`,
//!    `</br>` and formatting ends, which it does not. This is Blink's
//!    approach (its parser caps the tree at 512 levels) applied before the
//!    parse, where it also bounds the builder's scans.
//! 2. **The tree is parsed in chunks** of [`CHUNK`] bytes, checking between
//!    them whether the caller gave up.
//! 3. **The tree is cut** (iteratively, so exactly): an element at depth
//!    [`MAX_DEPTH`], or the [`MAX_BLOCK_NESTING`]th nested quote, list, list
//!    item, `<pre>` or table, keeps its subtree's text and void elements
//!    (`<br>`, `<img>`) as direct children; elements htmd skips (`<script>`
//!    and the like) go with their content.
//! 4. **htmd converts** what is left, checking for a stop at every element
//!    it enters.
//!
//! All of it runs on a dedicated thread with a [`WORKER_STACK`] stack; the
//! caller waits at most its deadline ([`DEADLINE`] for `web_fetch`), and
//! dropping the wait (a cancelled tool call) or the deadline passing tells
//! the worker to stop at its next check (within one chunk or one element);
//! its result is then dropped. Worst case measured (release build, 5 MiB
//! of the most expensive nesting the caps allow): about 3 s.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use html5ever::tendril::{StrTendril, TendrilSink};
use markup5ever_rcdom::{Node, NodeData, RcDom};

mod cap;
#[cfg(test)]
mod tests;

pub use cap::cap_nesting;

/// Elements open at once, at most (the tokenizer pass and the tree cut).
pub const MAX_DEPTH: usize = 256;
/// Quotes, lists, list items, `<pre>` and tables nested in one another, at
/// most: htmd rewrites each line of their content once per level.
pub const MAX_BLOCK_NESTING: usize = 16;
/// Formatting elements closed by another element's end, at most; past
/// them, new formatting elements are dropped.
pub const MAX_DANGLING: usize = 64;
/// How much input is parsed between two checks for a stop.
const CHUNK: usize = 64 * 1024;
/// The conversion thread's stack: the walk is at most [`MAX_DEPTH`] deep
/// (a few hundred KiB); this leaves a wide margin.
const WORKER_STACK: usize = 32 * 1024 * 1024;
/// How long a conversion may take (`web_fetch`).
pub const DEADLINE: Duration = Duration::from_secs(10);

/// The tags htmd is told to skip (with their content).
pub const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "head", "iframe", "nav", "footer",
];

/// The elements at which the walk checks for a stop (those that hold
/// content; the rest are leaves or rare).
const WALKED: &[&str] = &[
    "a",
    "article",
    "aside",
    "b",
    "blockquote",
    "body",
    "code",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "em",
    "figure",
    "font",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "html",
    "i",
    "li",
    "main",
    "ol",
    "p",
    "pre",
    "s",
    "section",
    "small",
    "span",
    "strong",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "u",
    "ul",
];

/// A converted page.
#[derive(Debug)]
pub struct Markdown {
    /// The markdown.
    pub text: String,
    /// Nesting past the caps was flattened.
    pub flattened: bool,
}

/// Sets the flag when dropped: the caller stopped waiting.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Converts `html` on a worker thread within `deadline`; dropping the
/// returned future (a cancel) stops the worker at its next check.
///
/// # Errors
/// The deadline passed, the worker could not start or failed, as a
/// message for the model.
pub async fn to_markdown(html: String, deadline: Duration) -> Result<Markdown, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_drop = StopOnDrop(stop.clone());
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("dsh-html".to_owned())
        .stack_size(WORKER_STACK)
        .spawn(move || {
            let _ = done.send(convert(&html, &stop));
        })
        .map_err(|err| format!("cannot start the HTML conversion: {err}"))?;
    match tokio::time::timeout(deadline, result).await {
        Ok(Ok(converted)) => converted,
        Ok(Err(_)) => Err("the HTML conversion failed".to_owned()),
        Err(_) => Err(format!(
            "the page could not be converted to text within {} s",
            deadline.as_secs_f64()
        )),
    }
}

const STOPPED: &str = "the HTML conversion was stopped";

/// The whole conversion, checking `stop` between steps and chunks.
///
/// # Errors
/// Stopped.
pub fn convert(html: &str, stop: &Arc<AtomicBool>) -> Result<Markdown, String> {
    let stopped = || stop.load(Ordering::Relaxed);
    let (capped, mut flattened) = cap_nesting(html, stopped).ok_or(STOPPED)?;
    let mut parser = html5ever::parse_document(RcDom::default(), Default::default());
    for chunk in chunks(&capped) {
        if stopped() {
            return Err(STOPPED.to_owned());
        }
        parser.process(StrTendril::from_slice(chunk));
    }
    let dom = parser.finish();
    flattened |= cut(&dom.document);
    if stopped() {
        return Err(STOPPED.to_owned());
    }
    let text = walk(&dom.document, stop);
    if stopped() {
        return Err(STOPPED.to_owned());
    }
    Ok(Markdown { text, flattened })
}

/// Step 4: htmd's walk, checking `stop` at every element it enters: once
/// set, the rest is skipped and the walk unwinds at once.
fn walk(document: &Rc<Node>, stop: &Arc<AtomicBool>) -> String {
    let check = stop.clone();
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .add_handler(
            WALKED.to_vec(),
            move |handlers: &dyn htmd::element_handler::Handlers, element: htmd::Element| {
                if check.load(Ordering::Relaxed) {
                    None
                } else {
                    handlers.fallback(element)
                }
            },
        )
        .build();
    converter.tree_to_markdown(document)
}

/// `text` in pieces of about [`CHUNK`] bytes, cut on character boundaries.
fn chunks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut cut = CHUNK.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (chunk, after) = rest.split_at(cut);
        rest = after;
        Some(chunk)
    })
}

fn element_name(node: &Node) -> Option<&str> {
    match &node.data {
        NodeData::Element { name, .. } => Some(&name.local),
        _ => None,
    }
}

/// Nesting htmd pays for per line of content, at every level.
fn is_block_nesting(name: &str) -> bool {
    matches!(name, "blockquote" | "ol" | "ul" | "li" | "pre" | "table")
}

/// Step 3: flattens what is nested past the caps; whether anything was.
pub fn cut(document: &Rc<Node>) -> bool {
    let mut flattened = false;
    let mut todo = vec![(document.clone(), 0usize, 0usize)];
    while let Some((node, depth, blocks)) = todo.pop() {
        let (depth, blocks) = match element_name(&node) {
            Some(name) => (depth + 1, blocks + usize::from(is_block_nesting(name))),
            None => (depth, blocks),
        };
        if depth >= MAX_DEPTH || blocks >= MAX_BLOCK_NESTING {
            flattened |= flatten(&node);
            continue;
        }
        for child in node.children.borrow().iter() {
            todo.push((child.clone(), depth, blocks));
        }
    }
    flattened
}

/// Makes the leaves of `node`'s subtree (text, void and empty elements)
/// its children, in document order, dropping skipped elements with their
/// content; whether there was anything deeper.
fn flatten(node: &Rc<Node>) -> bool {
    let children = std::mem::take(&mut *node.children.borrow_mut());
    let mut deeper = false;
    let mut leaves = Vec::new();
    let mut todo: Vec<Rc<Node>> = children.into_iter().rev().collect();
    while let Some(next) = todo.pop() {
        let grandchildren = std::mem::take(&mut *next.children.borrow_mut());
        if element_name(&next).is_some_and(|name| SKIPPED.contains(&name)) {
            deeper = true;
            continue;
        }
        if grandchildren.is_empty() {
            leaves.push(next);
        } else {
            deeper = true;
            todo.extend(grandchildren.into_iter().rev());
        }
    }
    for leaf in &leaves {
        leaf.parent.set(Some(Rc::downgrade(node)));
    }
    *node.children.borrow_mut() = leaves;
    deeper
}
