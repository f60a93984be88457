#!/usr/bin/env python3
"""Replays cuDNN plan choices of one program in another compiled from the same model: the chosen
plans that `baton inspect` printed for a program (lines "step N: conv ..." then "chosen: cuDNN
engine E (plan NAME)") are written into PROGRAM's engine blob for the steps asked, so a program
whose choices are lost can be rebuilt, and the step whose plan matters found, one step at a time.
The result loads with `baton run --no-checksums` (its checksums no longer match).

  patch_choices.py PROGRAM.baton INSPECT.txt OUT.baton [--steps 3,7,12]   (default: every step)
"""
import argparse, re, struct, sys

MAGIC = b"BTNENGIN"
CHOICE = 352  # sizeof(StepChoice): step u32, kind u32, time f32, candidates u32, algo 8 x u64,
              # cudnn_engine i64, cudnn_plan char[264]


def choices_of(inspect_text):
    out, step = {}, None
    for line in inspect_text.splitlines():
        m = re.search(r"step (\d+): (conv|attention|matmul) cuDNN", line)
        if m:
            step = int(m.group(1))
            continue
        m = re.search(r"chosen: cuDNN engine (-?\d+) \(plan (\S+)\)", line)
        if m and step is not None:
            out[step] = (int(m.group(1)), m.group(2))
            step = None
    return out


def patch(program, wanted, steps=None):
    at = program.find(MAGIC)
    if at < 0 or program.find(MAGIC, at + 1) >= 0:
        sys.exit("patch_choices: expected exactly one engine blob in the program")
    off, size = struct.unpack_from("<QQ", program, at + 176)
    if size == 0 or size % CHOICE:
        sys.exit("patch_choices: the program has no recorded choices (compiled without its GPU?)")
    done = []
    for i in range(size // CHOICE):
        rec = at + off + i * CHOICE
        step, kind = struct.unpack_from("<II", program, rec)
        if step not in wanted or (steps is not None and step not in steps):
            continue
        engine, name = wanted[step]
        if len(name) >= 264:
            sys.exit(f"patch_choices: plan name of step {step} too long")
        struct.pack_into("<q", program, rec + 16 + 64, engine)
        program[rec + 88:rec + 88 + 264] = name.encode().ljust(264, b"\0")
        done.append(step)
    return done


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("program")
    ap.add_argument("inspect")
    ap.add_argument("out")
    ap.add_argument("--steps", default="", help="comma-separated step indices (default: all)")
    a = ap.parse_args()
    program = bytearray(open(a.program, "rb").read())
    wanted = choices_of(open(a.inspect).read())
    steps = {int(s) for s in a.steps.split(",") if s} or None
    done = patch(program, wanted, steps)
    open(a.out, "wb").write(program)
    print(f"patched {len(done)} steps: {','.join(map(str, done))}")


if __name__ == "__main__":
    main()
