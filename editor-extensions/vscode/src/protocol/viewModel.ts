// The chat as the panel shows it: a pure fold of ACP `session/update`
// notifications (live, or replayed by `session/load`) into a view model.
// No `vscode` import: tested with node's test runner.

import type {
  SessionConfigOption,
  SessionNotification,
  ToolCallContent,
  ToolCallLocation,
} from "@agentclientprotocol/sdk" with { "resolution-mode": "import" };

import type { Delivery } from "./prompts";
import type { Question } from "./questions";

export type ToolStatus = "pending" | "in_progress" | "completed" | "failed";

export interface DiffView {
  path: string;
  oldText: string | null;
  newText: string;
}

export interface ToolView {
  id: string;
  title: string;
  kind: string;
  status: ToolStatus;
  text: string[];
  diffs: DiffView[];
  locations: ToolCallLocation[];
}

export type Item =
  | { type: "user"; text: string }
  | { type: "agent"; text: string }
  | { type: "thought"; text: string }
  | { type: "tool"; id: string }
  | { type: "plan"; entries: { content: string; status: string }[] }
  /** What the user answered to dsh's questions (or that they declined or
   * dismissed them), where it was asked. */
  | { type: "answers"; toolCallId?: string; action: "accept" | "decline" | "cancel"; lines: string[] };

export interface ChatState {
  items: Item[];
  tools: Record<string, ToolView>;
  /** Context use, and what the session cost so far when dsh sent it. */
  usage?: { used: number; size: number; cost?: { amount: number; currency: string } };
  mode?: string;
  title?: string;
  /** A select setting (mode, model, reasoning effort) as the pickers show it. */
  options: Picker[];
  /** A permission ask the user has not answered. */
  asking?: { toolCallId: string; title: string; options: { id: string; name: string; kind: string }[] };
  /** dsh's questions (a form) the user has not answered. `key` changes
   * with each form (the panel keeps what is typed while it stays). */
  question?: { key: number; toolCallId?: string; message: string; questions: Question[] };
  /** Prompts sent while the turn runs, waiting: queued for their own
   * turn, or to be steered into this one. */
  pending: { id: number; text: string; delivery: Delivery }[];
  /** A turn runs. */
  busy: boolean;
}

/** One select setting: its current value and the values to pick from. */
export interface Picker {
  id: string;
  name: string;
  category?: string;
  current: string;
  values: { value: string; name: string; description?: string }[];
}

export function emptyChat(): ChatState {
  return { items: [], tools: {}, options: [], pending: [], busy: false };
}

/** The select settings of `session/new` / `session/load` or of a
 * `config_option_update`. */
export function pickers(options: SessionConfigOption[] | null | undefined): Picker[] {
  const out: Picker[] = [];
  for (const option of options ?? []) {
    if (option.type !== "select") continue;
    const values: Picker["values"] = [];
    for (const entry of option.options) {
      if ("value" in entry) {
        values.push({ value: entry.value, name: entry.name, description: entry.description ?? undefined });
      } else {
        for (const inner of entry.options) {
          values.push({ value: inner.value, name: inner.name, description: inner.description ?? undefined });
        }
      }
    }
    out.push({
      id: option.id,
      name: option.name,
      category: option.category ?? undefined,
      current: option.currentValue,
      values,
    });
  }
  return out;
}

function contentText(content: ToolCallContent[] | null | undefined, tool: ToolView) {
  for (const block of content ?? []) {
    if (block.type === "content" && block.content.type === "text") {
      tool.text.push(block.content.text);
    } else if (block.type === "diff") {
      tool.diffs.push({ path: block.path, oldText: block.oldText ?? null, newText: block.newText });
    } else if (block.type === "terminal") {
      tool.text.push(`(terminal ${block.terminalId})`);
    }
  }
}

/** Appends `text` to the last item when it is of the same type (chunks). */
function appendText(state: ChatState, type: "user" | "agent" | "thought", text: string) {
  const last = state.items[state.items.length - 1];
  if (last && last.type === type) {
    last.text += text;
  } else {
    state.items.push({ type, text });
  }
}

/** Folds one notification into `state` (mutating it) and returns it. */
export function reduce(state: ChatState, note: SessionNotification): ChatState {
  const update = note.update;
  switch (update.sessionUpdate) {
    case "user_message_chunk":
      if (update.content.type === "text") appendText(state, "user", update.content.text);
      break;
    case "agent_message_chunk":
      if (update.content.type === "text") appendText(state, "agent", update.content.text);
      break;
    case "agent_thought_chunk":
      if (update.content.type === "text") appendText(state, "thought", update.content.text);
      break;
    case "tool_call": {
      const tool: ToolView = {
        id: update.toolCallId,
        title: update.title,
        kind: update.kind ?? "other",
        status: update.status ?? "pending",
        text: [],
        diffs: [],
        locations: update.locations ?? [],
      };
      contentText(update.content, tool);
      if (!state.tools[tool.id]) state.items.push({ type: "tool", id: tool.id });
      state.tools[tool.id] = tool;
      break;
    }
    case "tool_call_update": {
      const tool = state.tools[update.toolCallId];
      if (!tool) break;
      if (update.title) tool.title = update.title;
      if (update.kind) tool.kind = update.kind;
      if (update.status) tool.status = update.status;
      if (update.locations) tool.locations = update.locations;
      if (update.content) {
        tool.text = [];
        tool.diffs = [];
        contentText(update.content, tool);
      }
      break;
    }
    case "plan":
      state.items.push({
        type: "plan",
        entries: update.entries.map((entry) => ({ content: entry.content, status: entry.status })),
      });
      break;
    case "usage_update":
      state.usage = {
        used: update.used,
        size: update.size,
        ...(update.cost ? { cost: { amount: update.cost.amount, currency: update.cost.currency } } : {}),
      };
      break;
    case "current_mode_update":
      state.mode = update.currentModeId;
      break;
    case "config_option_update":
      state.options = pickers(update.configOptions);
      break;
    case "session_info_update":
      if (update.title) state.title = update.title;
      break;
    default:
      break;
  }
  return state;
}

/** The user's prompt, as the panel shows it when its turn starts (dsh
 * echoes only a steered prompt live, as it lands; `session/load` replays
 * every one as user chunks). */
export function userSays(state: ChatState, text: string): ChatState {
  state.items.push({ type: "user", text });
  return state;
}
