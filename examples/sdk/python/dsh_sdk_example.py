#!/usr/bin/env python3
"""Drive `dsh sdk` over stdio with nothing but the standard library.

It starts dsh as a child process, opens a session whose permission asks it
answers itself, runs a prompt that writes a file (printing the streamed
text and allowing the write), then starts a slow prompt and interrupts it.

    python3 dsh_sdk_example.py [--dsh PATH] [--cwd DIR]

Without DEEPSEEK_API_KEY it runs against the scripted model next to this
file (DSH_PROVIDER=replay), so it needs no key and no network.
"""

import argparse
import asyncio
import itertools
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "scripted-model.jsonl")


class Sdk:
    """A JSON-RPC 2.0 client over a child's stdin/stdout, one JSON per line."""

    def __init__(self, process):
        self.process = process
        self.ids = itertools.count(1)
        self.pending = {}
        self.subscriptions = {}  # subscription id -> asyncio.Queue of items
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def spawn(cls, dsh, env):
        process = await asyncio.create_subprocess_exec(
            dsh, "sdk",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            limit=64 * 1024 * 1024,
        )
        return cls(process)

    async def _read(self):
        while line := await self.process.stdout.readline():
            message = json.loads(line)
            if "id" in message and "method" not in message:
                future = self.pending.pop(message["id"], None)
                if future is not None:
                    future.set_result(message)
            elif message.get("method") == "session.event":
                params = message["params"]
                queue = self.subscriptions.setdefault(params["subscription"], asyncio.Queue())
                queue.put_nowait(params["result"])
        for future in self.pending.values():
            future.set_exception(ConnectionError("dsh sdk exited"))

    async def call(self, method, **params):
        request_id = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self.process.stdin.write(json.dumps(frame).encode() + b"\n")
        await self.process.stdin.drain()
        answer = await asyncio.wait_for(future, 30)
        if "error" in answer:
            error = answer["error"]
            code = (error.get("data") or {}).get("code", error["code"])
            raise RuntimeError(f"{method} failed: {code}: {error['message']}")
        return answer["result"]

    async def subscribe(self, session_id):
        subscription = await self.call("session/subscribe", sessionId=session_id)
        return self.subscriptions.setdefault(subscription, asyncio.Queue())

    async def close(self):
        await self.call("shutdown")
        self.process.stdin.close()
        code = await asyncio.wait_for(self.process.wait(), 10)
        self.reader.cancel()
        return code


async def run_prompt(sdk, session_id, items, text, on_delta=None, answer="allow_once"):
    """Sends a prompt and handles its notices until the session is idle again."""
    receipt = await sdk.call("session/prompt", sessionId=session_id, text=text)
    while True:
        item = await asyncio.wait_for(items.get(), 30)
        kind = item["kind"]
        if kind == "delta" and item["channel"] == "text":
            print(item["text"], end="", flush=True)
            if on_delta:
                await on_delta()
        elif kind == "event" and item["event"]["type"] == "tool/call":
            print(f"\n[tool] {item['event']['data']['view']['title']}")
        elif kind == "permission":
            print(f"[permission] {item['toolCall']['title']} -> {answer}")
            await sdk.call("session/respond", sessionId=session_id,
                           requestId=item["requestId"], optionId=answer)
        elif kind == "status" and item["status"] == "idle" and item.get("messageId") == receipt["messageId"]:
            print(f"\n[done] {item.get('stopReason') or item.get('error')}")
            return item


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsh", default=os.environ.get("DSH_BIN", "dsh"))
    parser.add_argument("--cwd", help="workspace (default: a fresh temporary directory)")
    args = parser.parse_args()

    env = dict(os.environ)
    env.setdefault("DSH_LOG", "warn")  # dsh logs to stderr, which we share
    if not env.get("DEEPSEEK_API_KEY"):
        env.update(DSH_PROVIDER="replay", DSH_REPLAY_FILE=os.path.abspath(SCRIPT))
    with tempfile.TemporaryDirectory() as scratch:
        env.setdefault("DSH_HOME", os.path.join(scratch, "home"))
        cwd = os.path.abspath(args.cwd or os.path.join(scratch, "workspace"))
        os.makedirs(cwd, exist_ok=True)

        sdk = await Sdk.spawn(args.dsh, env)
        info = await sdk.call("initialize", clientInfo={"name": "python-example"})
        print(f"server: {info['serverInfo']['name']} {info['serverInfo']['version']}")
        session = await sdk.call("session/new", cwd=cwd, approvals="client")
        session_id = session["sessionId"]
        items = await sdk.subscribe(session_id)

        # 1. A prompt with a tool call: stream the text, allow the write.
        done = await run_prompt(sdk, session_id, items, "Write a notes file.")
        assert done["stopReason"] == "end_turn", done
        with open(os.path.join(cwd, "notes.txt")) as notes:
            print(f"notes.txt: {notes.read().strip()}")

        # 2. A slow prompt, interrupted after a few deltas.
        seen = 0

        async def interrupt_soon():
            nonlocal seen
            seen += 1
            if seen == 5:
                await sdk.call("session/interrupt", sessionId=session_id)

        done = await run_prompt(sdk, session_id, items, "Think for a long time.", interrupt_soon)
        assert done["stopReason"] == "cancelled", done

        code = await sdk.close()
        print(f"dsh sdk exited with {code}")
        return code


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
