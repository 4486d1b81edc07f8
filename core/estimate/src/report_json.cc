#include <algorithm>

#include "hpu/core/estimate/report.h"

namespace hpu::core::estimate {

using nlohmann::json;

json jsonReport(const EstimateResult& r) {
  const StepTime& st = r.step;
  json j;
  j["subcommand"] = r.shape.predict ? "predict" : "fit";
  j["generation"] = r.generation;
  j["world_size"] = r.shape.world;
  j["step_time_s"] = st.seconds;
  j[r.per_token ? "tokens_per_s" : "samples_per_s"] = r.throughput;
  if (r.range) {
    j["tokens_per_s_range"] = {r.range->low, r.range->high};
    j["tokens_per_s_range_basis"] = {{"runs", r.range->rows},
                                     {"generation", r.range->from},
                                     {"loo_ratios", {r.range->rows_low, r.range->rows_high}},
                                     {"widening", r.range->widening},
                                     {"nearest", r.range->nearest}};
  }
  j["mfu"] = r.mfu;
  j["total_params"] = r.parameters;
  j["peak_device_memory_bytes"] = r.peak;
  j["device_memory_limit_bytes"] = r.limit.bytes;
  j["fits"] = r.fits;
  j["breakdown"] = {{"matrix_engine_s", st.breakdown.matrix},      {"vector_engine_s", st.breakdown.vector},
                    {"exposed_comm_s", st.breakdown.exposed_comm}, {"optimizer_s", st.breakdown.optimizer},
                    {"offload_s", st.breakdown.offload},           {"host_s", st.breakdown.host},
                    {"pipeline_bubble_s", st.breakdown.pipeline_bubble}};
  j["pipeline"] = {{"stages", r.shape.stages},
                   {"virtual_stages", r.shape.virtual_stages},
                   {"micro_batches", r.shape.accumulate},
                   {"transfers_s", st.pipeline_transfers}};
  // One entry per class of identical ranks: the ranks it stands for.
  j["per_rank"] = json::array();
  for (const RankMemory& m : r.ranks)
    j["per_rank"].push_back({{"rank", m.rank},
                             {"ranks", {m.rank, m.last_rank}},
                             {"pipeline_stage", m.stage},
                             {"peak_bytes", m.peak},
                             {"peak_at", m.peak_at},
                             {"persistent_bytes", m.persistent},
                             {"weights_bytes", m.weights},
                             {"optimizer_state_bytes", m.optimizer_state},
                             {"gradients_bytes", m.gradients},
                             {"activations_bytes", m.activations}});
  // Every op of the step rank, most expensive first; top_ops are the first
  // 10. With each op's work per call at every efficiency 1 (GaudiModel::seconds
  // prices it), from which bench/estimate/calibrate.py recomputes the step
  // under other efficiencies.
  j["ops"] = json::array();
  const auto matrix_kind = [](device::Work::Matrix m) {
    return m == device::Work::Matrix::kAttention ? "attention" : "product";
  };
  for (const OpTotal& o : r.ops)
    j["ops"].push_back({{"op", o.op},
                        {"operands", o.operands},
                        {"calls", o.calls},
                        {"seconds", o.seconds},
                        {"work",
                         {{"mme_s", o.work.mme},
                          {"matrix", matrix_kind(o.work.matrix)},
                          {"tpc_s", o.work.tpc},
                          {"hbm_s", o.work.hbm},
                          {"host_link_s", o.work.host_link},
                          {"host_memory_s", o.work.host_memory}}}});
  j["graphs"] = st.graphs;
  j["blocking_collectives"] = st.blocking_collectives;
  j["blocking_collective_peers"] = st.blocking_collective_peers;
  const device::Calibration& c = r.calibration;
  j["calibration"] = {{"mme", c.mme},
                      {"attention", c.attention},
                      {"tpc", c.tpc},
                      {"hbm", c.hbm},
                      {"collective", c.collective},
                      {"collective_overhead", c.collective_overhead},
                      {"host_per_graph", c.host_per_graph}};
  j["top_ops"] = json::array();
  for (std::size_t i = 0; i < std::min<std::size_t>(10, r.ops.size()); ++i) j["top_ops"].push_back(j["ops"][i]);
  j["assumptions"] = json::object();
  for (const device::Assumption& a : r.assumptions)
    j["assumptions"][a.name] = {{"value", a.value}, {"unit", a.unit}, {"source", a.source}};
  if (!r.fits) {
    j["suggestions"] = json::array();
    for (const FitChange& change : r.suggestions) j["suggestions"].push_back(describe(change));
  }
  return j;
}

}  // namespace hpu::core::estimate
