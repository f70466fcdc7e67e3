#!/usr/bin/env bash
# Installs the npm packages the server's end-to-end tests use (the official `openai` client) into
# tests/server/node/node_modules, exactly as pinned in package-lock.json. Fails loudly when npm
# cannot reach its registry: the OpenAI client test never skips silently.
set -euo pipefail
cd "$(dirname "$0")/../tests/server/node"
if [ -f node_modules/openai/package.json ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  echo "install-node-deps: node_modules up to date"
  exit 0
fi
command -v npm >/dev/null || { echo "install-node-deps: npm not found (scripts/install-deps.sh installs nodejs and npm)" >&2; exit 1; }
npm ci --no-audit --no-fund || { echo "install-node-deps: 'npm ci' failed (no access to the npm registry?)" >&2; exit 1; }
