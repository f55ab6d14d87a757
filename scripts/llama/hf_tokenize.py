#!/usr/bin/env python3
"""Token ids from Hugging Face's tokenizer (the `tokenizers` library), the reference the
llama.cpp tests compare llama.cpp's tokenization with.

usage: hf_tokenize.py TOKENIZER.json < texts.json   (a JSON list of strings)
prints a JSON list of id lists, special tokens added as the tokenizer's post-processor adds them.
"""
import json
import sys

from tokenizers import Tokenizer

tokenizer = Tokenizer.from_file(sys.argv[1])
# Ids of the text itself: no padding to a batch length, no truncation.
tokenizer.no_padding()
tokenizer.no_truncation()
texts = json.load(sys.stdin)
print(json.dumps([tokenizer.encode(t).ids for t in texts]))
