#pragma once
// The processes of one `alps prune` run and what they tell each other: sums of statistics reduced to the rank that
// owns a linear, pruned weights broadcast from it, agreement on a plan, and markers in the rendezvous store (a
// state file written). The pipeline talks to this interface only; a run of one process gets the form that does
// nothing, and c10d's process groups (Gloo between CPU processes, NCCL between GPUs) serve the others
// (docs/distributed.md). Every rank must make the same calls in the same order; `what` names the step for errors.
#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alps/dist/launch.h"

namespace alps::dist {

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "none" (one process), "gloo" or "nccl".
  virtual std::string backend() const = 0;
  /// Each rank's host and compute device ("host cuda:1"), in rank order, as the ranks met; empty for one process.
  virtual std::vector<std::string> places() const = 0;

  /// Sums `t` over the ranks into `owner`'s `t` (float, double or int64, any device); on the other ranks `t` is
  /// left unspecified. The sum's order is fixed by the backend, not by timing.
  virtual void reduce_sum(at::Tensor& t, int owner, const std::string& what) = 0;
  /// Every rank's `t` (same shape and dtype everywhere) becomes `root`'s, bit for bit.
  virtual void broadcast(at::Tensor& t, int root, const std::string& what) = 0;
  /// Marks `key` in the rendezvous store (from any thread); wait_for returns once every key is marked.
  virtual void publish(const std::string& key) = 0;
  virtual void wait_for(const std::vector<std::string>& keys, const std::string& what) = 0;
  /// Tells the other ranks, best effort, why this rank stops: their errors then name it.
  virtual void announce_failure(const std::string& why) = 0;
  /// A group of this group's ranks `members` (sorted, this rank among them), numbered 0 .. n - 1 in that order, for
  /// collectives only they make (the parts of a linear solved across ranks), on the same store and backend. Only the
  /// members call it, each with the same members and `name` (which tells apart groups of the same members); it
  /// returns once every member has opened it. A rank opens its groups in one order that all ranks agree on.
  virtual std::unique_ptr<Group> subgroup(const std::vector<int>& members, const std::string& name) = 0;

  /// Every rank's `t` becomes the sum over the ranks, the same bits on all (a reduce to 0, then its broadcast).
  void all_reduce_sum(at::Tensor& t, const std::string& what);
  /// Every rank's string, in rank order, on every rank.
  std::vector<std::string> all_gather(const std::string& mine, const std::string& what);
  /// Every rank's outcome of a step that may fail on some ranks only (`mine`: this rank's error message, empty when
  /// it succeeded). A rank that succeeded throws when another failed, naming the first that did and its message; a
  /// rank that failed returns, to rethrow its own error.
  void agree(const std::string& mine, const std::string& what);

  /// Bytes this rank sent or received through reduce_sum and broadcast (for the report's per-block figures).
  int64_t bytes_reduced() const { return bytes_reduced_; }
  int64_t bytes_broadcast() const { return bytes_broadcast_; }

 protected:
  int64_t bytes_reduced_ = 0;
  int64_t bytes_broadcast_ = 0;
};

/// A run of one process: rank 0 of 1; reductions and broadcasts leave tensors as they are.
std::unique_ptr<Group> single_process();

struct GroupOptions {
  /// "auto" (NCCL for a GPU device, Gloo otherwise), "gloo" or "nccl".
  std::string backend = "auto";
  /// How long a rank waits for the others (to meet, in a collective, for a marker) before it stops with an error.
  std::chrono::seconds timeout{1800};
};

/// Meets the other ranks of `launch` at its master's store and opens the process group; `device` is this rank's
/// compute device (NCCL moves tensors through it). Fails with an error naming the master, the backend and the
/// timeout when the others do not come, and refuses two NCCL ranks on one GPU of one host.
std::unique_ptr<Group> join(const Launch& launch, const c10::Device& device, const GroupOptions& options);

/// The backend `options.backend` names for `device`, checked against what this build has ("nccl" needs the CUDA
/// build and a GPU device). Throws alps::UsageError naming --dist-backend.
std::string resolve_backend(const std::string& backend, const c10::Device& device);

}  // namespace alps::dist
