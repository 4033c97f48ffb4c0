#!/usr/bin/env bash
# Make sure the browser tests have a browser: Debian's `chromium` at /usr/bin/chromium.
#
#   scripts/ensure-browser.sh            # called by `make test` before the suite
#
# Idempotent: does nothing when Chromium is already there (or LUIGI_TEST_CHROMIUM names one). When it
# is missing and we are root with apt-get, installs Debian's `chromium` package. Otherwise it says why
# it cannot, and exits 0: the browser tests then skip locally (and fail under CI, which must have one).
# It never downloads a browser any other way (no `playwright install`). Prints what it did.
set -euo pipefail

say() { echo "ensure-browser: $*"; }

if [ -n "${LUIGI_TEST_CHROMIUM:-}" ] && [ -x "${LUIGI_TEST_CHROMIUM}" ]; then
    say "using LUIGI_TEST_CHROMIUM=${LUIGI_TEST_CHROMIUM}"
    exit 0
fi
if [ -x /usr/bin/chromium ]; then
    say "chromium already installed ($(/usr/bin/chromium --version 2>/dev/null || echo 'version unknown'))"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    say "chromium is missing and we are not root: install it with 'sudo apt-get install chromium' (browser tests will skip)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    say "chromium is missing and there is no apt-get: install Chromium and set LUIGI_TEST_CHROMIUM (browser tests will skip)"
    exit 0
fi
say "installing Debian's chromium with apt-get"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends chromium >/dev/null; then
    say "package not found in the current lists: running apt-get update first"
    apt-get update >/dev/null
    apt-get install -y --no-install-recommends chromium >/dev/null
fi
say "installed $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
