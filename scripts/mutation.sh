#!/usr/bin/env bash
# Mutation testing of the modules that keep files and state safe, each against its own tests
# (pyproject.toml [tool.mutmut]; the result and every survivor's reason: docs/testing.md).
# Slow, so never run by .ci/run. Usage:
#   scripts/mutation.sh                 every module below, one after the other
#   scripts/mutation.sh placing settle  only those
#   MUTATION_JOBS=1 scripts/mutation.sh ...   worker processes (default: 2)
# It works in ./mutants/ (a copy of the code with the mutants in it; ignored by git) and keeps
# results there, so a second run only redoes what it is asked to. A PostgreSQL cluster from
# tests/pg.py serves the store's contract tests of every mutant (or FFWATCHD_TEST_PG_URL).
set -euo pipefail
cd "$(dirname "$0")/.."

py=${PYTHON:-.venv/bin/python}
[ -x "$py" ] || py=python3
mutmut="$(dirname "$py")/mutmut"
if [ ! -x "$mutmut" ]; then
  "$py" -m pip install -q -e '.[test,mutation]'
fi

# The mutants of each module, as mutmut names them. The store is mutated only where it fences:
# a write by the job's lease owner on its attempt, and the heartbeat. The rules are written once
# (store/jobrules.py, the verbs in store/sqlstore.py); the contract tests run them on both backends.
R='ffwatchd.store.jobrules.x_'
V='ffwatchd.store.sqlstore.xǁSqlJobStoreǁ'
rules="held fenced_sql fenced refusal heartbeat"
verbs="heartbeat _fenced set_filing confirm_lease finish finish_and_claim fail release"
declare -A GLOBS=(
  [placing]="ffwatchd.filing.placing.*"
  [plan]="ffwatchd.filing.plan.*"
  [safefs]="ffwatchd.fs.safefs.*"
  [writefs]="ffwatchd.fs.writefs.*"
  [settle]="ffwatchd.watch.settle.*"
  [retention]="ffwatchd.ops.retention.*"
  [workloop]="ffwatchd.work.workloop.*"
  [safeyaml]="ffwatchd.spec.safeyaml.*"
  [values]="ffwatchd.spec.values.x_url_allowed__* ffwatchd.spec.values.x__path_segments__*"
  [store]="$(for f in $rules; do printf '%s%s__mutmut_* ' "$R" "$f"; done; for f in $verbs; do printf '%s%s__mutmut_* ' "$V" "$f"; done)"
  [report]="ffwatchd.batches.report.x_render_html__* ffwatchd.batches.report.x_row_view__* ffwatchd.batches.report.x_page_view__*"
)
ORDER="placing plan settle safefs writefs store values safeyaml report retention workloop"
modules=("$@")
[ ${#modules[@]} -gt 0 ] || read -r -a modules <<< "$ORDER"
for m in "${modules[@]}"; do
  [ -n "${GLOBS[$m]+x}" ] || { echo "unknown module $m (known: $ORDER)" >&2; exit 2; }
done

if [ -z "${FFWATCHD_TEST_PG_URL:-}" ]; then
  pg=$("$py" scripts/mutation_tool.py pg-start)
  if [ -n "$pg" ]; then
    export FFWATCHD_TEST_PG_URL="${pg% *}"
    trap '"$py" scripts/mutation_tool.py pg-stop "${pg#* }"' EXIT
  fi
fi

mkdir -p mutants
for m in "${modules[@]}"; do
  echo "== $m: ${GLOBS[$m]}"
  read -r -a globs <<< "${GLOBS[$m]}"
  start=$(date +%s)
  "$mutmut" run --max-children "${MUTATION_JOBS:-2}" "${globs[@]}" > "mutants/run-$m.log" 2>&1 || {
    echo "mutmut failed for $m (mutants/run-$m.log):"; tail -20 "mutants/run-$m.log"; exit 1; }
  echo "   $(( $(date +%s) - start )) s"
  "$py" scripts/mutation_tool.py summary "$mutmut" "${globs[@]}"
done
