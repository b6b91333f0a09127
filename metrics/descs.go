package metrics

import "github.com/prometheus/client_golang/prometheus"

// descs are the metrics a Collector exports.
type descs struct {
	rate, estimate, limit, inFlight, waiting, rtt *prometheus.Desc
	pauseReason, breaker, phase, ceiling          *prometheus.Desc
	fleetRate, fleetProcesses, fleetShared        *prometheus.Desc
	requests, responses, retries, pauseSeconds    *prometheus.Desc
	scopes, evicted, dropped, wait                *prometheus.Desc
	list                                          []*prometheus.Desc
}

const prefix = "colly_polite_"

func newDescs(constLabels prometheus.Labels) descs {
	var d descs
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		x := prometheus.NewDesc(prefix+name, help, labels, constLabels)
		d.list = append(d.list, x)
		return x
	}
	sc := "scope"
	d.rate = desc("pacing_requests_per_second", "Pacing rate in force (under every ceiling), in requests per second; summed over the scopes of \"other\".", sc)
	d.estimate = desc("capacity_estimate_requests_per_second", "The control law's estimate of the server's capacity, in requests per second (0 until measured); summed over the scopes of \"other\".", sc)
	d.limit = desc("concurrency_limit", "Concurrency limit; summed over the scopes of \"other\".", sc)
	d.inFlight = desc("in_flight_requests", "Requests sent and not yet answered.", sc)
	d.waiting = desc("waiting_requests", "Requests waiting politely for their scope.", sc)
	d.rtt = desc("rtt_seconds", "Smoothed round trip to the response headers; the mean over the scopes of \"other\" that have one.", sc)
	d.pauseReason = desc("pause_reason", "Scopes by why they are paused: retry-after, backoff, quota, breaker, blocked (parked), or none.", sc, "reason")
	d.breaker = desc("breaker_state", "Scopes by breaker state: closed, open, half-open.", sc, "state")
	d.phase = desc("phase", "Scopes by where the control law's rate search stands (slow-start, steady, probing).", sc, "phase")
	d.ceiling = desc("ceiling_requests_per_second", "The ceiling that binds the pacing rate (configured, crawl-delay, quota) and its value; absent when none binds.", sc, "ceiling")
	d.fleetRate = desc("fleet_rate_requests_per_second", "With a shared Store: the fleet's rate on the scope (all processes together), in requests per second; absent for \"other\" and without a Store.", sc)
	d.fleetProcesses = desc("fleet_processes", "With a shared Store: the processes that acquired on the scope lately, this one included.", sc)
	d.fleetShared = desc("fleet_shared", "With a shared Store: 1 while the store answers (the fleet's schedule, law and pauses in force), 0 while this process runs on its share.", sc)
	d.requests = desc("requests_total", "Requests recorded, by outcome class (success, neutral, throttled, blocked, overloaded, transport-failure, canceled).", sc, "class")
	d.responses = desc("responses_total", "Responses by status code (the less common codes under \"other\").", sc, "code")
	d.retries = desc("retries_total", "Attempts after the first of a request.", sc)
	d.pauseSeconds = desc("pause_seconds_total", "Time spent paused (Retry-After, backoff, quota, breaker).", sc)
	d.scopes = desc("scopes", "Live scopes.")
	d.evicted = desc("scopes_evicted_total", "Scopes evicted after being idle.")
	d.dropped = desc("events_dropped_total", "Events dropped because nobody read the stream in time.")
	d.wait = desc("wait_seconds", "Polite wait of each granted request, from asking its scope for a slot to getting one.")
	return d
}
