#pragma once
// The resume state written on a thread of its own, so that the device computes the next block while a block's
// activations (gigabytes for a 7B model) go to disk. What a save writes, and in which order, is StateDir::save's:
// a run killed at any moment resumes from the last state.json in place, as with a save on the calling thread.
#include <ATen/core/Tensor.h>

#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "alps/pipeline/resume_state.h"

namespace alps::pipeline {

class StateWriter {
 public:
  explicit StateWriter(StateDir& dir) : dir_(dir) {}
  /// Waits for a save in flight; its error, if any, is logged (the run is already ending by another error).
  ~StateWriter();
  StateWriter(const StateWriter&) = delete;
  StateWriter& operator=(const StateWriter&) = delete;

  /// Starts saving `s` (after waiting for the previous save). The tensors are read while the save runs: the caller
  /// must not change them before wait() returns.
  void start(ResumeState s, std::vector<std::pair<std::string, at::Tensor>> block_weights, at::Tensor next_inputs);
  /// Waits for the save in flight, if any, and rethrows its error; returns the seconds waited.
  double wait();
  /// Seconds the saves took on their thread, summed over the run.
  double seconds_writing() const { return seconds_writing_; }

 private:
  StateDir& dir_;
  std::thread thread_;
  std::exception_ptr error_;
  double seconds_ = 0;          // written by the thread, read after join
  double seconds_writing_ = 0;  // joined saves
};

}  // namespace alps::pipeline
