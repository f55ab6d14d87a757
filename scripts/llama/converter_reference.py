#!/usr/bin/env python3
"""What llama.cpp's own converter writes for a model directory, for __test__/llama.spec.ts.

Runs llama.cpp's convert_hf_to_gguf.py (the copy inside llama-cpp-python's sdist, the same
sources the tests build llama.cpp from) on MODEL_DIR for each --outtype, and prints one JSON
object {outtype: summary}, each summary as scripts/llama/gguf_summary.py makes it (key/values;
tensor names, types, shapes and SHA-256 of their bytes). Needs torch and transformers (not
installed by the tests; run it when fixtures change, commit the output):

    python scripts/llama/converter_reference.py LLAMA_CPP_SRC MODEL_DIR f32 f16 bf16 q8_0 > out.json
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main():
    src, model_dir, *outtypes = sys.argv[1:]
    sys.path.insert(0, str(Path(src) / 'gguf-py'))
    sys.path.insert(0, str(HERE))
    from gguf_summary import summarise  # noqa: E402

    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for outtype in outtypes:
            out = os.path.join(tmp, f'{outtype}.gguf')
            subprocess.run(
                [sys.executable, os.path.join(src, 'convert_hf_to_gguf.py'), model_dir,
                 '--outtype', outtype, '--outfile', out],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            result[outtype.upper()] = summarise(out)
            os.remove(out)
    json.dump(result, sys.stdout, indent=1, ensure_ascii=False, sort_keys=True)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
