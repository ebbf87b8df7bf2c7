package node

import (
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
)

// TestConfigValidateName: a node needs a name its peers accept.
func TestConfigValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"", false},
		{"n1", true},
		{strings.Repeat("a", MaxNameBytes), true},
		{strings.Repeat("a", MaxNameBytes+1), false},
		{"n1,n2", false},
	} {
		c := DefaultConfig()
		c.Name = tc.name
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("Name of %d bytes: Validate() = %v, want ok %v", len(tc.name), err, tc.ok)
		}
	}
}

// TestConfigValidateRetention: 0 (forever) up to 10 years.
func TestConfigValidateRetention(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{{0, true}, {168 * time.Hour, true}, {87660 * time.Hour, true}, {-time.Second, false}, {87660*time.Hour + 1, false}} {
		c := DefaultConfig()
		c.InMemory = true
		c.Retention = tc.d
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("Retention %v: Validate() = %v, want ok %v", tc.d, err, tc.ok)
		}
	}
}

// TestConfigValidateBreaker: the node refuses a breaker configuration
// that does not make sense; zero fields and Off are fine.
func TestConfigValidateBreaker(t *testing.T) {
	for _, tc := range []struct {
		b  dispatch.BreakerConfig
		ok bool
	}{
		{dispatch.BreakerConfig{}, true},
		{dispatch.BreakerConfig{Off: true}, true},
		{dispatch.DefaultBreakerConfig(), true},
		{dispatch.BreakerConfig{FailureRatio: 2}, false},
		{dispatch.BreakerConfig{MinAttempts: -1}, false},
		{dispatch.BreakerConfig{Probe: time.Minute, ProbeMax: time.Second}, false},
	} {
		c := DefaultConfig()
		c.InMemory = true
		c.Breaker = tc.b
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("Breaker %+v: Validate() = %v, want ok %v", tc.b, err, tc.ok)
		}
	}
}
