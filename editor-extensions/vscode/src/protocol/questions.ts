// dsh's questions: an `elicitation/create` form (what `ask_user_question`
// sends to a client that advertises forms) as questions asked one after
// the other, the QuickPick items each one shows, and the answer. Pure: no
// `vscode` import, no I/O; the QuickPick and the panel both build their
// answers here.
//
// dsh sends one property per question — a string with `enum`/`oneOf` for
// a single choice, an array for several, a plain string for free text —
// and, for a question with options, a free-text `<id>_other` property,
// asked as that question's "Other…" entry rather than as a question.

import type {
  CreateElicitationRequest,
  CreateElicitationResponse,
  ElicitationContentValue,
} from "@agentclientprotocol/sdk" with { "resolution-mode": "import" };

export type QuestionKind = "single" | "multi" | "text" | "boolean" | "number" | "integer";

export interface FormOption {
  /** What is sent. */
  value: string;
  /** What is shown. */
  label: string;
  description?: string;
}

export interface Question {
  id: string;
  title: string;
  description?: string;
  kind: QuestionKind;
  options: FormOption[];
  /** The free-text property "Other…" answers. */
  other?: string;
  required: boolean;
  /** Bounds from the schema: items (multi), characters (text), value (numbers). */
  min?: number;
  max?: number;
  default?: string | number | boolean | string[];
}

export interface Form {
  toolCallId?: string;
  message: string;
  questions: Question[];
}

/** One question's answer. A single choice answered with "Other…" is
 * `{other}` alone: the text replaces the choice. */
export type Answer =
  | { value: string | number | boolean }
  | { other: string }
  | { values: string[]; other?: string }
  | { text: string };

/** By question id; a missing entry is a skipped question. */
export type Answers = Record<string, Answer | undefined>;

export type FormOutcome = { action: "accept"; answers: Answers } | { action: "decline" } | { action: "cancel" };

type Schema = Record<string, unknown>;

const isString = (value: unknown): value is string => typeof value === "string";
const num = (value: unknown): number | undefined => (typeof value === "number" ? value : undefined);

function optionsOf(schema: Schema): FormOption[] {
  const items = (schema.items ?? {}) as Schema;
  const titled = schema.oneOf ?? items.anyOf;
  const plain = schema.enum ?? items.enum;
  if (Array.isArray(titled)) {
    return titled
      .filter((o): o is Schema => !!o && isString((o as Schema).const))
      .map((o) => ({
        value: o.const as string,
        label: isString(o.title) ? o.title : (o.const as string),
        ...(isString(o.description) ? { description: o.description } : {}),
      }));
  }
  if (Array.isArray(plain)) return plain.filter(isString).map((value) => ({ value, label: value }));
  return [];
}

function questionOf(id: string, schema: unknown, required: boolean): Question | string {
  if (!schema || typeof schema !== "object") return `field "${id}" has no schema`;
  const s = schema as Schema;
  const options = optionsOf(s);
  let kind: QuestionKind;
  if (s.type === "string") kind = options.length ? "single" : "text";
  else if (s.type === "array") {
    if (!options.length) return `field "${id}" is a list without choices`;
    kind = "multi";
  } else if (s.type === "boolean" || s.type === "number" || s.type === "integer") kind = s.type;
  else return `field "${id}" has type ${String(s.type)}`;
  const q: Question = { id, title: isString(s.title) ? s.title : id, kind, options, required };
  if (isString(s.description)) q.description = s.description;
  q.min = num(s.minItems) ?? num(s.minLength) ?? num(s.minimum);
  q.max = num(s.maxItems) ?? num(s.maxLength) ?? num(s.maximum);
  if (q.min === undefined) delete q.min;
  if (q.max === undefined) delete q.max;
  if (s.default !== undefined && s.default !== null) q.default = s.default as Question["default"];
  return q;
}

/** The fields in the order to ask them: those whose question
 * (description, else title) appears in the message, in the message's order
 * (dsh's message is the questions, one per line, and a map on its way may
 * have sorted the fields); then the required ones in `required`'s order;
 * then the rest as the request lists them. */
function fieldOrder(properties: Record<string, unknown>, required: string[], message: string): string[] {
  const listed = [...new Set([...required.filter((id) => id in properties), ...Object.keys(properties)])];
  const at = (id: string) => {
    const s = properties[id] as Schema | undefined;
    const text = isString(s?.description) ? s.description : isString(s?.title) ? s.title : "";
    const found = text ? message.indexOf(text) : -1;
    return found < 0 ? Infinity : found;
  };
  return listed
    .map((id, rank) => ({ id, rank, at: at(id) }))
    .sort((a, b) => (a.at !== b.at ? a.at - b.at : a.rank - b.rank))
    .map((entry) => entry.id);
}

