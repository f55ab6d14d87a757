"""Load two model directories with transformers, as its users do, and compare them.

    python same_outputs.py REFERENCE CANDIDATE [TEXT ...]

Each directory is loaded with AutoTokenizer and AutoModel.from_pretrained (local files only,
safetensors only: a directory transformers cannot load that way fails here). Prints one JSON
object: the candidate's weight files as transformers found them, whether both tokenizers give
the same ids, the outputs' shape and the largest absolute difference of the last hidden state.
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from transformers import AutoModel, AutoTokenizer  # noqa: E402
from transformers.utils import logging  # noqa: E402


def load(path):
    model = AutoModel.from_pretrained(path, local_files_only=True, use_safetensors=True)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return model, tokenizer


def main():
    ref_dir, cand_dir = sys.argv[1], sys.argv[2]
    texts = sys.argv[3:] or ["The quick brown fox jumps over the lazy dog.", "Weights, read and written."]
    logging.set_verbosity_error()
    ref_model, ref_tok = load(ref_dir)
    cand_model, cand_tok = load(cand_dir)
    ids = [ref_tok(t)["input_ids"] for t in texts]
    same_ids = ids == [cand_tok(t)["input_ids"] for t in texts]
    worst = 0.0
    shapes = []
    with torch.no_grad():
        for t in texts:
            a = ref_model(**ref_tok(t, return_tensors="pt")).last_hidden_state
            b = cand_model(**cand_tok(t, return_tensors="pt")).last_hidden_state
            shapes.append(list(b.shape))
            worst = max(worst, float((a - b).abs().max()))
    files = sorted(f for f in os.listdir(cand_dir) if f.endswith(".safetensors") or f.endswith(".json"))
    print(json.dumps({"sameIds": same_ids, "maxAbsDiff": worst, "shapes": shapes, "files": files}))


if __name__ == "__main__":
    main()
