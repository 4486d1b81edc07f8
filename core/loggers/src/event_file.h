// A TensorBoard event file: an append-only TFRecord stream of serialized
// Event protos. Each record is
//   uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
// (little-endian), and the first record is the Event with file_version
// "brain.Event:2". The file grows while TensorBoard may read it, so it is
// appended to, not replaced: a reader sees whole records and at most a
// partial last one, which TensorBoard's reader retries.
// Not thread-safe.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

namespace hpu::core {

// One TFRecord: `data` framed with its length and their masked CRC-32Cs.
std::string tfRecord(std::string_view data);

class EventFile {
 public:
  // Creates <dir>/events.out.tfevents.<unix seconds>.<host>.<pid>.<n><suffix>
  // (the name torch.utils.tensorboard gives it) and writes the version
  // record. Throws Error naming the path and the system's reason.
  EventFile(const std::string& dir, const std::string& suffix);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  // Appends a serialized Event. Written to the OS once `max_queue` records
  // wait or `flush_secs` passed since the last flush (SummaryWriter's rule).
  void append(const std::string& event, int max_queue, std::chrono::seconds flush_secs);
  void flush();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::string pending_;
  int queued_ = 0;
  std::chrono::steady_clock::time_point last_flush_;
};

// Seconds since the Unix epoch, as Event.wall_time holds them.
double wallTime();

}  // namespace hpu::core