/** The form of an `elicitation/create` request, questions in order (see
 * `fieldOrder`). A required field of a type that cannot be asked makes the
 * form unaskable; an optional one is left out. */
export function parseForm(request: CreateElicitationRequest): Form | { unsupported: string } {
  if (request.mode !== "form") return { unsupported: `not a form (mode ${String(request.mode)})` };
  const schema = (request as { requestedSchema?: { properties?: Record<string, unknown>; required?: string[] | null } })
    .requestedSchema;
  const properties = schema?.properties;
  if (!properties || typeof properties !== "object") return { unsupported: "the form has no fields" };
  const required = new Set((schema.required ?? []).filter((id) => id in properties));
  const order = fieldOrder(properties, schema.required ?? [], request.message);

  // `<id>_other` beside a question with options is that question's "Other…".
  const folded = new Map<string, string>();
  for (const id of order) {
    const base = /^(.+)_other$/.exec(id)?.[1];
    const other = properties[id] as Schema | undefined;
    const owner = base !== undefined ? (properties[base] as Schema | undefined) : undefined;
    if (base && owner && other?.type === "string" && !optionsOf(other).length && optionsOf(owner).length) {
      folded.set(id, base);
    }
  }
  const questions: Question[] = [];
  for (const id of order) {
    if (folded.has(id)) continue;
    const q = questionOf(id, properties[id], required.has(id));
    if (typeof q !== "string") questions.push(q);
    else if (required.has(id)) return { unsupported: q };
  }
  for (const [other, base] of folded) {
    const q = questions.find((q) => q.id === base);
    if (q) q.other = other;
  }
  if (!questions.length) return { unsupported: "the form has no field to ask" };
  const toolCallId = "toolCallId" in request && isString(request.toolCallId) ? request.toolCallId : undefined;
  return { ...(toolCallId ? { toolCallId } : {}), message: request.message, questions };
}

/** The picker's title for question `i` (from 0) of `n`. */
export function pickerTitle(q: Question, i: number, n: number): string {
  return `${n > 1 ? `dsh (${i + 1}/${n})` : "dsh"}: ${q.title}${q.kind === "multi" ? " (several)" : ""}`;
}

/** A QuickPick item: an option (`value`) or "Other…"/"Skip" (`special`). */
export interface PickItem {
  label: string;
  description?: string;
  value?: string | boolean;
  special?: "other" | "skip";
}

/** The QuickPick's items: the options (a yes/no for a boolean), then
 * "Other…" when the question has one, and "Skip" for an optional single
 * choice (an optional multi-select is skipped by accepting none). */
export function pickItems(q: Question): PickItem[] {
  const items: PickItem[] =
    q.kind === "boolean"
      ? [
          { label: "Yes", value: true },
          { label: "No", value: false },
        ]
      : q.options.map((o) => ({ label: o.label, ...(o.description ? { description: o.description } : {}), value: o.value }));
  if (q.other) items.push({ label: "Other…", special: "other" });
  if (!q.required && q.kind !== "multi") items.push({ label: "Skip", special: "skip" });
  return items;
}

/** What the QuickPick's accepted items answer: the answer (undefined:
 * skipped), or that "Other…" needs its text first, or a problem to show
 * while it stays open. `otherText` is the text typed for "Other…". */
export function answerFromPicks(
  q: Question,
  picked: readonly PickItem[],
  otherText?: string,
): { answer?: Answer; needsOther?: true; problem?: string } {
  const wantsOther = picked.some((item) => item.special === "other");
  const other = otherText?.trim() || undefined;
  if (wantsOther && !other) return { needsOther: true };
  if (q.kind === "multi") {
    const chosen = new Set(picked.flatMap((item) => (typeof item.value === "string" ? [item.value] : [])));
    const values = q.options.filter((o) => chosen.has(o.value)).map((o) => o.value);
    const answer: Answer | undefined =
      values.length || (wantsOther && other) ? { values, ...(wantsOther && other ? { other } : {}) } : undefined;
    const problem = problemOf(q, answer);
    return problem ? { problem } : { answer };
  }
  const item = picked[0];
  if (!item) return { problem: `${q.title}: choose one` };
  if (item.special === "skip") return q.required ? { problem: `${q.title}: an answer is required` } : {};
  if (item.special === "other") return { answer: { other: other! } };
  return { answer: { value: item.value! } };
}

/** What typing `text` answers (free text, a number): the answer
 * (undefined: left empty, skipped) or a problem to show. */
