#!/usr/bin/env python3
"""Full-size ResNet-50 and BERT-base on the GPU: a green context's latency while the other SMs are
saturated, and compute-sanitizer memcheck / racecheck on `baton run` of the compiled programs.

On the GPU host, from the repository root, with a bundle (scripts/run_gpu_models.sh --checks-only,
--green-only or --sanitize-only does this):
  python3 bench/gpu_checks.py --baton BUNDLE/bin/baton --out LOG/checks [--work /tmp/baton_gpu/checks]
      [--checks green,memcheck,racecheck] [--models resnet,bert] [--io device,host] [--sms N]
      [--iterations 500] [--warmup 50] [--models-from DIR] [--sanitizer-timeout 300] [--sanitizer-args "OPTS"]
      [--budget-s 540] [--compute-sanitizer PATH] [--commit SHA]
Without a GPU (exports and compiles for sm_90 only; prints the commands it would run):
  python3 bench/gpu_checks.py --baton build/tools/baton/baton --out /tmp/gc --compile-only --arch sm_90 [--small]

For each model (--models: families of tests/e2e/export_real_models.py, default resnet,bert):
- export as bench/gpu_bench.py does (the builders' random weights and fixed seed, TorchScript
  exporter at opset 17, batch 1, BERT at sequence 128 with its attention mask; --models-from DIR
  or an earlier export under --work is reused) and save the builders' inputs as .npy;
- compile for cuda:0 in fp16 twice: with `--io device` (run with --device-io, zero-copy) and with
  host I/O (the default path: inputs staged by the engine, the default stream);
- green: `baton run P --device-io -n N --warmup W` on all SMs (for reference), then `--sms S`
  alone, then `--sms S --saturate-rest`, where the SMs outside the green context run a competing
  kernel for the whole timed loop (tools/baton: baton::cuda::CompetingWorkload). S is half the
  GPU's SMs unless --sms. Table: model, SMs (green / other), median and p90 ms alone and
  saturated, their ratio (goal <= 1.1), and whether the other SMs were busy throughout;
- memcheck / racecheck: `compute-sanitizer --tool T --error-exitcode 99 --print-limit 50
  baton run P [--device-io] --warmup 1 --iterations 2 --profile-runs 1` (one profiled run and one with the steps timed) for each --io; the ERROR / RACECHECK
  SUMMARY lines are read by scripts/sanitizer_summary.sh, as run_gpu_suite.sh --sanitize does;
  --sanitizer-args adds options (e.g. `--kernel-name-exclude kns=nvjet` leaves cuBLASLt's nvjet
  kernels out), and the table names the kernels racecheck reported hazards in.

Writes OUT/gpu_checks.json and OUT/gpu_checks.md (rewritten after each run; the .md is the table
for bench/RESULTS.md) and OUT/logs/ (every command's output). Exit status 0 when every run
finished, every sanitizer run reported 0 errors and every saturated run kept the other SMs busy
throughout; the 1.1 ratio is a goal shown in the table, not an exit status.

Time on an H100 with 16 CPUs: exports and compiles about 1 minute (exports are cached under
--work); green about 1 minute; each sanitizer run loads a full engine under the tool (capped by
--sanitizer-timeout, default 300 s). Give each tool its own call (--checks memcheck, then
--checks racecheck) to keep every call under 10 minutes; --budget-s (default 540) starts no new
run after that many seconds and records the rest as skipped.
"""
import argparse
import concurrent.futures as cf
import json
import multiprocessing
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as gc  # noqa: E402

EXPORTER = "torchscript17"
GOAL = 1.1
CHECKS = ["green", "memcheck", "racecheck"]
STREAM_RE = re.compile(r"stream: green context of (\d+) SMs \(asked (\d+)\)")
REST_RE = re.compile(r"the other (\d+) SMs kept busy by a competing kernel")
SUMMARY_RE = re.compile(r"SUMMARY: (\d+) (error|hazard)")
RACE_RE = re.compile(r"Race reported between \w+ access at ([^+\s]+)\+")
SUMMARY_SH = os.path.join(gc.REPO, "scripts", "sanitizer_summary.sh")


