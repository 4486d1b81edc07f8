// libFuzzer target: the control messages every rank sends rank 0's
// rendezvous server (and rank 0 sends back), decoded as the server and the
// clients decode what arrives on their sockets. Malformed input must come
// back as MalformedMessage; what decodes must encode and decode again to the
// same bytes.
#include <cstdint>
#include <cstdlib>

#include "wire/codec.h"
#include "wire/control_messages.h"

using namespace hpu::comm;
using namespace hpu::comm::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const JobToken::Key kMacKey{1, 2, 3};  // fuzz_seeds signs Hello / Welcome with it
  ControlMessage message;
  try {
    message = decode({reinterpret_cast<const std::byte*>(data), size}, kMacKey);
  } catch (const MalformedMessage&) {
    return 0;
  }
  const std::string once = encode(message, kMacKey);
  const std::string twice = encode(decode(std::as_bytes(std::span<const char>(once)), kMacKey), kMacKey);
  if (once != twice) std::abort();  // the codec does not round-trip
  return 0;
}
