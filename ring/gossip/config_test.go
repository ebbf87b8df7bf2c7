package gossip_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/ring/gossip/memnet"
	"github.com/hashicorp/memberlist"
)

// TestDefaultLANConfigMatchesMemberlist keeps the restated LAN defaults in
// step with memberlist's on upgrades.
func TestDefaultLANConfigMatchesMemberlist(t *testing.T) {
	ml := memberlist.DefaultLANConfig()
	c := gossip.DefaultLANConfig()
	tests := []struct {
		name      string
		got, want any
	}{
		{"BindAddr", c.BindAddr, ml.BindAddr},
		{"BindPort", c.BindPort, ml.BindPort},
		{"ProbeInterval", c.ProbeInterval, ml.ProbeInterval},
		{"ProbeTimeout", c.ProbeTimeout, ml.ProbeTimeout},
		{"IndirectChecks", c.IndirectChecks, ml.IndirectChecks},
		{"SuspicionMult", c.SuspicionMult, ml.SuspicionMult},
		{"SuspicionMaxTimeoutMult", c.SuspicionMaxTimeoutMult, ml.SuspicionMaxTimeoutMult},
		{"AwarenessMaxMultiplier", c.AwarenessMaxMultiplier, ml.AwarenessMaxMultiplier},
		{"GossipInterval", c.GossipInterval, ml.GossipInterval},
		{"GossipNodes", c.GossipNodes, ml.GossipNodes},
		{"GossipToTheDeadTime", c.GossipToTheDeadTime, ml.GossipToTheDeadTime},
		{"RetransmitMult", c.RetransmitMult, ml.RetransmitMult},
		{"PushPullInterval", c.PushPullInterval, ml.PushPullInterval},
		{"TCPTimeout", c.TCPTimeout, ml.TCPTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("DefaultLANConfig().%s = %v, want memberlist's %v", tt.name, tt.got, tt.want)
			}
		})
	}
}

func TestDefaultLocalConfig(t *testing.T) {
	lan, local := gossip.DefaultLANConfig(), gossip.DefaultLocalConfig()
	if local.ProbeInterval != 500*time.Millisecond || local.ProbeTimeout != 200*time.Millisecond ||
		local.GossipInterval != 100*time.Millisecond || local.BindAddr != "127.0.0.1" || local.SuspicionMult != 3 {
		t.Errorf("DefaultLocalConfig() = %+v, want probe 500ms/200ms, gossip 100ms, suspicion ×3 on 127.0.0.1", local)
	}
	// Everything else is the LAN profile.
	local.ProbeInterval, local.ProbeTimeout, local.GossipInterval = lan.ProbeInterval, lan.ProbeTimeout, lan.GossipInterval
	local.BindAddr, local.ReconnectInterval, local.SuspicionMult = lan.BindAddr, lan.ReconnectInterval, lan.SuspicionMult
	if local.PushPullInterval != lan.PushPullInterval ||
		local.TCPTimeout != lan.TCPTimeout || local.EventBuffer != lan.EventBuffer || local.LeaveWait != lan.LeaveWait {
		t.Errorf("DefaultLocalConfig differs from LAN beyond the documented fields: %+v vs %+v", local, lan)
	}
	for _, c := range []gossip.Config{gossip.DefaultLANConfig(), gossip.DefaultLocalConfig()} {
		c.Name = "n1"
		if err := c.Validate(); err != nil {
			t.Errorf("defaults with a Name: Validate() = %v", err)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *gossip.Config)
		want   []string // substrings of the joined error; nil = valid
	}{
		{"valid", func(*gossip.Config) {}, nil},
		{"no name", func(c *gossip.Config) { c.Name = "" }, []string{"Name is empty"}},
		{"bind addr not an IP", func(c *gossip.Config) { c.BindAddr = "localhost" }, []string{"BindAddr"}},
		{"bind addr ignored with a transport", func(c *gossip.Config) {
			c.BindAddr = ""
			c.Transport = memnet.New(1).Transport("127.0.0.1:1")
		}, nil},
		{"ports", func(c *gossip.Config) { c.BindPort, c.AdvertisePort = -1, 70000 }, []string{"BindPort", "AdvertisePort"}},
		{"advertise addr", func(c *gossip.Config) { c.AdvertiseAddr = "host" }, []string{"AdvertiseAddr"}},
		{"key length", func(c *gossip.Config) { c.SecretKey = make([]byte, 16) }, []string{"SecretKey is 16 bytes"}},
		{"label length", func(c *gossip.Config) { c.Label = strings.Repeat("l", 256) }, []string{"Label is 256 bytes"}},
		{"probe timeout above interval", func(c *gossip.Config) { c.ProbeTimeout = c.ProbeInterval }, []string{"ProbeTimeout"}},
		{"all problems at once", func(c *gossip.Config) {
			c.Name, c.ProbeInterval, c.GossipInterval, c.GossipNodes = "", 0, 0, 0
			c.SuspicionMult, c.RetransmitMult, c.TCPTimeout, c.EventBuffer = 0, 0, 0, 0
			c.PushPullInterval, c.ReconnectInterval, c.LeaveWait, c.UpdateTimeout = -1, -1, -1, -1
		}, []string{"Name", "ProbeInterval", "GossipInterval", "GossipNodes", "SuspicionMult", "RetransmitMult",
			"TCPTimeout", "EventBuffer", "PushPullInterval", "ReconnectInterval", "LeaveWait", "UpdateTimeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := gossip.DefaultLANConfig()
			c.Name = "n1"
			tt.mutate(&c)
			err := c.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors mentioning %v", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to mention %q", err, w)
				}
			}
			if _, nerr := gossip.New(c); nerr == nil {
				t.Error("New accepted an invalid config")
			}
		})
	}
}

