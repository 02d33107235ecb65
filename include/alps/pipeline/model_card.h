#pragma once
// The model card (README.md) of a pruned checkpoint: the input's card describes the dense model, so alps adds a note
// at its top (after the YAML metadata block a Hugging Face card starts with) saying that the weights were pruned, by
// what, and that the run's report is alps-report.json beside it.
#include <filesystem>
#include <string>

#include "alps/report/report.h"

namespace alps::pipeline {

inline constexpr const char* kModelCardFile = "README.md";

/// The card `text` with the note for `report` in it, in place of the note of an earlier alps run (a pruned model
/// pruned again), or a card holding only the note when `text` is empty.
std::string model_card_with_note(const std::string& text, const report::RunReport& report);
/// Rewrites (or writes) `dir`/README.md with model_card_with_note.
void note_pruning_in_model_card(const std::filesystem::path& dir, const report::RunReport& report);

}  // namespace alps::pipeline
