#include "alps/pipeline/state_writer.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "alps/core/error.h"
#include "alps/core/log.h"

namespace alps::pipeline {

StateWriter::~StateWriter() {
  try {
    wait();
  } catch (const std::exception& e) {
    spdlog::error("saving the resume state failed as well: {}", e.what());
  }
}

void StateWriter::start(ResumeState s, std::vector<std::pair<std::string, at::Tensor>> block_weights,
                        at::Tensor next_inputs) {
  wait();
  thread_ = std::thread([this, s = std::move(s), w = std::move(block_weights), x = std::move(next_inputs)] {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      dir_.save(s, w, x);
    } catch (...) {
      error_ = std::current_exception();
    }
    seconds_ = seconds_since(t0);
  });
}

double StateWriter::wait() {
  if (!thread_.joinable()) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  thread_.join();
  seconds_writing_ += seconds_;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return seconds_since(t0);
}

}  // namespace alps::pipeline
