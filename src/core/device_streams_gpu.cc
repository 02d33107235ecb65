// Tasks on CUDA streams of their own, ordered after and before the calling thread's stream by events.
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <exception>
#include <thread>
#include <vector>

#include "alps/core/device.h"
#include "alps/core/device_streams.h"

namespace alps {

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) c10::cuda::getCurrentCUDAStream(device.has_index() ? device.index() : 0).synchronize();
}

void run_on_streams(const c10::Device& device, int n, const std::function<void(int)>& task) {
  if (!device.is_cuda() || n <= 1) {
    for (int i = 0; i < n; ++i) task(i);
    return;
  }
  // libtorch loads its CUDA linear algebra library at the first factorization, and two threads that both come
  // first fail ("lazy wrapper should be called at most once"): that first use happens here, on one thread.
  warm_up(device);
  const c10::DeviceIndex index = device.has_index() ? device.index() : 0;
  const c10::cuda::CUDAGuard on_device(index);
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(index);
  at::cuda::CUDAEvent queued;
  queued.record(caller);
  // Task 0, the longest, queues long throughput-bound products; the others' short kernels and host round trips would
  // wait behind each of them (on an H100, an 8192-wide eigendecomposition took 10x longer beside a 28672-wide
  // layer's products than alone), so their streams have the higher priority: the GPU starts their blocks first as
  // the products' blocks retire, and task 0 takes whatever they leave idle.
  std::vector<c10::cuda::CUDAStream> streams;
  for (int i = 0; i < n; ++i) streams.push_back(c10::cuda::getStreamFromPool(/*isHighPriority=*/i > 0, index));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  auto join = [&threads] {
    for (auto& t : threads) t.join();
  };
  try {
    for (int i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        try {
          const c10::cuda::CUDAGuard thread_device(index);
          const c10::cuda::CUDAStreamGuard own_stream(streams[static_cast<size_t>(i)]);
          queued.block(streams[static_cast<size_t>(i)]);
          task(i);
        } catch (...) {
          errors[static_cast<size_t>(i)] = std::current_exception();
        }
      });
  } catch (...) {  // no thread for the next task: the started ones end before the error leaves
    join();
    throw;
  }
  join();
  for (const auto& s : streams) {
    at::cuda::CUDAEvent done;
    done.record(s);
    done.block(caller);
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace alps
