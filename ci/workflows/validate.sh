#!/usr/bin/env bash
# ci/workflows/validate.sh: checks the example CI workflows (CTest
# ci_workflows). github-actions.yml against the GitHub workflow JSON schema
# (../shared/schemas/github-workflow.schema.json, SchemaStore, offline);
# gitlab-ci.yml has no schema here, so it is checked for what would break
# the pipeline: it parses, every job's stage is declared, every `needs`
# names a job, the qualify job fans out with parallel:matrix. Both must
# call ci/qualify.sh, the script this repository tests.
# exit: 0 valid, 1 invalid, 77 skipped (python3, jsonschema or pyyaml
# missing, or no schema file: the reason is printed).
set -uo pipefail
cd "$(dirname "$0")"
SCHEMA=${GT_WORKFLOW_SCHEMA:-../../../shared/schemas/github-workflow.schema.json}
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
python3 -c 'import jsonschema, yaml' 2>/dev/null ||
  { echo "SKIP: python3 lacks jsonschema or pyyaml (pip install jsonschema pyyaml)"; exit 77; }
[ -f "$SCHEMA" ] || { echo "SKIP: no schema at $SCHEMA"; exit 77; }
python3 - "$SCHEMA" github-actions.yml gitlab-ci.yml <<'PY'
import json, sys
import jsonschema, yaml

schema_path, gh_path, gl_path = sys.argv[1:4]
bad = []

gh = yaml.safe_load(open(gh_path))
if True in gh:  # YAML 1.1 reads the key `on` as boolean true
    gh["on"] = gh.pop(True)
validator = jsonschema.Draft7Validator(json.load(open(schema_path)))
for e in sorted(validator.iter_errors(gh), key=lambda e: list(e.path)):
    bad.append("%s: %s: %s" % (gh_path, "/".join(map(str, e.path)) or "(top)", e.message[:300]))
jobs = gh.get("jobs", {})
for name, job in jobs.items():
    for n in ([job["needs"]] if isinstance(job.get("needs"), str) else job.get("needs", [])):
        if n not in jobs:
            bad.append("%s: job %s needs unknown job %s" % (gh_path, name, n))
if "matrix" not in jobs.get("qualify", {}).get("strategy", {}):
    bad.append("%s: the qualify job has no strategy.matrix" % gh_path)

gl = yaml.safe_load(open(gl_path))
stages = gl.get("stages", [])
reserved = {"stages", "variables", "default", "include", "workflow", "image", "services",
            "cache", "before_script", "after_script"}
gljobs = {k: v for k, v in gl.items() if k not in reserved and not k.startswith(".")}
for name, job in gljobs.items():
    if not isinstance(job, dict) or "script" not in job:
        bad.append("%s: job %s has no script" % (gl_path, name))
        continue
    if job.get("stage", "test") not in stages:
        bad.append("%s: job %s: stage %r is not in stages" % (gl_path, name, job.get("stage")))
    for n in job.get("needs", []):
        n = n["job"] if isinstance(n, dict) else n
        if n not in gljobs:
            bad.append("%s: job %s needs unknown job %s" % (gl_path, name, n))
if not gljobs.get("qualify", {}).get("parallel", {}).get("matrix"):
    bad.append("%s: the qualify job has no parallel:matrix" % gl_path)

for path in (gh_path, gl_path):
    text = open(path).read()
    for want in ("ci/qualify.sh merge", "bash ci/qualify.sh\n"):
        if want not in text:
            bad.append("%s: does not run `%s`" % (path, want.strip()))

for b in bad:
    print(b)
print("workflows: %s (%s: %d jobs; %s: %d jobs)" %
      ("INVALID" if bad else "valid", gh_path, len(jobs), gl_path, len(gljobs)))
sys.exit(1 if bad else 0)
PY
