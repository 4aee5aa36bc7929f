/*
 * limiter_config.c - the limiter's configuration (limiter.h): its
 * defaults, with their sources beside the fields in limiter.h, the check
 * every field passes before rx_limiter_init copies it, and the names of
 * the three algorithms. Apart from limiter.c, which keeps the data path
 * and the control loop: neither reads anything here but the copy that
 * rx_limiter_init keeps.
 */
#include <string.h>

#include "resilix/error.h"
#include "resilix/limiter.h"

static const char *const algorithm_names[RX_LIMITER_ALGORITHM_COUNT] = {
    [RX_LIMITER_VEGAS] = "vegas",
    [RX_LIMITER_GRADIENT2] = "gradient2",
    [RX_LIMITER_AIMD] = "aimd",
};

const char *rx_limiter_algorithm_name(enum rx_limiter_algorithm a)
{
	if ((unsigned)a >= RX_LIMITER_ALGORITHM_COUNT)
		return "unknown";
	return algorithm_names[a];
}

int rx_limiter_algorithm_parse(const char *name, enum rx_limiter_algorithm *out)
{
	if (name == NULL || out == NULL)
		return RX_EINVAL;
	for (unsigned i = 0; i < RX_LIMITER_ALGORITHM_COUNT; i++) {
		if (strcmp(name, algorithm_names[i]) == 0) {
			*out = (enum rx_limiter_algorithm)i;
			return RX_OK;
		}
	}
	return RX_EINVAL;
}

void rx_limiter_config_default(struct rx_limiter_config *cfg)
{
	cfg->algorithm = RX_LIMITER_VEGAS;
	cfg->min_limit = 4;
	cfg->max_limit = 1000;
	cfg->initial_limit = 20;
	cfg->quantile = 0.9;
	cfg->window_min_samples = 50;
	cfg->window_min_ms = 100;
	cfg->window_max_ms = 30000;
	cfg->stale_ms = 30000;
	cfg->growth_tether = 2.0;
	cfg->drop_backoff = 0.9;
	cfg->rtt_tolerance = 1.5;
	cfg->probe_multiplier = 30;
	cfg->gradient2_long_window = 600;
	cfg->gradient2_smoothing = 0.2;
	cfg->gradient2_queue_size = 4;
	cfg->learn_first = true;
	cfg->max_binds_learning = true;
	cfg->queue_floor_ms = 20;
}

/* Fail with a static sentence. */
static int invalid(const char **why, const char *sentence)
{
	if (why != NULL)
		*why = sentence;
	return RX_EINVAL;
}

int rx_limiter_config_check(const struct rx_limiter_config *cfg,
			    const char **why)
{
	if (cfg == NULL)
		return invalid(why, "limiter configuration is missing");
	if ((unsigned)cfg->algorithm >= RX_LIMITER_ALGORITHM_COUNT)
		return invalid(why,
			       "algorithm must be vegas, gradient2 or aimd");
	if (cfg->max_limit < 1 || cfg->max_limit > 1000000)
		return invalid(why, "max_limit must be in 1..1000000");
	if (cfg->min_limit < 1 || cfg->min_limit > cfg->max_limit)
		return invalid(why, "min_limit must be in 1..max_limit");
	if (cfg->initial_limit < cfg->min_limit ||
	    cfg->initial_limit > cfg->max_limit)
		return invalid(why,
			       "initial_limit must be in min_limit..max_limit");
	/* Every double test is written so that NaN fails it. */
	if (!(cfg->quantile > 0.0 && cfg->quantile < 1.0))
		return invalid(why, "quantile must be in (0, 1), exclusive");
	if (cfg->window_min_samples < 1 || cfg->window_min_samples > 1000000)
		return invalid(why, "window_min_samples must be in 1..1000000");
	if (cfg->window_min_ms < 1 || cfg->window_min_ms > 3600000)
		return invalid(why, "window_min_ms must be in 1..3600000 ms");
	if (cfg->window_max_ms < cfg->window_min_ms ||
	    cfg->window_max_ms > 3600000)
		return invalid(why, "window_max_ms must be in "
				    "window_min_ms..3600000 ms");
	if (cfg->stale_ms < 1 || cfg->stale_ms > 86400000)
		return invalid(why, "stale_ms must be in 1..86400000 ms");
	if (!(cfg->growth_tether >= 1.0 && cfg->growth_tether <= 100.0))
		return invalid(why, "growth_tether must be in [1, 100]");
	if (!(cfg->drop_backoff >= 0.5 && cfg->drop_backoff < 1.0))
		return invalid(why, "drop_backoff must be in [0.5, 1)");
	if (!(cfg->rtt_tolerance >= 1.0 && cfg->rtt_tolerance <= 10.0))
		return invalid(why, "rtt_tolerance must be in [1, 10]");
	if (cfg->probe_multiplier < 1 || cfg->probe_multiplier > 1000000)
		return invalid(why, "probe_multiplier must be in 1..1000000");
	if (cfg->gradient2_long_window < 1 ||
	    cfg->gradient2_long_window > 1000000)
		return invalid(why,
			       "gradient2_long_window must be in 1..1000000");
	if (!(cfg->gradient2_smoothing > 0.0 &&
	      cfg->gradient2_smoothing <= 1.0))
		return invalid(why, "gradient2_smoothing must be in (0, 1]");
	if (cfg->gradient2_queue_size > 1000)
		return invalid(why, "gradient2_queue_size must be in 0..1000");
	if (cfg->queue_floor_ms > 3600000)
		return invalid(why, "queue_floor_ms must be in 0..3600000 ms");
	return RX_OK;
}
