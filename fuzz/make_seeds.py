#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora from Baton's test models, with the default build's CLI.

Usage: make_seeds.py --baton BUILD/tools/baton/baton --out DIR [--e2e-models DIR]
                     [--node-dir DIR] [--jobs N]

DIR/<target>/ gets one file per seed, named after where it came from:
  fuzz_onnx         tests/e2e/models/*.onnx, the generated e2e models (tests/e2e/make_models.py,
                    generated here when --e2e-models does not exist yet), and ONNX's node tests
                    (libonnx-testdata) of the ops Baton supports plus a sample of the others.
                    Symbolic input dimensions are fixed (the --shape the e2e manifest gives, else
                    2): the fuzz target compiles without --shape.
  fuzz_program      those models compiled for the CPU, and the e2e models for cuda:0 (--arch
                    sm_90, fp32 and fp16) so that engine blobs are inside; and three dynamic
                    programs (--dim) of committed torch exports.
  fuzz_engine_blob  the engine blobs cut out of the cuda:0 programs (`baton inspect --json` gives
                    each delegate's segment).
  fuzz_onnx_cuda    the e2e models that compile for cuda:0, and a sample of the node-test models
                    that compile for the CPU.
  fuzz_cli          command lines over fuzz_cli's fixtures (CLI_SEEDS).
  fuzz_npy          the .npy files of tests/e2e/models and the generated models (the small ones),
                    and arrays of every dtype in .npy versions 1.0, 2.0 and 3.0, including the
                    ones read_npy refuses (Fortran order, big-endian, unsupported dtypes).
Nothing here is committed: the seeds follow the format version of the build that wrote them.
"""
import argparse
import concurrent.futures
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = ("fuzz_program", "fuzz_engine_blob", "fuzz_onnx", "fuzz_npy", "fuzz_onnx_cuda",
           "fuzz_cli")
# Node-test models kept as fuzz_onnx_cuda seeds besides the e2e models (each input there runs
# NVRTC, so its corpus stays small).
CUDA_NODE_SAMPLE = 40
# fuzz_cli: command lines, one argument per line, over the target's fixtures (fuzz/fuzz_cli.cpp).
CLI_SEEDS = [
    "compile\nm.onnx\n-o\nq.baton",
    "compile\nm.onnx\n-o\nq.baton\n--device\ncuda:0\n--precision\nfp16\n--shape\nx=2x4",
    "compile\nm.onnx\n-o\nq.baton\n--max-fold-bytes\n1KiB\n--max-arena-bytes\n64\n-v",
    "compile\nm.onnx\n--shapes=x:2x4\n--saveEngine\nq.baton",
    "run\np.baton\n-n\n2\n--warmup\n1\n--json",
    "run\np.baton\n-i\nx.npy\n-o\nout\n--trace\nt.json\n--export-times\ne.json",
    "run\np.baton\n--input\nx=x.npy\n--export-profile\np.json\n--profile-runs\n2\n--threads\n2",
    "run\np.baton\n--seed\n-1\n--no-checksums\n-q",
    "inspect\np.baton\n--json",
    "inspect\np.baton\n--load\n--threads\n2",
    "compare\nm.onnx\np.baton\n--atol\n1e-3\n--save-dir\nsaved\n--json",
    "compare\nm.onnx\n--per-node\n-i\nx.npy",
    "--version",
    "run\n--help",
]
# Seeds larger than this are left out: libFuzzer mutates small inputs far faster.
MAX_SEED_BYTES = 256 * 1024
# Node tests of unsupported ops kept as seeds (they reach the importer's error paths).
UNSUPPORTED_SAMPLE = 40


class Seeds:
    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.count = {t: 0 for t in TARGETS}
        self.seen = set()
        for t in TARGETS:
            os.makedirs(os.path.join(out_dir, t), exist_ok=True)

    def add(self, target, name, data):
        if len(data) > MAX_SEED_BYTES:
            return
        digest = hashlib.sha1(data).hexdigest()
        if (target, digest) in self.seen:
            return
        self.seen.add((target, digest))
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        with open(os.path.join(self.out_dir, target, f"{safe}-{digest[:10]}"), "wb") as f:
            f.write(data)
        self.count[target] += 1


def baton(cli, *args):
    return subprocess.run([cli, *args], capture_output=True, text=True)


def supported_ops(cli, tmp):
    """The CPU op list the compiler prints when it refuses an op."""
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["x2"])], "probe", [x],
                              [helper.make_tensor_value_info("x2", TensorProto.FLOAT, [1])])
    path = os.path.join(tmp, "probe.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    r = baton(cli, "compile", path, "-o", os.path.join(tmp, "probe.baton"))
    m = re.search(r"Supported ops:\s*(.*)", r.stdout + r.stderr)
    if not m:
        return None
    return set(re.findall(r"[A-Za-z][A-Za-z0-9]*", m.group(1)))


def fix_shapes(model, shapes):
    """Replaces symbolic input dimensions by the manifest's shape, or by 2."""
    for inp in model.graph.input:
        if not inp.type.HasField("tensor_type"):
            continue
        given = shapes.get(inp.name)
        if isinstance(given, str):
            given = [int(d) for d in given.split("x")]
        for d, dim in enumerate(inp.type.tensor_type.shape.dim):
            if not dim.HasField("dim_value"):
                dim.dim_value = given[d] if given and d < len(given) else 2
    return model


def manifest_shapes(folder):
    path = os.path.join(folder, "manifest.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        cases = json.load(f).get("cases", [])
    return {c["model"]: c.get("shapes", {}) for c in cases}


def onnx_sources(args):
    """(name, path, shapes) of every ONNX model to seed from; e2e ones first."""
    sources = []
    for folder, tag in ((os.path.join(REPO, "tests/e2e/models"), "torch"),
                        (args.e2e_models, "e2e")):
        shapes = manifest_shapes(folder)
        for f in sorted(os.listdir(folder)):
            if f.endswith(".onnx"):
                sources.append((f"{tag}_{f[:-5]}", os.path.join(folder, f), shapes.get(f, {})))
    node = []
    if os.path.isdir(args.node_dir):
        for d in sorted(os.listdir(args.node_dir)):
            path = os.path.join(args.node_dir, d, "model.onnx")
            if os.path.exists(path):
                node.append((f"node_{d}", path, {}))
    return sources, node


def compile_one(cli, tmp, name, model_bytes, extra):
    src = os.path.join(tmp, f"{name}.onnx")
    with open(src, "wb") as f:
        f.write(model_bytes)
    out = os.path.join(tmp, f"{name}{'_'.join([''] + [a.strip('-') for a in extra])}.baton")
    r = baton(cli, "compile", src, "-o", out, *extra)
    return out if r.returncode == 0 else None


def engine_blobs(cli, program_path):
    """The delegates' blobs; inspect's segment offsets are from the start of the file."""
    r = baton(cli, "inspect", program_path, "--json")
    if r.returncode != 0:
        return []
    desc = json.loads(r.stdout)
    with open(program_path, "rb") as f:
        data = f.read()
    segments = {s["index"]: s for s in desc.get("segments", [])}
    blobs = []
    for method in desc.get("methods", []):
        for d in method.get("delegates", []):
            seg = segments.get(d.get("blob_segment"))
            if seg is not None:
                blobs.append(data[seg["offset"]:seg["offset"] + seg["size"]])
    return blobs


def npy_bytes(array, version=None, fortran=False):
    buf = io.BytesIO()
    if fortran:
        array = np.asfortranarray(array)
    np.lib.format.write_array(buf, array, version=version, allow_pickle=False)
    return buf.getvalue()


def npy_seeds(seeds, folders):
    for folder in folders:
        for f in sorted(os.listdir(folder)):
            path = os.path.join(folder, f)
            if f.endswith(".npy") and os.path.getsize(path) <= 16 * 1024:
                with open(path, "rb") as fh:
                    seeds.add("fuzz_npy", f[:-4], fh.read())
    rng = np.random.default_rng(9)
    dtypes = ["<f4", "<f2", "<f8", "<i8", "<i4", "<i2", "|i1", "|u1", "|b1"]
    refused = [">f4", "<u2", "<u4", "<u8", "<c8", "<U3", "|S2", "<M8[s]"]
    for dt in dtypes + refused:
        for shape in [(), (0,), (3,), (2, 3), (1, 2, 1, 2), (4, 0, 2)]:
            a = (rng.standard_normal(shape) * 10).astype(dt) if shape else np.array(1.5).astype(dt)
            tag = dt.replace(">", "be_").strip("<|").replace("[", "_").replace("]", "")
            name = f"gen_{tag}_{'x'.join(map(str, shape)) or 'scalar'}"
            seeds.add("fuzz_npy", name, npy_bytes(a))
        for version in [(2, 0), (3, 0)]:
            seeds.add("fuzz_npy", f"gen_{dt.replace('>', 'be_').strip('<|')}_v{version[0]}",
                      npy_bytes(rng.standard_normal((2, 2)).astype(dt), version=version))
    seeds.add("fuzz_npy", "gen_fortran", npy_bytes(rng.standard_normal((3, 2)).astype("<f4"),
                                                   fortran=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baton", required=True, help="the default build's baton CLI")
    ap.add_argument("--out", required=True)
    ap.add_argument("--e2e-models", default=os.path.join(REPO, "build/e2e_models"))
    ap.add_argument("--node-dir", default="/usr/share/libonnx-testdata/data/node")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()

    if not os.path.exists(os.path.join(args.e2e_models, "manifest.json")):
        print(f"make_seeds: generating the e2e models in {args.e2e_models}", file=sys.stderr)
        subprocess.run([sys.executable, os.path.join(REPO, "tests/e2e/make_models.py"),
                        args.e2e_models], check=True, stdout=subprocess.DEVNULL)
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    seeds = Seeds(args.out)
    with tempfile.TemporaryDirectory(prefix="baton_seeds_") as tmp:
        ops = supported_ops(args.baton, tmp)
        e2e, node = onnx_sources(args)
        models = []  # (name, static bytes, is_e2e)
        unsupported = []
        for name, path, shapes in e2e + node:
            try:
                model = onnx.load(path)
            except Exception as e:  # a test model onnx cannot read is not a seed
                print(f"make_seeds: skipping {path}: {e}", file=sys.stderr)
                continue
            data = fix_shapes(model, shapes).SerializeToString()
            model_ops = {n.op_type for n in model.graph.node}
            if ops is not None and not model_ops <= ops and name.startswith("node_"):
                unsupported.append((name, data))
            else:
                models.append((name, data, not name.startswith("node_")))
        step = max(1, len(unsupported) // UNSUPPORTED_SAMPLE)
        for name, data in unsupported[::step][:UNSUPPORTED_SAMPLE]:
            seeds.add("fuzz_onnx", name, data)

        jobs = [(name, data, []) for name, data, _ in models]
        # Engines inside: the e2e models for cuda:0 (no GPU needed with --arch), fp32 and fp16.
        gpu = ["--device", "cuda:0", "--arch", "sm_90"]
        jobs += [(name, data, gpu) for name, data, e2e_model in models if e2e_model]
        jobs += [(name, data, gpu + ["--precision", "fp16"])
                 for name, data, e2e_model in models if e2e_model and "fp16" not in name][:4]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda j: (j, compile_one(args.baton, tmp, *j)), jobs))
        cuda_programs = 0
        cpu_node_models = 0
        for (name, data, extra), program in results:
            if not extra and program is not None:
                seeds.add("fuzz_onnx", name, data)
                if name.startswith("node_") and cpu_node_models < CUDA_NODE_SAMPLE:
                    cpu_node_models += 1
                    seeds.add("fuzz_onnx_cuda", name, data)
            if extra == gpu and program is not None:
                seeds.add("fuzz_onnx_cuda", name, data)
            if program is None:
                continue
            with open(program, "rb") as f:
                seeds.add("fuzz_program", os.path.basename(program)[:-6], f.read())
            if extra:
                cuda_programs += 1
                for i, blob in enumerate(engine_blobs(args.baton, program)):
                    seeds.add("fuzz_engine_blob", f"{os.path.basename(program)[:-6]}_{i}", blob)
        # Dynamic programs (format version 4: symbols, size expressions, tensor dims), from the
        # committed exports whose inputs keep their dim_params.
        # (Small ones: a seed is at most MAX_SEED_BYTES.)
        for model, dims in (("torchscript17_mlp_relu", ["--dim", "batch=1..8"]),
                            ("real/torchscript17_bert", ["--dim", "batch=1..4", "--dim", "sequence=1..16"]),
                            ("real/dynamo18dyn_vit", ["--dim", "s77=1..4"])):
            # For the CPU, and for cuda:0: dynamic engines (engine format 4, bucketed blobs).
            for target, extra in (("", []), ("_cuda", gpu)):
                name = os.path.basename(model) + target
                out = os.path.join(tmp, f"dynamic_{name}.baton")
                r = baton(args.baton, "compile",
                          os.path.join(REPO, "tests/e2e/models", model + ".onnx"), "-o", out,
                          *dims, *extra)
                if r.returncode != 0:
                    print(f"make_seeds: the dynamic {name} did not compile: "
                          f"{r.stderr.strip()[-300:]}", file=sys.stderr)
                    continue
                with open(out, "rb") as f:
                    seeds.add("fuzz_program", f"dynamic_{name}", f.read())
                if extra:
                    for i, blob in enumerate(engine_blobs(args.baton, out)):
                        seeds.add("fuzz_engine_blob", f"dynamic_{name}_{i}", blob)
        if cuda_programs == 0:
            print("make_seeds: no cuda:0 program compiled (a build without the CUDA backend?): "
                  "fuzz_engine_blob starts from an empty corpus", file=sys.stderr)
        npy_seeds(seeds, [os.path.join(REPO, "tests/e2e/models"), args.e2e_models])
        for i, line in enumerate(CLI_SEEDS):
            seeds.add("fuzz_cli", f"cli_{i}", line.encode())

    print("make_seeds: " + ", ".join(f"{t} {n}" for t, n in seeds.count.items()) +
          f" seeds in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
