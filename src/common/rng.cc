#include "common/rng.h"

#include <cmath>
#include <numbers>

#include "common/check.h"

namespace libra {
namespace {

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : s_) {
    x = Mix64(x);
    s = x;
  }
}

Rng Rng::ForKey(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  return Rng(Mix64(Mix64(Mix64(Mix64(seed) ^ a) ^ b) ^ c));
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

int64_t Rng::UniformInt(int64_t lo, int64_t hi) {
  LIBRA_CHECK(lo <= hi) << lo << " > " << hi;
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
  if (span == 0) return static_cast<int64_t>(Next());  // the full 64-bit range
  // Rejection sampling removes the modulo bias.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  uint64_t x = Next();
  while (x >= limit) x = Next();
  return lo + static_cast<int64_t>(x % span);
}

bool Rng::Bernoulli(double p) { return Uniform() < p; }

double Rng::Normal() {
  const double u1 = 1.0 - Uniform();  // (0, 1]: log is finite
  const double u2 = Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::LogNormal(double mu, double sigma) { return std::exp(mu + sigma * Normal()); }

double Rng::Exponential(double mean) { return -mean * std::log(1.0 - Uniform()); }

}  // namespace libra
