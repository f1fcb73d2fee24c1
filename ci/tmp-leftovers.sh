#!/usr/bin/env bash
# ci/tmp-leftovers.sh: what a test run left in /tmp. CTest runs `snapshot`
# first (fixture setup: the project's temporary folders that exist before
# the run) and `check` last (fixture cleanup): every /tmp/gt-* or
# /tmp/gauntlet-* entry that is new since the snapshot is named and the
# check fails. A test or script that leaves its folder behind (a missing
# trap, a case that exits before its cleanup) shows up here, not on a full
# disk three runs later.
#
# CI and developers share one machine, so another run may be using its own
# /tmp/gt-* meanwhile: an entry a live process still holds (the pid of a
# /tmp/gt-test-<pid>, or a process whose working folder or an open file is
# inside it) is printed as in use, not counted. By the time this runs,
# CTest has waited for every test of this run.
#
# usage: ci/tmp-leftovers.sh snapshot FILE
#        ci/tmp-leftovers.sh check FILE
#        ci/tmp-leftovers.sh selftest   (plants a leftover: check must fail
#                                        naming it, and pass once it is gone)
# env: GT_TMP (default /tmp)
# exit: 0 nothing left, 1 leftovers (named), 2 usage
set -uo pipefail
TMPD=${GT_TMP:-/tmp}

ours() { # the project's temporary entries, one per line, sorted
  find "$TMPD" -mindepth 1 -maxdepth 1 \( -name 'gt-*' -o -name 'gauntlet-*' \) 2>/dev/null | sort
}

# The live process that holds entry $1, as "pid (command)", or nothing.
holder() {
  local e=$1 pid base
  base=$(basename "$e")
  pid=${base#gt-test-}
  if [ "$pid" != "$base" ] && [ -n "$pid" ] && [ -z "${pid//[0-9]/}" ] && [ -d "/proc/$pid" ]; then
    echo "$pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80))"
    return
  fi
  for p in /proc/[0-9]*; do
    if [[ "$(readlink "$p/cwd" 2>/dev/null)" == "$e"* ]] ||
       ls -l "$p/fd" 2>/dev/null | grep -qF -- "-> $e/"; then
      echo "${p#/proc/} ($(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -c1-80))"
      return
    fi
  done
}

case "${1:-}" in
  snapshot)
    [ -n "${2:-}" ] || { echo "usage: ci/tmp-leftovers.sh snapshot FILE" >&2; exit 2; }
    ours >"$2"
    echo "ci/tmp-leftovers.sh: $(wc -l <"$2") project entries in $TMPD before the run"
    ;;
  check)
    [ -f "${2:-}" ] || { echo "ci/tmp-leftovers.sh: no snapshot ${2:-} (run snapshot first)" >&2; exit 2; }
    left=""
    while read -r p; do
      [ -n "$p" ] || continue
      h=$(holder "$p")
      if [ -n "$h" ]; then
        echo "ci/tmp-leftovers.sh: $p is in use by live process $h (another run's), not counted"
      else
        left+="$p"$'\n'
      fi
    done < <(comm -13 "$2" <(ours))
    left=${left%$'\n'}
    if [ -n "$left" ]; then
      echo "ci/tmp-leftovers.sh: FAIL: this run left $(echo "$left" | wc -l) entries in $TMPD:"
      while read -r p; do echo "  $p ($(du -sh "$p" 2>/dev/null | cut -f1))"; done <<<"$left"
      exit 1
    fi
    echo "ci/tmp-leftovers.sh: nothing left in $TMPD (gt-*, gauntlet-*)"
    ;;
  selftest)
    # In a private folder standing for /tmp: the tests running beside this
    # one make and remove their own folders in the real one meanwhile.
    self=$(mktemp -d "$TMPD/gt-leftovers-self.XXXXXX")
    trap 'rm -rf "$self"' EXIT
    mkdir "$self/tmp" "$self/tmp/gt-test-1"
    GT_TMP=$self/tmp bash "$0" snapshot "$self/snap" >/dev/null
    mkdir "$self/tmp/gt-test-planted" "$self/tmp/other" "$self/tmp/gt-test-$$"
    out=$(GT_TMP=$self/tmp bash "$0" check "$self/snap") &&
      { echo "ci/tmp-leftovers.sh: selftest FAIL: check passed with a leftover planted"; exit 1; }
    echo "$out" | grep -q "gt-test-planted" ||
      { echo "ci/tmp-leftovers.sh: selftest FAIL: check did not name the leftover: $out"; exit 1; }
    echo "$out" | grep -q "/other" &&
      { echo "ci/tmp-leftovers.sh: selftest FAIL: check named a folder that is not the project's"; exit 1; }
    echo "$out" | grep -q "gt-test-$$ is in use by live process $$" ||
      { echo "ci/tmp-leftovers.sh: selftest FAIL: a live process's folder was not told apart: $out"; exit 1; }
    rmdir "$self/tmp/gt-test-planted"
    GT_TMP=$self/tmp bash "$0" check "$self/snap" >/dev/null ||
      { echo "ci/tmp-leftovers.sh: selftest FAIL: check failed with nothing left"; exit 1; }
    echo "ci/tmp-leftovers.sh: selftest ok (a planted gt-test-planted failed the check, named; a live process's gt-test-PID was not counted; gone, it passed)"
    ;;
  *) echo "usage: ci/tmp-leftovers.sh snapshot FILE | check FILE | selftest" >&2; exit 2 ;;
esac
