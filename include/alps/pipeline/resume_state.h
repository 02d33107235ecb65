#pragma once
// The resume state of an interrupted `alps prune`, kept in OUT/.alps-state: the pruned weights of every finished
// block, the inputs of the next block, and state.json, which names them. state.json is written last and is the only
// file a resumed run trusts: what it names is written and synced before it, what it no longer names is removed after.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "alps/io/fingerprint.h"
#include "alps/pipeline/recipe.h"

namespace alps::pipeline {

struct ResumeState {
  nlohmann::json key;  ///< what must be the same for the continuation to equal an uninterrupted run
  int64_t next_block = 0;
  nlohmann::json layers = nlohmann::json::array();         ///< layer reports of the finished blocks
  nlohmann::json phase_seconds = nlohmann::json::object();
  nlohmann::json calibration = nlohmann::json::object();
  nlohmann::json units = nlohmann::json::array();  ///< the structured steps of the finished blocks
  nlohmann::json legs = nlohmann::json::array();   ///< the runs that pruned them (RunState::legs)
  /// The blocks' sparsities of a sparsity profile (--sparsity-profile owl), measured before block 0: null if none.
  nlohmann::json sparsity_profile;
  /// Whether the state holds the inputs of block next_block: not after the last block, whose outputs nothing reads
  /// (the evaluation runs the whole model on its own windows).
  bool has_inputs = true;
  /// The window ranges [begin, end) of those inputs, one file each: a distributed run's ranks write one range each
  /// (docs/distributed.md). Empty: one file holds every window (a run of one process, and states before format 4).
  std::vector<std::pair<int64_t, int64_t>> input_shards;
};

/// How the ranks of a distributed run share one resume state: each writes the shard of inputs it holds, rank 0
/// the rest (the pruned weights, state.json) once every rank's shard is on disk. A run of one process needs none.
struct StateSharing {
  int rank = 0;
  size_t shard = 0;  ///< this rank's entry of ResumeState::input_shards
  /// Called once this rank's shard of the inputs of `next_block` is on disk (ranks other than 0).
  std::function<void(int64_t next_block)> shard_written;
  /// Rank 0: returns once every other rank's shard of the inputs of `next_block` is on disk.
  std::function<void(int64_t next_block)> await_shards;
};

class StateDir {
 public:
  explicit StateDir(std::filesystem::path dir) : dir_(std::move(dir)) {}

  /// Called with next_block as soon as a state.json naming it is in place (what a run interrupted from then on
  /// resumes from).
  void on_saved(std::function<void(int64_t next_block)> f) { on_saved_ = std::move(f); }
  /// For a distributed run (before the first save).
  void share(StateSharing sharing) { sharing_ = std::move(sharing); }
  /// Saves the state reached before block `s.next_block`: that block's predecessor's pruned weights (none when
  /// next_block is 0), the inputs of block next_block (none when `next_inputs` is undefined: after the last block;
  /// with sharing, this rank's shard of them), then state.json; then removes what it superseded. With sharing,
  /// ranks other than 0 write their shard only.
  void save(const ResumeState& s, const std::vector<std::pair<std::string, at::Tensor>>& block_weights,
            const at::Tensor& next_inputs);
  /// Reads state.json and checks that every file it names is there; errors say what is damaged and what to do.
  /// `tidy`: also removes what a run that died while saving left (one rank of a distributed run does it).
  ResumeState load(bool tidy = true) const;
  /// Pruned weights of block `b`, as saved.
  std::vector<std::pair<std::string, at::Tensor>> load_block(int64_t b) const;
  /// Windows [begin, end) of the inputs of block `s.next_block`, on the host, from whichever shards hold them
  /// (undefined when the state holds none); end -1: all.
  at::Tensor load_inputs(const ResumeState& s, int64_t begin = 0, int64_t end = -1) const;

 private:
  std::filesystem::path block_file(int64_t b) const;
  std::filesystem::path inputs_file(int64_t b, const std::vector<std::pair<int64_t, int64_t>>& shards,
                                    size_t shard) const;
  /// The inputs files of the state at `next_block` with these shards: one per shard (one for every window without
  /// shards); none when it holds no inputs.
  std::vector<std::filesystem::path> inputs_files(int64_t next_block,
                                                  const std::vector<std::pair<int64_t, int64_t>>& shards,
                                                  bool has_inputs) const;
  /// Removes what the state at `next_block`, whose inputs are `inputs`, does not name. Inputs of later blocks and
  /// files being written (temporary names) only when `alone`: while a distributed run goes on, its other ranks may
  /// be writing their shards of the next block's inputs.
  void remove_unreferenced(int64_t next_block, const std::vector<std::filesystem::path>& inputs, bool alone) const;
  std::filesystem::path dir_;
  std::function<void(int64_t)> on_saved_;
  StateSharing sharing_;
};

/// What must be the same for a continuation to equal an uninterrupted run: the recipe's knobs that change the result
/// (RecipeKnob::affects_result; the evaluation after pruning neither), the model files and the calibration text, and
/// the routers the plan prunes (RunPlan::pruned_routers: the same recipe gave none before alps pruned routers).
/// `calibration` is the resolved source, or empty when the run reads none or it cannot be found any more;
/// `safetensors`: how the model's weight files are fingerprinted (io::Hashed).
nlohmann::json resume_key(const Recipe& r, const std::filesystem::path& model_dir,
                          const std::filesystem::path& calibration, const std::vector<std::string>& routers,
                          io::Hashed safetensors = io::Hashed::kHeader);

/// One line per field in which two resume keys differ, naming it as the user gives it ("--sparsity/--pattern
/// (recipe \"pattern\"): ...", "model file config.json: content changed", ...). Empty when they match.
std::vector<std::string> resume_key_differences(const nlohmann::json& saved, const nlohmann::json& now);
/// The same for any two keys of the form resume_key (and job_key, whose "run" fields are compared too), each line
/// saying "<field>: <a_says> A, <b_says> B"; when `b_says` names a rank ("rank 2 has"), its files are named as that
/// rank's.
std::vector<std::string> job_key_differences(const nlohmann::json& a, const nlohmann::json& b, const std::string& a_says,
                                             const std::string& b_says);

}  // namespace alps::pipeline
