"""The yardstick of the bench/core scripts: PyTorch training the same model, with the same
optimizer, data and thread count, in eager mode or under torch.compile; and the interleaved
rounds that compare it with hpu-train.

Run the scripts with the virtual environment's Python (scripts/install-deps.sh --bench makes
.venv/bench with PyTorch 2.13.0, CPU build).
"""
import statistics
import time

import torch


class TorchTrainer:
    """Trains `model` on batch(i) -> (inputs, targets) with `loss_fn` and `optimizer`, in bf16
    autocast when `bf16`, and the model under torch.compile when `compiled`. Built once per
    benchmark case: the first rate() call runs the warm-up steps (torch.compile compiles the
    forward and backward there), later calls only a few, so every round times steady steps."""

    def __init__(self, model, optimizer, batch, loss_fn, bf16=False, compiled=False):
        self.model, self.opt, self.batch, self.loss_fn, self.bf16 = model, optimizer, batch, loss_fn, bf16
        self.forward = torch.compile(model) if compiled else model
        self.steps_done = 0

    def step(self):
        x, y = self.batch(self.steps_done)
        self.steps_done += 1
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            out = self.forward(x)
        loss = self.loss_fn(out.float(), y)
        loss.backward()
        self.opt.step()

    def steps_per_second(self, steps, warmup=10, seconds=15.0):
        """Steps/s over `steps` timed steps, or fewer (at least 2) when they take longer than
        `seconds` (bf16 autocast on a CPU without bf16 instructions runs 20-30x slower than
        fp32). The first call runs `warmup` steps before (at least 2, as many as fit in
        `seconds` after the first: torch.compile compiles in them), later calls 2."""
        start = time.perf_counter()
        for i in range(warmup if self.steps_done == 0 else 2):
            self.step()
            if i >= 1 and time.perf_counter() - start > seconds:
                break
        t = time.perf_counter()
        done = 0
        while done < steps and (done < 2 or time.perf_counter() - t < seconds):
            self.step()
            done += 1
        return done / (time.perf_counter() - t)


def adam(params, lr=1e-3, **kw):
    """torch's fastest Adam on the CPU (fused: one kernel for every parameter's update)."""
    return torch.optim.Adam(params, lr=lr, fused=True, **kw)


def adamw(params, lr=1e-3, **kw):
    return torch.optim.AdamW(params, lr=lr, fused=True, **kw)


def interleave(runs, rounds, show=None):
    """Calls every run of `runs` (name -> callable giving one rate) once per round, in order
    (A B C A B C ...); returns name -> the rates. `show(round, rates)` after each round."""
    rates = {name: [] for name in runs}
    for r in range(rounds):
        for name, run in runs.items():
            rates[name].append(run())
        if show is not None:
            show(r, rates)
    return rates


def summary(values):
    """'median [min..max]' of a list of rates."""
    return f"{statistics.median(values):,.0f} [{min(values):,.0f}..{max(values):,.0f}]"
