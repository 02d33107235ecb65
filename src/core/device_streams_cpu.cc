// A CPU-only libtorch has no streams: the tasks run in order.
#include "alps/core/device_streams.h"

namespace alps {

void synchronize(const c10::Device&) {}

void run_on_streams(const c10::Device&, int n, const std::function<void(int)>& task) {
  for (int i = 0; i < n; ++i) task(i);
}

}  // namespace alps
