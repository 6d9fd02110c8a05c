//! Step 1 of the conversion ([`super`]): the tokenizer pass that caps the
//! nesting before the tree is built.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::LocalName;

use super::{chunks, MAX_DANGLING, MAX_DEPTH};

/// `html` re-emitted with its nesting capped (see [`super`]'s docs), and whether anything was dropped; `None` once `stopped`.
pub fn cap_nesting(html: &str, stopped: impl Fn() -> bool) -> Option<(String, bool)> {
    let tokenizer = Tokenizer::new(
        Capper {
            state: RefCell::new(Capped {
                out: String::with_capacity(html.len()),
                ..Capped::default()
            }),
        },
        TokenizerOpts::default(),
    );
    let queue = BufferQueue::default();
    for chunk in chunks(html) {
        if stopped() {
            return None;
        }
        queue.push_back(StrTendril::from_slice(chunk));
        let _ = tokenizer.feed(&queue);
    }
    tokenizer.end();
    let state = tokenizer.sink.state.into_inner();
    Some((state.out, state.flattened))
}

/// One element the tree builder would hold open.
struct Open {
    name: LocalName,
    /// An SVG or MathML element (its children are foreign too, unless it
    /// is an integration point).
    foreign: bool,
    /// What the searches through the open elements ask of it.
    flags: u8,
}

const SPECIAL: u8 = 1;
const BOUNDARY: u8 = 2;
const FORMATTING: u8 = 4;
const HEADING: u8 = 8;
/// `ol`, `ul` (where `</li>` stops looking).
const LIST: u8 = 16;
/// `table`, `template`, `select`, `html`: where row and cell ends stop.
const TABLE_EDGE: u8 = 32;
/// `tr` (where a cell's implied end stops).
const ROW: u8 = 64;
/// Special, but not `address`, `div` or `p` (where `<li>`, `<dd>` and
/// `<dt>` stop looking for the item they end).
const SPECIAL_BUT_ADDRESS_DIV_P: u8 = 128;

fn flags(name: &str) -> u8 {
    let mut flags = 0;
    let mut set = |on: bool, flag: u8| {
        if on {
            flags |= flag;
        }
    };
    set(is_special(name), SPECIAL);
    set(is_scope_boundary(name), BOUNDARY);
    set(is_formatting(name), FORMATTING);
    set(is_heading(name), HEADING);
    set(matches!(name, "ol" | "ul"), LIST);
    set(
        matches!(name, "table" | "template" | "select" | "html"),
        TABLE_EDGE,
    );
    set(name == "tr", ROW);
    set(
        is_special(name) && !matches!(name, "address" | "div" | "p"),
        SPECIAL_BUT_ADDRESS_DIV_P,
    );
    flags
}

#[derive(Default)]
struct Capped {
    out: String,
    stack: Vec<Open>,
    /// How many of each element `stack` holds.
    counts: std::collections::HashMap<LocalName, usize>,
    /// Formatting elements closed by something other than their own end.
    dangling: usize,
    /// Inside a raw-text element (`<script>`, `<style>`, `<textarea>`, …):
    /// what becomes of its text.
    raw: Option<Raw>,
    flattened: bool,
}

/// The text of a raw-text element.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Raw {
    /// Dropped with the element (past the cap).
    Dropped,
    /// Escaped: as text whether or not the builder reads it raw (RCDATA
    /// decodes the escapes; elsewhere they may show).
    Escaped,
    /// As it came: the builder surely reads it raw too (an HTML
    /// `<script>`, `<style>`, … with no SVG, MathML or frameset open).
    Verbatim,
}

struct Capper {
    state: RefCell<Capped>,
}

