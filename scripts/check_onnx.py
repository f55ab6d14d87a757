#!/usr/bin/env python3
"""Check an ONNX model with the official tools and run it, printing JSON.

  check_onnx.py MODEL.onnx [--input JSON | --input @FILE]

1. onnx.checker.check_model(model, full_check=True) (includes strict shape inference);
2. onnxruntime.InferenceSession on the rows given (a JSON list of lists of numbers, fed as
   float32 to the first input).

Output: {"checker": "ok", "ir_version", "opsets": {domain: version}, "producer",
         "inputs": [{"name", "type", "shape"}], "outputs": [{"name", "type", "shape"}],
         "results": {output name: nested lists} (only with --input)}
On a checker or runtime failure: {"checker" or "runtime": "error: ..."}, exit status 1.
"""

import argparse
import json
import sys

import numpy as np
import onnx
import onnxruntime


def describe(value_info):
    t = value_info.type.tensor_type
    shape = [d.dim_param if d.HasField("dim_param") else d.dim_value for d in t.shape.dim]
    return {"name": value_info.name, "type": onnx.TensorProto.DataType.Name(t.elem_type),
            "shape": shape}


def plain(a):
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return a.astype(np.float64).tolist()
    return a.tolist()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--input", help="rows as JSON, or @FILE holding them")
    args = p.parse_args()

    model = onnx.load(args.model)
    out = {}
    try:
        onnx.checker.check_model(model, full_check=True)
        out["checker"] = "ok"
    except Exception as e:  # the checker raises several exception types
        out["checker"] = f"error: {e}"
        json.dump(out, sys.stdout)
        print()
        return 1
    out["ir_version"] = model.ir_version
    out["opsets"] = {o.domain: o.version for o in model.opset_import}
    out["producer"] = model.producer_name
    out["inputs"] = [describe(v) for v in model.graph.input]
    out["outputs"] = [describe(v) for v in model.graph.output]

    if args.input is not None:
        text = args.input
        if text.startswith("@"):
            with open(text[1:]) as f:
                text = f.read()
        rows = np.asarray(json.loads(text), dtype=np.float32)
        try:
            session = onnxruntime.InferenceSession(args.model, providers=["CPUExecutionProvider"])
            feed = {session.get_inputs()[0].name: rows}
            names = [o.name for o in session.get_outputs()]
            values = session.run(names, feed)
            out["results"] = {n: plain(v) for n, v in zip(names, values)}
        except Exception as e:
            out["runtime"] = f"error: {e}"
            json.dump(out, sys.stdout)
            print()
            return 1
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
