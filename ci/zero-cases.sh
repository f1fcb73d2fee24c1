#!/usr/bin/env bash
# zero-cases.sh BUILD_DIR: a test binary that runs no case fails (exit 1,
# "0 cases ran"), never skips: tests/testutil.c gt_test_run. A CK_RUN_CASE
# filter that matches no test case of test_db ran nothing and must fail;
# test_gate (which skips a case with its reason where the cuda plugin is not
# built) must fail the same way rather than report the skip. The control: a
# filter naming test_db's real test case runs it and passes.
set -u
b=${1:?usage: zero-cases.sh BUILD_DIR}
fail=0
for t in test_db test_gate; do
  out=$(cd "$b" && CK_RUN_CASE=no_such_case "./$t" 2>&1); rc=$?
  if [ $rc -ne 1 ] || ! grep -q "FAIL: 0 cases ran" <<<"$out"; then
    echo "zero-cases: CK_RUN_CASE=no_such_case $t exited $rc, want 1 saying \"0 cases ran\":"
    echo "$out"
    fail=1
  fi
done
out=$(cd "$b" && CK_RUN_CASE=db ./test_db 2>&1); rc=$?
if [ $rc -ne 0 ] || grep -q "0 cases ran" <<<"$out"; then
  echo "zero-cases: control CK_RUN_CASE=db test_db exited $rc, want 0:"
  echo "$out"
  fail=1
fi
[ $fail = 0 ] && echo "zero-cases: a filter matching nothing fails (test_db, test_gate); the control passes"
exit $fail
