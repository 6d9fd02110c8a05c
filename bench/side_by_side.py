#!/usr/bin/env python3
"""dsh and codex-acp side by side, over ACP, on the same scripted reply.

Both agents are driven by the same ACP client (this script) against one
mock model on 127.0.0.1 that speaks the two APIs they need: OpenAI chat
completions for dsh, the OpenAI Responses API for codex-acp. The reply is
the same for both: CHUNKS deltas of 4 characters, one SSE event per TCP
write (optionally PACE microseconds apart). Runs are interleaved (dsh,
codex, dsh, codex, ...), one process per run, PROMPTS prompts each; the
figures are medians.

It installs nothing. To compare with codex-acp, fetch it first:

    npm install --prefix /tmp/codex @zed-industries/codex-acp-linux-x64@0.16.0
    python3 bench/side_by_side.py \
        --codex /tmp/codex/node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp

Without --codex (or $CODEX_ACP) only dsh is measured. dsh is
target/release/dsh unless --dsh says otherwise (build it with
`cargo build --release -p dsh-acp-server`).
"""

import argparse
import http.server
import json
import os
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------
# The mock model (its own process, so it never shares a GIL with the client)


def chat_events(chunks):
    """OpenAI chat-completions SSE payloads for the scripted reply."""
    for index in range(chunks):
        yield {
            "id": "bench",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": piece(index)}}],
        }
    yield {
        "id": "bench",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": chunks, "total_tokens": chunks + 10},
    }


def responses_events(chunks):
    """OpenAI Responses-API SSE events (name, payload) for the same reply."""
    yield "response.created", {"type": "response.created", "response": {"id": "resp_bench"}}
    item = {"type": "message", "role": "assistant", "id": "msg_bench", "content": []}
    yield "response.output_item.added", {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": item,
    }
    for index in range(chunks):
        yield "response.output_text.delta", {
            "type": "response.output_text.delta",
            "item_id": "msg_bench",
            "output_index": 0,
            "content_index": 0,
            "delta": piece(index),
        }
    text = "".join(piece(index) for index in range(chunks))
    yield "response.output_item.done", {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": dict(item, content=[{"type": "output_text", "text": text, "annotations": []}]),
    }
    yield "response.completed", {
        "type": "response.completed",
        "response": {
            "id": "resp_bench",
            "usage": {
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": chunks,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": chunks + 10,
            },
        },
    }


def piece(index):
    return "abcdefghijklmnopqrstuvwxyz"[index % 26] * 3 + " "


class Mock(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    chunks = 2000
    pace = 0.0
    chat = []
    responses = []
    stats = {"requests": [], "emissions": []}

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/_stats":
            body = json.dumps(Mock.stats).encode()
        else:
            # Model listings and the like: nothing to offer.
            body = b'{"object":"list","data":[],"models":[]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        Mock.stats["requests"].append([self.path, time.monotonic()])
        if self.path.endswith("/chat/completions"):
            payloads = Mock.chat
        elif self.path.endswith("/responses"):
            payloads = Mock.responses
        else:
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.flush()
        sock = self.connection
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        first = time.monotonic()
        for payload in payloads:
            sock.sendall(payload)
            if Mock.pace:
                deadline = time.monotonic() + Mock.pace
                while time.monotonic() < deadline:
                    pass
        Mock.stats["emissions"].append([first, time.monotonic()])
        self.close_connection = True


def serve_mock(port_file, chunks, pace_us):
    Mock.chunks = chunks
    Mock.pace = pace_us / 1e6
    # Encoded once: an emission is only writes.
    Mock.chat = [f"data: {json.dumps(e)}\n\n".encode() for e in chat_events(chunks)]
    Mock.chat.append(b"data: [DONE]\n\n")
    Mock.responses = [
        f"event: {name}\ndata: {json.dumps(e)}\n\n".encode()
        for name, e in responses_events(chunks)
    ]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mock)
    with open(port_file, "w") as out:
        out.write(str(server.server_address[1]))
    server.serve_forever()


def mock_stats(port):
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /_stats HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        data = b""
        while True:
            more = sock.recv(65536)
            if not more:
                break
            data += more
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


