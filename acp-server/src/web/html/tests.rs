//! Tests of the bounded HTML conversion.

use super::*;

fn nested(tag: &str, depth: usize, inner: &str) -> String {
    format!(
        "<html><body><h1>Deep</h1>{}{inner}{}<p>after</p></body></html>",
        format!("<{tag}>").repeat(depth),
        format!("</{tag}>").repeat(depth)
    )
}

fn run(html: &str) -> Markdown {
    // The walk of an uncut tree needs more than a test thread's stack.
    let html = html.to_owned();
    std::thread::Builder::new()
        .stack_size(WORKER_STACK)
        .spawn(move || convert(&html, &Arc::new(AtomicBool::new(false))).unwrap())
        .unwrap()
        .join()
        .unwrap()
}

fn htmd_alone(html: &str) -> String {
    htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .build()
        .convert(html)
        .unwrap()
}

#[test]
fn ordinary_pages_convert_as_htmd_alone_converts_them() {
    let pages = [
        "<html><head><title>t</title><script>if (a < b && c) steal()</script><style>p>a{}</style></head><body><h1>Tokio guide</h1><p>Read the <a href=\"https://tokio.rs/docs?a=1&amp;b=&quot;2&quot;\">docs</a> first &amp; <b>now</b> &lt;x&gt;.</p><ul><li>one</li><li>two<ul><li>nested</li></ul></li></ul></body></html>",
        // Ends left out, as real pages do.
        "<p>one<p>two<ul><li>a<li>b<li>c</ul><dl><dt>term<dd>def<dt>t2<dd>d2</dl><table><tr><td>1<td>2<tr><td>3<td>4</table><h2>x<h3>y</h3>",
        "<!DOCTYPE html><body><blockquote><p>quoted<blockquote>twice</blockquote></blockquote><pre><code>let x = 1 &lt; 2;\nnext line</code></pre><textarea>a &amp; <b>b</b></textarea><select><option>o1<option>o2</select>",
        "<div><svg><path d=\"M0\"/><title>t</title></svg><math><mi>x</mi></math><img src=\"i.png\" alt=\"pic\"><br/>text<p>x</b>y<i>z</p>w</div><noscript><p>js off</p></noscript><xmp><b>raw</b></xmp>",
    ];
    for page in pages {
        let converted = run(page);
        assert_eq!(converted.text, htmd_alone(page), "{page}");
        assert!(!converted.flattened, "{page}");
    }
    // And a long ordinary page: 1,000 paragraphs and list items without
    // their ends stay as they were.
    let long = format!(
        "{}<ul>{}</ul>",
        "<p>para".repeat(1000),
        "<li>item".repeat(1000)
    );
    let converted = run(&long);
    assert_eq!(converted.text, htmd_alone(&long));
    assert!(!converted.flattened);
}

#[test]
fn nesting_past_the_caps_is_flattened_and_its_text_kept() {
    for tag in [
        "div",
        "blockquote",
        "span",
        "b",
        "li",
        "ul",
        "table",
        "td",
        "svg",
    ] {
        let depth = if matches!(tag, "div" | "blockquote") {
            100_000
        } else {
            10_000
        };
        let converted = run(&nested(tag, depth, "deep text"));
        // Each `<li>` ends the one before; `<td>` outside a table is
        // ignored: those never nest.
        assert_eq!(converted.flattened, !matches!(tag, "li" | "td"), "{tag}");
        assert!(
            converted.text.contains("# Deep"),
            "{tag}: {:.200}",
            converted.text
        );
        assert!(
            converted.text.contains("deep text") || tag == "svg",
            "{tag}"
        );
        assert!(
            converted.text.contains("after"),
            "{tag}: {:.200}",
            converted.text
        );
        if converted.flattened {
            assert!(
                converted.text.len() < 10_000,
                "{tag}: {}",
                converted.text.len()
            );
        }
    }
    // `<div/>` opens a div (only void and foreign elements close
    // themselves), so it counts.
    let (capped, flattened) = cap_nesting(&"<div/>".repeat(10_000), || false).unwrap();
    assert!(flattened);
    assert_eq!(capped.matches("<div").count(), MAX_DEPTH);
    // A script dropped at the cap takes its code with it.
    let deep_script = nested("div", 1_000, "<script>stealCookies()</script>visible");
    let converted = run(&deep_script);
    assert!(!converted.text.contains("stealCookies"));
    assert!(converted.text.contains("visible"));
}

