// SortedLog against a sorted multiset, over random inserts, erases and
// drops: the log keeps the same entries in order whether they sit inside it
// (a few) or on the heap (many), and across draining and filling again.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <iterator>
#include <set>
#include <vector>

#include "limit/sorted_log.hpp"

namespace ratchet::limit {
namespace {

enum class Op { kInsert, kErase, kEraseOne, kDrop };

RC_GTEST_PROP(SortedLogProperty, HoldsWhatASortedMultisetHoldsInlineAndOnTheHeap, ()) {
  SortedLog log;
  std::multiset<std::int64_t> want;
  const int steps = *rc::gen::inRange(1, 200);
  std::int64_t floor = 0;  // drops only move forward, as a window's do
  for (int i = 0; i < steps; ++i) {
    const Op op =
        *rc::gen::element(Op::kInsert, Op::kInsert, Op::kInsert, Op::kErase, Op::kEraseOne, Op::kDrop);
    const std::int64_t at = floor + *rc::gen::inRange<std::int64_t>(0, 30);
    const std::int64_t copies = *rc::gen::inRange<std::int64_t>(0, 6);
    switch (op) {
      case Op::kInsert:
        log.insert(at, copies);
        for (std::int64_t c = 0; c < copies; ++c) want.insert(at);
        break;
      case Op::kErase: {
        log.erase(at, copies);
        auto it = want.lower_bound(at);
        for (std::int64_t c = 0; c < copies && it != want.end() && *it == at; ++c) it = want.erase(it);
        break;
      }
      case Op::kEraseOne: {
        auto it = want.find(at);
        RC_ASSERT(log.erase_one(at) == (it != want.end()));
        if (it != want.end()) want.erase(it);
        break;
      }
      case Op::kDrop:
        floor = at;
        log.drop_through(at);
        want.erase(want.begin(), want.upper_bound(at));
        break;
    }
    const auto view = log.view();
    RC_ASSERT(std::vector<std::int64_t>(view.begin(), view.end()) ==
              std::vector<std::int64_t>(want.begin(), want.end()));
    RC_ASSERT(log.empty() == want.empty());
  }
}

}  // namespace
}  // namespace ratchet::limit
