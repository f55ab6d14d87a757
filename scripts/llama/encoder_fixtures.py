#!/usr/bin/env python3
"""Small random-weight encoder checkpoints (xlm-roberta, modernbert) for __test__/llama.spec.ts.

    encoder_fixtures.py train-spm FIXTURES_DIR LLAMA_CPP_SRC
        Train the tiny SentencePiece Unigram model the xlm-roberta fixture uses (XLM-R's
        layout: <unk> <s> </s> first, a dummy prefix, extra whitespace removed, and a
        precompiled normalization map from a handful of NFKC-like rules, so that the map
        reaches llama.cpp) and the tokenizer.json transformers' XLMRobertaTokenizerFast makes
        of it. Writes FIXTURES_DIR/xlm-roberta.sentencepiece.bpe.model and
        xlm-roberta.tokenizer.json. Needs sentencepiece, protobuf and transformers: run once,
        commit the two files (the `make` step copies them).

    encoder_fixtures.py make LLAMA_CPP_SRC OUT_DIR [NAME]
        Write the model directories (or just NAME) into OUT_DIR/<name>/: config.json,
        model.safetensors (numpy's RandomState), the tokenizer files, tokenizer_config.json
        and a sentence-transformers pooling (modules.json, 1_Pooling/config.json). Needs
        numpy, safetensors and gguf only: the tests run this and check every file's SHA-256.

    encoder_fixtures.py reference LLAMA_CPP_SRC OUT_DIR FIXTURES_DIR [NAME]
        For each directory made by `make`: transformers' token ids of the sentences (the slow
        and the fast tokenizer, which must agree), its float32 pooled embeddings (the pooling
        of 1_Pooling/config.json applied to the model's last hidden state, as
        sentence-transformers does), and llama.cpp's convert_hf_to_gguf.py output summarised,
        written to FIXTURES_DIR/<name>.json and <name>.converter.json. Needs torch and
        transformers (the torch peer): run once, commit.
"""
import base64
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from decoder_fixtures import file_hashes, read_vocab, save_weights  # noqa: E402

# The tokenizer is trained on these; SENTENCES adds text with characters it has not seen.
TRAINED = [
    'The quick brown fox jumps over the lazy dog.',
    'Hello world! 1234 + 5678 = 6912, café ünïcödé',
    '   leading spaces,   runs of spaces\tand\nnewlines  ',
    'Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ and the ﬁne ligature',
    '東京は日本の首都です。Привет, мир!',
    "I've been 'told he's there, 'RE you sure?",
    'Ein Satz auf Deutsch über Straßenbahnen und Äpfel.',
    'supercalifragilisticexpialidocious antidisestablishmentarianism',
]
SENTENCES = TRAINED + ['Unseen: Ελληνικά λέξεις, emoji 🦙 and ⅷ']

# Fullwidth ASCII, the ﬁ/ﬂ ligatures, no-break and ideographic spaces: NFKC's mappings for
# them, as sentencepiece's normalization_rule_tsv (source code points TAB target code points).
NORMALIZATION_RULES = (
    [f'{0xFF01 + i:X}\t{0x21 + i:X}' for i in range(0x7E - 0x21 + 1)]
    + ['FB01\t66 69', 'FB02\t66 6C', 'A0\t20', '3000\t20']
)

XLMR_SPECIALS = ['<s>', '<pad>', '</s>', '<unk>']


def spm_pieces(model_path):
    """(piece, score, type) of a SentencePiece model, read with a minimal protobuf reader."""
    data = Path(model_path).read_bytes()

    def varint(b, i):
        n = shift = 0
        while True:
            c = b[i]
            i += 1
            n |= (c & 0x7F) << shift
            shift += 7
            if c < 0x80:
                return n, i

    def fields(b):
        i = 0
        while i < len(b):
            key, i = varint(b, i)
            tag, wire = key >> 3, key & 7
            if wire == 0:
                v, i = varint(b, i)
            elif wire == 2:
                n, i = varint(b, i)
                v, i = b[i:i + n], i + n
            elif wire == 5:
                v, i = b[i:i + 4], i + 4
            elif wire == 1:
                v, i = b[i:i + 8], i + 8
            else:
                raise ValueError(f'wire type {wire}')
            yield tag, v

    out = []
    for tag, v in fields(data):
        if tag == 1:
            p = {'type': 1, 'score': 0.0}
            for t, x in fields(v):
                if t == 1:
                    p['piece'] = x.decode('utf-8')
                elif t == 2:
                    p['score'] = float(np.frombuffer(x, '<f4')[0])
                elif t == 3:
                    p['type'] = x
            out.append(p)
    return out


