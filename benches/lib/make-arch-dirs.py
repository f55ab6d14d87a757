"""Benchmark row 17's model directories: every decoder of scripts/llama/decoder_fixtures.py
and encoder of encoder_fixtures.py (the tests' tiny checkpoints), widened so that
conversion, not start-up, is what is timed:

    python benches/lib/make-arch-dirs.py LLAMA_CPP_SRC OUT_DIR [--quick]

Each fixture's config.json has its widths (hidden size, feed-forward and expert sizes, head
dimension) multiplied by 8 (2 with --quick), its layer count, vocabulary and tokenizer kept:
100–200M parameters each, written by the fixtures' own generator (a seeded RNG, in the
fixture's dtype) into OUT_DIR/<name>/. Needs numpy, safetensors and gguf, as the fixtures do.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'scripts' / 'llama'))
import decoder_fixtures  # noqa: E402
import encoder_fixtures  # noqa: E402

WIDTHS = ('hidden_size', 'intermediate_size', 'moe_intermediate_size', 'shared_expert_intermediate_size',
          'head_dim', 'query_pre_attn_scalar', 'n_embd', 'n_inner')

src, out = sys.argv[1], sys.argv[2]
factor = 2 if '--quick' in sys.argv[3:] else 8
for fixtures in (decoder_fixtures, encoder_fixtures):
    for spec in fixtures.MODELS.values():
        cfg = spec['config']
        for key in WIDTHS:
            if isinstance(cfg.get(key), int):
                cfg[key] *= factor
    fixtures.make(src, out)
