#pragma once
// Concurrent work on one GPU: tasks that each queue their kernels on a CUDA stream of their own, so that one task's
// host waits, memory-bound passes and factorizations fill the gaps between another's matrix products. Only a CUDA
// build has streams (device_streams_gpu.cc); elsewhere (device_streams_cpu.cc, and for a CPU device in either build)
// the tasks run one after another on the calling thread.
#include <c10/core/Device.h>

#include <functional>

namespace alps {

/// Waits until the work this thread queued on `device` is done, the work of the streams its stream waits for
/// included (nothing to wait for on the CPU): a wall-clock phase that ends without it on a GPU counts only the
/// launches, and the next phase pays for the rest. Concurrent tasks of run_on_streams wait only for their own.
void synchronize(const c10::Device& device);

/// Runs task(i) for i = 0 .. n - 1 and returns when every task has returned. On a CUDA `device` each task runs on a
/// thread of its own whose current stream is a stream of its own; that stream first waits for the work the calling
/// thread had queued on its current stream, and before this returns the calling thread's stream waits for every
/// task's work (the host does not wait: synchronize() does). A tensor a task allocates belongs to the task's stream:
/// tasks must not share tensors they create. Task 0 should be the longest: its stream has the default priority and
/// the others' a higher one, so that shorter tasks are not held up behind its kernels. The first exception in task
/// order is rethrown once every task has ended. Elsewhere the tasks run in order on the calling thread and the first
/// exception ends the call.
void run_on_streams(const c10::Device& device, int n, const std::function<void(int)>& task);

}  // namespace alps
