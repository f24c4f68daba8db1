// Spec readers: the two input forms agree, and every validation rule fails with a message that
// names what is wrong and where.
#include <gtest/gtest.h>

#include <sstream>

#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

TEST(ParsePattern, ExplicitAndImplicit) {
  auto p = parse_einsum_pattern("ij, j -> i");
  EXPECT_EQ(p.inputs, (std::vector<std::string>{"ij", "j"}));
  EXPECT_EQ(p.output, "i");
  p = parse_einsum_pattern("ij,jk");  // numpy's implicit output: once-used indices, ASCII order
  EXPECT_EQ(p.output, "ik");
  p = parse_einsum_pattern("ba,ac");
  EXPECT_EQ(p.output, "bc");
  p = parse_einsum_pattern("ij,->ij");
  EXPECT_EQ(p.inputs, (std::vector<std::string>{"ij", ""}));
  p = parse_einsum_pattern("ij,ji->");
  EXPECT_EQ(p.output, "");
}

// numpy's broadcasting forms, read with the operands' shapes: "..." expands to fresh letters
// (A, B, ... unless used) aligned at the right, implicit outputs put its axes first, size-1 axes
// that broadcast are dropped from their operand and array, and lengths of 0 are accepted.
struct Expanded {
  const char* einsum;
  std::vector<std::string> shapes;
  const char* expect;                 // the einsum after expansion and broadcasting
  std::vector<std::string> squeezed;  // "NAME=shape" of arrays that lost axes
};

TEST(ParseSpec, EllipsisBroadcastingAndEmptyAxes) {
  const std::vector<Expanded> cases = {
      {"...ij,...jk->...ik", {"A=5x3x4", "B=5x4x2"}, "Aij,Ajk->Aik", {}},
      {"...ij,...jk", {"A=5x3x4", "B=4x2"}, "Aij,jk->Aik", {}},                 // implicit, aligned
      {"...ij,...jk", {"A=5x1x3x4", "B=7x4x2"}, "Aij,Bjk->ABik", {"A=5x3x4"}},  // size 1 drops
      {"i...,i...->...", {"A=3x2x4", "B=3x1x4"}, "iAB,iB->AB", {"B=3x4"}},
      {"...->...", {"A="}, "->", {}},                        // a scalar's ellipsis is empty
      {"A...,...->...A", {"A=2x3", "B=3"}, "AB,B->BA", {}},  // 'A' taken: the next letter
      {"ij,ij->j", {"A=10x2", "B=1x2"}, "ij,j->j", {"B=2"}},
      {"ij,ij->ij", {"A=1x2", "B=1x2"}, "ij,ij->ij", {}},  // all of length 1: no broadcast
      {"ij,jk->ik", {"A=0x3", "B=3x2"}, "ij,jk->ik", {}},
      {"ij,jk->ik", {"A=2x0", "B=0x2"}, "ij,jk->ik", {}},
  };
  for (const auto& c : cases) {
    SpecFlags flags;
    flags.shapes = c.shapes;
    const auto e = parse_spec_flags(c.einsum, flags);
    EXPECT_EQ(e.einsum_string(), c.expect) << c.einsum;
    for (const auto& sq : c.squeezed) {  // "NAME=LxL..."
      const std::string name = sq.substr(0, sq.find('='));
      std::vector<Length> want;
      std::stringstream dims(sq.substr(sq.find('=') + 1));
      for (std::string d; std::getline(dims, d, 'x');) want.push_back(Length::of(std::stoll(d)));
      EXPECT_EQ(e.arrays.at(name).shape, want) << c.einsum << " " << sq;
    }
  }
  // A batch row shorter than the first is an error that names it, with or without an ellipsis
  // (found by the spec fuzzer: the ellipsis's rank check read past the shorter row).
  for (const char* einsum : {"ij,...j->i", "ij,j->i"}) {
    SpecFlags flags;
    flags.batch = "A,B;C";
    flags.shapes = {"A=96x4", "B=4", "C=4"};
    try {
      parse_spec_flags(einsum, flags);
      ADD_FAILURE() << einsum << ": a short batch row was accepted";
    } catch (const SpecError& err) {
      EXPECT_NE(std::string(err.what()).find("row 1"), std::string::npos) << err.what();
    }
  }
  // The JSON reader expands alike.
  const auto j = parse_spec_text(
      R"({"einsum":"...ij,...jk->...ik","batch":[["X","Y"]],"shapes":{"X":[5,1,3,4],"Y":[7,4,2]}})");
  EXPECT_EQ(j.einsum_string(), "Aij,Bjk->ABik");
  EXPECT_EQ(j.arrays.at("X").shape,
            (std::vector<Length>{Length::of(5), Length::of(3), Length::of(4)}));
}

