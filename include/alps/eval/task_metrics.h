#pragma once
// Aggregate metrics and their standard errors as lm-evaluation-harness 0.4.9 computes them:
//  - acc, acc_norm: the mean of the per-document 0/1 scores, stderr = sample standard deviation / sqrt(n)
//    (= sqrt(p (1 - p) / (n - 1)) for 0/1 scores);
//  - perplexity: exp(-mean per-document log-likelihood); its stderr is a bootstrap: `iters` resamples (with
//    replacement, n of n) in chunks of min(1000, iters), chunk i drawn by Python's random.Random(i).choices, and the
//    sample standard deviation of the resampled perplexities. Same draws as lm-eval's, so the same figure up to
//    the inputs' rounding.
#include <cstdint>
#include <vector>

namespace alps::eval {

/// sum(xs) / len(xs), summed left to right as Python does.
double py_mean(const std::vector<double>& xs);
/// sqrt(sum((x - mean)^2) / (n - 1)); needs n >= 2.
double sample_stddev(const std::vector<double>& xs);
/// sample_stddev / sqrt(n).
double mean_stderr(const std::vector<double>& xs);
/// exp(-py_mean(loglikelihoods)).
double perplexity_of(const std::vector<double>& loglikelihoods);
/// lm-eval's bootstrap_stderr(perplexity, loglikelihoods, iters) (see above); iters >= 1.
double bootstrap_perplexity_stderr(const std::vector<double>& loglikelihoods, int64_t iters);

}  // namespace alps::eval
