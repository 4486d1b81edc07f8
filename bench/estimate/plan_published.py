#!/usr/bin/env python3
"""`hpu-train estimate plan` on every published training run of published.py: the planner keeps
the run's model, cluster, precision, sequence and global batch and searches the layouts; for each
run it prints the fastest fitting layout, the published layout's own estimate and its rank among
the fitting ones, and the search's wall time. The search must find a fitting layout at least as
fast as the published one (it searches that one too); the script exits 1 if it does not.

    /usr/bin/python3 bench/estimate/plan_published.py [--bin build/hpu-train] [--only SUBSTRING]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from published import ROOT, ROWS  # noqa: E402


def plan(binary, row, workdir):
    out = os.path.join(workdir, "plan.json")
    env = dict(os.environ, HPU_EMULATOR_GENERATION=row["generation"])
    args = [a for a in row["args"] if a != "fit"]
    began = time.monotonic()
    r = subprocess.run([binary, "estimate", "plan"] + args + ["--json", out], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    seconds = time.monotonic() - began
    if r.returncode != 0:
        sys.exit(f"{row['model']} {row['setting']}: exit {r.returncode}\n{r.stderr}")
    with open(out) as f:
        return json.load(f), seconds


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "hpu-train"))
    p.add_argument("--only", default="", help="rows whose model or setting contains this")
    a = p.parse_args()
    rows = [r for r in ROWS if r["kind"] == "training" and a.only in f"{r['model']} {r['setting']}"]
    failed = False
    print("| run | published | published layout: estimate, rank | fastest fitting layout | estimate | x | search |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as workdir:
        for row in rows:
            j, seconds = plan(os.path.abspath(a.bin), row, workdir)
            best = j["plans"][0]
            given = next((p for p in j["plans"] if p["layout"] == j["given"]["layout"]), None)
            given_text = (f"{given['tokens_per_s']:,.0f}{'' if given['priced_whole'] else '~'}, "
                          f"{j['given_rank']} of {len(j['plans'])}") if given else "does not fit"
            ratio = best["tokens_per_s"] / given["tokens_per_s"] if given else float("inf")
            failed |= ratio < 1
            print(f"| {row['model']}, {row['setting'].split(' (')[0]} | {row['published']:,} tokens/s | "
                  f"{j['given']['layout']}: {given_text} | {best['layout']} | {best['tokens_per_s']:,.0f} | "
                  f"{ratio:.2f} | {seconds:.1f} s |", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
