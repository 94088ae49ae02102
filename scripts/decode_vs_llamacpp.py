#!/usr/bin/env python3
"""Measure llama.cpp's decode from DRAM beside ours, on the same model files.

`test-backend-ops` (the perf section's llama.cpp column) times one weight buffer, which a
large L3 holds; a model several times the L3 gives llama.cpp's rate from DRAM. This script:

1. writes a llama-architecture model in f16 with random weights (`write_llama`, the example of
   the llama-bench crate; default: eight blocks of Llama 3 8B's projections, 3.9 GB);
2. quantizes it with `llama-quantize` (`--pure` for one format per file, as named: `Q4_K_S`
   is every tensor q4_K; `Q4_K_M` without `--pure`, llama.cpp's own mix);
3. per round and file: llama.cpp's decode (`llama-bench -t 1,2 -p 0 -n 16 -r 3 -o json`,
   its defaults otherwise), ours on the same file (`sipllm bench --gguf FILE --recalibrate`,
   the profile's `static` measurements at 1 and 2 threads), and the read
   (`qgemv_vs_read 4096 4096 5`'s read column for f32);
4. prints a markdown table of medians over the rounds (ranges in brackets) and, with
   `--json`, the per-round figures as JSON instead.

    python3 scripts/decode_vs_llamacpp.py --dir DIR [--llama-bin BIN] [--rounds 3]
        [--formats Q4_K_S,Q6_K,Q8_0,Q4_0,Q4_K_M,F16] [--layers 8] [--json]

DIR is created, or reused if an earlier run of this script made it (it holds the marker
`.decode_vs_llamacpp`); any other existing path is refused, so nothing that is not this
script's is written over. The profiles go to DIR/sipllm-home, not the user's cache. BIN
defaults to `$LLAMA_CPP_BIN` (`.ci/llama.cpp` builds llama.cpp and prints it). Needs about
10 GB in DIR and 8 GB of memory while the f16 model is written; a full run of the six files
takes 25–35 minutes on 2 cores. The numbers are a whole model's (llama.cpp's include
attention over at most 16 tokens, norms and RoPE; ours the projections only).
"""

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys

MARKER = ".decode_vs_llamacpp"
ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(cmd, env=None, capture=True):
    """Runs `cmd`; its stdout when `capture`. Exits with the command's stderr on failure."""
    out = subprocess.run(cmd, env=env, capture_output=capture, text=True)
    if out.returncode != 0:
        sys.exit(f"decode_vs_llamacpp: {' '.join(map(str, cmd))} failed "
                 f"(status {out.returncode}):\n{out.stderr if capture else ''}")
    return out.stdout if capture else ""


def prepare_dir(path):
    """Creates DIR, or accepts one this script made; refuses anything else."""
    if path.exists():
        if not (path / MARKER).is_file():
            sys.exit(f"decode_vs_llamacpp: {path} exists and was not made by this script; "
                     "give a new directory")
        return
    path.mkdir(parents=True)
    (path / MARKER).write_text("made by scripts/decode_vs_llamacpp.py\n")


