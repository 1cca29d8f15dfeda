#!/usr/bin/env bash
# The coding agents the agent tests run, at pinned versions, into .ci/agents/
# (untracked: the folder ignores itself) or into $LOGIST_AGENTS_DIR (a folder
# outside the clone, kept between runs; an absolute path), each where its own dependencies
# cannot meet Logist's:
#   aider/       aider-chat in a venv of its own (its pins conflict with Logist's)
#   npm/         Codex CLI and Claude Code, npm install -g --prefix
#   bin/         one link per agent program (aider, codex, claude); the tests
#                (tests/agents/) put it on PATH, reading LOGIST_AGENTS_DIR too
# With --more, Qwen Code and opencode too (npm/, links qwen and opencode): the
# tests run them when they are there, and skip them otherwise.
# Run again, it installs only what is missing or at another version.
# pip and npm keep what they downloaded in their own caches, so a later run on
# the same machine downloads nothing. Prints the time each took and the size.
set -euo pipefail
cd "$(dirname "$0")"

AIDER_VERSION=0.86.2
CODEX_VERSION=0.171.0
CLAUDE_CODE_VERSION=2.1.197
QWEN_CODE_VERSION=0.15.10
OPENCODE_VERSION=1.18.33
more=no
[ "${1:-}" = --more ] && more=yes

root=${LOGIST_AGENTS_DIR:-$PWD/agents}
mkdir -p "$root/bin"
root=$(cd "$root" && pwd)
[ -e "$root/.gitignore" ] || echo '*' > "$root/.gitignore"

seconds() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(seconds)" 'BEGIN { printf "%.1f s", b - a }'; }

start=$(seconds)
if [ "$("$root/aider/bin/python" -c 'import importlib.metadata as m; print(m.version("aider-chat"))' 2>/dev/null)" != "$AIDER_VERSION" ]; then
    rm -rf "$root/aider"
    python3 -m venv "$root/aider"
    "$root/aider/bin/pip" install -q --disable-pip-version-check "aider-chat==$AIDER_VERSION"
fi
ln -sfn ../aider/bin/aider "$root/bin/aider"
echo "aider-chat $AIDER_VERSION: $(took "$start"), $(du -sh "$root/aider" | cut -f1)"

start=$(seconds)
wanted="@openai/codex@$CODEX_VERSION @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION"
programs="codex claude"
if [ $more = yes ]; then
    wanted="$wanted @qwen-code/qwen-code@$QWEN_CODE_VERSION opencode-ai@$OPENCODE_VERSION"
    programs="$programs qwen opencode"
fi
# The versions installed, in the same words (package@version ...).
have=$(cd "$root" && node -e '
  const fs = require("fs");
  const v = n => { try { return JSON.parse(fs.readFileSync("npm/lib/node_modules/" + n + "/package.json")).version } catch (e) { return "" } };
  console.log(process.argv.slice(1).map(p => { const n = p.slice(0, p.lastIndexOf("@")); return n + "@" + v(n) }).join(" "))' \
  $wanted 2>/dev/null || true)
if [ "$have" != "$wanted" ]; then
    # -g with a prefix: each package in npm/lib/node_modules, its programs in npm/bin.
    npm install -g --prefix "$root/npm" --no-fund --no-audit --loglevel=error $wanted
fi
for program in $programs; do
    ln -sfn "../npm/bin/$program" "$root/bin/$program"
done
echo "$wanted: $(took "$start"), $(du -sh "$root/npm" | cut -f1)"

for program in aider $programs; do
    printf '%s: ' "$program"; "$root/bin/$program" --version 2>&1 | tail -n 1
done
