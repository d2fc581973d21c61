# Everything a fresh clone needs comes from the project's own files: `make demo`, `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: venv lock demo test test-fast check lint browser fixtures oracle bench clean

venv: $(STAMP)

## The exact versions of constraints.txt (reproducible: the same packages on every machine and in CI).
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

## Upgrade: resolve the newest versions pyproject.toml allows in a scratch venv and rewrite constraints.txt
## from it (review `git diff constraints.txt`, run `make clean test`, commit).
lock:
	rm -rf .venv-lock
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install -q --upgrade pip
	.venv-lock/bin/python -m pip install -q -e '.[dev]'
	{ sed -n '/^#/p' constraints.txt; .venv-lock/bin/python -m pip freeze --exclude-editable | grep -v '^spillway=='; } \
	  > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf .venv-lock
	@echo "constraints.txt rewritten: review git diff constraints.txt, then make clean test"

## The main job: spillway on the bundled real-Flink fixtures.
demo: $(STAMP)
	$(PY) tools/demo.py

## The whole test suite (what .ci/run calls): static checks, then every test (Spark, Flink and Chromium included).
## The caches are listed before and after; a Flink release's jars fetched on first use are announced as they come.
test: check browser
	@$(PY) tools/caches.py
	$(PY) -m pytest -q
	@$(PY) tools/caches.py

## The edit loop: static checks, unit and CLI tests (no Spark, no Flink JVMs, no S3 server).
test-fast: check
	$(PY) -m pytest -q -m "not integration"

## Lint, the layer contracts (import-linter) and the type checker (mypy).
check: $(STAMP)
	$(PY) -m ruff check spillway tests tools benchmarks
	$(VENV)/bin/lint-imports
	$(PY) -m mypy spillway

lint: $(STAMP)
	$(PY) -m ruff check spillway tests tools benchmarks
	$(PY) -m ruff format --check spillway tests tools benchmarks

## Debian's Chromium for the headless-browser test of `spillway report --html` (root, apt); a no-op when present.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium (apt-get) for tests/integration/test_report_browser.py"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

## Regenerate real-Flink fixtures / Flink-oracle outputs (need Java 17; jars come from PyPI).
fixtures: $(STAMP)
	$(PY) tests/fixtures/generator/generate.py --all

oracle: $(STAMP)
	$(PY) tests/fixtures/oracle/regen.py

bench: $(STAMP)
	$(PY) benchmarks/bench_dump.py

clean:
	rm -rf $(VENV) .venv-lock .pytest_cache .ruff_cache .hypothesis
