#!/usr/bin/env bash
# Packages dsh for the ACP registry (agentclientprotocol/registry), which
# Zed, JetBrains and other clients install agents from.
#
#   editor-extensions/registry/package.sh [--binary PATH] [--out DIR] [--entry FILE]
#
# It builds the release binary for this machine's target (or packages
# --binary), writes dist/dsh-<version>-<triple>.tar.gz and its .sha256,
# and writes the registry entry (dsh/agent.json) from the one target table
# below: every target's archive URL, `cmd` and `args`. Only the host's
# archive is built here; the others come from the release workflow of
# each platform. The release location is a parameter:
#   DSH_RELEASE_URL  (default https://github.com/dsh-agent/dsh/releases/download)
#   DSH_REPOSITORY   (default https://github.com/dsh-agent/dsh)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

# registry platform   Rust target triple           archive  command
TARGETS="
linux-x86_64          x86_64-unknown-linux-gnu     tar.gz   ./dsh
linux-aarch64         aarch64-unknown-linux-gnu    tar.gz   ./dsh
darwin-x86_64         x86_64-apple-darwin          tar.gz   ./dsh
darwin-aarch64        aarch64-apple-darwin         tar.gz   ./dsh
"
# Windows targets join the table once dsh builds there (it needs Unix
# process groups, flock and pidfds today).

binary=""
out="$root/target/dist"
entry="$here/dsh/agent.json"
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --entry) entry="$2"; shift 2 ;;
    *) echo "usage: $0 [--binary PATH] [--out DIR] [--entry FILE]" >&2; exit 2 ;;
  esac
done

host="$(rustc -vV | sed -n 's/^host: //p')"
if [ -z "$binary" ]; then
  cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin dsh >&2
  binary="$root/target/release/dsh"
fi
version="$("$binary" --version | awk '{print $2}')"
mkdir -p "$out"
archive="dsh-$version-$host.tar.gz"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp "$binary" "$stage/dsh"
chmod 755 "$stage/dsh"
# No symbols in what users download (a debug build shrinks the most).
strip "$stage/dsh" 2>/dev/null || true
# Reproducible: fixed owner, order and times.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2026-01-01 00:00Z' \
  -C "$stage" -czf "$out/$archive" dsh
(cd "$out" && sha256sum "$archive" > "$archive.sha256")

DSH_VERSION="$version" DSH_TARGETS="$TARGETS" python3 - "$entry" <<'PY'
import json, os, sys
version = os.environ["DSH_VERSION"]
release = os.environ.get("DSH_RELEASE_URL", "https://github.com/dsh-agent/dsh/releases/download")
repository = os.environ.get("DSH_REPOSITORY", "https://github.com/dsh-agent/dsh")
binary = {}
for line in os.environ["DSH_TARGETS"].strip().splitlines():
    platform, triple, kind, cmd = line.split()
    binary[platform] = {
        "archive": f"{release}/v{version}/dsh-{version}-{triple}.{kind}",
        "cmd": cmd,
        "args": ["acp"],
    }
entry = {
    "id": "dsh",
    "name": "dsh",
    "version": version,
    "description": "A coding agent on DeepSeek (or any OpenAI-compatible model): streamed replies, diffs, permission prompts, real language servers",
    "repository": repository,
    "authors": ["The dsh developers"],
    "license": "Apache-2.0",
    "icon": "icon.svg",
    "distribution": {"binary": dict(sorted(binary.items()))},
}
with open(sys.argv[1], "w") as f:
    json.dump(entry, f, indent=2)
    f.write("\n")
PY
echo "$out/$archive" 
echo "$out/$archive.sha256"
echo "$entry"
