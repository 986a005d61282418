# Quick start: `make train` (the main job) and `make test`. Both create .venv when missing
# and install the project with the pinned constraints (torch==2.13.0, CPU wheel).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl
export SDL_VIDEODRIVER ?= dummy

.PHONY: install system-deps train test test-all test-compat bench lint format clean notebooks tutorials docs

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[all]"
	@touch $(STAMP)

# Headless OpenGL for MuJoCo pixels (EGL, software rendering). Installed only when missing.
system-deps:
	@if ! ldconfig -p | grep -q 'libEGL.so.1' || ! ldconfig -p | grep -q 'libOpenGL.so.0' \
	    || ! ls /usr/lib/*/dri/swrast_dri.so >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      libegl1 libopengl0 libgl1-mesa-dri >/dev/null; \
	  else echo "warning: install libegl1 libopengl0 libgl1-mesa-dri for MuJoCo pixel rendering"; fi; \
	fi
	@# Chromium for the docs' headless-browser check (tests/docs), also only when missing.
	@if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      chromium >/dev/null; \
	  else echo "warning: install chromium for the docs' browser check (tests/docs)"; fi; \
	fi

# The main job: train PPO on Pendulum-v1 until the mean return of the last 10 episodes
# reaches -200 (about a minute), then evaluate the deterministic policy. Each run gets a
# fresh folder: runs/ppo-pendulum, then runs/ppo-pendulum-2, -3, ... (nothing is replaced).
RUN ?= runs/ppo-pendulum
train: install
	@run=$(RUN); n=2; while [ -e "$$run" ]; do run=$(RUN)-$$n; n=$$((n + 1)); done; \
	  echo "$(BIN)/python -m torchrl_lite train ppo --env Pendulum-v1 --out $$run"; \
	  $(BIN)/python -m torchrl_lite train ppo --env Pendulum-v1 --out "$$run" && \
	  echo "$(BIN)/python -m torchrl_lite eval $$run --episodes 10" && \
	  $(BIN)/python -m torchrl_lite eval "$$run" --episodes 10

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test: install system-deps lint
	$(BIN)/python -m pytest -m "not slow" -q

test-all: install system-deps lint
	$(BIN)/python -m pytest -q

# The env, collector and replay-buffer tests against the lowest tensordict that
# pyproject.toml accepts (its own venv; everything else pinned as in constraints.txt),
# through the fast path and through the public-API fallback (TORCHRL_LITE_TD_FAST=0).
TD_LOWEST ?= $(shell sed -n 's/.*"tensordict>=\([0-9.]*\).*/\1/p' pyproject.toml)
COMPAT    := .venv-compat
COMPAT_TESTS := tests/envs tests/collectors/test_sync.py tests/collectors/test_fast_batch.py tests/collectors/test_utils.py tests/data
test-compat: system-deps
	@test -x $(COMPAT)/bin/python || $(PYTHON) -m venv $(COMPAT)
	sed 's/^tensordict==.*/tensordict==$(TD_LOWEST)/' constraints.txt > $(COMPAT)/constraints.txt
	$(COMPAT)/bin/python -m pip install -q --upgrade pip
	$(COMPAT)/bin/python -m pip install -q -c $(COMPAT)/constraints.txt -e ".[dm_control,rendering,utils,test]"
	$(COMPAT)/bin/python -c "import tensordict, torchrl_lite._td as t; print('tensordict', tensordict.__version__, 'fast path:', t.FAST)"
	$(COMPAT)/bin/python -m pytest -m "not slow" -q -p no:cacheprovider $(COMPAT_TESTS)
	TORCHRL_LITE_TD_FAST=0 $(COMPAT)/bin/python -m pytest -m "not slow" -q -p no:cacheprovider $(COMPAT_TESTS)

bench: install system-deps
	TORCHRL_LITE_SMOKE=0 $(BIN)/python -m pytest -m slow -q
	cd benchmarks && TORCHRL_LITE_SMOKE=0 ../$(BIN)/python run_all.py

# Tutorials: tutorials/NN_slug.py (jupytext percent format) is the source of each notebook.
notebooks: install
	$(BIN)/python tutorials/notebooks.py sync

# Run every notebook in full; times and results go to tutorials/README.md.
tutorials: install system-deps
	$(BIN)/python tutorials/notebooks.py full

# The documentation site (docs/, mkdocs.yml) into site/; --strict fails on any warning
# (a broken cross-reference, a docstring griffe cannot read, a missing page).
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

clean:
	rm -rf $(VENV) $(COMPAT) .pytest_cache .ruff_cache *.egg-info site
