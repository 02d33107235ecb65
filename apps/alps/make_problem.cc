// alps make-problem: write a synthetic layer problem (outlier features, non-zero means, heavy-tailed weights).
#include <spdlog/spdlog.h>

#include "alps/prune/problem.h"
#include "alps/prune/synthetic.h"
#include "commands.h"

namespace alps::cli {

namespace {
struct MakeProblemArgs {
  CommonOptions common;
  std::string out, name = "synthetic";
  prune::SyntheticOptions synthetic;
  bool overwrite = false;
};

int run_make_problem(const MakeProblemArgs& a) {
  check_output_file("--out", a.out, a.overwrite);
  prune::LayerProblem p = prune::make_synthetic_problem(a.synthetic);
  p.name = a.name;
  prune::save_problem(a.out, p, a.overwrite ? io::ExistingFile::kReplace : io::ExistingFile::kKeep);
  if (a.common.json) {
    print_json({{"out", a.out},
                {"rows", p.rows()},
                {"cols", p.cols()},
                {"tokens", p.tokens},
                {"seed", a.synthetic.seed},
                {"name", p.name}});
  } else {
    spdlog::info("wrote {} [{} x {}], T = {}, seed {}", a.out, p.rows(), p.cols(), p.tokens, a.synthetic.seed);
  }
  return 0;
}
}  // namespace

void add_make_problem_command(CLI::App& app, Runner& runner) {
  auto args = std::make_shared<MakeProblemArgs>();
  auto& o = args->synthetic;
  CLI::App* cmd = app.add_subcommand("make-problem", "Write a synthetic layer problem file");
  cmd->add_option("--out", args->out, "Output .safetensors")->required();
  add_overwrite_flag(cmd, args->overwrite, "--out file");
  cmd->add_option("--rows", o.out, "Output features (rows of W)")->required()->check(int_at_least(1));
  cmd->add_option("--cols", o.in, "Input features (columns of W)")->required()->check(int_at_least(1));
  cmd->add_option("--tokens", o.tokens, "Calibration tokens T")->required()->check(int_at_least(1));
  cmd->add_option("--seed", o.seed, "Random seed")->capture_default_str();
  cmd->add_option("--outlier-fraction", o.outlier_fraction, "Fraction of outlier input features, in [0, 1]")
      ->capture_default_str()
      ->check(real_range(0, 1));
  cmd->add_option("--outlier-scale", o.outlier_scale, "How much larger outlier features are (> 0)")
      ->capture_default_str()
      ->check(positive_real());
  cmd->add_option("--name", args->name, "Layer name stored in the file")->capture_default_str();
  add_common_flags(cmd, args->common, /*with_device=*/false);
  cmd->callback([args, &runner] { runner = [args] { return run_make_problem(*args); }; });
}

}  // namespace alps::cli
