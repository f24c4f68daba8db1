// The chain (A×B) + (C×(D×E)) of Sec. 9 of the EinDecomp paper as the baselines of
// bench/distributed.sh read it from their command line:
//   --shape square|skewed --s N [--repeat R] [--nb NB]
// square: every matrix s×s; skewed: A s×t, B t×s, C s×t, D t×w, E w×s with t = s/10, w = 10s.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

struct ChainArgs {
  std::string shape = "square";
  int s = 1024, repeat = 3, nb = 128;
  int t() const { return shape == "square" ? s : s / 10; }
  int w() const { return shape == "square" ? s : 10 * s; }
};

// Reads argv into `a` (its fields hold the defaults); false, with `usage` printed to stderr, for
// an unknown flag, a flag without its value, or a value out of range.
inline bool parse_chain_args(int argc, char** argv, const char* usage, ChainArgs& a) {
  bool ok = argc % 2 == 1;
  for (int k = 1; ok && k + 1 < argc; k += 2) {
    const std::string key = argv[k], value = argv[k + 1];
    if (key == "--shape")
      a.shape = value;
    else if (key == "--s")
      a.s = std::atoi(value.c_str());
    else if (key == "--repeat")
      a.repeat = std::atoi(value.c_str());
    else if (key == "--nb")
      a.nb = std::atoi(value.c_str());
    else
      ok = false;
  }
  ok =
      ok && (a.shape == "square" || a.shape == "skewed") && a.s >= 10 && a.repeat >= 1 && a.nb >= 1;
  if (!ok) std::fprintf(stderr, "usage: %s\n", usage);
  return ok;
}
