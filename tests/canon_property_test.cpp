// Properties of canonicalization over random batched einsums: invariance under respelling,
// idempotence, σ round trips, and key equality exactly when an exhaustive search finds an
// isomorphism for near misses.
#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/tests/support/einsum_oracle.hpp"

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
    ASSERT_EQ(apply(invert(c.sigma), e), c.form);  // and back
    // Idempotence.
    const Canonical cc = canonicalize(c.form);
    ASSERT_EQ(cc.key, c.key) << to_json(e).dump();
    ASSERT_EQ(cc.form, c.form);
    ASSERT_EQ(canonical_text(c.form), c.key);
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

// A query canonicalized without its structure labeling and given it later (add_structure, what a
// lookup that misses does) has the structure canonicalize() gives: the same key and hash, and
// lengths and σ that describe the input.
TEST(CanonProperties, StructureAddedLaterIsTheStructure) {
  std::mt19937_64 rng(29);
  for (int t = 0; t < 2000; ++t) {
    const BatchedEinsum e = testing::random_einsum(rng);
    const Canonical whole = canonicalize(e);
    Canonical c = canonicalize(e, {.structure = false});
    ASSERT_TRUE(c.structure_hash.empty());
    ASSERT_EQ(c.key, whole.key);
    add_structure(c);
    ASSERT_EQ(c.structure_key, whole.structure_key) << to_json(e).dump();
    ASSERT_EQ(c.structure_hash, whole.structure_hash);
    ASSERT_EQ(c.structure_lengths.size(), whole.structure_lengths.size());
    // Structure index k is the input's index σ_s(k), of the length the lengths give (symbols in
    // canonical names).
    const auto lengths = e.index_lengths();
    for (std::size_t k = 0; k < c.structure_lengths.size(); ++k) {
      const char input = c.structure_sigma.index.at(canonical_index_name(k));
      Length expected = lengths.at(input);
      if (expected.symbolic())
        for (const auto& [canonical, mine] : c.sigma.symbol)
          if (mine == expected.symbol) expected.symbol = canonical;
      ASSERT_EQ(c.structure_lengths[k], expected) << to_json(e).dump() << " index " << k;
    }
    ASSERT_EQ(c.structure_sigma.array.size(), whole.structure_sigma.array.size());
    for (const auto& [structure, input] : c.structure_sigma.array)
      ASSERT_TRUE(e.arrays.count(input)) << structure << " -> " << input;
    auto sorted = [](std::vector<std::size_t> v) {
      std::sort(v.begin(), v.end());
      return v;
    };
    ASSERT_EQ(sorted(c.structure_sigma.operand), sorted(whole.structure_sigma.operand));
    ASSERT_EQ(sorted(c.structure_sigma.row), sorted(whole.structure_sigma.row));
    add_structure(c);  // a second call changes nothing
    ASSERT_EQ(c.structure_hash, whole.structure_hash);
  }
}

// Every labeling method (the paper's digraph with sparse and dense nauty, the undirected
// equivalent with nauty and Traces) is canonical, and all agree on which einsums are isomorphic.
class LabelingMethods : public ::testing::TestWithParam<Labeling> {};

TEST_P(LabelingMethods, CanonicalAndAgreeWithTheKeyMethod) {
  std::mt19937_64 rng(5);
  CanonOptions method;
  method.labeling = GetParam();
  for (int t = 0; t < 2000; ++t) {
    const BatchedEinsum e = testing::random_einsum(rng);
    const BatchedEinsum r = testing::random_respelling(e, rng);
    const Canonical c = canonicalize(e, method);
    ASSERT_EQ(c.key, canonicalize(r, method).key) << to_json(e).dump();
    ASSERT_EQ(apply(c.sigma, c.form), e);
    // A near miss is told apart by this method exactly when the key method tells it apart.
    BatchedEinsum m = r;
    auto it = m.arrays.begin();
    it->second.dtype = it->second.dtype == Dtype::f64 ? Dtype::f32 : Dtype::f64;
    ASSERT_EQ(canonicalize(m, method).key == c.key, canonicalize(m).key == canonicalize(e).key);
  }
}

