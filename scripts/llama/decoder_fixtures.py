#!/usr/bin/env python3
"""Small random-weight decoder checkpoints (llama with a SentencePiece and with a byte-level
BPE tokenizer, mistral, granite, olmo2, smollm3, starcoder2, qwen2, qwen3, gpt2, phi3, gemma 1-3
and Gemma 3's multimodal Gemma3ForConditionalGeneration, and the mixtures of experts mixtral,
qwen2_moe, qwen3_moe) for __test__/llama.spec.ts.

    decoder_fixtures.py make LLAMA_CPP_SRC OUT_DIR [NAME]
        Write the model directories (or just NAME) into OUT_DIR/<name>/: config.json, weights
        (model.safetensors, from numpy's RandomState — a stream numpy guarantees never to
        change), tokenizer files rebuilt from llama.cpp's vocabulary GGUFs
        (models/ggml-vocab-*.gguf: real Llama 2, Llama 3 and Qwen2 vocabularies) and
        tokenizer_config.json with a chat template from llama.cpp's models/templates.
        Needs numpy, safetensors and gguf only: the tests run this, and check every file's
        SHA-256 against the committed reference, so they convert exactly what the reference
        was made from.

    decoder_fixtures.py reference LLAMA_CPP_SRC OUT_DIR FIXTURES_DIR [NAME]
        For each directory made by `make` (or just NAME): the reference token ids of the
        prompts (transformers' tokenizer; SentencePiece itself for the SentencePiece model,
        where transformers' fast tokenizer splits runs of spaces differently: both are
        kept), transformers' float32 logits for a prompt (a subset of the logits, see
        below), and llama.cpp's convert_hf_to_gguf.py
        output summarised (converter_reference.py), written to FIXTURES_DIR/<name>.json and
        <name>.converter.json. Needs torch, transformers and sentencepiece: run once, commit.

Logits are kept for every position at a fixed set of token ids (the first 64, 2,000 drawn
with a seeded RNG, and each position's 16 largest), plus each position's argmax and largest
magnitude over the whole vocabulary: enough to compare with llama.cpp within 1e-3 of the
largest logit without committing megabytes.
"""
import base64
import hashlib
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

HERE = Path(__file__).resolve().parent

PROMPTS = [
    'The quick brown fox jumps over the lazy dog.',
    'Hello world! 1234 + 5678 = 6912, café ünïcödé 🦙',
    '   leading spaces, tabs\tand\nnewlines\n\n',
    'def main():\n    return [x ** 2 for x in range(10)]',
    '東京は日本の首都です。Привет, мир!',
    "I've been 'told he's there, 'RE you sure?",
]

# The text whose logits are compared.
LOGIT_PROMPT = 'The capital of France is Paris. 1234 café 🦙'

# transformers 4.57's tokenizer_config.json for Gemma 1-3 (the same for the three).
GEMMA_TOKENIZER_CONFIG = {
    'tokenizer_class': 'GemmaTokenizer', 'bos_token': '<bos>', 'eos_token': '<eos>',
    'unk_token': '<unk>', 'pad_token': '<pad>', 'add_bos_token': True, 'add_eos_token': False,
    'model_max_length': 1000000000000000019884624838656, 'clean_up_tokenization_spaces': False,
    'spaces_between_special_tokens': False, 'use_default_system_prompt': False,
    'added_tokens_decoder': {
        '0': {'content': '<pad>', 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True},
        '1': {'content': '<eos>', 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True},
        '2': {'content': '<bos>', 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True},
        '3': {'content': '<unk>', 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True},
    },
}

