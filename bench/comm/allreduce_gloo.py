"""One rank of torch.distributed's gloo allreduce, timed as bench_allreduce times ours.

    .venv/bench/bin/python allreduce_gloo.py <rank> <world_size> <port> <bytes:iterations,...>

Rendezvous on tcp://127.0.0.1:<port>, loopback only. For each plan entry:
float32 zeros, 10% (at least 2) untimed warm-up allreduces (sum), a barrier,
the timed iterations; each rank's mean time per allreduce is max-reduced and
rank 0 prints "<bytes> <seconds per allreduce>".
"""
import sys
import time

import torch
import torch.distributed as dist


def main():
    rank, world, port, plan = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    for entry in plan.split(","):
        size, iterations = (int(v) for v in entry.split(":"))
        data = torch.zeros(size // 4)
        for _ in range(max(2, iterations // 10)):
            dist.all_reduce(data)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iterations):
            dist.all_reduce(data)
        seconds = torch.tensor([(time.perf_counter() - start) / iterations], dtype=torch.float64)
        dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(size, f"{seconds.item():.9g}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
