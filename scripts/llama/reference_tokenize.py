#!/usr/bin/env python3
"""Token ids from the tokenizer libraries a model's files belong to, the references the
llama.cpp tests compare llama.cpp's tokenization with: Hugging Face's `tokenizers` for a
tokenizer.json, Google's `sentencepiece` for a tokenizer.model.

usage: reference_tokenize.py tokenizer.json < texts.json
       reference_tokenize.py tokenizer.model [--bos] < texts.json
texts.json is a JSON list of strings; prints a JSON list of id lists. tokenizer.json's
post-processor adds its special tokens; --bos prepends SentencePiece's BOS (as
add_bos_token does for Llama).
"""
import json
import sys

path = sys.argv[1]
texts = json.load(sys.stdin)
if path.endswith('.model'):
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=path)
    bos = [sp.bos_id()] if '--bos' in sys.argv[2:] else []
    print(json.dumps([bos + sp.encode(t) for t in texts]))
else:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(path)
    # Ids of the text itself: no padding to a batch length, no truncation.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    print(json.dumps([tokenizer.encode(t).ids for t in texts]))
