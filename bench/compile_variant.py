#!/usr/bin/env python3
"""Compiles a variant of the Baton programs of a gpu_bench.py run: each model's own compile
command (from gpu_bench.json) again, with more build options (`--cuda-option KEY=VALUE`,
repeatable; docs/options.md) and/or another baton binary (--baton: an older commit's, for an A/B across
commits), the program written next to the original as NAME.SUFFIX.baton. Prints the bench/ab.py
arguments that compare them (--program NAME=ORIGINAL --b-program NAME=VARIANT), one model per
line.

  python3 bench/compile_variant.py --bench-json LOG/bench/gpu_bench.json \\
      --cuda-option conv_rows=cudnn --suffix rows-cudnn --models mobilenet,resnet
  python3 bench/compile_variant.py --bench-json LOG/bench/gpu_bench.json \\
      --baton OLD/bin/baton --suffix old
"""
import argparse
import json
import shlex
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-json", required=True)
    ap.add_argument("--cuda-option", action="append", default=[],
                    help="KEY=VALUE: a build option of the variant (repeatable)")
    ap.add_argument("--baton", default="", help="compile the variant with this baton binary")
    ap.add_argument("--suffix", required=True)
    ap.add_argument("--models", default="", help="comma-separated case names (default: every row)")
    args = ap.parse_args()
    if not args.cuda_option and not args.baton:
        ap.error("the variant is the original: give --cuda-option and/or --baton")
    for option in args.cuda_option:
        name, sep, _ = option.partition("=")
        if not sep or not name:
            ap.error(f"--cuda-option '{option}': expected KEY=VALUE")
    rows = json.load(open(args.bench_json))["rows"]
    wanted = [m for m in args.models.split(",") if m]
    missing = [m for m in wanted if m not in {r["name"] for r in rows}]
    if missing:
        ap.error(f"no row {missing} in {args.bench_json}")
    status = 0
    for row in rows:
        if wanted and row["name"] not in wanted:
            continue
        cmd = shlex.split((row["runners"].get("baton") or {}).get("compile_cmd") or "")
        if "-o" not in cmd:
            print(f"compile_variant: {row['name']}: no Baton compile command in the run", file=sys.stderr)
            status = 1
            continue
        i = cmd.index("-o") + 1
        original = cmd[i]
        cmd[i] = original[:-len(".baton")] + f".{args.suffix}.baton" if original.endswith(".baton") else original + "." + args.suffix
        for option in args.cuda_option:
            cmd += ["--cuda-option", option]
        if args.baton:
            cmd[0] = args.baton
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"compile_variant: {row['name']}: {' '.join(cmd)} failed:\n{(p.stdout + p.stderr)[-1000:]}", file=sys.stderr)
            status = 1
            continue
        print(f"--program {row['name']}={original} --b-program {row['name']}={cmd[i]}")
    return status


if __name__ == "__main__":
    sys.exit(main())
