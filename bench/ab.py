#!/usr/bin/env python3
"""A/B on compiled programs: `baton run` of each program as side A and as side B, alternating
(A B A B ...) for --rounds rounds, so drift of the machine (clocks, neighbours) falls on both
sides alike. Reports each round's median wall ms and the median of the rounds per side, and their
ratio B / A. A side is a load option (--a / --b KEY=VALUE, given to `baton run --load-option`,
docs/options.md: e.g. cuda_pdl=1 against cuda_pdl=0), and side B may run another program of the
same model (--b-program NAME=PATH: e.g. one compiled with another build option, see
bench/compile_variant.py) with another baton binary (--b-baton PATH: an older commit's CLI, whose
programs it compiled).

  python3 bench/ab.py --baton BIN/baton --a cuda_pdl=1 --b cuda_pdl=0 \
      --program vit=/tmp/vit.baton --program bert=/tmp/bert.baton [--run-args "--device-io"] \
      [--rounds 5] [-n 300] [--warmup 30] [--json OUT.json]
  python3 bench/ab.py --baton BIN/baton --program mobilenet=/tmp/new.baton \
      --b-program mobilenet=/tmp/old.baton

Inputs are `baton run`'s random ones (--seed 0), the same on both sides.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys

_D = r"([\d.]+) (ms|us)"
LATENCY_RE = re.compile(r"latency over \d+ runs? \(after \d+ warm-up\): min " + _D + r"\s+median " + _D +
                        r"\s+p90 " + _D)


def setting(text):
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"'{text}': expected KEY=VALUE")
    return name, value


def latency_ms(text):
    """(median, p90) in ms from baton run's latency line, or None."""
    m = LATENCY_RE.search(text)
    if not m:
        return None
    ms = lambda value, unit: float(value) / 1000.0 if unit == "us" else float(value)
    return ms(m.group(3), m.group(4)), ms(m.group(5), m.group(6))


def run_once(args, baton, program, option):
    cmd = [baton, "run", program, "-q", "-n", str(args.n), "--warmup", str(args.warmup),
           "--profile-runs", "0"] + shlex.split(args.run_args)
    if option:
        cmd += ["--load-option", "=".join(option)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    ms = latency_ms(p.stdout + p.stderr) if p.returncode == 0 else None
    if ms is None:
        sys.exit(f"ab: {' '.join(cmd)} failed (exit {p.returncode}):\n"
                 f"{(p.stdout + p.stderr)[-1500:]}")
    return ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baton", required=True)
    ap.add_argument("--a", type=setting, help="KEY=VALUE: side A's load option")
    ap.add_argument("--b", type=setting, help="KEY=VALUE: side B's load option")
    ap.add_argument("--program", action="append", required=True, help="NAME=PATH of a compiled program")
    ap.add_argument("--b-program", action="append", default=[], help="NAME=PATH: side B runs this program")
    ap.add_argument("--b-baton", default="", help="side B runs this baton binary")
    ap.add_argument("--run-args", default="--device-io")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    programs = [setting(p) for p in args.program]
    b_programs = dict(setting(p) for p in args.b_program)
    unknown = [n for n in b_programs if n not in dict(programs)]
    if unknown:
        ap.error(f"--b-program for {unknown}, which no --program names")
    if not args.a and not args.b and not b_programs and not args.b_baton:
        ap.error("the two sides are the same: give --a/--b load options or --b-program")
    for name, path in programs + list(b_programs.items()):
        if not os.path.isfile(path):
            ap.error(f"program '{name}': no file {path}")
    a_label = "=".join(args.a) if args.a else "A"
    b_label = "=".join(args.b) if args.b else ("B: " + args.b_baton if args.b_baton else "B")
    if b_programs:
        b_label += " (B programs: " + ", ".join(f"{n}={p}" for n, p in b_programs.items()) + ")"
    results = []
    print(f"| program | {a_label}: median / p90 (ms), median of {args.rounds} rounds | {b_label} (ms) "
          f"| B / A (median) | B / A (p90) | round medians A | round medians B |")
    print("|---|---:|---:|---:|---:|---|---|")
    for name, path in programs:
        a_runs, b_runs = [], []
        for _ in range(args.rounds):
            a_runs.append(run_once(args, args.baton, path, args.a))
            b_runs.append(run_once(args, args.b_baton or args.baton, b_programs.get(name, path), args.b))
        ma = statistics.median(r[0] for r in a_runs)
        mb = statistics.median(r[0] for r in b_runs)
        pa = statistics.median(r[1] for r in a_runs)
        pb = statistics.median(r[1] for r in b_runs)
        results.append({"program": name, "path": path, "a": a_label, "b": b_label,
                        "a_ms": [r[0] for r in a_runs], "b_ms": [r[0] for r in b_runs],
                        "a_p90_ms": [r[1] for r in a_runs], "b_p90_ms": [r[1] for r in b_runs],
                        "a_median_ms": ma, "b_median_ms": mb, "a_p90_median_ms": pa,
                        "b_p90_median_ms": pb, "ratio_b_over_a": mb / ma})
        print(f"| {name} | {ma:.4f} / {pa:.4f} | {mb:.4f} / {pb:.4f} | {mb / ma:.3f} | {pb / pa:.3f} | "
              f"{', '.join(f'{r[0]:.4f}' for r in a_runs)} | {', '.join(f'{r[0]:.4f}' for r in b_runs)} |",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"iterations": args.n, "warmup": args.warmup, "rounds": args.rounds,
                       "run_args": args.run_args, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
