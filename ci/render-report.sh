#!/bin/sh
# render-report.sh: renders an HTML report in headless Chromium and keeps a
# screenshot, to prove the report displays (not only that it parses).
#
#   ci/render-report.sh REPORT.html [OUT.png] [WIDTHxHEIGHT]
#
# Fails (exit 1) when Chromium produces no PNG or an empty one. Installs the
# Debian chromium package when it is missing and we are root (CI images).
set -eu
html=${1:?usage: ci/render-report.sh REPORT.html [OUT.png] [WIDTHxHEIGHT]}
png=${2:-${html%.html}.png}
size=${3:-1400x2000}
[ -f "$html" ] || { echo "render-report: $html not found" >&2; exit 2; }

browser=""
for b in chromium chromium-browser google-chrome; do
    if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
done
if [ -z "$browser" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "render-report: installing chromium" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
        browser=chromium
    else
        echo "render-report: no chromium found (apt-get install chromium)" >&2
        exit 2
    fi
fi

abs=$(cd "$(dirname "$html")" && pwd)/$(basename "$html")
rm -f "$png"
# A private profile dir keeps runs independent; --virtual-time-budget lets
# the page's script run before the shot.
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$profile" --virtual-time-budget=2000 \
    --window-size="$(echo "$size" | tr x ,)" --screenshot="$png" "file://$abs" \
    >/dev/null 2>&1 || true
if [ ! -s "$png" ]; then
    echo "render-report: FAIL: chromium wrote no screenshot for $html" >&2
    exit 1
fi
echo "render-report: $png ($(wc -c <"$png") bytes)"