INSTANTIATE_TEST_SUITE_P(All, LabelingMethods,
                         ::testing::Values(Labeling::nauty_sparse_digraph,
                                           Labeling::nauty_dense_digraph, Labeling::nauty_sparse,
                                           Labeling::traces),
                         [](const auto& info) {
                           std::string name(to_string(info.param));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace einsumdb

namespace einsumdb {
namespace {

// Labeling each class of interchangeable rows once must decide isomorphism exactly as labeling
// every row does, on batches large enough to have big classes.
TEST(CanonProperties, TwinRowsDecideLikeTheFullGraph) {
  std::mt19937_64 rng(17);
  testing::RandomEinsumOptions many_rows;
  many_rows.max_rows = 10;
  many_rows.max_operands = 3;
  CanonOptions full;
  full.twin_rows = false;
  int multi_member_classes = 0;
  for (int t = 0; t < 2000; ++t) {
    many_rows.reuse_probability = (t % 5) * 0.2;
    const BatchedEinsum e = testing::random_einsum(rng, many_rows);
    const Canonical twin = canonicalize(e);
    multi_member_classes += twin.stats.row_classes < e.batch.size();
    const BatchedEinsum r = testing::random_respelling(e, rng);
    ASSERT_EQ(canonicalize(r).key, twin.key) << to_json(e).dump();
    ASSERT_EQ(apply(twin.sigma, twin.form), e);
    const std::string full_key = canonicalize(e, full).key;
    for (const BatchedEinsum& m : near_misses(e, rng)) {
      try {
        validate(m);
      } catch (const SpecError&) {
        continue;
      }
      const BatchedEinsum mr = testing::random_respelling(m, rng);
      ASSERT_EQ(canonicalize(mr).key == twin.key, canonicalize(mr, full).key == full_key)
          << to_json(e).dump() << "\n"
          << to_json(mr).dump();
    }
  }
  EXPECT_GT(multi_member_classes, 500);
}

// Complex and mixed workloads: the dtype of each operand is part of the key. A product in c64,
// in c128 and in f64 are three keys; an f64 operand times a c128 one keeps its key under every
// respelling, and differs from the same product with the dtypes of the two operands exchanged
// (the real operand then shares the output's other index).
TEST(CanonProperties, ComplexAndMixedDtypesArePartOfTheKey) {
  const auto product = [](Dtype a, Dtype b) {
    BatchedEinsum e;
    e.inputs = {"ik", "kj"};
    e.output = "ij";
    e.arrays["A"] = {{Length::of(5), Length::of(6)}, a};
    e.arrays["B"] = {{Length::of(6), Length::of(7)}, b};
    e.batch = {{"A", "B"}};
    return e;
  };
  const std::string c64 = canonicalize(product(Dtype::c64, Dtype::c64)).key;
  const std::string c128 = canonicalize(product(Dtype::c128, Dtype::c128)).key;
  const std::string f64 = canonicalize(product(Dtype::f64, Dtype::f64)).key;
  EXPECT_NE(c64, c128);
  EXPECT_NE(c128, f64);
  EXPECT_NE(c64, f64);
  const BatchedEinsum mixed = product(Dtype::f64, Dtype::c128);
  const Canonical c = canonicalize(mixed);
  EXPECT_EQ(apply(c.sigma, c.form), mixed);
  std::mt19937_64 rng(29);
  for (int t = 0; t < 20; ++t)
    EXPECT_EQ(canonicalize(testing::random_respelling(mixed, rng)).key, c.key);
  EXPECT_NE(canonicalize(product(Dtype::c128, Dtype::f64)).key, c.key);
  EXPECT_NE(c.key, c128);
}

TEST(CanonProperties, SixtyFourRowBatchIsInvariant) {
  // b = 64 rows of 4 operands sharing two of them, as in a DG-FEM operator applied to 64 fields.
  BatchedEinsum e;
  e.inputs = {"xre", "rij", "xej", "ej"};
  e.output = "ei";
  e.arrays["J"] = {{Length::of(3), Length::of(3), Length::named("Ne")}, Dtype::f64};
  e.arrays["D"] = {{Length::of(3), Length::of(10), Length::of(10)}, Dtype::f64};
  for (int r = 0; r < 64; ++r) {
    const std::string u = "U" + std::to_string(r), w = "W" + std::to_string(r);
    e.arrays[u] = {{Length::of(3), Length::named("Ne"), Length::of(10)}, Dtype::f64};
    e.arrays[w] = {{Length::named("Ne"), Length::of(10)}, r % 2 ? Dtype::f32 : Dtype::f64};
    e.batch.push_back({"J", "D", u, w});
  }
  std::mt19937_64 rng(23);
  const Canonical c = canonicalize(e);
  EXPECT_EQ(c.stats.row_classes, 2u);  // f32 and f64 fields
  EXPECT_EQ(apply(c.sigma, c.form), e);
  for (int t = 0; t < 20; ++t)
    EXPECT_EQ(canonicalize(testing::random_respelling(e, rng)).key, c.key);
  CanonOptions full;
  full.twin_rows = false;
  const BatchedEinsum r = testing::random_respelling(e, rng);
  EXPECT_EQ(canonicalize(r, full).key, canonicalize(e, full).key);
}

}  // namespace
}  // namespace einsumdb