#[test]
fn tags_the_model_misses_still_cannot_deepen_the_tree() {
    // Formatting elements closed by a block's end are re-opened by the
    // builder at the next text: past MAX_DANGLING new ones are dropped.
    let reopened: String = (0..5_000)
        .map(|n| format!("<div><b id={n}></div>x"))
        .collect();
    let (capped, flattened) = cap_nesting(&reopened, || false).unwrap();
    assert!(flattened);
    assert!(capped.matches("<b ").count() <= MAX_DANGLING + 1);
    // `</span>` does not close past a div, so the model keeps both.
    let (capped, _) = cap_nesting(&"<span><div></span>".repeat(10_000), || false).unwrap();
    assert!(capped.matches("<div>").count() <= MAX_DEPTH);
    // Table rows outside a table are ignored by the builder, and so do
    // not close the divs between them.
    let (capped, _) = cap_nesting(&"<tr><div>".repeat(10_000), || false).unwrap();
    assert!(capped.matches("<div>").count() <= MAX_DEPTH);
    // Whatever the pass lets through, the cut keeps the walk bounded.
    let converted = run(&"<span><div></span>".repeat(10_000));
    assert!(converted.flattened);
}

#[test]
fn the_tree_cut_flattens_exactly_at_the_caps() {
    let dom = html5ever::parse_document(RcDom::default(), Default::default()).one(format!(
        "{}<p>a<script>x()</script><br>b</p>{}",
        "<blockquote>".repeat(MAX_BLOCK_NESTING + 3),
        "</blockquote>".repeat(MAX_BLOCK_NESTING + 3)
    ));
    assert!(cut(&dom.document));
    let markdown = htmd::HtmlToMarkdown::new().tree_to_markdown(&dom.document);
    let prefix = "> ".repeat(MAX_BLOCK_NESTING);
    assert!(markdown.contains(&format!("{prefix}a")), "{markdown}");
    assert!(!markdown.contains(&format!("{prefix}> ")), "{markdown}");
    assert!(!markdown.contains("x()"), "{markdown}");
    // Below the caps nothing changes.
    let dom = html5ever::parse_document(RcDom::default(), Default::default())
        .one("<blockquote><p>a</p></blockquote>");
    assert!(!cut(&dom.document));
}

#[test]
fn a_stop_ends_the_walk_at_the_next_element() {
    let page = format!(
        "{}<p>last</p>",
        "<blockquote><p>line</p></blockquote>".repeat(1000)
    );
    let dom = html5ever::parse_document(RcDom::default(), Default::default()).one(page);
    let going = walk(&dom.document, &Arc::new(AtomicBool::new(false)));
    assert!(going.contains("last"));
    assert_eq!(walk(&dom.document, &Arc::new(AtomicBool::new(true))), "");
}

#[tokio::test]
async fn a_stop_or_the_deadline_ends_the_wait_and_the_worker() {
    let page = "<p>line<br>".repeat(200_000);
    let stop = Arc::new(AtomicBool::new(true));
    assert_eq!(convert(&page, &stop).unwrap_err(), STOPPED);
    let started = std::time::Instant::now();
    let late = to_markdown(page, Duration::from_millis(1)).await;
    assert!(late.unwrap_err().contains("within"));
    assert!(started.elapsed() < Duration::from_secs(1));
    let fine = to_markdown("<h1>x</h1>".to_owned(), DEADLINE)
        .await
        .unwrap();
    assert_eq!(fine.text, "# x");
}