func TestParseSecretKey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	std := base64.StdEncoding.EncodeToString(key)
	tests := []struct {
		name    string
		in      string
		want    []byte
		wantErr bool
	}{
		{"empty means no key", "", nil, false},
		{"standard", std, key, false},
		{"unpadded with spaces", " " + strings.TrimRight(std, "=") + "\n", key, false},
		{"not base64", "not base64!", nil, true},
		{"16 bytes", base64.StdEncoding.EncodeToString(key[:16]), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := gossip.ParseSecretKey(tt.in)
			if (err != nil) != tt.wantErr || string(got) != string(tt.want) {
				t.Errorf("ParseSecretKey(%q) = %x, %v; want %x, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestNewReturnsValidationErrors(t *testing.T) {
	c := gossip.DefaultLocalConfig()
	_, err := gossip.New(c)
	if err == nil || !strings.Contains(err.Error(), "Name is empty") {
		t.Errorf("New(no name) = %v, want Name error", err)
	}
	var joined interface{ Unwrap() []error }
	c.SecretKey = []byte("short")
	if _, err := gossip.New(c); !errors.As(err, &joined) || len(joined.Unwrap()) != 2 {
		t.Errorf("New(2 problems) = %v, want errors.Join of 2", err)
	}
}

// TestUntilBeat: the wait until the next multiple of the period since the
// Unix epoch, a whole period from a multiple, none without a period.
func TestUntilBeat(t *testing.T) {
	ms := time.Millisecond
	at := func(d time.Duration) time.Time { return time.Unix(1_800_000_000, 0).Add(d) }
	for _, c := range []struct {
		now   time.Time
		every time.Duration
		want  time.Duration
	}{
		{at(37 * ms), 100 * ms, 63 * ms},
		{at(0), 100 * ms, 100 * ms},
		{at(199 * ms), 200 * ms, ms},
		{at(1234 * ms), 500 * ms, 266 * ms},
		{at(37 * ms), 0, 0},
	} {
		if got := gossip.UntilBeat(c.now, c.every); got != c.want {
			t.Errorf("UntilBeat(%v, %v) = %v, want %v", c.now, c.every, got, c.want)
		}
	}
}
