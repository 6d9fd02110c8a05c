// The pure halves of dsh's questions and of the line of prompts, without
// dsh or VS Code: an elicitation form → questions in order, the
// QuickPick's items and what picking them answers, typed answers and
// bounds, the response's content; then the prompts queued and steered
// behind a running turn.

import { test } from "node:test";
import assert from "node:assert/strict";
import type * as acp from "@agentclientprotocol/sdk" with { "resolution-mode": "import" };

import { PromptLine } from "../src/protocol/prompts";
import {
  answerFromPicks,
  content,
  formProblem,
  parseForm,
  pickItems,
  pickerTitle,
  problemOf,
  summary,
  toResponse,
  typedAnswer,
  type Form,
} from "../src/protocol/questions";

/** What dsh sends for ask_user_question: the message is the questions,
 * one per line; the fields may come sorted by name (a map on the way);
 * none is required (an empty one is a skipped question). `required`
 * makes some required. */
function request(required?: string[]): acp.CreateElicitationRequest {
  return {
    sessionId: "s1",
    toolCallId: "q1",
    mode: "form",
    message: "Which database?\nWhat should the service be called?\nWhich extras?",
    requestedSchema: {
      type: "object",
      properties: {
        db: {
          type: "string",
          title: "Database",
          description: "Which database?",
          oneOf: [
            { const: "Postgres (Recommended)", title: "Postgres (Recommended)", description: "Scales." },
            { const: "SQLite", title: "SQLite" },
          ],
        },
        db_other: { type: "string", title: "Database: other", description: "Your own answer, instead of a choice above (optional)." },
        extras: { type: "array", title: "Which extras?", items: { type: "string", enum: ["metrics", "tracing", "auth"] } },
        extras_other: { type: "string" },
        name: { type: "string", title: "What should the service be called?" },
      },
      ...(required ? { required } : {}),
    },
  };
}

function form(required: string[] | undefined = ["db", "name"]): Form {
  const parsed = parseForm(request(required));
  assert.ok(!("unsupported" in parsed), JSON.stringify(parsed));
  return parsed;
}

test("an elicitation form becomes questions asked in order, with Other folded in", () => {
  // dsh's form: in the message's order, not the fields' (db, extras, name).
  assert.deepEqual(
    form([]).questions.map((q) => [q.id, q.kind, q.required, q.other]),
    [
      ["db", "single", false, "db_other"],
      ["name", "text", false, undefined],
      ["extras", "multi", false, "extras_other"],
    ],
  );
  // Without the questions in the message: required ones first, then as listed.
  const elsewhere = request(["name"]);
  elsewhere.message = "Please answer.";
  const listed = parseForm(elsewhere);
  assert.ok(!("unsupported" in listed));
  assert.deepEqual(
    listed.questions.map((q) => q.id),
    ["name", "db", "extras"],
  );
  const f = form();
  assert.equal(f.toolCallId, "q1");
  assert.deepEqual(
    f.questions.map((q) => [q.id, q.kind, q.required, q.other]),
    [
      ["db", "single", true, "db_other"],
      ["name", "text", true, undefined],
      ["extras", "multi", false, "extras_other"],
    ],
  );
  const [db, , extras] = f.questions;
  assert.deepEqual(db.options[0], { value: "Postgres (Recommended)", label: "Postgres (Recommended)", description: "Scales." });
  assert.deepEqual(extras.options[2], { value: "auth", label: "auth" });
  assert.equal(pickerTitle(db, 0, 3), "dsh (1/3): Database");
  assert.equal(pickerTitle(extras, 2, 3), "dsh (3/3): Which extras? (several)");

  // Forms that cannot be shown, and what is left out.
  const unsupported = (r: unknown) => parseForm(r as acp.CreateElicitationRequest);
  assert.deepEqual(unsupported({ sessionId: "s", mode: "url", message: "m", url: "https://x", elicitationId: "e" }), {
    unsupported: "not a form (mode url)",
  });
  assert.deepEqual(
    unsupported({ sessionId: "s", mode: "form", message: "m", requestedSchema: { properties: { f: { type: "file" } }, required: ["f"] } }),
    { unsupported: 'field "f" has type file' },
  );
  const optional = unsupported({
    sessionId: "s",
    mode: "form",
    message: "m",
    requestedSchema: { properties: { f: { type: "file" }, n: { type: "integer", minimum: 1, maximum: 9 }, ok: { type: "boolean" } } },
  });
  assert.ok(!("unsupported" in optional));
  assert.deepEqual(
    optional.questions.map((q) => [q.id, q.kind, q.min, q.max]),
    [
      ["n", "integer", 1, 9],
      ["ok", "boolean", undefined, undefined],
    ],
  );
});