export function typedAnswer(q: Question, text: string): { answer?: Answer; problem?: string } {
  const trimmed = text.trim();
  if (!trimmed) return q.required ? { problem: "an answer is required" } : {};
  let answer: Answer = { text: trimmed };
  if (q.kind === "number" || q.kind === "integer") {
    const n = Number(trimmed);
    if (!Number.isFinite(n) || (q.kind === "integer" && !Number.isInteger(n))) {
      return { problem: `"${trimmed}" is not ${q.kind === "integer" ? "a whole number" : "a number"}` };
    }
    answer = { value: n };
  }
  const problem = problemOf(q, answer);
  return problem ? { problem } : { answer };
}

/** What is wrong with `answer` for `q`: required and missing, an option it
 * does not offer, out of the schema's bounds; undefined when nothing. The
 * panel's answers are checked here too: they come from a webview. */
export function problemOf(q: Question, answer: Answer | undefined): string | undefined {
  if (!answer) return q.required ? `${q.title}: an answer is required` : undefined;
  const offered = (value: unknown) => q.options.some((o) => o.value === value);
  const tooFew = (n: number, what: string) => (q.min !== undefined && n < q.min ? `${q.title}: at least ${q.min} ${what}` : undefined);
  const tooMany = (n: number, what: string) => (q.max !== undefined && n > q.max ? `${q.title}: at most ${q.max} ${what}` : undefined);
  switch (q.kind) {
    case "multi": {
      if (!("values" in answer) || !Array.isArray(answer.values) || !answer.values.every(offered)) return `${q.title}: not one of the choices`;
      if (answer.other !== undefined && (!q.other || !isString(answer.other))) return `${q.title}: no "Other" here`;
      const n = answer.values.length + (answer.other ? 1 : 0);
      return tooFew(n, "chosen") ?? tooMany(n, "chosen");
    }
    case "single":
      if ("other" in answer) return q.other && isString(answer.other) && answer.other.trim() ? undefined : `${q.title}: no "Other" here`;
      return "value" in answer && offered(answer.value) ? undefined : `${q.title}: not one of the choices`;
    case "boolean":
      return "value" in answer && typeof answer.value === "boolean" ? undefined : `${q.title}: yes or no`;
    case "text":
      if (!("text" in answer) || !isString(answer.text)) return `${q.title}: text expected`;
      return tooFew([...answer.text].length, "characters") ?? tooMany([...answer.text].length, "characters");
    case "number":
    case "integer": {
      if (!("value" in answer) || typeof answer.value !== "number" || !Number.isFinite(answer.value)) return `${q.title}: a number expected`;
      if (q.kind === "integer" && !Number.isInteger(answer.value)) return `${q.title}: a whole number expected`;
      if (q.min !== undefined && answer.value < q.min) return `${q.title}: at least ${q.min}`;
      if (q.max !== undefined && answer.value > q.max) return `${q.title}: at most ${q.max}`;
      return undefined;
    }
  }
}

/** The first problem with a whole set of answers (the panel's), or undefined. */
export function formProblem(form: Form, answers: Answers): string | undefined {
  for (const q of form.questions) {
    const problem = problemOf(q, answers[q.id]);
    if (problem) return problem;
  }
  return undefined;
}

/** The `content` of an `accept`: one entry per answered question (skipped
 * ones left out), "Other…" text under the question's `<id>_other`. */
export function content(form: Form, answers: Answers): Record<string, ElicitationContentValue> {
  const out: Record<string, ElicitationContentValue> = {};
  for (const q of form.questions) {
    const a = answers[q.id];
    if (!a) continue;
    if ("values" in a) out[q.id] = a.values;
    else if ("text" in a) out[q.id] = a.text;
    else if ("value" in a) out[q.id] = a.value;
    if ("other" in a && a.other && q.other) out[q.other] = a.other;
  }
  return out;
}

/** The response to send for what the user did. */
export function toResponse(form: Form, outcome: FormOutcome): CreateElicitationResponse {
  return outcome.action === "accept" ? { action: "accept", content: content(form, outcome.answers) } : { action: outcome.action };
}

/** One answer in words. */
export function describe(q: Question, a: Answer | undefined): string {
  if (!a) return "(skipped)";
  const label = (value: unknown) => q.options.find((o) => o.value === value)?.label ?? String(value);
  const parts: string[] = [];
  if ("values" in a) parts.push(...a.values.map(label));
  else if ("text" in a) parts.push(a.text);
  else if ("value" in a) parts.push(q.kind === "boolean" ? (a.value ? "Yes" : "No") : label(a.value));
  if ("other" in a && a.other) parts.push(`Other: ${a.other}`);
  return parts.join(", ");
}

/** The answers in words, one line per question. */
export function summary(form: Form, answers: Answers): string[] {
  return form.questions.map((q) => `${q.title}: ${describe(q, answers[q.id])}`);
}