TEST(ParseSpec, FlagsAndJsonAgree) {
  SpecFlags flags;
  flags.batch = "A,B;A,C";
  flags.shapes = {"A=96x4", "B=4", "C=4"};
  flags.dtypes = {"f64", "C=f32"};
  const auto from_flags = parse_spec_flags("ij,j->i", flags);
  const auto from_json = parse_spec_text(
      R"({"einsum":"ij,j->i","batch":[["A","B"],["A","C"]],"shapes":{"A":[96,4],"B":[4],"C":[4]},
          "dtype":"f64","dtypes":{"C":"f32"}})");
  EXPECT_EQ(from_flags, from_json);
  EXPECT_EQ(from_json.arrays.at("C").dtype, Dtype::f32);
  EXPECT_EQ(from_json.arrays.at("A").dtype, Dtype::f64);
  EXPECT_EQ(read_spec_argument(
                " {\"einsum\":\"ij,j->i\",\"batch\":[[\"A\",\"B\"],[\"A\",\"C\"]],"
                "\"shapes\":{\"A\":[96,4],\"B\":[4],\"C\":[4]},\"dtypes\":{\"C\":\"f32\"}}",
                {}),
            from_json);
}

TEST(ParseSpec, DefaultNamesSymbolsScalarsAndOps) {
  SpecFlags flags;
  flags.shapes = {"A=Nex4", "B=4", "C="};
  flags.join = "sqdiff";
  flags.agg = "max";
  const auto e = parse_spec_flags("ej,j,->e", flags);
  ASSERT_EQ(e.batch.size(), 1u);
  EXPECT_EQ(e.batch[0], (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(e.arrays.at("A").shape, (std::vector<Length>{Length::named("Ne"), Length::of(4)}));
  EXPECT_TRUE(e.arrays.at("C").shape.empty());
  EXPECT_EQ(e.join, JoinOp::sqdiff);
  EXPECT_EQ(e.agg, AggOp::max);
}

TEST(ParseSpec, RoundTripThroughJson) {
  const auto e = parse_spec_text(
      R"({"einsum":"xre,rij,xej->ei","batch":[["J","D","U0"],["J","D","U1"]],
          "shapes":{"J":[3,3,"Ne"],"D":[3,4,4],"U0":[3,"Ne",4],"U1":[3,"Ne",4]},
          "dtypes":{"J":"f32","D":"f64","U0":"f64","U1":"f64"},"ops":{"join":"mul","agg":"sum"}})");
  EXPECT_EQ(parse_spec_json(nlohmann::json::parse(to_json(e).dump())), e);
}

struct BadSpec {
  const char* name;
  const char* json;  // spec JSON, or empty when `einsum` + flags are used
  const char* einsum;
  std::vector<std::string> shapes;
  const char* expected;  // a substring of the error message
};

class BadSpecTest : public ::testing::TestWithParam<BadSpec> {};

TEST_P(BadSpecTest, NamesTheProblem) {
  const BadSpec& c = GetParam();
  try {
    if (*c.json) {
      parse_spec_text(c.json);
    } else {
      SpecFlags flags;
      flags.shapes = c.shapes;
      parse_spec_flags(c.einsum, flags);
    }
    FAIL() << "accepted a bad spec: " << c.name;
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << c.expected;
  }
}

// clang-format off
const BadSpec kBadSpecs[] = {
  {"bad_char", "", "ij,j#->i", {"A=2x2", "B=2"}, "unexpected character '#' at column 5"},
  {"lone_dash", "", "ij,j-i", {"A=2x2", "B=2"}, "'-' at column 5 must be followed by '>'"},
  {"two_arrows", "", "ij->i->j", {"A=2x2"}, "second '->' at column 6"},
  {"comma_in_output", "", "ij,j->i,j", {"A=2x2", "B=2"}, "unexpected ',' at column 8"},
  {"ellipsis_axes_not_in_output", "", "...ij->ij", {"A=3x2x2"}, "the output has no '...'"},
  {"two_ellipses", "", "...i...->i", {"A=2"}, "a second ellipsis '...' at column 5"},
  {"lone_period", "", "i.j->ij", {"A=2x2"}, "'.' at column 2 is not part of an ellipsis"},
  {"empty", "", "", {}, "einsum string is empty"},
  {"rank_mismatch", "", "ij,j->i", {"A=2x2x2", "B=2"}, "array 'A' has rank 3 but operand 0 ('ij') indexes it with 2 indices"},
  {"length_mismatch", "", "ij,j->i", {"A=2x3", "B=2"}, "index 'j' has length 3 at array 'A' axis 1 but length 2 at array 'B' axis 0"},
  {"output_not_in_input", "", "ij,j->k", {"A=2x2", "B=2"}, "output index 'k' does not appear in any input operand"},
  {"output_repeated", "", "ij,j->ii", {"A=2x2", "B=2"}, "index 'i' appears more than once"},
  {"missing_shape", "", "ij,j->i", {"A=2x2"}, "array 'B' (batch row 0, operand 1) has no shape"},
  {"negative_length_text", "", "ij->i", {"A=-1x2"}, "invalid length '-1'"},
  {"bad_length", "", "ij->i", {"A=2xq!"}, "axis 1: invalid length 'q!'"},
  {"unused_array", "", "ij->i", {"A=2x2", "Z=3"}, "array 'Z' has a shape but is not used"},
  {"row_too_short", R"({"einsum":"ij,j->i","batch":[["A","B"],["A"]],"shapes":{"A":[2,2],"B":[2]}})", "", {}, "batch row 1 has 1 arrays; expected 2"},
  {"empty_batch", R"({"einsum":"ij,j->i","batch":[],"shapes":{"A":[2,2],"B":[2]}})", "", {}, "batch is empty"},
  {"unknown_key", R"({"einsum":"ij->i","batch":[["A"]],"shapes":{"A":[2,2]},"dtyp":"f64"})", "", {}, "unknown key 'dtyp'"},
  {"missing_key", R"({"einsum":"ij->i","shapes":{"A":[2,2]}})", "", {}, "missing key 'batch'"},
  {"bad_dtype", R"({"einsum":"ij->i","batch":[["A"]],"shapes":{"A":[2,2]},"dtype":"f63"})", "", {}, "unknown dtype 'f63'"},
  {"dtype_without_shape", R"({"einsum":"ij->i","batch":[["A"]],"shapes":{"A":[2,2]},"dtypes":{"B":"f32"}})", "", {}, "dtypes.B: array 'B' has no shape"},
  {"negative_length", R"({"einsum":"ij->i","batch":[["A"]],"shapes":{"A":[2,-1]}})", "", {}, "shapes.A[1]: axis length must be 0 or more"},
  {"float_length", R"({"einsum":"ij->i","batch":[["A"]],"shapes":{"A":[2,2.5]}})", "", {}, "shapes.A[1]: expected a positive integer or a symbol string, got number"},
  {"name_not_string", R"({"einsum":"ij->i","batch":[["A", 3]],"shapes":{"A":[2,2]}})", "", {}, "batch[0][1]: expected an array name, got number"},
  {"bad_join", R"({"einsum":"ij->i","batch":[["A"]],"shapes":{"A":[2,2]},"ops":{"join":"pow"}})", "", {}, "join: unknown operator 'pow'"},
  {"bad_ops_key", R"({"einsum":"ij->i","batch":[["A"]],"shapes":{"A":[2,2]},"ops":{"reduce":"sum"}})", "", {}, "ops: unknown key 'reduce'"},
  {"not_json", R"({"einsum": )", "", {}, "spec JSON is not valid JSON"},
  {"number_out_of_range", R"({"einsum":"i->i","batch":[["A"]],"shapes":{"A":[1e99999]}})", "", {}, "spec JSON is not valid JSON"},
  {"not_object", R"([1,2])", "", {}, "expected an object, got array"},
  {"einsum_not_string", R"({"einsum":3,"batch":[["A"]],"shapes":{"A":[2]}})", "", {}, "'einsum' must be a string"},
  {"shape_conflict_across_rows", R"({"einsum":"ij,j->i","batch":[["A","B"],["C","B"]],"shapes":{"A":[2,3],"B":[3],"C":[4,3]}})", "", {}, "index 'i' has length 2 at array 'A' axis 0 but length 4 at array 'C' axis 0 (batch row 1, operand 0)"},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(Rules, BadSpecTest, ::testing::ValuesIn(kBadSpecs),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ParseSpec, DeepNestingIsAnErrorNotACrash) {
  const std::string deep = R"({"einsum":"i->i","batch":[["A"]],"shapes":{"A":)" +
                           std::string(100000, '[') + std::string(100000, ']') + "}}";
  try {
    parse_spec_text(deep);
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 64 levels"), std::string::npos)
        << e.what();
  }
}

TEST(ParseSpec, FlagErrors) {
  SpecFlags flags;
  flags.shapes = {"A2x2"};
  EXPECT_THROW(parse_spec_flags("ij->i", flags), SpecError);
  flags.shapes = {"A=2x2"};
  flags.dtypes = {"B=f32"};
  try {
    parse_spec_flags("ij->i", flags);
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("array 'B' has no --shape"), std::string::npos)
        << e.what();
  }
  flags.dtypes = {};
  EXPECT_THROW(
      read_spec_argument(R"({"einsum":"ij->i","batch":[["A"]],"shapes":{"A":[2,2]}})", flags),
      SpecError);
  EXPECT_THROW(read_spec_argument("@/nonexistent/spec.json", {}), SpecError);
}

}  // namespace
}  // namespace einsumdb
