#!/usr/bin/env bash
# Install everything the test suite needs, then run the whole suite.
# Used verbatim by the README and by .ci/run. Exit code: pytest's (5 = "no tests" is an error here).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q --disable-pip-version-check -r requirements.txt
if [ -d tests/e2e ] && ! command -v chromium >/dev/null 2>&1; then
  # Browser tests drive Debian's Chromium through Python Playwright.
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi
set +e
# Two pytest workers (pytest-xdist), each test file on one of them (module fixtures stay whole); every test
# runs torch on one thread, so the two share 2 cores without thrashing.
python -m pytest -n "${STITCHLAB_TEST_WORKERS:-2}" --dist loadfile "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
