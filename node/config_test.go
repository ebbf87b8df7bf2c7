package node

import (
	"strings"
	"testing"
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
