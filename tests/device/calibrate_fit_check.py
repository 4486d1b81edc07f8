#!/usr/bin/python3
"""bench/estimate/calibrate.py's fit on synthetic estimate reports whose true parameters are
known: it recovers them from exact figures, leave-one-out gives back every row, and one row
that misses by 30% for a reason outside the model (a least-absolute-deviations fit's point)
moves no identified parameter by more than 1%.

    /usr/bin/python3 tests/device/calibrate_fit_check.py
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "estimate"))
import calibrate  # noqa: E402

TRUE = {"mme": 0.8, "attention": 0.55, "tpc": 0.7, "hbm": 0.75, "collective": 0.9,
        "collective_overhead": 8e-6, "host_per_graph": 1.2e-3}


def report(mme_s, attention_s, tpc_s, hbm_s, comm_s, peers, graphs):
    """A report of one step: one op per resource, its exposed communication estimated under the
    uncalibrated parameters (transfers plus no overhead)."""
    def op(matrix, mme=0.0, tpc=0.0, hbm=0.0):
        return {"calls": 1, "work": {"mme_s": mme, "tpc_s": tpc, "hbm_s": hbm, "host_link_s": 0.0,
                                     "host_memory_s": 0.0, "matrix": matrix}}
    return {"ops": [op("product", mme=mme_s), op("attention", mme=attention_s), op("product", tpc=tpc_s),
                    op("product", hbm=hbm_s)],
            "calibration": dict(calibrate.UNCALIBRATED), "blocking_collective_peers": peers,
            "breakdown": {"exposed_comm_s": comm_s, "pipeline_bubble_s": 0.0}, "graphs": graphs,
            "tokens_per_s": 1000.0, "step_time_s": 1.0}


def rows_and_reports():
    """16 rows, each parameter dominant in some of them; figures priced under TRUE."""
    reps = []
    for i in range(16):
        w = [1.0 + ((i * 7 + j * 3) % 5) for j in range(5)]
        dominant = i % 5
        w[dominant] *= 8
        reps.append(report(0.1 * w[0], 0.05 * w[1], 0.04 * w[2], 0.06 * w[3], 0.02 * w[4] * (i % 3 > 0),
                           peers=(i % 4) * 500, graphs=1 + (i % 2) * 20))
    rows = [{"unit": "ms" if i % 4 == 3 else "tokens/s"} for i in range(len(reps))]
    for row, rep in zip(rows, reps):
        row["published"] = calibrate.value(row, rep, TRUE)
    return rows, reps


def check(condition, what):
    if not condition:
        sys.exit(f"FAILED: {what}")


def main():
    rows, reps = rows_and_reports()
    fitted = calibrate.fit(rows, reps, calibrate.UNCALIBRATED)
    for k, v in TRUE.items():
        check(abs(fitted[k] / v - 1) < 0.01, f"fit recovers {k}: {fitted[k]:.6g} against {v:.6g}")
    for i in range(len(rows)):
        p = calibrate.fit(rows[:i] + rows[i + 1:], reps[:i] + reps[i + 1:], fitted)
        r = calibrate.published.ratio(rows[i], calibrate.value(rows[i], reps[i], p))
        check(abs(r - 1) < 0.01, f"row {i} left out: {r:.4f}")
    # One row 30% slower than the model can know: the others still say every parameter.
    outlier = [dict(r) for r in rows]
    outlier[0]["published"] *= 1.3 if outlier[0]["unit"] == "ms" else 1 / 1.3
    robust = calibrate.fit(outlier, reps, calibrate.UNCALIBRATED)
    for k, v in TRUE.items():
        check(abs(robust[k] / v - 1) < 0.01, f"an outlier row moves {k}: {robust[k]:.6g} against {v:.6g}")
    r = calibrate.published.ratio(outlier[0], calibrate.value(outlier[0], reps[0], robust))
    check(abs(math.log(r) - math.log(1.3)) < 0.02, f"the outlier row keeps its miss: {r:.4f}")
    print("calibrate.py's fit: recovered, left out, robust to one outlier")


if __name__ == "__main__":
    main()
