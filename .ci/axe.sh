#!/usr/bin/env bash
# axe-core, the accessibility checker tests/serve/test_accessibility.py runs in
# logist serve's pages, at a pinned version from npm, into .ci/axe/
# (untracked: the folder ignores itself) or into $LOGIST_AXE_DIR (an absolute
# path outside the clone, kept between runs). The test reads
# node_modules/axe-core/axe.min.js from there; with CI=true a missing one
# fails it instead of skipping it. Run again, it installs only a missing or
# other version.
set -euo pipefail
cd "$(dirname "$0")"

AXE_CORE_VERSION=4.10.2

root=${LOGIST_AXE_DIR:-$PWD/axe}
mkdir -p "$root"
[ -e "$root/.gitignore" ] || echo '*' > "$root/.gitignore"
have=$(node -e 'try { console.log(require(process.argv[1]).version) } catch (e) { console.log("") }' \
    "$root/node_modules/axe-core/package.json" 2>/dev/null || true)
if [ "$have" != "$AXE_CORE_VERSION" ]; then
    npm install --prefix "$root" --no-save --no-package-lock --no-fund --no-audit --loglevel=error "axe-core@$AXE_CORE_VERSION"
fi
echo "axe-core $AXE_CORE_VERSION: $root/node_modules/axe-core/axe.min.js"
