// The dsh chat panel (a VS Code webview). It renders the view model the
// extension posts ({type: "state", state}) and posts back what the user
// does. Everything shown is escaped: text comes from the model.
// @ts-check
/* global acquireVsCodeApi */
(function () {
  const vscode = acquireVsCodeApi();
  const $ = (selector) => document.querySelector(selector);
  const log = $("#log");
  const input = /** @type {HTMLTextAreaElement} */ ($("#input"));
  const send = $("#send");
  const cancel = $("#cancel");
  const header = $("#header");

  const KIND_ICONS = {
    read: "▤", edit: "✎", delete: "✕", move: "⇄", search: "⌕",
    execute: "▶", think: "…", fetch: "⇣", switch_mode: "⇆", other: "•",
  };

  function escape(text) {
    return String(text)
      .replace(/&/g, "&amp;")
      .replace(/</g, "&lt;")
      .replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;")
      .replace(/'/g, "&#39;");
  }

  /** Inline markdown on escaped text: code, bold, italics, http(s) links. */
  function inline(text) {
    return escape(text)
      .replace(/`([^`]+)`/g, "<code>$1</code>")
      .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>")
      .replace(/\[([^\]]+)\]\((https?:\/\/[^)\s]+)\)/g, '<a href="$2">$1</a>');
  }

  /** A small, safe markdown renderer: fences, headings, lists, paragraphs. */
  function markdown(source) {
    const out = [];
    const lines = String(source).split("\n");
    let paragraph = [];
    let list = null;
    const flush = () => {
      if (paragraph.length) out.push("<p>" + paragraph.map(inline).join("<br>") + "</p>");
      paragraph = [];
      if (list) out.push(`</${list}>`);
      list = null;
    };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      const fence = /^```(\S*)/.exec(line);
      if (fence) {
        flush();
        const code = [];
        for (i++; i < lines.length && !lines[i].startsWith("```"); i++) code.push(lines[i]);
        out.push(`<pre><code class="lang-${escape(fence[1])}">${escape(code.join("\n"))}</code></pre>`);
        continue;
      }
      const heading = /^(#{1,4})\s+(.*)$/.exec(line);
      if (heading) {
        flush();
        const level = heading[1].length + 2;
        out.push(`<h${level}>${inline(heading[2])}</h${level}>`);
        continue;
      }
      const item = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/.exec(line);
      if (item) {
        if (paragraph.length) {
          out.push("<p>" + paragraph.map(inline).join("<br>") + "</p>");
          paragraph = [];
        }
        const kind = item[1] ? "ul" : "ol";
        if (list !== kind) {
          if (list) out.push(`</${list}>`);
          out.push(`<${kind}>`);
          list = kind;
        }
        out.push(`<li>${inline(item[3])}</li>`);
        continue;
      }
      if (!line.trim()) {
        flush();
        continue;
      }
      if (list) {
        out.push(`</${list}>`);
        list = null;
      }
      paragraph.push(line);
    }
    flush();
    return out.join("");
  }

  function lineCount(text) {
    if (!text) return 0;
    const lines = text.split("\n").length;
    return text.endsWith("\n") ? lines - 1 : lines;
  }

  function diffSummary(diff) {
    const before = lineCount(diff.oldText);
    const after = lineCount(diff.newText);
    return diff.oldText === null ? `new file, ${after} lines` : `${before} → ${after} lines`;
  }

  function tool(view) {
    const icon = KIND_ICONS[view.kind] || KIND_ICONS.other;
    const parts = [
      `<div class="tool status-${escape(view.status)}" data-tool="${escape(view.id)}">`,
      `<div class="tool-head"><span class="icon">${icon}</span>`,
      `<span class="tool-title">${escape(view.title)}</span>`,
      `<span class="badge">${escape(view.status.replace("_", " "))}</span></div>`,
    ];
    view.diffs.forEach((diff, index) => {
      parts.push(
        `<div class="diff"><span class="path">${escape(diff.path)}</span> <span class="muted">${escape(diffSummary(diff))}</span> ` +
          `<button class="link" data-diff="${index}" data-tool-id="${escape(view.id)}">Open diff</button></div>`,
      );
    });
    for (const text of view.text) parts.push(`<div class="tool-text">${markdown(text)}</div>`);
    if (view.locations.length) {
      parts.push('<div class="locations">');
      for (const location of view.locations.slice(0, 20)) {
        const line = location.line ?? 1;
        parts.push(
          `<button class="link location" data-path="${escape(location.path)}" data-line="${line}">${escape(location.path)}:${line}</button>`,
        );
      }
      parts.push("</div>");
    }
    parts.push("</div>");
    return parts.join("");
  }

  function plan(entries) {
    const rows = entries.map((entry) => {
      const done = entry.status === "completed";
      const mark = done ? "☑" : entry.status === "in_progress" ? "◐" : "☐";
      return `<li class="plan-${escape(entry.status)}"><span class="mark">${mark}</span> ${inline(entry.content)}</li>`;
    });
    return `<div class="plan"><div class="plan-head">Plan</div><ul>${rows.join("")}</ul></div>`;
  }

  function ask(asking) {
    const buttons = asking.options
      .map((option) => `<button class="answer kind-${escape(option.kind)}" data-option="${escape(option.id)}">${escape(option.name)}</button>`)
      .join("");
    return `<div class="ask"><div class="ask-title">Allow ${escape(asking.title)}?</div><div class="answers">${buttons}</div></div>`;
  }

  function render(state) {
    const chunks = [];
    for (const item of state.items) {
      if (item.type === "user") chunks.push(`<div class="user">${markdown(item.text)}</div>`);
      else if (item.type === "agent") chunks.push(`<div class="agent">${markdown(item.text)}</div>`);
      else if (item.type === "thought") {
        chunks.push(`<details class="thought"><summary>Thinking</summary>${markdown(item.text)}</details>`);
      } else if (item.type === "tool" && state.tools[item.id]) chunks.push(tool(state.tools[item.id]));
      else if (item.type === "plan") chunks.push(plan(item.entries));
    }
    if (state.asking) chunks.push(ask(state.asking));
    const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    log.innerHTML = chunks.join("");
    if (atBottom) log.scrollTop = log.scrollHeight;

    const pickers = (state.options || [])
      .filter((picker) => picker.id === "mode" || picker.id === "model")
      .map((picker) => {
        const options = picker.values
          .map((v) => `<option value="${escape(v.value)}"${v.value === picker.current ? " selected" : ""}>${escape(v.name)}</option>`)
          .join("");
        return `<label>${escape(picker.name)} <select data-picker="${escape(picker.id)}">${options}</select></label>`;
      })
      .join("");
    const usage = state.usage
      ? `<span class="usage" title="context used">${Math.round((100 * state.usage.used) / state.usage.size)}% of ${Math.round(state.usage.size / 1000)}k</span>`
      : "";
    header.innerHTML = `<span class="title">${escape(state.title || "dsh")}</span>${pickers}${usage}`;
    send.disabled = state.busy;
    cancel.hidden = !state.busy;
  }

  function submit() {
    const text = input.value.trim();
    if (!text) return;
    vscode.postMessage({ type: "prompt", text });
    input.value = "";
  }

  send.addEventListener("click", submit);
  cancel.addEventListener("click", () => vscode.postMessage({ type: "cancel" }));
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      submit();
    }
  });
  document.addEventListener("click", (event) => {
    const target = /** @type {HTMLElement} */ (event.target);
    const button = target.closest("button");
    if (!button) return;
    if (button.dataset.option) vscode.postMessage({ type: "answer", optionId: button.dataset.option });
    else if (button.dataset.diff !== undefined) {
      vscode.postMessage({ type: "diff", toolCallId: button.dataset.toolId, index: Number(button.dataset.diff) });
    } else if (button.dataset.path) {
      vscode.postMessage({ type: "open", path: button.dataset.path, line: Number(button.dataset.line) });
    }
  });
  header.addEventListener("change", (event) => {
    const select = /** @type {HTMLSelectElement} */ (event.target);
    if (select.dataset.picker) vscode.postMessage({ type: "pick", id: select.dataset.picker, value: select.value });
  });
  window.addEventListener("message", (event) => {
    const message = event.data;
    if (message && message.type === "state") render(message.state);
  });
  vscode.postMessage({ type: "ready" });
})();
