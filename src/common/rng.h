// Rng: the one source of randomness in a run, with our own distribution code so that a seed gives
// the same numbers with any standard library. Streams are derived by key (for example seed,
// prompt, sample), so what a trajectory draws does not depend on the order in which anything else
// asked for numbers.
#pragma once

#include <cstdint>

namespace libra {

/// Mixes a 64-bit value (SplitMix64's finaliser); a good hash for stream keys.
uint64_t Mix64(uint64_t x);

/// xoshiro256** generator. A value type: copying it copies the stream position.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  /// A stream determined only by `seed` and the keys, independent of any other stream.
  static Rng ForKey(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0);

  uint64_t Next();
  /// Uniform in [0, 1), 53 bits.
  double Uniform();
  /// Uniform integer in [lo, hi]. REQUIRES: lo <= hi.
  int64_t UniformInt(int64_t lo, int64_t hi);
  bool Bernoulli(double p);
  /// Standard normal (Box-Muller, no cached second value, so every call consumes two draws).
  double Normal();
  /// exp(N(mu, sigma^2)).
  double LogNormal(double mu, double sigma);
  /// Exponential with the given mean.
  double Exponential(double mean);

  bool operator==(const Rng&) const = default;

 private:
  uint64_t s_[4];
};

}  // namespace libra
