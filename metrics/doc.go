// Package metrics exports an polite.Controller to Prometheus:
//
//	reg.MustRegister(metrics.New(ctrl))
//
// A Collector reads the controller's Report when scraped (nothing is done
// per request) and keeps label cardinality bounded: the first scopes to
// reach a traffic threshold get a label of their own, the rest are summed
// under scope="other". The module's docs/observe.md lists the metrics and
// how to read them.
package metrics