impl TokenSink for Capper {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut state = self.state.borrow_mut();
        match token {
            Token::TagToken(tag) if tag.kind == TagKind::StartTag => {
                return state.start(&tag.name, tag.self_closing, &tag.attrs);
            }
            Token::TagToken(tag) => state.end(&tag.name),
            Token::CharacterTokens(text) => match state.raw {
                Some(Raw::Dropped) => {}
                Some(Raw::Verbatim) => state.out.push_str(&text),
                _ => escape_into(&mut state.out, &text, false),
            },
            Token::DoctypeToken(doctype)
                if doctype.name.as_deref() == Some("html") && !doctype.force_quirks =>
            {
                state.out.push_str("<!DOCTYPE html>");
            }
            // Comments, NULs and parse errors change nothing htmd shows.
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

fn escape_into(out: &mut String, text: &str, attribute: bool) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' if !attribute => out.push_str("&lt;"),
            '>' if !attribute => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
}

fn is_void(name: &str) -> bool {
    matches!(
        name,
        "area"
            | "base"
            | "basefont"
            | "bgsound"
            | "br"
            | "col"
            | "embed"
            | "frame"
            | "hr"
            | "image"
            | "img"
            | "input"
            | "keygen"
            | "link"
            | "meta"
            | "param"
            | "source"
            | "track"
            | "wbr"
    )
}

fn is_formatting(name: &str) -> bool {
    matches!(
        name,
        "a" | "b"
            | "big"
            | "code"
            | "em"
            | "font"
            | "i"
            | "nobr"
            | "s"
            | "small"
            | "strike"
            | "strong"
            | "tt"
            | "u"
    )
}

fn is_heading(name: &str) -> bool {
    matches!(name, "h1" | "h2" | "h3" | "h4" | "h5" | "h6")
}

/// The HTML standard's "special" category (an end tag of another name
/// does not close past one of these).
fn is_special(name: &str) -> bool {
    is_void(name)
        || is_heading(name)
        || is_scope_boundary(name)
        || matches!(
            name,
            "address"
                | "article"
                | "aside"
                | "blockquote"
                | "body"
                | "button"
                | "center"
                | "colgroup"
                | "dd"
                | "details"
                | "dir"
                | "div"
                | "dl"
                | "dt"
                | "fieldset"
                | "figcaption"
                | "figure"
                | "footer"
                | "form"
                | "frameset"
                | "head"
                | "header"
                | "hgroup"
                | "iframe"
                | "li"
                | "listing"
                | "main"
                | "menu"
                | "nav"
                | "noembed"
                | "noframes"
                | "noscript"
                | "ol"
                | "p"
                | "plaintext"
                | "pre"
                | "script"
                | "search"
                | "section"
                | "select"
                | "style"
                | "summary"
                | "tbody"
                | "textarea"
                | "tfoot"
                | "thead"
                | "tr"
                | "ul"
                | "xmp"
        )
}

/// Where the standard's "has an element in scope" stops looking (all of
/// its scope kinds together: stopping early only keeps more open).
fn is_scope_boundary(name: &str) -> bool {
    matches!(
        name,
        "applet"
            | "caption"
            | "html"
            | "table"
            | "td"
            | "th"
            | "marquee"
            | "object"
            | "template"
            | "select"
            | "button"
            | "mi"
            | "mo"
            | "mn"
            | "ms"
            | "mtext"
            | "annotation-xml"
            | "foreignobject"
            | "desc"
            | "title"
    )
}

/// Start tags that close an open `<p>` first.
fn closes_p(name: &str) -> bool {
    is_heading(name)
        || matches!(
            name,
            "address"
                | "article"
                | "aside"
                | "blockquote"
                | "center"
                | "details"
                | "dialog"
                | "dir"
                | "div"
                | "dl"
                | "fieldset"
                | "figcaption"
                | "figure"
                | "footer"
                | "header"
                | "hgroup"
                | "main"
                | "menu"
                | "nav"
                | "ol"
                | "p"
                | "search"
                | "section"
                | "summary"
                | "ul"
                | "pre"
                | "listing"
                | "form"
                | "xmp"
                | "plaintext"
                | "li"
                | "dd"
                | "dt"
        )
}

/// Where HTML content resumes inside SVG or MathML.
fn is_integration_point(name: &str) -> bool {
    matches!(
        name,
        // (`annotation-xml` only with an HTML encoding: left out, so its
        // content counts as foreign, which keeps more open.)
        "foreignobject" | "desc" | "title" | "mi" | "mo" | "mn" | "ms" | "mtext"
    )
}

/// How the tokenizer reads an HTML element's content, when not as markup.
fn raw_kind(name: &str) -> Option<TokenSinkResult<()>> {
    Some(match name {
        "script" => TokenSinkResult::RawData(RawKind::ScriptData),
        "style" | "xmp" | "iframe" | "noembed" | "noframes" | "noscript" => {
            TokenSinkResult::RawData(RawKind::Rawtext)
        }
        "textarea" | "title" => TokenSinkResult::RawData(RawKind::Rcdata),
        "plaintext" => TokenSinkResult::Plaintext,
        _ => return None,
    })
}

impl Capped {
    /// Whether new content is foreign (SVG, MathML).
    fn in_foreign(&self) -> bool {
        self.stack
            .last()
            .is_some_and(|top| top.foreign && !is_integration_point(&top.name))
    }

