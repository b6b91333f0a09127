package classify

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestClassString(t *testing.T) {
	tests := []struct {
		c      Class
		name   string
		signal bool
	}{
		{Success, "success", false},
		{Neutral, "neutral", false},
		{Throttled, "throttled", true},
		{Blocked, "blocked", false},
		{Overloaded, "overloaded", true},
		{TransportFailure, "transport-failure", true},
		{Canceled, "canceled", false},
		{Class(7), "Class(7)", false},
		{Class(255), "Class(255)", false},
	}
	for _, tt := range tests {
		if got := tt.c.String(); got != tt.name {
			t.Errorf("Class(%d).String() = %q, want %q", uint8(tt.c), got, tt.name)
		}
		if got := tt.c.Signal(); got != tt.signal {
			t.Errorf("%v.Signal() = %v, want %v", tt.c, got, tt.signal)
		}
	}
}

func TestClassText(t *testing.T) {
	for c := Success; c <= Canceled; c++ {
		b, err := c.MarshalText()
		if err != nil {
			t.Fatalf("%v.MarshalText: %v", c, err)
		}
		var back Class
		if err := back.UnmarshalText(b); err != nil || back != c {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", b, back, err, c)
		}
	}
	if _, err := Class(9).MarshalText(); !errors.Is(err, ErrUnknownClass) {
		t.Errorf("Class(9).MarshalText error = %v, want ErrUnknownClass", err)
	}
	var c Class
	err := c.UnmarshalText([]byte("Throttled"))
	if !errors.Is(err, ErrUnknownClass) {
		t.Errorf("UnmarshalText(Throttled) error = %v, want ErrUnknownClass", err)
	}
	if err != nil && err.Error()[:10] != "classify: " {
		t.Errorf("error %q lacks the package prefix", err)
	}

	// Classes read well as JSON map keys (per-class counters).
	b, err := json.Marshal(map[Class]int{Throttled: 3, Success: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"success":10,"throttled":3}`; got != want {
		t.Errorf("json = %s, want %s", got, want)
	}
}
