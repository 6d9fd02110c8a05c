// The prompts of one session: the one whose turn runs, and those sent
// while it runs. Pure bookkeeping (no `vscode`, no I/O), mirroring what dsh
// does with them: a prompt sent while a turn runs waits in dsh's line
// (FIFO). Queued, it starts its own turn when the turns ahead of it end;
// steered (`_meta.dsh.delivery = "steer"`), dsh puts it into the running
// turn at its next step boundary and sends it back as a
// `user_message_chunk` — it has *landed* — and answers it when that turn
// ends. A steer the turn ended before reaching runs as an ordinary prompt
// in its place in line. `session/cancel` ends the running turn and every
// waiting prompt.

export type Delivery = "queue" | "steer";

export interface Prompt {
  id: number;
  text: string;
  delivery: Delivery;
  state: "running" | "waiting" | "landed" | "done";
}

export class PromptLine {
  /** The prompt whose turn runs. */
  running?: Prompt;
  /** Sent while it runs, in order. */
  waiting: Prompt[] = [];
  private nextId = 0;

  get busy(): boolean {
    return this.running !== undefined;
  }

  /** A prompt the user sends. With no turn running it starts one (a
   * steer too: there is nothing to steer); else it waits. */
  send(text: string, delivery: Delivery = "queue"): { prompt: Prompt; starts: boolean } {
    const prompt: Prompt = { id: ++this.nextId, text, delivery, state: "waiting" };
    if (!this.running) {
      prompt.delivery = "queue";
      prompt.state = "running";
      this.running = prompt;
      return { prompt, starts: true };
    }
    this.waiting.push(prompt);
    return { prompt, starts: false };
  }

  /** dsh sent a user message into the running turn: the waiting steer it
   * is (the first with that text, else the first steer), now landed;
   * undefined when none waits (a replayed message). */
  landed(text: string): Prompt | undefined {
    if (!this.running) return undefined;
    const steers = this.waiting.filter((p) => p.delivery === "steer");
    const prompt = steers.find((p) => p.text === text) ?? steers[0];
    if (!prompt) return undefined;
    this.waiting.splice(this.waiting.indexOf(prompt), 1);
    prompt.state = "landed";
    return prompt;
  }

  /** dsh answered `prompt`. If its turn was the running one, the next
   * waiting prompt's turn starts (a steer that did not land runs as an
   * ordinary prompt): returned. A waiting prompt answered before its turn
   * (refused, or cancelled) leaves the line. */
  answered(prompt: Prompt): Prompt | undefined {
    const was = prompt.state;
    prompt.state = "done";
    if (was === "waiting") {
      const at = this.waiting.indexOf(prompt);
      if (at >= 0) this.waiting.splice(at, 1);
      return undefined;
    }
    if (was !== "running" || this.running !== prompt) return undefined;
    this.running = this.waiting.shift();
    if (this.running) {
      this.running.state = "running";
      this.running.delivery = "queue";
    }
    return this.running;
  }

  /** `session/cancel`: every waiting prompt is dropped (returned); the
   * running turn ends when dsh answers it. */
  cancel(): Prompt[] {
    const dropped = this.waiting;
    this.waiting = [];
    for (const prompt of dropped) prompt.state = "done";
    return dropped;
  }
}
