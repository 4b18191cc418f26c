# Two commands for a fresh machine with Python 3.11 and pip: `make train`, `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# uv installs the locked packages in seconds where pip takes about a minute; it compiles their
# bytecode at install, as pip does (else every first import in the tests compiles it).
UV_VERSION := 0.13.9

.PHONY: train test test-slow bench venv clean render-libs

$(STAMP): pyproject.toml requirements.lock
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (or set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -c requirements.lock -e ".[test]"
	touch $(STAMP)

venv: $(STAMP)

# Offscreen rendering (`smoothloco play`, the video at the end of `train`) needs Mesa's EGL
# (or OSMesa). Installed from Debian only when missing and apt-get is usable; never fatal:
# without it, play and train still run and say in one line that no video was rendered.
render-libs:
	@if ldconfig -p | grep -q 'libEGL_mesa' && ldconfig -p | grep -q 'libEGL.so.1' || ldconfig -p | grep -q 'libOSMesa'; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing Mesa EGL for offscreen rendering (libegl1 libegl-mesa0 libgl1-mesa-dri)"; \
		{ apt-get update -qq && apt-get install -y -qq --no-install-recommends libegl1 libegl-mesa0 libgl1-mesa-dri >/dev/null; } \
			|| echo "could not install Mesa EGL: videos will be skipped"; \
	else echo "no Mesa EGL/OSMesa and no apt-get as root: videos will be skipped (Debian: apt-get install libegl-mesa0)"; fi

train: $(STAMP) | render-libs
	$(BIN)/smoothloco train

# The default suite (pyproject's addopts leave out the tests marked slow); test-slow runs only
# those: the long learning, fault and fuzzing checks, which CI runs after the default suite.
test: $(STAMP) | render-libs
	$(BIN)/python -m pytest -q -n 2 --dist loadscope  # two workers: compilation is single-threaded

test-slow: $(STAMP) | render-libs
	$(BIN)/python -m pytest -q -n 2 --dist loadscope -m slow

bench: $(STAMP)
	$(BIN)/smoothloco bench sim --json bench-sim.json

clean:
	rm -rf $(VENV)
