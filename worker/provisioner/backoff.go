package provisioner

import "time"

// backoff returns how long to wait before the retry that follows failed attempt number
// attempts (1 for the first failure), given r drawn uniformly from [0, 1):
//
//	ceiling = min(max, base * 2^(attempts-1))
//	delay   = max(base/2, r * ceiling)
//
// This is exponential backoff with full jitter, which spreads the retries of many resources
// that failed together (e.g. while a host was down), with a floor of base/2 so that an
// unlucky draw does not retry at once.
func backoff(base, max time.Duration, attempts int, r float64) time.Duration {
	ceiling := base
	for i := 1; i < attempts && ceiling < max; i++ {
		ceiling *= 2
	}
	if ceiling > max {
		ceiling = max
	}
	delay := time.Duration(r * float64(ceiling))
	if floor := base / 2; delay < floor {
		delay = floor
	}
	return delay
}
