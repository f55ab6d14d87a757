"""A 0.6B Llama-shaped BF16 model directory for benchmark rows 8 and 16 (run by benches/run.mjs):

    python benches/lib/make-llama-dir.py LLAMA_CPP_SRC OUT_DIR [--quick | --large]

config.json (LlamaForCausalLM: hidden 1536, 20 layers, 12 heads of 128, 4 KV heads, FFN
4096, vocabulary 32,000, untied output: 601.6M parameters), tokenizer.model (Llama 2's
vocabulary, from llama.cpp's models/ggml-vocab-llama-spm.gguf) and model.safetensors
(1.2 GB of BF16, N(0, 0.02) from a seeded generator, norms around 1), written tensor by
tensor so generating it needs one tensor's memory. --quick: 4 layers of hidden 256.
"""
import json
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / 'scripts' / 'llama'))
from decoder_fixtures import read_gguf_kv, sentencepiece_model  # noqa: E402

src, out = sys.argv[1], Path(sys.argv[2])
SIZES = {'--quick': (256, 4, 4, 2, 704, 32000), '--large': (3072, 38, 24, 8, 8192, 32000)}
e, layers, heads, kv, ff, vocab = SIZES.get(sys.argv[3] if len(sys.argv) > 3 else '', (1536, 20, 12, 4, 4096, 32000))
d = e // heads
config = {
    'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_size': e,
    'intermediate_size': ff, 'num_hidden_layers': layers, 'num_attention_heads': heads,
    'num_key_value_heads': kv, 'head_dim': d, 'max_position_embeddings': 4096,
    'rms_norm_eps': 1e-05, 'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'default'},
    'vocab_size': vocab, 'bos_token_id': 1, 'eos_token_id': 2, 'hidden_act': 'silu',
    'attention_bias': False, 'mlp_bias': False, 'tie_word_embeddings': False,
    'dtype': 'bfloat16', 'transformers_version': '5.23.0',
}
shapes = [('model.embed_tokens.weight', (vocab, e))]
for l in range(layers):
    p = f'model.layers.{l}.'
    shapes += [(p + 'input_layernorm.weight', (e,)), (p + 'self_attn.q_proj.weight', (heads * d, e)),
               (p + 'self_attn.k_proj.weight', (kv * d, e)), (p + 'self_attn.v_proj.weight', (kv * d, e)),
               (p + 'self_attn.o_proj.weight', (e, heads * d)), (p + 'post_attention_layernorm.weight', (e,)),
               (p + 'mlp.gate_proj.weight', (ff, e)), (p + 'mlp.up_proj.weight', (ff, e)),
               (p + 'mlp.down_proj.weight', (e, ff))]
shapes += [('model.norm.weight', (e,)), ('lm_head.weight', (vocab, e))]

out.mkdir(parents=True, exist_ok=True)
(out / 'config.json').write_text(json.dumps(config, indent=2) + '\n')
kvs = read_gguf_kv(str(Path(src) / 'models' / 'ggml-vocab-llama-spm.gguf'))
(out / 'tokenizer.model').write_bytes(sentencepiece_model({
    'tokens': kvs['tokenizer.ggml.tokens'], 'scores': kvs['tokenizer.ggml.scores'], 'types': kvs['tokenizer.ggml.token_type']}))
(out / 'tokenizer_config.json').write_text(json.dumps({
    'tokenizer_class': 'LlamaTokenizer', 'bos_token': '<s>', 'eos_token': '</s>', 'unk_token': '<unk>',
    'add_bos_token': True, 'add_eos_token': False, 'legacy': False}, indent=2) + '\n')

header, offset = {}, 0
for name, shape in shapes:
    n = int(np.prod(shape)) * 2
    header[name] = {'dtype': 'BF16', 'shape': list(shape), 'data_offsets': [offset, offset + n]}
    offset += n
h = json.dumps(header, separators=(',', ':')).encode()
h += b' ' * (-len(h) % 8)
rng = np.random.default_rng(20260601)
tmp = out / 'model.safetensors.tmp'
with open(tmp, 'wb') as f:
    f.write(struct.pack('<Q', len(h)) + h)
    for name, shape in shapes:
        x = rng.standard_normal(int(np.prod(shape)), dtype=np.float32) * np.float32(0.02)
        if len(shape) == 1:
            x += np.float32(1.0)
        bits = x.view(np.uint32)
        f.write(((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16).tobytes())
tmp.rename(out / 'model.safetensors')
