package gossip

import (
	"log/slog"
	"testing"
)

// Outgoing gossip is not compressed: memberlist's LZW allocated tens of KiB
// per ping, most of an idle node's probe cost (issue 17).
func TestMemberlistConfigNoCompression(t *testing.T) {
	for name, c := range map[string]Config{"LAN": DefaultLANConfig(), "local": DefaultLocalConfig()} {
		if mc := c.memberlistConfig(nil, nil, slog.Default()); mc.EnableCompression {
			t.Errorf("%s: memberlist EnableCompression = true, want false", name)
		}
	}
}
