// The dsh chat panel (a VS Code webview). It renders the view model the
// extension posts ({type: "state", state}) and posts back what the user
// does: prompts (queued or steered while a turn runs), answers to a
// permission ask or to dsh's questions. Everything shown is escaped: text
// comes from the model.
// @ts-check
/* global acquireVsCodeApi */
(function () {
  const vscode = acquireVsCodeApi();
  const $ = (selector) => document.querySelector(selector);
  const log = $("#log");
  const input = /** @type {HTMLTextAreaElement} */ ($("#input"));
  const send = $("#send");
  const steer = $("#steer");
  const cancel = $("#cancel");
  const header = $("#header");
  const question = $("#question");
  const pending = $("#pending");
  let busy = false;
  let questionKey = null;

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

  function answers(item) {
    const head =
      item.action === "accept" ? "You answered" : item.action === "decline" ? "You declined to answer" : "Not answered (dismissed)";
    const lines = item.lines.map((line) => `<li>${escape(line)}</li>`).join("");
    return `<div class="answers answers-${escape(item.action)}"><div class="answers-head">${head}</div>${lines ? `<ul>${lines}</ul>` : ""}</div>`;
  }

  /** One question of dsh's form as form controls; `n` names its inputs. */
  function field(q, n) {
    const name = `q${n}`;
    const parts = [`<fieldset data-q="${escape(q.id)}" data-kind="${escape(q.kind)}">`, `<legend>${escape(q.title)}</legend>`];
    if (q.description && q.description !== q.title) parts.push(`<div class="muted">${escape(q.description)}</div>`);
    const choice = (type, value, label, extra, description) =>
      `<label class="choice"><input type="${type}" name="${name}" value="${escape(value)}"${extra}> ${escape(label)}` +
      (description ? ` <span class="muted">— ${escape(description)}</span>` : "") +
      "</label>";
    const other = (type) => (q.other ? choice(type, "", "Other:", " data-other", "") + '<input type="text" class="other-text">' : "");
    if (q.kind === "single" || q.kind === "boolean") {
      const options = q.kind === "boolean" ? [{ value: "true", label: "Yes" }, { value: "false", label: "No" }] : q.options;
      for (const option of options) parts.push(choice("radio", option.value, option.label, "", option.description));
      parts.push(other("radio"));
      if (!q.required) parts.push(choice("radio", "", "Skip", " data-skip", ""));
    } else if (q.kind === "multi") {
      for (const option of q.options) parts.push(choice("checkbox", option.value, option.label, "", option.description));
      parts.push(other("checkbox"));
    } else {
      const type = q.kind === "text" ? "text" : "number";
      const value = q.default !== undefined ? ` value="${escape(q.default)}"` : "";
      parts.push(`<input type="${type}" class="typed"${value}${q.kind === "integer" ? ' step="1"' : ""}>`);
    }
    parts.push("</fieldset>");
    return parts.join("");
  }

  /** dsh's open questions, drawn once per form (so what is typed stays
   * while other updates arrive). */
  function showQuestion(open) {
    const key = open ? open.key : null;
    if (key === questionKey) return;
    questionKey = key;
    if (!open) {
      question.innerHTML = "";
      return;
    }
    question.innerHTML =
      `<form class="question"><div class="question-head">dsh asks</div>` +
      open.questions.map(field).join("") +
      '<div class="answers-buttons"><button type="submit" class="answer">Answer</button>' +
      '<button type="button" class="answer kind-reject_once" data-decline>Decline to answer</button></div></form>';
  }

  /** The form's answers, as the extension checks them. */
  function collect(form) {
    const out = {};
    for (const set of form.querySelectorAll("fieldset[data-q]")) {
      const id = set.dataset.q;
      const kind = set.dataset.kind;
      const otherText = (set.querySelector(".other-text")?.value || "").trim();
      if (kind === "single" || kind === "boolean") {
        const checked = set.querySelector("input[type=radio]:checked");
        if (!checked || checked.dataset.skip !== undefined) continue;
        if (checked.dataset.other !== undefined) {
          if (otherText) out[id] = { other: otherText };
          continue;
        }
        out[id] = { value: kind === "boolean" ? checked.value === "true" : checked.value };
      } else if (kind === "multi") {
        const values = [...set.querySelectorAll("input[type=checkbox]:checked")]
          .filter((box) => box.dataset.other === undefined)
          .map((box) => box.value);
        const other = set.querySelector("input[type=checkbox][data-other]:checked") && otherText;
        if (values.length || other) out[id] = other ? { values, other } : { values };
      } else {
        const typed = (set.querySelector("input.typed")?.value || "").trim();
        if (typed) out[id] = kind === "text" ? { text: typed } : { value: Number(typed) };
      }
    }
    return out;
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
      else if (item.type === "answers") chunks.push(answers(item));
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
    const cost = state.usage && state.usage.cost && typeof state.usage.cost.amount === "number" ? state.usage.cost : null;
    const amount = cost ? cost.amount.toFixed(cost.amount >= 1 ? 2 : 4) : "";
    const spent = cost
      ? ` · <span class="cost" title="what this session cost so far">${cost.currency === "USD" ? `$${amount}` : `${amount} ${escape(cost.currency)}`}</span>`
      : "";
    const usage = state.usage
      ? `<span class="usage" title="context used">${Math.round((100 * state.usage.used) / state.usage.size)}% of ${Math.round(state.usage.size / 1000)}k${spent}</span>`
      : "";
    header.innerHTML = `<span class="title">${escape(state.title || "dsh")}</span>${pickers}${usage}`;
    showQuestion(state.question);
    pending.innerHTML = (state.pending || [])
      .map((prompt) => {
        const steered = prompt.delivery === "steer";
        return `<div class="pending-item pending-${steered ? "steer" : "queue"}"><span class="badge">${steered ? "Steering" : "Queued"}</span> ${escape(prompt.text)}</div>`;
      })
      .join("");
    // The input stays open while dsh works: Send queues, Steer steers.
    busy = !!state.busy;
    send.textContent = busy ? "Queue" : "Send";
    steer.hidden = !busy;
    cancel.hidden = !busy;
  }

  /** Sends the input: while a turn runs, queued for its own turn or
   * (`steer`) into the running one. */
  function submit(steered) {
    const text = input.value.trim();
    if (!text) return;
    vscode.postMessage(steered && busy ? { type: "prompt", text, delivery: "steer" } : { type: "prompt", text });
    input.value = "";
  }

  send.addEventListener("click", () => submit(false));
  steer.addEventListener("click", () => submit(true));
  cancel.addEventListener("click", () => vscode.postMessage({ type: "cancel" }));
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      submit(event.ctrlKey || event.metaKey);
    }
  });
  question.addEventListener("submit", (event) => {
    event.preventDefault();
    vscode.postMessage({ type: "questions", action: "accept", answers: collect(/** @type {HTMLFormElement} */ (event.target)) });
  });
  question.addEventListener("input", (event) => {
    // Typing an "Other" answer chooses "Other".
    const target = /** @type {HTMLInputElement} */ (event.target);
    if (target.classList.contains("other-text") && target.value.trim()) {
      const box = /** @type {HTMLInputElement|null} */ (target.parentElement?.querySelector("input[data-other]") ?? null);
      if (box) box.checked = true;
    }
  });
  document.addEventListener("click", (event) => {
    const target = /** @type {HTMLElement} */ (event.target);
    const button = target.closest("button");
    if (!button) return;
    if (button.dataset.option) vscode.postMessage({ type: "answer", optionId: button.dataset.option });
    else if (button.dataset.decline !== undefined) vscode.postMessage({ type: "questions", action: "decline" });
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
