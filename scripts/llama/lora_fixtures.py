#!/usr/bin/env python3
"""PEFT LoRA adapters of the decoder fixtures (decoder_fixtures.py), made and evaluated by PEFT
itself, for __test__/llama.spec.ts. Needs torch, transformers and peft (the torch peer).

    lora_fixtures.py make BASE_DIR OUT_DIR NAME TOKEN_IDS

BASE_DIR is a model directory written by `decoder_fixtures.py make`; TOKEN_IDS comma-separated
token ids (the model's tokenizer is not loaded: transformers 4.57 would need protobuf for a
SentencePiece one). Writes:

    OUT_DIR/NAME-lora/       the adapter, as PEFT's save_pretrained writes it
                             (adapter_config.json, adapter_model.safetensors, README.md)
    OUT_DIR/NAME-merged/     model.safetensors: every weight of merge_and_unload() in float32
    OUT_DIR/NAME.base.f32    transformers' logits of the base model for TOKEN_IDS
    OUT_DIR/NAME.lora.f32    the PEFT model's logits (n_tokens × n_vocab float32, row by row)

    lora_fixtures.py logits MODEL_DIR TOKEN_IDS OUT.f32

transformers' logits of a model directory (a merged model written by convert), as above.

The adapter's weights come from torch's seeded RNG (init_lora_weights=False draws both A and
B, so the adapter changes the outputs); every target module of the model is adapted.

config.json is written in transformers 5's form (`rope_parameters`); transformers 4.57 reads
`rope_theta` / `rope_scaling`, set here from it so that both libraries run the same model.
"""
import json
import sys
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

ADAPTERS = {
    # llama: q/k rows permuted for llama.cpp's rope, an untied lm_head.
    'llama-spm': {'r': 8, 'lora_alpha': 16,
                  'target_modules': ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj', 'lm_head']},
    # qwen2: q/k/v biases (not adapted), NeoX rope, a bfloat16 base.
    'qwen2': {'r': 4, 'lora_alpha': 12,
              'target_modules': ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj']},
}


def load_base(base):
    config = AutoConfig.from_pretrained(base)
    raw = json.loads((Path(base) / 'config.json').read_text())
    rope = raw.get('rope_parameters')
    if rope:
        config.rope_theta = rope.get('rope_theta', getattr(config, 'rope_theta', 10000.0))
        if rope.get('rope_type', 'default') != 'default':
            config.rope_scaling = {k: v for k, v in rope.items() if k != 'rope_theta'}
    return AutoModelForCausalLM.from_pretrained(base, config=config, dtype=torch.float32).eval()


def logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy().astype('<f4').tobytes()


def make(base, out_dir, name, ids):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = load_base(base)
    (out / f'{name}.base.f32').write_bytes(logits(model, ids))
    torch.manual_seed(35)
    peft_model = get_peft_model(model, LoraConfig(init_lora_weights=False, **ADAPTERS[name])).eval()
    peft_model.save_pretrained(out / f'{name}-lora')
    (out / f'{name}.lora.f32').write_bytes(logits(peft_model, ids))
    merged = peft_model.merge_and_unload()
    (out / f'{name}-merged').mkdir(exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in merged.state_dict().items()}
    save_file(state, out / f'{name}-merged' / 'model.safetensors')


if __name__ == '__main__':
    if len(sys.argv) == 6 and sys.argv[1] == 'make':
        make(sys.argv[2], sys.argv[3], sys.argv[4], [int(i) for i in sys.argv[5].split(',')])
    elif len(sys.argv) == 5 and sys.argv[1] == 'logits':
        Path(sys.argv[4]).write_bytes(logits(load_base(sys.argv[2]), [int(i) for i in sys.argv[3].split(',')]))
    else:
        sys.exit(__doc__)
