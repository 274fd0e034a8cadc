#!/usr/bin/env bash
# The course's two set-up commands (run from anywhere):
#   ./course.sh lab    install the pinned stack into .venv, then open the notebooks in JupyterLab
#   ./course.sh test   install the pinned stack into .venv, then run the unit tests and every
#                      notebook through nbval (what CI runs)
# COURSE_VENV picks another environment folder; extra arguments go to jupyter lab / pytest.
set -euo pipefail
cd "$(dirname "$0")"
venv=${COURSE_VENV:-.venv}

setup() {
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r requirements-ci.txt
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
}

mode=${1:-}; shift || true
case "$mode" in
  lab)  setup; exec "$venv/bin/python" -m jupyter lab notebooks/ "$@" ;;
  test) setup
        # Notebooks run in parallel, one per core: one BLAS/OpenMP thread each avoids oversubscription,
        # which made small CPU matmuls tens of times slower.
        export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
        # One worker per core, one notebook per worker (--dist loadfile); GPU-marked tests skip here.
        exec "$venv/bin/python" -m pytest -p no:cacheprovider -n "${COURSE_WORKERS:-auto}" --dist loadfile \
             --nbval-lax --nbval-cell-timeout=900 tests notebooks "$@" ;;
  *)    echo "usage: ./course.sh lab | test  [extra args]" >&2; exit 2 ;;
esac
