// TimeQueue against std::deque, over the operations the limiters use on it:
// appends, pops and range erases at the front as times age out, inserts in
// order near the back, erases in the middle (a start taken back), clears and
// assigns. Both hold the same entries in the same order whether the queue
// keeps them in place (one), on the heap, or half popped before compacting.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <iterator>
#include <utility>
#include <vector>

#include "limit/time_queue.hpp"

namespace ratchet::limit {
namespace {

enum class Op { kPush, kPop, kPrune, kInsert, kEraseMiddle, kEraseLast, kClear, kAssign };

RC_GTEST_PROP(TimeQueueProperty, HoldsWhatADequeHolds, ()) {
  TimeQueue<std::int64_t> queue;
  std::deque<std::int64_t> want;
  std::int64_t now = 0;
  const int steps = *rc::gen::inRange(1, 400);
  for (int i = 0; i < steps; ++i) {
    const Op op = *rc::gen::element(Op::kPush, Op::kPush, Op::kPush, Op::kPush, Op::kPop, Op::kPrune,
                                    Op::kInsert, Op::kEraseMiddle, Op::kEraseLast, Op::kClear, Op::kAssign);
    now += *rc::gen::inRange<std::int64_t>(0, 5);
    switch (op) {
      case Op::kPush:
        queue.push_back(now);
        want.push_back(now);
        break;
      case Op::kPop:
        if (want.empty()) break;
        queue.pop_front();
        want.pop_front();
        break;
      case Op::kPrune: {  // what ages out: everything before a cutoff
        const std::int64_t cutoff = now - *rc::gen::inRange<std::int64_t>(0, 40);
        queue.erase(queue.begin(), std::lower_bound(queue.begin(), queue.end(), cutoff));
        want.erase(want.begin(), std::lower_bound(want.begin(), want.end(), cutoff));
        break;
      }
      case Op::kInsert: {  // a late reading, put in its place
        const std::int64_t at = now - *rc::gen::inRange<std::int64_t>(0, 20);
        const auto copies = static_cast<std::size_t>(*rc::gen::inRange(1, 4));
        queue.insert(std::upper_bound(queue.begin(), queue.end(), at), copies, at);
        want.insert(std::upper_bound(want.begin(), want.end(), at), copies, at);
        break;
      }
      case Op::kEraseMiddle: {
        if (want.empty()) break;
        const auto k = static_cast<std::ptrdiff_t>(*rc::gen::inRange<std::size_t>(0, want.size()));
        queue.erase(queue.begin() + k);
        want.erase(want.begin() + k);
        break;
      }
      case Op::kEraseLast: {  // found from the back, as a start taken back is
        if (want.empty()) break;
        const std::int64_t at = want[*rc::gen::inRange<std::size_t>(0, want.size())];
        auto q = std::find(queue.rbegin(), queue.rend(), at);
        auto w = std::find(want.rbegin(), want.rend(), at);
        queue.erase(std::next(q).base());
        want.erase(std::next(w).base());
        break;
      }
      case Op::kClear:
        queue.clear();
        want.clear();
        break;
      case Op::kAssign: {
        std::vector<std::int64_t> saved(*rc::gen::inRange<std::size_t>(0, 40), now);
        queue.assign(saved.begin(), saved.end());
        want.assign(saved.begin(), saved.end());
        break;
      }
    }
    RC_ASSERT(queue.size() == want.size());
    RC_ASSERT(queue.empty() == want.empty());
    RC_ASSERT(std::vector<std::int64_t>(queue.begin(), queue.end()) ==
              std::vector<std::int64_t>(want.begin(), want.end()));
    if (!want.empty()) {
      RC_ASSERT(queue.front() == want.front());
      RC_ASSERT(queue.back() == want.back());
      const auto k = *rc::gen::inRange<std::size_t>(0, want.size());
      RC_ASSERT(queue[k] == want[k]);
    }
  }
}

TEST(TimeQueue, PairsKeepTheirOrderAcrossDrainingAndFillingAgain) {
  TimeQueue<std::pair<std::int64_t, std::int64_t>> queue;
  static_assert(sizeof(queue) <= 32);
  queue.emplace_back(1, 1);
  EXPECT_EQ(queue.size(), 1u);
  for (std::int64_t t = 2; t < 100; ++t) queue.emplace_back(t, 1);
  for (std::int64_t t = 1; t < 100; ++t) {
    EXPECT_EQ(queue.front().first, t);
    queue.pop_front();
  }
  EXPECT_TRUE(queue.empty());
  queue.emplace_back(100, 2);
  EXPECT_EQ(queue.front(), std::make_pair(std::int64_t{100}, std::int64_t{2}));
}

}  // namespace
}  // namespace ratchet::limit
