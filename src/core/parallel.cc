#include "alps/core/parallel.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <vector>

namespace alps {

namespace {

// Workers started on first use and kept: a pass of the ALPS or PCG kernels takes milliseconds, so starting
// threads for each one cost a noticeable share of the solve (kernel time in clone, mmap of stacks, page faults).
class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& w : workers_) w.join();
  }

  // False when another job holds the pool (the caller then runs its tasks itself).
  bool try_run(int tasks, const std::function<void(int)>& task) {
    std::unique_lock<std::mutex> job(job_mutex_, std::try_to_lock);
    if (!job.owns_lock() || in_worker()) return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (static_cast<int>(workers_.size()) < tasks - 1)
        workers_.emplace_back([this, id = static_cast<int>(workers_.size()) + 1] { work(id); });
      task_ = &task;
      tasks_ = tasks;
      pending_ = tasks - 1;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    std::exception_ptr mine;
    try {
      task(0);
    } catch (...) {
      mine = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    task_ = nullptr;
    if (mine) std::rethrow_exception(mine);
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  static bool& in_worker() {
    thread_local bool flag = false;
    return flag;
  }

  // Worker `id` runs task `id` of every job that has that many tasks.
  void work(int id) {
    in_worker() = true;
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (id >= tasks_) continue;
      const std::function<void(int)>* task = task_;
      lock.unlock();
      std::exception_ptr error;
      try {
        (*task)(id);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error && !error_) error_ = error;
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex job_mutex_;  // one job at a time
  std::mutex mutex_;      // guards everything below
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* task_ = nullptr;
  int tasks_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

void run_tasks(int tasks, const std::function<void(int)>& task) {
  if (tasks <= 1 || !pool().try_run(tasks, task))
    for (int t = 0; t < tasks; ++t) task(t);
}

}  // namespace alps