    /// How many elements named `name` are open.
    fn open(&self, name: &str) -> usize {
        self.counts
            .get(&LocalName::from(name))
            .copied()
            .unwrap_or(0)
    }

    /// Where the nearest open element named one of `wanted` is, looking
    /// down from just below `below`, not past one with a flag in `stop`.
    fn find(&self, wanted: &[&str], stop: u8, below: usize) -> Option<usize> {
        if wanted.iter().all(|name| self.open(name) == 0) {
            return None;
        }
        for at in (0..below).rev() {
            let open = &self.stack[at];
            if wanted.contains(&&*open.name) {
                return Some(at);
            }
            if open.flags & stop != 0 {
                return None;
            }
        }
        None
    }

    /// Closes the element at `at` and everything above it.
    fn close_from(&mut self, at: usize) {
        for (index, open) in self.stack.drain(at..).enumerate() {
            if let Some(count) = self.counts.get_mut(&open.name) {
                *count -= 1;
            }
            if index > 0 && open.flags & FORMATTING != 0 {
                self.dangling += 1;
            }
        }
    }

    fn push(&mut self, name: &LocalName, foreign: bool) {
        *self.counts.entry(name.clone()).or_default() += 1;
        self.stack.push(Open {
            name: name.clone(),
            foreign,
            flags: flags(name),
        });
    }

    fn start(
        &mut self,
        name: &LocalName,
        self_closing: bool,
        attrs: &[html5ever::Attribute],
    ) -> TokenSinkResult<()> {
        let tag = &**name;
        let foreign = self.in_foreign();
        if matches!(tag, "html" | "head" | "body") {
            // Merged into the document's own by the builder.
            self.emit_start(tag, self_closing, attrs);
            return TokenSinkResult::Continue;
        }
        if !foreign {
            if is_formatting(tag) && self.dangling >= MAX_DANGLING {
                self.flattened = true;
                return TokenSinkResult::Continue;
            }
            let table_part = matches!(
                tag,
                "tr" | "td" | "th" | "tbody" | "thead" | "tfoot" | "caption" | "colgroup"
            );
            if table_part && self.open("table") == 0 {
                // Outside a table the builder ignores them.
                self.emit_start(tag, self_closing, attrs);
                return TokenSinkResult::Continue;
            }
        }
        let now_foreign = foreign || matches!(tag, "svg" | "math");
        let pushes = !((!foreign && is_void(tag)) || (now_foreign && self_closing));
        let raw = if foreign { None } else { raw_kind(tag) };
        // The ends the builder makes before the element: applied only if
        // the element is emitted (a dropped one never reaches it).
        let kept = if foreign {
            self.stack.len()
        } else {
            self.implied_ends(tag)
        };
        if pushes && kept >= MAX_DEPTH {
            self.flattened = true;
            if raw.is_some() {
                self.raw = Some(Raw::Dropped);
            }
            return raw.unwrap_or(TokenSinkResult::Continue);
        }
        self.close_from(kept);
        self.emit_start(tag, self_closing, attrs);
        if !pushes {
            return TokenSinkResult::Continue;
        }
        if let Some(kind) = &raw {
            let html_only = !self
                .stack
                .iter()
                .any(|open| open.foreign || &*open.name == "frameset");
            let rawtext = matches!(
                kind,
                TokenSinkResult::RawData(RawKind::Rawtext | RawKind::ScriptData)
            );
            self.raw = Some(if rawtext && html_only {
                Raw::Verbatim
            } else {
                Raw::Escaped
            });
        }
        self.push(name, now_foreign);
        raw.unwrap_or(TokenSinkResult::Continue)
    }

