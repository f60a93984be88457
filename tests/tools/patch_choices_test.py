#!/usr/bin/env python3
"""tools/debug/patch_choices.py on a synthetic program: an engine blob whose choices section holds
two cuDNN steps' records; the plans an inspect text names are written into the steps asked for,
and nothing else changes. Run by ctest (patch_choices_test)."""
import os, struct, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "debug", "patch_choices.py")
CHOICE = 352


def program(choices):
    header = bytearray(256)
    header[0:8] = b"BTNENGIN"
    struct.pack_into("<QQ", header, 176, 256, CHOICE * len(choices))
    records = bytearray()
    for step, name in choices:
        r = bytearray(CHOICE)
        struct.pack_into("<IIfI", r, 0, step, 4, 1.5, 4)
        struct.pack_into("<q", r, 80, 7)
        r[88:88 + len(name)] = name.encode()
        records += r
    return b"PROGRAM-HEADER" * 10 + bytes(header) + bytes(records) + b"TAIL"


INSPECT = """        step 3: conv cuDNN NHWC 1x56x56x64 -> K=64 1x1 stride 1x1 groups 1 epilogue=bias+relu
          chosen: cuDNN engine 10 (plan eng10_k2=8_k13=1); 10.4 us, fastest of 4
        step 5: kernel k1_maxpool grid 784 block 256
        step 7: conv cuDNN NHWC 1x56x56x64 -> K=256 1x1 stride 1x1 groups 1 epilogue=bias
          chosen: cuDNN engine 41 (plan eng41_k2=3_k25=1_k27=2); 7.1 us, fastest of 4
"""


def record(data, i):
    at = data.find(b"BTNENGIN") + 256 + i * CHOICE
    step, kind = struct.unpack_from("<II", data, at)
    engine = struct.unpack_from("<q", data, at + 80)[0]
    return step, kind, engine, data[at + 88:at + CHOICE].rstrip(b"\0").decode()


def run(args):
    return subprocess.run([sys.executable, TOOL] + args, capture_output=True, text=True)


def main():
    failures = []
    def check(cond, what):
        if not cond:
            failures.append(what)
    with tempfile.TemporaryDirectory() as d:
        src, ins, out = (os.path.join(d, n) for n in ("p.baton", "inspect.txt", "out.baton"))
        original = program([(3, "eng39_k25=0"), (7, "eng4_k24=28")])
        open(src, "wb").write(original)
        open(ins, "w").write(INSPECT)

        r = run([src, ins, out, "--steps", "7"])
        check(r.returncode == 0, f"--steps 7: rc {r.returncode} {r.stderr}")
        patched = open(out, "rb").read()
        check(record(patched, 0) == (3, 4, 7, "eng39_k25=0"), f"step 3 changed: {record(patched, 0)}")
        check(record(patched, 1) == (7, 4, 41, "eng41_k2=3_k25=1_k27=2"), f"step 7: {record(patched, 1)}")
        check(len(patched) == len(original), "size changed")
        check("patched 1 steps: 7" in r.stdout, r.stdout)

        r = run([src, ins, out])
        patched = open(out, "rb").read()
        check(record(patched, 0) == (3, 4, 10, "eng10_k2=8_k13=1"), f"all: step 3 {record(patched, 0)}")
        check(record(patched, 1)[3] == "eng41_k2=3_k25=1_k27=2", f"all: step 7 {record(patched, 1)}")
        # Everything but the two records' engine and name bytes is as it was.
        diff = [i for i in range(len(original)) if original[i] != patched[i]]
        base = original.find(b"BTNENGIN") + 256
        check(all((i - base) % CHOICE >= 80 for i in diff), "bytes outside engine/name changed")

        open(src, "wb").write(program([]))
        r = run([src, ins, out])
        check(r.returncode != 0 and "no recorded choices" in r.stderr, f"no choices: {r.returncode} {r.stderr}")
    for f in failures:
        print("FAIL:", f)
    print("patch_choices_test:", "ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
