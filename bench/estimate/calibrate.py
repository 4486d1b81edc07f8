#!/usr/bin/python3
"""Fits the time model's efficiency parameters (device::Calibration) on Intel's published
figures (published.py), per generation, and validates them by leave-one-out: each row's
figure is left out of a fit of its own, and that fit's estimate of the row is compared with
the published figure.

The estimate reports, for each op kind of a step, its work at every efficiency 1 (matrix
engine, vector engine, HBM, host link; GaudiModel::seconds), the graphs it launches and its
exposed communication; this script prices that work under any parameters, so one estimate
run per row serves every fit. The parameters (one set per generation):

  mme                  products: fraction of the matrix engines' peak in their dtype
  attention            the fused attention kernel's products
  tpc                  vector-engine passes
  hbm                  streaming HBM traffic
  collective           NIC ports' payload rate in collectives
  collective_overhead  seconds a collective costs beyond its transfers per peer it synchronises with
  host_per_graph       host seconds per launched graph (a training step, a decode step)

Efficiencies are bounded to [0.05, 1] (HBM to [0.5, 1]), the collective overhead to
[0, 100 us], the host time to [0, 20 ms]; a parameter no row of a generation exercises stays
at its uncalibrated value. The fit minimises the sum of |log(estimate / published)| over the
rows (least absolute deviations: a row that misses for a reason the model lacks pulls on each
parameter by how much that parameter moves it, not by the size of its miss, as under squares);
it is a coordinate descent with golden-section line searches in log space, then a Nelder-Mead
polish from its result, deterministic.

    /usr/bin/python3 bench/estimate/calibrate.py [--bin build/hpu-train] [--reports FILE] [--write]

prints per row the estimate / published ratio uncalibrated, under the fit on all rows and in
leave-one-out, then the parameters fitted on every row of each generation and the C++ tables
of device/src/gaudi_calibration.cc (the parameters and each row's leave-one-out ratio, from
which `estimate` prints its likely range); --write puts them there. --reports keeps the
estimates' JSON in FILE (and reads it back when it exists) so the fit can be rerun without
estimating again. The work an estimate reports hardly depends on the calibration it ran
under (only where a product goes to whichever engine is faster), so reports of one
calibration serve the next fit.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import published  # noqa: E402

PARAMS = ["mme", "attention", "tpc", "hbm", "collective", "collective_overhead", "host_per_graph"]
BOUNDS = {"hbm": (0.5, 1.0), "collective_overhead": (0.0, 1e-4), "host_per_graph": (0.0, 0.02)}
MARK = "tables written by bench/estimate/calibrate.py --write"
LINEAR = {"collective_overhead", "host_per_graph"}  # may be 0: searched on a linear scale
UNCALIBRATED = {"mme": 1, "attention": 1, "tpc": 1, "hbm": 0.9, "collective": 1, "collective_overhead": 0,
                "host_per_graph": 1e-3}
DEFAULT_BOUNDS = (0.05, 1.0)


def op_seconds(work, p):
    """GaudiModel::seconds: the longest of the engines and HBM, plus the host side."""
    mme = p["attention"] if work["matrix"] == "attention" else p["mme"]
    return max(work["mme_s"] / mme, work["tpc_s"] / p["tpc"], work["hbm_s"] / p["hbm"]) + \
        work["host_link_s"] + work["host_memory_s"]


def step_seconds(report, p):
    """The step of `report` under parameters `p`: its ops, its graphs' host time, and its
    exposed communication scaled from the efficiency it was estimated with."""
    ops = sum(o["calls"] * op_seconds(o["work"], p) for o in report["ops"])
    # Exposed communication: its transfers scale with the ports' efficiency
    # (exactly for blocking collectives; overlapped ones approximately), and
    # each blocking collective exposes its overhead once per peer.
    c, n = report["calibration"], report["blocking_collective_peers"]
    transfers = max(0.0, report["breakdown"]["exposed_comm_s"] - n * c["collective_overhead"])
    comm = transfers * c["collective"] / p["collective"] + n * p["collective_overhead"]
    bubble = report["breakdown"].get("pipeline_bubble_s", 0.0)  # as estimated, not repriced
    return ops + report["graphs"] * p["host_per_graph"] + comm + bubble


def value(row, report, p):
    """The row's figure under `p`: tokens/s scaled by the step time, or the latency in ms."""
    seconds = step_seconds(report, p)
    if row["unit"] == "ms":
        return seconds * 1e3
    return report["tokens_per_s"] * report["step_time_s"] / seconds