def read_gbps(text):
    """The read column of `qgemv_vs_read` for f32, per thread count."""
    reads, threads = {}, None
    for line in text.splitlines():
        m = re.match(r"threads (\d+):", line)
        if m:
            threads = int(m.group(1))
        m = re.match(r"\s+f32\s+([\d.]+)\s+([\d.]+)", line)
        if m and threads is not None:
            reads[threads] = float(m.group(2))
    return reads


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True, type=pathlib.Path)
    parser.add_argument("--llama-bin", default=os.environ.get("LLAMA_CPP_BIN"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--formats", default="Q4_K_S,Q6_K,Q8_0,Q4_0,Q4_K_M,F16")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.llama_bin:
        sys.exit("decode_vs_llamacpp: give --llama-bin or set LLAMA_CPP_BIN")
    if not 1 <= args.rounds <= 20 or not 1 <= args.layers <= 32:
        sys.exit("decode_vs_llamacpp: --rounds must be 1-20 and --layers 1-32")
    llama = pathlib.Path(args.llama_bin)
    for tool in ("llama-bench", "llama-quantize"):
        if not (llama / tool).is_file():
            sys.exit(f"decode_vs_llamacpp: {llama / tool} not found")
    formats = [f for f in args.formats.split(",") if f]
    prepare_dir(args.dir)

    print("decode_vs_llamacpp: building", file=sys.stderr)
    for package, extra in [("sipllm", []),
                           ("matmul-kernel", ["--example", "qgemv_vs_read"]),
                           ("llama-bench", ["--example", "write_llama"])]:
        run(["cargo", "build", "--release", "-q", "-p", package, *extra], capture=False)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release"

    f16 = args.dir / f"f16-{args.layers}.gguf"
    if not f16.exists():
        print(f"decode_vs_llamacpp: writing {f16}", file=sys.stderr)
        partial = f16.with_suffix(".partial")
        partial.unlink(missing_ok=True)  # a killed run's, in this script's own directory
        run([target / "examples" / "write_llama", partial, str(args.layers), "4096", "14336",
             "32"])
        partial.rename(f16)
    files = {}
    for name in formats:
        if name.upper() == "F16":
            files[name] = f16
            continue
        out = args.dir / f"{name}-{args.layers}.gguf"
        if not out.exists():
            print(f"decode_vs_llamacpp: quantizing {out}", file=sys.stderr)
            pure = [] if name == "Q4_K_M" else ["--pure"]
            partial = out.with_suffix(".partial")
            partial.unlink(missing_ok=True)
            run([llama / "llama-quantize", *pure, f16, partial, name])
            partial.rename(out)
        files[name] = out

    env = dict(os.environ, SIPLLM_HOME=str(args.dir / "sipllm-home"))
    rounds = []
    for r in range(args.rounds):
        for name, path in files.items():
            print(f"decode_vs_llamacpp: round {r + 1}, {name}", file=sys.stderr)
            bench = json.loads(run([llama / "llama-bench", "-m", path, "-t", "1,2", "-p", "0",
                                    "-n", "16", "-r", "3", "-o", "json"]))
            size = bench[0]["model_size"]
            theirs = {b["n_threads"]: b["avg_ts"] * size / 1e9 for b in bench}
            run([target / "sipllm", "bench", "--quiet", "--json", "--gguf", path,
                 "--recalibrate", "--repetitions", "5"], env=env)
            # The profile just written: the newest in this script's own SIPLLM_HOME.
            written = sorted((args.dir / "sipllm-home" / "runtime").glob("*.json"),
                             key=lambda p: p.stat().st_mtime)
            profile = json.loads(written[-1].read_text())
            ours = {m["threads"]: m["gbps"]
                    for m in profile["decode"]["measurements"]
                    if m["step"] == "threads" and m["schedule_policy"] == "static"}
            reads = read_gbps(run([target / "examples" / "qgemv_vs_read", "4096", "4096", "5"],
                                  env=dict(os.environ, QGEMV_FORMATS="f32")))
            for t in (1, 2):
                if t in theirs and t in ours and t in reads:
                    rounds.append({"round": r + 1, "file": name, "threads": t,
                                   "llamacpp_gbps": theirs[t], "ours_gbps": ours[t],
                                   "read_gbps": reads[t]})
    if args.json:
        json.dump(rounds, sys.stdout, indent=1)
        print()
        return
    print("| file | thr | llama.cpp GB/s | ours GB/s | read GB/s | llama.cpp ÷ read "
          "| ours ÷ read | ours ÷ llama.cpp |")
    print("|---|---|---|---|---|---|---|---|")
    for name in files:
        for t in (1, 2):
            rows = [x for x in rounds if x["file"] == name and x["threads"] == t]
            if not rows:
                continue
            med = lambda key: statistics.median(x[key] for x in rows)
            def ratio(a, b):
                v = [x[a] / x[b] for x in rows]
                return f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})"
            print(f"| {name} | {t} | {med('llamacpp_gbps'):.1f} | {med('ours_gbps'):.1f} "
                  f"| {med('read_gbps'):.1f} | {ratio('llamacpp_gbps', 'read_gbps')} "
                  f"| {ratio('ours_gbps', 'read_gbps')} | {ratio('ours_gbps', 'llamacpp_gbps')} |")


if __name__ == "__main__":
    main()
