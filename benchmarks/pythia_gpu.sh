#!/usr/bin/env bash
# Pythia-160m, random words, m = 1 and 2, 16 targets: the capacity search and the published
# per-point protocol (cold at each n, the authors' adaptive scan), to set beside the published
# n_50 of 53.9 and 102.7 (read off the authors' figures; accessibility.published). Needs a CUDA GPU
# and the Hugging Face hub (EleutherAI/pythia-160m, about 330 MB): it is not installable offline.
#
#   bash benchmarks/pythia_gpu.sh [OUT]        # OUT: where the two run folders go (default runs)
#
# Both runs use the published pipeline: its optimiser (--preset paper), fp16 autocast without a
# gradient scaler (--autocast-dtype float16, CUDA's own autocast on a GPU) and no token next to
# [mem] (Pythia's tokenizer adds no BOS). Each run resumes from its folder when started again.
set -euo pipefail
out=${1:-runs}
common=(--model pythia-160m --kind random-words --m 1 2 --targets 16 --device cuda --allow-download
        --preset paper --prefix none --autocast-dtype float16 --progress)
python -m accessibility cram "${common[@]}" --protocol search --n-start 16 --n-max 256 \
    --save "$out/cram-pythia-160m-random-words"
python -m accessibility cram "${common[@]}" --protocol published \
    --save "$out/cram-pythia-160m-random-words-published"
