// Package tokenbucket provides per-key token buckets that can be drained.
package tokenbucket
