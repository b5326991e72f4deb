# Two commands do everything on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow env clean

$(STAMP): requirements-host.txt requirements-corpus.txt requirements-explorer.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-host.txt
	# Google's Model Explorer: its node-data builder checks irtrace's overlay (see the file's header)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-explorer.txt
	# the real-model corpus (torchvision, timm, transformers): --no-deps so torch stays at 2.13.0+cpu;
	# every package they import is pinned in the file (see its header and tests/corpus.py)
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -r requirements-corpus.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

env: $(STAMP)
	$(PY) -m irtrace setup all --if-possible

demo: env
	$(PY) -m irtrace demo --out demo-out

# two test processes, each file in one of them (its module fixtures computed once); TEST_JOBS=1 runs one
TEST_JOBS ?= 2

# jsdom, in which tests/test_report_html.py runs report.html's script (node's own registry; skipped without node)
JSDOM := tests/js/node_modules/.package-lock.json
$(JSDOM): tests/js/package.json tests/js/package-lock.json
	if command -v npm >/dev/null; then npm ci --prefix tests/js --no-audit --no-fund --loglevel=error; fi

test: env $(JSDOM)
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile

test-slow: env
	$(PY) -m pytest -q -m slow

clean:
	rm -rf $(VENV) demo-out