test("QuickPick items and what picking them answers", () => {
  const [db, name, extras] = form().questions;
  assert.deepEqual(
    pickItems(db).map((i) => [i.label, i.description, i.value ?? i.special]),
    [
      ["Postgres (Recommended)", "Scales.", "Postgres (Recommended)"],
      ["SQLite", undefined, "SQLite"],
      ["Other…", undefined, "other"],
    ],
  );
  assert.deepEqual(
    pickItems(form([]).questions[0]).map((i) => i.label),
    ["Postgres (Recommended)", "SQLite", "Other…", "Skip"],
    "an optional choice can be skipped",
  );
  assert.deepEqual(answerFromPicks(form([]).questions[0], [{ label: "Skip", special: "skip" }]), {}, "skipped");
  assert.deepEqual(
    pickItems(extras).map((i) => i.label),
    ["metrics", "tracing", "auth", "Other…"],
    "an optional multi-select is skipped by choosing none",
  );
  const items = pickItems(db);
  assert.deepEqual(answerFromPicks(db, [items[1]]), { answer: { value: "SQLite" } });
  assert.deepEqual(answerFromPicks(db, [items[2]]), { needsOther: true }, "Other… asks for its text");
  assert.deepEqual(answerFromPicks(db, [items[2]], " CockroachDB "), { answer: { other: "CockroachDB" } });
  assert.deepEqual(answerFromPicks(db, []), { problem: "Database: choose one" });
  const ex = pickItems(extras);
  assert.deepEqual(answerFromPicks(extras, [ex[2], ex[0]]), { answer: { values: ["metrics", "auth"] } }, "options' order");
  assert.deepEqual(answerFromPicks(extras, [ex[3], ex[1]], "gRPC"), { answer: { values: ["tracing"], other: "gRPC" } });
  assert.deepEqual(answerFromPicks(extras, []), { answer: undefined }, "skipped");

  // Typed answers.
  assert.deepEqual(typedAnswer(name, "  "), { problem: "an answer is required" });
  assert.deepEqual(typedAnswer(name, " billing "), { answer: { text: "billing" } });
  const n = { id: "n", title: "Count", kind: "integer" as const, options: [], required: false, min: 1, max: 9 };
  assert.deepEqual(typedAnswer(n, ""), {}, "optional: skipped");
  assert.deepEqual(typedAnswer(n, "2.5"), { problem: '"2.5" is not a whole number' });
  assert.deepEqual(typedAnswer(n, "12"), { problem: "Count: at most 9" });
  assert.deepEqual(typedAnswer(n, "3"), { answer: { value: 3 } });
});

test("answers are checked, then sent as the form's content", () => {
  const f = form();
  const [db, , extras] = f.questions;
  // What a webview could post is checked against the form.
  assert.equal(problemOf(db, { value: "MySQL" }), "Database: not one of the choices");
  assert.equal(problemOf(db, undefined), "Database: an answer is required");
  assert.equal(problemOf(extras, { values: ["metrics", "nope"] }), "Which extras?: not one of the choices");
  assert.equal(formProblem(f, { db: { value: "SQLite" } }), "What should the service be called?: an answer is required");
  const answers = { db: { other: "CockroachDB" }, name: { text: "billing" }, extras: { values: ["metrics"], other: "gRPC" } };
  assert.equal(formProblem(f, answers), undefined);
  assert.deepEqual(toResponse(f, { action: "accept", answers }), {
    action: "accept",
    content: { db_other: "CockroachDB", name: "billing", extras: ["metrics"], extras_other: "gRPC" },
  });
  assert.deepEqual(content(f, {}), {}, "skipped questions are left out");
  assert.deepEqual(toResponse(f, { action: "decline" }), { action: "decline" });
  assert.deepEqual(toResponse(f, { action: "cancel" }), { action: "cancel" });
  assert.deepEqual(summary(f, { db: { value: "SQLite" }, name: { text: "billing" } }), [
    "Database: SQLite",
    "What should the service be called?: billing",
    "Which extras?: (skipped)",
  ]);
});

test("the line of prompts: steered and queued behind the running turn, cancelled with it", () => {
  const line = new PromptLine();
  const first = line.send("first", "steer");
  assert.deepEqual([first.starts, first.prompt.delivery, line.busy], [true, "queue", true], "nothing to steer: a prompt");
  const second = line.send("second").prompt;
  const steer = line.send("look at b.rs", "steer").prompt;
  const third = line.send("third").prompt;
  const late = line.send("also c.rs", "steer").prompt;
  const waiting = () => line.waiting.map((p) => `${p.delivery}:${p.text}`);
  assert.deepEqual(waiting(), ["queue:second", "steer:look at b.rs", "queue:third", "steer:also c.rs"]);
  assert.equal(line.landed("look at b.rs"), steer, "landed by its text");
  assert.equal(line.landed("a message nobody sent"), late, "else the first steer");
  assert.equal(line.landed("again"), undefined);
  assert.deepEqual(waiting(), ["queue:second", "queue:third"]);
  assert.equal(line.answered(steer), undefined, "a landed steer's answer starts nothing");
  assert.equal(line.answered(first.prompt), second, "the running turn's end starts the next");
  const unreached = line.send("too late", "steer").prompt;
  assert.equal(line.answered(second), third);
  assert.equal(line.answered(third), unreached, "a steer the turn never reached runs in its place");
  assert.equal(unreached.delivery, "queue");
  const refused = line.send("seventeenth").prompt;
  assert.equal(line.answered(refused), undefined, "refused while waiting: it leaves the line");
  assert.deepEqual(waiting(), []);
  const a = line.send("a").prompt;
  const b = line.send("b", "steer").prompt;
  assert.deepEqual(line.cancel(), [a, b]);
  assert.equal(line.answered(b), undefined);
  assert.equal(line.answered(unreached), undefined, "the cancelled turn ends; nothing follows");
  assert.equal(line.answered(a), undefined);
  assert.equal(line.busy, false);
});