MODELS = {
    # bge-m3 / multilingual-e5's layout, shrunk: XLMRobertaModel, position ids starting at
    # pad_token_id + 1, one token type, a SentencePiece Unigram vocabulary with the fairseq
    # ids (<s> <pad> </s> <unk>, the pieces shifted by one, <mask> last), CLS pooling.
    'xlm-roberta': {
        'seed': 201, 'dtype': 'float32', 'pooling': 'cls',
        'config': {
            'architectures': ['XLMRobertaModel'], 'model_type': 'xlm-roberta',
            'attention_probs_dropout_prob': 0.1, 'bos_token_id': 0, 'eos_token_id': 2,
            'pad_token_id': 1, 'classifier_dropout': None, 'hidden_act': 'gelu',
            'hidden_dropout_prob': 0.1, 'hidden_size': 64, 'initializer_range': 0.02,
            'intermediate_size': 128, 'layer_norm_eps': 1e-05, 'max_position_embeddings': 514,
            'num_attention_heads': 4, 'num_hidden_layers': 2, 'output_past': True,
            'position_embedding_type': 'absolute', 'type_vocab_size': 1, 'use_cache': True,
            'torch_dtype': 'float32', 'transformers_version': '4.57.6',
        },
    },
    # ModernBERT-base's layout, shrunk: fused Wqkv, a gated feed-forward (Wi holds both
    # halves), no biases, no norm before the first layer's attention, a global-attention layer
    # every third and local attention (a window small enough to matter for the sentences)
    # between, two rope bases, and (as ModernBERT-base's config.json has it, beside norm_eps) a
    # layer_norm_eps, which the converter writes as the epsilon llama.cpp requires; its tokenizer (GPT-NeoX's BPE, rebuilt from llama.cpp's
    # ggml-vocab-gpt-neox.gguf, with ModernBERT's special tokens and [CLS] … [SEP]), mean pooling.
    'modernbert': {
        'seed': 202, 'dtype': 'float32', 'pooling': 'mean',
        'config': {
            'architectures': ['ModernBertModel'], 'model_type': 'modernbert', 'attention_bias': False,
            'attention_dropout': 0.0, 'bos_token_id': 50281, 'classifier_activation': 'gelu',
            'classifier_bias': False, 'classifier_dropout': 0.0, 'classifier_pooling': 'mean',
            'cls_token_id': 50281, 'decoder_bias': True, 'deterministic_flash_attn': False,
            'embedding_dropout': 0.0, 'eos_token_id': 50282, 'global_attn_every_n_layers': 3,
            'global_rope_theta': 160000.0, 'hidden_activation': 'gelu', 'hidden_size': 64,
            'initializer_cutoff_factor': 2.0, 'initializer_range': 0.02, 'intermediate_size': 96,
            'layer_norm_eps': 1e-05, 'local_attention': 8, 'local_rope_theta': 10000.0,
            'max_position_embeddings': 8192,
            'mlp_bias': False, 'mlp_dropout': 0.0, 'norm_bias': False, 'norm_eps': 1e-05,
            'num_attention_heads': 4, 'num_hidden_layers': 4, 'pad_token_id': 50283,
            'repad_logits_with_grad': False, 'sep_token_id': 50282, 'sparse_pred_ignore_index': -100,
            'sparse_prediction': False, 'vocab_size': 50368, 'torch_dtype': 'float32',
            'transformers_version': '4.57.6',
        },
    },
}

MODERNBERT_SPECIALS = [('|||IP_ADDRESS|||', False), ('|||EMAIL_ADDRESS|||', False), ('|||PHONE_NUMBER|||', False),
                       ('[UNK]', True), ('[CLS]', True), ('[SEP]', True), ('[PAD]', True), ('[MASK]', True)]


