package main

import (
	"strings"
	"testing"
)

// TestImportFlowKey: an exported task's flow_key goes into the import's
// create request, so a restore keeps its limits (and its id, which hashes
// by the key).
func TestImportFlowKey(t *testing.T) {
	line := `{"id":"{k1}a","callback_url":"http://x/","due_at":"2030-01-01T00:00:00Z","status":"scheduled","next_due_at":"2030-01-01T00:00:00Z","flow_key":"k1"}`
	if out := importRequestJSON(t, line); !strings.Contains(out, `"flow_key":"k1"`) || !strings.Contains(out, `"id":"{k1}a"`) {
		t.Errorf("import request %s lacks the flow key", out)
	}
}

// TestCreateFlowKeyFlag: --flow-key becomes the request's flow_key.
func TestCreateFlowKeyFlag(t *testing.T) {
	f := newFakeNode(t, constant(201, taskJSON))
	res := runCLI(t, f, "", nil, "create", "--url", cb, "--delay", "1s", "--flow-key", "tenant-7")
	if res.err != nil {
		t.Fatal(res.err)
	}
	assertJSON(t, f.onlyRequest(t).Body, `{"callback_url":"`+cb+`","delay_ms":1000,"flow_key":"tenant-7"}`)
}
