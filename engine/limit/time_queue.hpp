// The queue a limiter keeps its recent times in (starts, replies, refusals):
// appended at the back, pruned at the front as they age out.
//
// boost's deque, not std::deque: libstdc++'s allocates a map and a block of
// 512 bytes as it is made, used or not, and a keyed limit makes a limiter,
// with a learned pace of its own, for each of up to a hundred thousand keys.
// This one allocates nothing while empty, and in blocks of 128 bytes, so a
// key that made a few calls holds a few of them.
#pragma once

#include <boost/container/deque.hpp>
#include <boost/container/options.hpp>

namespace ratchet::limit {

template <typename T>
using TimeQueue =
    boost::container::deque<T, void, boost::container::deque_options_t<boost::container::block_bytes<128>>>;

}  // namespace ratchet::limit
