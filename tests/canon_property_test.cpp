// Properties of canonicalization over random batched einsums: invariance under respelling,
// idempotence, σ round trips, and key equality exactly when an exhaustive search finds an
// isomorphism for near misses.
#include <random>

#include <gtest/gtest.h>

#include "canon/canonicalize.hpp"
#include "canon/error.hpp"
#include "tests/support/einsum_oracle.hpp"

namespace einsumdb {
namespace {

constexpr int kCases = 10000;

TEST(CanonProperties, RespellingIdempotenceAndSigma) {
  std::mt19937_64 rng(20261122);
  for (int t = 0; t < kCases; ++t) {
    const BatchedEinsum e = testing::random_einsum(rng);
    ASSERT_NO_THROW(validate(e)) << to_json(e).dump();
    const Canonical c = canonicalize(e);
    // σ maps take the canonical form back to the input exactly.
    ASSERT_EQ(apply(c.sigma, c.form), e) << to_json(e).dump();
    // Idempotence.
    const Canonical cc = canonicalize(c.form);
    ASSERT_EQ(cc.key, c.key) << to_json(e).dump();
    ASSERT_EQ(cc.form, c.form);
    // Any respelling has the same key and structure key.
    const BatchedEinsum r = testing::random_respelling(e, rng);
    const Canonical rc = canonicalize(r);
    ASSERT_EQ(rc.key, c.key) << to_json(e).dump() << "\n" << to_json(r).dump();
    ASSERT_EQ(rc.hash, c.hash);
    ASSERT_EQ(rc.structure_hash, c.structure_hash);
    ASSERT_EQ(apply(rc.sigma, rc.form), r);
  }
}

// The near misses of the issue: swap two indices of one operand, break a sharing, flip one
// dtype, reverse the output. Each may or may not stay isomorphic; the exhaustive search says.
std::vector<BatchedEinsum> near_misses(const BatchedEinsum& e, std::mt19937_64& rng) {
  std::vector<BatchedEinsum> out;
  for (std::size_t j = 0; j < e.inputs.size(); ++j) {
    const std::string& list = e.inputs[j];
    for (std::size_t a = 0; a + 1 < list.size(); ++a)
      if (list[a] != list[a + 1]) {
        BatchedEinsum m = e;
        std::swap(m.inputs[j][a], m.inputs[j][a + 1]);
        out.push_back(std::move(m));
        break;
      }
  }
  std::map<std::string, int> uses;
  for (const auto& row : e.batch)
    for (const auto& name : row) ++uses[name];
  for (std::size_t i = 0; i < e.batch.size(); ++i)
    for (std::size_t j = 0; j < e.inputs.size(); ++j)
      if (uses[e.batch[i][j]] > 1) {
        BatchedEinsum m = e;
        m.arrays["fresh"] = e.arrays.at(e.batch[i][j]);
        m.batch[i][j] = "fresh";
        out.push_back(std::move(m));
        i = e.batch.size();
        break;
      }
  {
    BatchedEinsum m = e;
    auto it = m.arrays.begin();
    std::advance(it, static_cast<long>(rng() % m.arrays.size()));
    it->second.dtype = it->second.dtype == Dtype::f64 ? Dtype::f32 : Dtype::f64;
    out.push_back(std::move(m));
  }
  if (e.output.size() >= 2) {
    BatchedEinsum m = e;
    std::reverse(m.output.begin(), m.output.end());
    out.push_back(std::move(m));
  }
  return out;
}

TEST(CanonProperties, NearMissesMatchExhaustiveSearch) {
  std::mt19937_64 rng(7);
  int checked = 0, non_isomorphic = 0, isomorphic = 0, invalid = 0;
  for (int t = 0; t < kCases; ++t) {
    const BatchedEinsum e = testing::random_einsum(rng);
    const std::string key = canonicalize(e).key;
    for (const BatchedEinsum& m : near_misses(e, rng)) {
      try {
        validate(m);
      } catch (const SpecError&) {
        ++invalid;  // e.g. swapped indices of different lengths
        continue;
      }
      // Respell the near miss so that equal keys cannot come from equal spelling alone.
      const BatchedEinsum r = testing::random_respelling(m, rng);
      const bool iso = testing::brute_force_isomorphic(e, r);
      ASSERT_EQ(canonicalize(r).key == key, iso)
          << "original: " << to_json(e).dump() << "\nnear miss: " << to_json(r).dump();
      ++checked;
      (iso ? isomorphic : non_isomorphic)++;
    }
  }
  // The generator must actually exercise both outcomes.
  EXPECT_GT(checked, kCases);
  EXPECT_GT(non_isomorphic, kCases / 2);
  EXPECT_GT(isomorphic, 100);
  RecordProperty("near_misses_checked", checked);
  RecordProperty("near_misses_isomorphic", isomorphic);
  RecordProperty("near_misses_invalid", invalid);
}

TEST(CanonProperties, RandomPairsMatchExhaustiveSearch) {
  // Small einsums drawn independently collide often enough to test both directions.
  std::mt19937_64 rng(11);
  testing::RandomEinsumOptions small;
  small.max_operands = 2;
  small.max_indices = 3;
  small.max_rank = 2;
  small.max_rows = 2;
  small.symbol_probability = 0.0;
  small.other_ops = false;
  small.max_length = 3;
  small.mixed_dtypes = false;
  int equal = 0;
  for (int t = 0; t < kCases; ++t) {
    const BatchedEinsum a = testing::random_einsum(rng, small);
    const BatchedEinsum b = testing::random_einsum(rng, small);
    const bool same_key = canonicalize(a).key == canonicalize(b).key;
    ASSERT_EQ(same_key, testing::brute_force_isomorphic(a, b)) << to_json(a).dump() << "\n"
                                                               << to_json(b).dump();
    equal += same_key;
  }
  EXPECT_GT(equal, 100);
  RecordProperty("isomorphic_pairs", equal);
}

TEST(CanonProperties, StructureHashIgnoresLengths) {
  std::mt19937_64 rng(3);
  for (int t = 0; t < 2000; ++t) {
    BatchedEinsum e = testing::random_einsum(rng);
    const Canonical c = canonicalize(e);
    // Map every concrete length to a new value (a bijection), keeping equal lengths equal.
    for (auto& [name, info] : e.arrays)
      for (auto& len : info.shape)
        if (!len.symbolic()) len.value = 100 - len.value * 7;
    const Canonical d = canonicalize(e);
    ASSERT_EQ(c.structure_hash, d.structure_hash) << to_json(e).dump();
  }
}

TEST(CanonProperties, DenseApiIsAlsoCanonical) {
  std::mt19937_64 rng(5);
  CanonOptions dense;
  dense.nauty = NautyApi::dense;
  for (int t = 0; t < 2000; ++t) {
    const BatchedEinsum e = testing::random_einsum(rng);
    const BatchedEinsum r = testing::random_respelling(e, rng);
    ASSERT_EQ(canonicalize(e, dense).key, canonicalize(r, dense).key) << to_json(e).dump();
  }
}

}  // namespace
}  // namespace einsumdb