# --------------------------------------------------------------------------
# The ACP client


class Agent:
    def __init__(self, argv, env, cwd):
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
        self.buffer = b""
        self.next_id = 0

    def send(self, message):
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def frames(self, timeout=120):
        """Frames as they arrive, each with the time it was read."""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                if line.strip():
                    yield time.monotonic(), json.loads(line)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the agent did not answer")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                data = os.read(fd, 1 << 20)
                if not data:
                    raise EOFError("the agent closed its stdout")
                self.buffer += data

    def call(self, method, params, on_frame=None):
        self.next_id += 1
        ident = self.next_id
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        for at, frame in self.frames():
            if frame.get("id") == ident and "method" not in frame:
                if "error" in frame:
                    raise RuntimeError(f"{method}: {frame['error']}")
                return at, frame["result"]
            if "method" in frame and "id" in frame:
                # A request from the agent (permission, fs): refuse it.
                self.send({"jsonrpc": "2.0", "id": frame["id"],
                           "error": {"code": -32601, "message": "not offered by the bench"}})
            elif on_frame:
                on_frame(at, frame)

    def cpu_seconds(self):
        """CPU time of the process: its threads' run time in nanoseconds
        (schedstat), or the clock-tick figures of stat, whichever is more
        (threads that ended are only in stat)."""
        with open(f"/proc/{self.proc.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        # utime, stime, cutime, cstime (fields 14-17 of stat)
        ticks = sum(int(value) for value in fields[11:15]) / CLOCK_TICKS
        run = 0
        for task in os.listdir(f"/proc/{self.proc.pid}/task"):
            try:
                with open(f"/proc/{self.proc.pid}/task/{task}/schedstat") as stat:
                    run += int(stat.read().split()[0])
            except OSError:
                pass
        return max(ticks, run / 1e9)

    def rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_agent(name, argv, env, cwd, port, prompts, chunks):
    """One process, `prompts` prompts; per-prompt figures and the process's."""
    agent = Agent(argv, env, cwd)
    try:
        agent.call("initialize", {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False},
                                   "terminal": False},
        })
        _, session = agent.call("session/new", {"cwd": cwd, "mcpServers": []})
        sid = session["sessionId"]
        turns = []
        cpu_before = agent.cpu_seconds()
        for number in range(prompts):
            seen = {"first": None, "chunks": 0, "text": 0}

            def on_frame(at, frame):
                update = frame.get("params", {}).get("update", {})
                if update.get("sessionUpdate") == "agent_message_chunk":
                    text = update.get("content", {}).get("text", "")
                    if "Model metadata for" in text:
                        return  # codex-acp's warning about the unknown model
                    seen["chunks"] += 1
                    seen["text"] += len(text)
                    if seen["first"] is None:
                        seen["first"] = at

            requests_before = len(mock_stats(port)["requests"])
            sent = time.monotonic()
            done, result = agent.call("session/prompt", {
                "sessionId": sid,
                "prompt": [{"type": "text", "text": f"Stream the reply, please ({number})."}],
            }, on_frame)
            stats = mock_stats(port)
            requests = stats["requests"][requests_before:]
            model_requests = [at for path, at in requests
                              if path.endswith(("/responses", "/chat/completions"))]
            first_event, last_event = stats["emissions"][-1]
            if seen["text"] != 4 * chunks:
                raise RuntimeError(f"{name}: {seen['text']} characters shown, "
                                   f"expected {4 * chunks} ({result})")
            turns.append({
                "request": (model_requests[0] - sent) * 1000,
                "first": (seen["first"] - sent) * 1000,
                "turn": (done - sent) * 1000,
                "mock": (last_event - first_event) * 1000,
                "updates": seen["chunks"],
                "model_requests": len(model_requests),
            })
        cpu = (agent.cpu_seconds() - cpu_before) / prompts * 1000
        rss = agent.rss_mb()
    finally:
        agent.close()
    return turns, cpu, rss


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--dsh", default=os.path.join(root, "target", "release", "dsh"))
    parser.add_argument("--codex", default=os.environ.get("CODEX_ACP"))
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--pace-us", type=float, default=0.0,
                        help="microseconds between SSE events (default: none)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=5)
    parser.add_argument("--mock", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mock:
        serve_mock(args.mock, args.chunks, args.pace_us)
        return

    scratch = tempfile.mkdtemp(prefix="dsh-side-by-side-")
    port_file = os.path.join(scratch, "port")
    mock = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--mock", port_file,
                             "--chunks", str(args.chunks), "--pace-us", str(args.pace_us)])
    try:
        while not os.path.exists(port_file) or not open(port_file).read():
            time.sleep(0.01)
        port = int(open(port_file).read())
        base = f"http://127.0.0.1:{port}"
        cwd = os.path.join(scratch, "work")
        os.makedirs(cwd)
        subprocess.run(["git", "init", "-q", cwd], check=False)

        agents = {}
        dsh_home = os.path.join(scratch, "dsh-home")
        agents["dsh"] = ([args.dsh, "acp"], dict(
            os.environ, DSH_HOME=dsh_home, DEEPSEEK_API_KEY="bench-key",
            DEEPSEEK_BASE_URL=base, DSH_LOG="error"))
        if args.codex:
            codex_home = os.path.join(scratch, "codex-home")
            os.makedirs(codex_home)
            with open(os.path.join(codex_home, "config.toml"), "w") as config:
                config.write(f'''model = "bench-model"
model_provider = "bench"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.bench]
name = "bench"
base_url = "{base}/v1"
wire_api = "responses"
env_key = "BENCH_API_KEY"
request_max_retries = 0
stream_max_retries = 0
''')
            agents["codex-acp"] = ([args.codex], dict(
                os.environ, CODEX_HOME=codex_home, BENCH_API_KEY="bench-key",
                RUST_LOG="error"))
        else:
            print("codex-acp not given (--codex or $CODEX_ACP): measuring dsh alone\n")

        results = {name: {"turns": [], "cpu": [], "rss": []} for name in agents}
        for run in range(args.runs):
            for name, (argv, env) in agents.items():
                turns, cpu, rss = run_agent(name, argv, env, cwd, port, args.prompts, args.chunks)
                results[name]["turns"] += turns
                results[name]["cpu"].append(cpu)
                results[name]["rss"].append(rss)
                print(f"run {run + 1}: {name}: CPU {cpu:.0f} ms per prompt, RSS {rss:.1f} MB",
                      file=sys.stderr)
    finally:
        mock.kill()
        mock.wait()
        shutil.rmtree(scratch, ignore_errors=True)

    def med(name, key):
        return statistics.median(turn[key] for turn in results[name]["turns"])

    rows = [
        ("prompt → model request (ms)", lambda n: med(n, "request")),
        ("first chunk to the editor (ms)", lambda n: med(n, "first")),
        ("whole turn (ms)", lambda n: med(n, "turn")),
        ("mock's own emission (ms)", lambda n: med(n, "mock")),
        ("CPU per prompt (ms)", lambda n: statistics.median(results[n]["cpu"])),
        ("RSS after the prompts (MB)", lambda n: statistics.median(results[n]["rss"])),
        ("message updates per prompt", lambda n: med(n, "updates")),
        ("model requests per prompt", lambda n: med(n, "model_requests")),
    ]
    names = list(agents)
    pace = f", {args.pace_us:g} µs apart" if args.pace_us else ", no delay"
    print(f"{args.chunks} chunks of 4 characters, one SSE event per write{pace}; "
          f"median of {args.runs} runs × {args.prompts} prompts, interleaved; "
          f"{os.cpu_count()} cores\n")
    header = "| measure | " + " | ".join(names) + (" | dsh / codex |" if len(names) > 1 else " |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for label, value in rows:
        figures = [value(name) for name in names]
        cells = " | ".join(f"{figure:.1f}" for figure in figures)
        ratio = ""
        if len(figures) > 1:
            ratio = f" | {figures[0] / figures[1]:.2f}×" if figures[1] else " | —"
        print(f"| {label} | {cells}{ratio} |")


if __name__ == "__main__":
    main()