def exercised(reports):
    """The parameters some row's step depends on."""
    used = {"hbm", "host_per_graph"}
    for r in reports:
        for o in r["ops"]:
            w = o["work"]
            if w["mme_s"] > 0:
                used.add("attention" if w["matrix"] == "attention" else "mme")
            if w["tpc_s"] > 0:
                used.add("tpc")
        if r["breakdown"]["exposed_comm_s"] > 0:
            used.add("collective")
        if r["blocking_collective_peers"] > 0:
            used.add("collective_overhead")
    return used


def loss(rows, reports, p):
    return sum(abs(math.log(published.ratio(row, value(row, rep, p)))) for row, rep in zip(rows, reports))


def to_x(k, v):
    """Parameter k's value v in the space Nelder-Mead searches: log for efficiencies and the
    like, a fraction of the range for the LINEAR ones (which may be 0)."""
    lo, hi = BOUNDS.get(k, DEFAULT_BOUNDS)
    return v / (hi - lo) if k in LINEAR else math.log(v)


def from_x(k, x):
    lo, hi = BOUNDS.get(k, DEFAULT_BOUNDS)
    return x * (hi - lo) if k in LINEAR else math.exp(x)


def fit(rows, reports, start):
    """Coordinate descent over the exercised parameters, golden-section in log space, then a
    Nelder-Mead polish: one coordinate at a time stalls where the loss has a kink (an absolute
    deviation at zero) or where parameters trade against each other."""
    p = dict(start)
    free = [k for k in PARAMS if k in exercised(reports)]
    for _ in range(12):
        before = loss(rows, reports, p)
        for k in free:
            lo, hi = BOUNDS.get(k, DEFAULT_BOUNDS)
            if k in LINEAR:
                a, b, to = lo, hi, (lambda x: x)
            else:
                a, b, to = math.log(lo), math.log(hi), math.exp

            def f(x):
                q = dict(p)
                q[k] = to(x)
                return loss(rows, reports, q)

            g = (math.sqrt(5) - 1) / 2
            c, d = b - g * (b - a), a + g * (b - a)
            fc, fd = f(c), f(d)
            for _ in range(40):
                if fc < fd:
                    b, d, fd = d, c, fc
                    c = b - g * (b - a)
                    fc = f(c)
                else:
                    a, c, fc = c, d, fd
                    d = a + g * (b - a)
                    fd = f(d)
            x = (a + b) / 2
            if f(x) < loss(rows, reports, p):
                p[k] = to(x)
        if before - loss(rows, reports, p) < 1e-9:
            break
    return nelder_mead(rows, reports, p, free)