MODELS = {
    'llama-spm': {
        'vocab': 'llama-spm', 'tokenizer': 'spm', 'dtype': 'float32', 'tied': False,
        'config': {
            'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_size': 64,
            'intermediate_size': 128, 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 2, 'head_dim': 16, 'max_position_embeddings': 4096,
            'rms_norm_eps': 1e-05, 'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'default'},
            'vocab_size': 32000, 'bos_token_id': 1, 'eos_token_id': 2, 'pad_token_id': None,
            'hidden_act': 'silu', 'attention_bias': False, 'attention_dropout': 0.0, 'mlp_bias': False,
            'initializer_range': 0.02, 'pretraining_tp': 1, 'use_cache': True,
            'tie_word_embeddings': False, 'dtype': 'float32', 'transformers_version': '5.23.0',
        },
        'tokenizer_config': {
            'tokenizer_class': 'LlamaTokenizer', 'bos_token': '<s>', 'eos_token': '</s>',
            'unk_token': '<unk>', 'pad_token': None, 'add_bos_token': True, 'add_eos_token': False,
            'legacy': False, 'model_max_length': 4096, 'clean_up_tokenization_spaces': False,
            'added_tokens_decoder': {
                '0': {'content': '<unk>', 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True},
                '1': {'content': '<s>', 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True},
                '2': {'content': '</s>', 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True},
            },
            'chat_template': "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ ' ' + message['content'] + eos_token }}{% endif %}{% endfor %}",
        },
    },
    'llama-bpe': {
        'vocab': 'llama-bpe', 'tokenizer': 'bpe', 'pattern': 'llama3', 'dtype': 'bfloat16', 'tied': True,
        'template': 'meta-llama-Llama-3.2-3B-Instruct.jinja',
        'config': {
            'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_size': 64,
            'intermediate_size': 128, 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 2, 'head_dim': 16, 'max_position_embeddings': 131072,
            'rms_norm_eps': 1e-05,
            'rope_parameters': {'rope_theta': 500000.0, 'rope_type': 'llama3', 'factor': 32.0,
                                'low_freq_factor': 1.0, 'high_freq_factor': 4.0,
                                'original_max_position_embeddings': 8192},
            'vocab_size': 128256, 'bos_token_id': 128000, 'eos_token_id': [128001, 128008, 128009],
            'pad_token_id': None, 'hidden_act': 'silu', 'attention_bias': False,
            'attention_dropout': 0.0, 'mlp_bias': False, 'initializer_range': 0.02,
            'pretraining_tp': 1, 'use_cache': True, 'tie_word_embeddings': True,
            'dtype': 'bfloat16', 'transformers_version': '5.23.0',
        },
        'tokenizer_config': {
            'tokenizer_class': 'PreTrainedTokenizerFast', 'bos_token': '<|begin_of_text|>',
            'eos_token': '<|eot_id|>', 'model_max_length': 131072,
            'clean_up_tokenization_spaces': True,
        },
    },
    'qwen2': {
        'vocab': 'qwen2', 'tokenizer': 'bpe', 'pattern': 'qwen2', 'dtype': 'bfloat16', 'tied': False,
        'template': 'Qwen-Qwen2.5-7B-Instruct.jinja',
        'config': {
            'architectures': ['Qwen2ForCausalLM'], 'model_type': 'qwen2', 'hidden_size': 64,
            'intermediate_size': 160, 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 2, 'max_position_embeddings': 32768, 'rms_norm_eps': 1e-06,
            'rope_parameters': {'rope_theta': 1000000.0, 'rope_type': 'default'},
            'vocab_size': 151936, 'bos_token_id': 151643, 'eos_token_id': 151645,
            'pad_token_id': None, 'hidden_act': 'silu', 'attention_dropout': 0.0,
            'initializer_range': 0.02, 'use_cache': True, 'use_sliding_window': False,
            'sliding_window': None, 'max_window_layers': 28,
            'layer_types': ['full_attention', 'full_attention'], 'tie_word_embeddings': False,
            'dtype': 'bfloat16', 'transformers_version': '5.23.0',
        },
        'tokenizer_config': {
            'tokenizer_class': 'Qwen2Tokenizer', 'bos_token': None, 'eos_token': '<|im_end|>',
            'pad_token': '<|endoftext|>', 'unk_token': None, 'model_max_length': 131072,
            'errors': 'replace', 'split_special_tokens': False, 'clean_up_tokenization_spaces': False,
        },
    },
    'qwen3': {
        'vocab': 'qwen2', 'tokenizer': 'bpe', 'pattern': 'qwen2', 'dtype': 'float16', 'tied': True,
        'template_file': 'Qwen-Qwen3-0.6B.jinja',
        'config': {
            'architectures': ['Qwen3ForCausalLM'], 'model_type': 'qwen3', 'hidden_size': 64,
            'intermediate_size': 96, 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 1, 'head_dim': 32, 'max_position_embeddings': 40960,
            'rms_norm_eps': 1e-06, 'rope_parameters': {'rope_theta': 1000000.0, 'rope_type': 'default'},
            'vocab_size': 151936, 'bos_token_id': 151643, 'eos_token_id': 151645,
            'pad_token_id': None, 'hidden_act': 'silu', 'attention_bias': False,
            'attention_dropout': 0.0, 'initializer_range': 0.02, 'use_cache': True,
            'use_sliding_window': False, 'sliding_window': None, 'max_window_layers': 28,
            'layer_types': ['full_attention', 'full_attention'], 'tie_word_embeddings': True,
            'dtype': 'float16', 'transformers_version': '5.23.0',
        },
        'tokenizer_config': {
            'tokenizer_class': 'Qwen2Tokenizer', 'bos_token': None, 'eos_token': '<|im_end|>',
            'pad_token': '<|endoftext|>', 'unk_token': None, 'model_max_length': 131072,
            'errors': 'replace', 'split_special_tokens': False, 'clean_up_tokenization_spaces': False,
        },
    },
    # The mixtures and Mistral are written as transformers 4.57 writes them (rope_theta at the
    # top level), the version the torch peer has (scripts/peers/torch.mjs).
    'mistral': {
        'vocab': 'llama-spm', 'tokenizer': 'spm', 'dtype': 'bfloat16', 'tied': False,
        'config': {
            'architectures': ['MistralForCausalLM'], 'model_type': 'mistral', 'hidden_size': 64,
            'intermediate_size': 128, 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 2, 'head_dim': 16, 'max_position_embeddings': 32768,
            'rms_norm_eps': 1e-05, 'rope_theta': 1000000.0, 'sliding_window': None,
            'vocab_size': 32000, 'bos_token_id': 1, 'eos_token_id': 2, 'hidden_act': 'silu',
            'attention_dropout': 0.0, 'initializer_range': 0.02, 'use_cache': True,
            'tie_word_embeddings': False, 'torch_dtype': 'bfloat16', 'transformers_version': '4.57.6',
        },
        'tokenizer_config': {
            'tokenizer_class': 'LlamaTokenizer', 'bos_token': '<s>', 'eos_token': '</s>',
            'unk_token': '<unk>', 'pad_token': None, 'add_bos_token': True, 'add_eos_token': False,
            'legacy': False, 'model_max_length': 32768, 'clean_up_tokenization_spaces': False,
            'added_tokens_decoder': {
                '0': {'content': '<unk>', 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True},
                '1': {'content': '<s>', 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True},
                '2': {'content': '</s>', 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True},
            },
        },
        'template': 'mistralai-Mistral-Nemo-Instruct-2407.jinja',
    },
    'mixtral': {
        'vocab': 'llama-spm', 'tokenizer': 'spm', 'dtype': 'bfloat16', 'tied': False,
        'config': {
            'architectures': ['MixtralForCausalLM'], 'model_type': 'mixtral', 'hidden_size': 64,
            'intermediate_size': 96, 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 2, 'head_dim': 16, 'max_position_embeddings': 32768,
            'rms_norm_eps': 1e-05, 'rope_theta': 1000000.0, 'sliding_window': None,
            'num_local_experts': 4, 'num_experts_per_tok': 2, 'router_aux_loss_coef': 0.02,
            'router_jitter_noise': 0.0, 'output_router_logits': False,
            'vocab_size': 32000, 'bos_token_id': 1, 'eos_token_id': 2, 'hidden_act': 'silu',
            'attention_dropout': 0.0, 'initializer_range': 0.02, 'use_cache': True,
            'tie_word_embeddings': False, 'torch_dtype': 'bfloat16', 'transformers_version': '4.57.6',
        },
        'tokenizer_config': {
            'tokenizer_class': 'LlamaTokenizer', 'bos_token': '<s>', 'eos_token': '</s>',
            'unk_token': '<unk>', 'pad_token': None, 'add_bos_token': True, 'add_eos_token': False,
            'legacy': False, 'model_max_length': 32768, 'clean_up_tokenization_spaces': False,
            'added_tokens_decoder': {
                '0': {'content': '<unk>', 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True},
                '1': {'content': '<s>', 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True},
                '2': {'content': '</s>', 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True},
            },
        },
    },
    'qwen2_moe': {
        'vocab': 'qwen2', 'tokenizer': 'bpe', 'pattern': 'qwen2', 'dtype': 'bfloat16', 'tied': False,
        'template': 'Qwen-Qwen2.5-7B-Instruct.jinja',
        'config': {
            'architectures': ['Qwen2MoeForCausalLM'], 'model_type': 'qwen2_moe', 'hidden_size': 64,
            'intermediate_size': 160, 'moe_intermediate_size': 48, 'shared_expert_intermediate_size': 80,
            'num_experts': 4, 'num_experts_per_tok': 2, 'norm_topk_prob': False, 'decoder_sparse_step': 1,
            'mlp_only_layers': [], 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 2, 'max_position_embeddings': 32768, 'rms_norm_eps': 1e-06,
            'rope_theta': 1000000.0, 'vocab_size': 151936, 'bos_token_id': 151643,
            'eos_token_id': 151645, 'hidden_act': 'silu', 'attention_dropout': 0.0,
            'initializer_range': 0.02, 'use_cache': True, 'use_sliding_window': False,
            'sliding_window': None, 'max_window_layers': 28, 'router_aux_loss_coef': 0.001,
            'output_router_logits': False, 'tie_word_embeddings': False, 'torch_dtype': 'bfloat16',
            'transformers_version': '4.57.6',
        },
        'tokenizer_config': {
            'tokenizer_class': 'Qwen2Tokenizer', 'bos_token': None, 'eos_token': '<|im_end|>',
            'pad_token': '<|endoftext|>', 'unk_token': None, 'model_max_length': 32768,
            'errors': 'replace', 'split_special_tokens': False, 'clean_up_tokenization_spaces': False,
        },
    },
    'qwen3_moe': {
        'vocab': 'qwen2', 'tokenizer': 'bpe', 'pattern': 'qwen2', 'dtype': 'bfloat16', 'tied': False,
        'template_file': 'Qwen-Qwen3-0.6B.jinja',
        'config': {
            'architectures': ['Qwen3MoeForCausalLM'], 'model_type': 'qwen3_moe', 'hidden_size': 64,
            'intermediate_size': 160, 'moe_intermediate_size': 48, 'num_experts': 4,
            'num_experts_per_tok': 2, 'norm_topk_prob': True, 'decoder_sparse_step': 1,
            'mlp_only_layers': [], 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 2, 'head_dim': 32, 'max_position_embeddings': 40960,
            'rms_norm_eps': 1e-06, 'rope_theta': 1000000.0, 'rope_scaling': None,
            'vocab_size': 151936, 'bos_token_id': 151643, 'eos_token_id': 151645,
            'hidden_act': 'silu', 'attention_bias': False, 'attention_dropout': 0.0,
            'initializer_range': 0.02, 'use_cache': True, 'use_sliding_window': False,
            'sliding_window': None, 'max_window_layers': 28, 'router_aux_loss_coef': 0.001,
            'output_router_logits': False, 'tie_word_embeddings': False, 'torch_dtype': 'bfloat16',
            'transformers_version': '4.57.6',
        },
        'tokenizer_config': {
            'tokenizer_class': 'Qwen2Tokenizer', 'bos_token': None, 'eos_token': '<|im_end|>',
            'pad_token': '<|endoftext|>', 'unk_token': None, 'model_max_length': 40960,
            'errors': 'replace', 'split_special_tokens': False, 'clean_up_tokenization_spaces': False,
        },
    },
    'granite': {
        'vocab': 'llama-bpe', 'tokenizer': 'bpe', 'pattern': 'llama3', 'dtype': 'bfloat16', 'tied': True,
        'config': {
            'architectures': ['GraniteForCausalLM'], 'model_type': 'granite', 'hidden_size': 64,
            'intermediate_size': 128, 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 2, 'max_position_embeddings': 131072, 'rms_norm_eps': 1e-05,
            'rope_theta': 10000000.0, 'rope_scaling': None, 'attention_multiplier': 0.015625,
            'embedding_multiplier': 12.0, 'residual_multiplier': 0.22, 'logits_scaling': 8.0,
            'vocab_size': 128256, 'bos_token_id': 128000, 'eos_token_id': 128001,
            'pad_token_id': None, 'hidden_act': 'silu', 'attention_bias': False,
            'attention_dropout': 0.0, 'mlp_bias': False, 'initializer_range': 0.02,
            'use_cache': True, 'tie_word_embeddings': True, 'torch_dtype': 'bfloat16',
            'transformers_version': '4.57.6',
        },
        'tokenizer_config': {
            'tokenizer_class': 'PreTrainedTokenizerFast', 'bos_token': '<|begin_of_text|>',
            'eos_token': '<|end_of_text|>', 'model_max_length': 131072,
            'clean_up_tokenization_spaces': True,
        },
    },
    'olmo2': {
        'vocab': 'qwen2', 'tokenizer': 'bpe', 'pattern': 'qwen2', 'dtype': 'float32', 'tied': False,
        'config': {
            'architectures': ['Olmo2ForCausalLM'], 'model_type': 'olmo2', 'hidden_size': 64,
            'intermediate_size': 128, 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 2, 'max_position_embeddings': 4096, 'rms_norm_eps': 1e-06,
            'rope_theta': 500000.0, 'rope_scaling': None, 'vocab_size': 151936,
            'bos_token_id': None, 'eos_token_id': 151643, 'pad_token_id': 151643,
            'hidden_act': 'silu', 'attention_bias': False, 'attention_dropout': 0.0,
            'initializer_range': 0.02, 'use_cache': True, 'tie_word_embeddings': False,
            'torch_dtype': 'float32', 'transformers_version': '4.57.6',
        },
        'tokenizer_config': {
            'tokenizer_class': 'GPT2Tokenizer', 'bos_token': None, 'eos_token': '<|endoftext|>',
            'pad_token': '<|endoftext|>', 'unk_token': None, 'model_max_length': 4096,
            'errors': 'replace', 'clean_up_tokenization_spaces': False,
        },
    },
    'smollm3': {
        'vocab': 'llama-bpe', 'tokenizer': 'bpe', 'pattern': 'llama3', 'dtype': 'bfloat16', 'tied': True,
        'config': {
            'architectures': ['SmolLM3ForCausalLM'], 'model_type': 'smollm3', 'hidden_size': 64,
            'intermediate_size': 128, 'num_hidden_layers': 4, 'num_attention_heads': 4,
            'num_key_value_heads': 2, 'max_position_embeddings': 65536, 'rms_norm_eps': 1e-06,
            'rope_theta': 5000000.0, 'rope_scaling': None, 'no_rope_layer_interval': 4,
            'use_sliding_window': False, 'sliding_window': None, 'vocab_size': 128256,
            'bos_token_id': 128000, 'eos_token_id': 128009, 'pad_token_id': 128004,
            'hidden_act': 'silu', 'attention_bias': False, 'attention_dropout': 0.0,
            'mlp_bias': False, 'initializer_range': 0.02, 'use_cache': True,
            'tie_word_embeddings': True, 'torch_dtype': 'bfloat16', 'transformers_version': '4.57.6',
        },
        'tokenizer_config': {
            'tokenizer_class': 'PreTrainedTokenizerFast', 'bos_token': None,
            'eos_token': '<|eot_id|>', 'model_max_length': 65536,
            'clean_up_tokenization_spaces': True,
        },
    },
    'starcoder2': {
        'vocab': 'qwen2', 'tokenizer': 'bpe', 'pattern': 'qwen2', 'dtype': 'float32', 'tied': True,
        'config': {
            'architectures': ['Starcoder2ForCausalLM'], 'model_type': 'starcoder2', 'hidden_size': 64,
            'intermediate_size': 256, 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 2, 'max_position_embeddings': 16384, 'norm_epsilon': 1e-05,
            'rope_theta': 100000.0, 'rope_scaling': None, 'sliding_window': None, 'use_bias': True,
            'vocab_size': 151936, 'bos_token_id': 151643, 'eos_token_id': 151643,
            'hidden_act': 'gelu_pytorch_tanh', 'attention_dropout': 0.0, 'residual_dropout': 0.0,
            'embedding_dropout': 0.0, 'initializer_range': 0.02, 'use_cache': True,
            'tie_word_embeddings': True, 'torch_dtype': 'float32', 'transformers_version': '4.57.6',
        },
        'tokenizer_config': {
            'tokenizer_class': 'GPT2Tokenizer', 'bos_token': '<|endoftext|>', 'eos_token': '<|endoftext|>',
            'unk_token': '<|endoftext|>', 'model_max_length': 16384, 'errors': 'replace',
            'clean_up_tokenization_spaces': False,
        },
    },
    # From here on each model names its seed: the models above take theirs from their place
    # in this table, which entries added elsewhere must not shift.
    'gpt2': {
        'vocab': 'gpt-2', 'tokenizer': 'gpt2', 'dtype': 'float32', 'tied': True, 'seed': 101,
        'config': {
            'architectures': ['GPT2LMHeadModel'], 'model_type': 'gpt2', 'activation_function': 'gelu_new',
            'attn_pdrop': 0.1, 'bos_token_id': 50256, 'embd_pdrop': 0.1, 'eos_token_id': 50256,
            'initializer_range': 0.02, 'layer_norm_epsilon': 1e-05, 'n_ctx': 1024, 'n_embd': 64,
            'n_head': 4, 'n_inner': None, 'n_layer': 2, 'n_positions': 1024,
            'reorder_and_upcast_attn': False, 'resid_pdrop': 0.1, 'scale_attn_by_inverse_layer_idx': False,
            'scale_attn_weights': True, 'summary_activation': None, 'summary_first_dropout': 0.1,
            'summary_proj_to_labels': True, 'summary_type': 'cls_index', 'summary_use_proj': True,
            'use_cache': True, 'vocab_size': 50257, 'torch_dtype': 'float32',
            'transformers_version': '4.57.6',
        },
        'tokenizer_config': {
            'tokenizer_class': 'GPT2Tokenizer', 'bos_token': '<|endoftext|>', 'eos_token': '<|endoftext|>',
            'unk_token': '<|endoftext|>', 'add_prefix_space': False, 'model_max_length': 1024,
            'errors': 'replace', 'clean_up_tokenization_spaces': False,
        },
    },
    'phi3': {
        # Phi-3-mini-4k's layout: a SentencePiece vocabulary (Llama 2's pieces) with the chat
        # tokens added after it, fused qkv_proj and gate_up_proj, no rope scaling.
        'vocab': 'phi-3', 'tokenizer': 'spm', 'spm_pieces': 32000, 'dtype': 'bfloat16', 'tied': False, 'seed': 102,
        'config': {
            'architectures': ['Phi3ForCausalLM'], 'model_type': 'phi3', 'hidden_size': 64,
            'intermediate_size': 128, 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 4, 'max_position_embeddings': 4096,
            'original_max_position_embeddings': 4096, 'rms_norm_eps': 1e-05, 'rope_theta': 10000.0,
            'rope_scaling': None, 'partial_rotary_factor': 1.0, 'sliding_window': 2047,
            'vocab_size': 32064, 'bos_token_id': 1, 'eos_token_id': 32000, 'pad_token_id': 32000,
            'hidden_act': 'silu', 'attention_bias': False, 'attention_dropout': 0.0,
            'embd_pdrop': 0.0, 'resid_pdrop': 0.0, 'initializer_range': 0.02, 'use_cache': True,
            'tie_word_embeddings': False, 'torch_dtype': 'bfloat16', 'transformers_version': '4.57.6',
        },
        'tokenizer_config': {
            'tokenizer_class': 'LlamaTokenizer', 'bos_token': '<s>', 'eos_token': '<|endoftext|>',
            'unk_token': '<unk>', 'pad_token': '<|endoftext|>', 'add_bos_token': True, 'add_eos_token': False,
            'legacy': False, 'model_max_length': 4096, 'clean_up_tokenization_spaces': False,
            'sp_model_kwargs': {}, 'use_default_system_prompt': False,
            'chat_template': "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}",
        },
    },
    # Gemma 1-3 as transformers 4.57 writes them: a Gemma-style SentencePiece vocabulary
    # (<pad> <eos> <bos> <unk> first, no dummy prefix) built from Llama 2's; norm weights
    # centred on 0 (the models scale by 1 + w); query_pre_attn_scalar = head_dim, the scale
    # llama.cpp uses for every size but 27B; a sliding window shorter than the logit prompt.
    'gemma3': {
        'vocab': 'llama-spm', 'tokenizer': 'spm', 'gemma': True, 'dtype': 'bfloat16', 'tied': True, 'seed': 101,
        'template': 'google-gemma-2-2b-it.jinja',
        'config': {
            'architectures': ['Gemma3ForCausalLM'], 'model_type': 'gemma3_text', 'hidden_size': 64,
            'intermediate_size': 128, 'num_hidden_layers': 6, 'num_attention_heads': 4,
            'num_key_value_heads': 2, 'head_dim': 16, 'query_pre_attn_scalar': 16,
            'max_position_embeddings': 32768, 'rms_norm_eps': 1e-06, 'rope_theta': 1000000.0,
            'rope_local_base_freq': 10000.0, 'rope_scaling': {'factor': 8.0, 'rope_type': 'linear'},
            'sliding_window': 4, 'layer_types': ['sliding_attention'] * 5 + ['full_attention'],
            'attn_logit_softcapping': None, 'final_logit_softcapping': None,
            'vocab_size': 32001, 'bos_token_id': 2, 'eos_token_id': [1, 106], 'pad_token_id': 0,
            'hidden_activation': 'gelu_pytorch_tanh', 'attention_bias': False, 'attention_dropout': 0.0,
            'initializer_range': 0.02, 'use_bidirectional_attention': False, 'use_cache': True,
            'tie_word_embeddings': True, 'torch_dtype': 'bfloat16', 'transformers_version': '4.57.6',
        },
        'tokenizer_config': GEMMA_TOKENIZER_CONFIG,
    },
    # Gemma 3 as its multimodal checkpoints ship (gemma-3-4b-it and larger): the text model's
    # numbers under text_config, only the few keys Google's configs set (transformers fills in
    # the heads, head_dim, rope bases, eps, context and query_pre_attn_scalar), tensors under
    # model.language_model.* (transformers >= 4.52) beside a tiny SigLIP vision tower and the
    # projector, which llama.cpp's text model skips; image tokens added past the
    # SentencePiece pieces and the vocabulary padded beyond them, as Gemma 3's tokenizer does.
    # BOS and PAD ids at the top, where the converter reads them without a tokenizer.json.
    'gemma3_mm': {
        'vocab': 'llama-spm', 'tokenizer': 'spm', 'gemma': True, 'dtype': 'bfloat16', 'tied': True, 'seed': 104,
        'template': 'google-gemma-2-2b-it.jinja',
        'config': {
            'architectures': ['Gemma3ForConditionalGeneration'], 'model_type': 'gemma3',
            'boi_token_index': 32001, 'eoi_token_index': 32002, 'image_token_index': 32003,
            'mm_tokens_per_image': 4, 'bos_token_id': 2, 'eos_token_id': [1, 106], 'pad_token_id': 0,
            'initializer_range': 0.02,
            'text_config': {
                'model_type': 'gemma3_text', 'hidden_size': 64, 'intermediate_size': 128,
                'num_hidden_layers': 6, 'rope_scaling': {'factor': 8.0, 'rope_type': 'linear'},
                'sliding_window': 4, 'vocab_size': 32008,
            },
            'vision_config': {
                'model_type': 'siglip_vision_model', 'hidden_size': 16, 'intermediate_size': 32,
                'num_hidden_layers': 1, 'num_attention_heads': 2, 'image_size': 28, 'patch_size': 14,
                'vision_use_head': False,
            },
            'torch_dtype': 'bfloat16', 'transformers_version': '4.57.6',
        },
        'tokenizer_config': {**GEMMA_TOKENIZER_CONFIG, 'added_tokens_decoder': {
            **GEMMA_TOKENIZER_CONFIG['added_tokens_decoder'],
            **{str(i): {'content': t, 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True}
               for i, t in ((32001, '<start_of_image>'), (32002, '<end_of_image>'), (32003, '<image_soft_token>'))},
        }, 'boi_token': '<start_of_image>', 'eoi_token': '<end_of_image>', 'image_token': '<image_soft_token>'},
    },
    'gemma2': {
        'vocab': 'llama-spm', 'tokenizer': 'spm', 'gemma': True, 'dtype': 'float16', 'tied': True, 'seed': 102,
        'template': 'google-gemma-2-2b-it.jinja',
        'config': {
            'architectures': ['Gemma2ForCausalLM'], 'model_type': 'gemma2', 'hidden_size': 64,
            'intermediate_size': 128, 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 2, 'head_dim': 16, 'query_pre_attn_scalar': 16,
            'max_position_embeddings': 8192, 'rms_norm_eps': 1e-06, 'rope_theta': 10000.0,
            'sliding_window': 4, 'layer_types': ['sliding_attention', 'full_attention'],
            'attn_logit_softcapping': 50.0, 'final_logit_softcapping': 30.0,
            'vocab_size': 32001, 'bos_token_id': 2, 'eos_token_id': 1, 'pad_token_id': 0,
            'hidden_act': 'gelu_pytorch_tanh', 'hidden_activation': 'gelu_pytorch_tanh',
            'attention_bias': False, 'attention_dropout': 0.0, 'initializer_range': 0.02,
            'use_cache': True, 'tie_word_embeddings': True, 'torch_dtype': 'float16',
            'transformers_version': '4.57.6',
        },
        'tokenizer_config': GEMMA_TOKENIZER_CONFIG,
    },
    'gemma': {
        'vocab': 'llama-spm', 'tokenizer': 'spm', 'gemma': True, 'dtype': 'float32', 'tied': True, 'seed': 103,
        'config': {
            'architectures': ['GemmaForCausalLM'], 'model_type': 'gemma', 'hidden_size': 64,
            'intermediate_size': 128, 'num_hidden_layers': 2, 'num_attention_heads': 4,
            'num_key_value_heads': 1, 'head_dim': 16, 'max_position_embeddings': 8192,
            'rms_norm_eps': 1e-06, 'rope_theta': 10000.0, 'vocab_size': 32001,
            'bos_token_id': 2, 'eos_token_id': 1, 'pad_token_id': 0,
            'hidden_act': 'gelu_pytorch_tanh', 'hidden_activation': None, 'attention_bias': False,
            'attention_dropout': 0.0, 'initializer_range': 0.02, 'use_cache': True,
            'tie_word_embeddings': True, 'torch_dtype': 'float32', 'transformers_version': '4.57.6',
        },
        'tokenizer_config': GEMMA_TOKENIZER_CONFIG,
    },
}