# ---- preparation: exports, inputs, programs -------------------------------------------------


def prepare_exports(args, families, work, out_dir):
    """ONNX path and export metadata per family: reused from --models-from or --work when there,
    else exported in a process pool."""
    pool = cf.ProcessPoolExecutor(max_workers=max(1, len(families)), mp_context=multiprocessing.get_context("spawn"))
    threads = max(1, (os.cpu_count() or 2) // max(1, len(families)))
    futures = {}
    for family in families:
        name = gc.onnx_name(family, EXPORTER, 1)
        reusable = [os.path.abspath(args.models_from)] if args.models_from else []
        reusable.append(os.path.join(work, "onnx"))
        reused = None
        for d in reusable:
            path = os.path.join(d, name)
            if os.path.exists(path) and os.path.exists(path + ".json"):
                meta = json.load(open(path + ".json"))
                if meta.get("ok"):
                    reused = (path, dict(meta, reused_from=d))
                    break
        if reused:
            f = cf.Future()
            f.set_result(reused[1])
            futures[family] = (reused[0], f)
            continue
        path = os.path.join(work, "onnx", name)
        futures[family] = (path, pool.submit(gc.export_job, family, EXPORTER, 1, not args.small, path, threads,
                                             os.path.join(out_dir, "logs", f"export_{name}.log")))
    exports = {}
    for family, (path, fut) in futures.items():
        try:
            meta = fut.result()
        except Exception as e:  # noqa: BLE001
            meta = {"ok": False, "error": f"{type(e).__name__}: {e}"[-800:]}
        exports[family] = (path, meta)
        print(f"export {family}: " + (f"{path} ({meta.get('export_s', 0):.0f} s"
                                      + (", reused" if meta.get("reused_from") else "") + ")"
                                      if meta.get("ok") else "FAILED " + meta.get("error", "?")[:300]), flush=True)
    pool.shutdown()
    return exports


def save_inputs(args, family, work):
    """The builders' inputs at batch 1 (BERT: token ids and the attention mask), as .npy."""
    _, xs, names = gc.build(family, not args.small, 1)
    files = []
    for name, t in zip(names, xs):
        f = os.path.join(work, "inputs", f"{family}.{name}.npy")
        np.save(f, t.numpy())
        files.append((name, f))
    return files


def compile_program(args, family, onnx, meta, io, work, out_dir):
    shapes = {n: [1] + list(d[1:]) for n, d in (meta.get("shapes") or {}).items()}
    device = ["--device", "cuda:0", "--precision", "fp16"] + (["--io", "device"] if io == "device" else [])
    if args.arch:
        device += ["--arch", args.arch]
    return gc.baton_compile(args.baton, onnx, os.path.join(work, "programs", f"{family}.{io}.baton"), shapes,
                            device, args.compile_timeout, os.path.join(out_dir, "logs", f"{family}.{io}.compile.log"))


# ---- the checks ------------------------------------------------------------------------------


def timed_run(args, program, inputs, extra, log):
    """`baton run --device-io` with `extra` options: latency and the stream line, parsed."""
    cmd = [args.baton, "run", program, "--device-io", "-n", str(args.iterations), "--warmup", str(args.warmup)]
    cmd += gc.input_args(inputs) + extra
    if args.compile_only:
        return {"ok": False, "error": "not run (--compile-only)", "cmd": " ".join(cmd)}
    rc, seconds, text = gc.run_cmd(cmd, args.run_timeout, log)
    parsed = gc.parse_baton_run(text) if rc == 0 else None
    if not parsed:
        return {"ok": False, "cmd": " ".join(cmd),
                "error": ("timed out: " if rc is None else f"exit {rc}: ") + gc.tail(text, 800)}
    r = dict(parsed, ok=True, cmd=" ".join(cmd), wall_s=seconds)
    m = STREAM_RE.search(text)
    if m:
        r["green_sms"], r["asked_sms"] = int(m.group(1)), int(m.group(2))
    m = REST_RE.search(text)
    if m:
        r["other_sms"] = int(m.group(1))
        r["busy_throughout"] = "for the whole timed loop" in text
    line = next((ln for ln in text.splitlines() if ln.startswith("stream: ")), "")
    r["stream_line"] = line
    return r


def green_row(args, family, program, inputs, sms, out_dir):
    logs = os.path.join(out_dir, "logs")
    row = {"family": family, "sms": sms}
    row["all"] = timed_run(args, program, inputs, [], os.path.join(logs, f"{family}.green.all.log"))
    row["alone"] = timed_run(args, program, inputs, ["--sms", str(sms)], os.path.join(logs, f"{family}.green.alone.log"))
    row["saturated"] = timed_run(args, program, inputs, ["--sms", str(sms), "--saturate-rest"],
                                 os.path.join(logs, f"{family}.green.saturated.log"))
    a, s = row["alone"], row["saturated"]
    if a.get("ok") and s.get("ok"):
        row["ratio_median"] = s["median_ms"] / a["median_ms"]
        row["ratio_p90"] = s["p90_ms"] / a["p90_ms"]
        row["goal_met"] = row["ratio_median"] <= GOAL
    row["ok"] = bool(a.get("ok") and s.get("ok") and s.get("busy_throughout"))
    return row


def sanitizer_run(args, cs, tool, family, io, program, inputs, out_dir):
    log = os.path.join(out_dir, "logs", f"{family}.{io}.{tool}.log")
    cmd = [cs, "--tool", tool, "--error-exitcode", "99", "--print-limit", "50"] + shlex.split(args.sanitizer_args) + [
           args.baton, "run", program,
           "--warmup", "1", "--iterations", "2", "--profile-runs", "1"] + (["--device-io"] if io == "device" else []) + gc.input_args(inputs)
    r = {"family": family, "io": io, "tool": tool, "cmd": " ".join(cmd)}
    if args.compile_only:
        r.update(status="not run", summary="--compile-only")
        return r
    rc, seconds, text = gc.run_cmd(cmd, args.sanitizer_timeout, log)
    summary = subprocess.run(["bash", SUMMARY_SH, log], capture_output=True, text=True).stdout.strip() or "no summary"
    m = SUMMARY_RE.search(summary)
    count = int(m.group(1)) if m else None
    # Which kernels racecheck's hazards are in (the access it names first), with their counts.
    kernels = {}
    for name in RACE_RE.findall(text or ""):
        kernels[name] = kernels.get(name, 0) + 1
    r.update(exit=rc, seconds=seconds, summary=summary, count=count, hazard_kernels=kernels,
             sanitizer_args=args.sanitizer_args, latency=(gc.parse_baton_run(text) or {}).get("median_ms"))
    if rc is None:
        r["status"] = f"timed out ({args.sanitizer_timeout} s)"
    elif rc == 0 and count == 0:
        r["status"] = "clean"
    elif rc == 99 or (count or 0) > 0:
        r["status"] = "ERRORS"
    else:
        r["status"] = f"failed (exit {rc})"
        r["error"] = gc.tail(text, 600)
    return r


# ---- tables ----------------------------------------------------------------------------------


def ms(r):
    if not r:
        return "—"
    if not r.get("ok"):
        return "not run" if "not run" in str(r.get("error", "")) else "failed"
    return f"{r['median_ms']:.3f} ({r['p90_ms']:.3f})"


def markdown(result, env):
    lines = [f"Checks on full-size models (`bench/gpu_checks.py`): {env.get('gpu')}, driver {env.get('driver', '?')}, "
             f"torch {env.get('torch')}, {env.get('date')}, Baton commit `{env.get('commit')}`"
             + (" (SMALL configurations)." if env.get("small") else "."), ""]
    green = result.get("green") or []
    if green:
        lines += [f"Green context under a saturated complementary partition: fp16, batch 1, TorchScript export, "
                  f"`baton run --device-io`, median (p90) ms of {env.get('iterations')} runs after {env.get('warmup')} "
                  f"warm-up. Alone: `--sms S`; saturated: `--sms S --saturate-rest` (the other SMs run a competing "
                  f"kernel for the whole timed loop). Ratio: saturated / alone (goal ≤ {GOAL}).", "",
                  "| model | SMs (green / other) | all SMs | alone | saturated | ratio median (p90) | goal ≤ 1.1 | other SMs busy throughout |",
                  "|---|---|---|---|---|---|---|---|"]
        for row in green:
            s = row.get("saturated") or {}
            sms = f"{s.get('green_sms', row['sms'])} / {s.get('other_sms', '?')}" + (
                f" (asked {s['asked_sms']})" if s.get("asked_sms") and s.get("asked_sms") != s.get("green_sms") else "")
            ratio = (f"{row['ratio_median']:.3f} ({row['ratio_p90']:.3f})" if "ratio_median" in row else "—")
            goal = "—" if "goal_met" not in row else ("met" if row["goal_met"] else "**missed**")
            busy = "—" if "busy_throughout" not in s else ("yes" if s["busy_throughout"] else "**no**")
            lines.append(f"| {gc.DISPLAY.get(row['family'], row['family'])} | {sms} | {ms(row.get('all'))} | "
                         f"{ms(row.get('alone'))} | {ms(s)} | {ratio} | {goal} | {busy} |")
        lines.append("")
    san = result.get("sanitizer") or []
    if san:
        lines += ["compute-sanitizer on `baton run` of the fp16 programs (`--warmup 1 --iterations 2 --profile-runs 1`; device: "
                  "`--io device` program run with `--device-io`; host: the host-I/O program on the default path). "
                  "Summary: the tool's ERROR / RACECHECK SUMMARY (scripts/sanitizer_summary.sh).", "",
                  "Kernels with hazards: where racecheck reported races, by kernel (reports shown, each "
                  "covering one or more hazards).", "",
                  "| model | I/O | tool | options | result | summary | kernels with hazards | exit | seconds |",
                  "|---|---|---|---|---|---|---|---:|---:|"]
        for r in san:
            secs = f"{r['seconds']:.0f}" if r.get("seconds") is not None else "—"
            kernels = ", ".join(f"{k} ×{n}" for k, n in sorted((r.get("hazard_kernels") or {}).items())) or "—"
            lines.append(f"| {gc.DISPLAY.get(r['family'], r['family'])} | {r['io']} | {r['tool']} | "
                         f"{r.get('sanitizer_args') or '—'} | {r['status']} | {r.get('summary', '—')} | {kernels} | "
                         f"{r.get('exit', '—')} | {secs} |")
        lines.append("")
    notes = []
    for row in green:
        for k in ("all", "alone", "saturated"):
            if row.get(k) and not row[k].get("ok") and "not run" not in str(row[k].get("error", "")):
                notes.append(f"- {row['family']} {k}: {row[k].get('error', '')[:300]}")
    for r in san:
        if r.get("error"):
            notes.append(f"- {r['family']} {r['io']} {r['tool']}: {r['error'][:300]}")
    for p in result.get("problems", []):
        notes.append(f"- {p[:300]}")
    if notes:
        lines += ["Failures:"] + [n.replace("\n", " ") for n in notes]
    return "\n".join(lines) + "\n"


# ---- main ------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baton", required=True, help="path of the baton CLI")
    ap.add_argument("--out", required=True, help="where JSON, markdown and logs go")
    ap.add_argument("--work", default="/tmp/baton_gpu/checks", help="ONNX files, inputs, programs")
    ap.add_argument("--checks", default=",".join(CHECKS), help="green, memcheck, racecheck")
    ap.add_argument("--models", default="resnet,bert", help="families (export_real_models.py's)")
    ap.add_argument("--io", default="device,host", help="sanitizer runs: device (--device-io), host (default path)")
    ap.add_argument("--sms", type=int, default=0, help="green context size (default: half the GPU's SMs)")
    ap.add_argument("--iterations", type=int, default=500)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--models-from", default="", help="reuse TorchScript exports from DIR (gpu_models.py's --work/onnx)")
    ap.add_argument("--compute-sanitizer", default="", help="default: on PATH, else /usr/local/cuda/bin/compute-sanitizer")
    ap.add_argument("--sanitizer-timeout", type=int, default=300, help="seconds per sanitizer run")
    ap.add_argument("--sanitizer-args", default="",
                    help="more compute-sanitizer options, e.g. '--kernel-name-exclude kns=nvjet'")
    ap.add_argument("--run-timeout", type=int, default=180, help="seconds per timed baton run")
    ap.add_argument("--compile-timeout", type=int, default=600)
    ap.add_argument("--budget-s", type=float, default=540, help="start no new run after this many seconds")
    ap.add_argument("--compile-only", action="store_true", help="export and compile, run nothing")
    ap.add_argument("--arch", default="", help="baton compile --arch (with --compile-only on a host without a GPU)")
    ap.add_argument("--small", action="store_true", help="small configurations (dry runs)")
    ap.add_argument("--commit", default="COMMIT")
    args = ap.parse_args()
    t_start = time.time()
    checks = gc.split_list(args.checks)
    for c in checks:
        if c not in CHECKS:
            ap.error(f"unknown check {c} (known: {', '.join(CHECKS)})")
    families = gc.split_list(args.models)
    for f in families:
        if f not in gc.FAMILY_ORDER:
            ap.error(f"unknown model {f} (known: {', '.join(gc.FAMILY_ORDER)})")
    ios = gc.split_list(args.io)
    for io in ios:
        if io not in ("device", "host"):
            ap.error(f"unknown --io {io} (device or host)")
    out_dir = os.path.abspath(args.out)
    work = os.path.abspath(args.work) + ("-small" if args.small else "")
    for d in (out_dir, os.path.join(out_dir, "logs"), work, os.path.join(work, "onnx"), os.path.join(work, "inputs"),
              os.path.join(work, "programs")):
        os.makedirs(d, exist_ok=True)

    import torch
    gpu = not args.compile_only
    if gpu and not torch.cuda.is_available():
        sys.exit("gpu_checks: no CUDA device visible to PyTorch (use --compile-only --arch sm_90 for a dry run)")
    env = gc.environment(torch, "cuda" if gpu else "none (compile only)")
    sms_total = torch.cuda.get_device_properties(0).multi_processor_count if gpu else 132
    sms = args.sms or sms_total // 2
    cs = args.compute_sanitizer or shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    env.update({"commit": args.commit, "baton": os.path.abspath(args.baton), "checks": checks, "models": families,
                "iterations": args.iterations, "warmup": args.warmup, "device_sms": sms_total, "green_sms_asked": sms,
                "small": args.small, "precision": "fp16", "exporter": EXPORTER, "compute_sanitizer": cs})
    if gpu and any(c != "green" for c in checks):
        try:
            env["compute_sanitizer_version"] = subprocess.run([cs, "--version"], capture_output=True, text=True,
                                                              timeout=60).stdout.strip().splitlines()[-1]
        except Exception as e:  # noqa: BLE001
            env["compute_sanitizer_version"] = f"not found: {e}"
    print(f"gpu_checks: {env['gpu']}  checks {','.join(checks)}  models {','.join(families)}  "
          f"SMs {sms_total} (green {sms})", flush=True)

    result = {"environment": env, "green": [], "sanitizer": [], "problems": []}
    json_path, md_path = os.path.join(out_dir, "gpu_checks.json"), os.path.join(out_dir, "gpu_checks.md")

    def save():
        result["elapsed_s"] = time.time() - t_start
        gc.write_json(json_path, result)
        with open(md_path, "w") as f:
            f.write(markdown(result, env))

    exports = prepare_exports(args, families, work, out_dir)
    ios_needed = sorted(set((["device"] if "green" in checks else []) +
                            (ios if any(c != "green" for c in checks) else [])))
    programs, inputs = {}, {}
    with cf.ThreadPoolExecutor(max_workers=4) as tp:
        futures = {}
        for family in families:
            path, meta = exports[family]
            if not meta.get("ok"):
                result["problems"].append(f"{family}: export failed: {meta.get('error', '?')}")
                continue
            inputs[family] = save_inputs(args, family, work)
            for io in ios_needed:
                futures[(family, io)] = tp.submit(compile_program, args, family, path, meta, io, work, out_dir)
        for (family, io), fut in futures.items():
            r = fut.result()
            print(f"compile {family} ({io} I/O): " + (f"{r['compile_s']:.1f} s, cpu kernels {r.get('cpu_kernels')}, "
                                                      f"delegates {r.get('delegates')}" if "error" not in r
                                                      else r["error"][:400]), flush=True)
            if "error" in r:
                result["problems"].append(f"{family} ({io} I/O): {r['error']}")
            else:
                programs[(family, io)] = r
    result["programs"] = {f"{f}.{io}": r for (f, io), r in programs.items()}
    save()

    def over_budget():
        return time.time() - t_start > args.budget_s

    if "green" in checks:
        for family in families:
            if (family, "device") not in programs:
                continue
            if over_budget():
                result["problems"].append(f"{family} green: skipped, --budget-s {args.budget_s:.0f} s used up")
                continue
            row = green_row(args, family, programs[(family, "device")]["program"], inputs[family], sms, out_dir)
            result["green"].append(row)
            print(f"green {family}: all {ms(row['all'])}  alone {ms(row['alone'])}  saturated {ms(row['saturated'])}"
                  + (f"  ratio {row['ratio_median']:.3f} (p90 {row['ratio_p90']:.3f})" if "ratio_median" in row else "")
                  + ("" if not row["saturated"].get("ok") else
                     f"  busy throughout: {row['saturated'].get('busy_throughout')}"), flush=True)
            save()
    for tool in [c for c in checks if c != "green"]:
        for family in families:
            for io in ios:
                if (family, io) not in programs:
                    continue
                if over_budget():
                    result["sanitizer"].append({"family": family, "io": io, "tool": tool,
                                                "status": f"skipped (--budget-s {args.budget_s:.0f} s used up)"})
                    continue
                r = sanitizer_run(args, cs, tool, family, io, programs[(family, io)]["program"], inputs[family],
                                  out_dir)
                result["sanitizer"].append(r)
                print(f"{tool} {family} ({io} I/O): {r['status']}  {r.get('summary', '')}  "
                      + (f"{r['seconds']:.0f} s" if r.get("seconds") is not None else ""), flush=True)
                save()
    save()
    print("\n" + open(md_path).read())
    print(f"wrote {json_path} and {md_path} ({time.time() - t_start:.0f} s)")
    if args.compile_only:
        for row in result["green"]:
            for k in ("all", "alone", "saturated"):
                print("would run:", row[k]["cmd"])
        for r in result["sanitizer"]:
            print("would run:", r["cmd"])
        return 0 if not result["problems"] else 1
    ok = (not result["problems"] and all(row["ok"] for row in result["green"])
          and all(r["status"] == "clean" for r in result["sanitizer"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
