// Package adaptive makes a Colly collector polite with one line:
//
//	c := colly.NewCollector()
//	ctrl := adaptive.Attach(c) // a *polite.Controller
//
// Attach wraps the collector's transport with a polite.Controller (robots.txt
// on), and keeps wrapping it whatever transport, proxy or client is set on
// the collector later. AttachTo shares one controller between collectors,
// ControllerOf finds a collector's, and FromLimitRule converts a
// colly.LimitRule into a polite.Rule. Everything else (configuration,
// snapshots, events) is package polite's. This is the only package of the
// module that imports Colly.
package adaptive
