// Where this process sits in the job, as resolved from the cluster
// environment and the trainer's devices-per-node / num_nodes.
// Thread-safety: a plain value.
#pragma once

#include <string>

namespace hpu::comm {

// The trainer's request: processes per node (trainer.devices) and nodes.
struct Topology {
  int devicesPerNode = 1;
  int numNodes = 1;
};

struct ClusterInfo {
  std::string environment = "LightningEnvironment";  // name of the environment that resolved it
  std::string masterAddr = "127.0.0.1";  // where global rank 0 listens (MASTER_ADDR)
  int masterPort = 0;                    // 1..65535, or 0: the launcher picks a free port
  int worldSize = 1;                     // processes in the job = numNodes x localWorldSize
  int globalRank = 0;
  int localRank = 0;
  int nodeRank = 0;
  int numNodes = 1;
  int localWorldSize = 1;  // processes on this node = trainer.devices
  // True when something else (srun, mpirun, torchrun, or our own launcher
  // through LOCAL_RANK) started every process; false when this process must
  // spawn the other local ranks itself.
  bool createsProcessesExternally = false;
};

}  // namespace hpu::comm
