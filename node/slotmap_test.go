package node

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/chime-scheduler/chime/node/httpapi"
)

// TestSlotMapStandalone: a standalone node's GET /v1/cluster/slots is one
// range owned by itself at version 1, the same version its answers carry
// and /v1/cluster reports.
func TestSlotMapStandalone(t *testing.T) {
	tn := startNode(t, nil)
	var m httpapi.SlotMap
	if code := tn.do(t, "GET", "/v1/cluster/slots", nil, &m); code != http.StatusOK {
		t.Fatalf("GET /v1/cluster/slots = %d", code)
	}
	want := httpapi.SlotMap{Version: "1", Ranges: []httpapi.SlotRange{{Start: 0, End: 16383, Owner: tn.cfg.Name, HTTPAddr: tn.cfg.HTTPAddr}}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("slot map = %+v, want %+v", m, want)
	}
	var c httpapi.Cluster
	tn.do(t, "GET", "/v1/cluster", nil, &c)
	if c.TableVersion != 1 {
		t.Errorf("/v1/cluster table_version = %d, want 1", c.TableVersion)
	}
	resp, err := tn.client().Get(tn.url("/v1/tasks/nope"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v := resp.Header.Get("X-Chime-Table-Version"); v != "1" {
		t.Errorf("X-Chime-Table-Version = %q, want 1", v)
	}
}
