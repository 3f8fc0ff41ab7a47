# Two entry points (see README): `make demo` and `make test`. Each creates .venv when missing.
# `make docs` builds the documentation site into site/.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: venv test test-slow test-all demo demo-clean docs clean

$(STAMP): requirements.txt requirements-dev.txt setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

# Default test run: every test not marked slow (under 10 minutes on 2 CPU cores). `make test-slow` runs the
# slow ones (real data from ../shared/data when present, the offline model, wheels, the project's smoke
# workflow: minutes each); `make test-all` both in one pytest run. CI (.ci/run) runs test, then test-slow.
test: $(STAMP)
	$(PY) -m pytest -q -m "not slow" --durations=20

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow --durations=20

test-all: $(STAMP)
	$(PY) -m pytest -q --durations=20

# The offline demo on this machine's CPU: weasel runs the project's `demo` workflow (project.yml):
# public data from ../shared/data (or the official downloads), KB, a short self-alignment run of the
# offline MiniLM, index, NER, package -> pip install -> spacy.load by name, evaluation report.
# Steps whose inputs did not change are skipped on a rerun; `make demo-clean` starts over.
demo: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false $(PY) -m weasel run demo

# The documentation site (MkDocs + Material + mkdocstrings), built offline into site/ with warnings as
# errors. The CLI and errors pages are generated at build time (scripts/docs_hooks.py), the benchmark
# tables are checked against benchmarks/results/*.json first.
docs: $(STAMP)
	$(PY) scripts/render_benchmarks.py --check
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# also the README quick start's outputs
demo-clean:
	rm -rf training corpus metrics packages assets/data assets/downloads assets/base_model project.lock \
		indexes kbs linker_medic my_linker

clean:
	rm -rf $(VENV) build dist site *.egg-info