def nelder_mead(rows, reports, p, free):
    """Nelder-Mead over `free` from `p` in to_x's space, each coordinate clamped to its bounds
    (a vertex beyond them pays its distance, so that the simplex does not stall out there),
    restarted from its best vertex until a restart gains nothing. Deterministic."""
    box = [tuple(to_x(k, v) for v in BOUNDS.get(k, DEFAULT_BOUNDS)) for k in free]

    def at(x):  # the parameters at point x, clamped to the box
        q = dict(p)
        for k, v, (lo, hi) in zip(free, x, box):
            q[k] = from_x(k, min(hi, max(lo, v)))
        return q

    def f(x):
        return loss(rows, reports, at(x)) + sum(max(0.0, lo - v, v - hi) for v, (lo, hi) in zip(x, box))

    best = [to_x(k, p[k]) for k in free]
    fbest = f(best)
    for _ in range(8):
        simplex = [best] + [[v + (0.2 if i == j else 0.0) for j, v in enumerate(best)] for i in range(len(free))]
        values = [f(x) for x in simplex]
        for _ in range(400 * len(free)):
            order = sorted(range(len(simplex)), key=values.__getitem__)
            simplex, values = [simplex[i] for i in order], [values[i] for i in order]
            if values[-1] - values[0] < 1e-13:
                break
            centroid = [sum(x[j] for x in simplex[:-1]) / len(free) for j in range(len(free))]
            worst = simplex[-1]

            def along(t):
                return [c + t * (w - c) for c, w in zip(centroid, worst)]

            reflected = along(-1.0)
            fr = f(reflected)
            if fr < values[0]:
                expanded = along(-2.0)
                fe = f(expanded)
                simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
            elif fr < values[-2]:
                simplex[-1], values[-1] = reflected, fr
            else:
                contracted = along(0.5 if fr >= values[-1] else -0.5)
                fc = f(contracted)
                if fc < min(fr, values[-1]):
                    simplex[-1], values[-1] = contracted, fc
                else:  # shrink towards the best vertex
                    simplex = [simplex[0]] + [[b + 0.5 * (v - b) for b, v in zip(simplex[0], x)] for x in simplex[1:]]
                    values = [values[0]] + [f(x) for x in simplex[1:]]
        i = min(range(len(simplex)), key=values.__getitem__)
        if fbest - values[i] < 1e-10:
            break
        best, fbest = simplex[i], values[i]
    return at(best)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(published.ROOT, "build", "hpu-train"))
    ap.add_argument("--reports", default="", help="JSON file of the estimates (read if it exists, else written)")
    ap.add_argument("--write", action="store_true", help="replace the tables in device/src/gaudi_calibration.cc")
    a = ap.parse_args()
    rows = published.ROWS
    if a.reports and os.path.exists(a.reports):
        with open(a.reports) as f:
            reports = json.load(f)
    else:
        reports = [j for j, _ in published.estimate_all(os.path.abspath(a.bin), rows)]
        if a.reports:
            with open(a.reports, "w") as f:
                json.dump(reports, f)
    uncalibrated = UNCALIBRATED
    # The pricing here is the estimate's: under the calibration each report was estimated with,
    # every row's figure comes back exactly (a pipelined row's ops are its slowest stage's).
    for row, rep in zip(rows, reports):
        here = value(row, rep, {k: rep["calibration"][k] for k in PARAMS})
        there = published.speed(row, rep)
        if abs(here / there - 1) > 1e-6:
            sys.exit(f"{row['model']} {row['setting']}: priced here {here:.6g}, by the estimate {there:.6g}")
    print("| gen | run | setting | published | uncalibrated | fit on all | leave-one-out | fits (peak) |")
    print("|---|---|---|---|---|---|---|---|")
    summary, calibrations, tables = [], [], []
    for gen in ["gaudi2", "gaudi3"]:
        idx = [i for i, r in enumerate(rows) if r["generation"] == gen]
        grows, greps = [rows[i] for i in idx], [reports[i] for i in idx]
        whole = fit(grows, greps, uncalibrated)
        loo = []
        for k in range(len(grows)):
            p = fit(grows[:k] + grows[k + 1:], greps[:k] + greps[k + 1:], whole)
            loo.append(published.ratio(grows[k], value(grows[k], greps[k], p)))
        # The C++ tables (device/src/gaudi_calibration.cc): the parameters, and the
        # leave-one-out rows estimate prints its likely range from.
        name = "kGaudi" + gen[len("gaudi"):]
        values = ", ".join(f"{whole[k]:.3g}" for k in PARAMS)
        calibrations.append(f"constexpr Calibration {name}Calibration{{{values}, kFitSource}};")
        rows_cpp = []
        for row, l in zip(grows, loo):
            mode = {"training": "kTraining", "inference": "kInference", "latency": "kLatency"}[row["kind"]]
            rows_cpp.append(f"    {{Mode::{mode}, {row['tokens_in']}, {row['tokens_out']}, {row['batch']}, "
                            f"{row['cards']}, {l:.3f}}},  // {row['model']}")
        tables.append(f"constexpr std::array<ValidationRow, {len(rows_cpp)}> {name}Rows{{{{\n" + "\n".join(rows_cpp) +
                      "\n}};\n")
        for row, rep, l in zip(grows, greps, loo):
            print(f"| {gen} | {row['model']} {row['kind']} | {row['setting']} | {row['published']:,} {row['unit']} | "
                  f"{published.ratio(row, value(row, rep, uncalibrated)):.2f} | "
                  f"{published.ratio(row, value(row, rep, whole)):.2f} | {l:.2f} | "
                  f"{'yes' if rep['fits'] else 'NO'} ({rep['peak_device_memory_bytes'] / 2**30:.1f} GiB) |")
        within = sum(1 for l in loo if 0.8 <= l <= 1.2)
        free = [k for k in PARAMS if k in exercised(greps)]
        summary.append(f"{gen}: {len(grows)} rows, {len(free)} parameters fitted ({', '.join(free)}); "
                       f"leave-one-out within +-20%: {within} of {len(loo)}, range {min(loo):.2f} .. {max(loo):.2f}; "
                       "fit on all rows: " + ", ".join(f"{k} {whole[k]:.4g}" for k in PARAMS))
    print()
    for s in summary:
        print(s)
    block = "\n".join(calibrations) + "\n\n" + "\n".join(tables) + "\n"
    if not a.write:
        print("\n" + block)
        return
    path = os.path.join(published.ROOT, "device", "src", "gaudi_calibration.cc")
    with open(path) as f:
        text = f.read()
    begin, end = "// BEGIN " + MARK + "\n", "// END " + MARK + "\n"
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    with open(path + ".tmp", "w") as f:
        f.write(head + begin + block + end + tail)
    os.replace(path + ".tmp", path)
    print(f"\nwrote the tables of {path}")


if __name__ == "__main__":
    main()
