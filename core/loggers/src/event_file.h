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
#include <vector>

namespace hpu::core {

// One TFRecord: `data` framed with its length and their masked CRC-32Cs.
std::string tfRecord(std::string_view data);

// The data of the TFRecords in `path`, in order, up to the first record that
// is cut short or fails its CRC (a killed writer's last one); none if the
// file cannot be read.
std::vector<std::string> readTfRecords(const std::string& path);

// The event files (events.out.tfevents.*) directly in `dir`, sorted by name:
// the order TensorBoard reads a run's files in.
std::vector<std::string> eventFilesIn(const std::string& dir);

class EventFile {
 public:
  // Creates <dir>/events.out.tfevents.<unix seconds>.<host>.<pid>.<n><suffix>
  // (the name torch.utils.tensorboard gives it) and writes the version
  // record. The name sorts after the event files already in `dir`: where one
  // would sort later (a restart within the same second whose pid has more
  // digits, or another host's name), the seconds are one past the latest
  // file's. TensorBoard reads a run's files in name order: it would read this
  // one first and its Rust reader would drop this file's values at the
  // earlier file's steps, taking them for a run that restarted.
  // Throws Error naming the path and the system's reason.
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
