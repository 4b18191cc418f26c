# Two commands for a fresh machine with Python 3.11 and pip: `make train`, `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: train test bench venv clean

$(STAMP): pyproject.toml requirements.lock
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (or set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock -e ".[test]"
	touch $(STAMP)

venv: $(STAMP)

train: $(STAMP)
	$(BIN)/smoothloco train

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/smoothloco bench sim --json bench-sim.json

clean:
	rm -rf $(VENV)