def modernbert_files(d, src):
    """ModernBERT's tokenizer.json and tokenizer_config.json, from GPT-NeoX's vocabulary."""
    v = read_vocab(src, 'gpt-neox')
    model_vocab, added = {}, []

    def add(i, content, special):
        added.append({'id': i, 'content': content, 'single_word': False, 'lstrip': content == '[MASK]',
                      'rstrip': False, 'normalized': not special, 'special': special})
    for i, (tok, ty) in enumerate(zip(v['tokens'], v['types'])):
        if ty == 1:
            model_vocab[tok] = i
        elif ty == 3:
            # In the BPE model's vocabulary too, as GPT-NeoX's tokenizer.json has them.
            model_vocab[tok] = i
            add(i, tok, True)
        elif ty == 4 and not tok.startswith('[PAD'):
            add(i, tok, False)
    for i, (content, special) in enumerate(MODERNBERT_SPECIALS, start=50277):
        add(i, content, special)
    byte_level = {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': True, 'use_regex': True}
    cls, sep = ({'SpecialToken': {'id': t, 'type_id': k}} for t, k in (('[CLS]', 0), ('[SEP]', 0)))
    tok = {
        'version': '1.0', 'truncation': None, 'padding': None, 'added_tokens': added,
        'normalizer': {'type': 'NFC'}, 'pre_tokenizer': byte_level,
        'post_processor': {
            'type': 'TemplateProcessing',
            'single': [cls, {'Sequence': {'id': 'A', 'type_id': 0}}, sep],
            'pair': [cls, {'Sequence': {'id': 'A', 'type_id': 0}}, sep, {'Sequence': {'id': 'B', 'type_id': 1}},
                     {'SpecialToken': {'id': '[SEP]', 'type_id': 1}}],
            'special_tokens': {'[CLS]': {'id': '[CLS]', 'ids': [50281], 'tokens': ['[CLS]']},
                               '[SEP]': {'id': '[SEP]', 'ids': [50282], 'tokens': ['[SEP]']}},
        },
        'decoder': byte_level,
        'model': {'type': 'BPE', 'dropout': None, 'unk_token': None, 'continuing_subword_prefix': None,
                  'end_of_word_suffix': None, 'fuse_unk': False, 'byte_fallback': False, 'ignore_merges': False,
                  'vocab': model_vocab, 'merges': [m.split(' ') for m in v['merges']]},
    }
    (d / 'tokenizer.json').write_text(json.dumps(tok, ensure_ascii=False, separators=(',', ':')))
    tc = {
        'added_tokens_decoder': {str(a['id']): {k: a[k] for k in ('content', 'lstrip', 'normalized', 'rstrip', 'single_word', 'special')}
                                 for a in added},
        'clean_up_tokenization_spaces': True, 'cls_token': '[CLS]', 'extra_special_tokens': {},
        'mask_token': '[MASK]', 'model_input_names': ['input_ids', 'attention_mask'],
        'model_max_length': 8192, 'pad_token': '[PAD]', 'sep_token': '[SEP]',
        'tokenizer_class': 'PreTrainedTokenizerFast', 'unk_token': '[UNK]',
    }
    (d / 'tokenizer_config.json').write_text(json.dumps(tc, indent=2, sort_keys=True, ensure_ascii=False) + '\n')


def draws(seed):
    """normal(*shape, std) and norm(n) (LayerNorm weights near 1) from RandomState(seed)."""
    rng = np.random.RandomState(seed)

    def normal(*shape, std=0.05):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm(n):
        return (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)
    return normal, norm


def modernbert_weights(cfg, seed):
    """ModernBertModel's tensors: no biases, no attn_norm in layer 0."""
    normal, norm = draws(seed)
    e, f, L = cfg['hidden_size'], cfg['intermediate_size'], cfg['num_hidden_layers']

    t = {'embeddings.tok_embeddings.weight': normal(cfg['vocab_size'], e, std=0.5), 'embeddings.norm.weight': norm(e)}
    for l in range(L):
        p = f'layers.{l}.'
        if l:
            t[p + 'attn_norm.weight'] = norm(e)
        t[p + 'attn.Wqkv.weight'] = normal(3 * e, e, std=0.2)
        t[p + 'attn.Wo.weight'] = normal(e, e, std=0.1)
        t[p + 'mlp_norm.weight'] = norm(e)
        t[p + 'mlp.Wi.weight'] = normal(2 * f, e, std=0.2)
        t[p + 'mlp.Wo.weight'] = normal(e, f, std=0.1)
    t['final_norm.weight'] = norm(e)
    return t


def xlmr_files(d, spec):
    """sentencepiece.bpe.model and tokenizer.json (the committed fixture inputs),
    tokenizer_config.json; returns vocab_size."""
    fixtures = HERE.parent.parent / '__test__' / 'fixtures' / 'llama'
    model = (fixtures / 'xlm-roberta.sentencepiece.bpe.model').read_bytes()
    (d / 'sentencepiece.bpe.model').write_bytes(model)
    (d / 'tokenizer.json').write_bytes((fixtures / 'xlm-roberta.tokenizer.json').read_bytes())
    n = len(spm_pieces(d / 'sentencepiece.bpe.model'))
    vocab_size = n + 2
    token = lambda content, lstrip=False: {'content': content, 'lstrip': lstrip, 'normalized': False,
                                           'rstrip': False, 'single_word': False, 'special': True}
    decoder = {str(i): token(t) for i, t in enumerate(XLMR_SPECIALS)}
    decoder[str(vocab_size - 1)] = token('<mask>', lstrip=True)
    tc = {
        'added_tokens_decoder': decoder, 'bos_token': '<s>', 'clean_up_tokenization_spaces': True,
        'cls_token': '<s>', 'eos_token': '</s>', 'extra_special_tokens': {}, 'mask_token': '<mask>',
        'model_max_length': 512, 'pad_token': '<pad>', 'sep_token': '</s>', 'sp_model_kwargs': {},
        'tokenizer_class': 'XLMRobertaTokenizer', 'unk_token': '<unk>',
    }
    (d / 'tokenizer_config.json').write_text(json.dumps(tc, indent=2, sort_keys=True) + '\n')
    return vocab_size


def xlmr_weights(cfg, seed):
    """XLMRobertaModel's tensors (with its pooler, which the converter drops)."""
    normal, norm = draws(seed)
    e, f, L = cfg['hidden_size'], cfg['intermediate_size'], cfg['num_hidden_layers']

    t = {
        'embeddings.word_embeddings.weight': normal(cfg['vocab_size'], e, std=0.5),
        'embeddings.position_embeddings.weight': normal(cfg['max_position_embeddings'], e, std=0.2),
        'embeddings.token_type_embeddings.weight': normal(cfg['type_vocab_size'], e, std=0.1),
        'embeddings.LayerNorm.weight': norm(e), 'embeddings.LayerNorm.bias': normal(e, std=0.1),
    }
    for l in range(L):
        p = f'encoder.layer.{l}.'
        for m in ('attention.self.query', 'attention.self.key', 'attention.self.value', 'attention.output.dense'):
            t[p + m + '.weight'], t[p + m + '.bias'] = normal(e, e, std=0.2), normal(e, std=0.1)
        t[p + 'attention.output.LayerNorm.weight'] = norm(e)
        t[p + 'attention.output.LayerNorm.bias'] = normal(e, std=0.1)
        t[p + 'intermediate.dense.weight'], t[p + 'intermediate.dense.bias'] = normal(f, e, std=0.2), normal(f, std=0.1)
        t[p + 'output.dense.weight'], t[p + 'output.dense.bias'] = normal(e, f, std=0.1), normal(e, std=0.1)
        t[p + 'output.LayerNorm.weight'], t[p + 'output.LayerNorm.bias'] = norm(e), normal(e, std=0.1)
    t['pooler.dense.weight'], t['pooler.dense.bias'] = normal(e, e, std=0.1), normal(e, std=0.1)
    return t


def pooling_files(d, mode):
    modules = [
        {'idx': 0, 'name': '0', 'path': '', 'type': 'sentence_transformers.models.Transformer'},
        {'idx': 1, 'name': '1', 'path': '1_Pooling', 'type': 'sentence_transformers.models.Pooling'},
    ]
    (d / 'modules.json').write_text(json.dumps(modules, indent=2) + '\n')
    (d / '1_Pooling').mkdir(exist_ok=True)
    cfg = {'word_embedding_dimension': None, 'pooling_mode_cls_token': mode == 'cls',
           'pooling_mode_mean_tokens': mode == 'mean', 'pooling_mode_max_tokens': False,
           'pooling_mode_mean_sqrt_len_tokens': False, 'pooling_mode_weightedmean_tokens': False,
           'pooling_mode_lasttoken': False, 'include_prompt': True}
    (d / '1_Pooling' / 'config.json').write_text(json.dumps(cfg, indent=2) + '\n')


def make(src, out_dir, only=None):
    for name, spec in MODELS.items():
        if only and name != only:
            continue
        d = Path(out_dir) / name
        d.mkdir(parents=True, exist_ok=True)
        cfg = dict(spec['config'])
        if name == 'xlm-roberta':
            cfg['vocab_size'] = xlmr_files(d, spec)
            tensors = xlmr_weights(cfg, spec['seed'])
        else:
            modernbert_files(d, src)
            tensors = modernbert_weights(cfg, spec['seed'])
        (d / 'config.json').write_text(json.dumps(cfg, indent=2, sort_keys=True) + '\n')
        pooling_files(d, spec['pooling'])
        save_weights(d / 'model.safetensors', tensors, spec['dtype'])


def all_hashes(d):
    """file_hashes of the directory and of its subdirectories (as 'sub/name')."""
    out = file_hashes(d)
    for sub in sorted(p for p in Path(d).iterdir() if p.is_dir()):
        out.update({f'{sub.name}/{k}': v for k, v in file_hashes(sub).items()})
    return out


def train_spm(fixtures_dir):
    import tempfile
    import sentencepiece as spm
    from transformers import XLMRobertaTokenizer, XLMRobertaTokenizerFast

    fixtures_dir = Path(fixtures_dir)
    src = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    corpus = list(TRAINED) * 4
    # Text enough for a ~1,000-piece vocabulary: llama.cpp's README (prose, code, markup).
    if src:
        corpus += [l for l in (src / 'README.md').read_text().splitlines() if l.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / 'corpus.txt'
        text.write_text('\n'.join(corpus) + '\n')
        rules = Path(tmp) / 'rules.tsv'
        rules.write_text('\n'.join(NORMALIZATION_RULES) + '\n')
        prefix = Path(tmp) / 'm'
        spm.SentencePieceTrainer.train(
            input=str(text), model_prefix=str(prefix), model_type='unigram', vocab_size=1000,
            hard_vocab_limit=False, character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2,
            pad_id=-1, normalization_rule_tsv=str(rules), add_dummy_prefix=True,
            remove_extra_whitespaces=True, num_threads=1, seed_sentencepiece_size=100000,
            minloglevel=2)
        model = Path(str(prefix) + '.model').read_bytes()
        (fixtures_dir / 'xlm-roberta.sentencepiece.bpe.model').write_bytes(model)
        d = Path(tmp) / 'tok'
        d.mkdir()
        (d / 'sentencepiece.bpe.model').write_bytes(model)
        slow = XLMRobertaTokenizer(str(d / 'sentencepiece.bpe.model'))
        fast = XLMRobertaTokenizerFast(__slow_tokenizer=slow)
        fast.backend_tokenizer.save(str(fixtures_dir / 'xlm-roberta.tokenizer.json'))


def pooled(hidden, mask, mode):
    if mode == 'cls':
        return hidden[:, 0]
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1)


def reference(src, out_dir, fixtures_dir, only=None):
    import torch
    import transformers
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(0)
    for name, spec in MODELS.items():
        if only and name != only:
            continue
        d = Path(out_dir) / name
        slow = AutoTokenizer.from_pretrained(d, use_fast=False)
        fast = AutoTokenizer.from_pretrained(d, use_fast=True)
        ids = [fast(s)['input_ids'] for s in SENTENCES]
        slow_ids = [slow(s)['input_ids'] for s in SENTENCES]
        assert ids == slow_ids, (ids, slow_ids)
        model = AutoModel.from_pretrained(d, dtype=torch.float32).eval()
        embeddings = []
        with torch.no_grad():
            for row in ids:
                x = torch.tensor([row])
                hidden = model(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state
                embeddings.append(pooled(hidden, torch.ones_like(x), spec['pooling'])[0].tolist())
        out = {
            'made_with': {'torch': torch.__version__, 'transformers': transformers.__version__},
            'files_sha256': all_hashes(d),
            'sentences': SENTENCES,
            'token_ids': ids,
            'token_ids_source': f'transformers {transformers.__version__} {type(slow).__name__} and {type(fast).__name__} (equal)',
            'pooling': spec['pooling'],
            'embeddings': embeddings,
        }
        (Path(fixtures_dir) / f'{name}.json').write_text(json.dumps(out, ensure_ascii=False) + '\n')
        conv = subprocess.run([sys.executable, str(HERE / 'converter_reference.py'), src, str(d), 'f32', 'f16', 'bf16', 'q8_0'],
                              check=True, capture_output=True, text=True).stdout
        (Path(fixtures_dir) / f'{name}.converter.json').write_text(conv)
        print(f'{name}: {len(SENTENCES)} sentences', file=sys.stderr)


if __name__ == '__main__':
    cmd = sys.argv[1]
    if cmd == 'train-spm':
        train_spm(sys.argv[2])
    elif cmd == 'make':
        only = sys.argv[4] if len(sys.argv) > 4 else None
        make(sys.argv[2], sys.argv[3], only)
        print(json.dumps({n: all_hashes(Path(sys.argv[3]) / n) for n in MODELS if not only or n == only}, indent=1))
    elif cmd == 'reference':
        reference(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else None)
    else:
        sys.exit(__doc__)
