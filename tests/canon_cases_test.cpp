// Canonicalization on the public cases and the paper's examples, plus golden keys.
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/tests/support/einsum_oracle.hpp"

namespace einsumdb {
namespace {

std::vector<nlohmann::json> read_jsonl(const std::string& name) {
  std::ifstream in(std::string(EINSUMDB_TEST_DATA) + "/" + name);
  EXPECT_TRUE(in.good()) << "missing test data " << name;
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

BatchedEinsum spec(const char* json) {
  return parse_spec_text(json);
}

TEST(IsomorphismCases, KeysEqualExactlyWhenIsomorphic) {
  const auto cases = read_jsonl("isomorphism.jsonl");
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    const auto a = parse_spec_json(c.at("a")), b = parse_spec_json(c.at("b"));
    const bool iso = c.at("iso").get<bool>();
    EXPECT_EQ(canonicalize(a).key == canonicalize(b).key, iso) << c.at("name");
    EXPECT_EQ(canonicalize(a).hash == canonicalize(b).hash, iso) << c.at("name");
    // The oracle the property tests rely on agrees with the labels too.
    EXPECT_EQ(testing::brute_force_isomorphic(a, b), iso) << c.at("name");
  }
}

TEST(PaperExamples, CanonicalFormOfExample6) {
  // C((1, 2, (i), ((ij), (ik)), ((A, B)))) = (1, 2, (a), ((ab), (ac)), ((A0, A1)))
  const auto c = canonicalize(spec(
      R"({"einsum":"ij,ik->i","batch":[["A","B"]],"shapes":{"A":[72,18],"B":[72,18]},"dtype":"f64"})"));
  EXPECT_EQ(c.form.einsum_string(), "ab,ac->a");
  EXPECT_EQ(c.form.batch, (std::vector<std::vector<std::string>>{{"A0", "A1"}}));
  EXPECT_EQ(c.key, "ab,ac->a;mul,sum;A0,A1;A0:f64[72,18],A1:f64[72,18]");
}

TEST(PaperExamples, IsomorphicEinsumsExample) {
  // ik,kj->ij with A(10x4), B(4x10) and rq,pr->pq with X(4x10), Y(10x4)
  const auto a = canonicalize(
      spec(R"({"einsum":"ik,kj->ij","batch":[["A","B"]],"shapes":{"A":[10,4],"B":[4,10]}})"));
  const auto b = canonicalize(
      spec(R"({"einsum":"rq,pr->pq","batch":[["X","Y"]],"shapes":{"X":[4,10],"Y":[10,4]}})"));
  ASSERT_EQ(a.key, b.key);
  // Composing the σ maps gives the paper's σ^I = {p->i, q->j, r->k} and σ^A = {Y->A, X->B}.
  std::map<char, char> index;
  for (const auto& [canon, in_b] : b.sigma.index) index[in_b] = a.sigma.index.at(canon);
  EXPECT_EQ(index, (std::map<char, char>{{'p', 'i'}, {'q', 'j'}, {'r', 'k'}}));
  std::map<std::string, std::string> array;
  for (const auto& [canon, in_b] : b.sigma.array) array[in_b] = a.sigma.array.at(canon);
  EXPECT_EQ(array, (std::map<std::string, std::string>{{"Y", "A"}, {"X", "B"}}));
}

TEST(GoldenKeys, StableTextAndHash) {
  // Keys are stored in databases and compared across machines: they must never drift.
  const auto c = canonicalize(spec(
      R"({"einsum":"ij,j->i","batch":[["A","B"],["A","C"]],"shapes":{"A":[96,4],"B":[4],"C":[4]},"dtype":"f64"})"));
  EXPECT_EQ(c.key, "ab,b->a;mul,sum;A0,A1|A0,A2;A0:f64[96,4],A1:f64[4],A2:f64[4]");
  EXPECT_EQ(c.hash, "7720a57c9fd03761d899d642954a0c12");
  EXPECT_EQ(hash_text(""), "99aa06d3014798d86001c324468d497f");  // XXH3-128 of the empty string
}

TEST(Operators, JoinAndAggregationAreInTheKey) {
  const char* base = R"({"einsum":"ij,jk->ik","batch":[["A","B"]],"shapes":{"A":[8,8],"B":[8,8]})";
  const auto mul_sum = canonicalize(spec((std::string(base) + "}").c_str()));
  const auto absdiff_max =
      canonicalize(spec((std::string(base) + R"(,"ops":{"join":"absdiff","agg":"max"}})").c_str()));
  const auto sqdiff_sum =
      canonicalize(spec((std::string(base) + R"(,"ops":{"join":"sqdiff"}})").c_str()));
  EXPECT_NE(mul_sum.key, absdiff_max.key);
  EXPECT_NE(mul_sum.key, sqdiff_sum.key);
  EXPECT_NE(mul_sum.structure_hash, absdiff_max.structure_hash);
}

TEST(Operators, NonCommutativeJoinKeepsOperandOrder) {
  // A[i,j] - B[j] and B[j] - A[i,j] differ; with mul they are the same computation.
  auto key = [](const char* einsum, const char* batch, const char* join) {
    return canonicalize(spec((std::string(R"({"einsum":")") + einsum + R"(","batch":[)" + batch +
                              R"(],"shapes":{"A":[3,4],"B":[4]},"ops":{"join":")" + join + "\"}}")
                                 .c_str()))
        .key;
  };
  EXPECT_EQ(key("ij,j->ij", R"(["A","B"])", "mul"), key("j,ij->ij", R"(["B","A"])", "mul"));
  EXPECT_NE(key("ij,j->ij", R"(["A","B"])", "sub"), key("j,ij->ij", R"(["B","A"])", "sub"));
  // Renaming indices and arrays is still free under a non-commutative join.
  EXPECT_EQ(key("ij,j->ij", R"(["A","B"])", "sub"), key("pq,q->pq", R"(["A","B"])", "sub"));
}

TEST(SymbolicLengths, EachSymbolIsItsOwnLengthClass) {
  auto c = [](const char* shapes) {
    return canonicalize(
        spec((std::string(R"({"einsum":"ej,ej->e","batch":[["U","V"]],"shapes":)") + shapes + "}")
                 .c_str()));
  };
  const auto ne = c(R"({"U":["Ne",4],"V":["Ne",4]})");
  const auto nelem = c(R"({"U":["Nelem",4],"V":["Nelem",4]})");
  const auto concrete = c(R"({"U":[10000,4],"V":[10000,4]})");
  EXPECT_EQ(ne.key, nelem.key);  // the symbol's name does not matter
  EXPECT_NE(ne.key, concrete.key);
  EXPECT_EQ(ne.structure_hash, concrete.structure_hash);
  EXPECT_EQ(ne.form.arrays.at("A0").shape[0], Length::named("N0"));
  EXPECT_EQ(ne.sigma.symbol.at("N0"), "Ne");
  // Two different symbols are not one symbol.
  const auto two = canonicalize(
      spec(R"({"einsum":"ej,fj->ef","batch":[["U","V"]],"shapes":{"U":["Ne",4],"V":["Nf",4]}})"));
  const auto one = canonicalize(
      spec(R"({"einsum":"ej,fj->ef","batch":[["U","V"]],"shapes":{"U":["Ne",4],"V":["Ne",4]}})"));
  EXPECT_NE(two.key, one.key);
}

TEST(DgFem, EveryWorkloadCanonicalizesAndSizesShareStructure) {
  const auto cases = read_jsonl("dgfem.jsonl");
  ASSERT_EQ(cases.size(), 60u);
  std::set<std::string> keys;
  std::map<std::string, std::set<std::string>> structures;  // operator and b -> structure hashes
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    const auto canon = canonicalize(parse_spec_json(c.at("spec")));
    keys.insert(canon.key);
    const std::string op = name.substr(0, name.find('_'));
    const std::string b = name.substr(name.rfind('_'));
    structures[op + b].insert(canon.structure_hash);
    EXPECT_EQ(apply(canon.sigma, canon.form), parse_spec_json(c.at("spec"))) << name;
  }
  EXPECT_EQ(keys.size(), cases.size());  // every workload is its own computation
  for (const auto& [group, hashes] : structures) EXPECT_EQ(hashes.size(), 1u) << group;
}

TEST(Figure1, PaperPairIsIsomorphic) {
  const auto cases = read_jsonl("isomorphism.jsonl");
  const auto& fig = cases.front();
  ASSERT_EQ(fig.at("name"), "figure1");
  const auto a = canonicalize(parse_spec_json(fig.at("a")));
  const auto b = canonicalize(parse_spec_json(fig.at("b")));
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.form, b.form);
}

}  // namespace
}  // namespace einsumdb