    /// How many open elements stay open once the builder has made the
    /// ends a start tag implies (where it surely makes them).
    fn implied_ends(&self, tag: &str) -> usize {
        let mut kept = self.stack.len();
        let found = match tag {
            "li" => self.find(&["li"], SPECIAL_BUT_ADDRESS_DIV_P, kept),
            "dd" | "dt" => self.find(&["dd", "dt"], SPECIAL_BUT_ADDRESS_DIV_P, kept),
            "tr" => self.find(&["tr"], TABLE_EDGE, kept),
            "td" | "th" => self.find(&["td", "th"], TABLE_EDGE | ROW, kept),
            "tbody" | "thead" | "tfoot" => {
                self.find(&["tbody", "thead", "tfoot"], TABLE_EDGE, kept)
            }
            "option" | "optgroup" => {
                let top = |kept: usize, name: &str| {
                    (kept > 0 && &*self.stack[kept - 1].name == name).then(|| kept - 1)
                };
                let after_option = top(kept, "option").unwrap_or(kept);
                if tag == "optgroup" {
                    top(after_option, "optgroup").or(Some(after_option))
                } else {
                    Some(after_option)
                }
            }
            _ => None,
        };
        if let Some(at) = found {
            kept = at;
        }
        if closes_p(tag) {
            if let Some(at) = self.find(&["p"], BOUNDARY, kept) {
                kept = at;
            }
        }
        if is_heading(tag) && kept > 0 && self.stack[kept - 1].flags & HEADING != 0 {
            kept -= 1;
        }
        kept
    }

    fn end(&mut self, name: &LocalName) {
        if self.raw.take() == Some(Raw::Dropped) {
            return;
        }
        let tag = &**name;
        let always = matches!(tag, "html" | "body" | "head" | "p" | "br") || is_formatting(tag);
        if !always && self.counts.get(name).copied().unwrap_or(0) == 0 {
            // Nothing of that name is open: the builder ignores it (and a
            // hostile page's 10^5 closing tags need not reach it).
            return;
        }
        let below = self.stack.len();
        let found = match tag {
            "html" | "body" | "head" => None,
            "li" => self.find(&["li"], BOUNDARY | LIST, below),
            _ if is_heading(tag) => {
                self.find(&["h1", "h2", "h3", "h4", "h5", "h6"], BOUNDARY, below)
            }
            _ if is_formatting(tag) => self.find(&[tag], SPECIAL, below),
            _ if is_special(tag) => self.find(&[tag], BOUNDARY, below),
            _ => self.find(&[tag], SPECIAL, below),
        };
        if let Some(at) = found {
            self.close_from(at);
        }
        self.out.push_str("</");
        self.out.push_str(tag);
        self.out.push('>');
    }

    fn emit_start(&mut self, tag: &str, self_closing: bool, attrs: &[html5ever::Attribute]) {
        self.out.push('<');
        self.out.push_str(tag);
        for attr in attrs {
            self.out.push(' ');
            self.out.push_str(&attr.name.local);
            self.out.push_str("=\"");
            escape_into(&mut self.out, &attr.value, true);
            self.out.push('"');
        }
        if self_closing {
            self.out.push('/');
        }
        self.out.push('>');
    }
}
