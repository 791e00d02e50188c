#pragma once
// MT-Graph's schedule search (thesis 004, chapter 4.1, Algorithm 1): coordinate descent over
// the pointer matrix of a compound task. Row by row, sample candidate pointer rows for one
// model (the others fixed at their best so far), profile each, keep the fastest; repeat for
// some rounds and return the fastest matrix ever profiled. The cost is measured, not modelled:
// `cost(rho)` runs the staged compound task and returns its latency.
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/staged_job.h"

namespace grove::serve {

struct MtGraphSearchOptions {
  int pointers = 2;    // P: stage boundaries per model (P + 1 stages)
  int rounds = 2;      // R
  int candidates = 6;  // M: rows sampled per model per round
  // The winner is profiled again against plain co-execution, alternately, this many times
  // each, and kept only if its median still wins: a noisy single profile must not pick a
  // schedule worse than no stages at all.
  int verify = 3;
  uint64_t seed = 0;
};

struct MtGraphRecord {
  PointerMatrix rho;
  double cost = 0;
};

struct MtGraphResult {
  MtGraphRecord best;   // after verification: possibly `start` itself
  MtGraphRecord start;  // every pointer at the end: one stage, plain co-execution
  bool verified = false;  // the search's winner beat `start` again in the verification
  // The verification's medians of the winner and of `start` (0 when none ran: the winner was `start`).
  double verified_cost = 0, plain_cost = 0;
  std::vector<MtGraphRecord> records;  // every profiled matrix, in order
};

// `ops[i]`: the number of nodes of model i's plan (pointer positions are 0..ops[i]).
MtGraphResult search_pointer_matrix(const std::vector<int32_t>& ops, const MtGraphSearchOptions& options,
                                    const std::function<double(const PointerMatrix&)>& cost);

// "[[3, 9], [12, 40]]"
std::string pointer_matrix_str(const PointerMatrix& rho);

}  // namespace grove::serve
