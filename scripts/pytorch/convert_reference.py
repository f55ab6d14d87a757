"""Reference outputs of Hugging Face's convert.py for __test__/pytorch.spec.ts.

What `safetensors/bindings/python/convert.py` (safetensors 0.8.0) does to a checkpoint, step for
step, with torch and safetensors themselves: `convert_file` (torch.load(weights_only=True), unwrap
"state_dict", `_remove_duplicate_names`, `{"format": "pt", dropped: kept}` metadata, contiguous
tensors, `save_file`, reload and `torch.equal` — bit for bit here, so NaN equals itself) and `convert_multi`'s index rewrite (shards renamed
`pytorch_model…` → `model…`, `.bin` → `.safetensors`). Only the hub download is left out.

Run with torch installed (the fixtures are committed; tests do not need torch):
    python scripts/pytorch/convert_reference.py ../shared/fixtures/pytorch __test__/fixtures/pytorch-convert
"""

import json
import os
import sys
from collections import defaultdict

import torch
from safetensors.torch import _find_shared_tensors, _is_complete, load_file, save_file


def _remove_duplicate_names(state_dict, *, preferred_names=None, discard_names=None):
    # safetensors.torch._remove_duplicate_names, as convert.py imports it.
    from safetensors.torch import _remove_duplicate_names as remove

    return remove(state_dict, preferred_names=preferred_names, discard_names=discard_names)


def rename(pt_filename):
    filename, ext = os.path.splitext(pt_filename)
    local = f"{filename}.safetensors"
    local = local.replace("pytorch_model", "model")
    return local


def convert_file(pt_filename, sf_filename, discard_names=()):
    loaded = torch.load(pt_filename, map_location="cpu", weights_only=True)
    if "state_dict" in loaded:
        loaded = loaded["state_dict"]
    to_removes = _remove_duplicate_names(loaded, discard_names=list(discard_names))

    metadata = {"format": "pt"}
    for kept_name, to_remove_group in to_removes.items():
        for to_remove in to_remove_group:
            if to_remove not in metadata:
                metadata[to_remove] = kept_name
            del loaded[to_remove]
    # Force tensors to be contiguous
    loaded = {k: v.contiguous() for k, v in loaded.items()}

    dirname = os.path.dirname(sf_filename)
    os.makedirs(dirname, exist_ok=True)
    save_file(loaded, sf_filename, metadata=metadata)
    reloaded = load_file(sf_filename)
    for k in loaded:
        pt_tensor = loaded[k]
        sf_tensor = reloaded[k]
        # convert.py uses torch.equal, which says NaN != NaN: compared bit for bit here.
        if not torch.equal(pt_tensor.flatten().view(torch.uint8), sf_tensor.flatten().view(torch.uint8)):
            raise RuntimeError(f"The output tensors do not match for key {k}")
    return {name: kept for name, kept in metadata.items() if name != "format"}


def convert_multi(folder, out):
    with open(os.path.join(folder, "pytorch_model.bin.index.json")) as f:
        data = json.load(f)
    dropped = {}
    for filename in sorted(set(data["weight_map"].values())):
        dropped.update(convert_file(os.path.join(folder, filename), os.path.join(out, rename(filename))))
    newdata = {k: v for k, v in data.items()}
    newmap = {k: rename(v) for k, v in data["weight_map"].items()}
    newdata["weight_map"] = newmap
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump(newdata, f, indent=4)
    return dropped


def main(src, out):
    os.makedirs(out, exist_ok=True)
    report = {"torch": torch.__version__, "safetensors": __import__("safetensors").__version__, "files": {}}
    singles = [
        "zip/tied.pt",
        "zip/module_state_dict.pt",
        "zip/nested_state_dict.pt",
        "zip/all_dtypes.pt",
        "zip/noncontiguous.pt",
        "zip/storage_offset.pt",
        "zip/big_endian.pt",
        "legacy/legacy.pt",
    ]
    for name in singles:
        target = os.path.join(out, name.replace("/", "__") + ".safetensors")
        try:
            report["files"][name] = {"output": os.path.basename(target), "dropped": convert_file(os.path.join(src, name), target)}
        except RuntimeError as e:  # views that cover no storage whole: convert.py refuses
            report["files"][name] = {"refused": str(e).split(".")[0]}
    target = os.path.join(out, "hf_bin")
    report["files"]["hf_bin"] = {
        "output": "hf_bin",
        "dropped": convert_file(os.path.join(src, "hf_bin", "pytorch_model.bin"), os.path.join(target, "model.safetensors")),
    }
    report["files"]["hf_bin_sharded"] = {
        "output": "hf_bin_sharded",
        "dropped": convert_multi(os.path.join(src, "hf_bin_sharded"), os.path.join(out, "hf_bin_sharded")),
    }
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