# Split patterns of tokenizer.json, as llama.cpp's llama-vocab.cpp quotes them.
PATTERNS = {
    'llama3': r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    'qwen2': r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}


# ---------------------------------------------------------------------------------------
# Vocabularies.

def read_gguf_kv(path):
    """The key/values of a GGUF file (v3, little endian), read directly: gguf-py's reader
    builds a numpy view per array element, which takes half a minute for 400k merges."""
    data = Path(path).read_bytes()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take('<Q')
        s = data[pos:pos + n].decode('utf-8')
        pos += n
        return s

    scalar = {0: '<B', 1: '<b', 2: '<H', 3: '<h', 4: '<I', 5: '<i', 6: '<f', 7: '<?', 10: '<Q', 11: '<q', 12: '<d'}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            item, n = take('<I'), take('<Q')
            return [value(item) for _ in range(n)]
        return take(scalar[t])

    assert data[:4] == b'GGUF' and take('<4s') and take('<I') == 3
    take('<Q')
    n_kv = take('<Q')
    kv = {}
    for _ in range(n_kv):
        key = string()
        kv[key] = value(take('<I'))
    return kv


def read_vocab(src, name):
    kv = read_gguf_kv(os.path.join(src, 'models', f'ggml-vocab-{name}.gguf'))
    return {
        'tokens': kv['tokenizer.ggml.tokens'],
        'types': kv['tokenizer.ggml.token_type'],
        'scores': kv.get('tokenizer.ggml.scores'),
        'merges': kv.get('tokenizer.ggml.merges'),
    }


