#!/usr/bin/env bash
# The course's commands (run from anywhere):
#   ./course.sh lab    install the pinned stack into .venv, then open the notebooks in JupyterLab
#   ./course.sh test   install the pinned stack into .venv, then run the unit tests and every
#                      notebook through nbval (what CI runs, on a machine without a GPU)
#   ./course.sh gpu    on a machine with an NVIDIA GPU, in the Python environment you run the course in
#                      (torch with CUDA, triton, jupyter, nbval, pytest): the GPU-marked tests, then
#                      every notebook through nbval. `./course.sh gpu notebooks/05_*.ipynb` runs some.
#   ./course.sh execute NOTEBOOK...   run notebooks in place and keep their outputs (on the reference
#                      GPU this makes the committed outputs; same Python environment as `gpu`)
#   ./course.sh new NN_topic ["Title"]   scaffold every file of a new chapter (CONTRIBUTING.md), tests passing
#   ./course.sh slides [NN ...] [--no-pdf]   install the pinned stack, then build the lecture decks
#                      (slides/*.md) into .cache/slides/*.html, self-contained reveal.js pages that need no
#                      network, and a PDF handout of each in .cache/slides/pdf/ where Chromium is installed
# COURSE_VENV picks another environment folder for lab/test; extra arguments go to jupyter lab / pytest.
set -euo pipefail
cd "$(dirname "$0")"
venv=${COURSE_VENV:-.venv}

setup() {
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r requirements-ci.txt
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
  # PyPI's torchvision is a CUDA build whose C++ ops cannot load next to the CPU torch wheel, and its
  # import then fails; tools/torchvision_cpu_shim.py (read it) makes its Python parts importable.
  if ! "$venv/bin/python" -c "import torchvision" 2>/dev/null; then
    site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    cp tools/torchvision_cpu_shim.py "$site/course_torchvision_cpu_shim.py"
    echo "import course_torchvision_cpu_shim; course_torchvision_cpu_shim.install()" \
      > "$site/course_torchvision_cpu_shim.pth"
    "$venv/bin/python" -c "import torchvision" || { echo "torchvision does not import" >&2; exit 1; }
  fi
}

mode=${1:-}; shift || true
case "$mode" in
  lab)  setup
        # containers and cloud GPU machines often run as root, which Jupyter refuses without this flag
        if [ "$(id -u)" = 0 ]; then set -- --allow-root "$@"; fi
        exec "$venv/bin/python" -m jupyter lab notebooks/ "$@" ;;
  test) setup
        # Notebooks run in parallel, one per core: one BLAS/OpenMP thread each avoids oversubscription,
        # which made small CPU matmuls tens of times slower.
        export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
        # The suite builds a dozen C++ extensions: torch/extension.h precompiled once halves each build.
        export COURSE_PCH=${COURSE_PCH:-1}
        if [ "$COURSE_PCH" = 1 ]; then  # built in the background while the first tests run (a minute, one core)
          "$venv/bin/python" -c "from course_utils.cuda_build import warm_precompiled_header as w; w()" >/dev/null 2>&1 &
        fi
        # One worker per core, one notebook per worker (--dist loadfile); GPU-marked tests skip here.
        exec "$venv/bin/python" -m pytest -p no:cacheprovider -n "${COURSE_WORKERS:-auto}" --dist loadfile \
             --nbval-lax --nbval-cell-timeout=900 tests notebooks "$@" ;;
  gpu)  python=${PYTHON:-python3}
        "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU here: ./course.sh gpu is for a GPU machine')"
        export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
        if [ $# -eq 0 ]; then
          "$python" -m pytest -p no:cacheprovider -m gpu tests
          set -- notebooks
        fi
        # One notebook at a time: they measure the GPU, and two at once would disturb each other.
        exec "$python" -m pytest -p no:cacheprovider --nbval-lax --nbval-cell-timeout=1800 "$@" ;;
  execute) [ $# -gt 0 ] || { echo "usage: ./course.sh execute notebooks/NN_name.ipynb ..." >&2; exit 2; }
        export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
        for notebook in "$@"; do
          "${PYTHON:-python3}" -m jupyter nbconvert --to notebook --execute --inplace \
            --ExecutePreprocessor.timeout=1800 "$notebook"
        done ;;
  new)  [ $# -ge 1 ] || { echo 'usage: ./course.sh new NN_topic ["Title"]   (see CONTRIBUTING.md)' >&2; exit 2; }
        setup
        exec "$venv/bin/python" tools/new_chapter.py "$@" ;;
  slides) setup
        exec "$venv/bin/python" slides/build_decks.py "$@" ;;
  *)    echo "usage: ./course.sh lab | test | gpu | execute | new | slides  [extra args]" >&2; exit 2 ;;
esac
