#include "job_keys.h"

#include <sodium.h>

#include "sodium_init.h"

namespace hpu::comm::detail {
namespace {

CurveKeyPair curvePairFrom(const JobToken::Key& seed) {
  CurveKeyPair pair;
  crypto_box_seed_keypair(pair.publicKey.data(), pair.secretKey.data(), seed.data());
  return pair;
}

}  // namespace

JobKeys::JobKeys(const JobToken& token) {
  initSodium();
  helloMac = token.derive("hpu-train/hello-mac/v1");
  curveServer = curvePairFrom(token.derive("hpu-train/curve-server/v1"));
  curveClient = curvePairFrom(token.derive("hpu-train/curve-client/v1"));
  const JobToken::Key password = token.derive("hpu-train/data-plane-password/v1");
  dataPassword.resize(password.size() * 2 + 1);
  sodium_bin2hex(dataPassword.data(), dataPassword.size(), password.data(), password.size());
  dataPassword.pop_back();
  dataLink = token.derive("hpu-train/data-link/v1");
}

}  // namespace hpu::comm::detail
