"""When alps's zero-shot metrics count as equal to lm-evaluation-harness's: every float metric lm-eval reports
within 1e-9 (relative above 1), its perplexities aside. Accuracies are ratios of document counts, so two tools that
choose the same answers agree to the last bit; a perplexity is the exponential of a sum of log-likelihoods, which
two tools' floating-point sums leave equal only to rounding."""


def metrics_equal(alps_metrics, lmeval_metrics):
    return all(abs(alps_metrics[k] - v) <= 1e-9 * max(1, abs(v)) for k, v in lmeval_metrics.items()
               if isinstance(v, float) and "perplexity" not in k)
