#pragma once
// The structured methods' factories and option tables, one per file in this folder; registry.cc lists them.
#include <memory>
#include <nlohmann/json.hpp>

#include "alps/prune/structured.h"

namespace alps::prune {

std::unique_ptr<UnitMethod> make_unit_score(const nlohmann::json& options);
nlohmann::json score_option_list();
std::unique_ptr<UnitMethod> make_unit_obs(const nlohmann::json& options);
nlohmann::json unit_obs_option_list();
std::unique_ptr<UnitMethod> make_osscar(const nlohmann::json& options);
nlohmann::json osscar_option_list();

}  // namespace alps::prune
