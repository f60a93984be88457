"""A probe for issue 39 (not part of the build or the tests): exports a decode step of a small
GPT-2 or LLaMA-style model with a static KV cache (models.py's wrappers over the Hugging Face
weights) to ONNX at opset 18, prints its op counts and how the cache update is expressed, and
checks it against torch with onnxruntime for a prefill call (8 tokens at position 0) and a decode
call (1 token at 8), saving the inputs and onnxruntime's outputs as .npy under OUT/npy.

  DECODE_OUT=/tmp/kv python3 export.py FAMILY(gpt2|llama) \
      VARIANT(index_copy|index_put_none|index_put_full|scatter|hf_static) EXPORTER(dynamo|ts) [static]

Findings (2026-12-03; torch 2.15, transformers 5.24, onnxruntime 1.32): every variant exports
with both exporters and matches torch within 2.2e-6. With dynamo, `index_put_full`
(torch.index_put(cache, (b, h, pos), new)) is the only form that is a plain
present = ScatterND(past, [B, H, T, 3] tuples, new) with `past` read by nothing else but Shape,
so present may alias past; index_copy_ (and transformers' StaticCache) becomes a
Transpose-ScatterND-Transpose sandwich, torch.scatter a ScatterElements. Baton compiles the
dynamo exports with --dim batch=1..8 --dim new_tokens=1..64 and runs one program for prefill and
decode on the CPU since d7c45a7 (ScatterND at dynamic sizes) and a3286f9 (ScatterElements),
matching onnxruntime within 2.0e-6. TorchScript's index_copy export needs an Expand whose shape
Baton does not follow at dynamic sizes. Since c7c92f2 `baton compile --state auto` keeps the
caches inside the program, updated in place (docs/state.md; tests/python/test_state.py runs three
of these exports), on the GPU too since c9be294 (the engine's in-place ScatterND); full-size
models go through bench/generate_bench.py (docs/generate.md). DECODE_MAX_LEN sets the cache
length (default 64).
"""
import os
import sys, collections, warnings, traceback, numpy as np, torch, onnx, onnxruntime as ort
warnings.filterwarnings("ignore")
from models import *

OUT = os.environ.get("DECODE_OUT", "/tmp/kv")
os.makedirs(OUT, exist_ok=True)

fam, var, exp = sys.argv[1:4]
static = len(sys.argv) > 4 and sys.argv[4] == "static"
hf = make_gpt2() if fam == "gpt2" else make_llama()
w = HfStaticStep(hf) if var == "hf_static" else (Gpt2Step if fam == "gpt2" else LlamaStep)(hf, var)
w = Explicit2(w).eval()
_, nl = kv_shape(hf, 1)
ins, outs = io_names(nl)
path = f"{OUT}/{fam}_{var}_{exp}{'_static' if static else ''}.onnx"
ex = make_inputs(hf, 2, 3, 5, seed=0)   # example: batch 2, 5 new tokens at position 3

if exp == "dynamo":
    batch = torch.export.Dim("batch", min=1, max=8)
    seq = torch.export.Dim("new_tokens", min=1, max=MAX_LEN)
    ds = None if static else ([{0: batch, 1: seq}, {0: seq}, {0: batch}] + [{0: batch}] * (2 * nl))
    prog = torch.onnx.export(w, ex, path, dynamo=True, opset_version=18, input_names=ins, output_names=outs,
                             dynamic_shapes=ds and tuple(ds), optimize=True)
else:
    da = None if static else {"input_ids": {0: "batch", 1: "new_tokens"}, "cache_position": {0: "new_tokens"},
                              "attention_mask": {0: "batch"}, **{n: {0: "batch"} for n in ins[3:] + outs[1:]},
                              "logits": {0: "batch", 1: "new_tokens"}}
    torch.onnx.export(w, ex, path, dynamo=False, opset_version=18, input_names=ins, output_names=outs,
                      dynamic_axes=da)

m = onnx.load(path)
print("saved", path)
print("inputs :", [(i.name, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]) for i in m.graph.input])
print("outputs:", [(o.name, [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim]) for o in m.graph.output])
print("functions:", [f.name for f in m.functions])
cnt = collections.Counter(n.op_type for n in m.graph.node)
print("ops (%d nodes):" % len(m.graph.node), dict(sorted(cnt.items())))

prod = {o: n for n in m.graph.node for o in n.output}
cons = collections.defaultdict(list)
for n in m.graph.node:
    for i in n.input: cons[i].append(n)
def attrs(n):
    return {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
def back(v, stop=("ScatterND", "ScatterElements")):
    chain = []
    while v in prod:
        n = prod[v]; chain.append(f"{n.op_type}{attrs(n) or ''}")
        if n.op_type in stop or not n.input: return chain, n
        v = n.input[0]
    chain.append(f"<{v}>"); return chain, None
for o in outs[1:3]:
    chain, sc = back(o)
    print(f"{o} <- " + " <- ".join(chain))
    if sc is not None:
        dchain, _ = back(sc.input[0], stop=())
        ichain, _ = back(sc.input[1], stop=())
        uchain, _ = back(sc.input[2], stop=())
        print(f"   data    <- " + " <- ".join(dchain))
        print(f"   indices <- " + " <- ".join(ichain[:8]))
        print(f"   updates <- " + " <- ".join(uchain[:6]))
        print(f"   consumers of scatter data value: {[c.op_type for c in cons[sc.input[0]]]}; of scatter output: {[c.op_type for c in cons[sc.output[0]]]}")
    past = "past" + o[len("present"):]
    print(f"   consumers of {past}: {[c.op_type for c in cons[past]]}; consumers of {o} in graph: {[c.op_type for c in cons[o]]}")
sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
sessin = [i.name for i in sess.get_inputs()]
cases = [("prefill", 2, 0, 8), ("decode", 2, 8, 1)] if not static else [("example", 2, 3, 5)]
for name, B, start, T in cases:
    x = make_inputs(hf, B, start, T, seed=42 + start)
    with torch.no_grad():
        ref = [t.numpy() for t in w(*[t.clone() for t in x])]
    feed = {n: t.numpy() for n, t in zip(ins, x) if n in sessin}
    try:
        got = sess.run(None, feed)
        d = [float(np.abs(a - b).max()) for a, b in zip(ref, got)]
        print(f"ORT vs torch {name} (B={B}, start={start}, T={T}): logits {d[0]:.2e}, caches max {max(d[1:]):.2e}")
        np.savez(f"{OUT}/io_{fam}_{var}_{exp}_{name}.npz", **feed, **{f"ort_{n}": g for n, g in zip(outs, got)})
        os_ = __import__("os"); dd = f"{OUT}/npy/{fam}_{var}_{exp}_{name}"; os_.makedirs(dd, exist_ok=True)
        for n, a in feed.items(): np.save(f"{dd}/{n}.npy", a)
        for n, g in zip(outs, got): np.save(f"{dd}/ort_{n}.npy", g)
    except Exception as e:
        print(f"ORT {name} FAILED: {str(e)[:400]}")
