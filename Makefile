# Two entry points (see README): `make demo` and `make test`. Each creates .venv when missing.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: venv test test-all demo clean

$(STAMP): requirements.txt requirements-dev.txt setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

# Default test run: fast tests plus the slow ones that use ../shared/data when it is present.
test: $(STAMP)
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) build dist *.egg-info
