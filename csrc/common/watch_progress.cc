#include "common/watch_progress.h"

namespace hvd {

std::atomic<uint64_t>& WatchProgressCount() {
  static std::atomic<uint64_t> count{0};
  return count;
}

}  // namespace hvd
