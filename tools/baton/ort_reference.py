# The reference side of `baton compare`: runs an ONNX model on onnxruntime's CPU provider.
#
# The baton binary carries this file (embedded at build time) and runs it with the interpreter
# BATON_PYTHON names, else the one of the build's virtual environment, else python3. It is not a
# module of the baton package: the CLI needs no Python of its own, only an interpreter that has
# numpy, onnx and onnxruntime.
#
#   python3 ort_reference.py MODEL.onnx DIR
#
# DIR/request.json: {"inputs": [{"name", "file"}], "outputs": [name, ...], "threads": N}
#   inputs are .npy files; outputs are the values wanted: the model's outputs or any value a node
#   computes (those are added to the graph's outputs, as Polygraphy's mark-all does).
# Writes DIR/reference.json: {"onnxruntime": version, "graph_inputs", "graph_outputs" (the
#   model's), "outputs": [{"name", "file", "node", "op", "node_index" (the node's position in the
#   model's topologically sorted nodes; -1 for a graph input)}], "missing": [names no node of the
#   model computes]}, and one .npy per output.
# Exit status 3: a module is missing (the message says which); 4: the request's inputs are not the
# model's, or its outputs do not include all of the model's (reference.json then has only
# "graph_inputs" and "graph_outputs"); 1: onnxruntime failed.
import json
import os
import sys
import tempfile


def write_file(path, write):
    """Writes PATH as Baton's own writer does: `write(file)` fills a fresh file of a unique name
    beside PATH (created exclusively, so a link planted there is never followed), which then
    replaces PATH (a link at PATH itself is replaced, not written through)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_json(path, value):
    write_file(path, lambda f: f.write(json.dumps(value).encode()))


def main():
    model_path, work = sys.argv[1], sys.argv[2]
    try:
        import numpy as np
        import onnx
        import onnxruntime as ort
    except ImportError as e:
        print(f"{sys.executable} cannot import {e.name}: {e}", file=sys.stderr)
        return 3
    with open(os.path.join(work, "request.json")) as f:
        request = json.load(f)

    model = onnx.load(model_path, load_external_data=False)
    producers = {}
    for index, node in enumerate(model.graph.node):
        for out in node.output:
            if out:
                producers[out] = (node.name, node.op_type, index)
    graph_outputs = [o.name for o in model.graph.output]
    initializers = {t.name for t in model.graph.initializer}
    graph_inputs = [i.name for i in model.graph.input if i.name not in initializers]
    if (sorted(i["name"] for i in request["inputs"]) != sorted(graph_inputs)
            or not set(graph_outputs) <= set(request["outputs"])):
        write_json(os.path.join(work, "reference.json"),
                   {"graph_inputs": graph_inputs, "graph_outputs": graph_outputs})
        return 4
    known = set(producers) | set(graph_outputs) | set(graph_inputs)
    wanted = [n for n in request["outputs"] if n in known]
    missing = [n for n in request["outputs"] if n not in known]
    extra = [n for n in wanted if n not in graph_outputs]

    source = model_path
    if extra:
        # Intermediate values become graph outputs; their types come from ONNX's shape inference
        # where it knows them (onnxruntime infers the rest).
        model = onnx.load(model_path)  # with its external data, to serialize it whole
        try:
            inferred = onnx.shape_inference.infer_shapes(model).graph.value_info
        except Exception:  # inference is a help here, not a requirement
            inferred = []
        types = {v.name: v for v in inferred}
        for name in extra:
            info = onnx.ValueInfoProto()
            if name in types:
                info.CopyFrom(types[name])
            else:
                info.name = name
            model.graph.output.append(info)
        try:
            source = model.SerializeToString()
        except ValueError:  # past protobuf's 2 GiB: the weights go to a file of their own
            source = os.path.join(work, "reference_model.onnx")
            for name in ("reference_model.onnx", "reference_model.weights"):
                # onnx.save opens its files by name: a link planted there must not be followed.
                if os.path.lexists(os.path.join(work, name)):
                    os.unlink(os.path.join(work, name))
            onnx.save(model, source, save_as_external_data=True, all_tensors_to_one_file=True,
                      location="reference_model.weights")

    options = ort.SessionOptions()
    # The plainest reference: onnxruntime's own fusions (GELU, attention, LayerNorm) off.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if request.get("threads"):
        options.intra_op_num_threads = int(request["threads"])
    try:
        session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        feeds = {i["name"]: np.load(i["file"]) for i in request["inputs"]}
        results = session.run(wanted, feeds)
    except Exception as e:
        print(f"onnxruntime {ort.__version__} failed on {model_path}: {e}", file=sys.stderr)
        return 1
    outputs = []
    for i, (name, value) in enumerate(zip(wanted, results)):
        path = os.path.join(work, f"reference_{i}.npy")
        # np.asarray keeps a 0-d result 0-d (np.ascontiguousarray makes every scalar shape (1,),
        # and each scalar output then compared as a shape mismatch).
        contiguous = np.asarray(value, order="C")
        write_file(path, lambda f: np.save(f, contiguous))
        node, op, index = producers.get(name, ("", "graph input", -1))
        outputs.append({"name": name, "file": path, "node": node, "op": op, "node_index": index})
    write_json(os.path.join(work, "reference.json"),
               {"onnxruntime": ort.__version__, "graph_inputs": graph_inputs,
                "graph_outputs": graph_outputs, "outputs": outputs, "missing": missing})
    return 0


if __name__ == "__main__":
    sys.exit(main())