def bpe_tokenizer_json(vocab, pattern, bos=None):
    """A Hugging Face tokenizer.json for a byte-level BPE vocabulary: normal tokens in the
    model's vocab, control tokens as added tokens, llama.cpp's [PAD] fillers left out."""
    model_vocab, added = {}, []
    for i, (tok, ty) in enumerate(zip(vocab['tokens'], vocab['types'])):
        if ty == 1:
            model_vocab[tok] = i
        elif ty == 3:
            added.append({'id': i, 'content': tok, 'single_word': False, 'lstrip': False,
                          'rstrip': False, 'normalized': False, 'special': True})
    post = ({'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': False, 'use_regex': False}
            if bos is None else
            {'type': 'TemplateProcessing',
             'single': [{'SpecialToken': {'id': bos, 'type_id': 0}}, {'Sequence': {'id': 'A', 'type_id': 0}}],
             'pair': [{'SpecialToken': {'id': bos, 'type_id': 0}}, {'Sequence': {'id': 'A', 'type_id': 0}},
                      {'SpecialToken': {'id': bos, 'type_id': 1}}, {'Sequence': {'id': 'B', 'type_id': 1}}],
             'special_tokens': {bos: {'id': bos, 'ids': [vocab['tokens'].index(bos)], 'tokens': [bos]}}})
    return {
        'version': '1.0',
        'truncation': None,
        'padding': None,
        'added_tokens': added,
        'normalizer': {'type': 'NFC'} if pattern == 'qwen2' else None,
        'pre_tokenizer': {'type': 'Sequence', 'pretokenizers': [
            {'type': 'Split', 'pattern': {'Regex': PATTERNS[pattern]}, 'behavior': 'Isolated', 'invert': False},
            {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': False, 'use_regex': False},
        ]},
        'post_processor': post,
        'decoder': {'type': 'ByteLevel', 'add_prefix_space': True, 'trim_offsets': True, 'use_regex': True},
        'model': {'type': 'BPE', 'dropout': None, 'unk_token': None, 'continuing_subword_prefix': None,
                  'end_of_word_suffix': None, 'fuse_unk': False, 'byte_fallback': False,
                  'ignore_merges': pattern == 'llama3', 'vocab': model_vocab,
                  'merges': [m.split(' ') for m in vocab['merges']]},
    }


def gpt2_tokenizer_json(vocab):
    """GPT-2's tokenizer.json: byte-level BPE whose pre-tokenizer is ByteLevel's own regex."""
    tok = bpe_tokenizer_json(vocab, 'qwen2')
    byte_level = {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': True, 'use_regex': True}
    tok.update(normalizer=None, pre_tokenizer=byte_level, post_processor=byte_level, decoder=byte_level)
    tok['model']['ignore_merges'] = False
    return tok


def pb_varint(n):
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_field(tag, wire, payload):
    return pb_varint(tag << 3 | wire) + payload


def pb_bytes(tag, b):
    return pb_field(tag, 2, pb_varint(len(b)) + b)


def gemma_vocab(vocab):
    """Llama 2's vocabulary with Gemma's special tokens in Gemma's places (<pad> <eos> <bos>
    <unk>, then the pieces after Llama's three), every byte piece kept for byte fallback."""
    return {
        'tokens': ['<pad>', '<eos>', '<bos>', '<unk>'] + vocab['tokens'][3:],
        'types': [3, 3, 3, 2] + vocab['types'][3:],
        'scores': [0.0] * 4 + vocab['scores'][3:],
    }


def sentencepiece_model(vocab, gemma=False):
    """tokenizer.model (sentencepiece_model.proto ModelProto) for Llama 2's vocabulary:
    BPE with byte fallback, identity normalization, a dummy prefix, escaped whitespace.
    Gemma's: its special ids (unk 3, bos 2, eos 1, pad 0) and no dummy prefix."""
    unk, bos, eos, pad, prefix = (3, 2, 1, 0, 0) if gemma else (0, 1, 2, -1, 1)
    out = bytearray()
    for tok, score, ty in zip(vocab['tokens'], vocab['scores'], vocab['types']):
        piece = pb_bytes(1, tok.encode('utf-8')) + pb_field(2, 5, struct.pack('<f', score)) + pb_field(3, 0, pb_varint(ty))
        out += pb_bytes(1, piece)
    trainer = (pb_field(3, 0, pb_varint(2)) + pb_field(4, 0, pb_varint(len(vocab['tokens'])))
               + pb_field(25, 0, pb_varint(1)) + pb_field(35, 0, pb_varint(1))
               + pb_field(40, 0, pb_varint(unk)) + pb_field(41, 0, pb_varint(bos))
               + pb_field(42, 0, pb_varint(eos)) + pb_field(43, 0, pb_varint(pad)))
    if gemma:
        # SentencePiece finds its special ids by these pieces (default <unk> <s> </s> <pad>).
        trainer += b''.join(pb_bytes(tag, piece) for tag, piece in
                            ((45, b'<unk>'), (46, b'<bos>'), (47, b'<eos>'), (48, b'<pad>')))
    normalizer = (pb_bytes(1, b'identity') + pb_field(3, 0, pb_varint(prefix))
                  + pb_field(4, 0, pb_varint(0)) + pb_field(5, 0, pb_varint(1)))
    out += pb_bytes(2, trainer) + pb_bytes(3, normalizer)
    return bytes(out)


# ---------------------------------------------------------------------------------------
# Weights.

def weights(cfg, seed, tied):
    """HF-named tensors drawn from RandomState(seed) in a fixed order."""
    rng = np.random.RandomState(seed)
    e, f, L = cfg['hidden_size'], cfg['intermediate_size'], cfg['num_hidden_layers']
    h, kv = cfg['num_attention_heads'], cfg['num_key_value_heads']
    d = cfg.get('head_dim') or e // h
    qwen2 = cfg['model_type'] in ('qwen2', 'qwen2_moe')
    qwen3 = cfg['model_type'] in ('qwen3', 'qwen3_moe')
    n_exp = cfg.get('num_local_experts') or cfg.get('num_experts') or 0
    moe_f = cfg.get('moe_intermediate_size') or f

    def normal(*shape, std=0.05):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm(n):
        return (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)

    t = {'model.embed_tokens.weight': normal(cfg['vocab_size'], e, std=0.5)}
    olmo2 = cfg['model_type'] == 'olmo2'
    # Gemma 2 and 3: norms after attention and after the feed-forward as well as before.
    gemma2 = cfg['model_type'] in ('gemma2', 'gemma3_text')
    if cfg['model_type'].startswith('gemma'):
        # Gemma's RMSNorm scales by 1 + w: weights centred on 0, drawn as the others.
        norm = lambda n: (rng.standard_normal(n) * 0.1).astype(np.float32)  # noqa: E731
    starcoder2 = cfg['model_type'] == 'starcoder2'
    for l in range(L):
        p = f'model.layers.{l}.'
        if not olmo2:
            t[p + 'input_layernorm.weight'] = norm(e)
        if starcoder2:
            t[p + 'input_layernorm.bias'] = normal(e, std=0.1)
        t[p + 'self_attn.q_proj.weight'] = normal(h * d, e, std=0.2)
        t[p + 'self_attn.k_proj.weight'] = normal(kv * d, e, std=0.2)
        t[p + 'self_attn.v_proj.weight'] = normal(kv * d, e, std=0.2)
        if qwen2 or starcoder2:
            t[p + 'self_attn.q_proj.bias'] = normal(h * d, std=0.1)
            t[p + 'self_attn.k_proj.bias'] = normal(kv * d, std=0.1)
            t[p + 'self_attn.v_proj.bias'] = normal(kv * d, std=0.1)
        if qwen3 or cfg['model_type'] == 'gemma3_text':
            t[p + 'self_attn.q_norm.weight'] = norm(d)
            t[p + 'self_attn.k_norm.weight'] = norm(d)
        if olmo2:
            t[p + 'self_attn.q_norm.weight'] = norm(h * d)
            t[p + 'self_attn.k_norm.weight'] = norm(kv * d)
        t[p + 'self_attn.o_proj.weight'] = normal(e, h * d, std=0.1)
        if starcoder2:
            t[p + 'self_attn.o_proj.bias'] = normal(e, std=0.1)
        t[p + 'post_attention_layernorm.weight'] = norm(e)
        if starcoder2:
            t[p + 'post_attention_layernorm.bias'] = normal(e, std=0.1)
        if olmo2:
            t[p + 'post_feedforward_layernorm.weight'] = norm(e)
        if gemma2:
            t[p + 'pre_feedforward_layernorm.weight'] = norm(e)
            t[p + 'post_feedforward_layernorm.weight'] = norm(e)
        if cfg['model_type'] == 'mixtral':
            t[p + 'block_sparse_moe.gate.weight'] = normal(n_exp, e, std=0.3)
            for x in range(n_exp):
                t[p + f'block_sparse_moe.experts.{x}.w1.weight'] = normal(moe_f, e, std=0.1)
                t[p + f'block_sparse_moe.experts.{x}.w2.weight'] = normal(e, moe_f, std=0.1)
                t[p + f'block_sparse_moe.experts.{x}.w3.weight'] = normal(moe_f, e, std=0.1)
        elif n_exp:
            t[p + 'mlp.gate.weight'] = normal(n_exp, e, std=0.3)
            for x in range(n_exp):
                t[p + f'mlp.experts.{x}.gate_proj.weight'] = normal(moe_f, e, std=0.1)
                t[p + f'mlp.experts.{x}.up_proj.weight'] = normal(moe_f, e, std=0.1)
                t[p + f'mlp.experts.{x}.down_proj.weight'] = normal(e, moe_f, std=0.1)
            if sf := cfg.get('shared_expert_intermediate_size'):
                t[p + 'mlp.shared_expert.gate_proj.weight'] = normal(sf, e, std=0.1)
                t[p + 'mlp.shared_expert.up_proj.weight'] = normal(sf, e, std=0.1)
                t[p + 'mlp.shared_expert.down_proj.weight'] = normal(e, sf, std=0.1)
                t[p + 'mlp.shared_expert_gate.weight'] = normal(1, e, std=0.3)
        elif starcoder2:
            t[p + 'mlp.c_fc.weight'] = normal(f, e, std=0.1)
            t[p + 'mlp.c_fc.bias'] = normal(f, std=0.1)
            t[p + 'mlp.c_proj.weight'] = normal(e, f, std=0.1)
            t[p + 'mlp.c_proj.bias'] = normal(e, std=0.1)
        else:
            t[p + 'mlp.gate_proj.weight'] = normal(f, e, std=0.1)
            t[p + 'mlp.up_proj.weight'] = normal(f, e, std=0.1)
            t[p + 'mlp.down_proj.weight'] = normal(e, f, std=0.1)
    t['model.norm.weight'] = norm(e)
    if starcoder2:
        t['model.norm.bias'] = normal(e, std=0.1)
    if not tied:
        t['lm_head.weight'] = normal(cfg['vocab_size'], e, std=0.2)
    return t


def gpt2_weights(cfg, seed, tied):
    """GPT2LMHeadModel's tensors (Conv1D weights are [in, out]), from RandomState(seed)."""
    rng = np.random.RandomState(seed)
    e, L = cfg['n_embd'], cfg['n_layer']
    f = cfg.get('n_inner') or 4 * e

    def normal(*shape, std=0.05):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm(n):
        return (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)

    t = {'transformer.wte.weight': normal(cfg['vocab_size'], e, std=0.5),
         'transformer.wpe.weight': normal(cfg['n_positions'], e, std=0.1)}
    for l in range(L):
        p = f'transformer.h.{l}.'
        t[p + 'ln_1.weight'], t[p + 'ln_1.bias'] = norm(e), normal(e, std=0.1)
        t[p + 'attn.c_attn.weight'], t[p + 'attn.c_attn.bias'] = normal(e, 3 * e, std=0.2), normal(3 * e, std=0.1)
        t[p + 'attn.c_proj.weight'], t[p + 'attn.c_proj.bias'] = normal(e, e, std=0.1), normal(e, std=0.1)
        t[p + 'ln_2.weight'], t[p + 'ln_2.bias'] = norm(e), normal(e, std=0.1)
        t[p + 'mlp.c_fc.weight'], t[p + 'mlp.c_fc.bias'] = normal(e, f, std=0.1), normal(f, std=0.1)
        t[p + 'mlp.c_proj.weight'], t[p + 'mlp.c_proj.bias'] = normal(f, e, std=0.1), normal(e, std=0.1)
    t['transformer.ln_f.weight'], t['transformer.ln_f.bias'] = norm(e), normal(e, std=0.1)
    assert tied
    return t


def phi3_weights(cfg, seed, tied):
    """Phi3ForCausalLM's tensors (fused qkv_proj and gate_up_proj), from RandomState(seed)."""
    rng = np.random.RandomState(seed)
    e, f, L = cfg['hidden_size'], cfg['intermediate_size'], cfg['num_hidden_layers']
    h, kv = cfg['num_attention_heads'], cfg['num_key_value_heads']
    d = e // h

    def normal(*shape, std=0.05):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm(n):
        return (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)

    t = {'model.embed_tokens.weight': normal(cfg['vocab_size'], e, std=0.5)}
    for l in range(L):
        p = f'model.layers.{l}.'
        t[p + 'input_layernorm.weight'] = norm(e)
        t[p + 'self_attn.qkv_proj.weight'] = normal((h + 2 * kv) * d, e, std=0.2)
        t[p + 'self_attn.o_proj.weight'] = normal(e, h * d, std=0.1)
        t[p + 'post_attention_layernorm.weight'] = norm(e)
        t[p + 'mlp.gate_up_proj.weight'] = normal(2 * f, e, std=0.1)
        t[p + 'mlp.down_proj.weight'] = normal(e, f, std=0.1)
    t['model.norm.weight'] = norm(e)
    if not tied:
        t['lm_head.weight'] = normal(cfg['vocab_size'], e, std=0.2)
    return t


# transformers' Gemma3TextConfig defaults for the fields gemma3_mm's text_config leaves out.
GEMMA3_TEXT_DEFAULTS = {'num_attention_heads': 8, 'num_key_value_heads': 4, 'head_dim': 256}


def gemma3_mm_weights(cfg, seed, tied):
    """Gemma3ForConditionalGeneration's tensors as transformers >= 4.52 names them: the text
    model's (as `weights` draws them) under model.language_model., then SigLIP's vision tower
    and the multimodal projector, from RandomState(seed + 1)."""
    text = {**GEMMA3_TEXT_DEFAULTS, **cfg['text_config']}
    t = {'model.language_model.' + n[len('model.'):]: a for n, a in weights(text, seed, tied).items()}
    rng = np.random.RandomState(seed + 1)
    v = cfg['vision_config']
    e, f, c, p = v['hidden_size'], v['intermediate_size'], 3, v['patch_size']

    def normal(*shape, std=0.05):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    vt = 'model.vision_tower.vision_model.'
    t[vt + 'embeddings.patch_embedding.weight'] = normal(e, c, p, p)
    t[vt + 'embeddings.patch_embedding.bias'] = normal(e)
    t[vt + 'embeddings.position_embedding.weight'] = normal((v['image_size'] // p) ** 2, e)
    for l in range(v['num_hidden_layers']):
        b = f'{vt}encoder.layers.{l}.'
        for n in ('layer_norm1', 'layer_norm2'):
            t[b + n + '.weight'], t[b + n + '.bias'] = 1.0 + normal(e), normal(e)
        for n in ('q_proj', 'k_proj', 'v_proj', 'out_proj'):
            t[b + f'self_attn.{n}.weight'], t[b + f'self_attn.{n}.bias'] = normal(e, e), normal(e)
        t[b + 'mlp.fc1.weight'], t[b + 'mlp.fc1.bias'] = normal(f, e), normal(f)
        t[b + 'mlp.fc2.weight'], t[b + 'mlp.fc2.bias'] = normal(e, f), normal(e)
    t[vt + 'post_layernorm.weight'], t[vt + 'post_layernorm.bias'] = 1.0 + normal(e), normal(e)
    t['model.multi_modal_projector.mm_input_projection_weight'] = normal(e, text['hidden_size'])
    t['model.multi_modal_projector.mm_soft_emb_norm.weight'] = normal(e)
    return t


# Architectures whose tensors `weights` does not name.
ARCH_WEIGHTS = {'gpt2': gpt2_weights, 'phi3': phi3_weights, 'gemma3': gemma3_mm_weights}


def to_dtype(a, dtype):
    if dtype == 'float32':
        return a
    if dtype == 'float16':
        return a.astype(np.float16)
    # bfloat16, rounded to nearest even, stored as uint16 bits (safetensors BF16).
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return rounded


def save_weights(path, tensors, dtype):
    if dtype == 'bfloat16':
        # safetensors.numpy has no bfloat16: write the header ourselves, as the reference
        # writer does (sorted names, data in that order, header padded to 8 with spaces).
        names = sorted(tensors)
        header, offset, blobs = {}, 0, []
        for n in names:
            b = to_dtype(tensors[n], dtype).tobytes()
            header[n] = {'dtype': 'BF16', 'shape': list(tensors[n].shape), 'data_offsets': [offset, offset + len(b)]}
            offset += len(b)
            blobs.append(b)
        h = json.dumps(header, separators=(',', ':')).encode()
        h += b' ' * (-len(h) % 8)
        with open(path, 'wb') as out:
            out.write(struct.pack('<Q', len(h)) + h)
            for b in blobs:
                out.write(b)
    else:
        save_file({n: to_dtype(a, dtype) for n, a in tensors.items()}, path)


def make(src, out_dir, only=None):
    out_dir = Path(out_dir)
    vocabs = {}
    for seed, (name, spec) in enumerate(MODELS.items(), start=17):
        if only and name != only:
            continue
        seed = spec.get('seed', seed)
        d = out_dir / name
        d.mkdir(parents=True, exist_ok=True)
        cfg = spec['config']
        if spec['vocab'] not in vocabs:
            vocabs[spec['vocab']] = read_vocab(src, spec['vocab'])
        vocab = vocabs[spec['vocab']]
        (d / 'config.json').write_text(json.dumps(cfg, indent=2, sort_keys=True) + '\n')
        tc = dict(spec['tokenizer_config'])
        if 'template' in spec:
            tc['chat_template'] = (Path(src) / 'models' / 'templates' / spec['template']).read_text()
        if 'template_file' in spec:
            (d / 'chat_template.jinja').write_text((Path(src) / 'models' / 'templates' / spec['template_file']).read_text())
        if spec['tokenizer'] == 'spm' and 'spm_pieces' in spec:
            # The pieces of tokenizer.model, the tokens past them added in tokenizer_config.json
            # (the GGUF's types of <unk>, <s>, </s> are what the converter made of them).
            n = spec['spm_pieces']
            pieces = {'tokens': vocab['tokens'][:n], 'scores': [0.0, 0.0, 0.0] + vocab['scores'][3:n],
                      'types': [2, 3, 3] + vocab['types'][3:n]}
            (d / 'tokenizer.model').write_bytes(sentencepiece_model(pieces))
            tc['added_tokens_decoder'] = {
                str(i): {'content': tok, 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': True}
                for i, (tok, ty) in enumerate(zip(vocab['tokens'], vocab['types'])) if i < 3 or (i >= n and ty == 3)}
        elif spec['tokenizer'] == 'spm':
            gemma = spec.get('gemma', False)
            (d / 'tokenizer.model').write_bytes(sentencepiece_model(gemma_vocab(vocab) if gemma else vocab, gemma))
        else:
            bos = tc.get('bos_token') if spec.get('pattern') == 'llama3' else None
            tok = gpt2_tokenizer_json(vocab) if spec['tokenizer'] == 'gpt2' else bpe_tokenizer_json(vocab, spec['pattern'], bos)
            (d / 'tokenizer.json').write_text(json.dumps(tok, ensure_ascii=False, indent=None, separators=(',', ':')))
            tc['added_tokens_decoder'] = {str(a['id']): {k: a[k] for k in ('content', 'lstrip', 'normalized', 'rstrip', 'single_word', 'special')}
                                          for a in tok['added_tokens']}
        (d / 'tokenizer_config.json').write_text(json.dumps(tc, indent=2, sort_keys=True, ensure_ascii=False) + '\n')
        weights_of = ARCH_WEIGHTS.get(cfg['model_type'], weights)
        save_weights(d / 'model.safetensors', weights_of(cfg, seed, spec['tied']), spec['dtype'])


def file_hashes(d):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(d).iterdir()) if p.is_file()}


# ---------------------------------------------------------------------------------------
# References (torch).

def reference(src, out_dir, fixtures_dir, only=None):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    for name in MODELS:
        if only and name != only:
            continue
        d = Path(out_dir) / name
        tokenizer = AutoTokenizer.from_pretrained(d)
        hf_ids = [tokenizer(p)['input_ids'] for p in PROMPTS]
        if MODELS[name]['tokenizer'] == 'spm':
            # The reference of a SentencePiece model is SentencePiece: transformers' fast
            # Llama tokenizer (a BPE conversion) splits runs of spaces differently.
            import sentencepiece
            sp = sentencepiece.SentencePieceProcessor(model_file=str(d / 'tokenizer.model'))
            ids = [[sp.bos_id()] + sp.encode(p) for p in PROMPTS]
            source = 'sentencepiece ' + sentencepiece.__version__ + ' (+ BOS: add_bos_token)'
        else:
            ids = hf_ids
            source = 'transformers ' + transformers.__version__ + ' AutoTokenizer'
        # AutoModelForCausalLM is the config's class (Gemma3ForConditionalGeneration for
        # gemma3_mm, whose text-only forward is the reference); every tensor of the directory
        # must be one the class loads, and every one it has must be in the directory.
        model, info = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, output_loading_info=True)
        model.eval()
        assert type(model).__name__ in MODELS[name]['config']['architectures'], type(model).__name__
        assert not any(info[k] for k in ('missing_keys', 'unexpected_keys', 'mismatched_keys')), info
        prompt_ids = tokenizer(LOGIT_PROMPT)['input_ids']
        with torch.no_grad():
            logits = model(torch.tensor([prompt_ids])).logits[0].numpy().astype(np.float32)
        vocab_size = logits.shape[1]
        rng = np.random.RandomState(1234)
        chosen = set(range(64)) | set(rng.choice(vocab_size, 2000, replace=False).tolist())
        for row in logits:
            chosen |= set(np.argsort(-row)[:16].tolist())
        chosen = sorted(chosen)
        sub = logits[:, chosen]
        out = {
            'made_with': {'torch': torch.__version__, 'transformers': transformers.__version__},
            'files_sha256': file_hashes(d),
            'prompts': PROMPTS,
            'token_ids': ids,
            'token_ids_source': source,
            'transformers_token_ids': hf_ids,
            'logit_prompt': LOGIT_PROMPT,
            'logit_prompt_ids': prompt_ids,
            'vocab_size': vocab_size,
            'logit_ids': chosen,
            'logits_f32_base64': base64.b64encode(sub.astype('<f4').tobytes()).decode(),
            'argmax': logits.argmax(axis=1).tolist(),
            'max_abs': np.abs(logits).max(axis=1).astype(float).tolist(),
        }
        (Path(fixtures_dir) / f'{name}.json').write_text(json.dumps(out, ensure_ascii=False) + '\n')
        conv = subprocess.run([sys.executable, str(HERE / 'converter_reference.py'), src, str(d), 'f32', 'f16', 'bf16', 'q8_0'],
                              check=True, capture_output=True, text=True).stdout
        (Path(fixtures_dir) / f'{name}.converter.json').write_text(conv)
        print(f'{name}: {len(prompt_ids)} logit positions, vocab {vocab_size}', file=sys.stderr)


if __name__ == '__main__':
    cmd = sys.argv[1]
    if cmd == 'make':
        only = sys.argv[4] if len(sys.argv) > 4 else None
        make(sys.argv[2], sys.argv[3], only)
        print(json.dumps({n: file_hashes(Path(sys.argv[3]) / n) for n in MODELS if not only or n == only}, indent=1))
    elif cmd == 'reference':
        reference(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else None)
    else:
        sys.exit(__doc__)
