package metrics_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/colly-polite/polite"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/colly-polite/polite/metrics"
)

// One line registers a controller's metrics. Scopes get a label of their
// own once they reach the traffic threshold (here 2 requests); the others
// are summed under scope="other".
func ExampleNew() {
	ctrl, _ := polite.New(polite.Config{Default: polite.Rule{InitialRate: 1000}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.New(ctrl, metrics.WithMinRequests(2)))

	for _, u := range []string{"http://a.example/", "http://a.example/x", "http://a.example/y", "http://b.example/"} {
		req, _ := http.NewRequest("GET", u, nil)
		p, _ := ctrl.Acquire(context.Background(), req)
		code := 200
		if u == "http://a.example/y" {
			code = 404
		}
		p.Record(&http.Response{StatusCode: code, Header: http.Header{}}, nil)
	}

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "colly_polite_responses_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			fmt.Print(mf.GetName(), "{")
			for i, l := range m.GetLabel() {
				if i > 0 {
					fmt.Print(",")
				}
				fmt.Printf("%s=%q", l.GetName(), l.GetValue())
			}
			fmt.Println("}", m.GetCounter().GetValue())
		}
	}
	// Output:
	// colly_polite_responses_total{code="200",scope="a.example"} 2
	// colly_polite_responses_total{code="200",scope="other"} 1
	// colly_polite_responses_total{code="404",scope="a.example"} 1
}
