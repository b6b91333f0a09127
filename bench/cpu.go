package main

import (
	"os"
	"strconv"
	"strings"
)

// A real-time benchmark on a small shared machine measures whatever else
// runs beside it. cpuSample reads, from Linux's /proc, the CPU time every
// process has used and the CPU time this one has used, so that a cell can
// say how much of the machine others took while it ran: information, since
// every run counts. Elsewhere ok is false and the figures are left out.
type cpuSample struct {
	total, busy, self uint64 // clock ticks
	ok                bool
}

func readCPU() cpuSample {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return cpuSample{}
	}
	var s cpuSample
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cpuSample{}
		}
		if i >= 8 { // guest time is already counted in user
			break
		}
		s.total += n
		if i != 3 && i != 4 { // idle, iowait
			s.busy += n
		}
	}
	self, ok := procTicks("self")
	if !ok {
		return cpuSample{}
	}
	s.self, s.ok = self, true
	return s
}

// clockTicks is the unit of /proc's CPU times per second (USER_HZ, 100 on
// every Linux the bench runs on).
const clockTicks = 100

// procTicks is the CPU time (user and system) that process pid ("self"
// for this one) has used, in clock ticks, from /proc/PID/stat.
func procTicks(pid string) (uint64, bool) {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, false
	}
	// the command name, in parentheses, may hold spaces: count after it
	_, rest, found := strings.Cut(string(stat), ") ")
	g := strings.Fields(rest)
	if !found || len(g) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseUint(g[11], 10, 64)
	stime, err2 := strconv.ParseUint(g[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return utime + stime, true
}

// foreign is the share of the machine's CPU time that other processes used
// between a and b, in percent; ok is false when it cannot be known.
func foreign(a, b cpuSample) (pct float64, ok bool) {
	if !a.ok || !b.ok || b.total <= a.total {
		return 0, false
	}
	other := float64(b.busy-a.busy) - float64(b.self-a.self)
	return max(other, 0) / float64(b.total-a.total) * 100, true
}
